//! Relationships of one type on their way to CSR: an append-only edge store (memory blocks
//! under a grant, compressed when the grant is refused, spilling to a temp file when
//! it is refused again), degree counts, and the CSR build by partitioned counting sort.
//!
//! Under memory pressure full blocks are sealed: frames of `FRAME` edges, each side a frame of reference
//! (the frame's smallest id, then every id's distance from it bit-packed at the width
//! the largest needs). Input sorted by source packs its sources in a few bits, its
//! targets in the bits of the node count: the social graph's 30.6M follows take 3.3
//! bytes each instead of 8, so at a 256 MiB budget they stay in memory, where they had
//! to be written to the spill file and read back once per pass (the write alone was a
//! single-threaded 0.7 s of the import).
//!
//! Why counting sort and not a general external sort: degrees are known after reading, so
//! each edge's final place is known too. A node range whose edges fit in memory is filled
//! by one sequential pass over the store (memory or spill file), its per-node lists are
//! sorted in parallel, and it is written out; a graph larger than memory takes several
//! passes, each bounded by the budget. For the social graph at a 512 MiB budget this is
//! one pass per direction.

use crate::error::{ImportError, IoAt};
use quiver_common::{Grant, MemoryBudget};
use quiver_format::bitpack::{self, Packed};
use quiver_storage::write::CsrWriter;
use rayon::prelude::*;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Edges per in-memory block (8 bytes each: 4 MiB blocks before sealing).
const BLOCK_EDGES: usize = 1 << 19;
/// Edges per frame of a sealed block: wide enough that a frame's header and padding
/// (32 bytes) cost one bit an edge, narrow enough that sorted sources span a few ids.
const FRAME: usize = 256;
/// The CSR builds may take this many passes over resident blocks before the blocks
/// are better spilled (each pass decodes every edge; spilling frees their memory for
/// the builds' buffers at the cost of a write, and a read per pass).
const RESIDENT_PASSES: u64 = 4;

/// One frame of a sealed block: where its packed sides start in the block's bytes,
/// each side's frame of reference and width, and its number of edges.
#[derive(Debug, Clone, Copy)]
struct Frame {
    at: u32,
    src_min: u32,
    dst_min: u32,
    src_w: u8,
    dst_w: u8,
    n: u16,
}

/// A full block, compressed (see the module's comment).
struct Sealed {
    frames: Vec<Frame>,
    bytes: Vec<u8>,
}

impl Sealed {
    fn seal(edges: &[u64]) -> Sealed {
        let mut bytes = Vec::with_capacity(edges.len() * 4);
        let mut frames = Vec::with_capacity(edges.len().div_ceil(FRAME));
        for f in edges.chunks(FRAME) {
            let (mut smin, mut smax, mut dmin, mut dmax) = (u32::MAX, 0u32, u32::MAX, 0u32);
            for &e in f {
                let (s, d) = ((e >> 32) as u32, e as u32);
                smin = smin.min(s);
                smax = smax.max(s);
                dmin = dmin.min(d);
                dmax = dmax.max(d);
            }
            let src_w = bitpack::bits_for((smax - smin) as u64);
            let dst_w = bitpack::bits_for((dmax - dmin) as u64);
            frames.push(Frame {
                at: bytes.len() as u32,
                src_min: smin,
                dst_min: dmin,
                src_w: src_w as u8,
                dst_w: dst_w as u8,
                n: f.len() as u16,
            });
            pack32(
                f.iter().map(|&e| (e >> 32) as u32 - smin),
                src_w,
                &mut bytes,
            );
            pack32(f.iter().map(|&e| e as u32 - dmin), dst_w, &mut bytes);
        }
        bytes.shrink_to_fit();
        Sealed { frames, bytes }
    }

    fn heap_bytes(&self) -> u64 {
        (self.bytes.capacity() + self.frames.capacity() * std::mem::size_of::<Frame>()) as u64
    }

    /// Calls `f(id, src, dst)` for the block's edges, ids from `*id` on.
    fn for_each(
        frames: &[Frame],
        bytes: &[u8],
        id: &mut u64,
        f: &mut impl FnMut(u64, u32, u32),
    ) -> Result<(), ImportError> {
        let damaged = || ImportError::Usage("internal: a compressed edge block is damaged".into());
        let mut src = [0u32; FRAME];
        for fr in frames {
            let n = fr.n as usize;
            let at = fr.at as usize;
            let sp = bytes
                .get(at..)
                .and_then(|b| Packed::new(b, fr.src_w as u32, n))
                .ok_or_else(damaged)?;
            sp.map_into(0, &mut src[..n], |v| v as u32 + fr.src_min);
            let dat = at + bitpack::packed_len(n, fr.src_w as u32);
            let dp = bytes
                .get(dat..)
                .and_then(|b| Packed::new(b, fr.dst_w as u32, n))
                .ok_or_else(damaged)?;
            let mut k = 0;
            dp.for_each_in(0, n, |v| {
                f(*id, src[k], v as u32 + fr.dst_min);
                *id += 1;
                k += 1;
            });
        }
        Ok(())
    }
}

/// Packs values of at most 32 bits at `width` bits each, as `bitpack::pack` lays them
/// out (a little-endian bit stream, then `bitpack::PADDING` zero bytes), a word at a
/// time: the generic packer's 128-bit accumulator cost the sequential stage 8 ns an
/// edge here.
fn pack32(values: impl Iterator<Item = u32>, width: u32, out: &mut Vec<u8>) {
    debug_assert!(width <= 32);
    if width > 0 {
        let mut acc = 0u64;
        let mut bits = 0u32;
        for v in values {
            let v = v as u64;
            acc |= v << bits;
            bits += width;
            if bits >= 64 {
                out.extend_from_slice(&acc.to_le_bytes());
                bits -= 64;
                // The bits of `v` that did not fit (none when it ended the word).
                acc = if bits > 0 { v >> (width - bits) } else { 0 };
            }
        }
        out.extend_from_slice(&acc.to_le_bytes()[..bits.div_ceil(8) as usize]);
    }
    out.extend_from_slice(&[0; bitpack::PADDING]);
}

pub struct EdgeStore {
    /// Full blocks sealed under memory pressure, in input order.
    sealed: Vec<Sealed>,
    /// Full blocks after them, raw while the budget has room.
    raw: Vec<Vec<u64>>,
    /// The block being filled.
    open: Vec<u64>,
    /// The spill file and, until `finish_input`, its writer.
    spill: Option<(PathBuf, Option<BufWriter<File>>)>,
    /// The frames of the blocks in the spill file and each block's byte length, in
    /// file order (the frames stay in memory: a bit an edge).
    spilled_blocks: Vec<(Vec<Frame>, u64)>,
    spilled: u64,
    n: u64,
    grant: Grant,
    /// Input order is sorted by (src, dst): then forward CSR position == edge id.
    pub sorted: bool,
    last: u64,
    n_nodes: u64,
    temp_dir: PathBuf,
    name: String,
}

impl EdgeStore {
    pub fn new(n_nodes: u64, budget: &MemoryBudget, temp_dir: &Path, name: &str) -> Self {
        EdgeStore {
            sealed: Vec::new(),
            raw: Vec::new(),
            open: Vec::new(),
            spill: None,
            spilled_blocks: Vec::new(),
            spilled: 0,
            n: 0,
            grant: budget.empty_grant("relationship buffer"),
            sorted: true,
            last: 0,
            n_nodes,
            temp_dir: temp_dir.to_path_buf(),
            name: name.to_string(),
        }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn spilled_edges(&self) -> u64 {
        self.spilled
    }

    /// Appends edges (`src << 32 | dst`) in input order. This is the only work the
    /// sequential stage does per relationship: a copy. Degrees are counted later, in
    /// parallel, when the CSR is built.
    pub fn push_all(&mut self, edges: &[u64]) -> Result<(), ImportError> {
        if self.sorted && !edges.is_empty() {
            self.sorted = edges[0] >= self.last && edges.windows(2).all(|w| w[0] <= w[1]);
        }
        if let Some(&l) = edges.last() {
            self.last = l;
        }
        let mut rest = edges;
        while !rest.is_empty() {
            if self.open.capacity() == 0 {
                self.open_block()?;
            }
            let n = (BLOCK_EDGES - self.open.len()).min(rest.len());
            self.open.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if self.open.len() == BLOCK_EDGES {
                self.raw.push(std::mem::take(&mut self.open));
            }
        }
        self.n += edges.len() as u64;
        Ok(())
    }

    /// Seals the full raw blocks (after the sealed ones: input order is kept). Blocks
    /// stay raw while the budget has room (a sealed block costs its sealing and a
    /// decode each pass: an append of 2M edges took 15% longer sealed).
    fn seal_raw(&mut self) -> Result<(), ImportError> {
        for b in std::mem::take(&mut self.raw) {
            self.sealed.push(Sealed::seal(&b));
        }
        self.grant.try_resize(self.held_bytes())?;
        Ok(())
    }

    /// What the store holds in memory: sealed and raw blocks, the open block's buffer,
    /// the spilled blocks' frames.
    fn held_bytes(&self) -> u64 {
        self.sealed.iter().map(Sealed::heap_bytes).sum::<u64>()
            + self
                .raw
                .iter()
                .map(|b| b.capacity() as u64 * 8)
                .sum::<u64>()
            + (self.open.capacity() * 8) as u64
            + self
                .spilled_blocks
                .iter()
                .map(|(f, _)| (f.capacity() * std::mem::size_of::<Frame>()) as u64)
                .sum::<u64>()
    }

    /// Out- and in-degrees of every node (counted side by side), with their grant.
    pub fn degrees(
        &self,
        budget: &MemoryBudget,
    ) -> Result<(Vec<u32>, Vec<u32>, Grant), ImportError> {
        let grant = budget.try_grant(self.n_nodes * 8, "relationship degree counts")?;
        let count = |forward: bool| -> Result<Vec<u32>, ImportError> {
            let mut d = vec![0u32; self.n_nodes as usize];
            self.for_each(|_, s, t| d[if forward { s } else { t } as usize] += 1)?;
            Ok(d)
        };
        let (o, i) = rayon::join(|| count(true), || count(false));
        Ok((o?, i?, grant))
    }

    /// A new open block: when the budget refuses its room, the raw blocks are sealed
    /// first, and spilled if that is not enough.
    fn open_block(&mut self) -> Result<(), ImportError> {
        let bytes = (BLOCK_EDGES * 8) as u64;
        if self.grant.try_resize(self.held_bytes() + bytes).is_err() {
            self.seal_raw()?;
            if self.grant.try_resize(self.held_bytes() + bytes).is_err() {
                self.spill_blocks()?;
                // One block must always fit: it is part of the fixed overhead if not.
                self.grant.try_resize(self.held_bytes() + bytes)?;
            }
        }
        self.open = Vec::with_capacity(BLOCK_EDGES);
        Ok(())
    }

    /// Frees the sealed blocks (to the spill file) when the builds that come next would
    /// take more than `RESIDENT_PASSES` passes beside them: `need` is what the degree
    /// counts and one pass over every edge hold.
    pub fn make_room(&mut self, budget: &MemoryBudget, need: u64) -> Result<(), ImportError> {
        let fits = |budget: &MemoryBudget| {
            budget
                .try_grant(need.div_ceil(RESIDENT_PASSES), "probe")
                .is_ok()
        };
        if !self.raw.is_empty() && !fits(budget) {
            self.seal_raw()?;
        }
        if !self.sealed.is_empty() && !fits(budget) {
            self.spill_blocks()?;
        }
        Ok(())
    }

    /// Moves every full block to the spill file, sealed, and frees them.
    fn spill_blocks(&mut self) -> Result<(), ImportError> {
        self.seal_raw()?;
        if self.spill.is_none() {
            let path = self
                .temp_dir
                .join(format!("edges-{}.bin", sanitize(&self.name)));
            let f = File::create(&path).at(&path)?;
            self.spill = Some((path, Some(BufWriter::with_capacity(1 << 20, f))));
        }
        let Some((path, Some(w))) = self.spill.as_mut() else {
            return Err(ImportError::Usage(
                "internal: edge store written after finish_input".into(),
            ));
        };
        for b in self.sealed.drain(..) {
            w.write_all(&b.bytes).at(path)?;
            self.spilled += b.frames.iter().map(|f| f.n as u64).sum::<u64>();
            self.spilled_blocks.push((b.frames, b.bytes.len() as u64));
        }
        let held = self.held_bytes();
        self.grant.try_resize(held)?;
        Ok(())
    }

    /// Ends the input: flushes the spill file so that builds can read it.
    pub fn finish_input(&mut self) -> Result<(), ImportError> {
        if let Some((path, w)) = self.spill.as_mut() {
            if let Some(mut w) = w.take() {
                w.flush().at(path)?;
            }
        }
        Ok(())
    }

    /// Calls `f(edge_id, src, dst)` for every edge in input order.
    fn for_each(&self, mut f: impl FnMut(u64, u32, u32)) -> Result<(), ImportError> {
        let mut id = 0u64;
        if let Some((path, _)) = self.spill.as_ref() {
            let mut r = BufReader::with_capacity(1 << 20, File::open(path).at(path)?);
            let mut buf = Vec::new();
            for (frames, len) in &self.spilled_blocks {
                buf.resize(*len as usize, 0);
                r.read_exact(&mut buf).at(path)?;
                Sealed::for_each(frames, &buf, &mut id, &mut f)?;
            }
        }
        for b in &self.sealed {
            Sealed::for_each(&b.frames, &b.bytes, &mut id, &mut f)?;
        }
        for b in &self.raw {
            for &e in b {
                f(id, (e >> 32) as u32, e as u32);
                id += 1;
            }
        }
        for &e in &self.open {
            f(id, (e >> 32) as u32, e as u32);
            id += 1;
        }
        Ok(())
    }

    /// Builds one direction of the CSR into `writer`, in as many passes as the budget
    /// needs. `forward` keys edges by source; otherwise by target. `share` is the
    /// fraction of the free budget this build may use (builds may run side by side).
    #[allow(clippy::too_many_arguments)]
    pub fn build_csr(
        &self,
        forward: bool,
        with_edge_ids: bool,
        degrees: &[u32],
        mut writer: CsrWriter,
        budget: &MemoryBudget,
        share: (u64, u64),
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<quiver_storage::manifest::SegmentMeta, ImportError> {
        let n_nodes = degrees.len();
        if forward && self.sorted {
            // Input sorted by (source, target) is the forward CSR already: stream it,
            // with no buffer and no sort (the other direction gets the whole budget).
            let mut failed = None;
            self.for_each(|id, _, d| {
                if failed.is_none() {
                    failed = writer.push(d, id).err();
                }
            })?;
            if let Some(e) = failed {
                return Err(e.into());
            }
            progress(self.n);
            return Ok(writer.finish()?);
        }
        let entry_bytes = csr_entry_bytes(with_edge_ids);
        // Leave a quarter of our share for everything else still alive. A partition
        // holds at least one node, whatever its degree.
        let avail = budget.available_bytes() / share.1 * share.0 / 4 * 3;
        let mut lo = 0usize;
        while lo < n_nodes {
            // Extend the partition while its entries (and per-node cursors) fit.
            let mut hi = lo;
            let mut m = 0u64;
            while hi < n_nodes {
                let next = m + degrees[hi] as u64;
                if (next * entry_bytes + (hi - lo + 1) as u64 * 8) > avail && hi > lo {
                    break;
                }
                m = next;
                hi += 1;
            }
            let grant =
                budget.try_grant(m * entry_bytes + (hi - lo) as u64 * 8, "adjacency build")?;
            let mut starts: Vec<u64> = Vec::with_capacity(hi - lo + 1);
            let mut acc = 0u64;
            for &d in &degrees[lo..hi] {
                starts.push(acc);
                acc += d as u64;
            }
            starts.push(acc);
            // `starts` is also the write cursor (one array of 8 bytes per node, which is
            // what the grant counts): each node's entry ends at the next node's start
            // after the scatter, and shifting by one restores the starts.
            if with_edge_ids {
                let mut buf = vec![0u64; m as usize];
                self.scatter(forward, lo, &mut starts, &mut buf, |id, v| {
                    (v as u64) << 32 | id
                })?;
                unshift(&mut starts);
                sort_lists(&mut buf, &starts);
                for e in &buf {
                    writer.push((e >> 32) as u32, e & 0xffff_ffff)?;
                }
            } else {
                let mut buf = vec![0u32; m as usize];
                self.scatter(forward, lo, &mut starts, &mut buf, |_, v| v)?;
                unshift(&mut starts);
                sort_lists(&mut buf, &starts);
                for (i, &v) in buf.iter().enumerate() {
                    writer.push(v, i as u64)?;
                }
            }
            progress(m);
            drop(grant);
            lo = hi;
        }
        Ok(writer.finish()?)
    }
}

impl EdgeStore {
    /// Writes `entry(edge id, neighbour)` of every edge keyed (by source if `forward`,
    /// else by target) within the nodes `lo .. lo + cursor.len() - 1` into `buf`, at
    /// its node's cursor (`cursor[i]` starts at node `lo + i`'s start in `buf` and ends
    /// at the next one's).
    ///
    /// The node range is cut into one part per thread, of about equal entries, each
    /// scattered by a task of its own into its own slices of the cursors and the buffer
    /// (each task reads every edge and keeps its part's). The scatter is a cache miss
    /// an edge: on one thread it was the last second of the social import, the other
    /// core idle; parts cost a decode of the edges each and need no atomics (a scatter
    /// with atomic cursors was measured: 1.3 to 1.8 s, the cursors' cache lines going
    /// back and forth between the cores).
    fn scatter<T: Copy + Send>(
        &self,
        forward: bool,
        lo: usize,
        cursor: &mut [u64],
        buf: &mut [T],
        entry: impl Fn(u64, u32) -> T + Sync,
    ) -> Result<(), ImportError> {
        let n = cursor.len() - 1;
        let total = cursor[n];
        let parts = rayon::current_num_threads().clamp(1, n.max(1));
        let mut bounds = vec![0usize];
        for p in 1..parts {
            let target = total * p as u64 / parts as u64;
            let at = cursor[..n]
                .partition_point(|&c| c < target)
                .max(bounds[bounds.len() - 1]);
            bounds.push(at);
        }
        bounds.push(n);
        let mut tasks = Vec::with_capacity(parts);
        let (mut c_rest, mut b_rest) = (&mut cursor[..n], buf);
        for w in bounds.windows(2) {
            let len = (if w[1] < n { c_rest[w[1] - w[0]] } else { total }
                - c_rest.first().copied().unwrap_or(total)) as usize;
            let base = c_rest.first().copied().unwrap_or(total);
            let (c, cr) = std::mem::take(&mut c_rest).split_at_mut(w[1] - w[0]);
            let (b, br) = std::mem::take(&mut b_rest).split_at_mut(len);
            c_rest = cr;
            b_rest = br;
            tasks.push(((lo + w[0]) as u32, (lo + w[1]) as u32, base, c, b));
        }
        let entry = &entry;
        tasks
            .into_par_iter()
            .try_for_each(|(plo, phi, base, c, b)| {
                self.for_each(|id, s, d| {
                    let (k, v) = if forward { (s, d) } else { (d, s) };
                    if k >= plo && k < phi {
                        let at = &mut c[(k - plo) as usize];
                        b[(*at - base) as usize] = entry(id, v);
                        *at += 1;
                    }
                })
            })
    }
}

/// Bytes a CSR build holds per entry: the neighbour, and the edge id when it is not the
/// entry's position.
pub fn csr_entry_bytes(with_edge_ids: bool) -> u64 {
    if with_edge_ids {
        8
    } else {
        4
    }
}

/// Restores `starts` after it served as the scatter cursor (entry `i` then holds the
/// start of list `i + 1`; the last entry, the end, was never a cursor).
fn unshift(starts: &mut [u64]) {
    let n = starts.len() - 1;
    starts.copy_within(0..n, 1);
    starts[0] = 0;
}

/// Sorts each node's list `buf[starts[i]..starts[i+1]]`, in parallel over node ranges.
fn sort_lists<T: Ord + Send + Copy>(buf: &mut [T], starts: &[u64]) {
    // Split the buffer into pieces of about 64k entries at node boundaries.
    let mut pieces: Vec<(&mut [T], Vec<u64>)> = Vec::new();
    let mut rest: &mut [T] = buf;
    let mut i = 0usize;
    let n = starts.len() - 1;
    while i < n {
        let mut j = i;
        while j < n && starts[j + 1] - starts[i] < 1 << 16 {
            j += 1;
        }
        if j == i {
            j = i + 1;
        }
        let len = (starts[j] - starts[i]) as usize;
        let (piece, tail) = std::mem::take(&mut rest).split_at_mut(len);
        rest = tail;
        pieces.push((piece, starts[i..=j].iter().map(|s| s - starts[i]).collect()));
        i = j;
    }
    pieces.into_par_iter().for_each(|(piece, st)| {
        for w in st.windows(2) {
            let s = &mut piece[w[0] as usize..w[1] as usize];
            if s.len() > 1 {
                s.sort_unstable();
            }
        }
    });
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack32_lays_values_out_as_bitpack_does() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for width in 0..=32u32 {
            for n in [0usize, 1, 7, 63, 64, 65, 255, 256] {
                let vals: Vec<u32> = (0..n)
                    .map(|_| {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        if width == 0 {
                            0
                        } else {
                            (rng as u32) & (u32::MAX >> (32 - width))
                        }
                    })
                    .collect();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                pack32(vals.iter().copied(), width, &mut a);
                bitpack::pack(vals.iter().map(|&v| v as u64), width, &mut b);
                assert_eq!(a, b, "width {width}, {n} values");
            }
        }
    }

    #[test]
    fn edges_come_back_in_order_from_sealed_spilled_and_open_blocks() {
        let dir = tempfile::tempdir().unwrap();
        // Sorted, then unsorted (wide frames), across several blocks.
        let n_nodes = 3_000_000u64;
        let mut edges: Vec<u64> = (0..BLOCK_EDGES as u64 * 2)
            .map(|i| (i / 17) << 32 | (i * 7919) % n_nodes)
            .collect();
        let mut x = 1u64;
        edges.extend((0..BLOCK_EDGES as u64 + 1000).map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) % n_nodes) << 32 | (x >> 7) % n_nodes
        }));
        // (chunk after which to seal, chunk after which to spill)
        for (seal_after, spill_after) in [
            (None, None),
            (Some(14), None),
            (Some(3), Some(12)),
            (None, Some(12)),
        ] {
            let budget = MemoryBudget::new(1 << 30);
            let mut store = EdgeStore::new(n_nodes, &budget, dir.path(), "t");
            for (k, part) in edges.chunks(100_000).enumerate() {
                store.push_all(part).unwrap();
                if seal_after == Some(k) {
                    store.seal_raw().unwrap();
                }
                if spill_after == Some(k) {
                    store.spill_blocks().unwrap();
                }
            }
            store.finish_input().unwrap();
            assert!(!store.sorted);
            let mut got = Vec::with_capacity(edges.len());
            store
                .for_each(|id, s, d| {
                    assert_eq!(id, got.len() as u64);
                    got.push((s as u64) << 32 | d as u64);
                })
                .unwrap();
            assert_eq!(
                got, edges,
                "seal after {seal_after:?}, spill after {spill_after:?}"
            );
            assert_eq!(store.spilled_edges() > 0, spill_after.is_some());
            if seal_after.is_some() || spill_after.is_some() {
                assert!(
                    store.held_bytes() < edges.len() as u64 * 8,
                    "{seal_after:?} {spill_after:?} held {}",
                    store.held_bytes()
                );
            }
        }
    }

    #[test]
    fn sort_lists_sorts_each_list() {
        let mut buf = vec![3u32, 1, 2, 9, 8, 5, 4];
        let starts = [0u64, 3, 3, 5, 7];
        sort_lists(&mut buf, &starts);
        assert_eq!(buf, vec![1, 2, 3, 8, 9, 4, 5]);
    }
}
