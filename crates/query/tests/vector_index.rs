//! Vector indexes with their HNSW graph: imported `float[]` vectors indexed by
//! `CREATE VECTOR INDEX`, `db.index.vector.queryNodes` against brute force (recall@10),
//! then following writes the delta holds (deleted nodes never come back, changed and
//! created vectors count), a checkpoint that rebuilds the graph, and a reopen.

mod common;

use common::{ints, rows, run};
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::{Session, Value};
use quiver_storage::manifest::IdType;
use quiver_storage::OpenMode;
use rand::{Rng, SeedableRng};
use std::fmt::Write;
use std::path::Path;

const DIMS: usize = 16;
const N: usize = 6_000;

fn lit(v: &[f64]) -> String {
    format!(
        "[{}]",
        v.iter()
            .map(|x| format!("{x:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let n = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    dot / (n(a) * n(b))
}

/// The ids of the `k` live vectors nearest `q`.
fn brute(live: &[(i64, Vec<f64>)], q: &[f64], k: usize) -> Vec<i64> {
    let mut v: Vec<(f64, i64)> = live.iter().map(|(i, x)| (cosine(x, q), *i)).collect();
    v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    v.into_iter().take(k).map(|x| x.1).collect()
}

fn top(s: &mut Session, q: &[f64], k: usize) -> Vec<i64> {
    ints(
        s,
        &format!(
            "CALL db.index.vector.queryNodes('docs', {k}, {}) YIELD node, score RETURN node.i",
            lit(q)
        ),
    )
}

/// Recall@10 over `queries`, and that no returned node is outside `live`.
fn recall(s: &mut Session, live: &[(i64, Vec<f64>)], queries: &[Vec<f64>]) -> f64 {
    let (mut found, mut total) = (0, 0);
    for q in queries {
        let got = top(s, q, 10);
        assert!(
            got.iter().all(|i| live.iter().any(|(j, _)| j == i)),
            "a node that is gone or never had a vector came back: {got:?}"
        );
        let want = brute(live, q, 10);
        found += got.iter().filter(|i| want.contains(i)).count();
        total += 10;
    }
    found as f64 / total as f64
}

fn setup(dir: &Path) -> (std::path::PathBuf, Vec<(i64, Vec<f64>)>, Vec<Vec<f64>>) {
    let mut r = rand_pcg::Pcg64::seed_from_u64(5);
    let centres: Vec<Vec<f64>> = (0..40)
        .map(|_| (0..DIMS).map(|_| r.random_range(-1.0..1.0)).collect())
        .collect();
    let draw = |r: &mut rand_pcg::Pcg64| -> Vec<f64> {
        let c = &centres[r.random_range(0..centres.len())];
        c.iter()
            .map(|x| ((x + r.random_range(-0.4..0.4)) * 1e4f64).round() / 1e4)
            .collect()
    };
    let mut csv = String::from("i:ID,emb:float[]\n");
    let mut vecs = Vec::new();
    for i in 0..N as i64 {
        let v = draw(&mut r);
        let fields: Vec<String> = v.iter().map(|x| format!("{x}")).collect();
        writeln!(csv, "{i},{}", fields.join(";")).unwrap();
        vecs.push((i, v));
    }
    std::fs::write(dir.join("docs.csv"), csv).unwrap();
    let db = dir.join("g.qdb");
    let mut cfg = ImportConfig::new(&db);
    cfg.nodes
        .push(InputGroup::parse(&format!("Doc={}", dir.join("docs.csv").display())).unwrap());
    cfg.id_type = IdType::Integer;
    cfg.threads = 2;
    import(&cfg, &NoProgress).unwrap();
    let queries = (0..60).map(|_| draw(&mut r)).collect();
    (db, vecs, queries)
}

fn graph_file(s: &mut Session) -> String {
    let r = rows(
        s,
        "SHOW INDEXES YIELD name, type WHERE type = 'VECTOR' RETURN name",
    );
    assert_eq!(r, vec![vec![Value::str("docs")]]);
    let db = s.db();
    let m = db.manifest();
    let v = &m.vector_indexes[0];
    let f = v
        .file
        .as_ref()
        .expect("a built vector index names its graph");
    assert!(db.dir().join(&f.file).exists(), "{} missing", f.file);
    // Searches use it (an exact search would pass the recall checks too).
    let g = quiver_query::vector::open(&db, v)
        .unwrap()
        .expect("the graph opens");
    assert_eq!(g.live() as u64, v.entries);
    f.file.clone()
}

#[test]
fn vector_index_search_follows_writes_checkpoints_and_reopens() {
    let d = tempfile::tempdir().unwrap();
    let (db, mut live, queries) = setup(d.path());
    let mut s = Session::open_with(&db, OpenMode::Mapped, true).unwrap();
    run(
        &mut s,
        &format!("CREATE VECTOR INDEX docs FOR (n:Doc) ON n.emb OPTIONS {{indexConfig: {{`vector.dimensions`: {DIMS}, `vector.similarity_function`: 'cosine'}}}}"),
    )
    .unwrap();
    let first = graph_file(&mut s);
    {
        let db = s.db();
        let v = &db.manifest().vector_indexes[0];
        assert_eq!(v.entries, N as u64);
        assert_eq!(v.covers_nodes, db.n_nodes());
    }
    let r = recall(&mut s, &live, &queries);
    assert!(r >= 0.95, "recall@10 as built: {r}");

    // Writes the delta holds: deletions, changed vectors (one of them made equal to a
    // query: it must come first), created nodes (one equal to another query).
    run(&mut s, "MATCH (n:Doc) WHERE n.i % 7 = 0 DETACH DELETE n").unwrap();
    live.retain(|(i, _)| i % 7 != 0);
    run(
        &mut s,
        &format!("MATCH (n:Doc {{i: 1}}) SET n.emb = {}", lit(&queries[0])),
    )
    .unwrap();
    live.iter_mut().find(|(i, _)| *i == 1).unwrap().1 = queries[0].clone();
    run(
        &mut s,
        &format!(
            "CREATE (:Doc {{i: 100000, emb: {}}}), (:Doc {{i: 100001, emb: [1.0, 2.0]}})",
            lit(&queries[1])
        ),
    )
    .unwrap();
    live.push((100_000, queries[1].clone()));
    // A vector removed: the node is no candidate any more.
    run(&mut s, "MATCH (n:Doc {i: 2}) REMOVE n.emb").unwrap();
    live.retain(|(i, _)| *i != 2);
    let check = |s: &mut Session, live: &[(i64, Vec<f64>)], when: &str| {
        assert_eq!(
            top(s, &queries[0], 1),
            vec![1],
            "{when}: the changed vector"
        );
        assert_eq!(
            top(s, &queries[1], 1),
            vec![100_000],
            "{when}: the created one"
        );
        let r = recall(s, live, &queries);
        assert!(r >= 0.95, "recall@10 {when}: {r}");
    };
    check(&mut s, &live, "with the delta");

    // The checkpoint folds the writes; the graph is built again over them.
    run(&mut s, "CHECKPOINT").unwrap();
    let rebuilt = graph_file(&mut s);
    assert_ne!(
        first, rebuilt,
        "the checkpoint brought the graph up to date"
    );
    {
        // Extended, not built again: the old entries stay (the deleted ones dead), the
        // created vector comes after them (and the changed one, unless the checkpoint
        // carried it as an op: a list of doubles over a column of floats).
        let db = s.db();
        let g = quiver_query::vector::open(&db, &db.manifest().vector_indexes[0])
            .unwrap()
            .unwrap();
        assert!(
            g.len() > N && g.live() < N,
            "{} entries, {} live",
            g.len(),
            g.live()
        );
    }
    {
        let db = s.db();
        let v = &db.manifest().vector_indexes[0];
        assert_eq!(v.covers_nodes, db.n_nodes());
        assert_eq!(v.entries, live.len() as u64);
    }
    check(&mut s, &live, "after a checkpoint");
    drop(s);
    let mut s = Session::open_with(&db, OpenMode::Mapped, true).unwrap();
    assert_eq!(graph_file(&mut s), rebuilt);
    check(&mut s, &live, "after a reopen");
    // Read whole rather than mapped: the same answers.
    drop(s);
    let mut s = Session::open_with(&db, OpenMode::Loaded, false).unwrap();
    check(&mut s, &live, "loaded");
    drop(s);

    // Dropped: its graph file goes with the generation it belonged to.
    let mut s = Session::open_with(&db, OpenMode::Mapped, true).unwrap();
    run(&mut s, "DROP INDEX docs").unwrap();
    assert!(s.db().manifest().vector_indexes.is_empty());
}

/// Relationship vector indexes (`FOR ()-[r:T]-() ON r.p`), searched exactly by
/// `db.index.vector.queryRelationships`, through writes and a checkpoint; each kind of
/// index refuses the other procedure.
#[test]
fn relationship_vector_indexes_search_exactly() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = Session::open_with(&db, OpenMode::Mapped, true).unwrap();
    let mut r = rand_pcg::Pcg64::seed_from_u64(8);
    let dims = 6;
    let mut vecs: Vec<(i64, Vec<f64>)> = Vec::new();
    for i in 0..300i64 {
        let v: Vec<f64> = (0..dims).map(|_| r.random_range(-1.0..1.0)).collect();
        vecs.push((i, v));
    }
    let list = vecs
        .iter()
        .map(|(i, v)| format!("{{i: {i}, v: {}}}", lit(v)))
        .collect::<Vec<_>>()
        .join(", ");
    run(
        &mut s,
        &format!("UNWIND [{list}] AS x CREATE (:P {{i: x.i}})-[:SIM {{i: x.i, emb: x.v}}]->(:P {{i: -x.i}})"),
    )
    .unwrap();
    run(
        &mut s,
        "CREATE VECTOR INDEX sims FOR ()-[r:SIM]-() ON r.emb OPTIONS {indexConfig: {`vector.dimensions`: 6, `vector.similarity_function`: 'euclidean'}}",
    )
    .unwrap();
    assert_eq!(
        rows(
            &mut s,
            "SHOW INDEXES YIELD name, type, entityType, labelsOrTypes WHERE type = 'VECTOR' RETURN name, entityType, labelsOrTypes"
        ),
        vec![vec![
            Value::str("sims"),
            Value::str("RELATIONSHIP"),
            Value::list(vec![Value::str("SIM")])
        ]]
    );
    let l2 = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>();
    let check = |s: &mut Session, vecs: &[(i64, Vec<f64>)], when: &str| {
        let mut r = rand_pcg::Pcg64::seed_from_u64(9);
        for _ in 0..10 {
            let q: Vec<f64> = (0..dims).map(|_| r.random_range(-1.0..1.0)).collect();
            let got = ints(
                s,
                &format!(
                    "CALL db.index.vector.queryRelationships('sims', 5, {}) YIELD relationship, score RETURN relationship.i",
                    lit(&q)
                ),
            );
            let mut want: Vec<(f64, i64)> = vecs.iter().map(|(i, v)| (l2(v, &q), *i)).collect();
            want.sort_by(|a, b| a.0.total_cmp(&b.0));
            let want: Vec<i64> = want.iter().take(5).map(|x| x.1).collect();
            assert_eq!(got, want, "{when}");
        }
    };
    check(&mut s, &vecs, "as created");
    run(&mut s, "MATCH ()-[r:SIM]->() WHERE r.i % 5 = 0 DELETE r").unwrap();
    vecs.retain(|(i, _)| i % 5 != 0);
    check(&mut s, &vecs, "after deletes");
    run(&mut s, "CHECKPOINT").unwrap();
    check(&mut s, &vecs, "after a checkpoint");
    let e = run(
        &mut s,
        "CALL db.index.vector.queryNodes('sims', 5, [1, 2, 3, 4, 5, 6])",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("queryRelationships"), "{e}");
}

/// An index declared without dimensions (Neo4j 5.23 on; LlamaIndex declares its so)
/// takes the vectors' own length, and a query of that length.
#[test]
fn vector_indexes_without_dimensions_take_the_vectors_length() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = Session::open_with(&db, OpenMode::Mapped, true).unwrap();
    run(
        &mut s,
        "UNWIND range(0, 99) AS i CREATE (:E {i: i, v: [toFloat(i), 1.0, toFloat(i % 7)]})",
    )
    .unwrap();
    run(
        &mut s,
        "CREATE VECTOR INDEX e IF NOT EXISTS FOR (m:E) ON m.v",
    )
    .unwrap();
    assert_eq!(
        rows(
            &mut s,
            "SHOW INDEXES YIELD name, options WHERE name = 'e' RETURN options.indexConfig.`vector.dimensions`"
        ),
        vec![vec![Value::Null]]
    );
    let g = graph_entries(&mut s);
    assert_eq!(g, 100);
    assert_eq!(
        ints(
            &mut s,
            "CALL db.index.vector.queryNodes('e', 1, [42.0, 1.0, 0.0]) YIELD node RETURN node.i"
        ),
        vec![42]
    );
}

fn graph_entries(s: &mut Session) -> usize {
    let db = s.db();
    let v = &db.manifest().vector_indexes[0];
    quiver_query::vector::open(&db, v).unwrap().unwrap().live()
}

/// A database deleted and made again at the same place names its graph file as the
/// first did: searches read the new one, not the graph opened before.
#[test]
fn a_database_made_again_at_the_same_place_is_searched_anew() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    for round in 0..2i64 {
        let _ = std::fs::remove_dir_all(&db);
        let mut s = Session::open_with(&db, OpenMode::Mapped, true).unwrap();
        // Round 0: node i has vector [i, 1]; round 1: [1000 - i, 1] (nearest flips).
        run(
            &mut s,
            &format!(
                "UNWIND range(0, 199) AS i CREATE (:V {{i: i, v: [toFloat(CASE {round} WHEN 0 THEN i ELSE 1000 - i END), 1.0]}})"
            ),
        )
        .unwrap();
        run(
            &mut s,
            "CREATE VECTOR INDEX vv FOR (n:V) ON n.v OPTIONS {indexConfig: {`vector.dimensions`: 2, `vector.similarity_function`: 'euclidean'}}",
        )
        .unwrap();
        let want = if round == 0 { 199 } else { 0 };
        assert_eq!(
            ints(
                &mut s,
                "CALL db.index.vector.queryNodes('vv', 1, [2000.0, 1.0]) YIELD node RETURN node.i"
            ),
            vec![want],
            "round {round}"
        );
    }
}
