//! The scan-aggregate's typed path (`ops::colagg`) against the row-at-a-time plan, on
//! random columns with nulls: small and large integers, negative ones, doubles, strings
//! few and many (dictionary and plain chunks), booleans, a property that is an integer
//! in one table of the label and a double or a string in another, a property one table
//! lacks; with no key and one to four keys; then again after writes that the delta holds.

mod common;

use common::{rows, run, sorted};
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::{Session, Value};
use quiver_storage::manifest::IdType;
use quiver_storage::OpenMode;
use rand::{Rng, SeedableRng};
use std::fmt::Write;

/// A field, or empty (null) one time in `null_in`.
fn maybe(
    r: &mut impl Rng,
    null_in: u32,
    f: impl FnOnce(&mut dyn rand::RngCore) -> String,
) -> String {
    if r.random_ratio(1, null_in) {
        String::new()
    } else {
        f(r)
    }
}

fn setup(dir: &std::path::Path, seed: u64) -> std::path::PathBuf {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    // Table A: k small int, v large int, f double, s few strings, t many strings, b bool.
    let mut a = String::from("id:ID,k:int,v:long,f:double,s:string,t:string,b:boolean\n");
    for i in 0..30_000 {
        let k = maybe(&mut r, 7, |r| r.random_range(-3..40).to_string());
        let v = maybe(&mut r, 5, |r| {
            r.random_range(-(1i64 << 40)..1 << 40).to_string()
        });
        let f = maybe(&mut r, 4, |r| {
            format!("{:?}", r.random_range(-1000.0..1000.0f64))
        });
        let s = maybe(&mut r, 6, |r| {
            ["red", "green", "blue", "a,b"][r.random_range(0..4)].to_string()
        });
        let s = if s.contains(',') {
            format!("\"{s}\"")
        } else {
            s
        };
        let t = maybe(&mut r, 3, |r| format!("t{}", r.random_range(0..20_000)));
        let b = maybe(&mut r, 9, |r| (r.random_range(0..2) == 1).to_string());
        writeln!(a, "{i},{k},{v},{f},{s},{t},{b}").unwrap();
    }
    // Table B, the same label: v a double, s an integer, no f, k as in A.
    let mut b = String::from("id:ID,k:int,v:double,s:int\n");
    for i in 30_000..38_000 {
        let k = maybe(&mut r, 7, |r| r.random_range(0..50).to_string());
        let v = maybe(&mut r, 5, |r| {
            format!("{:?}", r.random_range(-50.0..50.0f64))
        });
        let s = maybe(&mut r, 6, |r| r.random_range(0..3).to_string());
        writeln!(b, "{i},{k},{v},{s}").unwrap();
    }
    std::fs::write(dir.join("a.csv"), a).unwrap();
    std::fs::write(dir.join("b.csv"), b).unwrap();
    let db = dir.join("g.qdb");
    let mut cfg = ImportConfig::new(&db);
    for f in ["a.csv", "b.csv"] {
        cfg.nodes
            .push(InputGroup::parse(&format!("L={}", dir.join(f).display())).unwrap());
    }
    cfg.id_type = IdType::Integer;
    cfg.threads = 2;
    // Row groups of a few thousand rows: blocks cross chunks and tables.
    cfg.memory_budget_bytes = 24 << 20;
    import(&cfg, &NoProgress).unwrap();
    db
}

const QUERIES: [&str; 29] = [
    "RETURN count(*), count(n.v), sum(n.k), avg(n.k), min(n.k), max(n.k)",
    "RETURN sum(n.f), avg(n.f), min(n.f), max(n.f), count(n.t)",
    "RETURN n.k AS k, count(*), sum(n.k), avg(n.f), min(n.f), max(n.f) ORDER BY k",
    "RETURN n.s AS s, count(*), count(n.t), sum(n.k), min(n.k) ORDER BY s",
    "RETURN n.t AS t, count(*) ORDER BY t",
    "RETURN n.b AS b, count(*), avg(n.k) ORDER BY b",
    "RETURN n.k AS k, n.b AS b, count(*), sum(n.k) ORDER BY k, b",
    "RETURN n.s AS s, n.k AS k, count(*), max(n.f) ORDER BY s, k",
    // Three and four keys (packed numbers), and DISTINCT planned as a grouping.
    "RETURN n.s AS s, n.k AS k, n.b AS b, count(*), sum(n.v) ORDER BY s, k, b",
    "RETURN n.b AS b, n.s AS s, n.missing AS m, n.k AS k, count(*) ORDER BY b, s, m, k",
    "WITH DISTINCT n.s AS s, n.b AS b, n.k AS k RETURN s, b, k ORDER BY s, b, k",
    // v is an integer in A and a double in B: blocks of both kinds and across them.
    "RETURN sum(n.v), avg(n.v), min(n.v), max(n.v)",
    "RETURN n.k AS k, sum(n.v), min(n.v), max(n.v) ORDER BY k",
    "RETURN n.missing AS m, count(*), sum(n.missing) ORDER BY m",
    "RETURN n.k AS k, count(n.f), count(n.missing) ORDER BY k",
    // Filters, evaluated on their columns a block at a time.
    "WHERE n.k > 10 RETURN n.s AS s, count(*), sum(n.v) ORDER BY s",
    "WHERE n.t STARTS WITH 't1' RETURN n.b AS b, count(*), min(n.k) ORDER BY b",
    "WHERE n.f IS NULL AND n.k <> 3 RETURN count(*), avg(n.k), max(n.v)",
    "WHERE n.s = 'red' OR n.v < 0 RETURN n.k AS k, count(*) ORDER BY k",
    // Null tests and string tests read from the chunks (s is an integer in B).
    "WHERE n.t IS NOT NULL AND NOT n.s ENDS WITH 'e' RETURN n.k AS k, count(*) ORDER BY k",
    "WHERE n.f IS NULL OR n.t CONTAINS '99' OR n.s = 'blue' RETURN count(*), sum(n.k)",
    // Integer comparisons (k an integer in both tables; v a double in B).
    "WHERE 5 <= n.k AND n.k < 20 AND NOT n.k = 7 RETURN n.b AS b, count(*) ORDER BY b",
    "WHERE n.v >= 0 OR n.k <> 3 RETURN count(*), sum(n.k)",
    "WHERE n.missing > 1 OR n.k > 30 RETURN count(*)",
    // count(DISTINCT x) as a grouping by x, then a count; count(n) as count(*).
    "RETURN count(DISTINCT n.k)",
    "RETURN count(DISTINCT n.s) AS kinds",
    "WHERE n.k > 3 RETURN count(DISTINCT n.t) AS c",
    "RETURN count(n), count(n.v)",
    "RETURN n.s AS s, count(n) ORDER BY s",
];

/// Floats equal to 9 significant digits (sums of doubles in another order); all else
/// exactly.
fn close(a: &[Vec<Value>], b: &[Vec<Value>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| match (p, q) {
                    (Value::Float(p), Value::Float(q)) => {
                        (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0)
                    }
                    (p, q) => format!("{p:?}") == format!("{q:?}"),
                })
        })
}

fn check(s: &mut Session, ctx: &str) {
    // A label scan, and a scan of every node (whose range runs on into created ids).
    for (m, q) in ["MATCH (n:L)", "MATCH (n)"]
        .into_iter()
        .flat_map(|m| QUERIES.iter().map(move |q| (m, q)))
    {
        let fused = format!("{m} {q}");
        let plan = run(s, &format!("EXPLAIN {fused}"))
            .unwrap()
            .plan
            .unwrap_or_default();
        assert!(
            plan.contains("typed"),
            "{fused}: not the typed path: {plan}"
        );
        let rowwise = format!("{m} WITH n, 1 AS one {q}");
        let row_plan = run(s, &format!("EXPLAIN {rowwise}"))
            .unwrap()
            .plan
            .unwrap_or_default();
        assert!(
            !row_plan.contains("ParallelScanAggregate"),
            "{rowwise}: {row_plan}"
        );
        let (x, y) = (rows(s, &fused), rows(s, &rowwise));
        assert!(close(&x, &y), "{ctx}: {fused}\ntyped: {x:?}\nrows:  {y:?}");
    }
}

#[test]
fn typed_scan_aggregates_match_rows() {
    typed_against_rows();
}

/// The same with the baseline's (SSE2) loops, which a CPU without AVX2 runs.
#[test]
fn typed_scan_aggregates_match_rows_on_the_baseline_cpu() {
    quiver_common::cpu::force_baseline(true);
    typed_against_rows();
    quiver_common::cpu::force_baseline(false);
}

fn typed_against_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path(), 3);
    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    check(&mut s, "imported");
    // Writes the delta holds: changed keys and values (of other types too), deletions,
    // created nodes. The typed path reads the values of those it can hold from the
    // records, and leaves the others (a double where a block's column is of integers)
    // to the row path.
    let mut r = rand::rngs::StdRng::seed_from_u64(4);
    for _ in 0..600 {
        let i = r.random_range(0..38_000);
        let w = match r.random_range(0..13) {
            0 => format!(
                "MATCH (n:L {{id: {i}}}) SET n.k = {}",
                r.random_range(0..60)
            ),
            1 => format!(
                "MATCH (n:L {{id: {i}}}) SET n.v = {}.5",
                r.random_range(-9..9)
            ),
            2 => format!("MATCH (n:L {{id: {i}}}) SET n.s = 'yellow', n.missing = 3"),
            3 => format!("MATCH (n:L {{id: {i}}}) DETACH DELETE n"),
            4 => format!("MATCH (n:L {{id: {i}}}) REMOVE n.k, n.f"),
            5 => format!("MATCH (n:L {{id: {i}}}) SET n.f = {}, n.b = 7", i % 11),
            6 => format!(
                "MATCH (n:L {{id: {i}}}) SET n.t = 't1{}', n.s = null",
                i % 13
            ),
            7 => format!("MATCH (n:L {{id: {i}}}) SET n.missing = 2.5, n.b = false"),
            8 => format!("MATCH (n:L {{id: {i}}}) SET n.v = {}", i * 1_000_003),
            9 => format!(
                "CREATE (:L {{id: {}, k: {}, f: 0.25, b: true}})",
                40_000 + i,
                i % 7
            ),
            // Created nodes of every kind of value: a double v, strings, a float key,
            // other labels, none.
            10 => format!(
                "CREATE (:L {{id: {}, k: {}, v: {}.5, s: 'red', t: 't1{}', missing: {}}})",
                40_000 + i,
                i % 5,
                i % 9,
                i % 3,
                if i % 2 == 0 { "1" } else { "1.5" }
            ),
            11 => format!(
                "CREATE (:M {{id: {}, k: {}, v: {}, s: {}}})",
                40_000 + i,
                i % 4,
                i % 100,
                i % 6
            ),
            _ => format!("CREATE ({{k: {}, b: false, v: -{}}})", i % 3, i % 50),
        };
        run(&mut s, &w).unwrap_or_else(|e| panic!("{w}: {e}"));
    }
    // Created nodes deleted, relabeled, changed.
    for w in [
        "MATCH (n) WHERE n.id >= 40000 AND n.id % 5 = 0 DETACH DELETE n",
        "MATCH (n:M) WHERE n.k = 1 SET n:L",
        "MATCH (n:L) WHERE n.id >= 40000 AND n.id % 5 = 1 REMOVE n:L",
        "MATCH (n) WHERE n.id >= 40000 AND n.id % 5 = 2 SET n.k = n.k + 0.5, n.v = 7",
    ] {
        run(&mut s, w).unwrap_or_else(|e| panic!("{w}: {e}"));
    }
    // Many records in a block: a tenth of the nodes changed at once.
    run(
        &mut s,
        "MATCH (n:L) WHERE n.id % 10 = 4 SET n.k = coalesce(n.k, 0) + 100, n.f = 1.5",
    )
    .unwrap();
    check(&mut s, "after writes");
    run(&mut s, "CHECKPOINT").unwrap();
    check(&mut s, "after a checkpoint");
}

/// Deleted rows and nothing else: once a checkpoint has marked them (the delta then
/// empty), keyless aggregates fold the live rows as rows without a value.
#[test]
fn typed_scan_aggregates_skip_deleted_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path(), 5);
    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    run(
        &mut s,
        "MATCH (n:L) WHERE n.id % 7 = 3 OR n.id < 100 DETACH DELETE n",
    )
    .unwrap();
    check(&mut s, "with the delta");
    run(&mut s, "CHECKPOINT").unwrap();
    check(&mut s, "after a checkpoint");
    assert_eq!(
        rows(&mut s, "MATCH (n:L) RETURN count(*)"),
        vec![vec![Value::Int(
            38_000 - 100 - (100..38_000).filter(|i| i % 7 == 3).count() as i64
        )]]
    );
}

/// `b, count(*)` over one hop from every node is read from degrees (DegreeCount) and
/// answers as counting the expansion does (`count(a)`, which is not rewritten): over
/// any type, one type, several, both directions, a target label, self-loops, and with a
/// delta of property changes; not when the source label leaves nodes out, nor once the
/// delta holds a relationship.
#[test]
fn degree_counts_match_expansions() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    run(&mut s, "UNWIND range(0, 299) AS i CREATE (:L {i: i})").unwrap();
    run(&mut s, "MATCH (n:L) WHERE n.i % 3 = 0 SET n:M").unwrap();
    for (t, m) in [("R", 0), ("S", 1)] {
        run(
            &mut s,
            &format!("MATCH (a:L) WITH a ORDER BY a.i WITH collect(a) AS ns UNWIND range(0, 1199) AS k WITH ns[(k * 7919) % 300] AS a, ns[(k * 104729 + k / 7) % 300] AS b, k WHERE k % 2 = {m} CREATE (a)-[:{t}]->(b)"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
    run(
        &mut s,
        "MATCH (a:L {i: 5}) CREATE (a)-[:R]->(a), (a)-[:S]->(a)",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let cases = [
        ("MATCH (a:L)-->(b:L)", true),
        ("MATCH (a)-[:R]->(b)", true),
        ("MATCH (a:L)<-[:S|R]-(b:M)", true),
        ("MATCH (a)<-[:S]-(b)", true),
        ("MATCH (a:M)-->(b)", false),
        ("MATCH (a:L)-[]-(b)", false),
    ];
    // No delta; then one of property changes only (the shape is the segments'); then
    // one that holds a created relationship.
    for phase in ["none", "properties", "relationship"] {
        match phase {
            "properties" => {
                run(&mut s, "MATCH (a:L) WHERE a.i % 10 = 3 SET a.x = a.i").unwrap();
            }
            "relationship" => {
                run(
                    &mut s,
                    "MATCH (a:L {i: 7}), (b:L {i: 9}) CREATE (a)-[:R]->(b)",
                )
                .unwrap();
            }
            _ => {}
        }
        let with_delta = phase == "relationship";
        for (m, degrees) in cases {
            let q = format!("{m} RETURN b, count(*) AS c");
            let plan = run(&mut s, &format!("EXPLAIN {q}")).unwrap().plan.unwrap();
            assert_eq!(
                plan.contains("DegreeCount"),
                degrees && !with_delta,
                "{q} ({phase}): {plan}"
            );
            let want = sorted(&mut s, &format!("{m} RETURN b, count(a) AS c"));
            assert!(!want.is_empty(), "{q}");
            assert_eq!(sorted(&mut s, &q), want, "{q} ({phase})");
        }
    }
}
