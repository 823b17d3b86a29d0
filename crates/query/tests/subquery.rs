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

/// A CALL body sees only what it imports (its importing WITH, `CALL (a)`, `CALL (*)`),
/// as in Neo4j 5: an outer name it does not import is a new variable inside.
#[test]
fn a_body_sees_only_what_it_imports() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(
        &mut s,
        "CREATE (a:P {n: 1})-[:K]->(:P {n: 2}), (a)-[:K]->(:P {n: 3}), (:P {n: 4})",
    )
    .unwrap();
    // Not imported: the body's MATCH (n) is every node, not the outer row's.
    let r = rows(
        &mut s,
        "MATCH (n:P) CALL { MATCH (n:P) RETURN count(n) AS k } RETURN n.n, k ORDER BY n.n",
    );
    assert_eq!(
        ints(&r),
        vec![vec![1, 4], vec![2, 4], vec![3, 4], vec![4, 4]]
    );
    // Imported three ways: the outer row's node.
    for q in [
        "MATCH (n:P) CALL { WITH n MATCH (n)-->(m) RETURN count(m) AS k } RETURN n.n, k ORDER BY n.n",
        "MATCH (n:P) CALL (n) { MATCH (n)-->(m) RETURN count(m) AS k } RETURN n.n, k ORDER BY n.n",
        "MATCH (n:P) CALL (*) { MATCH (n)-->(m) RETURN count(m) AS k } RETURN n.n, k ORDER BY n.n",
    ] {
        let r = rows(&mut s, q);
        assert_eq!(ints(&r), vec![vec![1, 2], vec![2, 0], vec![3, 0], vec![4, 0]], "{q}");
    }
    // An unimported name is fresh inside, also under UNWIND, and in each UNION part on
    // its own terms.
    let r = rows(
        &mut s,
        "UNWIND [1, 2] AS a CALL { UNWIND [5] AS a RETURN a AS c } RETURN a, c",
    );
    assert_eq!(ints(&r), vec![vec![1, 5], vec![2, 5]]);
    let r = rows(
        &mut s,
        "UNWIND [1, 2] AS a CALL { WITH a RETURN a AS c UNION UNWIND [7] AS a RETURN a AS c } RETURN a, c ORDER BY a, c",
    );
    assert_eq!(
        ints(&r),
        vec![vec![1, 1], vec![1, 7], vec![2, 2], vec![2, 7]]
    );
    // A WHERE on the importing WITH filters (Neo4j refuses it; Quiver runs it).
    let r = rows(
        &mut s,
        "UNWIND [1, 2] AS a CALL { WITH a WHERE a > 1 RETURN a * 10 AS c } RETURN c",
    );
    assert_eq!(ints(&r), vec![vec![20]]);
    // What is not imported is undefined; an importing WITH takes references only.
    for (q, want) in [
        (
            "UNWIND [1] AS a CALL { RETURN a AS c } RETURN c",
            "`a` is not defined",
        ),
        (
            "UNWIND [1] AS a CALL () { RETURN a AS c } RETURN c",
            "`a` is not defined",
        ),
        (
            "UNWIND [1] AS a CALL { UNWIND [2] AS x WITH a, x RETURN x AS c } RETURN c",
            "`a` is not defined",
        ),
        (
            "UNWIND [1] AS a CALL { WITH a AS b RETURN b } RETURN b",
            "Importing WITH should consist only of simple references",
        ),
        (
            "UNWIND [1] AS a CALL { WITH a + 1 AS b RETURN b } RETURN b",
            "Importing WITH should consist only of simple references",
        ),
        (
            "UNWIND [1] AS a CALL { CREATE (:Q {v: a}) } IN TRANSACTIONS",
            "`a` is not defined",
        ),
    ] {
        let e = run(&mut s, q).unwrap_err().to_string();
        assert!(e.contains(want), "{q}: {e}");
    }
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

/// UNION and UNION ALL inside the body: per input row, the parts' rows joined (distinct
/// for UNION), equal to the same rows written with a list and UNWIND; the parts see the
/// imported variables; parts returning other columns, and mixing UNION with UNION ALL,
/// are errors; a body of parts that write runs each part once per row.
#[test]
fn union_inside_a_call_body() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(
        &mut s,
        "UNWIND range(1, 6) AS i CREATE (:A {n: i % 4}) WITH i WHERE i % 2 = 0 CREATE (:B {n: i})",
    )
    .unwrap();
    // Whole-body forms, against the same sets written by hand.
    let got = rows(
        &mut s,
        "CALL { MATCH (a:A) RETURN a.n AS x UNION MATCH (b:B) RETURN b.n AS x } RETURN x ORDER BY x",
    );
    let want = rows(
        &mut s,
        "MATCH (a:A) WITH collect(a.n) AS l1 MATCH (b:B) WITH l1, collect(b.n) AS l2 \
         UNWIND l1 + l2 AS x RETURN DISTINCT x ORDER BY x",
    );
    assert_eq!(got, want);
    assert_eq!(
        ints(&got),
        vec![vec![0], vec![1], vec![2], vec![3], vec![4], vec![6]]
    );
    let got = rows(
        &mut s,
        "CALL { MATCH (a:A) RETURN a.n AS x UNION ALL MATCH (b:B) RETURN b.n AS x } RETURN count(*), sum(x)",
    );
    assert_eq!(ints(&got), vec![vec![9, 9 + 12]]);
    // Per input row, with the row imported into every part.
    let got = rows(
        &mut s,
        "UNWIND [1, 2, 5] AS k CALL (k) { MATCH (a:A) WHERE a.n = k RETURN 'A' AS t \
         UNION MATCH (b:B) WHERE b.n = k RETURN 'B' AS t } RETURN k, t ORDER BY k, t",
    );
    let text: Vec<String> = got.iter().map(|r| format!("{:?}", r)).collect();
    assert_eq!(
        text,
        vec![
            format!("{:?}", vec![Value::Int(1), Value::Str("A".into())]),
            format!("{:?}", vec![Value::Int(2), Value::Str("A".into())]),
            format!("{:?}", vec![Value::Int(2), Value::Str("B".into())]),
        ]
    );
    // OPTIONAL CALL keeps a row no part answers.
    let got = rows(
        &mut s,
        "UNWIND [5] AS k OPTIONAL CALL (k) { MATCH (a:A {n: k}) RETURN a.n AS x UNION MATCH (b:B {n: k}) RETURN b.n AS x } RETURN k, x",
    );
    assert_eq!(got, vec![vec![Value::Int(5), Value::Null]]);
    // Parts that write run once per row each.
    run(
        &mut s,
        "UNWIND [1, 2] AS k CALL (k) { CREATE (:C {k: k}) RETURN 1 AS one UNION ALL CREATE (:C {k: -k}) RETURN 2 AS one } RETURN count(*)",
    )
    .unwrap();
    assert_eq!(
        ints(&rows(&mut s, "MATCH (c:C) RETURN count(*), sum(c.k)")),
        vec![vec![4, 0]]
    );
    // Errors.
    for bad in [
        "CALL { RETURN 1 AS x UNION RETURN 2 AS y } RETURN x",
        "CALL { RETURN 1 AS x UNION RETURN 2 AS x UNION ALL RETURN 3 AS x } RETURN x",
        "UNWIND [1] AS k CALL (k) { CREATE (:D) UNION CREATE (:E) } IN TRANSACTIONS",
    ] {
        assert!(run(&mut s, bad).is_err(), "{bad} should fail");
    }
}

/// `EXISTS { }` and `COUNT { }` over whole queries (WITH, aggregation, several
/// patterns), against the same answers written with OPTIONAL MATCH and aggregation;
/// one that writes is refused.
#[test]
fn exists_and_count_over_whole_queries() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(
        &mut s,
        "UNWIND range(1, 30) AS i CREATE (:P {i: i}) WITH i MATCH (a:P {i: i}), (b:P) WHERE b.i = (i * 7) % 30 + 1 OR b.i = (i * 11) % 30 + 1 CREATE (a)-[:R]->(b)",
    )
    .unwrap();
    for (sub, hand) in [
        (
            "MATCH (n:P) WHERE EXISTS { MATCH (n)-->(m) WITH n, count(*) AS c WHERE c = 2 RETURN true } RETURN n.i ORDER BY n.i",
            "MATCH (n:P)-->(m) WITH n, count(*) AS c WHERE c = 2 RETURN n.i ORDER BY n.i",
        ),
        (
            "MATCH (n:P) RETURN n.i, COUNT { MATCH (n)-->(m)-->(x) WITH DISTINCT x RETURN x } AS c ORDER BY n.i",
            "MATCH (n:P) OPTIONAL MATCH (n)-->(m)-->(x) RETURN n.i, count(DISTINCT x) AS c ORDER BY n.i",
        ),
        (
            "MATCH (n:P) WHERE NOT EXISTS { MATCH (n)-->(m), (m)-->(n) RETURN m } RETURN n.i ORDER BY n.i",
            "MATCH (n:P) OPTIONAL MATCH (n)-->(m)-->(n) WITH n, count(m) AS c WHERE c = 0 RETURN n.i ORDER BY n.i",
        ),
    ] {
        assert_eq!(rows(&mut s, sub), rows(&mut s, hand), "{sub}");
    }
    // COLLECT { } over a whole query: its one column in the body's order, nulls kept.
    let got = rows(
        &mut s,
        "MATCH (n:P) RETURN n.i, COLLECT { MATCH (n)-->(m) WITH m ORDER BY m.i DESC RETURN m.i } AS l ORDER BY n.i",
    );
    let want = rows(
        &mut s,
        "MATCH (n:P) OPTIONAL MATCH (n)-->(m) WITH n, m ORDER BY m.i DESC RETURN n.i, collect(m.i) AS l ORDER BY n.i",
    );
    assert_eq!(got, want);
    let got = rows(
        &mut s,
        "MATCH (n:P {i: 1}) RETURN COLLECT { MATCH (n)-->(m) WITH m RETURN m.nope } AS l",
    );
    assert_eq!(
        got,
        vec![vec![Value::List(std::sync::Arc::new(vec![
            Value::Null,
            Value::Null
        ]))]]
    );
    // UNION inside: the parts' rows joined, then counted or collected.
    let got = rows(
        &mut s,
        "MATCH (n:P {i: 1}) RETURN COUNT { MATCH (n)-->(m) RETURN m AS x UNION ALL MATCH (n)<--(m) RETURN m AS x } AS c",
    );
    let want = rows(&mut s, "MATCH (n:P {i: 1})--(m) RETURN count(*) AS c");
    assert_eq!(got, want);
    let got = rows(
        &mut s,
        "MATCH (n:P {i: 1}) RETURN size(COLLECT { MATCH (n)-->(m) RETURN m.i AS x UNION MATCH (n)<--(m) RETURN m.i AS x }) AS c",
    );
    let want = rows(
        &mut s,
        "MATCH (n:P {i: 1})--(m) RETURN count(DISTINCT m.i) AS c",
    );
    assert_eq!(got, want);
    for bad in [
        "MATCH (n) RETURN COUNT { MATCH (n)-->(m) RETURN m AS x UNION MATCH (n)<--(m) RETURN m AS y } AS c",
        "MATCH (n) WHERE EXISTS { MATCH (n)-->(m) SET m.x = 1 RETURN m } RETURN n",
        "MATCH (n) RETURN COLLECT { MATCH (n)-->(m) WITH m RETURN m, n } AS l",
    ] {
        assert!(run(&mut s, bad).is_err(), "{bad}");
    }
}
