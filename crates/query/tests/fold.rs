//! Checkpoints fold changes to imported entities into their columns (patch files):
//! rounds of property changes on an imported graph of several row groups — a bulk SET,
//! single SETs and REMOVEs, new keys (new columns), values of another type than their
//! column (carried as ops), relationship properties — each followed by a CHECKPOINT and
//! a reopen (mapped or loaded), then every value, a declared index's seeks, the delta
//! left behind and the patch files are checked against a model.

mod common;

use common::{ints, rows, run, sorted, storage_info};
use quiver_engine::fold::PATCH_FILES_MAX;
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::{Session, Value};
use quiver_storage::manifest::IdType;
use quiver_storage::{Database, OpenMode};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

const N: i64 = 60_000;
const NODE_KEYS: [&str; 4] = ["a", "f", "s", "extra"];

/// The model: node id -> key -> value (absent: null); the relationship from node i to
/// node i + 1 -> w, w2. `None`: deleted.
struct Model {
    nodes: Vec<Option<BTreeMap<&'static str, Value>>>,
    rels: Vec<Option<BTreeMap<&'static str, Value>>>,
    /// Live nodes that have the label `X` (added by SET n:X).
    x: std::collections::BTreeSet<usize>,
}

impl Model {
    fn live_node(&self, rng: &mut rand::rngs::StdRng) -> usize {
        loop {
            let i = rng.random_range(0..N) as usize;
            if self.nodes[i].is_some() {
                return i;
            }
        }
    }

    fn live_rel(&self, rng: &mut rand::rngs::StdRng) -> usize {
        loop {
            let i = rng.random_range(0..N) as usize;
            if self.rels[i].is_some() {
                return i;
            }
        }
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Str(s) => format!("'{s}'"),
        Value::Float(f) => format!("{f:?}"),
        Value::Int(i) => i.to_string(),
        Value::Null => "null".into(),
        v => panic!("no literal for {v:?}"),
    }
}

fn setup(dir: &Path) -> (std::path::PathBuf, Model) {
    let mut nodes = String::from("id:ID,a:int,f:double,s:string,pad:string\n");
    let mut rels = String::from(":START_ID,:END_ID,w:int\n");
    let mut m = Model {
        nodes: Vec::new(),
        rels: Vec::new(),
        x: Default::default(),
    };
    let pad = "p".repeat(200);
    for i in 0..N {
        let mut n = BTreeMap::new();
        n.insert("a", Value::Int(i % 1000));
        if i % 3 != 0 {
            n.insert("f", Value::Float(i as f64 / 4.0));
        }
        n.insert("s", Value::str(&format!("v{i}")));
        let f = if i % 3 != 0 {
            format!("{:?}", i as f64 / 4.0)
        } else {
            String::new()
        };
        writeln!(nodes, "{i},{},{f},v{i},{pad}", i % 1000).unwrap();
        m.nodes.push(Some(n));
        writeln!(rels, "{i},{},{}", (i + 1) % N, i % 10).unwrap();
        m.rels
            .push(Some(BTreeMap::from([("w", Value::Int(i % 10))])));
    }
    std::fs::write(dir.join("n.csv"), nodes).unwrap();
    std::fs::write(dir.join("r.csv"), rels).unwrap();
    let db = dir.join("g.qdb");
    let mut cfg = ImportConfig::new(&db);
    cfg.nodes
        .push(InputGroup::parse(&format!("N={}", dir.join("n.csv").display())).unwrap());
    cfg.relationships
        .push(InputGroup::parse(&format!("R={}", dir.join("r.csv").display())).unwrap());
    cfg.id_type = IdType::Integer;
    cfg.threads = 2;
    // A small budget: row groups of a few tens of thousands of rows.
    cfg.memory_budget_bytes = 24 << 20;
    import(&cfg, &NoProgress).unwrap();
    let d = Database::open(&db, OpenMode::Mapped).unwrap();
    assert!(
        d.node_tables()[0].footer.row_groups.len() >= 2,
        "the test needs several row groups"
    );
    (db, m)
}

fn check(s: &mut Session, m: &Model, rng: &mut rand::rngs::StdRng, ctx: &str) {
    let live: Vec<usize> = (0..N as usize).filter(|&i| m.nodes[i].is_some()).collect();
    let got = rows(
        s,
        "MATCH (n:N) RETURN n.id, n.a, n.f, n.s, n.extra ORDER BY n.id",
    );
    assert_eq!(got.len(), live.len(), "{ctx}: node count");
    for (&i, row) in live.iter().zip(&got) {
        let n = m.nodes[i].as_ref().expect("live");
        let want: Vec<Value> = std::iter::once(Value::Int(i as i64))
            .chain(
                NODE_KEYS
                    .iter()
                    .map(|k| n.get(k).cloned().unwrap_or(Value::Null)),
            )
            .collect();
        assert_eq!(row, &want, "{ctx}: node {i}");
    }
    assert_eq!(
        ints(s, "MATCH (n:N) RETURN count(n)"),
        vec![live.len() as i64],
        "{ctx}: count(n)"
    );
    assert_eq!(
        ints(s, "MATCH (n) RETURN count(*)"),
        vec![live.len() as i64],
        "{ctx}: count(*) of all nodes"
    );
    let want_f = live
        .iter()
        .filter(|&&i| m.nodes[i].as_ref().is_some_and(|n| n.contains_key("f")))
        .count() as i64;
    assert_eq!(
        ints(s, "MATCH (n:N) RETURN count(n.f)"),
        vec![want_f],
        "{ctx}: count(n.f)"
    );
    let live_rels: Vec<usize> = (0..N as usize).filter(|&i| m.rels[i].is_some()).collect();
    let got = rows(
        s,
        "MATCH (a)-[r:R]->() RETURN a.id, r.w, r.w2 ORDER BY a.id",
    );
    assert_eq!(got.len(), live_rels.len(), "{ctx}: relationship count");
    for (&i, row) in live_rels.iter().zip(&got) {
        let r = m.rels[i].as_ref().expect("live");
        let want = vec![
            Value::Int(i as i64),
            r.get("w").cloned().unwrap_or(Value::Null),
            r.get("w2").cloned().unwrap_or(Value::Null),
        ];
        assert_eq!(row, &want, "{ctx}: relationship of {i}");
    }
    assert_eq!(
        ints(s, "MATCH ()-[r:R]->() RETURN count(r)"),
        vec![live_rels.len() as i64],
        "{ctx}: count(r)"
    );
    // Expansion both ways from live nodes.
    for _ in 0..20 {
        let i = m.live_node(rng);
        let out: Vec<i64> = match m.rels[i] {
            Some(_) => vec![((i as i64) + 1) % N],
            None => vec![],
        };
        assert_eq!(
            ints(s, &format!("MATCH (:N {{id: {i}}})-->(b) RETURN b.id")),
            out,
            "{ctx}: out of {i}"
        );
        let p = (i + N as usize - 1) % N as usize;
        let inc: Vec<i64> = match m.rels[p] {
            Some(_) => vec![p as i64],
            None => vec![],
        };
        assert_eq!(
            ints(s, &format!("MATCH (:N {{id: {i}}})<--(b) RETURN b.id")),
            inc,
            "{ctx}: into {i}"
        );
    }
    // Seeks through the declared index on :N(a), values that exist and not; and by id.
    for _ in 0..8 {
        let x = rng.random_range(0..2000);
        let want: Vec<i64> = live
            .iter()
            .filter(|&&i| m.nodes[i].as_ref().and_then(|n| n.get("a")) == Some(&Value::Int(x)))
            .map(|&i| i as i64)
            .collect();
        let mut got = ints(s, &format!("MATCH (n:N {{a: {x}}}) RETURN n.id"));
        got.sort_unstable();
        assert_eq!(got, want, "{ctx}: seek a = {x}");
        let i = rng.random_range(0..N);
        let want: Vec<i64> = m.nodes[i as usize]
            .as_ref()
            .map(|_| i)
            .into_iter()
            .collect();
        assert_eq!(
            ints(s, &format!("MATCH (n:N {{id: {i}}}) RETURN n.id")),
            want,
            "{ctx}: seek id {i}"
        );
    }
    // The label added to imported nodes: a scan, a count, seeks through its index.
    let want: Vec<i64> = m.x.iter().map(|&i| i as i64).collect();
    assert_eq!(
        ints(s, "MATCH (n:X) RETURN n.id ORDER BY n.id"),
        want,
        "{ctx}: label scan :X"
    );
    assert_eq!(
        ints(s, "MATCH (n:X) RETURN count(n)"),
        vec![want.len() as i64],
        "{ctx}: count :X"
    );
    for &i in m.x.iter().take(5) {
        let Some(Value::Int(a)) = m.nodes[i].as_ref().and_then(|n| n.get("a")).cloned() else {
            continue;
        };
        let want: Vec<i64> =
            m.x.iter()
                .filter(|&&j| m.nodes[j].as_ref().and_then(|n| n.get("a")) == Some(&Value::Int(a)))
                .map(|&j| j as i64)
                .collect();
        let mut got = ints(s, &format!("MATCH (n:X {{a: {a}}}) RETURN n.id"));
        got.sort_unstable();
        assert_eq!(got, want, "{ctx}: seek :X(a = {a})");
    }
    // Properties as a whole (the overlay merged with the segment, or the patch).
    for _ in 0..20 {
        let i = m.live_node(rng);
        let got = rows(s, &format!("MATCH (n:N {{id: {i}}}) RETURN properties(n)"));
        let Value::Map(p) = &got[0][0] else {
            panic!("{ctx}: properties(n) of {i}: {got:?}")
        };
        let mut got: Vec<(String, Value)> =
            p.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        got.retain(|(k, _)| k != "pad" && k != "id");
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let want: Vec<(String, Value)> = m.nodes[i]
            .as_ref()
            .expect("live")
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        assert_eq!(got, want, "{ctx}: properties of {i}");
    }
}

#[test]
fn checkpoints_fold_changes_into_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut m) = setup(dir.path());
    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    run(&mut s, "CREATE INDEX ON :N(a)").unwrap();
    run(&mut s, "CREATE INDEX ON :X(a)").unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for round in 0..7 {
        let ctx = format!("round {round}");
        // A bulk SET over a slice of the nodes.
        let k = rng.random_range(2..9);
        run(
            &mut s,
            &format!(
                "MATCH (n:N) WHERE n.id % {k} = {} SET n.a = n.a + 1000",
                round % k
            ),
        )
        .unwrap();
        for i in 0..N {
            if i % k == round % k {
                let Some(n) = m.nodes[i as usize].as_mut() else {
                    continue;
                };
                // `+` adds to an integer and appends to a string.
                match n.get("a").cloned() {
                    Some(Value::Int(a)) => n.insert("a", Value::Int(a + 1000)),
                    Some(Value::Str(a)) => n.insert("a", Value::str(&format!("{a}1000"))),
                    _ => None,
                };
            }
        }
        // Single changes: each key, removals, other types, new keys, relationships.
        for _ in 0..200 {
            let (key, v): (&'static str, Value) = match rng.random_range(0..8) {
                0 => ("a", Value::Int(rng.random_range(0..2000))),
                1 => ("f", Value::Float(rng.random_range(0..100) as f64 + 0.5)),
                2 => ("s", Value::str(&format!("new{}", rng.random_range(0..99)))),
                3 => ("extra", Value::Int(rng.random_range(0..50))),
                4 => ("f", Value::Null),
                5 => ("a", Value::str("text")),
                6 => ("w", Value::Int(rng.random_range(0..100))),
                _ => ("w2", Value::Float(rng.random_range(0..10) as f64 * 0.25)),
            };
            let rel = key.starts_with('w');
            let i = if rel {
                m.live_rel(&mut rng)
            } else {
                m.live_node(&mut rng)
            };
            let q = if rel {
                format!(
                    "MATCH (:N {{id: {i}}})-[r:R]->() SET r.{key} = {}",
                    text(&v)
                )
            } else {
                format!("MATCH (n:N {{id: {i}}}) SET n.{key} = {}", text(&v))
            };
            run(&mut s, &q).unwrap_or_else(|e| panic!("{ctx}: {q}: {e}"));
            let target = if rel { &mut m.rels[i] } else { &mut m.nodes[i] };
            let target = target.as_mut().expect("live");
            if v == Value::Null {
                target.remove(key);
            } else {
                target.insert(key, v);
            }
        }
        // Labels: added to imported nodes (a `:LABEL` column appears), removed again.
        for _ in 0..30 {
            let i = m.live_node(&mut rng);
            run(&mut s, &format!("MATCH (n:N {{id: {i}}}) SET n:X")).unwrap();
            m.x.insert(i);
        }
        for _ in 0..8 {
            let Some(&i) = m.x.iter().nth(rng.random_range(0..m.x.len())) else {
                break;
            };
            run(&mut s, &format!("MATCH (n:N {{id: {i}}}) REMOVE n:X")).unwrap();
            m.x.remove(&i);
        }
        // Deletions of imported relationships and nodes (with theirs).
        for _ in 0..40 {
            let i = m.live_rel(&mut rng);
            run(
                &mut s,
                &format!("MATCH (:N {{id: {i}}})-[r:R]->() DELETE r"),
            )
            .unwrap();
            m.rels[i] = None;
        }
        for _ in 0..25 {
            let i = m.live_node(&mut rng);
            run(&mut s, &format!("MATCH (n:N {{id: {i}}}) DETACH DELETE n")).unwrap();
            m.nodes[i] = None;
            m.x.remove(&i);
            m.rels[i] = None;
            m.rels[(i + N as usize - 1) % N as usize] = None;
        }
        check(&mut s, &m, &mut rng, &format!("{ctx}, before CHECKPOINT"));
        run(&mut s, "CHECKPOINT").unwrap();
        // What stays in the delta: only the values that fit no column (strings in the
        // integer column `a`), one op each; deletions are in bitmaps.
        let strings_in_a = m
            .nodes
            .iter()
            .filter(|n| {
                n.as_ref()
                    .is_some_and(|n| matches!(n.get("a"), Some(Value::Str(_))))
            })
            .count() as i64;
        let left = storage_info(&mut s, "delta_changes");
        assert!(
            left <= strings_in_a,
            "{ctx}: {left} changes left in the delta after CHECKPOINT, {strings_in_a} misfits"
        );
        check(&mut s, &m, &mut rng, &format!("{ctx}, after CHECKPOINT"));
        drop(s);
        let mode = if round % 2 == 0 {
            OpenMode::Loaded
        } else {
            OpenMode::Mapped
        };
        let d = Database::open(&db, mode).unwrap();
        d.verify().unwrap();
        for t in &d.manifest().node_tables {
            assert!(
                t.patches.len() <= PATCH_FILES_MAX,
                "{ctx}: {} patch files",
                t.patches.len()
            );
        }
        for r in &d.manifest().rel_types {
            assert!(
                r.patches.len() <= PATCH_FILES_MAX,
                "{ctx}: {} patch files",
                r.patches.len()
            );
        }
        drop(d);
        s = Session::open_with(&db, mode, false).unwrap();
        assert_eq!(
            storage_info(&mut s, "delta_changes"),
            left,
            "{ctx}: what a reopen replays"
        );
        check(&mut s, &m, &mut rng, &format!("{ctx}, reopened {mode:?}"));
    }
    // Seven checkpoints of changes to the same table: the patch files were merged.
    let d = Database::open(&db, OpenMode::Mapped).unwrap();
    let t = &d.manifest().node_tables[0];
    assert!(
        !t.patches.is_empty() && t.patches.len() < 7,
        "{:?}",
        t.patches
    );
}

/// Scan-aggregates over a database with uncheckpointed changes read the segments at
/// column speed and the delta beside them (ParallelScanAggregate): the same answers as
/// the row-at-a-time plan, after property changes, removals, deletions (with theirs),
/// labels added and a table label removed, and created nodes.
#[test]
fn scan_aggregates_read_the_delta() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = setup(dir.path());
    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut writes: Vec<String> = Vec::new();
    for _ in 0..300 {
        let i = rng.random_range(0..N);
        writes.push(match rng.random_range(0..9) {
            0 | 1 => format!(
                "MATCH (n:N {{id: {i}}}) SET n.a = {}",
                rng.random_range(0..2000)
            ),
            2 => format!("MATCH (n:N {{id: {i}}}) REMOVE n.f"),
            3 => format!("MATCH (n:N {{id: {i}}}) SET n.s = 'v1-{i}'"),
            4 => format!(
                "MATCH (n:N {{id: {i}}}) SET n.extra = {}",
                rng.random_range(0..9)
            ),
            5 => format!("MATCH (n:N {{id: {i}}}) SET n:X"),
            6 => format!("MATCH (n:N {{id: {i}}}) DETACH DELETE n"),
            7 => format!("MATCH (n:N {{id: {i}}}) REMOVE n:N SET n:M"),
            _ => format!(
                "CREATE (:N {{id: {}, a: {}, s: 'v1new', extra: 1}})",
                N + i,
                i % 1000
            ),
        });
    }
    let queries = [
        ("MATCH (n:N)", "RETURN count(*)"),
        (
            "MATCH (n:N)",
            "RETURN n.a % 7 AS k, count(*), count(n.f), sum(n.extra) ORDER BY k",
        ),
        ("MATCH (n:N) WHERE n.s STARTS WITH 'v1'", "RETURN count(*)"),
        (
            "MATCH (n:N) WHERE n.f IS NULL",
            "RETURN count(*), min(n.a), max(n.a)",
        ),
        ("MATCH (n)", "RETURN count(*)"),
        ("MATCH (n:X)", "RETURN count(*), sum(n.a)"),
        ("MATCH (n:M)", "RETURN count(*)"),
        // The typed path (keys and arguments that are properties): a key only the delta
        // has, an imported key of a thousand values, no key.
        (
            "MATCH (n:N)",
            "RETURN n.extra AS k, count(*), count(n.f), sum(n.a), avg(n.f), min(n.f), max(n.a) ORDER BY k",
        ),
        (
            "MATCH (n:N)",
            "RETURN n.a AS k, count(*), sum(n.extra), max(n.f) ORDER BY k",
        ),
        (
            "MATCH (n:N)",
            "RETURN count(*), sum(n.a), avg(n.a), min(n.f), max(n.f), count(n.s)",
        ),
    ];
    let mut checked = 0;
    for (k, w) in writes.iter().enumerate() {
        run(&mut s, w).unwrap_or_else(|e| panic!("{w}: {e}"));
        if k % 50 != 49 {
            continue;
        }
        for (m, r) in queries {
            let fused = format!("{m} {r}");
            let plan = run(&mut s, &format!("EXPLAIN {fused}"))
                .unwrap()
                .plan
                .unwrap_or_default();
            assert!(
                plan.contains("ParallelScanAggregate"),
                "{fused}: not a parallel scan-aggregate: {plan}"
            );
            let rowwise = format!("{m} WITH n, 1 AS one {r}");
            assert_eq!(
                rows(&mut s, &fused),
                rows(&mut s, &rowwise),
                "after {} writes: {fused}",
                k + 1
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 6 * queries.len());
}

/// Nodes created by Cypher with the id property of an imported id space join its index
/// at the checkpoint: seeks by id stay index seeks and find them, the old ids still
/// resolve; a created id that repeats one already there keeps its table out of the
/// index (seeks still answer right, by scanning).
#[test]
fn created_nodes_join_the_id_index() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = setup(dir.path());
    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    run(
        &mut s,
        &format!("UNWIND range(0, 99) AS i CREATE (:N {{id: {N} + i * 3, a: i}})"),
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let d = Database::open(&db, OpenMode::Mapped).unwrap();
    assert_eq!(d.manifest().id_spaces[0].n_ids, N as u64 + 100);
    drop(d);
    let seek = |s: &mut Session, id: i64| {
        let q = format!("MATCH (n:N {{id: {id}}}) RETURN n.a");
        let plan = run(s, &format!("EXPLAIN {q}"))
            .unwrap()
            .plan
            .unwrap_or_default();
        (plan.contains("by id index"), rows(s, &q))
    };
    for i in [0i64, 1, 50, 99] {
        let (indexed, got) = seek(&mut s, N + i * 3);
        assert!(
            indexed,
            "created id {} is sought through the index",
            N + i * 3
        );
        assert_eq!(got, vec![vec![Value::Int(i)]], "created id {}", N + i * 3);
    }
    assert_eq!(seek(&mut s, 17), (true, vec![vec![Value::Int(17)]]));
    assert_eq!(seek(&mut s, N + 1).1, Vec::<Vec<Value>>::new());
    // A repeated id: that table stays out of the index, and seeks scan it beside the
    // index lookup; so does a table of created nodes of several labels.
    run(&mut s, "CREATE (:N {id: 17, a: -1})").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    run(
        &mut s,
        "CREATE (:N {id: 5000000, a: -2}), (:Other {id: 5000000, a: -3})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let plan = run(&mut s, "EXPLAIN MATCH (n:N {id: 17}) RETURN n.a")
        .unwrap()
        .plan
        .unwrap_or_default();
    assert!(
        plan.contains("by id index") && plan.contains("a scan of 3 nodes outside it"),
        "{plan}"
    );
    let (_, mut got) = seek(&mut s, 17);
    got.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(got, vec![vec![Value::Int(-1)], vec![Value::Int(17)]]);
    assert_eq!(seek(&mut s, N + 3).1, vec![vec![Value::Int(1)]]);
    assert_eq!(seek(&mut s, 5000000).1, vec![vec![Value::Int(-2)]]);
    assert_eq!(
        rows(&mut s, "MATCH (n:Other {id: 5000000}) RETURN n.a"),
        vec![vec![Value::Int(-3)]]
    );
    // Created nodes of several labels, the others without the id (a LOAD CSV's events
    // beside new users): the table joins the index, nothing more is scanned.
    run(
        &mut s,
        "CREATE (:N {id: 6000000, a: -4}), (:Other {k: 1}), (:Other {k: 2})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let plan = run(&mut s, "EXPLAIN MATCH (n:N {id: 6000000}) RETURN n.a")
        .unwrap()
        .plan
        .unwrap_or_default();
    assert!(plan.contains("a scan of 3 nodes outside it"), "{plan}");
    assert_eq!(seek(&mut s, 6000000).1, vec![vec![Value::Int(-4)]]);
    assert_eq!(
        rows(&mut s, "MATCH (n:Other {k: 2}) RETURN n.k"),
        vec![vec![Value::Int(2)]]
    );
}

/// Created nodes of one label set in a long run (a LOAD CSV's events between users made
/// one at a time) get a table of their own at the checkpoint, carrying the labels, so
/// that a scan of another label skips it whole and none reads a `:LABEL` column per row
/// (a soak's reads fell 2.6x over 20 minutes as such rows piled up in tables shared
/// with users). Short runs between long ones share a table. The id index takes the
/// users of every table of them, in one write.
#[test]
fn long_runs_of_created_labels_get_tables_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = setup(dir.path());
    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    let writes = [
        format!("UNWIND range(0, 99) AS i CREATE (:N {{id: {N} + i, a: i}})"),
        "UNWIND range(0, 2999) AS i CREATE (:Ev {k: i})".to_string(),
        format!("UNWIND range(100, 1599) AS i CREATE (:N {{id: {N} + i, a: i}})"),
        "UNWIND range(0, 9) AS i CREATE (:Ev {k: -i})".to_string(),
        format!("UNWIND range(1600, 1604) AS i CREATE (:N:X {{id: {N} + i, a: i}})"),
        // A hole: a created node deleted before the checkpoint.
        "CREATE (:Ev {k: 999999})".to_string(),
        "MATCH (n:Ev {k: 999999}) DELETE n".to_string(),
    ];
    for w in &writes {
        run(&mut s, w).unwrap_or_else(|e| panic!("{w}: {e}"));
    }
    let queries = [
        "MATCH (n:N) RETURN count(*), sum(n.a), count(n.k)",
        "MATCH (n:Ev) RETURN count(*), sum(n.k), count(n.a)",
        "MATCH (n:X) RETURN count(*), sum(n.a)",
        "MATCH (n) RETURN count(*)",
        "MATCH (n:N) WHERE n.a >= 1500 RETURN n.a ORDER BY n.a",
    ];
    let before: Vec<_> = queries.iter().map(|q| rows(&mut s, q)).collect();
    run(&mut s, "CHECKPOINT").unwrap();
    let d = Database::open(&db, OpenMode::Mapped).unwrap();
    let m = d.manifest();
    let created: Vec<(Vec<&str>, u64, bool)> = m.node_tables[1..]
        .iter()
        .map(|t| {
            (
                t.labels
                    .iter()
                    .map(|&l| m.labels[l as usize].as_str())
                    .collect(),
                t.n_rows,
                t.label_column.is_some(),
            )
        })
        .collect();
    assert_eq!(
        created,
        vec![
            (vec!["N"], 100, false),
            (vec!["Ev"], 3000, false),
            (vec!["N"], 1500, false),
            // The short runs after the last long one: events and users with a second
            // label, in one table with a label column (the deleted node at the end was
            // collected: its id ends no table as a hole).
            (vec![], 15, true),
        ],
        "{:?}",
        m.node_tables.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    // Every created user is in the id index: both tables of them (the mixed table has
    // users too; its events carry no id).
    assert_eq!(m.id_spaces[0].n_ids, N as u64 + 1605);
    drop(d);
    for (q, want) in queries.iter().zip(&before) {
        assert_eq!(&rows(&mut s, q), want, "{q}");
    }
    for id in [N, N + 99, N + 100, N + 1599, N + 1604] {
        let q = format!("MATCH (n:N {{id: {id}}}) RETURN n.a");
        let plan = run(&mut s, &format!("EXPLAIN {q}"))
            .unwrap()
            .plan
            .unwrap_or_default();
        assert!(
            plan.contains("by id index") && !plan.contains("outside it"),
            "{q}: {plan}"
        );
        assert_eq!(rows(&mut s, &q), vec![vec![Value::Int(id - N)]], "{q}");
    }
    // Reopened, the same.
    drop(s);
    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    for (q, want) in queries.iter().zip(&before) {
        assert_eq!(&rows(&mut s, q), want, "reopened: {q}");
    }
}

/// `MATCH (n {id: x})` with no label seeks through the one id space whose `:ID` property
/// is `id` (mgbench's `vertex_on_property`), scanning the tables outside its index, and
/// answers as a scan of every node does: fresh, with created nodes in the delta (no
/// label, another label, a repeated id, a string id), a deleted one, after a checkpoint.
#[test]
fn nodes_of_any_label_seek_by_the_id_index() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = setup(dir.path());
    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    let keys = [
        "5",
        "17",
        "777",
        "'17'",
        "-1",
        "17.0",
        "null",
        &N.to_string(),
        "9000000",
    ];
    let check = |s: &mut Session, ctx: &str| {
        for k in keys {
            let q = format!("MATCH (n {{id: {k}}}) RETURN n.a");
            let plan = run(s, &format!("EXPLAIN {q}"))
                .unwrap()
                .plan
                .unwrap_or_default();
            if k != "null" {
                assert!(plan.contains("by id index"), "{ctx}: {q}: {plan}");
            }
            let scan = format!("MATCH (n) WITH n, 1 AS one WHERE n.id = {k} RETURN n.a");
            assert_eq!(sorted(s, &q), sorted(s, &scan), "{ctx}: {q}");
        }
    };
    check(&mut s, "fresh");
    run(
        &mut s,
        "CREATE ({id: 17, a: -1}), (:Other {id: 9000000, a: -2}), (:N {id: 777, a: -3}), ({id: '17', a: -4})",
    )
    .unwrap();
    run(&mut s, "MATCH (n:N {id: 5}) DETACH DELETE n").unwrap();
    check(&mut s, "with a delta");
    run(&mut s, "CHECKPOINT").unwrap();
    check(&mut s, "after a checkpoint");
}
