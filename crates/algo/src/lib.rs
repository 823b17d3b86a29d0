//! Graph algorithms over an adjacency read in blocks of nodes.
//!
//! The algorithms see a graph only through [`Adjacency`]: node ids `0..n` (some of them
//! outside the projection, which then have no entries and get no result), and the
//! neighbours of a range of nodes on one [`Side`], decoded into a [`Block`] the caller
//! reuses. The query layer implements it over the stored CSR segments (a view: nothing
//! is copied but the block being read) or over the few relationships a delta changed;
//! the algorithms never learn which. Every pass over the graph walks ranges of
//! [`BLOCK_NODES`] nodes on the rayon pool, so the adjacency is read sequentially and
//! each thread writes only the per-node state of its own range; per-node state is the
//! only memory an algorithm holds, and [`estimate`](centrality::PageRank::estimate)
//! -style functions say how much before it runs, so the caller can take a grant.
//!
//! Results are deterministic for a given input and configuration: randomized algorithms
//! take a seed, and parallel updates never race on what a result depends on.

use std::sync::atomic::{AtomicBool, Ordering};

pub mod centrality;
pub mod community;
pub mod components;
pub mod paths;
pub mod structure;

/// Nodes per block: large enough that a block's bookkeeping is nothing beside its
/// entries, small enough that hubs spread over threads.
pub const BLOCK_NODES: u32 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum AlgoError {
    #[error("the algorithm was cancelled")]
    Cancelled,
    /// The adjacency could not be read (the storage's error, as text).
    #[error("reading the graph: {0}")]
    Read(String),
    #[error("{0}")]
    Config(String),
}

/// Which neighbours of a node: along the projected relationships, against them, or
/// both (an undirected projection has only `Both`, which its `Out` and `In` return).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    Out,
    In,
    Both,
}

/// The neighbours of nodes `lo..hi`: node `v`'s are `targets[offsets[v - lo] ..
/// offsets[v - lo + 1]]`, sorted within each relationship type and segment (not
/// across them), parallel relationships repeated, with a weight each when asked for.
#[derive(Debug, Default, Clone)]
pub struct Block {
    pub lo: u32,
    pub hi: u32,
    pub offsets: Vec<u32>,
    pub targets: Vec<u32>,
    pub weights: Vec<f64>,
}

impl Block {
    /// Empties the block for nodes `lo..hi` (offsets start at 0).
    pub fn reset(&mut self, lo: u32, hi: u32) {
        self.lo = lo;
        self.hi = hi;
        self.offsets.clear();
        self.offsets.push(0);
        self.targets.clear();
        self.weights.clear();
    }

    /// Ends the current node's entries (call once per node, in order).
    #[inline]
    pub fn close_node(&mut self) {
        self.offsets.push(self.targets.len() as u32);
    }

    #[inline]
    pub fn of(&self, v: u32) -> &[u32] {
        let i = (v - self.lo) as usize;
        &self.targets[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    #[inline]
    pub fn weights_of(&self, v: u32) -> &[f64] {
        let i = (v - self.lo) as usize;
        &self.weights[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Checks the shape a filler must leave (tests and debug builds).
    pub fn well_formed(&self, weights: bool) -> bool {
        self.offsets.len() == (self.hi - self.lo) as usize + 1
            && self.offsets.first() == Some(&0)
            && self.offsets.windows(2).all(|w| w[0] <= w[1])
            && *self.offsets.last().unwrap_or(&0) as usize == self.targets.len()
            && (!weights || self.weights.len() == self.targets.len())
    }
}

/// A graph as the algorithms read it.
pub trait Adjacency: Sync {
    /// Node ids run `0..node_bound()`.
    fn node_bound(&self) -> u32;
    /// Whether `v` is one of the projection's nodes (others have no entries, and an
    /// entry never names them).
    fn is_member(&self, v: u32) -> bool;
    /// How many nodes are members.
    fn member_count(&self) -> u64;
    /// Relationships in the projection (an undirected one counts each once a side, as
    /// GDS does).
    fn relationship_count(&self) -> u64;
    /// Whether `fill` can give weights.
    fn has_weights(&self) -> bool;
    /// Fills `out` with the neighbours of `lo..hi` on `side` (members only), weights too
    /// when `weights` (1.0 each when the projection has none).
    fn fill(
        &self,
        side: Side,
        lo: u32,
        hi: u32,
        weights: bool,
        out: &mut Block,
    ) -> Result<(), AlgoError>;
}

/// How an algorithm runs: its threads and the test that stops it.
pub struct Run<'a> {
    pub threads: usize,
    pub stop: Option<&'a AtomicBool>,
    /// Also stops it past this instant.
    pub deadline: Option<std::time::Instant>,
}

impl Run<'_> {
    pub fn new(threads: usize) -> Run<'static> {
        Run {
            threads: threads.max(1),
            stop: None,
            deadline: None,
        }
    }

    /// `Err(Cancelled)` once stopped: checked once a block.
    #[inline]
    pub fn check(&self) -> Result<(), AlgoError> {
        if self.stop.is_some_and(|s| s.load(Ordering::Relaxed))
            || self
                .deadline
                .is_some_and(|d| std::time::Instant::now() >= d)
        {
            return Err(AlgoError::Cancelled);
        }
        Ok(())
    }

    /// Runs `f` on a pool of `threads` (the global one when it has as many).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R, AlgoError> {
        if self.threads == rayon::current_num_threads() {
            return Ok(f());
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(self.threads)
            .build()
            .map_err(|e| {
                AlgoError::Config(format!("cannot start {} threads: {e}", self.threads))
            })?;
        Ok(pool.install(f))
    }
}

/// The blocks of `0..n`, as `(lo, hi)`.
pub fn blocks(n: u32) -> impl Iterator<Item = (u32, u32)> + Clone {
    (0..n.div_ceil(BLOCK_NODES)).map(move |b| {
        let lo = b * BLOCK_NODES;
        (lo, (lo + BLOCK_NODES).min(n))
    })
}

/// Runs `f(block, state_of_its_nodes)` over every block of `side` on the pool, `state`
/// split so that each block gets the entries of its own nodes (`state.len()` is the
/// node bound).
pub fn for_blocks_mut<T: Send>(
    g: &dyn Adjacency,
    run: &Run,
    side: Side,
    weights: bool,
    state: &mut [T],
    f: impl Fn(&Block, &mut [T]) + Sync,
) -> Result<(), AlgoError> {
    use rayon::prelude::*;
    state
        .par_chunks_mut(BLOCK_NODES as usize)
        .enumerate()
        .try_for_each_init(Block::default, |b, (i, chunk)| {
            run.check()?;
            let lo = i as u32 * BLOCK_NODES;
            g.fill(side, lo, lo + chunk.len() as u32, weights, b)?;
            debug_assert!(b.well_formed(weights));
            f(b, chunk);
            Ok(())
        })
}

/// Runs `f(block) -> R` over every block of `side` on the pool and folds the results
/// with `merge` (in no fixed order: `merge` must not care).
pub fn fold_blocks<R: Send>(
    g: &dyn Adjacency,
    run: &Run,
    side: Side,
    weights: bool,
    zero: impl Fn() -> R + Sync + Send,
    f: impl Fn(&Block, &mut R) + Sync,
    merge: impl Fn(R, R) -> R + Sync + Send,
) -> Result<R, AlgoError> {
    use rayon::prelude::*;
    let all: Vec<(u32, u32)> = blocks(g.node_bound()).collect();
    all.par_iter()
        .try_fold(
            || (Block::default(), zero()),
            |(mut b, mut acc), &(lo, hi)| {
                run.check()?;
                g.fill(side, lo, hi, weights, &mut b)?;
                debug_assert!(b.well_formed(weights));
                f(&b, &mut acc);
                Ok((b, acc))
            },
        )
        .map(|r: Result<(Block, R), AlgoError>| r.map(|(_, acc)| acc))
        .try_reduce(&zero, |a, b| Ok(merge(a, b)))
}

/// An adjacency held in memory: for tests, and for graphs the caller builds itself.
#[derive(Debug, Clone, Default)]
pub struct EdgeList {
    pub n: u32,
    /// Members (`None`: every node).
    pub members: Option<Vec<bool>>,
    pub edges: Vec<(u32, u32, f64)>,
    pub undirected: bool,
    out: Vec<Vec<(u32, f64)>>,
    inc: Vec<Vec<(u32, f64)>>,
}

impl EdgeList {
    pub fn new(n: u32, edges: Vec<(u32, u32, f64)>, undirected: bool) -> EdgeList {
        let mut g = EdgeList {
            n,
            members: None,
            edges,
            undirected,
            ..EdgeList::default()
        };
        g.index();
        g
    }

    /// Keeps only the nodes with `members[v]` (and the edges between them).
    pub fn with_members(mut self, members: Vec<bool>) -> EdgeList {
        self.members = Some(members);
        self.index();
        self
    }

    fn member(&self, v: u32) -> bool {
        self.members.as_ref().is_none_or(|m| m[v as usize])
    }

    fn index(&mut self) {
        let n = self.n as usize;
        self.out = vec![Vec::new(); n];
        self.inc = vec![Vec::new(); n];
        for &(a, b, w) in &self.edges {
            if self
                .members
                .as_ref()
                .is_some_and(|m| !m[a as usize] || !m[b as usize])
            {
                continue;
            }
            self.out[a as usize].push((b, w));
            self.inc[b as usize].push((a, w));
        }
        for l in self.out.iter_mut().chain(self.inc.iter_mut()) {
            l.sort_by(|x, y| x.0.cmp(&y.0));
        }
    }
}

impl Adjacency for EdgeList {
    fn node_bound(&self) -> u32 {
        self.n
    }
    fn is_member(&self, v: u32) -> bool {
        v < self.n && self.member(v)
    }
    fn member_count(&self) -> u64 {
        (0..self.n).filter(|&v| self.member(v)).count() as u64
    }
    fn relationship_count(&self) -> u64 {
        let m: u64 = self.out.iter().map(|l| l.len() as u64).sum();
        if self.undirected {
            2 * m
        } else {
            m
        }
    }
    fn has_weights(&self) -> bool {
        true
    }
    fn fill(
        &self,
        side: Side,
        lo: u32,
        hi: u32,
        weights: bool,
        out: &mut Block,
    ) -> Result<(), AlgoError> {
        out.reset(lo, hi);
        let side = if self.undirected { Side::Both } else { side };
        for v in lo..hi {
            let lists: &[&Vec<(u32, f64)>] = match side {
                Side::Out => &[&self.out[v as usize]],
                Side::In => &[&self.inc[v as usize]],
                Side::Both => &[&self.out[v as usize], &self.inc[v as usize]],
            };
            for l in lists {
                for &(t, w) in l.iter() {
                    out.targets.push(t);
                    if weights {
                        out.weights.push(w);
                    }
                }
            }
            out.close_node();
        }
        Ok(())
    }
}

/// The members of `g` in id order.
pub fn members(g: &dyn Adjacency) -> Vec<u32> {
    (0..g.node_bound()).filter(|&v| g.is_member(v)).collect()
}

/// A node's neighbours as a simple undirected graph sees them: both sides, sorted,
/// each once, without `v` itself.
pub(crate) fn simple_neighbours(v: u32, b: &Block, out: &mut Vec<u32>) {
    out.clear();
    out.extend(b.of(v).iter().copied().filter(|&u| u != v));
    // A block's list is a few sorted runs (a type's out entries, then its in entries):
    // the stable sort finds and merges runs, where the unstable one sorts from scratch.
    out.sort();
    out.dedup();
}

/// Lists of `u32` per node held in blocks as [`Block`]s are: what an algorithm that
/// revisits neighbourhoods at random (triangles, cores) keeps in memory, sized
/// `4 × entries + 4 × nodes` bytes.
pub(crate) struct Lists {
    pub(crate) blocks: Vec<Block>,
}

impl Lists {
    #[inline]
    pub(crate) fn of(&self, v: u32) -> &[u32] {
        self.blocks[(v / BLOCK_NODES) as usize].of(v)
    }

    /// Builds, on the pool, each node's list `f(v, block, out)` from the blocks of
    /// `side`.
    pub(crate) fn build(
        g: &dyn Adjacency,
        run: &Run,
        side: Side,
        f: impl Fn(u32, &Block, &mut Vec<u32>) + Sync,
    ) -> Result<Lists, AlgoError> {
        use rayon::prelude::*;
        let all: Vec<(u32, u32)> = blocks(g.node_bound()).collect();
        let blocks = all
            .par_iter()
            .map_init(
                || (Block::default(), Vec::new()),
                |(b, tmp), &(lo, hi)| {
                    run.check()?;
                    g.fill(side, lo, hi, false, b)?;
                    let mut own = Block::default();
                    own.reset(lo, hi);
                    for v in lo..hi {
                        f(v, b, tmp);
                        own.targets.extend_from_slice(tmp);
                        own.close_node();
                    }
                    own.targets.shrink_to_fit();
                    Ok(own)
                },
            )
            .collect::<Result<Vec<_>, AlgoError>>()?;
        Ok(Lists { blocks })
    }
}

/// Summary statistics of a distribution, as GDS reports them (`min`, `max`, `mean`,
/// percentiles `p50` .. `p999`).
pub fn distribution(values: &mut [f64]) -> Vec<(&'static str, f64)> {
    if values.is_empty() {
        return Vec::new();
    }
    values.sort_unstable_by(|a, b| a.total_cmp(b));
    let n = values.len();
    let at = |q: f64| values[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    let mean = values.iter().sum::<f64>() / n as f64;
    vec![
        ("min", values[0]),
        ("max", values[n - 1]),
        ("mean", mean),
        ("p50", at(0.5)),
        ("p75", at(0.75)),
        ("p90", at(0.9)),
        ("p95", at(0.95)),
        ("p99", at(0.99)),
        ("p999", at(0.999)),
    ]
}
