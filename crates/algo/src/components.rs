//! Connected components: weakly connected (WCC) by a concurrent union-find over one
//! pass of the `Out` side, and strongly connected (SCC) by iterated forward-backward
//! colouring.
//!
//! WCC's union-find links the larger root under the smaller with a compare-and-swap,
//! so every component ends rooted at its smallest node id whatever the threads did:
//! that id is its `componentId` (deterministic, and what a reader can check).

use crate::{fold_blocks, for_blocks_mut, Adjacency, AlgoError, Run, Side};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// Component of every node: the smallest member id of its component (`u32::MAX` for
/// non-members).
pub fn wcc(g: &dyn Adjacency, run: &Run) -> Result<Vec<u32>, AlgoError> {
    run.install(|| wcc_here(g, run))?
}

/// What [`wcc`] holds: a `u32` a node.
pub fn wcc_estimate(node_bound: u64) -> u64 {
    node_bound * 4
}

fn find(p: &[AtomicU32], mut x: u32) -> u32 {
    loop {
        let px = p[x as usize].load(Relaxed);
        if px == x {
            return x;
        }
        let gp = p[px as usize].load(Relaxed);
        if gp != px {
            // Path halving: a racing writer only ever shortens the path too.
            let _ = p[x as usize].compare_exchange(px, gp, Relaxed, Relaxed);
        }
        x = px;
    }
}

fn union(p: &[AtomicU32], a: u32, b: u32) {
    let (mut a, mut b) = (a, b);
    loop {
        a = find(p, a);
        b = find(p, b);
        if a == b {
            return;
        }
        let (hi, lo) = if a > b { (a, b) } else { (b, a) };
        if p[hi as usize]
            .compare_exchange(hi, lo, Relaxed, Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

fn wcc_here(g: &dyn Adjacency, run: &Run) -> Result<Vec<u32>, AlgoError> {
    let n = g.node_bound();
    let parent: Vec<AtomicU32> = (0..n).map(AtomicU32::new).collect();
    fold_blocks(
        g,
        run,
        Side::Out,
        false,
        || (),
        |b, _| {
            for v in b.lo..b.hi {
                for &u in b.of(v) {
                    // (Most edges of a settled region find one root: skip the CAS.)
                    if parent[u as usize].load(Relaxed) != parent[v as usize].load(Relaxed) {
                        union(&parent, u, v);
                    }
                }
            }
        },
        |(), ()| (),
    )?;
    let mut comp = vec![0u32; n as usize];
    {
        use rayon::prelude::*;
        comp.par_iter_mut().enumerate().for_each(|(v, c)| {
            *c = if g.is_member(v as u32) {
                find(&parent, v as u32)
            } else {
                u32::MAX
            }
        });
    }
    Ok(comp)
}

/// Strongly connected components: each node's component named by its smallest member
/// id (`u32::MAX` for non-members). Forward-backward: colours spread the largest id
/// forward until stable; each colour's root then claims what reaches it backward
/// within its colour; the rest repeat.
pub fn scc(g: &dyn Adjacency, run: &Run) -> Result<Vec<u32>, AlgoError> {
    run.install(|| scc_here(g, run))?
}

/// What [`scc`] holds: five `u32` a node (placed, colour, its last pass, reached, roots).
pub fn scc_estimate(node_bound: u64) -> u64 {
    node_bound * 20
}

fn scc_here(g: &dyn Adjacency, run: &Run) -> Result<Vec<u32>, AlgoError> {
    const OPEN: u32 = u32::MAX;
    let n = g.node_bound() as usize;
    // done[v]: the component's smallest id once v is placed.
    let mut done: Vec<u32> = (0..n as u32)
        .map(|v| if g.is_member(v) { OPEN } else { u32::MAX - 1 })
        .collect();
    loop {
        if done.iter().all(|&c| c != OPEN) {
            break;
        }
        // Forward: colour[v] = the largest open id that reaches v (among open nodes).
        let mut colour: Vec<u32> = (0..n as u32)
            .map(|v| if done[v as usize] == OPEN { v } else { OPEN })
            .collect();
        loop {
            let before = colour.clone();
            let prev = &before;
            let dn = &done;
            let changed = AtomicU32::new(0);
            for_blocks_mut(g, run, Side::In, false, &mut colour, |b, chunk| {
                for v in b.lo..b.hi {
                    let i = (v - b.lo) as usize;
                    if dn[v as usize] != OPEN {
                        continue;
                    }
                    let mut c = chunk[i];
                    for &u in b.of(v) {
                        if dn[u as usize] == OPEN && prev[u as usize] > c {
                            c = prev[u as usize];
                        }
                    }
                    if c != chunk[i] {
                        chunk[i] = c;
                        changed.store(1, Relaxed);
                    }
                }
            })?;
            if changed.load(Relaxed) == 0 {
                break;
            }
        }
        // Backward: from each root (colour[v] == v), over in-edges reversed (out-edges
        // of the reached node lead back), within its colour.
        let mut reached: Vec<u32> = (0..n as u32)
            .map(|v| {
                if done[v as usize] == OPEN && colour[v as usize] == v {
                    v
                } else {
                    OPEN
                }
            })
            .collect();
        loop {
            let before = reached.clone();
            let prev = &before;
            let col = &colour;
            let changed = AtomicU32::new(0);
            for_blocks_mut(g, run, Side::Out, false, &mut reached, |b, chunk| {
                for v in b.lo..b.hi {
                    let i = (v - b.lo) as usize;
                    if chunk[i] != OPEN || col[v as usize] == OPEN {
                        continue;
                    }
                    for &u in b.of(v) {
                        if prev[u as usize] == col[v as usize] {
                            chunk[i] = col[v as usize];
                            changed.store(1, Relaxed);
                            break;
                        }
                    }
                }
            })?;
            if changed.load(Relaxed) == 0 {
                break;
            }
        }
        // Each root's component: the reached nodes; named by their smallest id.
        let mut least = vec![OPEN; n];
        for v in 0..n {
            let r = reached[v];
            if r != OPEN && done[v] == OPEN {
                least[r as usize] = least[r as usize].min(v as u32);
            }
        }
        for v in 0..n {
            let r = reached[v];
            if r != OPEN && done[v] == OPEN {
                done[v] = least[r as usize];
            }
        }
    }
    for c in done.iter_mut() {
        if *c == u32::MAX - 1 {
            *c = u32::MAX;
        }
    }
    Ok(done)
}

/// Sizes of the components of `comp` as (component id, size), by id, members only
/// (counted by sorting the ids: no hash map).
pub fn sizes(comp: &[u32]) -> Vec<(u32, u64)> {
    let mut ids: Vec<u32> = comp.iter().copied().filter(|&c| c != u32::MAX).collect();
    ids.sort_unstable();
    let mut sizes: Vec<(u32, u64)> = Vec::new();
    for c in ids {
        match sizes.last_mut() {
            Some((l, s)) if *l == c => *s += 1,
            _ => sizes.push((c, 1)),
        }
    }
    sizes
}
