//! Writes against a reference model: random sequences of CREATE, MERGE, SET, REMOVE,
//! DELETE and DETACH DELETE (some in explicit transactions that commit or roll back),
//! checked after every step against a plain in-memory model of the graph, across
//! checkpoints and reopens. The checks read through label scans, a declared property
//! index, the `{k: ..}` lookups and expansion in both directions, so the delta layer,
//! the segments a checkpoint writes and the indexes must all agree with the model.

mod common;

use common::{ints, rows, run};
use quiver_query::{Session, Summary, Value};
use quiver_storage::OpenMode;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const LABELS: [&str; 3] = ["A", "B", "C"];
const PROPS: [&str; 3] = ["x", "y", "z"];
const TYPES: [&str; 2] = ["T", "U"];

/// A property value of the model: an integer, or (negative) the string `s<-v>`, so that
/// a column of integers also meets values of another type (which a checkpoint cannot
/// fold into it and carries instead).
fn lit(v: i64) -> String {
    if v < 0 {
        format!("'s{}'", -v)
    } else {
        v.to_string()
    }
}

/// A value to SET: mostly an integer, sometimes a string.
fn some_value(rng: &mut Pcg64) -> i64 {
    if rng.random_bool(0.15) {
        -rng.random_range(1..4)
    } else {
        rng.random_range(0..5)
    }
}

/// A node of the model; `k` (its key in `Model::nodes`) is a property every node has.
#[derive(Clone, Debug, Default)]
struct Node {
    labels: BTreeSet<&'static str>,
    props: BTreeMap<&'static str, i64>,
}

/// A relationship of the model; `r` (its key in `Model::rels`) is a property it has.
#[derive(Clone, Debug)]
struct Rel {
    ty: &'static str,
    src: i64,
    dst: i64,
    w: Option<i64>,
}

#[derive(Clone, Debug, Default)]
struct Model {
    nodes: BTreeMap<i64, Node>,
    rels: BTreeMap<i64, Rel>,
    next_k: i64,
    next_r: i64,
}

/// What a statement should count (the fields of the summary's counters).
#[derive(Debug, Default, PartialEq)]
struct Expect {
    nodes_created: u64,
    nodes_deleted: u64,
    relationships_created: u64,
    relationships_deleted: u64,
    properties_set: u64,
    labels_added: u64,
    labels_removed: u64,
}

fn counted(s: &Summary) -> Expect {
    let c = &s.counters;
    Expect {
        nodes_created: c.nodes_created,
        nodes_deleted: c.nodes_deleted,
        relationships_created: c.relationships_created,
        relationships_deleted: c.relationships_deleted,
        properties_set: c.properties_set,
        labels_added: c.labels_added,
        labels_removed: c.labels_removed,
    }
}

fn pick<'a, T>(rng: &mut Pcg64, xs: &'a [T]) -> &'a T {
    &xs[rng.random_range(0..xs.len())]
}

impl Model {
    fn some_node(&self, rng: &mut Pcg64) -> Option<i64> {
        if self.nodes.is_empty() {
            return None;
        }
        let i = rng.random_range(0..self.nodes.len());
        self.nodes.keys().nth(i).copied()
    }

    fn some_rel(&self, rng: &mut Pcg64) -> Option<i64> {
        if self.rels.is_empty() {
            return None;
        }
        let i = rng.random_range(0..self.rels.len());
        self.rels.keys().nth(i).copied()
    }

    fn degree(&self, k: i64) -> usize {
        self.rels
            .values()
            .filter(|r| r.src == k || r.dst == k)
            .count()
    }

    /// One random statement, applied to the model; returns the statement, what it
    /// should count, and whether it should fail (then the model is left as it was).
    fn step(&mut self, rng: &mut Pcg64) -> (String, Expect, bool) {
        let mut e = Expect::default();
        let choice = rng.random_range(0..100);
        let node = self.some_node(rng);
        let q = match (choice, node) {
            (0..=19, _) | (_, None) => {
                // CREATE a node with random labels and properties.
                let k = self.next_k;
                self.next_k += 1;
                let mut n = Node::default();
                for l in LABELS {
                    if rng.random_bool(0.5) {
                        n.labels.insert(l);
                    }
                }
                for p in PROPS {
                    if rng.random_bool(0.5) {
                        n.props.insert(p, rng.random_range(0..5));
                    }
                }
                let labels: String = n.labels.iter().map(|l| format!(":{l}")).collect();
                let props: String = n.props.iter().map(|(p, v)| format!(", {p}: {v}")).collect();
                e.nodes_created = 1;
                e.labels_added = n.labels.len() as u64;
                e.properties_set = 1 + n.props.len() as u64;
                self.nodes.insert(k, n);
                format!("CREATE (n{labels} {{k: {k}{props}}})")
            }
            (20..=24, _) => {
                // Several nodes at once.
                let k0 = self.next_k;
                let count = rng.random_range(1..40);
                self.next_k += count;
                let mut n = Node::default();
                n.labels.insert("B");
                for k in k0..k0 + count {
                    let mut n = n.clone();
                    n.props.insert("x", k % 5);
                    self.nodes.insert(k, n);
                }
                e.nodes_created = count as u64;
                e.labels_added = count as u64;
                e.properties_set = 2 * count as u64;
                format!(
                    "UNWIND range({k0}, {}) AS i CREATE (:B {{k: i, x: i % 5}})",
                    k0 + count - 1
                )
            }
            (25..=39, Some(a)) => {
                // CREATE a relationship between two existing nodes.
                let b = self.some_node(rng).unwrap();
                let r = self.next_r;
                self.next_r += 1;
                let ty = *pick(rng, &TYPES);
                let w = rng.random_bool(0.5).then(|| rng.random_range(0..5));
                self.rels.insert(
                    r,
                    Rel {
                        ty,
                        src: a,
                        dst: b,
                        w,
                    },
                );
                e.relationships_created = 1;
                e.properties_set = 1 + w.is_some() as u64;
                let w = w.map(|w| format!(", w: {w}")).unwrap_or_default();
                format!(
                    "MATCH (a {{k: {a}}}), (b {{k: {b}}}) CREATE (a)-[:{ty} {{r: {r}{w}}}]->(b)"
                )
            }
            (40..=49, Some(a)) => {
                // SET a property (or set it to null, which removes it).
                let p = *pick(rng, &PROPS);
                let n = self.nodes.get_mut(&a).unwrap();
                if rng.random_bool(0.2) {
                    e.properties_set = n.props.remove(p).is_some() as u64;
                    format!("MATCH (n {{k: {a}}}) SET n.{p} = null")
                } else {
                    let v = some_value(rng);
                    n.props.insert(p, v);
                    e.properties_set = 1;
                    format!("MATCH (n {{k: {a}}}) SET n.{p} = {}", lit(v))
                }
            }
            (50..=54, Some(a)) => {
                // SET += a map.
                let n = self.nodes.get_mut(&a).unwrap();
                let mut parts = Vec::new();
                for p in PROPS {
                    if rng.random_bool(0.5) {
                        let v = rng.random_range(0..5);
                        n.props.insert(p, v);
                        parts.push(format!("{p}: {v}"));
                        e.properties_set += 1;
                    }
                }
                format!("MATCH (n {{k: {a}}}) SET n += {{{}}}", parts.join(", "))
            }
            (55..=61, Some(a)) => {
                // SET or REMOVE a label.
                let l = *pick(rng, &LABELS);
                let n = self.nodes.get_mut(&a).unwrap();
                if rng.random_bool(0.5) {
                    e.labels_added = n.labels.insert(l) as u64;
                    format!("MATCH (n {{k: {a}}}) SET n:{l}")
                } else {
                    e.labels_removed = n.labels.remove(l) as u64;
                    format!("MATCH (n {{k: {a}}}) REMOVE n:{l}")
                }
            }
            (62..=66, Some(a)) => {
                // REMOVE a property.
                let p = *pick(rng, &PROPS);
                let n = self.nodes.get_mut(&a).unwrap();
                e.properties_set = n.props.remove(p).is_some() as u64;
                format!("MATCH (n {{k: {a}}}) REMOVE n.{p}")
            }
            (67..=72, _) if !self.rels.is_empty() => {
                // SET or REMOVE a relationship's property.
                let r = self.some_rel(rng).unwrap();
                let rel = self.rels.get_mut(&r).unwrap();
                if rng.random_bool(0.7) {
                    let v = some_value(rng);
                    rel.w = Some(v);
                    e.properties_set = 1;
                    format!("MATCH ()-[r {{r: {r}}}]->() SET r.w = {}", lit(v))
                } else {
                    e.properties_set = rel.w.take().is_some() as u64;
                    format!("MATCH ()-[r {{r: {r}}}]->() REMOVE r.w")
                }
            }
            (73..=77, _) if !self.rels.is_empty() => {
                // DELETE a relationship.
                let r = self.some_rel(rng).unwrap();
                self.rels.remove(&r);
                e.relationships_deleted = 1;
                format!("MATCH ()-[r {{r: {r}}}]->() DELETE r")
            }
            (78..=83, Some(a)) => {
                // DELETE a node: an error while it has relationships.
                if self.degree(a) > 0 {
                    return (
                        format!("MATCH (n {{k: {a}}}) DELETE n"),
                        Expect::default(),
                        true,
                    );
                }
                self.nodes.remove(&a);
                e.nodes_deleted = 1;
                format!("MATCH (n {{k: {a}}}) DELETE n")
            }
            (84..=87, Some(a)) => {
                // DETACH DELETE a node and its relationships.
                let before = self.rels.len();
                self.rels.retain(|_, r| r.src != a && r.dst != a);
                self.nodes.remove(&a);
                e.nodes_deleted = 1;
                e.relationships_deleted = (before - self.rels.len()) as u64;
                format!("MATCH (n {{k: {a}}}) DETACH DELETE n")
            }
            (_, Some(a)) => {
                // MERGE on (:A {k}): matches an :A node with that key, or creates one.
                // The key is an existing :A node's or a fresh one, so keys stay unique.
                let existing = self.nodes.get(&a).is_some_and(|n| n.labels.contains("A"));
                let k = if existing {
                    a
                } else {
                    self.next_k += 1;
                    self.next_k - 1
                };
                let v = rng.random_range(0..5);
                if existing {
                    self.nodes.get_mut(&k).unwrap().props.insert("y", v);
                } else {
                    let mut n = Node::default();
                    n.labels.insert("A");
                    n.props.insert("x", v);
                    self.nodes.insert(k, n);
                    e.nodes_created = 1;
                    e.labels_added = 1;
                    e.properties_set = 1;
                }
                e.properties_set += 1;
                format!("MERGE (n:A {{k: {k}}}) ON CREATE SET n.x = {v} ON MATCH SET n.y = {v}")
            }
        };
        (q, e, false)
    }
}

fn opt(v: Option<i64>) -> Value {
    match v {
        None => Value::Null,
        Some(v) if v < 0 => Value::str(&format!("s{}", -v)),
        Some(v) => Value::Int(v),
    }
}

/// Reads the database every way the checks use and compares each with the model.
fn check(s: &mut Session, m: &Model, rng: &mut Pcg64, ctx: &str) {
    let want: Vec<Vec<Value>> = m
        .nodes
        .iter()
        .map(|(k, n)| {
            let mut r = vec![Value::Int(*k)];
            r.extend(PROPS.iter().map(|p| opt(n.props.get(p).copied())));
            r.extend(LABELS.iter().map(|l| Value::Bool(n.labels.contains(l))));
            r
        })
        .collect();
    let got = rows(
        s,
        "MATCH (n) RETURN n.k, n.x, n.y, n.z, n:A, n:B, n:C ORDER BY n.k",
    );
    assert_eq!(got, want, "{ctx}: nodes differ");

    let want: Vec<Vec<Value>> = m
        .rels
        .iter()
        .map(|(r, rel)| {
            vec![
                Value::Int(*r),
                Value::str(rel.ty),
                Value::Int(rel.src),
                Value::Int(rel.dst),
                opt(rel.w),
            ]
        })
        .collect();
    let got = rows(
        s,
        "MATCH (a)-[r]->(b) RETURN r.r, type(r), a.k, b.k, r.w ORDER BY r.r",
    );
    assert_eq!(got, want, "{ctx}: relationships differ");

    // Label scans and the declared index on :A(x).
    for l in LABELS {
        let want: Vec<i64> = m
            .nodes
            .iter()
            .filter(|(_, n)| n.labels.contains(l))
            .map(|(k, _)| *k)
            .collect();
        let got = ints(s, &format!("MATCH (n:{l}) RETURN n.k ORDER BY n.k"));
        assert_eq!(got, want, "{ctx}: label scan :{l}");
        let got = ints(s, &format!("MATCH (n:{l}) RETURN count(n)"));
        assert_eq!(got, vec![want.len() as i64], "{ctx}: count of :{l}");
    }
    let got = ints(s, "MATCH (n) RETURN count(n)");
    assert_eq!(got, vec![m.nodes.len() as i64], "{ctx}: count of nodes");
    for t in TYPES {
        let want = m.rels.values().filter(|r| r.ty == t).count() as i64;
        let got = ints(s, &format!("MATCH ()-[r:{t}]->() RETURN count(r)"));
        assert_eq!(got, vec![want], "{ctx}: count of :{t}");
    }
    let x = rng.random_range(0..5);
    let want: Vec<i64> = m
        .nodes
        .iter()
        .filter(|(_, n)| n.labels.contains("A") && n.props.get("x") == Some(&x))
        .map(|(k, _)| *k)
        .collect();
    let got = ints(
        s,
        &format!("MATCH (n:A {{x: {x}}}) RETURN n.k ORDER BY n.k"),
    );
    assert_eq!(got, want, "{ctx}: index seek :A(x = {x})");

    // Expansion out of and into a few nodes, by type and by any type.
    for _ in 0..3 {
        let Some(a) = m.some_node(rng) else { break };
        let mut out: Vec<i64> = m
            .rels
            .values()
            .filter(|r| r.src == a)
            .map(|r| r.dst)
            .collect();
        out.sort();
        let got = ints(
            s,
            &format!("MATCH ({{k: {a}}})-->(b) RETURN b.k ORDER BY b.k"),
        );
        assert_eq!(got, out, "{ctx}: out of {a}");
        let mut inn: Vec<i64> = m
            .rels
            .values()
            .filter(|r| r.dst == a && r.ty == "T")
            .map(|r| r.src)
            .collect();
        inn.sort();
        let got = ints(
            s,
            &format!("MATCH ({{k: {a}}})<-[:T]-(b) RETURN b.k ORDER BY b.k"),
        );
        assert_eq!(got, inn, "{ctx}: into {a} by T");
    }
}

fn open(dir: &Path) -> Session {
    Session::open_with(dir, OpenMode::Mapped, true).unwrap()
}

/// One random history: `steps` statements, some grouped in transactions, with
/// checkpoints and reopens between them.
fn history(seed: u64, steps: usize) {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut s = open(&db);
    run(&mut s, "CREATE INDEX ON :A(x)").unwrap();
    let mut m = Model::default();
    let mut i = 0;
    while i < steps {
        let ctx = format!("seed {seed}, step {i}");
        match rng.random_range(0..100) {
            0..=5 => {
                eprintln!("{ctx}: CHECKPOINT");
                run(&mut s, "CHECKPOINT").unwrap();
                check(&mut s, &m, &mut rng, &format!("{ctx}, after CHECKPOINT"));
            }
            6..=8 => {
                eprintln!("{ctx}: reopen");
                drop(s);
                s = open(&db);
                check(&mut s, &m, &mut rng, &format!("{ctx}, after reopen"));
            }
            9..=17 => {
                // An explicit transaction of a few statements; it sees its own writes,
                // then commits or rolls back as a whole.
                let commit = rng.random_bool(0.6);
                let before = m.clone();
                run(&mut s, "BEGIN").unwrap();
                for _ in 0..rng.random_range(1..5) {
                    let (q, _, fails) = m.step(&mut rng);
                    eprintln!("{ctx} in BEGIN: {q}");
                    let r = run(&mut s, &q);
                    if fails {
                        // A failed statement ends the transaction (rolled back).
                        assert!(r.is_err(), "{ctx}: {q} should fail");
                        m = before.clone();
                        break;
                    }
                    r.unwrap_or_else(|e| panic!("{ctx}: {q}: {e}"));
                }
                eprintln!("{ctx}: COMMIT {commit}");
                if s.in_transaction() {
                    check(&mut s, &m, &mut rng, &format!("{ctx}, inside BEGIN"));
                    if commit {
                        run(&mut s, "COMMIT").unwrap();
                    } else {
                        run(&mut s, "ROLLBACK").unwrap();
                        m = before;
                    }
                }
                check(
                    &mut s,
                    &m,
                    &mut rng,
                    &format!("{ctx}, after the transaction"),
                );
            }
            _ => {
                let (q, want, fails) = m.step(&mut rng);
                eprintln!("{ctx}: {q}");
                let r = run(&mut s, &q);
                if fails {
                    let e = r.expect_err(&q);
                    assert!(e.to_string().contains("DETACH"), "{ctx}: {q}: {e}");
                } else {
                    let sum = r.unwrap_or_else(|e| panic!("{ctx}: {q}: {e}"));
                    assert_eq!(counted(&sum), want, "{ctx}: counters of {q}");
                }
                if i % 4 == 0 {
                    check(&mut s, &m, &mut rng, &format!("{ctx}: {q}"));
                }
            }
        }
        i += 1;
    }
    check(&mut s, &m, &mut rng, &format!("seed {seed}, end"));
    run(&mut s, "CHECKPOINT").unwrap();
    drop(s);
    let mut s = open(&db);
    check(
        &mut s,
        &m,
        &mut rng,
        &format!("seed {seed}, end, checkpointed and reopened"),
    );
}

#[test]
fn random_writes_match_the_model() {
    // QUIVER_MODEL_SEEDS=a..b runs other histories (a longer hunt than CI's).
    let seeds = std::env::var("QUIVER_MODEL_SEEDS")
        .ok()
        .and_then(|v| {
            let (a, b) = v.split_once("..")?;
            Some(a.parse().ok()?..b.parse().ok()?)
        })
        .unwrap_or(0..16);
    for seed in seeds {
        history(seed, 300);
    }
}
