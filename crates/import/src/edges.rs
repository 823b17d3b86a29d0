//! Relationships of one type on their way to CSR: an append-only edge store (memory blocks
//! under a grant, spilling to a temp file when the grant is refused), degree counts, and
//! the CSR build by partitioned counting sort.
//!
//! Why counting sort and not a general external sort: degrees are known after reading, so
//! each edge's final place is known too. A node range whose edges fit in memory is filled
//! by one sequential pass over the store (memory or spill file), its per-node lists are
//! sorted in parallel, and it is written out; a graph larger than memory takes several
//! passes, each bounded by the budget. For the social graph at a 512 MiB budget this is
//! one pass per direction.

use crate::error::{ImportError, IoAt};
use quiver_common::{Grant, MemoryBudget};
use quiver_storage::write::CsrWriter;
use rayon::prelude::*;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Edges per in-memory block (8 bytes each: 4 MiB blocks).
const BLOCK_EDGES: usize = 1 << 19;

pub struct EdgeStore {
    blocks: Vec<Vec<u64>>,
    /// The spill file and, until `finish_input`, its writer.
    spill: Option<(PathBuf, Option<BufWriter<File>>)>,
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
            blocks: Vec::new(),
            spill: None,
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
            if self.blocks.last().is_none_or(|b| b.len() == BLOCK_EDGES) {
                self.new_block()?;
            }
            let Some(b) = self.blocks.last_mut() else {
                break;
            };
            let n = (BLOCK_EDGES - b.len()).min(rest.len());
            b.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
        }
        self.n += edges.len() as u64;
        Ok(())
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

    fn new_block(&mut self) -> Result<(), ImportError> {
        let bytes = (BLOCK_EDGES * 8) as u64;
        if self.grant.try_grow(bytes).is_err() {
            self.spill_blocks()?;
            // One block must always fit: it is part of the fixed overhead if not.
            self.grant.try_grow(bytes)?;
        }
        self.blocks.push(Vec::with_capacity(BLOCK_EDGES));
        Ok(())
    }

    /// Frees the memory blocks (to the spill file) when `need` more bytes are not
    /// available from `budget`: the degree counts come next, and the blocks the input
    /// left in memory must not starve them.
    pub fn make_room(&mut self, budget: &MemoryBudget, need: u64) -> Result<(), ImportError> {
        if !self.blocks.is_empty() && budget.try_grant(need, "probe").is_err() {
            self.spill_blocks()?;
        }
        Ok(())
    }

    /// Moves every full in-memory block to the spill file and frees them.
    fn spill_blocks(&mut self) -> Result<(), ImportError> {
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
        for b in self.blocks.drain(..) {
            let mut bytes = Vec::with_capacity(b.len() * 8);
            for e in &b {
                bytes.extend_from_slice(&e.to_le_bytes());
            }
            w.write_all(&bytes).at(path)?;
            self.spilled += b.len() as u64;
        }
        self.grant.try_resize(0)?;
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
            let mut buf = vec![0u8; 1 << 20];
            let mut left = self.spilled * 8;
            while left > 0 {
                let n = (buf.len() as u64).min(left) as usize;
                r.read_exact(&mut buf[..n]).at(path)?;
                for c in buf[..n].chunks_exact(8) {
                    let e = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
                    f(id, (e >> 32) as u32, e as u32);
                    id += 1;
                }
                left -= n as u64;
            }
        }
        for b in &self.blocks {
            for &e in b {
                f(id, (e >> 32) as u32, e as u32);
                id += 1;
            }
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
            let cursor = &mut starts;
            let (lo32, hi32) = (lo as u32, hi as u32);
            if with_edge_ids {
                let mut buf = vec![0u64; m as usize];
                self.for_each(|id, s, d| {
                    let (k, v) = if forward { (s, d) } else { (d, s) };
                    if k >= lo32 && k < hi32 {
                        let c = &mut cursor[(k - lo32) as usize];
                        buf[*c as usize] = (v as u64) << 32 | id;
                        *c += 1;
                    }
                })?;
                unshift(&mut starts);
                sort_lists(&mut buf, &starts);
                for e in &buf {
                    writer.push((e >> 32) as u32, e & 0xffff_ffff)?;
                }
            } else {
                let mut buf = vec![0u32; m as usize];
                self.for_each(|_, s, d| {
                    let (k, v) = if forward { (s, d) } else { (d, s) };
                    if k >= lo32 && k < hi32 {
                        let c = &mut cursor[(k - lo32) as usize];
                        buf[*c as usize] = v;
                        *c += 1;
                    }
                })?;
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
    fn sort_lists_sorts_each_list() {
        let mut buf = vec![3u32, 1, 2, 9, 8, 5, 4];
        let starts = [0u64, 3, 3, 5, 7];
        sort_lists(&mut buf, &starts);
        assert_eq!(buf, vec![1, 2, 3, 8, 9, 4, 5]);
    }
}
