//! External sort for node ids that do not fit the budget.
//!
//! When an id space's in-memory map is refused a grant, the space *spills*: its ids live
//! in a sorted file of `(key, node)` on disk (the "space file"), and the import resolves
//! them by sorting instead of hashing:
//!
//! - **Nodes.** Ids are written with a provisional node number into sorted runs, each
//!   under its share of the budget; the runs and the space file are merged twice: once
//!   to find the duplicates (an id seen before keeps its first node, later rows holding
//!   it are rejects), once to write the new space file with final node numbers (a
//!   provisional number minus the duplicates before it). A second read of the file
//!   then writes the table, rejecting the duplicate rows with their file, line and raw
//!   text through the same rejects path as the in-memory map.
//! - **Relationships.** Endpoint keys are written with the row's ordinal into runs;
//!   the merged runs join the space file (both sorted by key), and the node found for
//!   each ordinal lands in a partition file by ordinal range. A second read of the file
//!   takes the partitions in order, an array per partition, and rejects the rows whose
//!   endpoint was not found.
//! - **The id index** is written from the space file, streaming (see
//!   `quiver_storage::write::write_id_index_streaming`).
//!
//! Keys are bytes: strings as they are, integers as 8 big-endian bytes with the sign bit
//! flipped, so byte order is numeric order. We sort and merge ourselves (no crate does a
//! budgeted external sort of byte keys with payloads; `extsort` allocates per item and
//! knows no budget): a run buffer is an arena of key bytes plus 32-byte entries that
//! carry the key's first 8 bytes, so most comparisons are one integer compare.

use crate::error::{ImportError, IoAt};
use quiver_common::{Grant, MemoryBudget};
use rayon::prelude::*;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Runs merged at once; more are merged in rounds.
const FAN_IN: usize = 64;
/// Buffer of each run writer.
const IO_BUF: usize = 256 << 10;
/// Buffer of each reader (a merge holds up to [`FAN_IN`] readers: 4 MiB, part of the
/// fixed overhead).
const READ_BUF: usize = 64 << 10;

/// An integer id as a byte key whose byte order is its numeric order.
#[inline]
pub fn int_key(k: i64) -> [u8; 8] {
    ((k as u64) ^ (1 << 63)).to_be_bytes()
}

/// The integer of a byte key written by [`int_key`].
#[inline]
pub fn key_int(b: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    let n = b.len().min(8);
    a[..n].copy_from_slice(&b[..n]);
    (u64::from_be_bytes(a) ^ (1 << 63)) as i64
}

/// A key's first 8 bytes as a big-endian integer, zero-padded: keys whose prefixes differ
/// order as their prefixes do (the id map's sort uses it too).
#[inline]
pub(crate) fn prefix(k: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    let n = k.len().min(8);
    a[..n].copy_from_slice(&k[..n]);
    u64::from_be_bytes(a)
}

#[derive(Clone, Copy)]
struct Entry {
    prefix: u64,
    off: u64,
    len: u32,
    val: u64,
}

/// Collects `(key, value)` pairs and writes them as sorted run files, each run at most
/// the writer's share of the budget.
pub struct RunWriter {
    dir: PathBuf,
    name: String,
    arena: Vec<u8>,
    entries: Vec<Entry>,
    limit: usize,
    grant: Grant,
    runs: Vec<PathBuf>,
}

impl RunWriter {
    /// A writer whose buffers take at most `max_bytes` of `budget` (at least 4 MiB: a
    /// refused grant shrinks the runs, it does not stop the import).
    pub fn new(budget: &MemoryBudget, dir: &Path, name: &str, max_bytes: u64) -> Self {
        let mut want = max_bytes.max(4 << 20);
        let grant = loop {
            match budget.try_grant(want, "id sort buffer") {
                Ok(g) => break g,
                Err(_) if want > 4 << 20 => want /= 2,
                Err(_) => break budget.empty_grant("id sort buffer"),
            }
        };
        RunWriter {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            arena: Vec::new(),
            entries: Vec::new(),
            limit: want as usize,
            grant,
            runs: Vec::new(),
        }
    }

    fn held(&self) -> usize {
        self.arena.capacity() + self.entries.capacity() * std::mem::size_of::<Entry>()
    }

    pub fn push(&mut self, key: &[u8], val: u64) -> Result<(), ImportError> {
        let e = std::mem::size_of::<Entry>();
        if self.arena.len() + key.len() > self.arena.capacity()
            || self.entries.len() == self.entries.capacity()
        {
            if self.arena.len() + self.entries.len() * e + key.len() + e > self.limit * 9 / 10 {
                self.flush_run()?;
            }
            if self.arena.capacity() == 0 {
                // Split the buffer between keys and entries by the first key's size.
                let per = key.len().max(1) + e;
                let n = (self.limit * 9 / 10 / per).max(1024);
                self.entries.reserve_exact(n);
                self.arena.reserve_exact(n * key.len().max(1));
            } else if self.arena.len() + key.len() > self.arena.capacity() {
                self.arena
                    .reserve_exact((self.arena.capacity() / 4).max(key.len()));
            } else {
                self.entries
                    .reserve_exact((self.entries.capacity() / 4).max(1024));
            }
            if self.held() > self.limit {
                // Past the grant (keys longer than the first): sort what we have.
                self.flush_run()?;
            }
        }
        let off = self.arena.len() as u64;
        self.arena.extend_from_slice(key);
        self.entries.push(Entry {
            prefix: prefix(key),
            off,
            len: key.len() as u32,
            val,
        });
        Ok(())
    }

    fn flush_run(&mut self) -> Result<(), ImportError> {
        if self.entries.is_empty() {
            return Ok(());
        }
        let arena = &self.arena;
        let key = |e: &Entry| &arena[e.off as usize..e.off as usize + e.len as usize];
        self.entries.par_sort_unstable_by(|a, b| {
            a.prefix
                .cmp(&b.prefix)
                .then_with(|| key(a).cmp(key(b)))
                .then(a.val.cmp(&b.val))
        });
        let path = self
            .dir
            .join(format!("{}-run{:05}.bin", self.name, self.runs.len()));
        let mut w = BufWriter::with_capacity(IO_BUF, File::create(&path).at(&path)?);
        for e in &self.entries {
            write_pair(&mut w, key(e), e.val).at(&path)?;
        }
        w.flush().at(&path)?;
        self.runs.push(path);
        self.entries.clear();
        self.arena.clear();
        Ok(())
    }

    /// Sorts the last run; returns every run (their memory is released).
    pub fn finish(mut self) -> Result<Vec<PathBuf>, ImportError> {
        self.flush_run()?;
        let runs = std::mem::take(&mut self.runs);
        drop(self.grant);
        Ok(runs)
    }
}

fn write_pair(w: &mut impl Write, key: &[u8], val: u64) -> std::io::Result<()> {
    w.write_all(&(key.len() as u32).to_le_bytes())?;
    w.write_all(key)?;
    w.write_all(&val.to_le_bytes())
}

/// Writes `(key, value)` pairs already in order (a merge's output).
pub struct PairWriter {
    w: BufWriter<File>,
    path: PathBuf,
}

impl PairWriter {
    pub fn create(path: &Path) -> Result<Self, ImportError> {
        Ok(PairWriter {
            w: BufWriter::with_capacity(IO_BUF, File::create(path).at(path)?),
            path: path.to_path_buf(),
        })
    }

    pub fn push(&mut self, key: &[u8], val: u64) -> Result<(), ImportError> {
        write_pair(&mut self.w, key, val).at(&self.path)
    }

    pub fn finish(mut self) -> Result<PathBuf, ImportError> {
        self.w.flush().at(&self.path)?;
        Ok(self.path)
    }
}

/// Reads a run (or a space file) front to back.
pub struct PairReader {
    r: BufReader<File>,
    path: PathBuf,
}

impl PairReader {
    pub fn open(path: &Path) -> Result<Self, ImportError> {
        Ok(PairReader {
            r: BufReader::with_capacity(READ_BUF, File::open(path).at(path)?),
            path: path.to_path_buf(),
        })
    }

    /// The next pair into `key` (replaced), or `None` at the end.
    pub fn next_into(&mut self, key: &mut Vec<u8>) -> Result<Option<u64>, ImportError> {
        let mut len = [0u8; 4];
        match self.r.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e).at(&self.path),
        }
        let len = u32::from_le_bytes(len) as usize;
        key.clear();
        key.resize(len, 0);
        self.r.read_exact(key).at(&self.path)?;
        let mut v = [0u8; 8];
        self.r.read_exact(&mut v).at(&self.path)?;
        Ok(Some(u64::from_le_bytes(v)))
    }
}

struct Head {
    key: Vec<u8>,
    val: u64,
    src: usize,
}

impl PartialEq for Head {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Head {
    /// Reversed: `BinaryHeap` is a max-heap and the merge wants the smallest.
    fn cmp(&self, o: &Self) -> Ordering {
        (&o.key, o.val, o.src).cmp(&(&self.key, self.val, self.src))
    }
}

/// A k-way merge of sorted pair files, in `(key, value)` order.
/// Its input files are removed when it is dropped.
pub struct Merge {
    readers: Vec<PairReader>,
    heap: BinaryHeap<Head>,
}

impl Drop for Merge {
    fn drop(&mut self) {
        for r in &self.readers {
            let _ = std::fs::remove_file(&r.path);
        }
    }
}

impl Merge {
    /// Merges `files` (at most [`FAN_IN`] at once: more are first merged in rounds into
    /// files under `dir`).
    pub fn open(mut files: Vec<PathBuf>, dir: &Path, name: &str) -> Result<Self, ImportError> {
        let mut round = 0;
        while files.len() > FAN_IN {
            let mut next = Vec::new();
            for (i, group) in files.chunks(FAN_IN).enumerate() {
                let path = dir.join(format!("{name}-merge{round}-{i:04}.bin"));
                let mut m = Merge::open_direct(group)?;
                let mut w = PairWriter::create(&path)?;
                let mut k = Vec::new();
                while let Some(v) = m.next_into(&mut k)? {
                    w.push(&k, v)?;
                }
                next.push(w.finish()?);
            }
            files = next;
            round += 1;
        }
        Merge::open_direct(&files)
    }

    fn open_direct(files: &[PathBuf]) -> Result<Self, ImportError> {
        let mut readers = Vec::with_capacity(files.len());
        let mut heap = BinaryHeap::with_capacity(files.len());
        for (src, f) in files.iter().enumerate() {
            let mut r = PairReader::open(f)?;
            let mut key = Vec::new();
            if let Some(val) = r.next_into(&mut key)? {
                heap.push(Head { key, val, src });
            }
            readers.push(r);
        }
        Ok(Merge { readers, heap })
    }

    /// The next smallest pair into `key`, or `None` when every file is done.
    pub fn next_into(&mut self, key: &mut Vec<u8>) -> Result<Option<u64>, ImportError> {
        let Some(mut h) = self.heap.pop() else {
            return Ok(None);
        };
        std::mem::swap(key, &mut h.key);
        let val = h.val;
        if let Some(v) = self.readers[h.src].next_into(&mut h.key)? {
            h.val = v;
            self.heap.push(h);
        }
        Ok(Some(val))
    }
}

/// A spilled id space: its ids sorted on disk with their final node numbers.
#[derive(Debug, Clone)]
pub struct SpaceFile {
    pub path: PathBuf,
    pub n_ids: u64,
    /// Sum of the key lengths (what the id index's key data takes).
    pub key_bytes: u64,
}

impl SpaceFile {
    /// The file as the id index writer scans it (keys decoded to integers or strings).
    pub fn ids(&self, integer: bool) -> SpaceIds<'_> {
        SpaceIds {
            path: &self.path,
            integer,
        }
    }
}

/// A space file's ids, scanned front to back as often as asked.
pub struct SpaceIds<'a> {
    path: &'a Path,
    integer: bool,
}

impl quiver_storage::write::SortedIds for SpaceIds<'_> {
    fn scan(
        &mut self,
        f: &mut dyn FnMut(quiver_storage::IdKey<'_>, u32) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        use quiver_storage::IdKey;
        let to_io = |e: ImportError| std::io::Error::other(e.to_string());
        let mut r = PairReader::open(self.path).map_err(to_io)?;
        let mut k = Vec::new();
        while let Some(node) = r.next_into(&mut k).map_err(to_io)? {
            if self.integer {
                f(IdKey::Int(key_int(&k)), node as u32)?;
            } else {
                f(IdKey::Str(&k), node as u32)?;
            }
        }
        Ok(())
    }
}

/// What merging a node group's runs into its space found.
pub struct NodeMerge {
    pub space: SpaceFile,
    /// Provisional node numbers of the rows whose id an earlier row has, ascending.
    pub duplicates: Vec<u64>,
    /// Holds `duplicates`.
    pub _grant: Grant,
}

/// Merges the runs of provisional `(key, node)` pairs (and the space's earlier file, if
/// any) into a new space file. A key seen again keeps its first (smallest) node; the
/// later nodes are returned as duplicates, and every node number is final in the new
/// file: the provisional number minus the duplicates below it.
pub fn merge_nodes(
    runs: Vec<PathBuf>,
    prior: Option<&SpaceFile>,
    dir: &Path,
    name: &str,
    budget: &MemoryBudget,
) -> Result<NodeMerge, ImportError> {
    let mut files = runs;
    if let Some(p) = prior {
        files.push(p.path.clone());
    }
    // Pass 1: the duplicates. Runs merge into one file first when there are more than
    // the fan-in, so that the second pass reads each file once more at most.
    let mut m = Merge::open(files, dir, name)?;
    let mut merged = PairWriter::create(&dir.join(format!("{name}-merged.bin")))?;
    let mut dups: Vec<u64> = Vec::new();
    let mut grant = budget.empty_grant("duplicate ids");
    let (mut key, mut last) = (Vec::new(), Vec::new());
    let mut first = true;
    while let Some(v) = m.next_into(&mut key)? {
        if !first && key == last {
            if dups.len() == dups.capacity() {
                let cap = (dups.capacity() * 2).max(1024);
                grant.try_resize(cap as u64 * 8)?;
                dups.reserve_exact(cap - dups.len());
            }
            dups.push(v);
            continue;
        }
        merged.push(&key, v)?;
        std::mem::swap(&mut key, &mut last);
        first = false;
    }
    drop(m);
    let merged = merged.finish()?;
    dups.sort_unstable();
    // Pass 2: final node numbers (the merged file is in key order, so node numbers come
    // in any order: each one's count of smaller duplicates is a binary search).
    let out = dir.join(format!("{name}-space.bin"));
    let mut w = PairWriter::create(&out)?;
    let mut r = PairReader::open(&merged)?;
    let (mut n_ids, mut key_bytes) = (0u64, 0u64);
    while let Some(v) = r.next_into(&mut key)? {
        let below = dups.partition_point(|&d| d < v) as u64;
        w.push(&key, v - below)?;
        n_ids += 1;
        key_bytes += key.len() as u64;
    }
    let path = w.finish()?;
    let _ = std::fs::remove_file(&merged);
    if let Some(p) = prior {
        if p.path != path {
            let _ = std::fs::remove_file(&p.path);
        }
    }
    Ok(NodeMerge {
        space: SpaceFile {
            path,
            n_ids,
            key_bytes,
        },
        duplicates: dups,
        _grant: grant,
    })
}

/// Resolved endpoints of one side of a relationship group, by row ordinal: partition
/// files of `(ordinal, node)` over ordinal ranges of `per` rows, loaded one at a time.
pub struct Resolved {
    parts: Vec<PathBuf>,
    per: u64,
    current: Option<(usize, Vec<u32>)>,
    grant: Grant,
}

/// Marks an ordinal whose key is not in the space.
const MISSING: u32 = u32::MAX;

impl Resolved {
    /// Joins the runs of `(key, ordinal)` with the space file: every ordinal whose key
    /// the space has gets its node. `rows` is how many ordinals there are.
    pub fn join(
        runs: Vec<PathBuf>,
        space: &SpaceFile,
        rows: u64,
        dir: &Path,
        name: &str,
        budget: &MemoryBudget,
    ) -> Result<Self, ImportError> {
        // A partition's array is at most 1/16 of the budget (two sides may be loaded).
        let per = (budget.limit_bytes() / 16 / 4).max(1 << 16);
        let n_parts = rows.div_ceil(per).max(1) as usize;
        let mut writers = Vec::with_capacity(n_parts);
        let mut parts = Vec::with_capacity(n_parts);
        for p in 0..n_parts {
            let path = dir.join(format!("{name}-part{p:05}.bin"));
            writers.push(BufWriter::with_capacity(
                64 << 10,
                File::create(&path).at(&path)?,
            ));
            parts.push(path);
        }
        let mut m = Merge::open(runs, dir, name)?;
        let mut ids = PairReader::open(&space.path)?;
        let (mut key, mut id_key) = (Vec::new(), Vec::new());
        let mut id_node = ids.next_into(&mut id_key)?;
        while let Some(ord) = m.next_into(&mut key)? {
            while id_node.is_some() && id_key < key {
                id_node = ids.next_into(&mut id_key)?;
            }
            if let Some(node) = id_node.filter(|_| id_key == key) {
                let p = ((ord / per) as usize).min(n_parts - 1);
                let w = &mut writers[p];
                w.write_all(&((ord % per) as u32).to_le_bytes())
                    .and_then(|_| w.write_all(&(node as u32).to_le_bytes()))
                    .at(&parts[p])?;
            }
        }
        for (w, p) in writers.into_iter().zip(&parts) {
            w.into_inner().map_err(|e| e.into_error()).at(p)?;
        }
        Ok(Resolved {
            parts,
            per,
            current: None,
            grant: budget.empty_grant("resolved endpoints"),
        })
    }

    /// The node of row `ord`, or `None` if its key is not a node id. Ordinals must come
    /// in ascending order (a partition, once left, is freed).
    pub fn get(&mut self, ord: u64) -> Result<Option<u32>, ImportError> {
        let p = (ord / self.per) as usize;
        if self.current.as_ref().is_none_or(|c| c.0 != p) {
            self.current = None;
            let Some(path) = self.parts.get(p) else {
                return Ok(None);
            };
            self.grant.try_resize(self.per * 4)?;
            let mut a = vec![MISSING; self.per as usize];
            // Streamed: the file holds twice the array's bytes.
            let mut r = BufReader::with_capacity(READ_BUF, File::open(path).at(path)?);
            let mut pair = [0u8; 8];
            loop {
                match r.read_exact(&mut pair) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e).at(path),
                }
                let o = u32::from_le_bytes([pair[0], pair[1], pair[2], pair[3]]) as usize;
                let n = u32::from_le_bytes([pair[4], pair[5], pair[6], pair[7]]);
                if let Some(s) = a.get_mut(o) {
                    *s = n;
                }
            }
            let _ = std::fs::remove_file(path);
            self.current = Some((p, a));
        }
        let a = &self.current.as_ref().expect("loaded above").1;
        Ok(Some(a[(ord % self.per) as usize]).filter(|&n| n != MISSING))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_keys_sort_as_numbers() {
        let mut ks = [i64::MIN, -5, -1, 0, 1, 7, 1 << 40, i64::MAX];
        ks.reverse();
        let mut bytes: Vec<[u8; 8]> = ks.iter().map(|&k| int_key(k)).collect();
        bytes.sort();
        let back: Vec<i64> = bytes.iter().map(|b| key_int(b)).collect();
        assert_eq!(back, vec![i64::MIN, -5, -1, 0, 1, 7, 1 << 40, i64::MAX]);
    }

    #[test]
    fn runs_merge_and_duplicates_keep_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let b = MemoryBudget::new(64 << 20);
        // A tiny limit forces many runs (and a merge round past the fan-in).
        let mut w = RunWriter::new(&b, dir.path(), "t", 0);
        w.limit = 4096;
        let n = 80_000u64;
        for i in 0..n {
            // Keys repeat every 15,000: nodes 15,000.. are duplicates.
            let k = format!("key-{:07}", (i * 7919) % 15_000);
            w.push(k.as_bytes(), i).unwrap();
        }
        let runs = w.finish().unwrap();
        assert!(runs.len() > FAN_IN, "{} runs", runs.len());
        let m = merge_nodes(runs, None, dir.path(), "t", &b).unwrap();
        assert_eq!(m.space.n_ids, 15_000);
        assert_eq!(m.duplicates, (15_000..n).collect::<Vec<_>>());
        let mut r = PairReader::open(&m.space.path).unwrap();
        let (mut k, mut prev) = (Vec::new(), Vec::new());
        let mut seen = vec![false; 15_000];
        while let Some(v) = r.next_into(&mut k).unwrap() {
            assert!(k > prev);
            assert!(v < 15_000, "final numbers are dense");
            assert!(!seen[v as usize]);
            seen[v as usize] = true;
            prev.clone_from(&k);
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn join_finds_nodes_by_ordinal() {
        let dir = tempfile::tempdir().unwrap();
        let b = MemoryBudget::new(64 << 20);
        let mut w = RunWriter::new(&b, dir.path(), "ids", 1 << 20);
        for i in 0..1000i64 {
            w.push(&int_key(i * 3), i as u64).unwrap();
        }
        let m = merge_nodes(w.finish().unwrap(), None, dir.path(), "ids", &b).unwrap();
        let mut e = RunWriter::new(&b, dir.path(), "ends", 1 << 20);
        let rows = 200_000u64;
        for ord in 0..rows {
            e.push(&int_key((ord % 3000) as i64), ord).unwrap();
        }
        let mut r =
            Resolved::join(e.finish().unwrap(), &m.space, rows, dir.path(), "ends", &b).unwrap();
        for ord in 0..rows {
            let k = ord % 3000;
            let want = (k % 3 == 0).then_some((k / 3) as u32);
            assert_eq!(r.get(ord).unwrap(), want, "ordinal {ord}");
        }
    }
}
