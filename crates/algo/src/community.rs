//! Communities: label propagation, Louvain, and the modularity of a partition, over the
//! projection read as undirected (both sides of every node, weights summed).
//!
//! Label propagation updates a block's nodes in place, in id order, reading other
//! blocks' labels as the previous pass left them: the result does not depend on the
//! threads. Louvain's local moves run the same way (a block's moves see each other and
//! the community totals as the pass began), then communities become nodes of a smaller
//! graph held in memory, until a level improves modularity by less than `tolerance`.

use crate::{for_blocks_mut, Adjacency, AlgoError, Block, Run, Side};

#[derive(Debug, Clone)]
pub struct LabelPropagation {
    pub max_iterations: u32,
    pub weighted: bool,
    /// Decides ties between labels of equal weight.
    pub seed: u64,
}

#[derive(Debug, Clone)]
pub struct Labelled {
    /// Each node's community: a member id (`u32::MAX` for non-members).
    pub labels: Vec<u32>,
    pub iterations: u32,
    pub converged: bool,
}

/// What label propagation holds: two `u32` a node.
pub fn lpa_estimate(node_bound: u64) -> u64 {
    node_bound * 8
}

/// A label's rank among equal votes for node `v` in pass `pass`: a hash, so that ties
/// go a different way at each node (the smallest label would flood the graph) yet the
/// same way in every run.
#[inline]
fn tie_rank(label: u32, v: u32, pass: u32, seed: u64) -> u64 {
    let mut x = seed ^ ((label as u64) << 32 | v as u64) ^ ((pass as u64) << 17);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

/// The label with the most weight among `(label, weight)` votes (sorted by label
/// here): `own` when it is among the heaviest (so that ties do not flip a settled
/// node back and forth), else ties by [`tie_rank`]; `None` without votes.
fn winner(votes: &mut [(u32, f64)], own: u32, v: u32, pass: u32, seed: u64) -> Option<u32> {
    votes.sort_unstable_by_key(|v| v.0);
    let mut best: Option<(u32, f64, u64)> = None;
    let mut i = 0;
    while i < votes.len() {
        let l = votes[i].0;
        let mut w = 0.0;
        while i < votes.len() && votes[i].0 == l {
            w += votes[i].1;
            i += 1;
        }
        let rank = if l == own {
            0
        } else {
            tie_rank(l, v, pass, seed) | 1
        };
        if best.is_none_or(|(_, bw, br)| w > bw || (w == bw && rank < br)) {
            best = Some((l, w, rank));
        }
    }
    best.map(|b| b.0)
}

/// [`winner`] for votes of weight 1 (labels alone, sorted as integers).
fn winner_plain(votes: &mut [u32], own: u32, v: u32, pass: u32, seed: u64) -> Option<u32> {
    votes.sort_unstable();
    let rank = |l: u32| {
        if l == own {
            0
        } else {
            tie_rank(l, v, pass, seed) | 1
        }
    };
    // (label, votes, its tie rank once a tie needed it)
    let mut best: Option<(u32, usize, Option<u64>)> = None;
    let mut i = 0;
    while i < votes.len() {
        let l = votes[i];
        let start = i;
        while i < votes.len() && votes[i] == l {
            i += 1;
        }
        let w = i - start;
        match &mut best {
            None => best = Some((l, w, None)),
            Some((bl, bw, br)) => {
                if w > *bw {
                    best = Some((l, w, None));
                } else if w == *bw {
                    let have = *br.get_or_insert_with(|| rank(*bl));
                    let r = rank(l);
                    if r < have {
                        best = Some((l, w, Some(r)));
                    }
                }
            }
        }
    }
    best.map(|b| b.0)
}

impl LabelPropagation {
    pub fn run(&self, g: &dyn Adjacency, run: &Run) -> Result<Labelled, AlgoError> {
        run.install(|| self.run_here(g, run))?
    }

    fn run_here(&self, g: &dyn Adjacency, run: &Run) -> Result<Labelled, AlgoError> {
        const CHANGED: u32 = 1 << 31;
        const NONE: u32 = CHANGED - 1;
        let n = g.node_bound();
        if n >= NONE {
            return Err(AlgoError::Config(format!(
                "label propagation takes graphs of up to {NONE} node ids, this one has {n}"
            )));
        }
        let weighted = self.weighted && g.has_weights();
        // A label a node, its top bit set when the pass that wrote it changed it. A node
        // none of whose neighbours changed since it was last decided is not decided
        // again: its votes are the same, and its own label, among the heaviest then,
        // wins their ties (networkit's active nodes; the answer is the one every node's
        // decision would give). One word a node keeps the gathers' footprint small.
        let mut state: Vec<u32> = (0..n)
            .map(|v| if g.is_member(v) { v | CHANGED } else { NONE })
            .collect();
        let (mut iterations, mut converged) = (0, false);
        while iterations < self.max_iterations {
            let prev = state.clone();
            let prev = &prev;
            let changed = std::sync::atomic::AtomicBool::new(false);
            for_blocks_mut(g, run, Side::Both, weighted, &mut state, |b, chunk| {
                let mut votes = Vec::new();
                let mut plain: Vec<u32> = Vec::new();
                let mut moved = false;
                for c in chunk.iter_mut() {
                    *c &= !CHANGED;
                }
                for v in b.lo..b.hi {
                    let i = (v - b.lo) as usize;
                    if chunk[i] == NONE {
                        continue;
                    }
                    // A neighbour of this block as this pass left it so far (changed
                    // in it or the last); others as the last pass did.
                    let of = |u: u32, chunk: &[u32]| {
                        if u >= b.lo && u < b.hi {
                            chunk[(u - b.lo) as usize] | (prev[u as usize] & CHANGED)
                        } else {
                            prev[u as usize]
                        }
                    };
                    let nb = b.of(v);
                    let own = chunk[i];
                    let won = if weighted {
                        if iterations > 0
                            && !nb.iter().any(|&u| u != v && of(u, chunk) & CHANGED != 0)
                        {
                            continue;
                        }
                        votes.clear();
                        for (k, &u) in nb.iter().enumerate() {
                            if u != v {
                                votes.push((of(u, chunk) & !CHANGED, b.weights_of(v)[k]));
                            }
                        }
                        winner(&mut votes, own, v, iterations, self.seed)
                    } else {
                        // One gather: the labels with their flags, then the test.
                        plain.clear();
                        plain.extend(nb.iter().filter(|&&u| u != v).map(|&u| of(u, chunk)));
                        if iterations > 0 && !plain.iter().any(|&l| l & CHANGED != 0) {
                            continue;
                        }
                        plain.iter_mut().for_each(|l| *l &= !CHANGED);
                        winner_plain(&mut plain, own, v, iterations, self.seed)
                    };
                    if let Some(l) = won {
                        if l != own {
                            chunk[i] = l | CHANGED;
                            moved = true;
                        }
                    }
                }
                if moved {
                    changed.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            })?;
            iterations += 1;
            if !changed.load(std::sync::atomic::Ordering::Relaxed) {
                converged = true;
                break;
            }
        }
        Ok(Labelled {
            labels: state
                .into_iter()
                .map(|s| if s == NONE { u32::MAX } else { s & !CHANGED })
                .collect(),
            iterations,
            converged,
        })
    }
}

/// A weighted undirected graph in memory (Louvain's levels past the first): each
/// node's (neighbour, weight) entries, a self-loop's weight counted twice as an
/// undirected graph's degree counts it.
struct Level {
    offsets: Vec<u64>,
    targets: Vec<u32>,
    weights: Vec<f64>,
}

impl Level {
    fn n(&self) -> u32 {
        (self.offsets.len() - 1) as u32
    }
    fn of(&self, v: u32) -> (&[u32], &[f64]) {
        let (a, b) = (
            self.offsets[v as usize] as usize,
            self.offsets[v as usize + 1] as usize,
        );
        (&self.targets[a..b], &self.weights[a..b])
    }
}

#[derive(Debug, Clone)]
pub struct Louvain {
    pub max_levels: u32,
    pub max_iterations: u32,
    /// A level ends when a pass improves modularity by less than this.
    pub tolerance: f64,
    pub weighted: bool,
}

impl Default for Louvain {
    fn default() -> Self {
        Louvain {
            max_levels: 10,
            max_iterations: 10,
            tolerance: 1e-4,
            weighted: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Communities {
    /// Each node's community (dense numbers from 0 in order of each community's
    /// smallest member; `u32::MAX` for non-members).
    pub community: Vec<u32>,
    pub modularity: f64,
    /// Modularity after each level.
    pub modularities: Vec<f64>,
    pub levels: u32,
}

/// What Louvain holds: per node its community, degree and the totals (four words),
/// and the second level's graph (at most an entry a relationship).
pub fn louvain_estimate(node_bound: u64, relationships: u64) -> u64 {
    node_bound * 32 + relationships * 12
}

impl Louvain {
    pub fn run(&self, g: &dyn Adjacency, run: &Run) -> Result<Communities, AlgoError> {
        run.install(|| self.run_here(g, run))?
    }

    fn run_here(&self, g: &dyn Adjacency, run: &Run) -> Result<Communities, AlgoError> {
        let n = g.node_bound();
        let weighted = self.weighted && g.has_weights();
        // Level 0 from the projection: degrees (self-loops count twice, as an
        // undirected graph's do: `Both` gives them once from each side).
        let mut degree = vec![0f64; n as usize];
        for_blocks_mut(g, run, Side::Both, weighted, &mut degree, |b, chunk| {
            for v in b.lo..b.hi {
                chunk[(v - b.lo) as usize] = if weighted {
                    b.weights_of(v).iter().sum()
                } else {
                    b.of(v).len() as f64
                };
            }
        })?;
        let m2: f64 = degree.iter().sum();
        let mut assignment: Vec<u32> = (0..n)
            .map(|v| if g.is_member(v) { v } else { u32::MAX })
            .collect();
        if m2 == 0.0 {
            return Ok(finish(assignment, 0.0, Vec::new(), 0));
        }
        // The first level reads the projection; later ones a graph of communities.
        let mut comm: Vec<u32> = (0..n).collect();
        let moved = local_moves(
            n,
            &degree,
            m2,
            &mut comm,
            self.max_iterations,
            self.tolerance,
            run,
            &mut |lo, hi, b: &mut Block| g.fill(Side::Both, lo, hi, weighted, b),
            weighted,
        )?;
        let mut modularities = Vec::new();
        let mut levels = 0;
        if moved {
            levels = 1;
            // Dense community numbers.
            let (dense, k) = densify(&comm, |v| g.is_member(v));
            for v in 0..n as usize {
                if assignment[v] != u32::MAX {
                    assignment[v] = dense[v];
                }
            }
            let mut level = aggregate_projection(g, run, &dense, k, weighted)?;
            modularities.push(modularity_level(&level, &(0..k).collect::<Vec<_>>(), m2));
            while levels < self.max_levels {
                let kn = level.n();
                let ldeg: Vec<f64> = (0..kn).map(|v| level.of(v).1.iter().sum()).collect();
                let mut lc: Vec<u32> = (0..kn).collect();
                let lvl = &level;
                let moved = local_moves(
                    kn,
                    &ldeg,
                    m2,
                    &mut lc,
                    self.max_iterations,
                    self.tolerance,
                    run,
                    &mut |lo, hi, b: &mut Block| {
                        b.reset(lo, hi);
                        for v in lo..hi {
                            let (t, w) = lvl.of(v);
                            b.targets.extend_from_slice(t);
                            b.weights.extend_from_slice(w);
                            b.close_node();
                        }
                        Ok(())
                    },
                    true,
                )?;
                if !moved {
                    break;
                }
                let (dense, k2) = densify(&lc, |_| true);
                for a in assignment.iter_mut() {
                    if *a != u32::MAX {
                        *a = dense[*a as usize];
                    }
                }
                level = aggregate_level(&level, &dense, k2);
                modularities.push(modularity_level(&level, &(0..k2).collect::<Vec<_>>(), m2));
                levels += 1;
                if modularities.len() >= 2 {
                    let l = modularities.len();
                    if modularities[l - 1] - modularities[l - 2] < self.tolerance {
                        break;
                    }
                }
            }
        }
        let q = modularity(g, run, &assignment, weighted)?;
        Ok(finish(assignment, q, modularities, levels))
    }
}

fn finish(assignment: Vec<u32>, q: f64, modularities: Vec<f64>, levels: u32) -> Communities {
    // Renumber by smallest member, so numbers do not depend on the levels' order.
    let n = assignment.len();
    let mut first = vec![u32::MAX; n];
    for (v, &c) in assignment.iter().enumerate() {
        if c != u32::MAX && first[c as usize] == u32::MAX {
            first[c as usize] = v as u32;
        }
    }
    let mut order: Vec<(u32, u32)> = first
        .iter()
        .enumerate()
        .filter(|(_, &f)| f != u32::MAX)
        .map(|(c, &f)| (f, c as u32))
        .collect();
    order.sort_unstable();
    let mut rename = vec![u32::MAX; n];
    for (i, &(_, c)) in order.iter().enumerate() {
        rename[c as usize] = i as u32;
    }
    Communities {
        community: assignment
            .iter()
            .map(|&c| if c == u32::MAX { c } else { rename[c as usize] })
            .collect(),
        modularity: q,
        modularities,
        levels,
    }
}

/// Community ids renumbered densely in order of first appearance over members.
fn densify(comm: &[u32], member: impl Fn(u32) -> bool) -> (Vec<u32>, u32) {
    let mut map = vec![u32::MAX; comm.len()];
    let mut k = 0;
    let mut dense = vec![u32::MAX; comm.len()];
    for (v, &c) in comm.iter().enumerate() {
        if !member(v as u32) {
            continue;
        }
        if map[c as usize] == u32::MAX {
            map[c as usize] = k;
            k += 1;
        }
        dense[v] = map[c as usize];
    }
    (dense, k)
}

/// Moves nodes to the neighbouring community that gains most modularity, pass after
/// pass, until a pass gains less than `tolerance` (or `max_iterations`); whether any
/// node moved.
#[allow(clippy::too_many_arguments)]
fn local_moves(
    n: u32,
    degree: &[f64],
    m2: f64,
    comm: &mut [u32],
    max_iterations: u32,
    tolerance: f64,
    run: &Run,
    fill: &mut dyn FnMut(u32, u32, &mut Block) -> Result<(), AlgoError>,
    weighted: bool,
) -> Result<bool, AlgoError> {
    // Community totals (sum of degrees).
    let mut tot = vec![0f64; n as usize];
    for v in 0..n as usize {
        tot[comm[v] as usize] += degree[v];
    }
    let mut any = false;
    let mut block = Block::default();
    let mut acc: Vec<f64> = vec![0.0; n as usize];
    let mut touched: Vec<u32> = Vec::new();
    for _ in 0..max_iterations {
        let mut gain_total = 0.0;
        let mut moves = 0u64;
        for (lo, hi) in crate::blocks(n) {
            run.check()?;
            fill(lo, hi, &mut block)?;
            for v in lo..hi {
                let dv = degree[v as usize];
                if dv == 0.0 {
                    continue;
                }
                let own = comm[v as usize];
                touched.clear();
                for (k, &u) in block.of(v).iter().enumerate() {
                    let w = if weighted {
                        block.weights_of(v)[k]
                    } else {
                        1.0
                    };
                    if u == v {
                        continue;
                    }
                    let c = comm[u as usize];
                    if acc[c as usize] == 0.0 {
                        touched.push(c);
                    }
                    acc[c as usize] += w;
                }
                // Remove v from its community.
                tot[own as usize] -= dv;
                let k_own = acc[own as usize];
                let score = |k_in: f64, t: f64| k_in - t * dv / m2;
                let (mut best, mut best_score) = (own, score(k_own, tot[own as usize]));
                for &c in &touched {
                    let s = score(acc[c as usize], tot[c as usize]);
                    if s > best_score + 1e-12 {
                        best = c;
                        best_score = s;
                    }
                }
                tot[best as usize] += dv;
                if best != own {
                    gain_total += 2.0 * (best_score - score(k_own, tot[own as usize])) / m2;
                    comm[v as usize] = best;
                    moves += 1;
                    any = true;
                }
                for &c in &touched {
                    acc[c as usize] = 0.0;
                }
            }
        }
        if moves == 0 || gain_total < tolerance {
            break;
        }
    }
    Ok(any)
}

/// The graph of communities: an entry per pair of adjacent communities (within one:
/// a self-loop), weights summed.
fn aggregate_projection(
    g: &dyn Adjacency,
    run: &Run,
    dense: &[u32],
    k: u32,
    weighted: bool,
) -> Result<Level, AlgoError> {
    let mut pairs: Vec<(u32, u32, f64)> = Vec::new();
    let mut b = Block::default();
    for (lo, hi) in crate::blocks(g.node_bound()) {
        run.check()?;
        g.fill(Side::Both, lo, hi, weighted, &mut b)?;
        for v in lo..hi {
            let cv = dense[v as usize];
            if cv == u32::MAX {
                continue;
            }
            for (i, &u) in b.of(v).iter().enumerate() {
                let w = if weighted { b.weights_of(v)[i] } else { 1.0 };
                pairs.push((cv, dense[u as usize], w));
            }
        }
        if pairs.len() > 1 << 22 {
            compact(&mut pairs);
        }
    }
    compact(&mut pairs);
    Ok(level_of(pairs, k))
}

fn aggregate_level(l: &Level, dense: &[u32], k: u32) -> Level {
    let mut pairs = Vec::new();
    for v in 0..l.n() {
        let (t, w) = l.of(v);
        for (&u, &w) in t.iter().zip(w) {
            pairs.push((dense[v as usize], dense[u as usize], w));
        }
    }
    compact(&mut pairs);
    level_of(pairs, k)
}

fn compact(pairs: &mut Vec<(u32, u32, f64)>) {
    pairs.sort_unstable_by_key(|p| (p.0, p.1));
    let mut out: Vec<(u32, u32, f64)> = Vec::with_capacity(pairs.len() / 2);
    for &(a, b, w) in pairs.iter() {
        match out.last_mut() {
            Some(l) if l.0 == a && l.1 == b => l.2 += w,
            _ => out.push((a, b, w)),
        }
    }
    *pairs = out;
}

fn level_of(pairs: Vec<(u32, u32, f64)>, k: u32) -> Level {
    let mut offsets = vec![0u64; k as usize + 1];
    for p in &pairs {
        offsets[p.0 as usize + 1] += 1;
    }
    for i in 1..offsets.len() {
        offsets[i] += offsets[i - 1];
    }
    Level {
        offsets,
        targets: pairs.iter().map(|p| p.1).collect(),
        weights: pairs.iter().map(|p| p.2).collect(),
    }
}

fn modularity_level(l: &Level, comm: &[u32], m2: f64) -> f64 {
    let n = l.n() as usize;
    let mut inside = vec![0f64; n];
    let mut tot = vec![0f64; n];
    for v in 0..l.n() {
        let (t, w) = l.of(v);
        let c = comm[v as usize] as usize;
        for (&u, &w) in t.iter().zip(w) {
            tot[c] += w;
            if comm[u as usize] as usize == c {
                inside[c] += w;
            }
        }
    }
    (0..n).map(|c| inside[c] / m2 - (tot[c] / m2).powi(2)).sum()
}

/// Newman's modularity of `community` (by node; `u32::MAX` for non-members) over the
/// projection read as undirected.
pub fn modularity(
    g: &dyn Adjacency,
    run: &Run,
    community: &[u32],
    weighted: bool,
) -> Result<f64, AlgoError> {
    let k = community
        .iter()
        .filter(|&&c| c != u32::MAX)
        .max()
        .map_or(0, |&c| c as usize + 1);
    let mut b = Block::default();
    let mut inside = vec![0f64; k];
    let mut tot = vec![0f64; k];
    let mut m2 = 0.0;
    let weighted = weighted && g.has_weights();
    for (lo, hi) in crate::blocks(g.node_bound()) {
        run.check()?;
        g.fill(Side::Both, lo, hi, weighted, &mut b)?;
        for v in lo..hi {
            let c = community[v as usize];
            if c == u32::MAX {
                continue;
            }
            for (i, &u) in b.of(v).iter().enumerate() {
                let w = if weighted { b.weights_of(v)[i] } else { 1.0 };
                m2 += w;
                tot[c as usize] += w;
                if community[u as usize] == c {
                    inside[c as usize] += w;
                }
            }
        }
    }
    if m2 == 0.0 {
        return Ok(0.0);
    }
    Ok((0..k).map(|c| inside[c] / m2 - (tot[c] / m2).powi(2)).sum())
}
