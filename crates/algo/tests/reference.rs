//! Each algorithm against a plain reference written here on small random graphs with
//! self-loops, parallel edges, isolated nodes and nodes outside the projection; and
//! the same answer whatever the thread count.

use proptest::prelude::*;
use quiver_algo::{centrality, community, components, paths, structure, Adjacency, EdgeList, Run};

fn graph() -> impl Strategy<Value = (EdgeList, bool)> {
    (1u32..40, any::<bool>(), any::<bool>()).prop_flat_map(|(n, undirected, masked)| {
        (
            prop::collection::vec((0..n, 0..n, 1u32..5), 0..120),
            prop::collection::vec(any::<bool>(), n as usize),
        )
            .prop_map(move |(e, mask)| {
                let edges = e.into_iter().map(|(a, b, w)| (a, b, w as f64)).collect();
                let g = EdgeList::new(n, edges, undirected);
                let g = if masked {
                    let mut m = mask;
                    m[0] = true;
                    g.with_members(m)
                } else {
                    g
                };
                (g, undirected)
            })
    })
}

fn member(g: &EdgeList, v: u32) -> bool {
    g.members.as_ref().is_none_or(|m| m[v as usize])
}

/// The projected edges (both ends members), as directed pairs (an undirected graph:
/// both ways).
fn arcs(g: &EdgeList) -> Vec<(u32, u32, f64)> {
    let mut out = Vec::new();
    for &(a, b, w) in &g.edges {
        if member(g, a) && member(g, b) {
            out.push((a, b, w));
            if g.undirected {
                out.push((b, a, w));
            }
        }
    }
    out
}

fn simple_undirected(g: &EdgeList) -> Vec<std::collections::BTreeSet<u32>> {
    let mut nb = vec![std::collections::BTreeSet::new(); g.n as usize];
    for (a, b, _) in arcs(g) {
        if a != b {
            nb[a as usize].insert(b);
            nb[b as usize].insert(a);
        }
    }
    nb
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn pagerank_is_the_power_iteration((g, _) in graph(), weighted in any::<bool>(), threads in 1usize..4) {
        let pr = centrality::PageRank { max_iterations: 30, tolerance: 0.0, weighted, ..Default::default() };
        let got = pr.run(&g, &Run::new(threads)).unwrap();
        let n = g.n as usize;
        let a = arcs(&g);
        let mut outw = vec![0f64; n];
        for &(s, _, w) in &a { outw[s as usize] += if weighted { w } else { 1.0 }; }
        let mut s: Vec<f64> = (0..n).map(|v| if member(&g, v as u32) { 0.15 } else { 0.0 }).collect();
        for _ in 0..30 {
            let mut next: Vec<f64> = (0..n).map(|v| if member(&g, v as u32) { 0.15 } else { 0.0 }).collect();
            for &(x, y, w) in &a {
                let w = if weighted { w } else { 1.0 };
                next[y as usize] += 0.85 * s[x as usize] * w / outw[x as usize];
            }
            s = next;
        }
        for v in 0..n {
            prop_assert!((got.scores[v] - s[v]).abs() < 1e-9, "node {v}: {} vs {}", got.scores[v], s[v]);
        }
        prop_assert_eq!(got.iterations, 30);
    }

    #[test]
    fn wcc_names_each_component_by_its_smallest_node((g, _) in graph(), threads in 1usize..4) {
        let got = components::wcc(&g, &Run::new(threads)).unwrap();
        let n = g.n as usize;
        let mut label: Vec<u32> = (0..n as u32).collect();
        loop {
            let mut changed = false;
            for (a, b, _) in arcs(&g) {
                let m = label[a as usize].min(label[b as usize]);
                if label[a as usize] != m || label[b as usize] != m {
                    label[a as usize] = m; label[b as usize] = m; changed = true;
                }
            }
            if !changed { break; }
        }
        for v in 0..n {
            let want = if member(&g, v as u32) { label[v] } else { u32::MAX };
            prop_assert_eq!(got[v], want, "node {}", v);
        }
    }

    #[test]
    fn scc_groups_mutually_reachable_nodes((g, _) in graph(), threads in 1usize..4) {
        let got = components::scc(&g, &Run::new(threads)).unwrap();
        let n = g.n as usize;
        let mut reach = vec![vec![false; n]; n];
        for v in 0..n { reach[v][v] = true; }
        for (a, b, _) in arcs(&g) { reach[a as usize][b as usize] = true; }
        for k in 0..n { for i in 0..n { if reach[i][k] { for j in 0..n { if reach[k][j] { reach[i][j] = true; } } } } }
        for v in 0..n {
            if !member(&g, v as u32) { prop_assert_eq!(got[v], u32::MAX); continue; }
            let least = (0..n).find(|&u| member(&g, u as u32) && reach[v][u] && reach[u][v]).unwrap();
            prop_assert_eq!(got[v], least as u32, "node {}", v);
        }
    }

    #[test]
    fn triangles_and_clustering_match_brute_force((g, _) in graph(), threads in 1usize..4) {
        let t = structure::triangles(&g, &Run::new(threads)).unwrap();
        let nb = simple_undirected(&g);
        let n = g.n as usize;
        let mut per = vec![0u64; n];
        let mut total = 0;
        for a in 0..n { for b in a + 1..n { for c in b + 1..n {
            if nb[a].contains(&(b as u32)) && nb[b].contains(&(c as u32)) && nb[a].contains(&(c as u32)) {
                per[a] += 1; per[b] += 1; per[c] += 1; total += 1;
            }
        }}}
        prop_assert_eq!(&t.per_node, &per);
        prop_assert_eq!(t.total, total);
        let lcc = structure::clustering(&t);
        for v in 0..n {
            let d = nb[v].len() as f64;
            let want = if d < 2.0 { 0.0 } else { 2.0 * per[v] as f64 / (d * (d - 1.0)) };
            prop_assert!((lcc[v] - want).abs() < 1e-12);
        }
    }

    #[test]
    fn cores_match_peeling((g, _) in graph(), threads in 1usize..4) {
        let got = structure::kcore(&g, &Run::new(threads)).unwrap();
        let nb = simple_undirected(&g);
        let n = g.n as usize;
        let mut core = vec![0u32; n];
        let mut alive = vec![true; n];
        let mut k = 0;
        while alive.iter().any(|&a| a) {
            loop {
                let deg = |v: usize, alive: &[bool]| nb[v].iter().filter(|&&u| alive[u as usize]).count() as u32;
                let peel: Vec<usize> = (0..n).filter(|&v| alive[v] && deg(v, &alive) <= k).collect();
                if peel.is_empty() { break; }
                for v in peel { alive[v] = false; core[v] = k; }
            }
            k += 1;
        }
        prop_assert_eq!(got, core);
    }

    #[test]
    fn label_propagation_and_louvain_do_not_depend_on_threads((g, _) in graph()) {
        let lpa = community::LabelPropagation { max_iterations: 10, weighted: true, seed: 42 };
        let a = lpa.run(&g, &Run::new(1)).unwrap();
        let b = lpa.run(&g, &Run::new(3)).unwrap();
        prop_assert_eq!(&a.labels, &b.labels);
        for v in 0..g.n {
            prop_assert_eq!(a.labels[v as usize] == u32::MAX, !member(&g, v));
        }
        // Weight-1 votes counted as numbers or as plain labels agree.
        let ones = EdgeList::new(g.n, g.edges.iter().map(|&(a, b, _)| (a, b, 1.0)).collect(), g.undirected);
        let ones = match &g.members { Some(m) => ones.with_members(m.clone()), None => ones };
        let w = community::LabelPropagation { max_iterations: 10, weighted: true, seed: 42 }.run(&ones, &Run::new(2)).unwrap();
        let p = community::LabelPropagation { max_iterations: 10, weighted: false, seed: 42 }.run(&ones, &Run::new(2)).unwrap();
        prop_assert_eq!(&w.labels, &p.labels);
        let l = community::Louvain::default();
        let x = l.run(&g, &Run::new(1)).unwrap();
        let y = l.run(&g, &Run::new(3)).unwrap();
        prop_assert_eq!(&x.community, &y.community);
        // Modularity as reported is that of the partition returned.
        let q = community::modularity(&g, &Run::new(1), &x.community, false).unwrap();
        prop_assert!((q - x.modularity).abs() < 1e-9);
        // No worse than every node alone.
        let alone: Vec<u32> = (0..g.n).map(|v| if member(&g, v) { v } else { u32::MAX }).collect();
        let q0 = community::modularity(&g, &Run::new(1), &alone, false).unwrap();
        prop_assert!(x.modularity >= q0 - 1e-9);
    }

    #[test]
    fn dijkstra_and_bfs_find_shortest_distances((g, _) in graph(), weighted in any::<bool>()) {
        let n = g.n as usize;
        let a = arcs(&g);
        let mut dist = vec![f64::INFINITY; n];
        dist[0] = 0.0;
        for _ in 0..n { for &(x, y, w) in &a {
            let w = if weighted { w } else { 1.0 };
            if dist[x as usize] + w < dist[y as usize] { dist[y as usize] = dist[x as usize] + w; }
        }}
        let r = paths::dijkstra(&g, &Run::new(1), 0, None, weighted).unwrap();
        let reached: Vec<usize> = (0..n).filter(|&v| dist[v].is_finite()).collect();
        prop_assert_eq!(r.order.len(), reached.len());
        for (i, &v) in r.order.iter().enumerate() {
            prop_assert!((r.dist[i] - dist[v as usize]).abs() < 1e-9);
        }
        let b = paths::bfs(&g, &Run::new(1), 0, &[], None).unwrap();
        prop_assert_eq!(b.order.len(), reached.len());
        if !weighted {
            for (i, &v) in b.order.iter().enumerate() {
                prop_assert_eq!(b.dist[i], dist[v as usize]);
            }
        }
    }
}

/// Hop distances and shortest-path counts from every node (BFS per source).
fn all_pairs(g: &EdgeList) -> (Vec<Vec<i64>>, Vec<Vec<f64>>) {
    let n = g.n as usize;
    let mut out = vec![Vec::new(); n];
    for (a, b, _) in arcs(g) {
        out[a as usize].push(b as usize);
    }
    let mut dist = vec![vec![-1i64; n]; n];
    let mut sigma = vec![vec![0f64; n]; n];
    for s in 0..n {
        if !member(g, s as u32) {
            continue;
        }
        dist[s][s] = 0;
        sigma[s][s] = 1.0;
        let mut q = std::collections::VecDeque::from([s]);
        while let Some(v) = q.pop_front() {
            for &u in &out[v] {
                if dist[s][u] < 0 {
                    dist[s][u] = dist[s][v] + 1;
                    q.push_back(u);
                }
                if dist[s][u] == dist[s][v] + 1 {
                    sigma[s][u] += sigma[s][v];
                }
            }
        }
    }
    (dist, sigma)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn betweenness_and_closeness_match_all_pairs_counts((g, undirected) in graph(), threads in 1usize..4) {
        let n = g.n as usize;
        let (dist, sigma) = all_pairs(&g);
        let got = paths::betweenness(&g, &Run::new(threads), None, 0, undirected).unwrap();
        for v in 0..n {
            let mut want = 0.0;
            for s in 0..n { for t in 0..n {
                if s == v || t == v || s == t || dist[s][t] < 0 || dist[s][v] < 0 || dist[v][t] < 0 { continue; }
                if dist[s][v] + dist[v][t] == dist[s][t] { want += sigma[s][v] * sigma[v][t] / sigma[s][t]; }
            }}
            if undirected { want /= 2.0; }
            prop_assert!((got[v] - want).abs() < 1e-6 * (1.0 + want), "node {v}: {} vs {want}", got[v]);
        }
        let close = paths::closeness(&g, &Run::new(threads), false).unwrap();
        let harm = paths::closeness(&g, &Run::new(threads), true).unwrap();
        let others = (g.member_count().max(1) - 1).max(1) as f64;
        for v in 0..n {
            if !member(&g, v as u32) { continue; }
            let reached: Vec<i64> = (0..n).filter(|&t| t != v && dist[v][t] > 0).map(|t| dist[v][t]).collect();
            let sum: i64 = reached.iter().sum();
            let want = if sum > 0 { reached.len() as f64 / sum as f64 } else { 0.0 };
            prop_assert!((close[v] - want).abs() < 1e-12);
            let h: f64 = reached.iter().map(|&d| 1.0 / d as f64).sum::<f64>() / others;
            prop_assert!((harm[v] - h).abs() < 1e-12);
        }
        // A sample of every source is the whole.
        let all = paths::betweenness(&g, &Run::new(threads), Some(g.n), 7, undirected).unwrap();
        for v in 0..n { prop_assert!((all[v] - got[v]).abs() < 1e-9); }
    }

    #[test]
    fn eigenvector_is_the_normalized_power_iteration((g, _) in graph(), threads in 1usize..4) {
        let e = centrality::Eigenvector { max_iterations: 15, tolerance: 0.0, weighted: false };
        let got = e.run(&g, &Run::new(threads)).unwrap();
        let n = g.n as usize;
        let members = g.member_count().max(1) as f64;
        let mut x: Vec<f64> = (0..n).map(|v| if member(&g, v as u32) { 1.0 / members } else { 0.0 }).collect();
        for _ in 0..15 {
            let mut y = vec![0f64; n];
            for (a, b, _) in arcs(&g) { y[b as usize] += x[a as usize]; }
            let norm = y.iter().map(|v| v * v).sum::<f64>().sqrt();
            if norm > 0.0 { y.iter_mut().for_each(|v| *v /= norm); }
            x = y;
        }
        for v in 0..n { prop_assert!((got.scores[v] - x[v]).abs() < 1e-9); }
    }

    #[test]
    fn node_similarity_is_jaccard_of_out_sets((g, _) in graph(), overlap in any::<bool>(), threads in 1usize..4) {
        let n = g.n as usize;
        let mut out = vec![std::collections::BTreeSet::new(); n];
        for (a, b, _) in arcs(&g) { out[a as usize].insert(b); }
        let sim = structure::Similarity { top_k: 3, cutoff: 0.1, degree_cutoff: 1, overlap };
        let got = sim.run(&g, &Run::new(threads)).unwrap();
        let got: std::collections::BTreeMap<u32, Vec<(u32, f64)>> = got.into_iter().collect();
        for a in 0..n {
            let mut want: Vec<(u32, f64)> = Vec::new();
            for b in 0..n {
                if a == b || out[a].is_empty() || out[b].is_empty() { continue; }
                let c = out[a].intersection(&out[b]).count() as f64;
                if c == 0.0 { continue; }
                let (x, y) = (out[a].len() as f64, out[b].len() as f64);
                let s = if overlap { c / x.min(y) } else { c / (x + y - c) };
                if s >= 0.1 { want.push((b as u32, s)); }
            }
            want.sort_by(|p, q| q.1.total_cmp(&p.1).then(p.0.cmp(&q.0)));
            want.truncate(3);
            let have = got.get(&(a as u32)).cloned().unwrap_or_default();
            prop_assert_eq!(have.len(), want.len(), "node {}", a);
            for (h, w) in have.iter().zip(&want) {
                prop_assert_eq!(h.0, w.0);
                prop_assert!((h.1 - w.1).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn dfs_reaches_what_bfs_reaches((g, _) in graph()) {
        let d = paths::dfs(&g, &Run::new(1), 0, &[], None).unwrap();
        let b = paths::bfs(&g, &Run::new(1), 0, &[], None).unwrap();
        let mut x = d.clone(); x.sort_unstable();
        let mut y = b.order.clone(); y.sort_unstable();
        prop_assert_eq!(x, y);
        if !d.is_empty() { prop_assert_eq!(d[0], 0); }
    }
}

#[test]
fn louvain_finds_planted_communities() {
    // Four cliques of eight joined in a ring by one edge each.
    let mut edges = Vec::new();
    for c in 0..4u32 {
        for i in 0..8 {
            for j in i + 1..8 {
                edges.push((c * 8 + i, c * 8 + j, 1.0));
            }
        }
        edges.push((c * 8, ((c + 1) % 4) * 8 + 1, 1.0));
    }
    let g = EdgeList::new(32, edges, false);
    let r = community::Louvain::default().run(&g, &Run::new(2)).unwrap();
    for c in 0..4 {
        for i in 0..8 {
            assert_eq!(r.community[c * 8 + i], r.community[c * 8], "clique {c}");
        }
    }
    assert_eq!(
        r.community
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        4
    );
    assert!(r.modularity > 0.65, "{}", r.modularity);
}

#[test]
fn a_stopped_run_says_so() {
    let g = EdgeList::new(10, vec![(0, 1, 1.0)], false);
    let stop = std::sync::atomic::AtomicBool::new(true);
    let run = Run {
        threads: 1,
        stop: Some(&stop),
        deadline: None,
    };
    assert!(matches!(
        centrality::PageRank::default().run(&g, &run),
        Err(quiver_algo::AlgoError::Cancelled)
    ));
}
