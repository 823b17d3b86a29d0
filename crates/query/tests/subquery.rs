//! `CALL { ... }` subqueries (not in transactions): the body runs for each input row,
//! its rows extend that row; aggregation, ORDER BY and LIMIT in the body count per row;
//! a body without RETURN passes its rows on after writing.

mod common;

use common::{rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;

fn open(dir: &std::path::Path) -> Session {
    Session::open_with(&dir.join("g.qdb"), OpenMode::Mapped, true).unwrap()
}

fn ints(r: &[Vec<Value>]) -> Vec<Vec<i64>> {
    r.iter()
        .map(|row| {
            row.iter()
                .map(|v| match v {
                    Value::Int(i) => *i,
                    v => panic!("not an int: {v:?}"),
                })
                .collect()
        })
        .collect()
}

#[test]
fn the_body_runs_per_row_and_extends_it() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    let r = rows(
        &mut s,
        "UNWIND [1, 2, 3] AS x CALL { WITH x RETURN x * 10 AS y } RETURN x, y",
    );
    assert_eq!(ints(&r), vec![vec![1, 10], vec![2, 20], vec![3, 30]]);
    // Several rows per input row; none drops the row.
    let r = rows(
        &mut s,
        "UNWIND [0, 1, 2] AS x CALL { WITH x UNWIND range(1, x) AS k RETURN k } RETURN x, k",
    );
    assert_eq!(ints(&r), vec![vec![1, 1], vec![2, 1], vec![2, 2]]);
    // Aggregation counts per row, also over nothing (one row of 0).
    let r = rows(
        &mut s,
        "UNWIND [0, 1, 4] AS x CALL { WITH x UNWIND range(1, x) AS k RETURN count(*) AS c, sum(k) AS t } RETURN x, c, t",
    );
    assert_eq!(ints(&r), vec![vec![0, 0, 0], vec![1, 1, 1], vec![4, 4, 10]]);
    // ORDER BY and LIMIT per row.
    let r = rows(
        &mut s,
        "UNWIND [3, 5] AS x CALL { WITH x UNWIND range(1, x) AS k RETURN k ORDER BY k DESC LIMIT 2 } RETURN x, k",
    );
    assert_eq!(
        ints(&r),
        vec![vec![3, 3], vec![3, 2], vec![5, 5], vec![5, 4]]
    );
    // A clause after the CALL sees both the row and what the body returned.
    let r = rows(
        &mut s,
        "UNWIND [1, 2, 3] AS x CALL { WITH x RETURN x % 2 AS odd } WITH x, odd WHERE odd = 1 RETURN sum(x)",
    );
    assert_eq!(ints(&r), vec![vec![4]]);
}

#[test]
fn a_body_that_writes_passes_rows_on() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    let sum = run(
        &mut s,
        "UNWIND range(1, 50) AS x CALL { WITH x CREATE (:T {x: x}) } RETURN count(*) AS n",
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, 50);
    assert_eq!(
        ints(&rows(&mut s, "MATCH (t:T) RETURN sum(t.x)")),
        vec![vec![1275]]
    );
    // A statement may end with it.
    run(
        &mut s,
        "UNWIND [1, 2] AS x CALL { WITH x MATCH (t:T {x: x}) SET t.y = x * 2 }",
    )
    .unwrap();
    assert_eq!(
        ints(&rows(
            &mut s,
            "MATCH (t:T) WHERE t.y IS NOT NULL RETURN sum(t.y)"
        )),
        vec![vec![6]]
    );
    // An uncorrelated body: the same answer for every row; its MATCH sees the graph.
    let r = rows(
        &mut s,
        "UNWIND [1, 2] AS x CALL { MATCH (t:T) WHERE t.x > 45 RETURN count(t) AS c } RETURN x, c",
    );
    assert_eq!(ints(&r), vec![vec![1, 5], vec![2, 5]]);
    // Nodes returned by the body are nodes to the clauses after it.
    let r = rows(
        &mut s,
        "UNWIND [1, 2] AS x CALL { WITH x MATCH (t:T {x: x}) RETURN t } RETURN x, t.x * 100",
    );
    assert_eq!(ints(&r), vec![vec![1, 100], vec![2, 200]]);
}

#[test]
fn returning_a_bound_name_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    let e = run(&mut s, "UNWIND [1] AS x CALL { RETURN 1 AS x } RETURN x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`x` is already bound"), "{e}");
}

#[test]
fn scope_clauses_and_optional_calls() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(
        &mut s,
        "CREATE (a:P {n: 1})-[:K]->(:P {n: 2}), (a)-[:K]->(:P {n: 3}), (:P {n: 4})",
    )
    .unwrap();
    // Neo4j 5's `CALL (x) { }` imports x; `(*)` everything; `()` nothing.
    let r = rows(
        &mut s,
        "UNWIND [1, 2] AS x CALL (x) { RETURN x + 1 AS y } RETURN x, y",
    );
    assert_eq!(ints(&r), vec![vec![1, 2], vec![2, 3]]);
    let r = rows(
        &mut s,
        "UNWIND [1, 2] AS x CALL (*) { RETURN x * 3 AS y } RETURN x, y",
    );
    assert_eq!(ints(&r), vec![vec![1, 3], vec![2, 6]]);
    let r = rows(
        &mut s,
        "UNWIND [1, 2] AS x CALL () { RETURN 7 AS y } RETURN x, y",
    );
    assert_eq!(ints(&r), vec![vec![1, 7], vec![2, 7]]);
    // OPTIONAL CALL keeps a row the body returns nothing for, with nulls.
    let r = rows(
        &mut s,
        "MATCH (p:P) OPTIONAL CALL (p) { MATCH (p)-[:K]->(q) RETURN q.n AS f } RETURN p.n, f ORDER BY p.n, f",
    );
    let want = [(1, Some(2)), (1, Some(3)), (2, None), (3, None), (4, None)];
    let got: Vec<(i64, Option<i64>)> = r
        .iter()
        .map(|row| match (&row[0], &row[1]) {
            (Value::Int(a), Value::Int(b)) => (*a, Some(*b)),
            (Value::Int(a), Value::Null) => (*a, None),
            r => panic!("{r:?}"),
        })
        .collect();
    assert_eq!(got, want);
    // Without OPTIONAL those rows go.
    let r = rows(
        &mut s,
        "MATCH (p:P) CALL (p) { MATCH (p)-[:K]->(q) RETURN q.n AS f } RETURN p.n, f ORDER BY f",
    );
    assert_eq!(ints(&r), vec![vec![1, 2], vec![1, 3]]);
}
