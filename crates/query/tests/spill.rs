//! Operators past their memory limit spill to the temporary directory and answer as
//! without a limit: a full ORDER BY (sorted runs, merged; ties in input order),
//! aggregation and DISTINCT (hash partitions); and queries past the database's limit
//! wait for each other's memory rather than fail.

mod common;

use common::{rows, run, sorted};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;

#[test]
fn a_sort_past_its_limit_spills_and_answers_the_same() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    // Keys with many ties, nulls, strings and lists; rows carrying nodes and maps.
    run(
        &mut s,
        "UNWIND range(1, 60000) AS i CREATE (:T {k: CASE WHEN i % 11 = 0 THEN null ELSE (i * 7919) % 1000 END, s: toString(i % 37), i: i, l: [i % 3, 'x']})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    s.opts.temp_dir = Some(tmp.path().to_path_buf());
    for q in [
        "MATCH (t:T) RETURN t.k, t.s, t.i, t ORDER BY t.k DESC, t.s",
        "MATCH (t:T) RETURN t.i, {k: t.k, l: t.l} AS m ORDER BY t.l, t.s DESC SKIP 17 LIMIT 70000",
        "MATCH (t:T) WITH t ORDER BY t.s, t.k RETURN t.i, id(t)",
    ] {
        s.opts.memory_limit = 1 << 40;
        let want = rows(&mut s, q);
        s.opts.memory_limit = 1 << 20;
        let got = rows(&mut s, q);
        assert_eq!(got.len(), want.len(), "{q}");
        assert!(got == want, "{q}: the spilled sort differs");
    }
    // Without a temporary directory the limit is an error, as before.
    s.opts.temp_dir = None;
    s.opts.memory_limit = 1 << 20;
    let e = run(&mut s, "MATCH (t:T) RETURN t.i ORDER BY t.s").unwrap_err();
    assert!(e.to_string().contains("Sort"), "{e}");
    // The runs were unnamed temporary files: nothing is left behind.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// Aggregations (one key, several keys, nodes, collect, DISTINCT aggregates,
/// percentiles) and DISTINCT past a 1 MiB limit spill to partitions and answer as
/// without a limit; the partitions are unnamed files, gone afterwards.
#[test]
fn aggregation_and_distinct_past_their_limit_spill_and_answer_the_same() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    run(&mut s, "UNWIND range(0, 29999) AS i CREATE (:T {i: i})").unwrap();
    run(
        &mut s,
        "MATCH (a:T) WITH a ORDER BY a.i WITH collect(a) AS ns UNWIND range(0, 29999) AS i WITH ns[i] AS a, ns[(i * 7919) % 30000] AS b, ns[(i * 104729 + 13) % 30000] AS c CREATE (a)-[:R]->(b), (a)-[:R]->(c)",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    run(&mut s, "CHECKPOINT").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    s.opts.temp_dir = Some(tmp.path().to_path_buf());
    for q in [
        "UNWIND range(1, 80000) AS i RETURN i % 20011 AS k, count(*) AS c, sum(i) AS s, avg(i) AS a, min(toString(i)) AS mn, max(i) AS mx, collect(i % 7) AS l, count(DISTINCT i % 13) AS d",
        "UNWIND range(1, 80000) AS i RETURN i % 101 AS a, toString(i % 307) AS b, CASE WHEN i % 5 = 0 THEN null ELSE i % 2 END AS c, count(*) AS n, percentileDisc(i, 0.5) AS p",
        "MATCH (a:T)-[:R]->(b:T) WITH b, count(*) AS c RETURN id(b), c",
        "MATCH (a:T)-[:R]->(b:T) RETURN b, count(a) AS c, collect(a.i) AS l",
        "UNWIND range(1, 80000) AS i RETURN DISTINCT i % 30011 AS k, toString(i % 3) AS s",
        "UNWIND range(1, 80000) AS i RETURN DISTINCT toString(i % 40009) AS k",
        "UNWIND range(1, 80000) AS i WITH DISTINCT i % 25013 AS k RETURN count(*) AS n, sum(k) AS s",
        // Over a label scan: the parallel scan-aggregate, done again serially, spilling.
        "MATCH (t:T) RETURN t.i % 7919 AS k, count(*) AS c, collect(t.i) AS l, avg(t.i) AS a",
        "MATCH (t:T) WHERE t.i % 3 <> 1 RETURN t.i AS k, toString(t.i % 5) AS s, count(*) AS c",
        "MATCH (t:T) RETURN DISTINCT t.i % 10007 AS k, t.i % 2 AS p",
    ] {
        s.opts.memory_limit = 1 << 40;
        if q.starts_with("MATCH (t:T) ") {
            let plan = run(&mut s, &format!("EXPLAIN {q}")).unwrap().plan.unwrap();
            assert!(plan.contains("ParallelScanAggregate"), "{q}: {plan}");
        }
        let want = sorted(&mut s, q);
        s.opts.memory_limit = 1 << 20;
        let got = sorted(&mut s, q);
        assert_eq!(got.len(), want.len(), "{q}");
        assert!(got == want, "{q}: the spilled answer differs");
    }
    // Without a temporary directory the limit is an error.
    s.opts.temp_dir = None;
    let e = run(
        &mut s,
        "UNWIND range(1, 80000) AS i RETURN i % 20011 AS k, collect(i) AS l",
    )
    .unwrap_err();
    assert!(e.to_string().contains("Aggregate"), "{e}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// Six queries at once, each needing more than half of the database's memory limit,
/// all finish with the answer they give alone: requests wait for memory others hold,
/// and operators holding enough spill rather than wait, so none is refused (the
/// deadlock rule, the youngest waiter giving way, is tested in `quiver_common::memory`).
#[test]
fn queries_past_the_database_limit_wait_or_spill_and_all_finish() {
    let d = tempfile::tempdir().unwrap();
    let opts = quiver_engine::StoreOptions {
        memory_limit: 48 << 20,
        ..Default::default()
    };
    let mut s = Session::open_opts(&d.path().join("g.qdb"), opts, true).unwrap();
    let store = s.store().clone();
    let qs = [
        "UNWIND range(1, 300000) AS i RETURN i % 100003 AS k, count(*) AS c, collect(i % 5) AS l",
        "UNWIND range(1, 300000) AS i RETURN DISTINCT i % 150001 AS k, toString(i % 2) AS s",
        "UNWIND range(1, 300000) AS i RETURN toString(i) AS s, i ORDER BY s DESC, i",
    ];
    let alone: Vec<Vec<String>> = qs.iter().map(|q| sorted(&mut s, q)).collect();
    let peak_alone = store.memory.peak_bytes();
    assert!(
        peak_alone > 24 << 20,
        "each query needs more than half the limit: {peak_alone}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let store = store.clone();
            let dir = tmp.path().to_path_buf();
            std::thread::spawn(move || {
                let mut s = Session::on(store);
                s.opts.temp_dir = Some(dir);
                s.opts.memory_limit = 1 << 40;
                (i % 3, sorted(&mut s, qs[i % 3]))
            })
        })
        .collect();
    for h in handles {
        let (q, got) = h.join().expect("every query finishes");
        assert!(got == alone[q], "{}: differs beside the others", qs[q]);
    }
    assert_eq!(store.memory.used_bytes() - store.delta_granted_bytes(), 0);
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// SHOW TRANSACTIONS lists the queries running on the store, with Neo4j's columns and
/// their memory, and a query leaves the list however it ends (here: cancelled).
#[test]
fn show_transactions_lists_running_queries_with_their_memory() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    let store = s.store().clone();
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let long = "UNWIND range(1, 2000000000) AS x WITH x % 1000 AS k RETURN k, count(*)";
    let c2 = cancel.clone();
    let t = std::thread::spawn(move || {
        let mut s = Session::on(store);
        s.opts.cancel = Some(c2);
        run(&mut s, long)
    });
    let t0 = std::time::Instant::now();
    let row = loop {
        let r = rows(&mut s, "SHOW TRANSACTIONS");
        // The listing itself is running too.
        assert!(
            r.iter().any(|r| r[6] == Value::str("SHOW TRANSACTIONS")),
            "{r:?}"
        );
        if let Some(row) = r.into_iter().find(|r| r[6] == Value::str(long)) {
            break row;
        }
        assert!(t0.elapsed().as_secs() < 30, "the long query never showed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(row.len(), 18);
    assert_eq!(row[0], Value::str("neo4j"));
    assert!(matches!(&row[1], Value::Str(t) if t.starts_with("neo4j-transaction-")));
    assert_eq!(row[8], Value::str("Running"));
    assert!(matches!(row[9], Value::Duration(_)));
    assert!(matches!(row[15], Value::Int(l) if l > 0), "{:?}", row[15]);
    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
    let e = t.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("cancel"), "{e}");
    let r = rows(&mut s, "SHOW TRANSACTIONS");
    assert_eq!(r.len(), 1, "only the listing itself: {r:?}");
}

/// One value of a sort key: numbers (small, past 2^53 where `f64` is not exact, NaN,
/// both zeros), strings (short, long, with a NUL byte: not whole in a normalized key),
/// booleans, lists and null.
fn arb_key() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    prop_oneof![
        (-3i64..3).prop_map(Value::Int),
        prop_oneof![Just(1i64 << 53), Just((1 << 53) + 1), Just(-(1 << 53) - 3)]
            .prop_map(Value::Int),
        prop_oneof![
            Just(0.5f64),
            Just(-0.0),
            Just(0.0),
            Just(f64::NAN),
            Just(2.0)
        ]
        .prop_map(Value::Float),
        "[ab\\x00]{0,3}".prop_map(|s| Value::str(&s)),
        "[ab]{14,18}".prop_map(|s| Value::str(&s)),
        any::<bool>().prop_map(Value::Bool),
        (0i64..2).prop_map(|i| Value::list(vec![Value::Int(i)])),
        Just(Value::Null),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(40))]
    /// ORDER BY over random keys of mixed types (some whole in their normalized words,
    /// some not), ascending and descending, with SKIP and LIMIT, without a limit and
    /// spilled at a small one, gives the rows a stable sort by Cypher's order gives.
    #[test]
    fn sorts_agree_with_a_stable_sort_by_cyphers_order(
        keys in proptest::collection::vec((arb_key(), arb_key(), arb_key()), 1..1500),
        desc in proptest::collection::vec(proptest::prelude::any::<bool>(), 3),
        nkeys in 1usize..=3,
        skip in 0usize..50,
        limit in proptest::option::of(0usize..500),
    ) {
        use std::collections::BTreeMap;
        let rows: Vec<Value> = keys
            .iter()
            .enumerate()
            .map(|(i, (a, b, c))| {
                Value::list(vec![Value::Int(i as i64), a.clone(), b.clone(), c.clone()])
            })
            .collect();
        let by: Vec<String> = (0..nkeys)
            .map(|k| format!("r[{}]{}", k + 1, if desc[k] { " DESC" } else { "" }))
            .collect();
        let q = format!(
            "UNWIND $rows AS r RETURN r[0] AS i, r[1] AS k ORDER BY {} SKIP {skip}{}",
            by.join(", "),
            limit.map(|l| format!(" LIMIT {l}")).unwrap_or_default()
        );
        let mut want: Vec<usize> = (0..keys.len()).collect();
        let key = |i: usize, k: usize| match k {
            0 => &keys[i].0,
            1 => &keys[i].1,
            _ => &keys[i].2,
        };
        want.sort_by(|&a, &b| {
            (0..nkeys)
                .map(|k| {
                    let o = quiver_query::value::order(key(a, k), key(b, k));
                    if desc[k] { o.reverse() } else { o }
                })
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let want: Vec<i64> = want
            .into_iter()
            .skip(skip)
            .take(limit.unwrap_or(usize::MAX))
            .map(|i| i as i64)
            .collect();
        let d = tempfile::tempdir().unwrap();
        let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        s.opts.temp_dir = Some(tmp.path().to_path_buf());
        let params = BTreeMap::from([("rows".to_string(), Value::list(rows))]);
        for limit_bytes in [1u64 << 40, 16 << 10] {
            s.opts.memory_limit = limit_bytes;
            let mut got = Vec::new();
            s.run(&q, &params, &mut |_, b| {
                for r in 0..b.len {
                    match b.cols[0][r] {
                        Value::Int(i) => {
                            // The carried key (of mixed types) comes back as it went in.
                            let k = format!("{:?}", b.cols[1][r]);
                            assert_eq!(k, format!("{:?}", keys[i as usize].0), "row {i}");
                            got.push(i)
                        }
                        ref v => panic!("not an int: {v:?}"),
                    }
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{q}: {e}"));
            proptest::prop_assert_eq!(&got, &want, "{} at {} bytes", q, limit_bytes);
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// Grouping, collect, DISTINCT aggregates and DISTINCT over random keys of mixed
    /// types (nulls, lists, NaN, both zeros, long strings) answer the same spilled at a
    /// small limit as without one; collect keeps each group's input order.
    #[test]
    fn aggregations_spilled_answer_as_unspilled(
        keys in proptest::collection::vec((arb_key(), arb_key()), 1..3000),
        which in 0usize..4,
    ) {
        use std::collections::BTreeMap;
        let rows: Vec<Value> = keys
            .iter()
            .enumerate()
            .map(|(i, (a, b))| Value::list(vec![Value::Int(i as i64), a.clone(), b.clone()]))
            .collect();
        let q = [
            "UNWIND $rows AS r RETURN r[1] AS k, count(*) AS c, collect(r[0]) AS l, min(r[2]) AS mn, max(r[0]) AS mx",
            "UNWIND $rows AS r RETURN r[1] AS a, r[2] AS b, count(DISTINCT r[0] % 7) AS d, sum(r[0]) AS s",
            "UNWIND $rows AS r RETURN DISTINCT r[1] AS a, r[2] AS b",
            "UNWIND $rows AS r WITH DISTINCT r[2] AS b RETURN count(*) AS n",
        ][which];
        let d = tempfile::tempdir().unwrap();
        let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        s.opts.temp_dir = Some(tmp.path().to_path_buf());
        let params = BTreeMap::from([("rows".to_string(), Value::list(rows))]);
        let mut answers = Vec::new();
        for limit_bytes in [1u64 << 40, 128 << 10] {
            s.opts.memory_limit = limit_bytes;
            let mut got: Vec<String> = Vec::new();
            s.run(q, &params, &mut |_, b| {
                for r in 0..b.len {
                    got.push(format!("{:?}", b.row(r)));
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{q}: {e}"));
            got.sort();
            answers.push(got);
        }
        proptest::prop_assert_eq!(&answers[0], &answers[1], "{}", q);
    }
}
