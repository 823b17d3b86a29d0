//! DISTINCT projections whose nodes were made distinct before the projection: when every
//! item is a node or a property of a node that is an item too, the rows are distinct
//! already and the plan has no Distinct; otherwise (`RETURN DISTINCT n.v`, two nodes may
//! share the value) it keeps one. Each answer is checked against the same projection
//! without DISTINCT, deduplicated here.

mod common;

use common::{rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;
use std::collections::BTreeSet;

fn graph() -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&dir.path().join("db"), OpenMode::Mapped, true).unwrap();
    run(
        &mut s,
        "UNWIND range(0, 39) AS i CREATE (:N {id: i, v: i % 3})",
    )
    .unwrap();
    // Fans that overlap: many paths of one and two hops reach the same nodes.
    run(
        &mut s,
        "MATCH (a:N), (b:N) WHERE b.id = (a.id * 7 + 3) % 40 OR b.id = (a.id * 11 + 5) % 40 \
         CREATE (a)-[:R]->(b)",
    )
    .unwrap();
    (dir, s)
}

fn plan(s: &mut Session, q: &str) -> String {
    run(s, &format!("EXPLAIN {q}")).unwrap().plan.unwrap()
}

/// The rows of `q` as a set of texts, and whether `q` returned each once.
fn answer(s: &mut Session, q: &str) -> (BTreeSet<String>, bool) {
    let r: Vec<String> = rows(s, q).iter().map(|r| format!("{r:?}")).collect();
    let set: BTreeSet<String> = r.iter().cloned().collect();
    let once = set.len() == r.len();
    (set, once)
}

#[test]
fn distinct_rows_of_distinct_nodes_need_no_distinct() {
    let (_d, mut s) = graph();
    let cases = [
        // (match, items, whether the plan can drop the Distinct)
        (
            "MATCH (s:N)-[*1..2]->(n:N) WHERE s.id IN [0, 1, 2]",
            "n.v, n",
            true,
        ),
        (
            "MATCH (s:N)-[*1..2]->(n:N) WHERE s.id IN [0, 1, 2]",
            "n",
            true,
        ),
        (
            "MATCH (s:N)-[*1..2]->(n:N) WHERE s.id IN [0, 1, 2]",
            "n.v",
            false,
        ),
        (
            "MATCH (s:N)-->()-->(n:N) WHERE s.id < 5",
            "n.id, n.v, n",
            true,
        ),
        ("MATCH (s:N)-->(n:N) WHERE s.id < 9", "s, n.v, n", true),
        ("MATCH (s:N)-->(n:N) WHERE s.id < 9", "s.v, n", false),
        ("MATCH (s:N)-->(n:N) WHERE s.id < 9", "n.v + 1, n", false),
    ];
    for (m, items, dropped) in cases {
        let q = format!("{m} RETURN DISTINCT {items}");
        let p = plan(&mut s, &q);
        assert_eq!(
            !p.lines().any(|l| l.trim() == "Distinct"),
            dropped,
            "{q}:\n{p}"
        );
        let (got, once) = answer(&mut s, &q);
        assert!(once, "{q}: a row came twice");
        let (want, _) = answer(&mut s, &format!("{m} RETURN {items}"));
        assert_eq!(got, want, "{q}");
        assert!(!got.is_empty(), "{q}: no rows");
    }
    // The same after writes: a node's property changed, a node and relationships made.
    run(&mut s, "MATCH (n:N {id: 3}) SET n.v = 7").unwrap();
    run(
        &mut s,
        "MATCH (a:N {id: 0}), (b:N {id: 3}) CREATE (a)-[:R]->(b)-[:R]->(:N {id: 40, v: 7})",
    )
    .unwrap();
    let m = "MATCH (s:N)-[*1..2]->(n:N) WHERE s.id IN [0, 1, 2]";
    let (got, once) = answer(&mut s, &format!("{m} RETURN DISTINCT n.v, n"));
    assert!(once);
    let (want, _) = answer(&mut s, &format!("{m} RETURN n.v, n"));
    assert_eq!(got, want);
    assert!(got.iter().any(|r| r.contains("Int(7)")), "{got:?}");
    let vs = rows(&mut s, &format!("{m} RETURN DISTINCT n.v"));
    let distinct: BTreeSet<String> = vs.iter().map(|r| format!("{r:?}")).collect();
    assert_eq!(vs.len(), distinct.len());
    assert!(vs.iter().any(|r| r[0] == Value::Int(7)));
}
