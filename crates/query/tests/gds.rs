//! Graph algorithms from Cypher (`gds.*`, MAGE's names): a projection reads the graph
//! as stored (segments, deletion bitmaps, several types, orientations, a label filter,
//! weights) and as a delta changed it, and every algorithm's answer equals what
//! `quiver-algo` gives on the same edges held in memory.

mod common;

use common::{rows, run};
use quiver_algo::{centrality, community, components, structure, EdgeList, Run};
use quiver_query::Session;
use quiver_query::Value;
use quiver_storage::OpenMode;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;

fn open(dir: &Path) -> Session {
    Session::open_with(&dir.join("g.qdb"), OpenMode::Mapped, true).unwrap()
}

struct Edges {
    /// (a, b, type R?, weight), by the nodes' `i`.
    list: Vec<(u32, u32, bool, f64)>,
    a_label: Vec<bool>,
}

/// A random graph of 80 nodes (labels A or B, a few isolated), relationships R (with
/// a weight) and S, self-loops and parallel ones among them.
fn make(s: &mut Session, seed: u64) -> Edges {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let n = 80u32;
    let a_label: Vec<bool> = (0..n).map(|_| rng.random_bool(0.6)).collect();
    let of = |a: bool| -> String {
        (0..n)
            .filter(|&i| a_label[i as usize] == a)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    run(
        s,
        &format!("UNWIND [{}] AS i CREATE (:A {{i: i}})", of(true)),
    )
    .unwrap();
    run(
        s,
        &format!("UNWIND [{}] AS i CREATE (:B {{i: i}})", of(false)),
    )
    .unwrap();
    let mut list = Vec::new();
    for _ in 0..400 {
        let a = rng.random_range(0..n - 5);
        let b = if rng.random_bool(0.05) {
            a
        } else {
            rng.random_range(0..n - 5)
        };
        let r = rng.random_bool(0.6);
        let w = rng.random_range(1..6) as f64;
        list.push((a, b, r, w));
    }
    for (ty, is_r) in [("R {w: e[2]}", true), ("S", false)] {
        let text: Vec<String> = list
            .iter()
            .filter(|x| x.2 == is_r)
            .map(|(a, b, _, w)| format!("[{a},{b},{w}]"))
            .collect();
        run(
            s,
            &format!(
                "UNWIND [{}] AS e MATCH (a {{i: e[0]}}), (b {{i: e[1]}}) CREATE (a)-[:{ty}]->(b)",
                text.join(",")
            ),
        )
        .unwrap();
    }
    Edges { list, a_label }
}

/// Node id by `i`.
fn ids(s: &mut Session) -> BTreeMap<i64, u32> {
    rows(s, "MATCH (n) RETURN n.i, id(n)")
        .into_iter()
        .map(|r| match (&r[0], &r[1]) {
            (Value::Int(i), Value::Int(id)) => (*i, *id as u32),
            _ => panic!("{r:?}"),
        })
        .collect()
}

fn node_bound(s: &mut Session) -> u32 {
    let r = rows(s, "MATCH (n) RETURN max(id(n))");
    match r[0][0] {
        Value::Int(m) => m as u32 + 1,
        _ => 0,
    }
}

/// The reference graph: the edges kept by `keep`, by node id.
fn reference(
    s: &mut Session,
    e: &Edges,
    keep: impl Fn(&(u32, u32, bool, f64)) -> bool,
    undirected: bool,
    only_a: bool,
) -> EdgeList {
    let id = ids(s);
    let n = node_bound(s);
    let edges = e
        .list
        .iter()
        .filter(|x| keep(x))
        .map(|&(a, b, _, w)| (id[&(a as i64)], id[&(b as i64)], w))
        .collect();
    let g = EdgeList::new(n, edges, undirected);
    let live: Vec<bool> = (0..n)
        .map(|v| {
            id.iter()
                .find(|(_, &x)| x == v)
                .is_some_and(|(&i, _)| !only_a || e.a_label[i as usize])
        })
        .collect();
    g.with_members(live)
}

fn by_node(s: &mut Session, q: &str) -> BTreeMap<u32, Value> {
    rows(s, q)
        .into_iter()
        .map(|r| match &r[0] {
            Value::Int(id) => (*id as u32, r[1].clone()),
            v => panic!("{v:?}"),
        })
        .collect()
}

fn float(v: &Value) -> f64 {
    match v {
        Value::Float(f) => *f,
        Value::Int(i) => *i as f64,
        v => panic!("{v:?}"),
    }
}

fn check_all(s: &mut Session, e: &Edges, phase: &str) {
    let one = Run::new(1);
    // Both types, natural.
    let r = rows(
        s,
        "CALL gds.graph.project('g', '*', {R: {type: 'R', properties: 'w'}, S: {type: 'S'}}) \
         YIELD graphName, nodeCount, relationshipCount RETURN graphName, nodeCount, relationshipCount",
    );
    assert_eq!(r[0][1], Value::Int(80), "{phase}");
    let g = reference(s, e, |_| true, false, false);
    assert_eq!(r[0][2], Value::Int(e.list.len() as i64), "{phase}");
    let want = centrality::PageRank::default().run(&g, &one).unwrap();
    let got = by_node(
        s,
        "CALL gds.pageRank.stream('g') YIELD nodeId, score RETURN nodeId, score",
    );
    assert_eq!(got.len(), 80, "{phase}");
    for (&v, x) in &got {
        assert!(
            (float(x) - want.scores[v as usize]).abs() < 1e-9,
            "{phase}: pageRank of {v}"
        );
    }
    let want = components::wcc(&g, &one).unwrap();
    let got = by_node(
        s,
        "CALL gds.wcc.stream('g') YIELD nodeId, componentId RETURN nodeId, componentId",
    );
    for (&v, c) in &got {
        assert_eq!(
            *c,
            Value::Int(want[v as usize] as i64),
            "{phase}: wcc of {v}"
        );
    }
    let want = components::scc(&g, &one).unwrap();
    let got = by_node(
        s,
        "CALL gds.scc.stream('g') YIELD nodeId, componentId RETURN nodeId, componentId",
    );
    for (&v, c) in &got {
        assert_eq!(
            *c,
            Value::Int(want[v as usize] as i64),
            "{phase}: scc of {v}"
        );
    }
    let want = centrality::Eigenvector {
        max_iterations: 20,
        tolerance: 1e-7,
        weighted: false,
    }
    .run(&g, &one)
    .unwrap();
    let got = by_node(
        s,
        "CALL gds.eigenvector.stream('g') YIELD nodeId, score RETURN nodeId, score",
    );
    for (&v, x) in &got {
        assert!(
            (float(x) - want.scores[v as usize]).abs() < 1e-9,
            "{phase}: eigenvector of {v}"
        );
    }
    let want = quiver_algo::paths::betweenness(&g, &one, None, 0, false).unwrap();
    let got = by_node(
        s,
        "CALL gds.betweenness.stream('g') YIELD nodeId, score RETURN nodeId, score",
    );
    for (&v, x) in &got {
        assert!(
            (float(x) - want[v as usize]).abs() < 1e-6,
            "{phase}: betweenness of {v}"
        );
    }
    for (call, harmonic) in [
        ("gds.closeness.stream", false),
        ("gds.closeness.harmonic.stream", true),
    ] {
        let want = quiver_algo::paths::closeness(&g, &one, harmonic).unwrap();
        let got = by_node(
            s,
            &format!("CALL {call}('g') YIELD nodeId, score RETURN nodeId, score"),
        );
        for (&v, x) in &got {
            assert!(
                (float(x) - want[v as usize]).abs() < 1e-12,
                "{phase}: {call} of {v}"
            );
        }
    }
    let sim = structure::Similarity {
        top_k: 10,
        cutoff: 1e-42,
        degree_cutoff: 1,
        overlap: false,
    }
    .run(&g, &one)
    .unwrap();
    let got = rows(s, "CALL gds.nodeSimilarity.stream('g') YIELD node1, node2, similarity RETURN node1, node2, similarity");
    let want: Vec<Vec<Value>> = sim
        .iter()
        .flat_map(|(a, l)| {
            l.iter().map(move |(b, x)| {
                vec![
                    Value::Int(*a as i64),
                    Value::Int(*b as i64),
                    Value::Float(*x),
                ]
            })
        })
        .collect();
    assert_eq!(got, want, "{phase}: node similarity");
    let src = ids(s)[&0];
    let want = quiver_algo::paths::dijkstra(&g, &one, src, None, false).unwrap();
    let got = rows(s, &format!("CALL gds.allShortestPaths.dijkstra.stream('g', {{sourceNode: {src}}}) YIELD targetNode, totalCost RETURN targetNode, totalCost"));
    assert_eq!(got.len(), want.order.len(), "{phase}: reached");
    for (r, (&v, &d)) in got.iter().zip(want.order.iter().zip(&want.dist)) {
        assert_eq!(r[0], Value::Int(v as i64));
        assert_eq!(float(&r[1]), d);
    }
    let bfs = rows(
        s,
        &format!(
            "CALL gds.bfs.stream('g', {{sourceNode: {src}}}) YIELD nodeIds RETURN size(nodeIds)"
        ),
    );
    let dfs = rows(
        s,
        &format!(
            "CALL gds.dfs.stream('g', {{sourceNode: {src}}}) YIELD nodeIds RETURN size(nodeIds)"
        ),
    );
    assert_eq!(bfs[0][0], Value::Int(want.order.len() as i64));
    assert_eq!(dfs[0][0], Value::Int(want.order.len() as i64));
    // Stats agree with the stream; an estimate is what the run takes.
    let est = rows(
        s,
        "CALL gds.pageRank.stats.estimate('g', {}) YIELD bytesMin RETURN bytesMin",
    );
    let est = float(&est[0][0]) as u64;
    let sum = run(
        s,
        "CALL gds.pageRank.stats('g') YIELD ranIterations, didConverge RETURN ranIterations",
    )
    .unwrap();
    assert!(
        sum.peak_bytes >= est && sum.peak_bytes <= est + est / 10 + (64 << 10),
        "{phase}: estimate {est}, took {}",
        sum.peak_bytes
    );

    // R alone, weighted.
    run(
        s,
        "CALL gds.graph.project('r', '*', {R: {type: 'R', properties: {w: {property: 'w', defaultValue: 1.0}}}}) YIELD graphName RETURN graphName",
    )
    .unwrap();
    let g = reference(s, e, |x| x.2, false, false);
    let pr = centrality::PageRank {
        weighted: true,
        ..Default::default()
    };
    let want = pr.run(&g, &one).unwrap();
    let got = by_node(
        s,
        "CALL gds.pageRank.stream('r', {relationshipWeightProperty: 'w'}) YIELD nodeId, score RETURN nodeId, score",
    );
    for (&v, x) in &got {
        assert!(
            (float(x) - want.scores[v as usize]).abs() < 1e-9,
            "{phase}: weighted pageRank of {v}"
        );
    }
    let want = centrality::degree(&g, &one, quiver_algo::Side::Out, true).unwrap();
    let got = by_node(
        s,
        "CALL gds.degree.stream('r', {relationshipWeightProperty: 'w'}) YIELD nodeId, score RETURN nodeId, score",
    );
    for (&v, x) in &got {
        assert_eq!(
            float(x),
            want[v as usize],
            "{phase}: weighted degree of {v}"
        );
    }

    // Undirected, label A only.
    run(
        s,
        "CALL gds.graph.project('u', 'A', {R: {orientation: 'UNDIRECTED'}, S: {orientation: 'UNDIRECTED'}}) YIELD graphName RETURN graphName",
    )
    .unwrap();
    let g = reference(s, e, |_| true, true, true);
    let t = structure::triangles(&g, &one).unwrap();
    let got = by_node(
        s,
        "CALL gds.triangleCount.stream('u') YIELD nodeId, triangleCount RETURN nodeId, triangleCount",
    );
    assert_eq!(
        got.len() as u64,
        e.a_label.iter().filter(|&&a| a).count() as u64
    );
    for (&v, x) in &got {
        assert_eq!(
            *x,
            Value::Int(t.per_node[v as usize] as i64),
            "{phase}: triangles of {v}"
        );
    }
    let total = rows(
        s,
        "CALL gds.triangleCount.stats('u') YIELD globalTriangleCount RETURN globalTriangleCount",
    );
    assert_eq!(total[0][0], Value::Int(t.total as i64));
    let k = structure::kcore(&g, &one).unwrap();
    let got = by_node(
        s,
        "CALL gds.kcore.stream('u') YIELD nodeId, coreValue RETURN nodeId, coreValue",
    );
    for (&v, x) in &got {
        assert_eq!(*x, Value::Int(k[v as usize] as i64), "{phase}: core of {v}");
    }
    let lpa = community::LabelPropagation {
        max_iterations: 10,
        weighted: false,
        seed: 42,
    }
    .run(&g, &one)
    .unwrap();
    let got = by_node(
        s,
        "CALL gds.labelPropagation.stream('u', {concurrency: 2}) YIELD nodeId, communityId RETURN nodeId, communityId",
    );
    for (&v, x) in &got {
        assert_eq!(
            *x,
            Value::Int(lpa.labels[v as usize] as i64),
            "{phase}: label of {v}"
        );
    }
    let q = rows(s, "CALL gds.louvain.stats('u') YIELD modularity, communityCount RETURN modularity, communityCount");
    let comm = by_node(
        s,
        "CALL gds.louvain.stream('u') YIELD nodeId, communityId RETURN nodeId, communityId",
    );
    let mut c = vec![u32::MAX; g.n as usize];
    for (&v, x) in &comm {
        c[v as usize] = float(x) as u32;
    }
    let qq = community::modularity(&g, &one, &c, false).unwrap();
    assert!(
        (float(&q[0][0]) - qq).abs() < 1e-9,
        "{phase}: modularity {q:?} against {qq}"
    );
    assert!(qq > 0.0, "{phase}: modularity {qq}");

    for name in ["g", "r", "u"] {
        run(
            s,
            &format!("CALL gds.graph.drop('{name}') YIELD graphName RETURN graphName"),
        )
        .unwrap();
    }
}

#[test]
fn algorithms_read_the_delta_the_segments_and_their_deletions_alike() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    let mut e = make(&mut s, 7);
    // Through the delta: nothing checkpointed yet.
    check_all(&mut s, &e, "delta");
    run(&mut s, "CHECKPOINT").unwrap();
    check_all(&mut s, &e, "segments");
    // Some relationships deleted, then checkpointed: the deletion bitmaps.
    run(&mut s, "MATCH (a)-[r:R]->(b) WHERE a.i % 3 = 0 DELETE r").unwrap();
    e.list.retain(|&(a, _, r, _)| !(r && a % 3 == 0));
    check_all(&mut s, &e, "deleted, in the delta");
    run(&mut s, "CHECKPOINT").unwrap();
    check_all(&mut s, &e, "deleted, checkpointed");
}

#[test]
fn a_projection_is_a_snapshot_and_the_catalog_is_the_databases() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(
        &mut s,
        "CREATE (a:P {i: 1})-[:K]->(b:P {i: 2})-[:K]->(c:P {i: 3})",
    )
    .unwrap();
    run(
        &mut s,
        "CALL gds.graph.project('p', 'P', 'K') YIELD graphName RETURN graphName",
    )
    .unwrap();
    // Another session on the same database sees the projection.
    let mut other = quiver_query::Session::on(s.store().clone());
    let r = rows(
        &mut other,
        "CALL gds.graph.exists('p') YIELD exists RETURN exists",
    );
    assert_eq!(r[0][0], Value::Bool(true));
    let r = rows(&mut other, "CALL gds.graph.list() YIELD graphName, nodeCount, relationshipCount RETURN graphName, nodeCount, relationshipCount");
    assert_eq!(r, vec![vec![Value::str("p"), Value::Int(3), Value::Int(2)]]);
    // A later write does not change it.
    run(&mut s, "CREATE (:P {i: 4})").unwrap();
    let r = rows(
        &mut s,
        "CALL gds.wcc.stats('p') YIELD componentCount RETURN componentCount",
    );
    assert_eq!(r[0][0], Value::Int(1));
    // Names are a projection's own; misspelt keys and graphs are errors that say so.
    let err = run(
        &mut s,
        "CALL gds.graph.project('p', 'P', 'K') YIELD graphName RETURN graphName",
    )
    .unwrap_err();
    assert!(err.to_string().contains("already projected"), "{err}");
    let err = run(
        &mut s,
        "CALL gds.pageRank.stream('p', {dampingFactr: 0.5}) YIELD nodeId RETURN nodeId",
    )
    .unwrap_err();
    assert!(err.to_string().contains("dampingFactr"), "{err}");
    let err = run(
        &mut s,
        "CALL gds.pageRank.stream('nope') YIELD nodeId RETURN nodeId",
    )
    .unwrap_err();
    assert!(err.to_string().contains("gds.graph.project"), "{err}");
    let err = run(
        &mut s,
        "CALL gds.graph.project('q', 'Nope', 'K') YIELD graphName RETURN graphName",
    )
    .unwrap_err();
    assert!(err.to_string().contains("Nope"), "{err}");
    // SHOW PROCEDURES lists them.
    let r = rows(&mut s, "SHOW PROCEDURES YIELD name, mode WHERE name STARTS WITH 'gds.pageRank' RETURN name, mode ORDER BY name");
    assert!(
        r.contains(&vec![Value::str("gds.pageRank.stream"), Value::str("READ")]),
        "{r:?}"
    );
    assert!(
        r.contains(&vec![Value::str("gds.pageRank.write"), Value::str("WRITE")]),
        "{r:?}"
    );
    // The node ids stream back to nodes.
    let r = rows(
        &mut s,
        "CALL gds.pageRank.stream('p') YIELD nodeId, score RETURN gds.util.asNode(nodeId).i AS i ORDER BY score DESC LIMIT 1",
    );
    assert_eq!(r[0][0], Value::Int(3));
    // Mutate keeps a property on the projection.
    run(&mut s, "CALL gds.pageRank.mutate('p', {mutateProperty: 'pr'}) YIELD nodePropertiesWritten RETURN nodePropertiesWritten").unwrap();
    let r = rows(
        &mut s,
        "CALL gds.graph.nodeProperty.stream('p', 'pr') YIELD nodeId, propertyValue RETURN count(*)",
    );
    assert_eq!(r[0][0], Value::Int(3));
    let r = rows(
        &mut s,
        "CALL gds.graph.drop('p') YIELD graphName RETURN graphName",
    );
    assert_eq!(r[0][0], Value::str("p"));
    let r = rows(
        &mut s,
        "CALL gds.graph.drop('p', false) YIELD graphName RETURN graphName",
    );
    assert!(r.is_empty());
}

#[test]
fn write_mode_sets_a_property_that_survives_a_reopen() {
    let d = tempfile::tempdir().unwrap();
    {
        let mut s = open(d.path());
        run(&mut s, "UNWIND range(1, 50) AS i CREATE (:N {i: i})").unwrap();
        run(
            &mut s,
            "MATCH (a:N), (b:N) WHERE b.i = a.i % 7 + 1 CREATE (a)-[:L]->(b)",
        )
        .unwrap();
        run(
            &mut s,
            "CALL gds.graph.project('n', 'N', 'L') YIELD graphName RETURN graphName",
        )
        .unwrap();
        let r = rows(&mut s, "CALL gds.wcc.write('n', {writeProperty: 'component'}) YIELD nodePropertiesWritten, componentCount RETURN nodePropertiesWritten, componentCount");
        assert_eq!(r[0], vec![Value::Int(50), Value::Int(1)]);
    }
    let mut s = open(d.path());
    let r = rows(
        &mut s,
        "MATCH (n:N) RETURN count(DISTINCT n.component), count(n.component)",
    );
    assert_eq!(r[0], vec![Value::Int(1), Value::Int(50)]);
}

#[test]
fn mage_names_run_over_the_whole_graph() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(
        &mut s,
        "CREATE (a {i: 1})-[:K]->(b {i: 2}), (c {i: 3})-[:K]->(a), (d {i: 4})",
    )
    .unwrap();
    let r = rows(
        &mut s,
        "CALL pagerank.get() YIELD node, rank RETURN sum(rank)",
    );
    assert!((float(&r[0][0]) - 1.0).abs() < 1e-9, "{r:?}");
    let r = rows(&mut s, "CALL weakly_connected_components.get() YIELD node, component_id RETURN node.i, component_id ORDER BY node.i");
    assert_eq!(
        r.iter().map(|x| x[1].clone()).collect::<Vec<_>>(),
        vec![Value::Int(0), Value::Int(0), Value::Int(0), Value::Int(1)]
    );
}

#[test]
fn a_cancelled_run_stops_and_gives_its_memory_back() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(&mut s, "UNWIND range(0, 19999) AS i CREATE (:N {i: i})").unwrap();
    run(&mut s, "CREATE INDEX ON :N(i)").unwrap();
    for step in ["(i + 1) % 20000", "(i * 7) % 20000"] {
        run(
            &mut s,
            &format!("UNWIND range(0, 19999) AS i MATCH (a:N {{i: i}}), (b:N {{i: {step}}}) CREATE (a)-[:L]->(b)"),
        )
        .unwrap();
    }
    run(&mut s, "CHECKPOINT").unwrap();
    run(
        &mut s,
        "CALL gds.graph.project('n', 'N', 'L') YIELD graphName RETURN graphName",
    )
    .unwrap();
    let store = s.store().clone();
    let before = store.memory.used_bytes();
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let c2 = cancel.clone();
    let st = store.clone();
    // Exact betweenness from all 20,000 sources: far longer than the wait below.
    let t = std::thread::spawn(move || {
        let mut s = quiver_query::Session::on(st);
        s.opts.cancel = Some(c2);
        run(&mut s, "CALL gds.betweenness.stats('n') YIELD centralityDistribution RETURN centralityDistribution")
    });
    let t0 = std::time::Instant::now();
    while store.memory.used_bytes() <= before {
        assert!(t0.elapsed().as_secs() < 60, "the run never took its grant");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
    let e = t.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("cancel"), "{e}");
    assert_eq!(store.memory.used_bytes(), before);
}
