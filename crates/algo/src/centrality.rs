//! Centralities: PageRank (weighted, personalized), ArticleRank, degree.
//!
//! PageRank pulls: each pass reads the `In` side of every block in node order and
//! gathers the contributions of its neighbours from one array (score over out-degree,
//! computed once a pass), so the adjacency is read sequentially and each thread writes
//! only its own nodes' next scores. Scores are GDS's, not normalized: a node's is
//! `(1 - d) + d * Σ contributions` (a personalized run keeps `1 - d` for its sources
//! and 0 for the others); networkit's without sink handling is the same divided by the
//! node count, iteration for iteration.

use crate::{for_blocks_mut, Adjacency, AlgoError, Run, Side};

#[derive(Debug, Clone)]
pub struct PageRank {
    pub damping: f64,
    pub max_iterations: u32,
    /// The run stops once no score changed by this much in a pass.
    pub tolerance: f64,
    /// Personalized: the nodes the surfer jumps back to (empty: every node).
    pub sources: Vec<u32>,
    pub weighted: bool,
    /// ArticleRank: a neighbour's contribution is divided by its out-degree plus the
    /// average out-degree, so low-degree nodes weigh less.
    pub article: bool,
}

impl Default for PageRank {
    fn default() -> Self {
        PageRank {
            damping: 0.85,
            max_iterations: 20,
            tolerance: 1e-7,
            sources: Vec::new(),
            weighted: false,
            article: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Ranked {
    /// By node id (0 for non-members).
    pub scores: Vec<f64>,
    pub iterations: u32,
    pub converged: bool,
}

impl PageRank {
    /// The bytes a run holds: three `f64` a node (scores, contributions, out-degrees)
    /// and a flag a node for a personalized run.
    pub fn estimate(&self, node_bound: u64) -> u64 {
        node_bound * 24
            + if self.sources.is_empty() {
                0
            } else {
                node_bound
            }
    }

    pub fn run(&self, g: &dyn Adjacency, run: &Run) -> Result<Ranked, AlgoError> {
        if !(0.0..1.0).contains(&self.damping) {
            return Err(AlgoError::Config(format!(
                "dampingFactor must be at least 0 and less than 1, got {}",
                self.damping
            )));
        }
        if self.weighted && !g.has_weights() {
            return Err(AlgoError::Config(
                "a weighted run needs a projection with a relationship weight property".into(),
            ));
        }
        run.install(|| self.run_here(g, run))?
    }

    fn run_here(&self, g: &dyn Adjacency, run: &Run) -> Result<Ranked, AlgoError> {
        let n = g.node_bound() as usize;
        let d = self.damping;
        let weighted = self.weighted;
        // Out-degrees (weight sums when weighted).
        // Out-degrees (weight sums when weighted): the degree centrality.
        let mut outw = degree(g, run, Side::Out, weighted)?;
        if self.article {
            let members = g.member_count().max(1) as f64;
            let avg = outw.iter().sum::<f64>() / members;
            for (v, w) in outw.iter_mut().enumerate() {
                if g.is_member(v as u32) {
                    *w += avg;
                }
            }
        }
        let source: Option<Vec<bool>> = (!self.sources.is_empty()).then(|| {
            let mut s = vec![false; n];
            for &v in &self.sources {
                if (v as usize) < n && g.is_member(v) {
                    s[v as usize] = true;
                }
            }
            s
        });
        let base = |v: u32| -> f64 {
            let jumps = match &source {
                Some(s) => s[v as usize],
                None => g.is_member(v),
            };
            if jumps {
                1.0 - d
            } else {
                0.0
            }
        };
        let mut scores: Vec<f64> = (0..n as u32).map(base).collect();
        let mut contrib = vec![0f64; n];
        let (mut iterations, mut converged) = (0, false);
        while iterations < self.max_iterations {
            {
                use rayon::prelude::*;
                contrib
                    .par_iter_mut()
                    .zip(scores.par_iter())
                    .zip(outw.par_iter())
                    .for_each(|((c, &s), &w)| *c = if w > 0.0 { s / w } else { 0.0 });
            }
            let contrib = &contrib;
            let deltas = std::sync::Mutex::new(0f64);
            for_blocks_mut(g, run, Side::In, weighted, &mut scores, |b, chunk| {
                let mut most = 0f64;
                for v in b.lo..b.hi {
                    let i = (v - b.lo) as usize;
                    let nb = b.of(v);
                    let sum: f64 = if weighted {
                        nb.iter()
                            .zip(b.weights_of(v))
                            .map(|(&u, &w)| contrib[u as usize] * w)
                            .sum()
                    } else {
                        gather(nb, contrib)
                    };
                    let next = base(v) + d * sum;
                    most = most.max((next - chunk[i]).abs());
                    chunk[i] = next;
                }
                let mut m = deltas.lock().unwrap_or_else(|e| e.into_inner());
                *m = m.max(most);
            })?;
            iterations += 1;
            let most = deltas.into_inner().unwrap_or_else(|e| e.into_inner());
            if most < self.tolerance {
                converged = true;
                break;
            }
        }
        Ok(Ranked {
            scores,
            iterations,
            converged,
        })
    }
}

/// `Σ contrib[u]` over `nb`, four sums at once (the gathers' misses overlap).
#[inline]
fn gather(nb: &[u32], contrib: &[f64]) -> f64 {
    let mut s = [0f64; 4];
    let mut it = nb.chunks_exact(4);
    for c in &mut it {
        s[0] += contrib[c[0] as usize];
        s[1] += contrib[c[1] as usize];
        s[2] += contrib[c[2] as usize];
        s[3] += contrib[c[3] as usize];
    }
    let mut t = (s[0] + s[1]) + (s[2] + s[3]);
    for &u in it.remainder() {
        t += contrib[u as usize];
    }
    t
}

/// Degree centrality: each node's relationships on `side` (`Out` for a natural
/// projection's out-degree), or their weights' sum.
pub fn degree(
    g: &dyn Adjacency,
    run: &Run,
    side: Side,
    weighted: bool,
) -> Result<Vec<f64>, AlgoError> {
    if weighted && !g.has_weights() {
        return Err(AlgoError::Config(
            "a weighted run needs a projection with a relationship weight property".into(),
        ));
    }
    let mut out = vec![0f64; g.node_bound() as usize];
    run.install(|| {
        for_blocks_mut(g, run, side, weighted, &mut out, |b, chunk| {
            for v in b.lo..b.hi {
                chunk[(v - b.lo) as usize] = if weighted {
                    b.weights_of(v).iter().sum()
                } else {
                    b.of(v).len() as f64
                };
            }
        })
    })??;
    Ok(out)
}

/// What [`degree`] holds: a `f64` a node.
pub fn degree_estimate(node_bound: u64) -> u64 {
    node_bound * 8
}

/// Eigenvector centrality (GDS's): scores start equal, each pass a node takes the sum
/// of its `In` neighbours' scores (weighted), and the scores are scaled to unit length,
/// until no score changes by `tolerance` or `max_iterations` passes.
#[derive(Debug, Clone)]
pub struct Eigenvector {
    pub max_iterations: u32,
    pub tolerance: f64,
    pub weighted: bool,
}

impl Eigenvector {
    /// Two `f64` a node.
    pub fn estimate(&self, node_bound: u64) -> u64 {
        node_bound * 16
    }

    pub fn run(&self, g: &dyn Adjacency, run: &Run) -> Result<Ranked, AlgoError> {
        run.install(|| self.run_here(g, run))?
    }

    fn run_here(&self, g: &dyn Adjacency, run: &Run) -> Result<Ranked, AlgoError> {
        let n = g.node_bound() as usize;
        let weighted = self.weighted && g.has_weights();
        let members = g.member_count().max(1) as f64;
        let mut scores: Vec<f64> = (0..n as u32)
            .map(|v| if g.is_member(v) { 1.0 / members } else { 0.0 })
            .collect();
        let mut next = vec![0f64; n];
        let (mut iterations, mut converged) = (0, false);
        while iterations < self.max_iterations {
            let prev = &scores;
            for_blocks_mut(g, run, Side::In, weighted, &mut next, |b, chunk| {
                for v in b.lo..b.hi {
                    let nb = b.of(v);
                    chunk[(v - b.lo) as usize] = if weighted {
                        nb.iter()
                            .zip(b.weights_of(v))
                            .map(|(&u, &w)| prev[u as usize] * w)
                            .sum()
                    } else {
                        gather(nb, prev)
                    };
                }
            })?;
            let norm = next.iter().map(|x| x * x).sum::<f64>().sqrt();
            if norm > 0.0 {
                next.iter_mut().for_each(|x| *x /= norm);
            }
            iterations += 1;
            let most = next
                .iter()
                .zip(&scores)
                .map(|(a, b)| (a - b).abs())
                .fold(0f64, f64::max);
            std::mem::swap(&mut scores, &mut next);
            if most < self.tolerance {
                converged = true;
                break;
            }
        }
        Ok(Ranked {
            scores,
            iterations,
            converged,
        })
    }
}
