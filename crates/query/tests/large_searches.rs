//! Shortest-path searches large enough to leave their small forms: each side's reached
//! nodes and the judged nodes move from hash maps to bitmaps past a few thousand (see
//! `ops/expand.rs`, `Parents` and `Verdicts`). Checked against a BFS over the model's
//! adjacency, on the imported graph, again beside created relationships and changed
//! properties (the delta's adjacency and records), and again after deletions.

use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::{Session, Value};
use quiver_storage::manifest::IdType;
use quiver_storage::OpenMode;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt::Write;
use std::path::Path;

/// Two components of `HALF` nodes each (ids `0..HALF` and `HALF..2 * HALF`), every node
/// with three relationships out to random nodes of its own component: a search between
/// components reaches thousands of nodes on each side before it gives up.
const HALF: usize = 6_000;

struct Model {
    v: Vec<Option<i64>>,
    out: Vec<Vec<usize>>,
    edges: HashSet<(usize, usize)>,
}

impl Model {
    fn add(&mut self, a: usize, b: usize) {
        self.out[a].push(b);
        self.edges.insert((a, b));
    }

    /// Removes one relationship from `a` to `b` (there is one).
    fn remove(&mut self, a: usize, b: usize) {
        let i = self.out[a]
            .iter()
            .position(|&x| x == b)
            .expect("a relationship");
        self.out[a].swap_remove(i);
        if !self.out[a].contains(&b) {
            self.edges.remove(&(a, b));
        }
    }

    fn passes(&self, i: usize) -> bool {
        self.v[i].is_some_and(|v| v >= 3)
    }

    /// The BFS distance from `a` to `b` through nodes that pass `ok` (both ends too), at
    /// most 15 hops; `undirected`: over relationships either way.
    fn dist(
        &self,
        a: usize,
        b: usize,
        ok: impl Fn(usize) -> bool,
        undirected: bool,
    ) -> Option<usize> {
        if a == b || !ok(a) || !ok(b) {
            return None;
        }
        let mut adj = self.out.clone();
        if undirected {
            for (u, outs) in self.out.iter().enumerate() {
                for &w in outs {
                    adj[w].push(u);
                }
            }
        }
        let mut d = vec![usize::MAX; self.v.len()];
        d[a] = 0;
        let mut q = VecDeque::from([a]);
        while let Some(u) = q.pop_front() {
            for &w in &adj[u] {
                if d[w] == usize::MAX && ok(w) {
                    d[w] = d[u] + 1;
                    q.push_back(w);
                }
            }
        }
        (d[b] <= 15).then_some(d[b])
    }
}

fn build(dir: &Path, seed: u64) -> (Model, std::path::PathBuf) {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    let n = 2 * HALF;
    let mut m = Model {
        v: (0..n)
            .map(|i| (i % 7 != 0).then(|| r.random_range(0..10)))
            .collect(),
        out: vec![Vec::new(); n],
        edges: HashSet::new(),
    };
    let mut nodes = String::from("id:ID,v:int\n");
    for i in 0..n {
        let v = m.v[i].map(|x| x.to_string()).unwrap_or_default();
        writeln!(nodes, "{i},{v}").unwrap();
    }
    let mut edges = String::from(":START_ID,:END_ID\n");
    for a in 0..n {
        let base = a / HALF * HALF;
        for _ in 0..3 {
            let b = base + r.random_range(0..HALF);
            m.add(a, b);
            writeln!(edges, "{a},{b}").unwrap();
        }
    }
    std::fs::write(dir.join("n.csv"), nodes).unwrap();
    std::fs::write(dir.join("e.csv"), edges).unwrap();
    let mut cfg = ImportConfig::new(dir.join("g.qdb"));
    cfg.nodes
        .push(InputGroup::parse(&format!("N={}", dir.join("n.csv").display())).unwrap());
    cfg.relationships
        .push(InputGroup::parse(&format!("R={}", dir.join("e.csv").display())).unwrap());
    cfg.id_type = IdType::Integer;
    cfg.memory_budget_bytes = 64 << 20;
    cfg.threads = 2;
    import(&cfg, &NoProgress).unwrap();
    (m, cfg.db)
}

/// Every path `text` returns between `a` and `b`, as node ids.
fn paths(s: &mut Session, text: &str, a: usize, b: usize) -> Vec<Vec<usize>> {
    let p: BTreeMap<String, Value> = [
        ("a".to_string(), Value::Int(a as i64)),
        ("b".to_string(), Value::Int(b as i64)),
    ]
    .into_iter()
    .collect();
    let mut out = Vec::new();
    s.run(text, &p, &mut |_, batch| {
        for r in 0..batch.len {
            let Value::List(l) = &batch.row(r)[0] else {
                panic!("not a list")
            };
            out.push(
                l.iter()
                    .map(|v| match v {
                        Value::Int(i) => *i as usize,
                        v => panic!("not an id: {v:?}"),
                    })
                    .collect(),
            );
        }
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{text}: {e}"));
    out
}

const SHORTEST: &str = "MATCH (a:N {id: $a}), (b:N {id: $b}) \
     MATCH p = shortestPath((a)-[:R*..15]->(b)) RETURN [n IN nodes(p) | n.id]";
const FILTERED: &str = "MATCH (a:N {id: $a}), (b:N {id: $b}) \
     MATCH p = shortestPath((a)-[:R*..15]->(b)) WHERE all(n IN nodes(p) WHERE n.v >= 3) \
     RETURN [n IN nodes(p) | n.id]";
const ALL: &str = "MATCH (a:N {id: $a}), (b:N {id: $b}) \
     MATCH p = allShortestPaths((a)-[:R*..15]->(b)) RETURN [n IN nodes(p) | n.id]";
const UNDIRECTED: &str = "MATCH (a:N {id: $a}), (b:N {id: $b}) \
     MATCH p = shortestPath((a)-[:R*..15]-(b)) RETURN [n IN nodes(p) | n.id]";

/// Each query's answers for `pairs` against the model: the length, a path along the
/// model's relationships from `a` to `b`, through passing nodes when filtered.
fn check(s: &mut Session, m: &Model, pairs: &[(usize, usize)], when: &str) {
    let mut found = 0;
    for &(a, b) in pairs {
        for (text, filtered) in [
            (SHORTEST, false),
            (FILTERED, true),
            (ALL, false),
            (UNDIRECTED, false),
        ] {
            let undirected = text == UNDIRECTED;
            let want = if filtered {
                m.dist(a, b, |i| m.passes(i), undirected)
            } else {
                m.dist(a, b, |_| true, undirected)
            };
            let got = paths(s, text, a, b);
            let what = format!("{when}: {text} from {a} to {b}");
            let Some(d) = want else {
                assert!(got.is_empty(), "{what}: expected none, got {got:?}");
                continue;
            };
            found += 1;
            assert!(!got.is_empty(), "{what}: expected length {d}, got none");
            if text != ALL {
                assert_eq!(got.len(), 1, "{what}");
            }
            let mut distinct = HashSet::new();
            for p in &got {
                assert_eq!(p.len(), d + 1, "{what}: {p:?} is not {d} long");
                assert_eq!((p[0], p[d]), (a, b), "{what}: {p:?}");
                for w in p.windows(2) {
                    let there = m.edges.contains(&(w[0], w[1]))
                        || undirected && m.edges.contains(&(w[1], w[0]));
                    assert!(there, "{what}: no {w:?} in {p:?}");
                }
                if filtered {
                    assert!(p.iter().all(|&i| m.passes(i)), "{what}: {p:?} fails");
                }
                assert!(distinct.insert(p.clone()), "{what}: {p:?} twice");
            }
        }
    }
    assert!(
        found > pairs.len(),
        "{when}: too few pairs connected ({found})"
    );
}

#[test]
fn large_searches_match_a_bfs_before_and_after_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut m, db) = build(dir.path(), 41);
    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    let mut r = rand::rngs::StdRng::seed_from_u64(42);
    // Pairs inside a component (found), and across (every search exhausts a side).
    let mut pairs: Vec<(usize, usize)> = (0..24)
        .map(|_| {
            let c = r.random_range(0..2) * HALF;
            (c + r.random_range(0..HALF), c + r.random_range(0..HALF))
        })
        .collect();
    pairs.extend((0..4).map(|_| (r.random_range(0..HALF), HALF + r.random_range(0..HALF))));
    check(&mut s, &m, &pairs, "imported");

    // Created relationships (some between the components) and changed properties.
    let empty = BTreeMap::new();
    for k in 0..300 {
        let a = r.random_range(0..2 * HALF);
        let b = if k % 30 == 0 {
            (a + HALF) % (2 * HALF)
        } else {
            a / HALF * HALF + r.random_range(0..HALF)
        };
        let q = format!("MATCH (a:N {{id: {a}}}), (b:N {{id: {b}}}) CREATE (a)-[:R]->(b)");
        s.run(&q, &empty, &mut |_, _| Ok(())).unwrap();
        m.add(a, b);
    }
    for _ in 0..300 {
        let a = r.random_range(0..2 * HALF);
        let v = r.random_range(0..10);
        let q = format!("MATCH (a:N {{id: {a}}}) SET a.v = {v}");
        s.run(&q, &empty, &mut |_, _| Ok(())).unwrap();
        m.v[a] = Some(v);
    }
    check(&mut s, &m, &pairs, "after writes");

    // Deleted relationships: the delta's deletions are tested by edge id, so searches
    // read the adjacency with its ids again.
    for _ in 0..300 {
        let a = r.random_range(0..2 * HALF);
        let Some(&b) = m.out[a].first() else { continue };
        let q = format!("MATCH (a:N {{id: {a}}})-[r:R]->(b:N {{id: {b}}}) WITH r LIMIT 1 DELETE r");
        s.run(&q, &empty, &mut |_, _| Ok(())).unwrap();
        m.remove(a, b);
    }
    check(&mut s, &m, &pairs, "after deletions");
}
