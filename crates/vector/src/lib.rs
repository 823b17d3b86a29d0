//! Approximate nearest neighbours for Quiver's vector indexes: a hierarchical navigable
//! small world graph (HNSW, Malkov and Yashunin 2016), built on every core, written as
//! one file of flat arrays and searched in place from its mapping.
//!
//! Ours rather than a crate's: an index is a file of the database, opened mapped (in
//! O(1), paged in as searches touch it), loaded or offline like the segments beside it,
//! and its entries carry node ids the query engine filters during the search (deleted or
//! rewritten nodes are passed through, not returned). The HNSW crates keep their graphs
//! on the heap and reload them whole from their own dump formats.
//!
//! Layout of a file (little-endian, every section 8-byte aligned):
//!
//! | section | contents |
//! |---|---|
//! | header | 8 `u64`: magic, dims and metric, m and m0, entry and top level, entries, upper length, 0, 0 |
//! | ids | `u64` per entry: the node it indexes |
//! | vectors | `dims` `f32` per entry (unit length for cosine) |
//! | level 0 | `1 + m0` `u32` per entry: a count, then neighbours |
//! | upper at | `u32` per entry: where its upper levels start in `upper` (`u32::MAX`: none) |
//! | upper | per level above 0: `1 + m` `u32` (a count, then neighbours) |

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering as AtOrd};
use std::sync::Mutex;

/// How vectors are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Angle: vectors are stored at unit length and compared by dot product.
    Cosine,
    /// Squared Euclidean distance.
    Euclidean,
}

impl Metric {
    /// Neo4j's name (`vector.similarity_function`).
    pub fn parse(name: &str) -> Option<Metric> {
        match name.to_ascii_lowercase().as_str() {
            "cosine" => Some(Metric::Cosine),
            "euclidean" => Some(Metric::Euclidean),
            _ => None,
        }
    }

    fn code(self) -> u64 {
        match self {
            Metric::Cosine => 1,
            Metric::Euclidean => 2,
        }
    }

    /// Neo4j's score for a distance this index computed: `(1 + cos) / 2` for cosine,
    /// `1 / (1 + d²)` for Euclidean; higher is nearer.
    pub fn score(self, dist: f32) -> f64 {
        match self {
            Metric::Cosine => ((2.0 - dist as f64) / 2.0).clamp(0.0, 1.0),
            Metric::Euclidean => 1.0 / (1.0 + dist.max(0.0) as f64),
        }
    }

    /// `v` as this metric stores it (unit length for cosine); `None` for a vector with a
    /// value that is not finite, or of length 0 under cosine (no angle).
    pub fn prepare(self, v: &mut [f32]) -> bool {
        if v.iter().any(|x| !x.is_finite()) {
            return false;
        }
        if self == Metric::Cosine {
            let n = v
                .iter()
                .map(|x| (*x as f64) * (*x as f64))
                .sum::<f64>()
                .sqrt();
            if n == 0.0 || !n.is_finite() {
                return false;
            }
            for x in v.iter_mut() {
                *x = (*x as f64 / n) as f32;
            }
        }
        true
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a vector index file of this version, or a damaged one ({what})", path.display())]
    Corrupt { path: PathBuf, what: String },
    #[error("the vector index build was cancelled")]
    Cancelled,
}

/// How the graph is built: `m` neighbours a node keeps on upper levels (twice that on
/// level 0), and the candidates `ef_construction` looked at to choose them. The
/// defaults are Lucene's (Neo4j's vector index): 16 and 100.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub m: usize,
    pub ef_construction: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            m: 16,
            ef_construction: 100,
        }
    }
}

/// Bytes a build of `n` vectors of `dims` holds at its peak: the vectors, each node's
/// neighbour lists (with their locks and allocations) and the flat copy written out.
pub fn build_bytes(n: u64, dims: u64, p: &Params) -> u64 {
    let m0 = 2 * p.m as u64;
    n * (dims * 4 + 8 + 2 * (m0 + 1) * 4 + 96)
}

// ---------------------------------------------------------------------------------------
// Distances

type Kernel = fn(&[f32], &[f32]) -> f32;

/// The dot product (or, with `L2`, the squared distance) as the build's baseline
/// compiles it: sixteen lanes summed apart, so the loop vectorizes (floats are not
/// reassociated).
fn base_kernel<const L2: bool>(a: &[f32], b: &[f32]) -> f32 {
    let term = |x: f32, y: f32| if L2 { (x - y) * (x - y) } else { x * y };
    let mut acc = [0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for j in 0..16 {
            acc[j] += term(x[j], y[j]);
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += term(*x, *y);
    }
    s
}

fn cos_base(a: &[f32], b: &[f32]) -> f32 {
    1.0 - base_kernel::<false>(a, b)
}

/// The dot product (or, with `L2`, the squared distance) with AVX2 and FMA: four
/// accumulators of eight lanes (a 128-dimension vector in four steps), the tail scalar.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_kernel<const L2: bool>(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    // SAFETY (the loads): `i + 32 <= n` (then `i + 8 <= n`) bounds every load.
    while i + 32 <= n {
        for (j, acc) in acc.iter_mut().enumerate() {
            let x = _mm256_loadu_ps(pa.add(i + 8 * j));
            let y = _mm256_loadu_ps(pb.add(i + 8 * j));
            *acc = if L2 {
                let d = _mm256_sub_ps(x, y);
                _mm256_fmadd_ps(d, d, *acc)
            } else {
                _mm256_fmadd_ps(x, y, *acc)
            };
        }
        i += 32;
    }
    while i + 8 <= n {
        let x = _mm256_loadu_ps(pa.add(i));
        let y = _mm256_loadu_ps(pb.add(i));
        acc[0] = if L2 {
            let d = _mm256_sub_ps(x, y);
            _mm256_fmadd_ps(d, d, acc[0])
        } else {
            _mm256_fmadd_ps(x, y, acc[0])
        };
        i += 8;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    let h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
    let mut t = _mm_cvtss_f32(h);
    while i < n {
        let (x, y) = (*pa.add(i), *pb.add(i));
        t += if L2 { (x - y) * (x - y) } else { x * y };
        i += 1;
    }
    t
}

#[cfg(target_arch = "x86_64")]
fn cos_avx2(a: &[f32], b: &[f32]) -> f32 {
    // SAFETY: chosen by `kernel` only when the CPU runs AVX2 and FMA.
    1.0 - unsafe { fma_kernel::<false>(a, b) }
}

#[cfg(target_arch = "x86_64")]
fn l2_avx2(a: &[f32], b: &[f32]) -> f32 {
    // SAFETY: as for `cos_avx2`.
    unsafe { fma_kernel::<true>(a, b) }
}

/// The distance of `metric` (smaller is nearer), with AVX2 and FMA where the CPU has them.
fn kernel(metric: Metric) -> Kernel {
    #[cfg(target_arch = "x86_64")]
    if quiver_common::cpu::avx2() && std::arch::is_x86_feature_detected!("fma") {
        return match metric {
            Metric::Cosine => cos_avx2,
            Metric::Euclidean => l2_avx2,
        };
    }
    match metric {
        Metric::Cosine => cos_base,
        Metric::Euclidean => base_kernel::<true>,
    }
}

/// A distance ordered totally (NaN last).
#[derive(Debug, Clone, Copy, PartialEq)]
struct D(f32);

impl Eq for D {}
impl PartialOrd for D {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for D {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// Nodes seen by one search.
#[derive(Default)]
struct Seen {
    set: hashbrown::HashSet<u32, foldhash::fast::FixedState>,
}

impl Seen {
    fn clear(&mut self) {
        self.set.clear();
    }
    /// True the first time `x` is met.
    #[inline]
    fn first(&mut self, x: u32) -> bool {
        self.set.insert(x)
    }
}

/// Scratch of a search, reused.
#[derive(Default)]
struct Scratch {
    seen: Seen,
    nbrs: Vec<u32>,
}

/// The level of entry `i`: `floor(-ln(u) / ln(m))` for a uniform `u` drawn from `i`
/// (the same graph shape on every run), at most 15.
fn level_of(i: u64, m: usize) -> u8 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let u = ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    let l = -u.ln() / (m as f64).ln();
    l.floor().min(15.0) as u8
}

/// Where a search reads neighbour lists from: the graph being built, or a file's.
trait Links {
    fn vector(&self, i: u32) -> &[f32];
    /// Calls `f` with the neighbours of `i` at `level` (under the list's lock while
    /// building).
    fn with_neighbours<R>(&self, i: u32, level: u8, f: impl FnOnce(&[u32]) -> R) -> R;
    fn len(&self) -> usize;
}

/// Asks the CPU to start loading the first line of `v` (a vector about to be compared:
/// neighbours are scattered over memory, and each is a miss otherwise; the hardware
/// prefetcher follows on through the rest, and asking for more lines stalls on the
/// fill buffers).
#[inline(always)]
fn prefetch(v: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it reads nothing and cannot fault.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch(v.as_ptr() as *const i8, _MM_HINT_T0);
    }
}

/// Greedy descent at `level` from `cur` (distance `d`): the nearest node it reaches.
fn greedy<L: Links>(
    g: &L,
    k: Kernel,
    q: &[f32],
    mut cur: u32,
    mut d: f32,
    level: u8,
    s: &mut Scratch,
) -> (u32, f32) {
    loop {
        let mut moved = false;
        s.nbrs.clear();
        g.with_neighbours(cur, level, |l| s.nbrs.extend(l.iter().copied()));
        for &nb in &s.nbrs {
            if nb as usize >= g.len() {
                continue; // (a damaged file: skipped, not followed)
            }
            let dn = k(q, g.vector(nb));
            if dn < d {
                d = dn;
                cur = nb;
                moved = true;
            }
        }
        if !moved {
            return (cur, d);
        }
    }
}

/// The `ef` nearest of `q` at `level` reachable from `eps`, nearest first, among those
/// `accept` takes (all are walked through).
#[allow(clippy::too_many_arguments)]
fn search_layer<L: Links>(
    g: &L,
    k: Kernel,
    q: &[f32],
    eps: &[(f32, u32)],
    ef: usize,
    level: u8,
    s: &mut Scratch,
    accept: &dyn Fn(u32) -> bool,
) -> Vec<(f32, u32)> {
    s.seen.clear();
    let mut cands: BinaryHeap<Reverse<(D, u32)>> = BinaryHeap::with_capacity(ef * 4);
    let mut best: BinaryHeap<(D, u32)> = BinaryHeap::with_capacity(ef + 1);
    for &(d, e) in eps {
        if s.seen.first(e) {
            cands.push(Reverse((D(d), e)));
            if accept(e) {
                best.push((D(d), e));
            }
        }
    }
    while best.len() > ef {
        best.pop();
    }
    while let Some(Reverse((D(d), c))) = cands.pop() {
        if best.len() >= ef && best.peek().is_some_and(|w| d > w.0 .0) {
            break;
        }
        // The neighbours not seen yet (their vectors fetched meanwhile), then compared.
        s.nbrs.clear();
        let (seen, nbrs) = (&mut s.seen, &mut s.nbrs);
        g.with_neighbours(c, level, |l| {
            for &nb in l {
                if (nb as usize) < g.len() && seen.first(nb) {
                    prefetch(g.vector(nb));
                    nbrs.push(nb);
                }
            }
        });
        for i in 0..s.nbrs.len() {
            let nb = s.nbrs[i];
            let dn = k(q, g.vector(nb));
            let worst = best.peek().map_or(f32::INFINITY, |w| w.0 .0);
            if best.len() < ef || dn < worst {
                cands.push(Reverse((D(dn), nb)));
                if accept(nb) {
                    best.push((D(dn), nb));
                    if best.len() > ef {
                        best.pop();
                    }
                }
            }
        }
    }
    best.into_sorted_vec()
        .into_iter()
        .map(|(D(d), e)| (d, e))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Building

struct Build<'v> {
    dims: usize,
    m: usize,
    /// Candidates of a construction search.
    efc: usize,
    m0: usize,
    k: Kernel,
    vecs: &'v [f32],
    levels: Vec<u8>,
    /// Level 0, flat: `1 + m0` words an entry, the first its neighbour count with
    /// [`LOCKED`] while a thread reads or changes the row, then the neighbours. One
    /// address computed from the entry, not three pointers followed (a `Mutex<Vec>` per
    /// list made each visit three cache misses: 25.8% of the build's time on the lock,
    /// 21.9% on the list).
    l0: Vec<AtomicU32>,
    /// Per entry, its levels above 0 (few entries have any).
    upper: Vec<Box<[Mutex<Vec<u32>>]>>,
    /// The entry point and its level.
    entry: Mutex<(u32, u8)>,
}

/// The bit of a level-0 row's first word held while the row is read or changed.
const LOCKED: u32 = 1 << 31;
/// Most neighbours on level 0 (`m` at most 64).
const MAX_M0: usize = 128;

/// A level-0 row, locked: its neighbour count; the lock is given back with the row's
/// new count by [`Row::release`].
struct Row<'a> {
    words: &'a [AtomicU32],
    count: usize,
}

impl Row<'_> {
    fn get(&self, j: usize) -> u32 {
        self.words[1 + j].load(AtOrd::Relaxed)
    }
    fn set(&mut self, j: usize, v: u32) {
        self.words[1 + j].store(v, AtOrd::Relaxed);
    }
    fn release(self, count: usize) {
        self.words[0].store(count as u32, AtOrd::Release);
    }
}

impl Links for Build<'_> {
    #[inline]
    fn vector(&self, i: u32) -> &[f32] {
        let i = i as usize;
        &self.vecs[i * self.dims..(i + 1) * self.dims]
    }
    fn with_neighbours<R>(&self, i: u32, level: u8, f: impl FnOnce(&[u32]) -> R) -> R {
        if level == 0 {
            let row = self.lock0(i);
            let mut buf = [0u32; MAX_M0];
            let c = row.count;
            for (j, b) in buf[..c].iter_mut().enumerate() {
                *b = row.get(j);
            }
            row.release(c);
            return f(&buf[..c]);
        }
        match self.upper[i as usize].get(level as usize - 1) {
            Some(l) => f(&l.lock().unwrap_or_else(|e| e.into_inner())),
            None => f(&[]),
        }
    }
    fn len(&self) -> usize {
        self.levels.len()
    }
}

impl Build<'_> {
    /// Entry `i`'s level-0 row, locked (a spin: rows are held for a few dozen loads, or
    /// one shrink).
    fn lock0(&self, i: u32) -> Row<'_> {
        let w = self.m0 + 1;
        let words = &self.l0[i as usize * w..(i as usize + 1) * w];
        loop {
            let c = words[0].load(AtOrd::Relaxed);
            if c & LOCKED == 0
                && words[0]
                    .compare_exchange_weak(c, c | LOCKED, AtOrd::Acquire, AtOrd::Relaxed)
                    .is_ok()
            {
                return Row {
                    words,
                    count: c as usize,
                };
            }
            std::hint::spin_loop();
        }
    }

    /// Makes `chosen` the neighbours of `i` at `level`.
    fn set_links(&self, i: u32, level: u8, chosen: &[u32]) {
        if level == 0 {
            let mut row = self.lock0(i);
            for (j, &c) in chosen.iter().enumerate() {
                row.set(j, c);
            }
            row.release(chosen.len());
        } else {
            *self.upper[i as usize][level as usize - 1]
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = chosen.to_vec();
        }
    }

    /// Links `i` from `c` at `level`: appended while `c` has room, else `c` keeps the
    /// most diverse of its neighbours and `i`.
    fn link_back(&self, c: u32, i: u32, level: u8) {
        let v = self.vector(c);
        let shrink = |old: &mut dyn Iterator<Item = u32>, cap: usize| -> Vec<u32> {
            let mut all: Vec<(f32, u32)> = old
                .chain(std::iter::once(i))
                .map(|x| ((self.k)(v, self.vector(x)), x))
                .collect();
            all.sort_by(|a, b| a.0.total_cmp(&b.0));
            self.select(&all, cap)
        };
        if level == 0 {
            let mut row = self.lock0(c);
            let n = row.count;
            if n < self.m0 {
                row.set(n, i);
                row.release(n + 1);
                return;
            }
            let kept = shrink(&mut (0..n).map(|j| row.get(j)), self.m0);
            for (j, &x) in kept.iter().enumerate() {
                row.set(j, x);
            }
            row.release(kept.len());
            return;
        }
        let mut g = self.upper[c as usize][level as usize - 1]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if g.len() < self.m {
            g.push(i);
        } else {
            *g = shrink(&mut g.iter().copied(), self.m);
        }
    }

    /// The diversity heuristic (the paper's algorithm 4): of `cands` (nearest first, by
    /// their distance to the node being linked), those nearer to it than to any kept
    /// before them, at most `m`.
    fn select(&self, cands: &[(f32, u32)], m: usize) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::with_capacity(m);
        for &(d, c) in cands {
            if out.len() >= m {
                break;
            }
            let v = self.vector(c);
            if out.iter().all(|&r| (self.k)(v, self.vector(r)) >= d) {
                out.push(c);
            }
        }
        out
    }

    fn insert(&self, i: u32, s: &mut Scratch) {
        let l = self.levels[i as usize];
        let (ep, top) = *self.entry.lock().unwrap_or_else(|e| e.into_inner());
        if ep == i {
            return;
        }
        let q = self.vector(i);
        let mut cur = ep;
        let mut d = (self.k)(q, self.vector(ep));
        let mut lc = top;
        while lc > l {
            (cur, d) = greedy(self, self.k, q, cur, d, lc, s);
            lc -= 1;
        }
        let mut eps = vec![(d, cur)];
        for lc in (0..=l.min(top)).rev() {
            let mut w = search_layer(self, self.k, q, &eps, self.efc, lc, s, &|_| true);
            w.retain(|&(_, e)| e != i);
            let chosen = self.select(&w, self.m);
            self.set_links(i, lc, &chosen);
            for &c in &chosen {
                self.link_back(c, i, lc);
            }
            eps = w;
        }
        if l > top {
            let mut e = self.entry.lock().unwrap_or_else(|e| e.into_inner());
            if l > e.1 {
                *e = (i, l);
            }
        }
    }
}

/// A built graph, flat, ready to be written.
pub struct Built {
    dims: usize,
    metric: Metric,
    m: usize,
    m0: usize,
    entry: u32,
    top: u8,
    ids: Vec<u64>,
    vecs: Vec<f32>,
    l0: Vec<u32>,
    upper_at: Vec<u32>,
    upper: Vec<u32>,
}

/// The node of an entry that no longer stands for one (its node was deleted or its
/// vector changed since the graph was built): searches walk through it, never return it.
pub const DEAD: u64 = u64::MAX;

/// Builds the graph of `ids` (entry `i` is node `ids[i]`) and their `vecs` (`dims`
/// each, already [`Metric::prepare`]d), inserting on every core of the current rayon
/// pool. `cancel` stops it between insertions.
pub fn build(
    dims: usize,
    metric: Metric,
    ids: Vec<u64>,
    vecs: Vec<f32>,
    p: &Params,
    cancel: Option<&AtomicBool>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Built, VectorError> {
    grow(None, &[], dims, metric, ids, vecs, p, cancel, progress)
}

/// The graph of `old` with `ids` and `vecs` inserted after its entries, and its entries
/// `dead` marked [`DEAD`] (kept for searches to walk through): what a checkpoint's
/// writes ask of a built graph, at the cost of copying it and inserting the new
/// vectors, not of building it all again. Built with `old`'s `m`.
#[allow(clippy::too_many_arguments)]
pub fn extend(
    old: &VectorIndex,
    dead: &[u32],
    ids: Vec<u64>,
    vecs: Vec<f32>,
    p: &Params,
    cancel: Option<&AtomicBool>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Built, VectorError> {
    let p = Params { m: old.m, ..*p };
    grow(
        Some(old),
        dead,
        old.dims,
        old.metric,
        ids,
        vecs,
        &p,
        cancel,
        progress,
    )
}

#[allow(clippy::too_many_arguments)]
fn grow(
    old: Option<&VectorIndex>,
    dead: &[u32],
    dims: usize,
    metric: Metric,
    mut ids: Vec<u64>,
    mut vecs: Vec<f32>,
    p: &Params,
    cancel: Option<&AtomicBool>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Built, VectorError> {
    use rayon::prelude::*;
    assert_eq!(
        vecs.len(),
        ids.len() * dims,
        "vectors of {dims} numbers for each id"
    );
    let m = p.m.clamp(2, 64);
    let m0 = 2 * m;
    // The old graph's entries first, as they were.
    let n_old = old.map_or(0, |o| o.n);
    let mut levels: Vec<u8> = Vec::new();
    let mut upper: Vec<Box<[Mutex<Vec<u32>>]>> = Vec::new();
    let mut l0: Vec<AtomicU32> = Vec::new();
    let mut entry = (0u32, 0u8);
    if let Some(o) = old {
        let v = o.view();
        let mut all_ids: Vec<u64> = bytemuck::cast_slice::<u8, u64>(o.section(0)).to_vec();
        for &d in dead {
            if let Some(x) = all_ids.get_mut(d as usize) {
                *x = DEAD;
            }
        }
        all_ids.append(&mut ids);
        ids = all_ids;
        let mut all_vecs = v.vecs.to_vec();
        all_vecs.append(&mut vecs);
        vecs = all_vecs;
        // Each row's count as its file gives it, bounded by the row (a damaged file
        // cannot make a row read past itself).
        l0.extend(v.l0.iter().enumerate().map(|(j, &w)| {
            let w = if j % (m0 + 1) == 0 {
                (w & !LOCKED).min(m0 as u32)
            } else {
                w
            };
            AtomicU32::new(w)
        }));
        for i in 0..n_old {
            let at = v.upper_at[i];
            // Levels from where the next entry's upper levels start.
            let l = if at == u32::MAX {
                0
            } else {
                let end = v.upper_at[i + 1..]
                    .iter()
                    .find(|&&x| x != u32::MAX)
                    .map_or(v.upper.len(), |&x| x as usize);
                ((end.saturating_sub(at as usize)) / (m + 1)).min(15)
            };
            levels.push(l as u8);
            upper.push(
                (1..=l)
                    .map(|lc| {
                        let mut out = Vec::with_capacity(m);
                        v.with_neighbours(i as u32, lc as u8, |x| out.extend_from_slice(x));
                        Mutex::new(out)
                    })
                    .collect(),
            );
        }
        entry = (o.entry, o.top);
    }
    let n = ids.len();
    for i in n_old..n {
        let l = level_of(i as u64, m);
        levels.push(l);
        upper.push(
            (1..=l as usize)
                .map(|_| Mutex::new(Vec::with_capacity(m)))
                .collect(),
        );
    }
    l0.extend((0..(n - n_old) * (m0 + 1)).map(|_| AtomicU32::new(0)));
    let b = Build {
        dims,
        m,
        efc: p.ef_construction.max(m),
        m0,
        k: kernel(metric),
        vecs: &vecs,
        levels,
        l0,
        upper,
        entry: Mutex::new(entry),
    };
    if n > n_old {
        let mut serial = n_old;
        if n_old == 0 {
            *b.entry.lock().unwrap_or_else(|e| e.into_inner()) = (0, b.levels[0]);
            // The first thousand one by one: the graph's top forms before threads race
            // through it.
            serial = n.min(1024);
            let mut s = Scratch::default();
            for i in 1..serial {
                b.insert(i as u32, &mut s);
            }
        }
        let done = AtomicUsize::new(serial);
        (serial..n)
            .into_par_iter()
            .with_min_len(256)
            .try_for_each_init(Scratch::default, |s, i| {
                if cancel.is_some_and(|c| c.load(AtOrd::Relaxed)) {
                    return Err(VectorError::Cancelled);
                }
                b.insert(i as u32, s);
                let d = done.fetch_add(1, AtOrd::Relaxed) + 1;
                #[allow(clippy::manual_is_multiple_of)] // (1.87; the MSRV is 1.85)
                if d % 65536 == 0 {
                    progress(d as u64);
                }
                Ok(())
            })?;
    }
    // Flatten: level 0 as it is (every lock released: the counts are plain), the upper
    // levels packed.
    let l0: Vec<u32> = b.l0.iter().map(|w| w.load(AtOrd::Relaxed)).collect();
    let mut upper_at = vec![u32::MAX; n];
    let mut upper = Vec::new();
    for (i, ls) in b.upper.iter().enumerate() {
        if ls.is_empty() {
            continue;
        }
        upper_at[i] = upper.len() as u32;
        for l in ls.iter() {
            let v = l.lock().unwrap_or_else(|e| e.into_inner());
            upper.push(v.len() as u32);
            upper.extend_from_slice(&v);
            upper.extend(std::iter::repeat_n(0, m - v.len()));
        }
    }
    let (entry, top) = *b.entry.lock().unwrap_or_else(|e| e.into_inner());
    drop(b);
    Ok(Built {
        dims,
        metric,
        m,
        m0,
        entry,
        top,
        ids,
        vecs,
        l0,
        upper_at,
        upper,
    })
}

const MAGIC: u64 = u64::from_le_bytes(*b"QVHNSW01");

impl Built {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Writes the graph to `path` (synced); its size in bytes.
    pub fn write(&self, path: &Path) -> Result<u64, VectorError> {
        let io = |source| VectorError::Io {
            path: path.to_path_buf(),
            source,
        };
        let f = std::fs::File::create(path).map_err(io)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        let header: [u64; 8] = [
            MAGIC,
            self.dims as u64 | self.metric.code() << 32,
            self.m as u64 | (self.m0 as u64) << 32,
            self.entry as u64 | (self.top as u64) << 32,
            self.ids.len() as u64,
            self.upper.len() as u64,
            0,
            0,
        ];
        let mut bytes = 0u64;
        let mut put =
            |w: &mut std::io::BufWriter<std::fs::File>, b: &[u8]| -> std::io::Result<()> {
                w.write_all(b)?;
                let pad = (8 - b.len() % 8) % 8;
                w.write_all(&[0u8; 8][..pad])?;
                bytes += (b.len() + pad) as u64;
                Ok(())
            };
        put(&mut w, bytemuck::cast_slice(&header)).map_err(io)?;
        put(&mut w, bytemuck::cast_slice(&self.ids)).map_err(io)?;
        put(&mut w, bytemuck::cast_slice(&self.vecs)).map_err(io)?;
        put(&mut w, bytemuck::cast_slice(&self.l0)).map_err(io)?;
        put(&mut w, bytemuck::cast_slice(&self.upper_at)).map_err(io)?;
        put(&mut w, bytemuck::cast_slice(&self.upper)).map_err(io)?;
        let f = w.into_inner().map_err(|e| io(e.into_error()))?;
        f.sync_all().map_err(io)?;
        Ok(bytes)
    }
}

// ---------------------------------------------------------------------------------------
// Reading

enum Bytes {
    Mapped(memmap2::Mmap),
    /// Read whole (`u64`s: 8-byte aligned).
    Owned(Vec<u64>),
}

/// A vector index file, open.
pub struct VectorIndex {
    bytes: Bytes,
    dims: usize,
    metric: Metric,
    m: usize,
    m0: usize,
    entry: u32,
    top: u8,
    n: usize,
    /// Byte offsets of the sections after the header.
    at: [usize; 5],
    lens: [usize; 5],
    k: Kernel,
}

/// A view of an open index's arrays.
struct View<'a> {
    ix: &'a VectorIndex,
    vecs: &'a [f32],
    l0: &'a [u32],
    upper_at: &'a [u32],
    upper: &'a [u32],
}

impl Links for View<'_> {
    #[inline]
    fn vector(&self, i: u32) -> &[f32] {
        let d = self.ix.dims;
        &self.vecs[i as usize * d..(i as usize + 1) * d]
    }
    fn with_neighbours<R>(&self, i: u32, level: u8, f: impl FnOnce(&[u32]) -> R) -> R {
        let row: &[u32] = if level == 0 {
            let w = self.ix.m0 + 1;
            &self.l0[i as usize * w..(i as usize + 1) * w]
        } else {
            let at = self.upper_at[i as usize];
            let w = self.ix.m + 1;
            let s = at as usize + (level as usize - 1) * w;
            match self.upper.get(s..s + w) {
                Some(r) if at != u32::MAX => r,
                _ => return f(&[]),
            }
        };
        let c = (row[0] as usize).min(row.len() - 1);
        f(&row[1..1 + c])
    }
    fn len(&self) -> usize {
        self.ix.n
    }
}

impl VectorIndex {
    /// Opens the file at `path`: mapped (`mapped`, paged in as searches touch it) or
    /// read whole.
    pub fn open(path: &Path, mapped: bool) -> Result<VectorIndex, VectorError> {
        let io = |source| VectorError::Io {
            path: path.to_path_buf(),
            source,
        };
        let bad = |what: &str| VectorError::Corrupt {
            path: path.to_path_buf(),
            what: what.to_string(),
        };
        let f = std::fs::File::open(path).map_err(io)?;
        let bytes = if mapped {
            // SAFETY: the file is one of the database's immutable files (written once
            // in its generation's folder, never changed after it was published).
            Bytes::Mapped(unsafe { memmap2::Mmap::map(&f) }.map_err(io)?)
        } else {
            let len = f.metadata().map_err(io)?.len() as usize;
            let mut v = vec![0u64; len.div_ceil(8)];
            use std::io::Read;
            let b: &mut [u8] = bytemuck::cast_slice_mut(&mut v);
            (&f).read_exact(&mut b[..len]).map_err(io)?;
            v.truncate(len / 8);
            Bytes::Owned(v)
        };
        let raw: &[u8] = match &bytes {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => bytemuck::cast_slice(v),
        };
        if raw.len() < 64 {
            return Err(bad("shorter than its header"));
        }
        let h: Vec<u64> = raw[..64]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        if h[0] != MAGIC {
            return Err(bad("magic"));
        }
        let dims = (h[1] & 0xFFFF_FFFF) as usize;
        let metric = match h[1] >> 32 {
            1 => Metric::Cosine,
            2 => Metric::Euclidean,
            _ => return Err(bad("metric")),
        };
        let (m, m0) = ((h[2] & 0xFFFF_FFFF) as usize, (h[2] >> 32) as usize);
        let (entry, top) = ((h[3] & 0xFFFF_FFFF) as u32, (h[3] >> 32) as u8);
        let (n, upper_len) = (h[4] as usize, h[5] as usize);
        // (The graphs written here have `m0` twice `m`, `m` at most 64: a search or an
        // extension reads rows of that width.)
        if dims == 0 || !(2..=64).contains(&m) || m0 != 2 * m || (n > 0 && entry as usize >= n) {
            return Err(bad("header"));
        }
        let round = |b: usize| b.div_ceil(8) * 8;
        let lens = [n * 8, n * dims * 4, n * (m0 + 1) * 4, n * 4, upper_len * 4];
        let mut at = [0usize; 5];
        let mut off = 64;
        for (a, l) in at.iter_mut().zip(lens) {
            *a = off;
            off += round(l);
        }
        if raw.len() < off {
            return Err(bad("shorter than its sections"));
        }
        Ok(VectorIndex {
            bytes,
            dims,
            metric,
            m,
            m0,
            entry,
            top,
            n,
            at,
            lens,
            k: kernel(metric),
        })
    }

    fn raw(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => bytemuck::cast_slice(v),
        }
    }

    fn section(&self, s: usize) -> &[u8] {
        &self.raw()[self.at[s]..self.at[s] + self.lens[s]]
    }

    fn view(&self) -> View<'_> {
        View {
            ix: self,
            vecs: bytemuck::cast_slice(self.section(1)),
            l0: bytemuck::cast_slice(self.section(2)),
            upper_at: bytemuck::cast_slice(self.section(3)),
            upper: bytemuck::cast_slice(self.section(4)),
        }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// The node of entry `i`.
    pub fn id(&self, i: u32) -> u64 {
        let ids: &[u64] = bytemuck::cast_slice(self.section(0));
        ids[i as usize]
    }

    /// Bytes of the file.
    pub fn bytes(&self) -> u64 {
        self.raw().len() as u64
    }

    /// The `k` entries nearest `q` (prepared for the metric) among those whose node
    /// `accept` takes, nearest first, as (distance, node); `ef` (at least `k`) candidates
    /// are kept while searching: more finds more of the true nearest, slower.
    pub fn search(
        &self,
        q: &[f32],
        k: usize,
        ef: usize,
        accept: &dyn Fn(u64) -> bool,
    ) -> Vec<(f32, u64)> {
        if self.n == 0 || k == 0 || q.len() != self.dims {
            return Vec::new();
        }
        let v = self.view();
        let mut s = Scratch::default();
        let mut cur = self.entry;
        let mut d = (self.k)(q, v.vector(cur));
        let mut lc = self.top;
        while lc > 0 {
            (cur, d) = greedy(&v, self.k, q, cur, d, lc, &mut s);
            lc -= 1;
        }
        let ids: &[u64] = bytemuck::cast_slice(self.section(0));
        let found = search_layer(&v, self.k, q, &[(d, cur)], ef.max(k), 0, &mut s, &|e| {
            ids[e as usize] != DEAD && accept(ids[e as usize])
        });
        found
            .into_iter()
            .take(k)
            .map(|(d, e)| (d, ids[e as usize]))
            .collect()
    }

    /// The distance of this index's metric between `a` and `b` (both prepared).
    pub fn distance(&self, a: &[f32], b: &[f32]) -> f32 {
        (self.k)(a, b)
    }

    /// Entries that stand for a node (not [`DEAD`]).
    pub fn live(&self) -> usize {
        let ids: &[u64] = bytemuck::cast_slice(self.section(0));
        ids.iter().filter(|&&x| x != DEAD).count()
    }

    /// The vector of entry `i` (as prepared when it was inserted).
    pub fn vector(&self, i: u32) -> &[f32] {
        let d = self.dims;
        let vecs: &[f32] = bytemuck::cast_slice(self.section(1));
        &vecs[i as usize * d..(i as usize + 1) * d]
    }

    /// Every entry's node ([`DEAD`] for one that stands for none any more) and vector,
    /// in entry order.
    pub fn entries(&self) -> impl Iterator<Item = (u64, &[f32])> + '_ {
        let ids: &[u64] = bytemuck::cast_slice(self.section(0));
        let vecs: &[f32] = bytemuck::cast_slice(self.section(1));
        ids.iter().copied().zip(vecs.chunks_exact(self.dims.max(1)))
    }

    /// The graph's node count and neighbour slots (for `SHOW INDEXES`-style details).
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.n, self.m, self.m0)
    }
}

/// The distance of `metric` between two prepared vectors (as an index computes it).
pub fn distance(metric: Metric, a: &[f32], b: &[f32]) -> f32 {
    kernel(metric)(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn data(n: usize, dims: usize, seed: u64) -> Vec<f32> {
        // Clustered, as embeddings are: 50 centres (the same for every seed: queries
        // come from the data's distribution), points around them.
        let mut c = rand_pcg::Pcg64::seed_from_u64(99);
        let centres: Vec<Vec<f32>> = (0..50)
            .map(|_| (0..dims).map(|_| c.random_range(-1.0..1.0)).collect())
            .collect();
        let mut r = rand_pcg::Pcg64::seed_from_u64(seed);
        (0..n)
            .flat_map(|_| {
                let c = &centres[r.random_range(0..centres.len())];
                c.iter()
                    .map(|x| x + r.random_range(-0.3..0.3))
                    .collect::<Vec<f32>>()
            })
            .collect()
    }

    /// Recall@10 of searches for 100 vectors (half the nodes filtered out when `filt`).
    fn recall(metric: Metric, ef: usize, filt: bool, clustered: bool) -> f64 {
        let (n, dims) = (20_000, 32);
        let make = |n, seed| {
            if clustered {
                data(n, dims, seed)
            } else {
                let mut r = rand_pcg::Pcg64::seed_from_u64(seed);
                (0..n * dims).map(|_| r.random_range(-1.0..1.0)).collect()
            }
        };
        let mut vecs = make(n, 1);
        for v in vecs.chunks_exact_mut(dims) {
            assert!(metric.prepare(v));
        }
        let ids: Vec<u64> = (0..n as u64).map(|i| i * 3 + 7).collect();
        let built = build(
            dims,
            metric,
            ids.clone(),
            vecs.clone(),
            &Params::default(),
            None,
            &|_| {},
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.hnsw");
        built.write(&path).unwrap();
        let mut found = 0;
        let mut total = 0;
        for mapped in [true, false] {
            let ix = VectorIndex::open(&path, mapped).unwrap();
            assert_eq!(ix.len(), n);
            let mut qs = make(100, 2);
            for q in qs.chunks_exact_mut(dims) {
                assert!(metric.prepare(q));
                // Odd nodes only: the filter passes through the others (so half the
                // candidates count: twice the default's).
                let got = ix.search(q, 10, ef, &|id| !filt || id % 2 == 1);
                assert!(got.iter().all(|(_, id)| !filt || id % 2 == 1));
                assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
                let mut exact: Vec<(f32, u64)> = vecs
                    .chunks_exact(dims)
                    .zip(&ids)
                    .filter(|(_, id)| !filt || *id % 2 == 1)
                    .map(|(v, &id)| (distance(metric, q, v), id))
                    .collect();
                exact.sort_by(|a, b| a.0.total_cmp(&b.0));
                let truth: Vec<u64> = exact.iter().take(10).map(|x| x.1).collect();
                found += got.iter().filter(|(_, id)| truth.contains(id)).count();
                total += 10;
            }
        }
        found as f64 / total as f64
    }

    #[test]
    fn cosine_search_finds_the_true_neighbours() {
        let r = recall(Metric::Cosine, 100, true, true);
        assert!(r >= 0.97, "recall@10 {r}");
    }

    #[test]
    fn euclidean_search_finds_the_true_neighbours() {
        let r = recall(Metric::Euclidean, 100, true, true);
        assert!(r >= 0.97, "recall@10 {r}");
    }

    /// Uniform random vectors (no structure to exploit: the hard case): 0.98 measured.
    #[test]
    fn random_vectors_are_found_too() {
        let r = recall(Metric::Euclidean, 100, false, false);
        assert!(r >= 0.95, "recall@10 {r}");
    }

    /// A graph extended with new vectors and with entries marked dead finds the live
    /// ones as a graph built over them from scratch does, and never returns the dead.
    #[test]
    fn extended_graphs_find_new_vectors_and_drop_dead_ones() {
        let (n, dims) = (10_000, 24);
        let metric = Metric::Cosine;
        let mut vecs = data(2 * n, dims, 4);
        for v in vecs.chunks_exact_mut(dims) {
            assert!(metric.prepare(v));
        }
        let dir = tempfile::tempdir().unwrap();
        let (p1, p2) = (dir.path().join("a.hnsw"), dir.path().join("b.hnsw"));
        let ids: Vec<u64> = (0..n as u64).collect();
        build(
            dims,
            metric,
            ids,
            vecs[..n * dims].to_vec(),
            &Params::default(),
            None,
            &|_| {},
        )
        .unwrap()
        .write(&p1)
        .unwrap();
        let old = VectorIndex::open(&p1, true).unwrap();
        // Every third old entry dies; the second half arrives.
        let dead: Vec<u32> = (0..n as u32).filter(|i| i % 3 == 0).collect();
        let new_ids: Vec<u64> = (n as u64..2 * n as u64).collect();
        extend(
            &old,
            &dead,
            new_ids,
            vecs[n * dims..].to_vec(),
            &Params::default(),
            None,
            &|_| {},
        )
        .unwrap()
        .write(&p2)
        .unwrap();
        let ix = VectorIndex::open(&p2, true).unwrap();
        assert_eq!(ix.len(), 2 * n);
        let live = |id: u64| id >= n as u64 || id % 3 != 0;
        let mut qs = data(100, dims, 5);
        let (mut found, mut total) = (0, 0);
        for q in qs.chunks_exact_mut(dims) {
            metric.prepare(q);
            let got = ix.search(q, 10, 100, &|_| true);
            assert!(got.iter().all(|&(_, id)| id != DEAD && live(id)), "{got:?}");
            let mut exact: Vec<(f32, u64)> = vecs
                .chunks_exact(dims)
                .enumerate()
                .filter(|&(i, _)| live(i as u64))
                .map(|(i, v)| (distance(metric, q, v), i as u64))
                .collect();
            exact.sort_by(|a, b| a.0.total_cmp(&b.0));
            let truth: Vec<u64> = exact.iter().take(10).map(|x| x.1).collect();
            found += got.iter().filter(|(_, id)| truth.contains(id)).count();
            total += 10;
        }
        let r = found as f64 / total as f64;
        assert!(r >= 0.97, "recall@10 after extending: {r}");
    }

    /// The baseline kernels (a CPU without AVX2) and the FMA ones give one distance.
    #[test]
    fn kernels_agree() {
        let mut r = rand_pcg::Pcg64::seed_from_u64(6);
        for dims in [1, 7, 16, 33, 128, 130] {
            let a: Vec<f32> = (0..dims).map(|_| r.random_range(-1.0..1.0)).collect();
            let b: Vec<f32> = (0..dims).map(|_| r.random_range(-1.0..1.0)).collect();
            let dot: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            let l2: f32 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
            assert!((base_kernel::<false>(&a, &b) - dot).abs() < 1e-4);
            assert!((base_kernel::<true>(&a, &b) - l2).abs() < 1e-4);
            assert!((distance(Metric::Cosine, &a, &b) - (1.0 - dot)).abs() < 1e-4);
            assert!((distance(Metric::Euclidean, &a, &b) - l2).abs() < 1e-4);
        }
    }

    #[test]
    fn damaged_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.hnsw");
        std::fs::write(&path, b"not an index").unwrap();
        assert!(matches!(
            VectorIndex::open(&path, true),
            Err(VectorError::Corrupt { .. })
        ));
        let mut vecs = data(100, 8, 3);
        for v in vecs.chunks_exact_mut(8) {
            Metric::Euclidean.prepare(v);
        }
        let b = build(
            8,
            Metric::Euclidean,
            (0..100).collect(),
            vecs,
            &Params::default(),
            None,
            &|_| {},
        )
        .unwrap();
        b.write(&path).unwrap();
        let full = std::fs::read(&path).unwrap();
        std::fs::write(&path, &full[..full.len() / 2]).unwrap();
        assert!(matches!(
            VectorIndex::open(&path, false),
            Err(VectorError::Corrupt { .. })
        ));
        // Links past the entries (damaged in place) are skipped, not followed.
        let mut bad = full.clone();
        let l0_at = 64 + 100 * 8 + 100 * 8 * 4;
        bad[l0_at + 4..l0_at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&path, &bad).unwrap();
        let ix = VectorIndex::open(&path, true).unwrap();
        assert_eq!(ix.search(&[0.0; 8], 5, 20, &|_| true).len(), 5);
    }

    #[test]
    fn empty_and_tiny_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.hnsw");
        let b = build(
            4,
            Metric::Cosine,
            vec![],
            vec![],
            &Params::default(),
            None,
            &|_| {},
        )
        .unwrap();
        b.write(&path).unwrap();
        let ix = VectorIndex::open(&path, true).unwrap();
        assert!(ix
            .search(&[1.0, 0.0, 0.0, 0.0], 3, 10, &|_| true)
            .is_empty());
        let mut v = vec![1.0, 0.0, 0.0, 0.0];
        Metric::Cosine.prepare(&mut v);
        let b = build(
            4,
            Metric::Cosine,
            vec![42],
            v.clone(),
            &Params::default(),
            None,
            &|_| {},
        )
        .unwrap();
        b.write(&path).unwrap();
        let ix = VectorIndex::open(&path, true).unwrap();
        let got = ix.search(&v, 3, 10, &|_| true);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, 42);
        assert!((Metric::Cosine.score(got[0].0) - 1.0).abs() < 1e-6);
    }
}
