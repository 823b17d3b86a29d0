//! Query results against a naive in-test model of random graphs: k-hop trails with
//! relationship uniqueness, variable length, undirected patterns, shortest paths,
//! aggregations, OPTIONAL MATCH, null handling, ORDER BY + LIMIT, relationship identity
//! from both directions, property indexes, the memory limit, concurrent readers, and
//! random queries that must fail cleanly rather than panic.

use proptest::prelude::*;
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::{query, Params, QueryError, QueryOptions, Session, Value};
use quiver_storage::manifest::IdType;
use quiver_storage::{Database, OpenMode};
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write;
use std::path::Path;

/// A random graph: nodes `0..n` with ids `id = i`, label A or B, property `v` (null for
/// every fifth node); edges of type R (with property `w`) and S (none), with parallel
/// edges and self-loops.
struct Model {
    n: usize,
    labels: Vec<&'static str>,
    v: Vec<Option<i64>>,
    /// (src, dst, type) in file order; the index within its type is its edge id there.
    edges: Vec<(usize, usize, &'static str)>,
}

fn model(seed: u64, n: usize, m: usize) -> Model {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    let labels = (0..n)
        .map(|_| if r.random_bool(0.6) { "A" } else { "B" })
        .collect();
    let v = (0..n)
        .map(|i| (i % 5 != 0).then(|| r.random_range(0..10)))
        .collect();
    let mut edges = Vec::new();
    for _ in 0..m {
        let a = r.random_range(0..n);
        let b = if r.random_bool(0.05) {
            a
        } else {
            r.random_range(0..n)
        };
        let t = if r.random_bool(0.5) { "R" } else { "S" };
        edges.push((a, b, t));
        if r.random_bool(0.05) {
            edges.push((a, b, t)); // a parallel edge
        }
    }
    Model {
        n,
        labels,
        v,
        edges,
    }
}

fn write_and_import(dir: &Path, m: &Model) -> std::path::PathBuf {
    let mut nodes = String::from("id:ID,:LABEL,v:int\n");
    for i in 0..m.n {
        let v = m.v[i].map(|x| x.to_string()).unwrap_or_default();
        writeln!(nodes, "{i},{},{v}", m.labels[i]).unwrap();
    }
    let mut edges = String::from(":START_ID,:END_ID,:TYPE,w:int\n");
    for (k, (a, b, t)) in m.edges.iter().enumerate() {
        let w = if *t == "R" {
            k.to_string()
        } else {
            String::new()
        };
        writeln!(edges, "{a},{b},{t},{w}").unwrap();
    }
    std::fs::write(dir.join("n.csv"), nodes).unwrap();
    std::fs::write(dir.join("e.csv"), edges).unwrap();
    let mut cfg = ImportConfig::new(dir.join("g.qdb"));
    cfg.nodes
        .push(InputGroup::parse(&dir.join("n.csv").display().to_string()).unwrap());
    cfg.relationships
        .push(InputGroup::parse(&dir.join("e.csv").display().to_string()).unwrap());
    cfg.id_type = IdType::Integer;
    cfg.memory_budget_bytes = 64 << 20;
    cfg.threads = 2;
    import(&cfg, &NoProgress).unwrap();
    cfg.db
}

fn params(kv: &[(&str, i64)]) -> Params {
    kv.iter()
        .map(|(k, v)| (k.to_string(), Value::Int(*v)))
        .collect()
}

fn ints(rows: &[Vec<Value>], col: usize) -> Vec<i64> {
    let mut v: Vec<i64> = rows
        .iter()
        .map(|r| match r[col] {
            Value::Int(i) => i,
            ref x => panic!("expected an integer, got {x:?}"),
        })
        .collect();
    v.sort();
    v
}

impl Model {
    /// Out-edges (edge index, neighbour) of `a` over `types` in the given direction.
    fn step(&self, a: usize, types: &[&str], dir: i8) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (k, &(s, d, t)) in self.edges.iter().enumerate() {
            if !types.contains(&t) {
                continue;
            }
            if dir >= 0 && s == a {
                out.push((k, d));
            }
            if dir <= 0 && d == a && !(dir == 0 && s == d) {
                out.push((k, s));
            }
        }
        out
    }

    /// End nodes of every trail (no edge twice) of length min..=max from `a`.
    fn trails(&self, a: usize, types: &[&str], dir: i8, min: usize, max: usize) -> Vec<i64> {
        let mut out = Vec::new();
        let mut used = Vec::new();
        self.dfs(a, types, dir, min, max, &mut used, &mut out);
        let mut out: Vec<i64> = out.into_iter().map(|x| x as i64).collect();
        out.sort();
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn dfs(
        &self,
        at: usize,
        types: &[&str],
        dir: i8,
        min: usize,
        max: usize,
        used: &mut Vec<usize>,
        out: &mut Vec<usize>,
    ) {
        if used.len() >= min {
            out.push(at);
        }
        if used.len() == max {
            return;
        }
        for (k, nb) in self.step(at, types, dir) {
            if used.contains(&k) {
                continue;
            }
            used.push(k);
            self.dfs(nb, types, dir, min, max, used, out);
            used.pop();
        }
    }

    fn bfs_dist(&self, a: usize, b: usize, types: &[&str]) -> Option<usize> {
        self.bfs_dist_through(a, b, types, |_| true)
    }

    /// The least weight of a walk from `a` to each node over at most `max` steps in
    /// `dir` whose every reached node passes `ok` (`w`: a step's weight from its edge
    /// and the node it reaches), by dynamic programming over the hops: an oracle that
    /// shares nothing with Dijkstra's search.
    fn lightest(
        &self,
        a: usize,
        dir: i8,
        max: usize,
        w: impl Fn(usize, usize) -> i64,
        ok: impl Fn(usize) -> bool,
    ) -> Vec<Option<i64>> {
        let mut d = vec![None; self.n];
        d[a] = Some(0);
        for _ in 0..max {
            let mut next = d.clone();
            for (u, du) in d.iter().enumerate() {
                let Some(du) = *du else { continue };
                for (k, v) in self.step(u, &["R", "S"], dir) {
                    if ok(v) {
                        let nw = du + w(k, v);
                        if next[v].is_none_or(|x: i64| nw < x) {
                            next[v] = Some(nw);
                        }
                    }
                }
            }
            d = next;
        }
        d
    }

    /// How many trails from `a` to `b` of at most `max` steps weigh exactly `total`
    /// (weights at least 1, so the search stops past `total`).
    fn count_weighing(
        &self,
        at: usize,
        b: usize,
        max: usize,
        total: i64,
        w: &impl Fn(usize, usize) -> i64,
        used: &mut Vec<usize>,
    ) -> usize {
        let mut n = usize::from(at == b && total == 0 && !used.is_empty());
        if used.len() == max || total <= 0 {
            return n;
        }
        for (k, v) in self.step(at, &["R", "S"], 1) {
            if !used.contains(&k) && w(k, v) <= total {
                used.push(k);
                n += self.count_weighing(v, b, max, total - w(k, v), w, used);
                used.pop();
            }
        }
        n
    }

    /// The length of the shortest path from `a` to `b` whose every node passes `ok`.
    fn bfs_dist_through(
        &self,
        a: usize,
        b: usize,
        types: &[&str],
        ok: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        if !ok(a) || !ok(b) {
            return None;
        }
        let mut dist = vec![usize::MAX; self.n];
        dist[a] = 0;
        let mut q = VecDeque::from([a]);
        while let Some(u) = q.pop_front() {
            for (_, v) in self.step(u, types, 1) {
                if dist[v] == usize::MAX && ok(v) {
                    dist[v] = dist[u] + 1;
                    q.push_back(v);
                }
            }
        }
        (dist[b] != usize::MAX).then_some(dist[b])
    }
}

#[test]
fn patterns_match_the_model() {
    for seed in [11u64, 12] {
        let dir = tempfile::tempdir().unwrap();
        let m = model(seed, 40, 160);
        let db_path = write_and_import(dir.path(), &m);
        let db = Database::open(&db_path, OpenMode::Mapped).unwrap();
        let all = ["R", "S"];
        for a in [0usize, 1, 7, 13, 39] {
            let p = params(&[("x", a as i64)]);
            let q = |text: &str| {
                query(&db, text, &p)
                    .unwrap_or_else(|e| panic!("{text}: {e}"))
                    .1
            };
            // One hop, each direction and undirected.
            let got = ints(&q("MATCH (a {id: $x})-[:R]->(b) RETURN b.id"), 0);
            assert_eq!(got, m.trails(a, &["R"], 1, 1, 1), "1 hop out from {a}");
            let got = ints(&q("MATCH (a {id: $x})<--(b) RETURN b.id"), 0);
            assert_eq!(got, m.trails(a, &all, -1, 1, 1), "1 hop in to {a}");
            let got = ints(&q("MATCH (a {id: $x})--(b) RETURN b.id"), 0);
            assert_eq!(got, m.trails(a, &all, 0, 1, 1), "undirected from {a}");
            // Fixed k-hop: every trail, and DISTINCT ends.
            let got = ints(&q("MATCH (a {id: $x})-->()-->()-->(c) RETURN c.id"), 0);
            assert_eq!(got, m.trails(a, &all, 1, 3, 3), "3-hop trails from {a}");
            let got = ints(
                &q("MATCH (a {id: $x})-->()-->(c:A) RETURN DISTINCT c.id"),
                0,
            );
            let want: BTreeSet<i64> = m
                .trails(a, &all, 1, 2, 2)
                .into_iter()
                .filter(|&c| m.labels[c as usize] == "A")
                .collect();
            assert_eq!(
                got,
                want.into_iter().collect::<Vec<_>>(),
                "2-hop distinct :A"
            );
            // Variable length, both ways.
            let got = ints(&q("MATCH (a {id: $x})-[*1..3]->(c) RETURN c.id"), 0);
            assert_eq!(got, m.trails(a, &all, 1, 1, 3), "*1..3 from {a}");
            let got = ints(
                &q("MATCH (a {id: $x})-[*1..3]->(c) RETURN DISTINCT c.id"),
                0,
            );
            let want: BTreeSet<i64> = m.trails(a, &all, 1, 1, 3).into_iter().collect();
            assert_eq!(
                got,
                want.into_iter().collect::<Vec<_>>(),
                "*1..3 DISTINCT from {a}"
            );
            let got = ints(
                &q("MATCH (a {id: $x})-->()-->(c) WHERE c.v > 3 RETURN DISTINCT c.id"),
                0,
            );
            let want: BTreeSet<i64> = m
                .trails(a, &all, 1, 2, 2)
                .into_iter()
                .filter(|&c| m.v[c as usize].is_some_and(|v| v > 3))
                .collect();
            assert_eq!(
                got,
                want.into_iter().collect::<Vec<_>>(),
                "2-hop DISTINCT with a filter from {a}"
            );
            let got = ints(&q("MATCH (a {id: $x})-->(b)-->(c) RETURN DISTINCT c.id"), 0);
            let want: BTreeSet<i64> = m.trails(a, &all, 1, 2, 2).into_iter().collect();
            assert_eq!(
                got,
                want.into_iter().collect::<Vec<_>>(),
                "2-hop DISTINCT from {a}"
            );
            let got = ints(&q("MATCH (c)-[:S*0..2]->(a {id: $x}) RETURN c.id"), 0);
            assert_eq!(
                got,
                m.trails(a, &["S"], -1, 0, 2),
                "leftward *0..2 into {a}"
            );
            // Path length agrees with the relationships listed.
            for r in
                q("MATCH p = (a {id: $x})-[rs*2]->(c) RETURN length(p), size(rs), size(nodes(p))")
            {
                assert_eq!(
                    (r[0].clone(), r[1].clone(), r[2].clone())
                        .0
                        .eq3(&Value::Int(2)),
                    Some(true)
                );
                assert_eq!(r[1].eq3(&Value::Int(2)), Some(true));
                assert_eq!(r[2].eq3(&Value::Int(3)), Some(true));
            }
            // Shortest paths against BFS distances.
            for b in [2usize, 5, 21, 30] {
                let p = params(&[("x", a as i64), ("y", b as i64)]);
                let rows = query(
                    &db,
                    "MATCH p = shortestPath((a {id: $x})-[*..15]->(b {id: $y})) RETURN length(p)",
                    &p,
                )
                .unwrap()
                .1;
                let want = if a == b { None } else { m.bfs_dist(a, b, &all) };
                match want {
                    None => assert!(rows.is_empty(), "no path {a}->{b}, got {rows:?}"),
                    Some(d) => assert_eq!(ints(&rows, 0), vec![d as i64], "shortest {a}->{b}"),
                }
                let rows = query(&db, "MATCH p = (a {id: $x})-[*BFS ..15]->(b {id: $y}) RETURN [n IN nodes(p) | n.id]", &p).unwrap().1;
                if let (Some(d), Some(r)) = (want, rows.first()) {
                    let Value::List(l) = &r[0] else { panic!() };
                    assert_eq!(l.len(), d + 1);
                    assert!(
                        l[0].eq3(&Value::Int(a as i64)) == Some(true)
                            && l[d].eq3(&Value::Int(b as i64)) == Some(true)
                    );
                }
                // A predicate on every node goes into the search: the shortest path of
                // those whose nodes all pass (Neo4j's shortest path planning), not the
                // shortest one dropped when it fails.
                let rows = query(
                    &db,
                    "MATCH p = shortestPath((a {id: $x})-[*..15]->(b {id: $y})) WHERE all(n IN nodes(p) WHERE n.v >= 2) RETURN length(p)",
                    &p,
                )
                .unwrap()
                .1;
                let through = if a == b {
                    None
                } else {
                    m.bfs_dist_through(a, b, &all, |i| m.v[i].is_some_and(|v| v >= 2))
                };
                match through {
                    None => assert!(
                        rows.is_empty(),
                        "no path {a}->{b} through v >= 2, got {rows:?}"
                    ),
                    Some(d) => assert_eq!(
                        ints(&rows, 0),
                        vec![d as i64],
                        "shortest {a}->{b} through v >= 2"
                    ),
                }
                let rows = query(
                    &db,
                    "MATCH p = shortestPath((a {id: $x})-[*..15]->(b {id: $y})) WHERE none(n IN nodes(p) WHERE n.v < 2 OR n.v IS NULL) RETURN length(p)",
                    &p,
                )
                .unwrap()
                .1;
                assert_eq!(rows.len(), usize::from(through.is_some()));
                // Memgraph's spelling: a filter lambda over each step's relationship
                // and the node it reaches (not the start node).
                let rows = query(
                    &db,
                    "MATCH p = (a {id: $x})-[*BFS ..15 (e, n | n.v >= 2)]->(b {id: $y}) RETURN length(p)",
                    &p,
                )
                .unwrap()
                .1;
                let lambda = if a == b {
                    None
                } else {
                    m.bfs_dist_through(a, b, &all, |i| i == a || m.v[i].is_some_and(|v| v >= 2))
                };
                assert_eq!(
                    ints(&rows, 0),
                    lambda.map(|d| d as i64).into_iter().collect::<Vec<_>>(),
                    "BFS lambda {a}->{b}"
                );
                let rows = query(
                    &db,
                    "MATCH p = (a {id: $x})-[*WSHORTEST 15 (e, n | 2) total]->(b {id: $y}) RETURN total",
                    &p,
                )
                .unwrap()
                .1;
                assert_eq!(
                    ints(&rows, 0),
                    want.map(|d| 2 * d as i64).into_iter().collect::<Vec<_>>(),
                    "WSHORTEST {a}->{b}"
                );
                let all_rows = query(&db, "MATCH p = allShortestPaths((a {id: $x})-[*..15]->(b {id: $y})) RETURN length(p)", &p).unwrap().1;
                if let Some(d) = want {
                    assert!(
                        !all_rows.is_empty() && ints(&all_rows, 0).iter().all(|&l| l == d as i64)
                    );
                }
            }
        }
        // A relationship has one identity whichever side it is reached from.
        let out = ints(
            &query(&db, "MATCH (a)-[r:S]->(b) RETURN id(r)", &Params::new())
                .unwrap()
                .1,
            0,
        );
        let inc = ints(
            &query(&db, "MATCH (b)<-[r:S]-(a) RETURN id(r)", &Params::new())
                .unwrap()
                .1,
            0,
        );
        assert_eq!(out, inc);
        assert_eq!(out.len(), m.edges.iter().filter(|e| e.2 == "S").count());
        // Relationship properties.
        let w = ints(
            &query(&db, "MATCH ()-[r:R]->() RETURN r.w", &Params::new())
                .unwrap()
                .1,
            0,
        );
        let mut want: Vec<i64> = m
            .edges
            .iter()
            .enumerate()
            .filter(|e| e.1 .2 == "R")
            .map(|e| e.0 as i64)
            .collect();
        want.sort();
        assert_eq!(w, want);
    }
}

#[test]
fn aggregation_optional_and_nulls_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(5, 60, 150);
    let db_path = write_and_import(dir.path(), &m);
    let db = Database::open(&db_path, OpenMode::Loaded).unwrap();
    let q = |text: &str| {
        query(&db, text, &Params::new())
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .1
    };
    // Group by label: count, count(v) (skips nulls), sum, min, max, avg.
    let rows = q("MATCH (n) RETURN labels(n)[0] AS l, count(*), count(n.v), sum(n.v), min(n.v), max(n.v), avg(n.v) ORDER BY l");
    for (li, l) in ["A", "B"].iter().enumerate() {
        let vs: Vec<i64> = (0..m.n)
            .filter(|&i| m.labels[i] == *l)
            .filter_map(|i| m.v[i])
            .collect();
        let all = (0..m.n).filter(|&i| m.labels[i] == *l).count();
        let r = &rows[li];
        assert_eq!(r[0].eq3(&Value::str(l)), Some(true));
        assert_eq!(r[1].eq3(&Value::Int(all as i64)), Some(true));
        assert_eq!(r[2].eq3(&Value::Int(vs.len() as i64)), Some(true));
        assert_eq!(r[3].eq3(&Value::Int(vs.iter().sum())), Some(true));
        assert_eq!(r[4].eq3(&Value::Int(*vs.iter().min().unwrap())), Some(true));
        assert_eq!(r[5].eq3(&Value::Int(*vs.iter().max().unwrap())), Some(true));
        let avg = vs.iter().sum::<i64>() as f64 / vs.len() as f64;
        assert_eq!(r[6].eq3(&Value::Float(avg)), Some(true));
    }
    // OPTIONAL MATCH keeps nodes without S-out-edges with a zero count.
    let rows = q("MATCH (a) OPTIONAL MATCH (a)-[:S]->(b) RETURN a.id, count(b) ORDER BY a.id");
    assert_eq!(rows.len(), m.n);
    for (i, r) in rows.iter().enumerate() {
        let want = m.step(i, &["S"], 1).len() as i64;
        assert_eq!(r[1].eq3(&Value::Int(want)), Some(true), "node {i}");
    }
    // Null handling: comparisons with null filter rows out; IS NULL finds them.
    let gt = q("MATCH (n) WHERE n.v > 4 RETURN count(*)");
    let want = m.v.iter().filter(|v| v.is_some_and(|x| x > 4)).count() as i64;
    assert_eq!(gt[0][0].eq3(&Value::Int(want)), Some(true));
    let nulls = q("MATCH (n) WHERE n.v IS NULL RETURN count(*)");
    assert_eq!(nulls[0][0].eq3(&Value::Int((m.n / 5) as i64)), Some(true));
    let not = q("MATCH (n) WHERE NOT n.v > 4 RETURN count(*)");
    let want_not = m.v.iter().filter(|v| v.is_some_and(|x| x <= 4)).count() as i64;
    assert_eq!(not[0][0].eq3(&Value::Int(want_not)), Some(true));
    // ORDER BY + LIMIT (top-k) agrees with a full sort; null sorts after every value
    // (last ascending, first descending).
    let first = q("MATCH (n) RETURN n.v ORDER BY n.v DESC LIMIT 1");
    assert!(first[0][0].is_null());
    let top = q("MATCH (n) WHERE n.v IS NOT NULL RETURN n.id, n.v ORDER BY n.v DESC, n.id LIMIT 7");
    let mut want: Vec<(i64, i64)> = (0..m.n)
        .filter_map(|i| m.v[i].map(|v| (-v, i as i64)))
        .collect();
    want.sort();
    let got: Vec<(i64, i64)> = top
        .iter()
        .map(|r| match (&r[1], &r[0]) {
            (Value::Int(v), Value::Int(i)) => (-v, *i),
            x => panic!("{x:?}"),
        })
        .collect();
    assert_eq!(got, want[..7].to_vec());
    // Rows with equal keys keep their input order, with or without a limit.
    let tied = q("MATCH (n) WHERE n.v IS NULL RETURN n.id ORDER BY n.v LIMIT 3");
    let in_order: Vec<String> = tied.iter().map(|r| format!("{:?}", r[0])).collect();
    assert_eq!(in_order, ["Int(0)", "Int(5)", "Int(10)"]);
    let last = q("MATCH (n) RETURN n.v ORDER BY n.v");
    assert!(last.last().unwrap()[0].is_null());
    // WITH, UNWIND, collect, DISTINCT, UNION.
    let r = q("MATCH (n:A) WITH n.v AS v, count(*) AS c WHERE v IS NOT NULL RETURN sum(c)");
    let want = (0..m.n)
        .filter(|&i| m.labels[i] == "A" && m.v[i].is_some())
        .count() as i64;
    assert_eq!(r[0][0].eq3(&Value::Int(want)), Some(true));
    let r = q("UNWIND [3, 1, 2, 1, null] AS x RETURN DISTINCT x ORDER BY x");
    assert_eq!(r.len(), 4);
    let r = q("RETURN 1 AS x UNION RETURN 1 AS x UNION RETURN 2 AS x");
    assert_eq!(r.len(), 2);
    let r = q("RETURN 1 AS x UNION ALL RETURN 1 AS x UNION ALL RETURN 2 AS x");
    assert_eq!(r.len(), 3);
    // Mixing the two is refused, as openCypher says.
    assert!(query(
        &db,
        "RETURN 1 AS x UNION RETURN 1 AS x UNION ALL RETURN 2 AS x",
        &Params::new()
    )
    .is_err());
    let r = q("MATCH (n) WHERE n.id < 3 RETURN collect(n.id) AS ids");
    let Value::List(l) = &r[0][0] else { panic!() };
    assert_eq!(l.len(), 3);
    // Pattern predicates.
    let r = q("MATCH (a) WHERE (a)-[:R]->() RETURN count(*)");
    let want = (0..m.n)
        .filter(|&i| !m.step(i, &["R"], 1).is_empty())
        .count() as i64;
    assert_eq!(r[0][0].eq3(&Value::Int(want)), Some(true));
    let r = q("MATCH (a) WHERE NOT exists((a)<-[:S]-()) RETURN count(*)");
    let want = (0..m.n)
        .filter(|&i| m.step(i, &["S"], -1).is_empty())
        .count() as i64;
    assert_eq!(r[0][0].eq3(&Value::Int(want)), Some(true));
}

#[test]
fn expressions_and_functions() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(3, 5, 5);
    let db = Database::open(&write_and_import(dir.path(), &m), OpenMode::Mapped).unwrap();
    let one = |text: &str| -> Value {
        let rows = query(&db, text, &Params::new())
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .1;
        rows[0][0].clone()
    };
    let cases: &[(&str, Value)] = &[
        ("RETURN 1 + 2 * 3", Value::Int(7)),
        ("RETURN 7 / 2", Value::Int(3)),
        ("RETURN 2 ^ 3", Value::Float(8.0)),
        ("RETURN null AND false", Value::Bool(false)),
        ("RETURN null OR true", Value::Bool(true)),
        ("RETURN null = null", Value::Null),
        ("RETURN 2 IN [1, null, 2]", Value::Bool(true)),
        ("RETURN 3 IN [1, null, 2]", Value::Null),
        ("RETURN 'abc' STARTS WITH 'ab'", Value::Bool(true)),
        ("RETURN 'abc' =~ 'a.c'", Value::Bool(true)),
        (
            "RETURN CASE 2 WHEN 1 THEN 'a' WHEN 2 THEN 'b' END",
            Value::str("b"),
        ),
        (
            "RETURN [x IN range(1, 10) WHERE x % 2 = 0 | x * x][1..3]",
            Value::list(vec![Value::Int(16), Value::Int(36)]),
        ),
        ("RETURN size([1, 2, 3])", Value::Int(3)),
        ("RETURN head([4, 5])", Value::Int(4)),
        ("RETURN coalesce(null, 3)", Value::Int(3)),
        ("RETURN toInteger('42')", Value::Int(42)),
        (
            "RETURN toUpper(substring('quiver', 1, 3))",
            Value::str("UIV"),
        ),
        ("RETURN split('a,b', ',')[1]", Value::str("b")),
        ("RETURN date('2024-02-29').month", Value::Int(2)),
        (
            "RETURN localdatetime('2024-02-29T10:11:12').hour",
            Value::Int(10),
        ),
        ("RETURN round(2.5)", Value::Float(3.0)),
        ("RETURN abs(-3)", Value::Int(3)),
        ("RETURN reverse('abc')", Value::str("cba")),
    ];
    for (q, want) in cases {
        let got = one(q);
        assert!(
            quiver_query::value::Key(got.clone()) == quiver_query::value::Key(want.clone()),
            "{q}: got {got:?}, want {want:?}"
        );
    }
    let got = one("UNWIND [1, 2, 3, 4] AS x RETURN percentileDisc(x, 0.5), stDev(x)");
    assert_eq!(got.eq3(&Value::Int(2)), Some(true));
    // Graph values.
    let rows = query(
        &db,
        "MATCH (n {id: 1}) RETURN n, labels(n), properties(n).id, keys(n)",
        &Params::new(),
    )
    .unwrap()
    .1;
    assert!(matches!(rows[0][0], Value::Node(_)));
    // Errors are values, with a clear message.
    for (q, needle) in [
        ("RETURN 1 / 0", "division by zero"),
        ("RETURN nosuch(1)", "unknown function"),
        ("RETURN $missing", "parameter $missing"),
        ("RETURN 'a' - 1", "type error"),
        ("MATCH (n) RETURN m", "not defined"),
        ("MATCH (n RETURN n", "expected"),
    ] {
        let e = query(&db, q, &Params::new()).expect_err(q).to_string();
        assert!(e.contains(needle), "{q}: {e}");
    }
}

#[test]
fn property_index_seeks_and_agrees_with_scans() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(9, 200, 100);
    let db_path = write_and_import(dir.path(), &m);
    let mut s = Session::open(&db_path, OpenMode::Mapped).unwrap();
    let mut rows = Vec::new();
    let mut collect = |q: &str, s: &mut Session| {
        rows.clear();
        let sum = s
            .run(q, &Params::new(), &mut |_, b| {
                for r in 0..b.len {
                    rows.push(b.row(r));
                }
                Ok(())
            })
            .unwrap();
        (sum, rows.clone())
    };
    let (_, before) = collect("MATCH (n:A {v: 3}) RETURN n.id ORDER BY n.id", &mut s);
    let (sum, _) = collect("CREATE INDEX ON :A(v)", &mut s);
    assert!(sum.changed);
    let (plan, _) = collect("EXPLAIN MATCH (n:A {v: 3}) RETURN n.id", &mut s);
    assert!(plan.plan.unwrap().contains("NodeIndexSeek"));
    let (_, after) = collect("MATCH (n:A {v: 3}) RETURN n.id ORDER BY n.id", &mut s);
    assert_eq!(format!("{before:?}"), format!("{after:?}"));
    let want = (0..m.n)
        .filter(|&i| m.labels[i] == "A" && m.v[i] == Some(3))
        .count();
    assert_eq!(after.len(), want);
    // Range seeks return what a scan returns, with the predicates still applied.
    for q in [
        "MATCH (n:A) WHERE n.v > 6 RETURN n.id ORDER BY n.id",
        "MATCH (n:A) WHERE 2 <= n.v AND n.v < 5 RETURN n.id ORDER BY n.id",
        "MATCH (n:A) WHERE n.v <= 3.5 RETURN n.id ORDER BY n.id",
        "MATCH (n:A) WHERE n.v > 'x' RETURN n.id ORDER BY n.id",
    ] {
        let (plan, _) = collect(&format!("EXPLAIN {q}"), &mut s);
        assert!(plan.plan.unwrap().contains("NodeIndexRangeSeek"), "{q}");
        let (_, got) = collect(q, &mut s);
        let want: Vec<i64> = (0..m.n)
            .filter(|&i| m.labels[i] == "A")
            .filter(
                |&i| match (q.contains("> 6"), q.contains("2 <="), q.contains("3.5")) {
                    (true, _, _) => m.v[i].is_some_and(|v| v > 6),
                    (_, true, _) => m.v[i].is_some_and(|v| (2..5).contains(&v)),
                    (_, _, true) => m.v[i].is_some_and(|v| v <= 3),
                    _ => false,
                },
            )
            .map(|i| i as i64)
            .collect();
        assert_eq!(ints(&got, 0), want, "{q}");
    }
    // id(n) is a seek too.
    let (plan, _) = collect(
        "EXPLAIN MATCH (n) WHERE id(n) IN [3, 4, 999999] RETURN n.id",
        &mut s,
    );
    assert!(plan.plan.unwrap().contains("NodeByIdSeek"));
    let (_, got) = collect(
        "MATCH (n) WHERE id(n) IN [3, 4, 999999] RETURN id(n)",
        &mut s,
    );
    assert_eq!(ints(&got, 0), vec![3, 4]);
    let (_, shown) = collect("SHOW INDEXES", &mut s);
    assert!(shown.iter().any(
        |r| r[6].eq3(&Value::list(vec![Value::str("A")])) == Some(true)
            && r[7].eq3(&Value::list(vec![Value::str("v")])) == Some(true)
    ));
    // The index survives reopening; the data files it sits beside are still there.
    drop(s);
    let mut s = Session::open(&db_path, OpenMode::Loaded).unwrap();
    let (_, again) = collect("MATCH (n:A {v: 3}) RETURN n.id ORDER BY n.id", &mut s);
    assert_eq!(format!("{again:?}"), format!("{before:?}"));
    let err = s
        .run("CREATE INDEX ON :A(v)", &Params::new(), &mut |_, _| Ok(()))
        .unwrap_err();
    assert!(err.to_string().contains("exists already"));
    collect("DROP INDEX ON :A(v)", &mut s);
    let (plan, _) = collect("EXPLAIN MATCH (n:A {v: 3}) RETURN n.id", &mut s);
    assert!(!plan.plan.unwrap().contains("NodeIndexSeek"));
}

#[test]
fn memory_limit_fails_with_the_operator_named() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(4, 300, 3000);
    let db = Database::open(&write_and_import(dir.path(), &m), OpenMode::Mapped).unwrap();
    let ix = quiver_query::index::IndexSet::load(&db);
    let opts = QueryOptions {
        memory_limit: 64 << 10,
        ..QueryOptions::default()
    };
    // A sort with nowhere to spill fails; with a temporary directory (the default) it
    // spills and answers in order.
    let sort = "MATCH (a)-->(b)-->(c) RETURN a.id, b.id, c.id ORDER BY c.id";
    let no_spill = QueryOptions {
        temp_dir: None,
        ..opts.clone()
    };
    let err = quiver_query::run(
        &db,
        &ix,
        sort,
        &Params::new(),
        &no_spill,
        &mut |_, _| Ok(()),
    )
    .unwrap_err();
    match err {
        QueryError::Memory { operator, .. } => assert_eq!(operator, "Sort"),
        e => panic!("expected a memory error, got {e}"),
    }
    let mut last = i64::MIN;
    let mut n = 0;
    quiver_query::run(&db, &ix, sort, &Params::new(), &opts, &mut |_, b| {
        for v in &b.cols[2] {
            let Value::Int(c) = v else { panic!("{v:?}") };
            assert!(*c >= last);
            last = *c;
            n += 1;
        }
        Ok(())
    })
    .unwrap();
    assert!(n > 10_000, "{n} rows");
    let err = quiver_query::run(
        &db,
        &ix,
        "MATCH (a)-->(b)-->(c) RETURN DISTINCT a.id, c.id",
        &Params::new(),
        &opts,
        &mut |_, _| Ok(()),
    )
    .unwrap_err();
    assert!(err.to_string().contains("Distinct"), "{err}");
    // Unbounded variable length goes deep: its stack is accounted too.
    let err = quiver_query::run(
        &db,
        &ix,
        "MATCH (a {id: 0})-[*]->(b) RETURN count(*)",
        &Params::new(),
        &opts,
        &mut |_, _| Ok(()),
    )
    .unwrap_err();
    assert!(err.to_string().contains("VarLengthExpand"), "{err}");
}

#[test]
fn concurrent_readers_see_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(8, 100, 600);
    let db = Database::open(&write_and_import(dir.path(), &m), OpenMode::Mapped).unwrap();
    let q = "MATCH (a)-->()-->(c) RETURN a.id, count(DISTINCT c) ORDER BY a.id";
    let want = query(&db, q, &Params::new()).unwrap().1;
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| query(&db, q, &Params::new()).unwrap().1))
            .collect();
        for h in hs {
            let got = h.join().unwrap();
            assert_eq!(got.len(), want.len());
            for (a, b) in got.iter().zip(want.iter()) {
                assert_eq!(a[1].eq3(&b[1]), Some(true));
            }
        }
    });
}

const TOKENS: &[&str] = &[
    "MATCH",
    "(",
    ")",
    "n",
    "m",
    ":A",
    ":B",
    "-",
    "->",
    "<-",
    "[",
    "]",
    "*",
    "..",
    "2",
    "{",
    "}",
    "id:",
    "1",
    "RETURN",
    "WITH",
    "WHERE",
    "=",
    "<",
    "AND",
    "OR",
    "NOT",
    ",",
    ".",
    "v",
    "count(*)",
    "DISTINCT",
    "ORDER BY",
    "LIMIT",
    "UNWIND",
    "AS",
    "x",
    "null",
    "'s'",
    "+",
    "OPTIONAL",
    "shortestPath",
    "collect(",
    "size(",
    "[x IN",
    "|",
    "CASE",
    "WHEN",
    "THEN",
    "END",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn random_queries_never_panic(toks in proptest::collection::vec(0..TOKENS.len(), 1..25)) {
        thread_local! {
            static DB: (tempfile::TempDir, Database) = {
                let dir = tempfile::tempdir().unwrap();
                let m = model(2, 20, 60);
                let p = write_and_import(dir.path(), &m);
                let db = Database::open(&p, OpenMode::Mapped).unwrap();
                (dir, db)
            };
        }
        let text: Vec<&str> = toks.iter().map(|&i| TOKENS[i]).collect();
        let text = text.join(" ");
        DB.with(|(_, db)| {
            let _ = query(db, &text, &BTreeMap::new());
        });
    }
}

#[test]
fn property_maps_from_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(6, 50, 100);
    let db = Database::open(&write_and_import(dir.path(), &m), OpenMode::Mapped).unwrap();
    let mut p = Params::new();
    p.insert(
        "props".into(),
        Value::Map(std::sync::Arc::new(vec![("v".into(), Value::Int(3))])),
    );
    let want = m.v.iter().filter(|v| **v == Some(3)).count() as i64;
    for q in [
        "MATCH (n {v: $props.v}) RETURN count(*)",
        "MATCH (n) WHERE n.v = $props.v RETURN count(n.id)",
    ] {
        let rows = query(&db, q, &p).unwrap_or_else(|e| panic!("{q}: {e}")).1;
        assert_eq!(rows[0][0].eq3(&Value::Int(want)), Some(true), "{q}");
    }
    // A parameter map as MATCH's pattern properties is refused, as openCypher says,
    // with the way to write it.
    let e = query(&db, "MATCH (n $props) RETURN n", &p)
        .unwrap_err()
        .to_string();
    assert!(e.contains("{id: $props.id}"), "{e}");
}

/// Queries from a small Cypher grammar (patterns, predicates, projections,
/// aggregation, ordering, UNWIND, WITH, OPTIONAL MATCH, paths), so that most get past
/// the parser and exercise the planner and the operators.
fn grammar_query(r: &mut impl Rng) -> String {
    fn pick<'a>(r: &mut impl Rng, xs: &[&'a str]) -> &'a str {
        xs[r.random_range(0..xs.len())]
    }
    fn expr(r: &mut impl Rng, vars: &[&str], depth: u32) -> String {
        let v = pick(r, vars);
        if depth == 0 {
            return match r.random_range(0..6) {
                0 => format!("{v}.v"),
                1 => format!("{v}.id"),
                2 => r.random_range(-3..10).to_string(),
                3 => "null".into(),
                4 => format!("'{}'", pick(r, &["a", "", "A"])),
                _ => format!("{v}.w"),
            };
        }
        let (a, b) = (expr(r, vars, depth - 1), expr(r, vars, depth - 1));
        match r.random_range(0..12) {
            0 => format!("{a} + {b}"),
            1 => format!("{a} * {b}"),
            2 => format!("{a} = {b}"),
            3 => format!("{a} < {b}"),
            // Boolean operators over comparisons: a literal operand of AND/OR/NOT that is
            // not a boolean is a compile-time error.
            4 => format!("({a} = {b} AND {b} IS NOT NULL)"),
            5 => format!("NOT ({a} < {b} OR {a} IS NULL)"),
            6 => format!("{a} IS NULL"),
            7 => format!("size([{a}, {b}])"),
            8 => format!("CASE WHEN {a} > 2 THEN {b} ELSE 0 END"),
            9 => format!("coalesce({a}, {b})"),
            10 => format!("[x IN range(0, 3) | x + {a}][1]"),
            _ => format!("toString({a})"),
        }
    }
    let pattern = |r: &mut dyn rand::RngCore| -> (String, Vec<&'static str>) {
        let label = |r: &mut dyn rand::RngCore| ["", ":A", ":B"][r.random_range(0..3usize)];
        let props = |r: &mut dyn rand::RngCore| {
            if r.random_range(0..4) == 0 {
                format!(" {{id: {}}}", r.random_range(0..25))
            } else {
                String::new()
            }
        };
        match r.random_range(0..5) {
            0 => (format!("(a{}{})", label(r), props(r)), vec!["a"]),
            1 | 2 => (
                format!(
                    "(a{}{})-[e{}]->(b{})",
                    label(r),
                    props(r),
                    ["", ":R", ":S"][r.random_range(0..3usize)],
                    label(r)
                ),
                vec!["a", "e", "b"],
            ),
            3 => (
                format!("(a{})<-[e]-(b)-[f]->(c{})", props(r), label(r)),
                vec!["a", "e", "b", "c"],
            ),
            _ => (
                format!("p = (a{})-[*1..{}]->(b)", props(r), r.random_range(1..4)),
                vec!["a", "b"],
            ),
        }
    };
    let (pat, vars) = pattern(r);
    let mut q = format!(
        "{}MATCH {pat}",
        if r.random_range(0..6) == 0 {
            "UNWIND [1, 2] AS u "
        } else {
            ""
        }
    );
    if r.random_bool(0.5) {
        let d = r.random_range(0..3);
        q += &format!(" WHERE {}", expr(r, &vars, d));
    }
    if r.random_range(0..4) == 0 {
        q += " OPTIONAL MATCH (a)-[g]->(h)";
    }
    if r.random_range(0..4) == 0 {
        q += &format!(" WITH a, {} AS k", expr(r, &vars, 1));
        let proj = pick(r, &["a.v", "k", "count(*)", "collect(k)[0]", "a"]);
        q += &format!(" RETURN {proj} AS out");
    } else {
        let n = r.random_range(1..4);
        let items: Vec<String> = (0..n)
            .map(|i| {
                let e = match r.random_range(0..5) {
                    0 => pick(
                        r,
                        &["count(*)", "count(a)", "sum(a.v)", "max(a.id)", "avg(a.v)"],
                    )
                    .to_string(),
                    1 => pick(r, &vars).to_string(),
                    _ => {
                        let d = r.random_range(0..2);
                        expr(r, &vars, d)
                    }
                };
                format!("{e} AS c{i}")
            })
            .collect();
        q += &format!(
            " RETURN {}{}",
            if r.random_range(0..5) == 0 {
                "DISTINCT "
            } else {
                ""
            },
            items.join(", ")
        );
        if r.random_bool(0.4) {
            q += &format!(
                " ORDER BY c0{}",
                if r.random_bool(0.5) { " DESC" } else { "" }
            );
        }
    }
    if r.random_bool(0.3) {
        q += &format!(" LIMIT {}", r.random_range(0..5));
    }
    q
}

/// Generated queries never panic; the test reports (and keeps a floor on) the share
/// that gets past the parser and the share that runs to completion, so that a change
/// which made most of them fail early would not pass unseen (issue "Hardening").
#[test]
fn generated_queries_parse_run_and_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(3, 25, 80);
    let db = Database::open(&write_and_import(dir.path(), &m), OpenMode::Mapped).unwrap();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
    let (total, mut parsed, mut ran) = (2000, 0, 0);
    let mut fails: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..total {
        let q = grammar_query(&mut rng);
        match query(&db, &q, &BTreeMap::new()) {
            Ok(_) => {
                parsed += 1;
                ran += 1;
            }
            Err(QueryError::Parse(e)) => {
                *fails.entry(format!("parse: {}", e.message)).or_default() += 1;
            }
            Err(e) => {
                parsed += 1;
                let k = e.to_string();
                *fails.entry(k.chars().take(36).collect()).or_default() += 1;
            }
        }
    }
    eprintln!(
        "generated queries: {total}, past the parser {parsed} ({:.1}%), ran {ran} ({:.1}%)",
        100.0 * parsed as f64 / total as f64,
        100.0 * ran as f64 / total as f64
    );
    let mut top: Vec<(&String, &usize)> = fails.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    for (k, n) in top.iter().take(8) {
        eprintln!("  {n:5}  {k}");
    }
    assert!(
        parsed * 100 >= total * 95,
        "only {parsed} of {total} parsed"
    );
    assert!(ran * 100 >= total * 70, "only {ran} of {total} ran");
}

/// Memgraph's weighted shortest paths (`*WSHORTEST` / `*ALLSHORTEST` with a weight that
/// differs between steps) against a dynamic program over the hops: the lightest total
/// within the hop bound, a path that weighs what it says, every lightest path for
/// ALLSHORTEST, from one node to every other, inward, under a filter lambda.
#[test]
fn weighted_shortest_paths_match_the_model() {
    for seed in [21u64, 22, 23] {
        let dir = tempfile::tempdir().unwrap();
        let m = model(seed, 40, 160);
        let db_path = write_and_import(dir.path(), &m);
        let db = Database::open(&db_path, OpenMode::Mapped).unwrap();
        // The relationship's weight: its w (its index for :R, null for :S) mod 7, plus 1.
        let ew = |k: usize, _v: usize| -> i64 {
            if m.edges[k].2 == "R" {
                (k % 7) as i64 + 1
            } else {
                4 // coalesce(null, 3) % 7 + 1
            }
        };
        let ew3 = |k: usize, _v: usize| -> i64 {
            if m.edges[k].2 == "R" {
                (k % 3) as i64 + 1
            } else {
                1 // coalesce(null, 3) % 3 + 1
            }
        };
        let nw = |_k: usize, v: usize| -> i64 { m.v[v].unwrap_or(0) + 1 };
        for a in [0usize, 3, 7, 13, 39] {
            for max in [3usize, 15] {
                let d = m.lightest(a, 1, max, ew, |_| true);
                for b in [2usize, 5, 21, 30] {
                    if a == b {
                        continue;
                    }
                    let p = params(&[("x", a as i64), ("y", b as i64)]);
                    let text = format!(
                        "MATCH p = (a {{id: $x}})-[*WSHORTEST {max} (e, n | coalesce(e.w, 3) % 7 + 1) total]->(b {{id: $y}}) \
                         RETURN total, length(p), reduce(s = 0, r IN relationships(p) | s + coalesce(r.w, 3) % 7 + 1), [x IN nodes(p) | x.id]"
                    );
                    let rows = query(&db, &text, &p)
                        .unwrap_or_else(|e| panic!("{text}: {e}"))
                        .1;
                    match d[b] {
                        None => assert!(rows.is_empty(), "no path {a}->{b} in {max}: {rows:?}"),
                        Some(want) => {
                            assert_eq!(rows.len(), 1, "{a}->{b} in {max}");
                            let r = &rows[0];
                            assert_eq!(r[0], Value::Int(want), "lightest {a}->{b} in {max}");
                            assert_eq!(r[2], Value::Int(want), "the path weighs its total");
                            let Value::Int(len) = r[1] else { panic!() };
                            assert!(len as usize <= max);
                            let Value::List(ids) = &r[3] else { panic!() };
                            assert_eq!(ids.first(), Some(&Value::Int(a as i64)));
                            assert_eq!(ids.last(), Some(&Value::Int(b as i64)));
                        }
                    }
                    // Every lightest path, each once.
                    let d3 = m.lightest(a, 1, 6, ew3, |_| true);
                    let rows = query(
                        &db,
                        "MATCH p = (a {id: $x})-[*ALLSHORTEST 6 (e, n | coalesce(e.w, 3) % 3 + 1) total]->(b {id: $y}) RETURN total, [r IN relationships(p) | id(r)]",
                        &p,
                    )
                    .unwrap()
                    .1;
                    let want = d3[b].map_or(0, |t| m.count_weighing(a, b, 6, t, &ew3, &mut vec![]));
                    assert_eq!(rows.len(), want, "ALLSHORTEST {a}->{b}");
                    assert!(rows.iter().all(|r| r[0] == Value::Int(d3[b].unwrap())));
                    let distinct: BTreeSet<String> =
                        rows.iter().map(|r| format!("{:?}", r[1])).collect();
                    assert_eq!(distinct.len(), rows.len(), "each path once");
                    // Inward, unbounded, through nodes with v >= 2 only (a filter lambda).
                    let din = m.lightest(a, -1, m.n, ew, |i| m.v[i].is_some_and(|v| v >= 2));
                    let rows = query(
                        &db,
                        "MATCH p = (a {id: $x})<-[*WSHORTEST (e, n | coalesce(e.w, 3) % 7 + 1) total (e, n | n.v >= 2)]-(b {id: $y}) RETURN total",
                        &p,
                    )
                    .unwrap()
                    .1;
                    assert_eq!(
                        rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>(),
                        din[b].map(Value::Int).into_iter().collect::<Vec<_>>(),
                        "inward through v >= 2, {a}<-{b}"
                    );
                }
            }
            // From one node to every node it reaches, weighing the node reached, and
            // in floats.
            let p = params(&[("x", a as i64)]);
            let d = m.lightest(a, 1, 4, nw, |_| true);
            let rows = query(
                &db,
                "MATCH (a {id: $x})-[*WSHORTEST 4 (e, n | coalesce(n.v, 0) + 1) total]->(b) RETURN b.id, total, 0.5 * total = 0.0 + total / 2.0",
                &p,
            )
            .unwrap()
            .1;
            let got: BTreeMap<i64, Value> = rows
                .iter()
                .map(|r| {
                    let Value::Int(id) = r[0] else { panic!() };
                    (id, r[1].clone())
                })
                .collect();
            let want: BTreeMap<i64, Value> = (0..m.n)
                .filter(|&i| i != a)
                .filter_map(|i| d[i].map(|w| (i as i64, Value::Int(w))))
                .collect();
            assert_eq!(got, want, "single source from {a}");
            assert_eq!(got.len(), rows.len(), "one row per node reached");
            let halves = query(
                &db,
                "MATCH (a {id: $x})-[*WSHORTEST 4 (e, n | 0.5 * (coalesce(n.v, 0) + 1)) total]->(b) RETURN b.id, total",
                &p,
            )
            .unwrap()
            .1;
            for r in halves {
                let Value::Int(id) = r[0] else { panic!() };
                assert_eq!(r[1], Value::Float(d[id as usize].unwrap() as f64 / 2.0));
            }
        }
        // A weight that is null or negative is an error that says so.
        for bad in ["e.w", "-1", "-coalesce(e.w, 1)"] {
            let text = format!(
                "MATCH (a {{id: 0}})-[*WSHORTEST (e, n | {bad}) total]->(b) RETURN count(*)"
            );
            let err = query(&db, &text, &Params::new()).unwrap_err().to_string();
            assert!(err.contains("weight lambda"), "{text}: {err}");
        }
    }
}

/// Shortest paths over relationship types without properties, whose edges reached from
/// their target are named by the in CSR until the path is built: every relationship of
/// a path found either way is the one a plain match gives between its nodes (its id),
/// parallel relationships make distinct paths, and the lengths are BFS distances.
#[test]
fn shortest_paths_name_propertyless_relationships_as_a_match_does() {
    for seed in [31u64, 32] {
        let dir = tempfile::tempdir().unwrap();
        let m = model(seed, 40, 160);
        let mut nodes = String::from("id:ID,:LABEL\n");
        for i in 0..m.n {
            writeln!(nodes, "{i},{}", m.labels[i]).unwrap();
        }
        let mut edges = String::from(":START_ID,:END_ID,:TYPE\n");
        for (a, b, t) in &m.edges {
            writeln!(edges, "{a},{b},{t}").unwrap();
        }
        std::fs::write(dir.path().join("n.csv"), nodes).unwrap();
        std::fs::write(dir.path().join("e.csv"), edges).unwrap();
        let mut cfg = ImportConfig::new(dir.path().join("g.qdb"));
        cfg.nodes
            .push(InputGroup::parse(&dir.path().join("n.csv").display().to_string()).unwrap());
        cfg.relationships
            .push(InputGroup::parse(&dir.path().join("e.csv").display().to_string()).unwrap());
        cfg.id_type = IdType::Integer;
        cfg.memory_budget_bytes = 64 << 20;
        cfg.threads = 2;
        import(&cfg, &NoProgress).unwrap();
        let db = Database::open(&cfg.db, OpenMode::Mapped).unwrap();
        // Every relationship's (id, start, end) as a match names it.
        let named: BTreeSet<(i64, i64, i64)> = query(
            &db,
            "MATCH (x)-[r]->(y) RETURN id(r), x.id, y.id",
            &Params::new(),
        )
        .unwrap()
        .1
        .iter()
        .map(|r| match (&r[0], &r[1], &r[2]) {
            (Value::Int(a), Value::Int(b), Value::Int(c)) => (*a, *b, *c),
            x => panic!("{x:?}"),
        })
        .collect();
        for a in [0usize, 3, 7, 13] {
            for b in [2usize, 5, 21, 30] {
                if a == b {
                    continue;
                }
                let p = params(&[("x", a as i64), ("y", b as i64)]);
                for (arrow, dir) in [("-[*..15]->", 1i8), ("<-[*..15]-", -1)] {
                    for f in ["shortestPath", "allShortestPaths"] {
                        let text = format!(
                            "MATCH p = {f}((a {{id: $x}}){arrow}(b {{id: $y}})) \
                             RETURN [r IN relationships(p) | [id(r), startNode(r).id, endNode(r).id]], length(p)"
                        );
                        let rows = query(&db, &text, &p).unwrap().1;
                        let want = if dir > 0 {
                            m.bfs_dist(a, b, &["R", "S"])
                        } else {
                            m.bfs_dist(b, a, &["R", "S"])
                        };
                        assert_eq!(rows.is_empty(), want.is_none(), "{text} {a} {b}");
                        let mut seen = BTreeSet::new();
                        for r in &rows {
                            assert_eq!(r[1], Value::Int(want.unwrap() as i64));
                            let Value::List(rels) = &r[0] else { panic!() };
                            let mut ids = Vec::new();
                            for rel in rels.iter() {
                                let Value::List(t) = rel else { panic!() };
                                let t: Vec<i64> = t
                                    .iter()
                                    .map(|v| match v {
                                        Value::Int(i) => *i,
                                        x => panic!("{x:?}"),
                                    })
                                    .collect();
                                assert!(
                                    named.contains(&(t[0], t[1], t[2])),
                                    "{text}: relationship {t:?} is not the one a match names"
                                );
                                ids.push(t[0]);
                            }
                            assert!(seen.insert(ids), "{text}: a path twice");
                        }
                    }
                }
            }
        }
    }
}

/// `LIMIT 1` over expansions stops early, also inside one node's neighbours (mgbench's
/// pattern_long): each operator hands over about the one row wanted (PROFILE counts),
/// in the segments and in the delta, and the answer is a row the unlimited query gives.
#[test]
fn limit_one_stops_expansions_early() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&dir.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    let none = Params::new();
    let run = |s: &mut Session, q: &str| {
        let mut rows = Vec::new();
        let sum = s
            .run(q, &none, &mut |_, b| {
                for r in 0..b.len {
                    rows.push(b.cols.iter().map(|c| c[r].clone()).collect::<Vec<_>>());
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{q}: {e}"));
        (rows, sum.plan.unwrap_or_default())
    };
    // a -> b -> hub, and 5,000 nodes pointing at the hub.
    run(
        &mut s,
        "CREATE (:N {id: 0})-[:R]->(:N {id: 1})-[:R]->(h:N {id: 2}) WITH h UNWIND range(3, 5002) AS i CREATE (:N {id: i})-[:R]->(h)",
    );
    let q = "MATCH (a:N {id: 0})-[e1]->(b)-[e2]->(h)<-[e3]-(x) RETURN x.id LIMIT 1";
    for phase in ["delta", "segments"] {
        let (rows, plan) = run(&mut s, &format!("PROFILE {q}"));
        assert_eq!(rows.len(), 1, "{phase}");
        let all = run(&mut s, &q.replace(" LIMIT 1", "")).0;
        assert_eq!(all.len(), 5000, "{phase}");
        assert!(all.contains(&rows[0]), "{phase}");
        let last = plan
            .lines()
            .find(|l| l.contains("(h)<-[e3]-(x)"))
            .unwrap_or_else(|| panic!("{plan}"));
        let produced: u64 = last
            .split("rows ")
            .nth(1)
            .and_then(|r| r.split([',', ']']).next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{last}"));
        assert!(
            produced <= 2,
            "{phase}: the last expansion made {produced} rows for LIMIT 1:\n{plan}"
        );
        run(&mut s, "CHECKPOINT");
    }
}
