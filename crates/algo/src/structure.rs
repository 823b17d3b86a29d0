//! Structure of the undirected simple graph under a projection (self-loops and
//! parallel relationships dropped, directions ignored, as GDS and networkit count):
//! triangles per node, local clustering coefficients, k-core decomposition.
//!
//! Triangles are counted once each, by orienting every edge from the lower to the
//! higher (degree, id) end and intersecting the forward lists of its two ends (sorted
//! by id, merged); the lists are the only memory beyond per-node state, about half the
//! simple graph's entries. Cores peel the graph in Batagelj and Zaversnik's bucket
//! order (linear time, one thread: its order is inherently sequential).

use crate::{blocks, simple_neighbours, Adjacency, AlgoError, Block, Lists, Run, Side};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Clone)]
pub struct Triangles {
    /// Triangles each node is in.
    pub per_node: Vec<u64>,
    pub total: u64,
    /// Each node's degree in the simple undirected graph.
    pub degree: Vec<u32>,
}

/// What [`triangles`] holds: degrees, counts and the forward lists (at most one entry
/// a relationship).
pub fn triangles_estimate(node_bound: u64, relationships: u64) -> u64 {
    node_bound * 16 + relationships * 4
}

pub fn triangles(g: &dyn Adjacency, run: &Run) -> Result<Triangles, AlgoError> {
    run.install(|| triangles_here(g, run))?
}

/// Each node's degree in the simple undirected graph.
fn simple_degrees(g: &dyn Adjacency, run: &Run) -> Result<Vec<u32>, AlgoError> {
    use rayon::prelude::*;
    let mut deg = vec![0u32; g.node_bound() as usize];
    deg.par_chunks_mut(crate::BLOCK_NODES as usize)
        .enumerate()
        .try_for_each_init(
            || (Block::default(), Vec::new()),
            |(b, tmp), (i, chunk)| {
                run.check()?;
                let lo = i as u32 * crate::BLOCK_NODES;
                g.fill(Side::Both, lo, lo + chunk.len() as u32, false, b)?;
                for v in b.lo..b.hi {
                    simple_neighbours(v, b, tmp);
                    chunk[(v - b.lo) as usize] = tmp.len() as u32;
                }
                Ok::<(), AlgoError>(())
            },
        )?;
    Ok(deg)
}

fn triangles_here(g: &dyn Adjacency, run: &Run) -> Result<Triangles, AlgoError> {
    let n = g.node_bound();
    let degree = simple_degrees(g, run)?;
    let deg = &degree;
    let ahead = |v: u32, u: u32| (deg[u as usize], u) > (deg[v as usize], v);
    let fwd = Lists::build(g, run, Side::Both, |v, b, out| {
        simple_neighbours(v, b, out);
        out.retain(|&u| ahead(v, u));
    })?;
    let counts: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let total = {
        use rayon::prelude::*;
        let all: Vec<(u32, u32)> = blocks(n).collect();
        all.par_iter()
            .map(|&(lo, hi)| {
                run.check()?;
                let mut found = 0u64;
                for v in lo..hi {
                    let fv = fwd.of(v);
                    let mut here = 0u64;
                    for &u in fv {
                        let fu = fwd.of(u);
                        let (mut i, mut j) = (0, 0);
                        let mut with_u = 0u64;
                        while i < fv.len() && j < fu.len() {
                            let (a, c) = (fv[i], fu[j]);
                            if a < c {
                                i += 1;
                            } else if a > c {
                                j += 1;
                            } else {
                                counts[a as usize].fetch_add(1, Relaxed);
                                with_u += 1;
                                i += 1;
                                j += 1;
                            }
                        }
                        if with_u > 0 {
                            counts[u as usize].fetch_add(with_u, Relaxed);
                            here += with_u;
                        }
                    }
                    if here > 0 {
                        counts[v as usize].fetch_add(here, Relaxed);
                    }
                    found += here;
                }
                Ok(found)
            })
            .try_reduce(|| 0, |a, b| Ok(a + b))?
    };
    Ok(Triangles {
        per_node: counts.into_iter().map(|c| c.into_inner()).collect(),
        total,
        degree,
    })
}

/// Local clustering coefficient of each node: the share of its neighbours' pairs that
/// are connected (0 below degree 2).
pub fn clustering(t: &Triangles) -> Vec<f64> {
    t.per_node
        .iter()
        .zip(&t.degree)
        .map(|(&c, &d)| {
            if d < 2 {
                0.0
            } else {
                2.0 * c as f64 / (d as f64 * (d as f64 - 1.0))
            }
        })
        .collect()
}

/// What [`kcore`] holds: the simple graph's lists both ways and four `u32` a node.
pub fn kcore_estimate(node_bound: u64, relationships: u64) -> u64 {
    node_bound * 20 + relationships * 8
}

/// Each node's core number (the largest k such that it is in a subgraph where every
/// node has degree at least k); non-members 0.
pub fn kcore(g: &dyn Adjacency, run: &Run) -> Result<Vec<u32>, AlgoError> {
    let lists = run.install(|| Lists::build(g, run, Side::Both, simple_neighbours))??;
    let n = g.node_bound() as usize;
    let mut deg: Vec<u32> = (0..n as u32).map(|v| lists.of(v).len() as u32).collect();
    let md = deg.iter().copied().max().unwrap_or(0) as usize;
    // bin[d]: where the nodes of degree d start in `vert`.
    let mut bin = vec![0u32; md + 2];
    for &d in &deg {
        bin[d as usize + 1] += 1;
    }
    for d in 1..bin.len() {
        bin[d] += bin[d - 1];
    }
    let mut pos = vec![0u32; n];
    let mut vert = vec![0u32; n];
    {
        let mut next = bin.clone();
        for v in 0..n {
            let d = deg[v] as usize;
            pos[v] = next[d];
            vert[next[d] as usize] = v as u32;
            next[d] += 1;
        }
    }
    for i in 0..n {
        if i % (1 << 16) == 0 {
            run.check()?;
        }
        let v = vert[i];
        let dv = deg[v as usize];
        for &u in lists.of(v) {
            let du = deg[u as usize];
            if du > dv {
                let pu = pos[u as usize];
                let pw = bin[du as usize];
                let w = vert[pw as usize];
                if u != w {
                    pos[u as usize] = pw;
                    vert[pu as usize] = w;
                    pos[w as usize] = pu;
                    vert[pw as usize] = u;
                }
                bin[du as usize] += 1;
                deg[u as usize] = du - 1;
            }
        }
    }
    Ok(deg)
}
