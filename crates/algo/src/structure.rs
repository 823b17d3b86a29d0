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
    // (Plus a bitmap over the nodes a thread: an eighth of a byte a node each.)
    node_bound * 17 + relationships * 4
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
        // Each thread marks a node's forward list in a bitmap over node ids (n / 8
        // bytes, in cache), then tests the forward lists of its members against it: a
        // test per entry, no merge's unpredictable branches.
        all.par_iter()
            .map_init(
                || vec![0u64; (n as usize).div_ceil(64)],
                |marks, &(lo, hi)| {
                    run.check()?;
                    let mut found = 0u64;
                    for v in lo..hi {
                        let fv = fwd.of(v);
                        if fv.len() < 2 {
                            continue;
                        }
                        for &w in fv {
                            marks[(w / 64) as usize] |= 1 << (w % 64);
                        }
                        let mut here = 0u64;
                        for &u in fv {
                            let mut with_u = 0u64;
                            for &w in fwd.of(u) {
                                if marks[(w / 64) as usize] & (1 << (w % 64)) != 0 {
                                    counts[w as usize].fetch_add(1, Relaxed);
                                    with_u += 1;
                                }
                            }
                            if with_u > 0 {
                                counts[u as usize].fetch_add(with_u, Relaxed);
                                here += with_u;
                            }
                        }
                        for &w in fv {
                            marks[(w / 64) as usize] = 0;
                        }
                        if here > 0 {
                            counts[v as usize].fetch_add(here, Relaxed);
                        }
                        found += here;
                    }
                    Ok(found)
                },
            )
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

/// What [`kcore`] holds: the simple graph's lists both ways, and a degree, a core number
/// and a place in the list of nodes left a node.
pub fn kcore_estimate(node_bound: u64, relationships: u64) -> u64 {
    node_bound * 24 + relationships * 8
}

/// Each node's core number (the largest k such that it is in a subgraph where every
/// node has degree at least k); non-members 0. Peeled level by level on the pool (as
/// Dasari et al.'s ParK does): each level takes the nodes left whose degree is the
/// level, removes them, and lowers their neighbours' degrees with a compare-and-swap
/// that never goes below the level, a neighbour that reaches it joining the level's
/// next round; the core numbers do not depend on the order.
pub fn kcore(g: &dyn Adjacency, run: &Run) -> Result<Vec<u32>, AlgoError> {
    run.install(|| kcore_here(g, run))?
}

fn kcore_here(g: &dyn Adjacency, run: &Run) -> Result<Vec<u32>, AlgoError> {
    use rayon::prelude::*;
    use std::sync::atomic::AtomicU32;
    let lists = Lists::build(g, run, Side::Both, simple_neighbours)?;
    let n = g.node_bound();
    let deg: Vec<AtomicU32> = (0..n)
        .map(|v| AtomicU32::new(lists.of(v).len() as u32))
        .collect();
    let core: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    let mut remaining: Vec<u32> = (0..n).collect();
    while !remaining.is_empty() {
        run.check()?;
        let k = remaining
            .par_iter()
            .map(|&v| deg[v as usize].load(Relaxed))
            .min()
            .unwrap_or(0);
        let mut frontier: Vec<u32> = remaining
            .par_iter()
            .copied()
            .filter(|&v| deg[v as usize].load(Relaxed) == k)
            .collect();
        while !frontier.is_empty() {
            // A removed node's degree is 0, below every level past 0 (and at level 0
            // every node of degree 0 goes): the neighbours' decrements skip it.
            frontier.par_iter().for_each(|&v| {
                deg[v as usize].store(0, Relaxed);
                core[v as usize].store(k, Relaxed);
            });
            frontier = frontier
                .par_iter()
                .fold(Vec::new, |mut next, &v| {
                    for &u in lists.of(v) {
                        let d = &deg[u as usize];
                        let mut cur = d.load(Relaxed);
                        while cur > k {
                            match d.compare_exchange_weak(cur, cur - 1, Relaxed, Relaxed) {
                                Ok(_) => {
                                    if cur - 1 == k {
                                        next.push(u);
                                    }
                                    break;
                                }
                                Err(now) => cur = now,
                            }
                        }
                    }
                    next
                })
                .reduce(Vec::new, |mut a, mut b| {
                    a.append(&mut b);
                    a
                });
        }
        // (Every node left has a degree above the level.)
        remaining.retain(|&v| deg[v as usize].load(Relaxed) != 0);
    }
    Ok(core.into_iter().map(|c| c.into_inner()).collect())
}

/// Node similarity (GDS's): for every node with at least `degree_cutoff` neighbours
/// on the `Out` side (each neighbour once), the `top_k` other nodes most similar to it
/// by Jaccard (shared over either's neighbours) or overlap (shared over the smaller
/// count), at least `cutoff`, best first, ties to the smaller id. Shared neighbours are
/// counted through the `In` side of each neighbour, a dense counter a thread.
#[derive(Debug, Clone)]
pub struct Similarity {
    pub top_k: usize,
    pub cutoff: f64,
    pub degree_cutoff: u32,
    pub overlap: bool,
}

impl Similarity {
    /// Per thread a counter and a mark a node; per node its degree and `top_k` pairs.
    pub fn estimate(&self, node_bound: u64, threads: usize) -> u64 {
        node_bound * 4 + node_bound * 8 * threads as u64 + node_bound * self.top_k as u64 * 12
    }

    /// (node, [(other, similarity)]) for every node that has any.
    #[allow(clippy::type_complexity)]
    pub fn run(
        &self,
        g: &dyn Adjacency,
        run: &Run,
    ) -> Result<Vec<(u32, Vec<(u32, f64)>)>, AlgoError> {
        run.install(|| self.run_here(g, run))?
    }

    #[allow(clippy::type_complexity)]
    fn run_here(
        &self,
        g: &dyn Adjacency,
        run: &Run,
    ) -> Result<Vec<(u32, Vec<(u32, f64)>)>, AlgoError> {
        use rayon::prelude::*;
        let n = g.node_bound();
        // Distinct out-neighbours a node.
        let mut deg = vec![0u32; n as usize];
        crate::for_blocks_mut(g, run, Side::Out, false, &mut deg, |b, chunk| {
            let mut tmp = Vec::new();
            for v in b.lo..b.hi {
                tmp.clear();
                tmp.extend_from_slice(b.of(v));
                tmp.sort_unstable();
                tmp.dedup();
                chunk[(v - b.lo) as usize] = tmp.len() as u32;
            }
        })?;
        let deg = &deg;
        let all: Vec<(u32, u32)> = blocks(n).collect();
        let out: Vec<Vec<(u32, Vec<(u32, f64)>)>> = all
            .par_iter()
            .map_init(
                || {
                    (
                        vec![0u32; n as usize],
                        Vec::new(),
                        Block::default(),
                        Block::default(),
                        Vec::new(),
                    )
                },
                |(count, touched, b, nb, mine), &(lo, hi)| {
                    run.check()?;
                    g.fill(Side::Out, lo, hi, false, b)?;
                    let mut res = Vec::new();
                    for a in lo..hi {
                        if deg[a as usize] < self.degree_cutoff.max(1) {
                            continue;
                        }
                        mine.clear();
                        mine.extend_from_slice(b.of(a));
                        mine.sort_unstable();
                        mine.dedup();
                        touched.clear();
                        for &t in mine.iter() {
                            g.fill(Side::In, t, t + 1, false, nb)?;
                            let mut prev = u32::MAX;
                            // (An in-list is sorted within each type and segment: a
                            // parallel relationship repeats its source next to itself.)
                            let mut seen: Vec<u32> = nb.of(t).to_vec();
                            seen.sort_unstable();
                            for &o in &seen {
                                if o == prev || o == a {
                                    prev = o;
                                    continue;
                                }
                                prev = o;
                                if count[o as usize] == 0 {
                                    touched.push(o);
                                }
                                count[o as usize] += 1;
                            }
                        }
                        let mut best: Vec<(u32, f64)> = Vec::new();
                        for &o in touched.iter() {
                            let c = count[o as usize] as f64;
                            count[o as usize] = 0;
                            let (da, db) = (deg[a as usize] as f64, deg[o as usize] as f64);
                            if deg[o as usize] < self.degree_cutoff.max(1) {
                                continue;
                            }
                            let sim = if self.overlap {
                                c / da.min(db)
                            } else {
                                c / (da + db - c)
                            };
                            if sim >= self.cutoff {
                                best.push((o, sim));
                            }
                        }
                        best.sort_unstable_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
                        best.truncate(self.top_k);
                        if !best.is_empty() {
                            res.push((a, best));
                        }
                    }
                    Ok(res)
                },
            )
            .collect::<Result<_, AlgoError>>()?;
        Ok(out.into_iter().flatten().collect())
    }
}
