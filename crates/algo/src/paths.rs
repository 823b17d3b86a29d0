//! Traversals and shortest paths from a source: breadth-first (levels, parents) and
//! Dijkstra's (weights, parents), over the projection's `Out` side. The frontier's
//! nodes are read one at a time (a search touches few nodes of a large graph).

use crate::{Adjacency, AlgoError, Block, Lists, Run, Side};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What a search from one source found: for each reached node (in the order reached)
/// its parent and its distance (hops, or the weights' sum).
#[derive(Debug, Clone, Default)]
pub struct Reached {
    pub order: Vec<u32>,
    pub parent: Vec<u32>,
    pub dist: Vec<f64>,
}

impl Reached {
    /// The path from the source to `order[i]`'s node, source first.
    pub fn path(&self, i: usize, index_of: &impl Fn(u32) -> Option<usize>) -> Vec<u32> {
        let mut p = vec![self.order[i]];
        let mut k = i;
        while self.parent[k] != u32::MAX {
            p.push(self.parent[k]);
            match index_of(self.parent[k]) {
                Some(j) => k = j,
                None => break,
            }
        }
        p.reverse();
        p
    }
}

/// Breadth-first search from `source` up to `max_depth` hops, stopping once every
/// node of `targets` is reached (when given).
pub fn bfs(
    g: &dyn Adjacency,
    run: &Run,
    source: u32,
    targets: &[u32],
    max_depth: Option<u32>,
) -> Result<Reached, AlgoError> {
    let n = g.node_bound() as usize;
    let mut r = Reached::default();
    if !g.is_member(source) {
        return Ok(r);
    }
    let mut seen = vec![false; n];
    let mut want: Vec<bool> = vec![false; if targets.is_empty() { 0 } else { n }];
    let mut left = 0;
    for &t in targets {
        if (t as usize) < n && !want[t as usize] {
            want[t as usize] = true;
            left += 1;
        }
    }
    seen[source as usize] = true;
    r.order.push(source);
    r.parent.push(u32::MAX);
    r.dist.push(0.0);
    let mut b = Block::default();
    let mut head = 0;
    while head < r.order.len() {
        if head % 1024 == 0 {
            run.check()?;
        }
        let v = r.order[head];
        let d = r.dist[head];
        head += 1;
        if max_depth.is_some_and(|m| d >= m as f64) {
            continue;
        }
        g.fill(Side::Out, v, v + 1, false, &mut b)?;
        for &u in b.of(v) {
            if !seen[u as usize] {
                seen[u as usize] = true;
                r.order.push(u);
                r.parent.push(v);
                r.dist.push(d + 1.0);
                if !want.is_empty() && want[u as usize] {
                    left -= 1;
                    if left == 0 {
                        return Ok(r);
                    }
                }
            }
        }
    }
    Ok(r)
}

#[derive(PartialEq)]
struct Item(f64, u32);
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    fn cmp(&self, o: &Self) -> Ordering {
        // A min-heap on distance, ties by node id.
        o.0.total_cmp(&self.0).then_with(|| o.1.cmp(&self.1))
    }
}

/// Dijkstra's shortest paths from `source` (weights when `weighted`, else hops), in
/// order of distance; stops at `target` when given. Negative weights are refused.
pub fn dijkstra(
    g: &dyn Adjacency,
    run: &Run,
    source: u32,
    target: Option<u32>,
    weighted: bool,
) -> Result<Reached, AlgoError> {
    let n = g.node_bound() as usize;
    let mut r = Reached::default();
    if !g.is_member(source) {
        return Ok(r);
    }
    let weighted = weighted && g.has_weights();
    let mut dist = vec![f64::INFINITY; n];
    let mut parent = vec![u32::MAX; n];
    let mut done = vec![false; n];
    let mut heap = BinaryHeap::new();
    dist[source as usize] = 0.0;
    heap.push(Item(0.0, source));
    let mut b = Block::default();
    let mut popped = 0u64;
    while let Some(Item(d, v)) = heap.pop() {
        if done[v as usize] {
            continue;
        }
        popped += 1;
        if popped % 1024 == 0 {
            run.check()?;
        }
        done[v as usize] = true;
        r.order.push(v);
        r.parent.push(parent[v as usize]);
        r.dist.push(d);
        if target == Some(v) {
            break;
        }
        g.fill(Side::Out, v, v + 1, weighted, &mut b)?;
        for (i, &u) in b.of(v).iter().enumerate() {
            let w = if weighted { b.weights_of(v)[i] } else { 1.0 };
            if w < 0.0 || w.is_nan() {
                return Err(AlgoError::Config(format!(
                    "Dijkstra needs weights of at least 0; a relationship from node {v} weighs {w}"
                )));
            }
            let nd = d + w;
            if nd < dist[u as usize] {
                dist[u as usize] = nd;
                parent[u as usize] = v;
                heap.push(Item(nd, u));
            }
        }
    }
    Ok(r)
}

/// Depth-first search from `source` (neighbours taken in the order the adjacency gives
/// them), up to `max_depth`, stopping once every node of `targets` is reached.
pub fn dfs(
    g: &dyn Adjacency,
    run: &Run,
    source: u32,
    targets: &[u32],
    max_depth: Option<u32>,
) -> Result<Vec<u32>, AlgoError> {
    let n = g.node_bound() as usize;
    if !g.is_member(source) {
        return Ok(Vec::new());
    }
    let mut seen = vec![false; n];
    let mut want = vec![false; if targets.is_empty() { 0 } else { n }];
    let mut left = 0;
    for &t in targets {
        if (t as usize) < n && !want[t as usize] {
            want[t as usize] = true;
            left += 1;
        }
    }
    let mut order = Vec::new();
    let mut b = Block::default();
    // (node, depth); neighbours pushed in reverse so the first is visited first.
    let mut stack = vec![(source, 0u32)];
    while let Some((v, d)) = stack.pop() {
        if seen[v as usize] {
            continue;
        }
        seen[v as usize] = true;
        order.push(v);
        if order.len() % 1024 == 0 {
            run.check()?;
        }
        if !want.is_empty() && want[v as usize] {
            left -= 1;
            if left == 0 {
                break;
            }
        }
        if max_depth.is_some_and(|m| d >= m) {
            continue;
        }
        g.fill(Side::Out, v, v + 1, false, &mut b)?;
        for &u in b.of(v).iter().rev() {
            if !seen[u as usize] {
                stack.push((u, d + 1));
            }
        }
    }
    Ok(order)
}

/// Betweenness centrality by Brandes' algorithm over the `Out` side (hops), from every
/// source or from `sample` of them chosen by `seed`; sources run in parallel, each
/// thread with its own arrays. An undirected projection's scores are halved (each pair
/// is met from both ends), as GDS and networkit report them.
pub fn betweenness(
    g: &dyn Adjacency,
    run: &Run,
    sample: Option<u32>,
    seed: u64,
    undirected: bool,
) -> Result<Vec<f64>, AlgoError> {
    run.install(|| betweenness_here(g, run, sample, seed, undirected))?
}

/// What [`betweenness`] holds: the `Out` lists, per thread a distance, a path count, a
/// dependency, a place in the order and a result a node.
pub fn betweenness_estimate(node_bound: u64, relationships: u64, threads: usize) -> u64 {
    node_bound * 12 + relationships * 4 + node_bound * 36 * threads as u64
}

/// Each node's `Out` entries, in memory.
fn out_lists(g: &dyn Adjacency, run: &Run) -> Result<Lists, AlgoError> {
    Lists::build(g, run, Side::Out, |v, b, out| {
        out.clear();
        out.extend_from_slice(b.of(v));
    })
}

fn sources(g: &dyn Adjacency, sample: Option<u32>, seed: u64) -> Vec<u32> {
    let mut all = crate::members(g);
    if let Some(k) = sample {
        // A seeded shuffle's first k (splitmix64).
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e3779b97f4a7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            z ^ (z >> 31)
        };
        for i in (1..all.len()).rev() {
            let j = (next() % (i as u64 + 1)) as usize;
            all.swap(i, j);
        }
        all.truncate(k as usize);
        all.sort_unstable();
    }
    all
}

fn betweenness_here(
    g: &dyn Adjacency,
    run: &Run,
    sample: Option<u32>,
    seed: u64,
    undirected: bool,
) -> Result<Vec<f64>, AlgoError> {
    use rayon::prelude::*;
    let n = g.node_bound() as usize;
    let srcs = sources(g, sample, seed);
    // Every source walks most of the graph: its `Out` lists are read once, into memory
    // (a node at a time through the view costs a block's bookkeeping per node).
    let lists = out_lists(g, run)?;
    struct Work {
        dist: Vec<i32>,
        sigma: Vec<f64>,
        delta: Vec<f64>,
        order: Vec<u32>,
        score: Vec<f64>,
    }
    let total = srcs
        .par_iter()
        .try_fold(
            || Work {
                dist: vec![-1; n],
                sigma: vec![0.0; n],
                delta: vec![0.0; n],
                order: Vec::new(),
                score: vec![0.0; n],
            },
            |mut w, &s| {
                run.check()?;
                w.order.clear();
                w.dist[s as usize] = 0;
                w.sigma[s as usize] = 1.0;
                w.order.push(s);
                let mut head = 0;
                while head < w.order.len() {
                    let v = w.order[head];
                    head += 1;
                    let dv = w.dist[v as usize];
                    for &u in lists.of(v) {
                        if w.dist[u as usize] < 0 {
                            w.dist[u as usize] = dv + 1;
                            w.order.push(u);
                        }
                        if w.dist[u as usize] == dv + 1 {
                            w.sigma[u as usize] += w.sigma[v as usize];
                        }
                    }
                }
                for i in (0..w.order.len()).rev() {
                    let v = w.order[i];
                    let dv = w.dist[v as usize];
                    let mut d = 0.0;
                    for &u in lists.of(v) {
                        if w.dist[u as usize] == dv + 1 {
                            d += w.sigma[v as usize] / w.sigma[u as usize]
                                * (1.0 + w.delta[u as usize]);
                        }
                    }
                    w.delta[v as usize] = d;
                    if v != s {
                        w.score[v as usize] += d;
                    }
                }
                for &v in &w.order {
                    w.dist[v as usize] = -1;
                    w.sigma[v as usize] = 0.0;
                    w.delta[v as usize] = 0.0;
                }
                Ok::<Work, AlgoError>(w)
            },
        )
        .map(|w| w.map(|w| w.score))
        .try_reduce(
            || vec![0.0; n],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                Ok(a)
            },
        )?;
    Ok(if undirected {
        total.into_iter().map(|x| x / 2.0).collect()
    } else {
        total
    })
}

/// Closeness and harmonic centrality from a BFS out of every node: closeness is the
/// number of nodes reached over the sum of their distances (0 when none), harmonic the
/// sum of the reciprocal distances over the other members.
pub fn closeness(g: &dyn Adjacency, run: &Run, harmonic: bool) -> Result<Vec<f64>, AlgoError> {
    run.install(|| closeness_here(g, run, harmonic))?
}

/// What [`closeness`] holds: the `Out` lists, per thread a distance and a place in the
/// queue a node, and the result.
pub fn closeness_estimate(node_bound: u64, relationships: u64, threads: usize) -> u64 {
    node_bound * 12 + relationships * 4 + node_bound * 8 * threads as u64
}

fn closeness_here(g: &dyn Adjacency, run: &Run, harmonic: bool) -> Result<Vec<f64>, AlgoError> {
    use rayon::prelude::*;
    let n = g.node_bound() as usize;
    let others = (g.member_count().max(1) - 1).max(1) as f64;
    let srcs = crate::members(g);
    let lists = out_lists(g, run)?;
    let found: Vec<(u32, f64)> = srcs
        .par_iter()
        .map_init(
            || (vec![-1i32; n], Vec::new()),
            |(dist, queue), &s| {
                run.check()?;
                queue.clear();
                queue.push(s);
                dist[s as usize] = 0;
                let (mut sum, mut inv, mut reached) = (0f64, 0f64, 0u64);
                let mut head = 0;
                while head < queue.len() {
                    let v = queue[head];
                    head += 1;
                    let dv = dist[v as usize];
                    for &u in lists.of(v) {
                        if dist[u as usize] < 0 {
                            dist[u as usize] = dv + 1;
                            queue.push(u);
                            sum += (dv + 1) as f64;
                            inv += 1.0 / (dv + 1) as f64;
                            reached += 1;
                        }
                    }
                }
                for &v in queue.iter() {
                    dist[v as usize] = -1;
                }
                let score = if harmonic {
                    inv / others
                } else if sum > 0.0 {
                    reached as f64 / sum
                } else {
                    0.0
                };
                Ok((s, score))
            },
        )
        .collect::<Result<_, AlgoError>>()?;
    let mut out = vec![0f64; n];
    for (s, x) in found {
        out[s as usize] = x;
    }
    Ok(out)
}
