//! Pattern comprehensions (`[p = (n)-[:T]->(m) WHERE ... | expr]`) against the same
//! answers written by hand with OPTIONAL MATCH and collect(), over random graphs on
//! segments and with a delta: in RETURN, in WITH and its aggregation, in ORDER BY, in a
//! MATCH's WHERE, nested, and with a named path; and `EXISTS { }` / `COUNT { }` / `COLLECT { }` over one
//! pattern, which are read as one.

mod common;

use common::{rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;
use rand::{Rng, SeedableRng};

/// `rows` with each list value sorted and the rows sorted (a comprehension's order is
/// the expansion's, which Cypher leaves open).
fn canon(s: &mut Session, q: &str) -> Vec<String> {
    let mut out: Vec<String> = rows(s, q)
        .into_iter()
        .map(|r| {
            let r: Vec<Value> = r
                .into_iter()
                .map(|v| match v {
                    Value::List(l) => {
                        let mut l: Vec<Value> = l.iter().cloned().collect();
                        l.sort_by(quiver_query::value::order);
                        Value::List(l.into())
                    }
                    v => v,
                })
                .collect();
            format!("{r:?}")
        })
        .collect();
    out.sort();
    out
}

#[test]
fn comprehensions_answer_as_optional_match_and_collect() {
    for seed in 0..5u64 {
        let mut r = rand_pcg::Pcg64::seed_from_u64(seed);
        let d = tempfile::tempdir().unwrap();
        let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
        let n = 40;
        run(
            &mut s,
            &format!(
                "UNWIND range(0, {}) AS i CREATE (:N {{i: i, k: i % 7}})",
                n - 1
            ),
        )
        .unwrap();
        let edges: Vec<String> = (0..120)
            .map(|_| {
                let (a, b) = (r.random_range(0..n), r.random_range(0..n));
                let t = if r.random_bool(0.7) { "T" } else { "U" };
                format!("[{a}, {b}, '{t}', {}]", r.random_range(0..5))
            })
            .collect();
        for t in ["T", "U"] {
            run(
                &mut s,
                &format!(
                    "UNWIND [{}] AS e WITH e WHERE e[2] = '{t}' MATCH (a:N {{i: e[0]}}), (b:N {{i: e[1]}}) CREATE (a)-[:{t} {{w: e[3]}}]->(b)",
                    edges.join(", ")
                ),
            )
            .unwrap();
        }
        if seed % 2 == 0 {
            run(&mut s, "CHECKPOINT").unwrap();
            run(&mut s, "MATCH (a:N) WHERE a.i % 9 = 4 SET a.k = 100").unwrap();
        }
        for (comp, hand) in [
            (
                "MATCH (n:N) RETURN n.i, [(n)-[:T]->(m) | m.k] AS l",
                "MATCH (n:N) OPTIONAL MATCH (n)-[:T]->(m) RETURN n.i, collect(m.k) AS l",
            ),
            (
                "MATCH (n:N) RETURN n.i, [(n)-[r]-(m) WHERE r.w > 1 AND m.k < 5 | r.w * 10 + m.k] AS l",
                "MATCH (n:N) OPTIONAL MATCH (n)-[r]-(m) WHERE r.w > 1 AND m.k < 5 RETURN n.i, collect(r.w * 10 + m.k) AS l",
            ),
            (
                "MATCH (n:N) WITH n, size([(n)-->() | 1]) AS deg RETURN n.i, deg",
                "MATCH (n:N) OPTIONAL MATCH (n)-[r]->() RETURN n.i, count(r) AS deg",
            ),
            (
                "MATCH (n:N) RETURN n.k, sum(size([(n)<-[:U]-() | 1])) AS s",
                "MATCH (n:N) OPTIONAL MATCH (n)<-[r:U]-() RETURN n.k, count(r) AS s",
            ),
            (
                "MATCH (n:N) WHERE size([(n)-[:T]->(m) WHERE m.k = 3 | m]) > 0 RETURN n.i",
                "MATCH (n:N) WHERE exists((n)-[:T]->()) WITH n MATCH (n)-[:T]->(m) WHERE m.k = 3 RETURN DISTINCT n.i",
            ),
            // EXISTS { } and COUNT { } over one pattern.
            (
                "MATCH (n:N) WHERE exists { (n)-[:T]->(m) WHERE m.k = 3 } RETURN n.i",
                "MATCH (n:N)-[:T]->(m) WHERE m.k = 3 RETURN DISTINCT n.i",
            ),
            (
                "MATCH (n:N) WHERE NOT EXISTS { MATCH (n)<-[:U]-(x) RETURN x } RETURN n.i",
                "MATCH (n:N) OPTIONAL MATCH (n)<-[r:U]-() WITH n, count(r) AS c WHERE c = 0 RETURN n.i",
            ),
            (
                "MATCH (n:N) RETURN n.i, COUNT { (n)-[r]-() WHERE r.w > 2 } AS c",
                "MATCH (n:N) OPTIONAL MATCH (n)-[r]-() WHERE r.w > 2 RETURN n.i, count(r) AS c",
            ),
            // COLLECT { } over one pattern, as OPTIONAL MATCH and collect().
            (
                "MATCH (n:N) RETURN n.i, COLLECT { MATCH (n)-[r:T]->(m) WHERE r.w > 1 RETURN m.k * 10 + r.w } AS l",
                "MATCH (n:N) OPTIONAL MATCH (n)-[r:T]->(m) WHERE r.w > 1 RETURN n.i, collect(m.k * 10 + r.w) AS l",
            ),
            // Inside a list comprehension or reduce() that binds its start: matched
            // where it stands, per element.
            (
                "MATCH (n:N) RETURN n.i, [x IN [n] | size([(x)-[:T]->(:N) | 1])] AS l",
                "MATCH (n:N) OPTIONAL MATCH (n)-[r:T]->(:N) RETURN n.i, [count(r)] AS l",
            ),
            (
                "MATCH (n:N) RETURN n.i, reduce(s = 0, x IN [n, n] | s + size([(x)<-[:U]-() | 1])) AS c",
                "MATCH (n:N) OPTIONAL MATCH (n)<-[r:U]-() RETURN n.i, 2 * count(r) AS c",
            ),
            // With DISTINCT, as collect(DISTINCT) (canon sorts the lists' values).
            (
                "MATCH (n:N) RETURN n.i, COLLECT { MATCH (n)-[r]-(m) RETURN DISTINCT m.k } AS l",
                "MATCH (n:N) OPTIONAL MATCH (n)-[r]-(m) RETURN n.i, collect(DISTINCT m.k) AS l",
            ),
            (
                "MATCH (n:N) RETURN n.i, [p = (n)-[:T*2]->(m) | length(p) + m.k] AS l",
                "MATCH (n:N) OPTIONAL MATCH p = (n)-[:T*2]->(m) RETURN n.i, collect(length(p) + m.k) AS l",
            ),
            (
                "MATCH (n:N) RETURN n.i, [(n)-[:T]->(m) | size([(m)-[:T]->(z) | z])] AS l",
                "MATCH (n:N) OPTIONAL MATCH (n)-[e:T]->(m) OPTIONAL MATCH (m)-[r:T]->() WITH n, e, m, count(r) AS c RETURN n.i, collect(CASE WHEN m IS NULL THEN null ELSE c END) AS l",
            ),
        ] {
            assert_eq!(canon(&mut s, comp), canon(&mut s, hand), "seed {seed}: {comp}");
        }
        // ORDER BY a comprehension's size.
        let got = rows(
            &mut s,
            "MATCH (n:N) RETURN n.i ORDER BY size([(n)-->() | 1]) DESC, n.i LIMIT 5",
        );
        let want = rows(
            &mut s,
            "MATCH (n:N) OPTIONAL MATCH (n)-[r]->() WITH n, count(r) AS c RETURN n.i ORDER BY c DESC, n.i LIMIT 5",
        );
        assert_eq!(got, want, "seed {seed}");
    }
}

/// `WHERE (a)-[:T]->(b)` with both ends bound is a probe of the adjacency (a binary
/// search in the segments, a walk from the smaller end with a delta): it answers as the
/// MATCH of the same pattern, with the end's labels honoured, on segments, after
/// deleted relationships were folded, and with a delta.
#[test]
fn bound_pattern_predicates_answer_as_match() {
    for seed in 0..6u64 {
        let mut r = rand_pcg::Pcg64::seed_from_u64(100 + seed);
        let d = tempfile::tempdir().unwrap();
        let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
        let n = 30;
        run(
            &mut s,
            &format!("UNWIND range(0, {}) AS i CREATE (:N {{i: i}})", n - 1),
        )
        .unwrap();
        run(&mut s, "MATCH (a:N) WHERE a.i % 3 = 0 SET a:M").unwrap();
        // A hub with many relationships, parallel ones and self-loops.
        let mut edges: Vec<String> = (0..150)
            .map(|_| {
                let (a, b) = (r.random_range(0..n), r.random_range(0..n));
                let t = if r.random_bool(0.7) { "T" } else { "U" };
                format!("[{a}, {b}, '{t}', {}]", r.random_range(0..4))
            })
            .collect();
        edges.extend((0..n).map(|b| format!("[0, {b}, 'T', 9]")));
        edges.push("[5, 5, 'T', 1]".into());
        for t in ["T", "U"] {
            run(
                &mut s,
                &format!(
                    "UNWIND [{}] AS e WITH e WHERE e[2] = '{t}' MATCH (a:N {{i: e[0]}}), (b:N {{i: e[1]}}) CREATE (a)-[:{t} {{w: e[3]}}]->(b)",
                    edges.join(", ")
                ),
            )
            .unwrap();
        }
        match seed % 3 {
            // Segments only, some relationships deleted and folded.
            0 => {
                run(&mut s, "CHECKPOINT").unwrap();
                run(&mut s, "MATCH ()-[r:T {w: 0}]->() DELETE r").unwrap();
                run(&mut s, "CHECKPOINT").unwrap();
            }
            // Segments and a delta that deletes and adds.
            1 => {
                run(&mut s, "CHECKPOINT").unwrap();
                run(&mut s, "MATCH ()-[r:T {w: 0}]->() DELETE r").unwrap();
                run(
                    &mut s,
                    "MATCH (a:N {i: 1}), (b:N {i: 2}) CREATE (a)-[:T {w: 5}]->(b)",
                )
                .unwrap();
            }
            // The delta only.
            _ => {}
        }
        for (pred, pattern) in [
            ("(a)-[:T]->(b)", "(a)-[:T]->(b)"),
            ("(b)<-[:T]-(a)", "(a)-[:T]->(b)"),
            ("(a)-[:T]-(b)", "(a)-[:T]-(b)"),
            ("(a)-->(b)", "(a)-->(b)"),
            ("(a)<-[:U|T]-(b)", "(a)<-[:U|T]-(b)"),
            ("(a)-[:T]->(b:M)", "(a)-[:T]->(b:M)"),
            ("(a:M)-[:T]->(b)", "(a:M)-[:T]->(b)"),
            ("(a)-[:NONE]->(b)", "(a)-[:NONE]->(b)"),
        ] {
            let probe =
                format!("MATCH (a:N), (b:N) WHERE {pred} RETURN a.i AS x, b.i AS y ORDER BY x, y");
            let matched =
                format!("MATCH {pattern} RETURN DISTINCT a.i AS x, b.i AS y ORDER BY x, y");
            assert_eq!(
                rows(&mut s, &probe),
                rows(&mut s, &matched),
                "seed {seed}: {pred}"
            );
            let none = format!("MATCH (a:N), (b:N) WHERE NOT {pred} RETURN count(*)");
            let all = rows(&mut s, &matched).len() as i64;
            assert_eq!(
                rows(&mut s, &none),
                vec![vec![Value::Int((n * n) as i64 - all)]],
                "seed {seed}: NOT {pred}"
            );
        }
    }
}
