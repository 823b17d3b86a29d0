//! `ValueHashJoin` (a node found by a property equal to a value of the row) against a
//! model: every pair whose values `=` calls equal, computed from the nodes' values,
//! over keys of every kind that hash alike or not (integers and equal floats, NaN,
//! null, strings, lists, dates, datetimes), on segments and on a delta; with few input
//! rows (the scan streams past them), under OPTIONAL MATCH, and past a memory limit
//! that makes it partition its input to disk.

mod common;

use common::{rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;
use rand::{Rng, SeedableRng};

/// A Cypher literal for one of a few keys of mixed kinds.
fn key(r: &mut impl Rng) -> String {
    let choices = [
        "null",
        "0",
        "1",
        "2",
        "-1",
        "1.0",
        "2.5",
        "0.0 / 0.0",
        "9007199254740993",
        "9007199254740992.0",
        "'a'",
        "'b'",
        "'1'",
        "true",
        "[1, 'x']",
        "[1.0, 'x']",
        "[null]",
        "date('2020-01-01')",
        "localdatetime('2020-01-01T10:00:00')",
        "localdatetime('2020-01-01T10:00:00.5')",
        "localtime('10:00')",
        "datetime('2020-01-01T10:00:00Z')",
        "datetime('2020-01-01T11:00:00+01:00')",
    ];
    choices[r.random_range(0..choices.len())].to_string()
}

/// (id, k) of every node of `label`.
fn keys(s: &mut Session, label: &str) -> Vec<(i64, Value)> {
    rows(s, &format!("MATCH (n:{label}) RETURN id(n), n.k"))
        .into_iter()
        .map(|r| match &r[0] {
            Value::Int(i) => (*i, r[1].clone()),
            v => panic!("not an id: {v:?}"),
        })
        .collect()
}

/// Pairs (a, b) with `a.k = b.k` true, and under OPTIONAL MATCH each `a` without one
/// paired with null (-1).
fn model(a: &[(i64, Value)], b: &[(i64, Value)], optional: bool) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for (x, kx) in a {
        let before = out.len();
        for (y, ky) in b {
            if kx.eq3(ky) == Some(true) {
                out.push((*x, *y));
            }
        }
        if optional && out.len() == before {
            out.push((*x, -1));
        }
    }
    out.sort_unstable();
    out
}

fn pairs(s: &mut Session, q: &str) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = rows(s, q)
        .into_iter()
        .map(|r| match (&r[0], &r[1]) {
            (Value::Int(x), Value::Int(y)) => (*x, *y),
            (Value::Int(x), Value::Null) => (*x, -1),
            v => panic!("{q}: not ids: {v:?}"),
        })
        .collect();
    out.sort_unstable();
    out
}

fn plan(s: &mut Session, q: &str) -> String {
    run(s, &format!("EXPLAIN {q}")).unwrap().plan.unwrap()
}

#[test]
fn hash_joins_answer_as_the_model_on_segments_and_delta() {
    for seed in 0..6u64 {
        let mut r = rand_pcg::Pcg64::seed_from_u64(seed);
        let d = tempfile::tempdir().unwrap();
        let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
        let create = |r: &mut rand_pcg::Pcg64, label: &str, n: usize| {
            let items: Vec<String> = (0..n).map(|_| format!("{{k: {}}}", key(r))).collect();
            format!(
                "UNWIND [{}] AS m CREATE (x:{label}) SET x.k = m.k",
                items.join(", ")
            )
        };
        run(&mut s, &create(&mut r, "A", 60)).unwrap();
        run(&mut s, &create(&mut r, "B", 80)).unwrap();
        if seed % 2 == 0 {
            run(&mut s, "CHECKPOINT").unwrap();
            // A delta over the segments: created nodes, changed and deleted ones.
            run(&mut s, &create(&mut r, "B", 20)).unwrap();
            let k = key(&mut r);
            run(
                &mut s,
                &format!("MATCH (b:B) WHERE id(b) % 7 = 3 SET b.k = {k}"),
            )
            .unwrap();
            run(&mut s, "MATCH (b:B) WHERE id(b) % 11 = 5 DETACH DELETE b").unwrap();
            run(&mut s, "MATCH (a:A) WHERE id(a) % 5 = 1 REMOVE a:A").unwrap();
        }
        let (ka, kb) = (keys(&mut s, "A"), keys(&mut s, "B"));
        let tmp = tempfile::tempdir().unwrap();
        s.opts.temp_dir = Some(tmp.path().to_path_buf());

        let q = "MATCH (a:A), (b:B) WHERE a.k = b.k RETURN id(a), id(b)";
        assert!(
            plan(&mut s, q).contains("ValueHashJoin"),
            "{}",
            plan(&mut s, q)
        );
        let want = model(&ka, &kb, false);
        assert_eq!(pairs(&mut s, q), want, "seed {seed}: {q}");
        // The other side hashed, and the value on the left.
        let q = "MATCH (b:B) MATCH (a:A) WHERE b.k = a.k RETURN id(a), id(b)";
        assert_eq!(pairs(&mut s, q), want, "seed {seed}: {q}");

        // A few input rows: the scan streams past their hashes.
        let few: Vec<i64> = ka.iter().step_by(9).map(|x| x.0).collect();
        let q = format!(
            "MATCH (a:A) WHERE id(a) IN {few:?} MATCH (b:B) WHERE b.k = a.k RETURN id(a), id(b)"
        );
        let some: Vec<(i64, Value)> = ka.iter().filter(|x| few.contains(&x.0)).cloned().collect();
        assert_eq!(
            pairs(&mut s, &q),
            model(&some, &kb, false),
            "seed {seed}: {q}"
        );

        let q = "MATCH (a:A) OPTIONAL MATCH (b:B) WHERE b.k = a.k RETURN id(a), id(b)";
        assert!(plan(&mut s, q).contains("ValueHashJoin"));
        assert_eq!(pairs(&mut s, q), model(&ka, &kb, true), "seed {seed}: {q}");
    }
}

/// A table past the query's memory limit: the input goes to partition files and each
/// partition is answered by the nodes whose hash falls in it; without a temporary
/// directory the limit is an error naming the join.
#[test]
fn a_hash_join_past_its_limit_partitions_and_answers_the_same() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    run(
        &mut s,
        "UNWIND range(1, 60000) AS i CREATE (:B {k: CASE WHEN i % 13 = 0 THEN toString(i % 50) ELSE i % 20000 END, i: i})",
    )
    .unwrap();
    run(
        &mut s,
        "UNWIND range(1, 3000) AS i CREATE (:A {k: (i * 7) % 25000, i: i})",
    )
    .unwrap();
    run(
        &mut s,
        "UNWIND range(1, 50) AS i CREATE (:A {k: toString(i), i: -i})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    s.opts.temp_dir = Some(tmp.path().to_path_buf());
    let q = "MATCH (a:A), (b:B) WHERE b.k = a.k RETURN a.i, b.i";
    let sorted = |s: &mut Session| {
        let mut v: Vec<String> = rows(s, q).iter().map(|r| format!("{r:?}")).collect();
        v.sort();
        v
    };
    s.opts.memory_limit = 1 << 40;
    let want = sorted(&mut s);
    assert!(want.len() > 3000, "{}", want.len());
    s.opts.memory_limit = 512 << 10;
    assert_eq!(sorted(&mut s), want, "the partitioned join differs");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    s.opts.temp_dir = None;
    let e = run(&mut s, q).unwrap_err();
    assert!(e.to_string().contains("ValueHashJoin"), "{e}");
}

/// A statement that writes keeps the nested scan: a table made once would not see the
/// nodes the statement creates.
#[test]
fn statements_that_write_do_not_hash_join() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    run(&mut s, "UNWIND range(1, 5) AS i CREATE (:A {k: i % 2})").unwrap();
    let q = "MATCH (a:A) MATCH (b:A) WHERE b.k = a.k SET b.seen = true";
    assert!(!plan(&mut s, q).contains("ValueHashJoin"));
    let q = "MATCH (a:A) MATCH (b:A) WHERE b.k = a.k MERGE (c:C {k: a.k + 10}) RETURN count(*)";
    assert!(!plan(&mut s, q).contains("ValueHashJoin"));
    run(&mut s, q).unwrap();
    run(&mut s, q).unwrap();
    assert_eq!(common::ints(&mut s, "MATCH (c:C) RETURN count(*)"), vec![2]);
}
