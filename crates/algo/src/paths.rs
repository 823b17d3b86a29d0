//! Traversals and shortest paths from a source: breadth-first (levels, parents) and
//! Dijkstra's (weights, parents), over the projection's `Out` side. The frontier's
//! nodes are read one at a time (a search touches few nodes of a large graph).

use crate::{Adjacency, AlgoError, Block, Run, Side};
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
