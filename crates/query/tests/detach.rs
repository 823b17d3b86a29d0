//! `DETACH DELETE` of imported nodes writes one delta record a node, not one a
//! relationship: a segment relationship with a deleted end is deleted with it. Checked
//! on an imported graph with a hub, multi-edges, self-loops and relationship
//! properties, with relationships created beside the imported ones (two types): every
//! relationship read both ways, counted by a scan and by SHOW STORAGE INFO, the
//! statement's counters, a property of a deleted relationship, a plain DELETE refused,
//! then the same after a checkpoint (which marks them in the deletion bitmaps) and a
//! reopen.

mod common;

use common::{ints, run, sorted, storage_info};
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::Session;
use quiver_storage::manifest::IdType;
use quiver_storage::OpenMode;
use std::fmt::Write;

const N: i64 = 3_000;

/// Every relationship as (start id, end id, type, w), read going out and coming in
/// (which must agree), sorted.
fn all_rels(s: &mut Session, ctx: &str) -> Vec<String> {
    let out = sorted(s, "MATCH (a)-[r]->(b) RETURN a.id, b.id, type(r), r.w");
    let inc = sorted(s, "MATCH (b)<-[r]-(a) RETURN a.id, b.id, type(r), r.w");
    assert_eq!(out, inc, "{ctx}: out and in disagree");
    assert_eq!(
        storage_info(s, "relationships"),
        out.len() as i64,
        "{ctx}: SHOW STORAGE INFO"
    );
    assert_eq!(
        ints(s, "MATCH ()-[r:R]->() RETURN count(r)")[0]
            + ints(s, "MATCH ()-[r:S]->() RETURN count(r)")[0],
        out.len() as i64,
        "{ctx}: counts by type"
    );
    out
}

#[test]
fn detach_delete_of_imported_nodes_takes_their_relationships() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = String::from("id:ID,a:int\n");
    let mut rels = String::from(":START_ID,:END_ID,w:int\n");
    let mut w = 0;
    let mut rel = |a: i64, b: i64| {
        writeln!(rels, "{a},{b},{w}").unwrap();
        w += 1;
    };
    for i in 0..N {
        writeln!(nodes, "{i},{}", i % 10).unwrap();
        rel(i, (i + 1) % N);
        if i % 3 == 0 {
            rel(0, i); // the hub (and a self-loop at 0)
        }
        if i % 7 == 0 {
            rel(i, i); // a self-loop
        }
        if i % 5 == 0 {
            rel(i, (i + 2) % N); // two parallel relationships
            rel(i, (i + 2) % N);
        }
    }
    std::fs::write(dir.path().join("n.csv"), nodes).unwrap();
    std::fs::write(dir.path().join("r.csv"), rels).unwrap();
    let db = dir.path().join("g.qdb");
    let mut cfg = ImportConfig::new(&db);
    cfg.nodes
        .push(InputGroup::parse(&format!("N={}", dir.path().join("n.csv").display())).unwrap());
    cfg.relationships
        .push(InputGroup::parse(&format!("R={}", dir.path().join("r.csv").display())).unwrap());
    cfg.id_type = IdType::Integer;
    cfg.threads = 2;
    import(&cfg, &NoProgress).unwrap();

    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    // Created relationships at nodes that will be deleted, of the imported type and a
    // new one.
    run(
        &mut s,
        "MATCH (a:N), (b:N) WHERE a.id % 11 = 0 AND b.id = a.id + 4 CREATE (a)-[:R {w: -1}]->(b), (b)-[:S {w: -2}]->(a)",
    )
    .unwrap();
    let before = all_rels(&mut s, "before");
    let dead = |id: i64| id % 4 == 0;
    let expected: Vec<String> = before
        .iter()
        .filter(|r| {
            let f: Vec<i64> = r
                .trim_matches(|c| c == '[' || c == ']')
                .split(", ")
                .take(2)
                .map(|x| {
                    x.trim_start_matches("Int(")
                        .trim_end_matches(')')
                        .parse()
                        .unwrap()
                })
                .collect();
            !dead(f[0]) && !dead(f[1])
        })
        .cloned()
        .collect();
    assert!(expected.len() < before.len() / 2, "the hub takes many");

    // A plain DELETE of a node with imported relationships is refused.
    let e = run(&mut s, "MATCH (n:N {id: 8}) DELETE n").unwrap_err();
    assert!(e.to_string().contains("DETACH DELETE"), "{e}");

    let changes0 = storage_info(&mut s, "delta_changes");
    let sum = run(&mut s, "MATCH (n:N) WHERE n.id % 4 = 0 DETACH DELETE n").unwrap();
    assert_eq!(sum.counters.nodes_deleted, (N / 4) as u64);
    assert_eq!(
        sum.counters.relationships_deleted,
        (before.len() - expected.len()) as u64
    );
    // The imported ones weigh on the automatic checkpoint as their records would (an
    // edge between two deleted nodes counts at both).
    let dead = s.store().snapshot().delta.dead_rels;
    let imported = sum.counters.relationships_deleted - 2 * (N / 11 + 1) as u64;
    assert!(
        dead >= imported && dead <= 2 * sum.counters.relationships_deleted,
        "{dead} for {imported}"
    );
    // One record a node, one a created relationship (not one an imported one).
    let records = storage_info(&mut s, "delta_changes") - changes0;
    assert!(
        records < (N / 4) as i64 + 2 * (N / 11 + 1),
        "{records} records for {} nodes",
        N / 4
    );

    assert_eq!(all_rels(&mut s, "with the delta"), expected);
    // A relationship bound before its end was deleted cannot be read (and the
    // statement that tried rolls back).
    let e = run(
        &mut s,
        "MATCH (n:N {id: 5})-[r:R]->(m:N {id: 6}) DETACH DELETE m RETURN r.w",
    )
    .unwrap_err();
    assert!(e.to_string().contains("deleted"), "{e}");
    assert_eq!(all_rels(&mut s, "after the failed statement"), expected);

    // Beside another commit (the deleting transaction's commit then replays onto a
    // newer head): the relationships it saw die with the node, no conflict.
    let mut b = Session::on(s.store().clone());
    run(&mut b, "BEGIN").unwrap();
    run(&mut b, "MATCH (n:N {id: 2}) DETACH DELETE n").unwrap();
    run(&mut s, "CREATE (:Other {id: -1})").unwrap();
    run(&mut b, "COMMIT").unwrap();
    drop(b);
    let expected: Vec<String> = expected
        .into_iter()
        .filter(|r| !r.starts_with("[Int(2),") && !r.contains(", Int(2), "))
        .collect();
    assert_eq!(all_rels(&mut s, "after a concurrent delete"), expected);

    run(&mut s, "CHECKPOINT").unwrap();
    assert_eq!(all_rels(&mut s, "after a checkpoint"), expected);
    assert_eq!(storage_info(&mut s, "delta_changes"), 0);
    drop(s);
    let mut s = Session::open_with(&db, OpenMode::Loaded, false).unwrap();
    assert_eq!(all_rels(&mut s, "reopened"), expected);
    // The node's neighbours expand past it, and new relationships join the survivors.
    run(
        &mut s,
        "MATCH (a:N {id: 1}), (b:N {id: 3}) CREATE (a)-[:S {w: 7}]->(b)",
    )
    .unwrap();
    let mut more = expected.clone();
    more.push("[Int(1), Int(3), Str(\"S\"), Int(7)]".into());
    more.sort();
    assert_eq!(all_rels(&mut s, "one more"), more);
    run(&mut s, "CHECKPOINT").unwrap();
    drop(s);

    // Mapped, the deletion bitmaps are read in place; a second delete and checkpoint
    // copy them to change them, and both opens read the same graph.
    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    assert_eq!(all_rels(&mut s, "reopened mapped"), more);
    run(&mut s, "MATCH (n:N {id: 3}) DETACH DELETE n").unwrap();
    let fewer: Vec<String> = more
        .iter()
        .filter(|r| !r.starts_with("[Int(3),") && !r.contains(", Int(3), "))
        .cloned()
        .collect();
    assert!(fewer.len() < more.len());
    assert_eq!(all_rels(&mut s, "a second delete"), fewer);
    run(&mut s, "CHECKPOINT").unwrap();
    drop(s);
    for mode in [OpenMode::Mapped, OpenMode::Loaded] {
        let mut s = Session::open_with(&db, mode, false).unwrap();
        assert_eq!(all_rels(&mut s, &format!("{mode:?}")), fewer);
    }
}
