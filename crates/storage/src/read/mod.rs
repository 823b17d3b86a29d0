//! Opening a database and reading it.
//!
//! Three open modes (seed 001):
//! - [`OpenMode::Mapped`]: every segment is memory-mapped; opening reads only footers, so
//!   it is instant whatever the size, pages come in on demand and are shared with other
//!   processes through the page cache.
//! - [`OpenMode::Loaded`]: every segment is read into RAM and its checksum verified.
//! - [`OpenMode::Offline`]: nothing is mapped or loaded; column chunks are read when
//!   scanned and adjacency is streamed in node order. Random access (a node's neighbours,
//!   an id lookup) is an error, not a slow path.
//!
//! This module has the `Database` (what a generation holds, and every read of it);
//! `segfile` one segment file in its open mode, `table` a table segment's row groups and
//! chunks, `csr` adjacency and the neighbour iterator, `bits` bitmaps over node and edge
//! numbers. Those four use the errors and small types here (`OpenMode`, `Direction`),
//! never `Database`.

use crate::error::{OpenError, ReadError};
use crate::manifest::{
    CsrFooter, IdIndexFooter, IdType, IndexKeyKind, Manifest, NodeTableMeta, PropIndexFooter,
    RelSegmentMeta, RelTypeMeta, SegmentMeta, TableFooter,
};
use crate::write::read_current;
use quiver_format::bitpack::Packed;
use quiver_format::column::ColumnChunk;
use quiver_format::segment::{self, BlobRef, Trailer, TRAILER_LEN};
use std::borrow::Cow;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod bits;
mod csr;
mod segfile;
mod table;

pub use bits::*;
pub use csr::*;
use segfile::*;
use table::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    Mapped,
    Loaded,
    Offline,
}

impl std::str::FromStr for OpenMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mapped" => Ok(OpenMode::Mapped),
            "loaded" => Ok(OpenMode::Loaded),
            "offline" => Ok(OpenMode::Offline),
            _ => Err(format!(
                "unknown open mode '{s}'; use mapped, loaded or offline"
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Along the relationship: `(a)-->(b)` from `a`.
    Out,
    /// Against it: `(a)-->(b)` from `b`.
    In,
}

/// A node table: its manifest entry and its segments.
pub struct NodeTable {
    pub meta: NodeTableMeta,
    /// Columns and every row group, across segments.
    pub footer: TableFooter,
    table: Table,
    /// Rows deleted since the table was written.
    pub deleted: Option<Bits>,
}

/// A relationship type: its CSR segments in both directions and its property table.
pub struct RelType {
    pub meta: RelTypeMeta,
    segs: Vec<RelSeg>,
    props: Option<Table>,
}

struct IdIndex {
    footer: IdIndexFooter,
    file: SegFile,
}

struct PropIdx {
    footer: PropIndexFooter,
    file: SegFile,
}

/// A key to look up in a property index.
#[derive(Debug, Clone, Copy)]
pub enum IndexKey<'a> {
    Int(i64),
    Float(f64),
    Str(&'a [u8]),
}

/// An external node id to look up.
#[derive(Debug, Clone, Copy)]
pub enum IdKey<'a> {
    Int(i64),
    Str(&'a [u8]),
}

/// A table of typed columns: a node table's, or a relationship type's properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TableRef {
    Node(usize),
    Rel(usize),
}

/// An open database.
pub struct Database {
    dir: PathBuf,
    mode: OpenMode,
    manifest: Manifest,
    tables: Vec<NodeTable>,
    rels: Vec<RelType>,
    ids: Vec<IdIndex>,
    prop_idx: Vec<PropIdx>,
    /// Whether any node table has deleted rows.
    any_deleted_nodes: bool,
    /// What a reader derives from this generation once ([`Database::derived`]).
    derived: std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>,
}

fn corrupted(file: &Path, what: &str) -> ReadError {
    ReadError::Format {
        file: file.to_path_buf(),
        source: quiver_format::FormatError::Corrupted {
            what: what.to_string(),
        },
    }
}

impl Database {
    /// Opens the database at `dir` in `mode`.
    pub fn open(dir: &Path, mode: OpenMode) -> Result<Database, OpenError> {
        let io = |source| OpenError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let (mname, crc) =
            read_current(dir)
                .map_err(io)?
                .ok_or_else(|| OpenError::NotADatabase {
                    path: dir.to_path_buf(),
                })?;
        let mpath = dir.join(&mname);
        let mbytes = std::fs::read(&mpath).map_err(|source| OpenError::Io {
            path: mpath.clone(),
            source,
        })?;
        if crc32fast::hash(&mbytes) != crc {
            return Err(OpenError::Corrupted {
                file: mpath,
                what: "manifest checksum does not match CURRENT".into(),
            });
        }
        let manifest: Manifest =
            serde_json::from_slice(&mbytes).map_err(|e| OpenError::Corrupted {
                file: mpath.clone(),
                what: format!("manifest: {e}"),
            })?;
        Database::with_manifest(dir, manifest, mode, &mpath)
    }

    /// Opens the files `manifest` names in `dir`, whichever manifest `CURRENT` names: a
    /// view of a generation not published yet (a live append's, to check it before its
    /// publish). `mpath` names the manifest in errors.
    pub fn with_manifest(
        dir: &Path,
        manifest: Manifest,
        mode: OpenMode,
        mpath: &Path,
    ) -> Result<Database, OpenError> {
        if manifest.format_version > quiver_format::FORMAT_VERSION {
            return Err(OpenError::Format {
                file: mpath.to_path_buf(),
                source: quiver_format::FormatError::UnsupportedVersion {
                    found: manifest.format_version,
                    supported: quiver_format::FORMAT_VERSION,
                },
            });
        }
        let mut tables = Vec::new();
        for t in &manifest.node_tables {
            let table = Table::open(dir, &t.segments, &t.patches, &t.columns, mode)?;
            let deleted = match &t.deleted {
                Some(d) => Bits::open(dir, d, mode)?.into_iter().next(),
                None => None,
            };
            tables.push(NodeTable {
                meta: t.clone(),
                footer: table.footer.clone(),
                table,
                deleted,
            });
        }
        let mut rels = Vec::new();
        for r in &manifest.rel_types {
            let mut segs = Vec::new();
            let mut first_edge = 0;
            let mut prop_segments = Vec::new();
            for seg in &r.segments {
                let open_parts = |first: &SegmentMeta, more: &[SegmentMeta]| {
                    std::iter::once(first)
                        .chain(more)
                        .map(|m| SegFile::open::<CsrFooter>(dir, &m.file, mode))
                        .collect::<Result<Vec<_>, _>>()
                        .and_then(Csr::new)
                };
                let out = open_parts(&seg.out, &seg.out_parts)?;
                let inc = open_parts(&seg.r#in, &seg.in_parts)?;
                if out.n_edges != inc.n_edges || out.n_edges != seg.n_edges {
                    return Err(OpenError::Corrupted {
                        file: dir.join(&seg.out.file),
                        what: format!(
                            "a relationship segment of {} edges has {} out entries and {} in",
                            seg.n_edges, out.n_edges, inc.n_edges
                        ),
                    });
                }
                let deleted = match &seg.deleted {
                    Some(d) => {
                        let mut maps = Bits::open(dir, d, mode)?.into_iter();
                        match (maps.next(), maps.next()) {
                            (Some(o), Some(i)) => Some([o, i]),
                            _ => {
                                return Err(OpenError::Corrupted {
                                    file: dir.join(&d.file.file),
                                    what: "a relationship segment's deletions need two bitmaps"
                                        .into(),
                                })
                            }
                        }
                    }
                    None => None,
                };
                segs.push(RelSeg {
                    deleted,
                    out,
                    inc,
                    first_edge,
                });
                first_edge += seg.n_edges;
                prop_segments.extend(seg.props.iter().chain(&seg.props_parts).cloned());
            }
            let props = if prop_segments.is_empty() {
                None
            } else {
                Some(Table::open(
                    dir,
                    &prop_segments,
                    &r.patches,
                    &r.columns,
                    mode,
                )?)
            };
            rels.push(RelType {
                meta: r.clone(),
                segs,
                props,
            });
        }
        let mut ids = Vec::new();
        for s in &manifest.id_spaces {
            let (file, footer) = SegFile::open(dir, &s.index.file, mode)?;
            ids.push(IdIndex { footer, file });
        }
        let mut prop_idx = Vec::new();
        for ix in &manifest.indexes {
            let (file, footer) = SegFile::open(dir, &ix.segment.file, mode)?;
            prop_idx.push(PropIdx { footer, file });
        }
        let any_deleted_nodes = tables.iter().any(|t| t.deleted.is_some());
        Ok(Database {
            dir: dir.to_path_buf(),
            mode,
            manifest,
            tables,
            rels,
            ids,
            prop_idx,
            any_deleted_nodes,
            derived: std::sync::OnceLock::new(),
        })
    }

    /// State a reader derives from this generation (the query crate's summaries of its
    /// tables: property names, row groups, labels), built by the first caller and
    /// shared by every later one: a generation never changes, and rebuilding it per
    /// query cost allocations per table and column (a soak's reads slowed as
    /// checkpoints added tables). One type per database: a caller asking for another
    /// gets it built afresh, uncached.
    pub fn derived<T: std::any::Any + Send + Sync>(
        &self,
        build: impl Fn(&Database) -> T,
    ) -> Arc<T> {
        let any = self
            .derived
            .get_or_init(|| Arc::new(build(self)) as Arc<dyn std::any::Any + Send + Sync>)
            .clone();
        any.downcast::<T>()
            .unwrap_or_else(|_| Arc::new(build(self)))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn mode(&self) -> OpenMode {
        self.mode
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn n_nodes(&self) -> u64 {
        self.manifest.n_nodes
    }

    pub fn labels(&self) -> &[String] {
        &self.manifest.labels
    }

    pub fn node_tables(&self) -> &[NodeTable] {
        &self.tables
    }

    pub fn rel_types(&self) -> &[RelType] {
        &self.rels
    }

    pub fn rel_type_index(&self, name: &str) -> Option<usize> {
        self.rels.iter().position(|r| r.meta.name == name)
    }

    /// Every open segment file.
    fn files(&self) -> impl Iterator<Item = &SegFile> {
        let tables = self.tables.iter().flat_map(|t| t.table.all_files());
        let csr = self.rels.iter().flat_map(|r| {
            r.segs
                .iter()
                .flat_map(|s| s.out.files().chain(s.inc.files()))
        });
        let props = self
            .rels
            .iter()
            .filter_map(|r| r.props.as_ref())
            .flat_map(|t| t.all_files());
        tables
            .chain(csr)
            .chain(props)
            .chain(self.ids.iter().map(|i| &i.file))
            .chain(self.prop_idx.iter().map(|i| &i.file))
    }

    /// Bytes held in RAM by the open database (loaded mode holds every segment).
    pub fn resident_bytes(&self) -> u64 {
        self.files().map(|f| f.resident_bytes()).sum()
    }

    /// Runs `f` on one column chunk of a node table (borrowed when mapped or loaded, read
    /// from the file when offline).
    pub fn with_node_chunk<R>(
        &self,
        table: usize,
        row_group: usize,
        column: usize,
        f: impl FnOnce(&ColumnChunk<'_>) -> R,
    ) -> Result<R, ReadError> {
        self.tables[table].table.with_chunk(row_group, column, f)
    }

    /// Runs `f` on one column chunk of a relationship type's property table.
    pub fn with_rel_chunk<R>(
        &self,
        rel: usize,
        row_group: usize,
        column: usize,
        f: impl FnOnce(&ColumnChunk<'_>) -> R,
    ) -> Result<R, ReadError> {
        match &self.rels[rel].props {
            Some(t) => t.with_chunk(row_group, column, f),
            None => Err(ReadError::NotFound {
                kind: "relationship property table",
                name: self.rels[rel].meta.name.clone(),
            }),
        }
    }

    fn table(&self, t: TableRef) -> Result<&Table, ReadError> {
        match t {
            TableRef::Node(i) => Ok(&self.tables[i].table),
            TableRef::Rel(i) => self.rels[i]
                .props
                .as_ref()
                .ok_or_else(|| ReadError::NotFound {
                    kind: "relationship property table",
                    name: self.rels[i].meta.name.clone(),
                }),
        }
    }

    /// The chunks of table `t` that its patch files hold: (row group, column).
    pub fn patched_chunks(&self, t: TableRef) -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = self
            .table(t)
            .map(|t| {
                t.patched
                    .keys()
                    .map(|&(rg, c)| (rg as usize, c as usize))
                    .collect()
            })
            .unwrap_or_default();
        v.sort_unstable();
        v
    }

    /// The stored bytes of one chunk of table `t` (encoded, as a patch file takes them).
    pub fn raw_chunk(
        &self,
        t: TableRef,
        row_group: usize,
        column: usize,
    ) -> Result<Cow<'_, [u8]>, ReadError> {
        self.table(t)?.chunk_bytes(row_group, column)
    }

    /// Runs `f` on one column chunk of table `t`.
    pub fn with_chunk<R>(
        &self,
        t: TableRef,
        row_group: usize,
        column: usize,
        f: impl FnOnce(&ColumnChunk<'_>) -> R,
    ) -> Result<R, ReadError> {
        self.table(t)?.with_chunk(row_group, column, f)
    }

    /// Whether any node of the segments was deleted (scans then test each node).
    #[inline]
    pub fn has_deleted_nodes(&self) -> bool {
        self.any_deleted_nodes
    }

    /// Whether segment node `node` was deleted (by a checkpoint's deletion bitmap).
    #[inline]
    pub fn node_deleted(&self, node: u64) -> bool {
        if !self.any_deleted_nodes {
            return false;
        }
        match self.node_location(node) {
            Ok((t, row)) => self.tables[t].deleted.as_ref().is_some_and(|d| d.get(row)),
            Err(_) => false,
        }
    }

    /// The first node of `lo..hi` the segments hold live (`hi` when none): runs of
    /// deleted rows are skipped a bitmap word at a time.
    pub fn next_live_node(&self, lo: u64, hi: u64) -> u64 {
        if !self.any_deleted_nodes {
            return lo.min(hi);
        }
        let mut n = lo;
        while n < hi {
            let Ok((t, row)) = self.node_location(n) else {
                return n;
            };
            let table = &self.tables[t];
            let end = hi.min(table.meta.first_node + table.meta.n_rows);
            match &table.deleted {
                Some(d) => {
                    let r = d.next_clear(row, row + (end - n));
                    if r < row + (end - n) {
                        return n + (r - row);
                    }
                }
                None => return n,
            }
            n = end;
        }
        hi
    }

    /// `out[i]` is whether node `lo + i` of `lo..hi` was not deleted from the segments
    /// (one table lookup per table the range crosses, then a bit test per node).
    pub fn live_mask(&self, lo: u64, hi: u64, out: &mut Vec<bool>) {
        out.clear();
        let mut n = lo;
        while n < hi {
            let Ok((t, row)) = self.node_location(n) else {
                out.extend(std::iter::repeat_n(true, (hi - n) as usize));
                return;
            };
            let table = &self.tables[t];
            let end = hi.min(table.meta.first_node + table.meta.n_rows);
            match &table.deleted {
                Some(d) => d.clear_into(row, row + (end - n), out),
                None => out.extend(std::iter::repeat_n(true, (end - n) as usize)),
            }
            n = end;
        }
    }

    /// Nodes deleted from the segments.
    pub fn n_deleted_nodes(&self) -> u64 {
        let m = &self.manifest;
        m.node_tables
            .iter()
            .filter_map(|t| t.deleted.as_ref())
            .map(|d| d.count)
            .sum()
    }

    /// Relationships of type `rel` deleted from the segments.
    pub fn n_deleted_edges(&self, rel: usize) -> u64 {
        let segs = &self.manifest.rel_types[rel].segments;
        segs.iter()
            .filter_map(|s| s.deleted.as_ref())
            .map(|d| d.count)
            .sum()
    }

    /// The deletion bitmaps of segment `seg` of type `rel` (out, in), if any.
    pub fn edge_deletions(&self, rel: usize, seg: usize) -> Option<&[Bits; 2]> {
        self.rels[rel].segs.get(seg)?.deleted.as_ref()
    }

    /// Where segment relationship `eid` of type `rel` (from `src` to `dst`) sits: its
    /// segment and its entry positions in that segment's out and in CSRs (what a
    /// deletion bitmap marks). `None` when no entry has that id.
    pub fn edge_positions(
        &self,
        rel: usize,
        src: u64,
        dst: u64,
        eid: u64,
    ) -> Result<Option<(usize, u64, u64)>, ReadError> {
        let r = &self.rels[rel];
        for (si, s) in r.segs.iter().enumerate() {
            let n_edges = s.out.n_edges;
            if eid < s.first_edge || eid >= s.first_edge + n_edges {
                continue;
            }
            if src >= s.out.n_nodes || dst >= s.inc.n_nodes {
                return Ok(None);
            }
            let out = s.out.neighbours(src as u32, s.first_edge)?;
            let out_pos = (out.pos..out.end)
                .find(|&i| out.targets.get(i) == dst && s.first_edge + out.raw_eid(i) == eid);
            let inc = s.inc.neighbours(dst as u32, s.first_edge)?;
            let mut in_pos = None;
            for i in inc.pos..inc.end {
                if inc.targets.get(i) != src {
                    continue;
                }
                let raw = s.first_edge + inc.raw_eid(i);
                if self.canonical_edge_id(rel, dst as u32, src as u32, raw)? == eid {
                    in_pos = Some(i);
                    break;
                }
            }
            return Ok(match (out_pos, in_pos) {
                (Some(o), Some(i)) => Some((si, out.base + o as u64, inc.base + i as u64)),
                _ => None,
            });
        }
        Ok(None)
    }

    /// The node table and row of internal node `node`.
    pub fn node_location(&self, node: u64) -> Result<(usize, u64), ReadError> {
        let i = self
            .tables
            .partition_point(|t| t.meta.first_node + t.meta.n_rows <= node);
        match self.tables.get(i) {
            Some(t) if node >= t.meta.first_node => Ok((i, node - t.meta.first_node)),
            _ => Err(ReadError::NodeOutOfRange {
                id: node,
                n_nodes: self.n_nodes(),
            }),
        }
    }

    /// Neighbours of `node` over relationship type `rel` in direction `dir`.
    pub fn neighbours(
        &self,
        rel: usize,
        node: u32,
        dir: Direction,
    ) -> Result<Neighbours<'_>, ReadError> {
        let r = &self.rels[rel];
        let mut it = Neighbours {
            cur: None,
            rest: Vec::new(),
        };
        for s in &r.segs {
            // A segment written before later nodes were added does not know them.
            if (node as u64) >= s.csr(dir).n_nodes && (node as u64) < self.n_nodes() {
                continue;
            }
            let mut p = s.csr(dir).neighbours(node, s.first_edge)?;
            p.deleted = s.deleted(dir);
            if it.cur.is_none() {
                it.cur = Some(p);
            } else {
                it.rest.push(p);
            }
        }
        Ok(it)
    }

    /// Appends the live entries of nodes `lo..hi` of type `rel` in direction `dir` to
    /// `targets` (and their edge ids to `eids`), node after node, pushing after each node
    /// the length `targets` then has: a graph algorithm's block of adjacency. A type in
    /// one segment of one part (an import's) decodes its block's offsets and targets in
    /// two runs; others go node by node through the segments, as
    /// [`neighbours`](Self::neighbours) does. Needs the bytes in place (mapped or loaded).
    pub fn adjacency_into(
        &self,
        rel: usize,
        dir: Direction,
        lo: u32,
        hi: u32,
        targets: &mut Vec<u32>,
        ends: &mut Vec<u32>,
        mut eids: Option<&mut Vec<u64>>,
    ) -> Result<(), ReadError> {
        let r = &self.rels[rel];
        if let [s] = r.segs.as_slice() {
            let csr = s.csr(dir);
            if let [part] = csr.parts.as_slice() {
                let in_seg = (hi as u64).min(csr.n_nodes).max(lo as u64) as u32;
                if in_seg > lo {
                    let (offsets, t, e) = part.arrays()?;
                    let mut offs = vec![0u64; (in_seg - lo) as usize + 1];
                    offsets.map_into(lo as usize, &mut offs, |v| v);
                    let (a, b) = (offs[0] as usize, offs[offs.len() - 1] as usize);
                    if offs.windows(2).any(|w| w[0] > w[1]) || b as u64 > part.footer.n_edges {
                        return Err(corrupted(&part.file.path, "CSR offsets out of order"));
                    }
                    let start = targets.len();
                    targets.resize(start + (b - a), 0);
                    t.map_into(a, &mut targets[start..], |v| v as u32);
                    if let Some(ev) = eids.as_deref_mut() {
                        let es = ev.len();
                        ev.resize(es + (b - a), 0);
                        match e {
                            Some(e) => e.map_into(a, &mut ev[es..], |v| s.first_edge + v),
                            None => {
                                let first = s.first_edge + part.first_entry + a as u64;
                                for (k, x) in ev[es..].iter_mut().enumerate() {
                                    *x = first + k as u64;
                                }
                            }
                        }
                    }
                    let deleted = s.deleted(dir).filter(|d| {
                        d.count_range(part.first_entry + a as u64, part.first_entry + b as u64) > 0
                    });
                    match deleted {
                        None => {
                            ends.extend(offs[1..].iter().map(|&o| (start + o as usize - a) as u32))
                        }
                        Some(d) => {
                            // Keep the live entries, in place.
                            let mut w = start;
                            for k in 0..offs.len() - 1 {
                                for i in offs[k] as usize..offs[k + 1] as usize {
                                    if !d.get(part.first_entry + i as u64) {
                                        let from = start + i - a;
                                        targets[w] = targets[from];
                                        if let Some(ev) = eids.as_deref_mut() {
                                            let base = ev.len() - (b - a);
                                            ev[base + (w - start)] = ev[base + (from - start)];
                                        }
                                        w += 1;
                                    }
                                }
                                ends.push(w as u32);
                            }
                            targets.truncate(w);
                            if let Some(ev) = eids.as_deref_mut() {
                                let base = ev.len() - (b - a);
                                ev.truncate(base + (w - start));
                            }
                        }
                    }
                }
                let end = targets.len() as u32;
                ends.extend((in_seg.max(lo)..hi).map(|_| end));
                return Ok(());
            }
        }
        for v in lo..hi {
            for s in &r.segs {
                let csr = s.csr(dir);
                if v as u64 >= csr.n_nodes {
                    continue;
                }
                let p = csr.neighbours(v, s.first_edge)?;
                let deleted = s.deleted(dir);
                for i in p.pos..p.end {
                    if deleted.is_some_and(|d| d.get(p.base + i as u64)) {
                        continue;
                    }
                    targets.push(p.targets.get(i) as u32);
                    if let Some(ev) = eids.as_deref_mut() {
                        ev.push(p.eid_base + p.raw_eid(i));
                    }
                }
            }
            ends.push(targets.len() as u32);
        }
        Ok(())
    }

    /// Hints the CPU to load the adjacency of `node` that
    /// [`neighbours`](Self::neighbours) will read (see `Csr::prefetch`; nothing is
    /// checked or reported: a hint past the data is dropped).
    pub fn prefetch_neighbours(&self, rel: usize, node: u32, dir: Direction, targets: bool) {
        if let Some(r) = self.rels.get(rel) {
            for s in &r.segs {
                s.csr(dir).prefetch(node, targets);
            }
        }
    }

    pub fn degree(&self, rel: usize, node: u32, dir: Direction) -> Result<u64, ReadError> {
        let mut d = 0;
        for s in &self.rels[rel].segs {
            if (node as u64) >= s.csr(dir).n_nodes && (node as u64) < self.n_nodes() {
                continue;
            }
            d += s.csr(dir).degree(node, s.deleted(dir))?;
        }
        Ok(d)
    }

    /// Whether `node` has a relationship of type `rel` to `nb` in direction `dir` that
    /// is not deleted: a binary search of its targets (sorted within a node's entries)
    /// in each segment, instead of a walk over all of them (`WHERE (a)-[:T]->(b)` with
    /// both ends bound, from a hub).
    pub fn has_neighbour(
        &self,
        rel: usize,
        node: u32,
        nb: u32,
        dir: Direction,
    ) -> Result<bool, ReadError> {
        for s in &self.rels[rel].segs {
            let csr = s.csr(dir);
            if node as u64 >= csr.n_nodes {
                continue;
            }
            let p = csr.neighbours(node, s.first_edge)?;
            let deleted = s.deleted(dir);
            let want = nb as u64;
            let mut i = p.pos + partition(p.end - p.pos, |k| p.targets.get(p.pos + k) < want);
            while i < p.end && p.targets.get(i) == want {
                if !deleted.is_some_and(|d| d.get(p.base + i as u64)) {
                    return Ok(true);
                }
                i += 1;
            }
        }
        Ok(false)
    }

    /// Streams every relationship of a type, `f(node, neighbour, edge_id)`, in node order
    /// of `dir` within each segment. Works in every open mode.
    pub fn scan_edges(
        &self,
        rel: usize,
        dir: Direction,
        mut f: impl FnMut(u32, u32, u64),
    ) -> Result<(), ReadError> {
        for s in &self.rels[rel].segs {
            s.csr(dir).scan(s.first_edge, s.deleted(dir), &mut f)?;
        }
        Ok(())
    }

    /// The edge id that the out CSR gives the edge reached from `node` to `nb` in the in
    /// CSR at edge id `in_eid`. Relationship types with properties store real edge ids in
    /// both directions; property-less ones number edges by CSR position, so an edge seen
    /// from its target is renumbered here: the k-th parallel edge `nb -> node` in the in
    /// CSR is the k-th in the out CSR.
    pub fn canonical_edge_id(
        &self,
        rel: usize,
        node: u32,
        nb: u32,
        in_eid: u64,
    ) -> Result<u64, ReadError> {
        let r = &self.rels[rel];
        for s in &r.segs {
            if s.inc.edge_ids() {
                return Ok(in_eid);
            }
            if in_eid < s.first_edge
                || in_eid >= s.first_edge + s.inc.n_edges
                || node as u64 >= s.inc.n_nodes
                || nb as u64 >= s.out.n_nodes
            {
                continue;
            }
            // Positions across the CSR's parts: the k-th entry nb -> node of the in CSR
            // is the k-th of the out CSR, whose position is the edge id.
            let pos = in_eid - s.first_edge;
            let inc = s.inc.neighbours(node, 0)?;
            let first = inc.base
                + (inc.pos
                    + partition(inc.end - inc.pos, |i| {
                        (inc.targets.get(inc.pos + i) as u32) < nb
                    })) as u64;
            let k = pos.saturating_sub(first);
            let out = s.out.neighbours(nb, 0)?;
            let lb = out.base
                + (out.pos
                    + partition(out.end - out.pos, |i| {
                        (out.targets.get(out.pos + i) as u32) < node
                    })) as u64;
            return Ok(s.first_edge + lb + k);
        }
        Ok(in_eid)
    }

    /// The entries of segment `seg` of type `rel` in `dir`'s CSR at or towards a node
    /// whose bit `dead` holds, as `f(position)`: what its deletion bitmap marks when those
    /// nodes are deleted. One sequential pass over the segment, for many nodes (where
    /// [`node_edge_positions`](Self::node_edge_positions)' searches would miss the
    /// cache once an entry). Works in every open mode.
    pub fn entries_of_nodes(
        &self,
        rel: usize,
        seg: usize,
        dir: Direction,
        dead: &Bits,
        mut f: impl FnMut(u64),
    ) -> Result<(), ReadError> {
        let csr = self.rels[rel].segs[seg].csr(dir);
        let is_dead = |n: u64| n < dead.len() && dead.get(n);
        for part in &csr.parts {
            part.scan(&mut |node, t, _, pos| {
                if is_dead(node as u64) || is_dead(t as u64) {
                    f(pos);
                }
            })?;
        }
        Ok(())
    }

    /// Every entry of type `rel`'s segment relationships at `node`, both directions,
    /// deleted ones too, as `f(segment, out position, in position)` (what a deletion
    /// bitmap marks when the node is deleted; a self-loop comes twice). Entries of one
    /// node are sorted by neighbour, so the other end's entries towards `node` are
    /// found by binary search, all of them (every relationship between the two dies).
    pub fn node_edge_positions(
        &self,
        rel: usize,
        node: u32,
        mut f: impl FnMut(usize, u64, u64),
    ) -> Result<(), ReadError> {
        let n = node as u64;
        for (si, s) in self.rels[rel].segs.iter().enumerate() {
            for (near, far, out) in [(&s.out, &s.inc, true), (&s.inc, &s.out, false)] {
                if n >= near.n_nodes {
                    continue;
                }
                let mine = near.neighbours(node, 0)?;
                let mut i = mine.pos;
                while i < mine.end {
                    let nb = mine.targets.get(i);
                    let mut j = i + 1;
                    while j < mine.end && mine.targets.get(j) == nb {
                        j += 1;
                    }
                    if nb < far.n_nodes {
                        let theirs = far.neighbours(nb as u32, 0)?;
                        let lo = theirs.pos
                            + partition(theirs.end - theirs.pos, |k| {
                                theirs.targets.get(theirs.pos + k) < n
                            });
                        for k in 0..j - i {
                            let (a, b) =
                                (mine.base + (i + k) as u64, theirs.base + (lo + k) as u64);
                            if lo + k < theirs.end {
                                if out {
                                    f(si, a, b)
                                } else {
                                    f(si, b, a)
                                }
                            }
                        }
                    }
                    i = j;
                }
            }
        }
        Ok(())
    }

    /// Segment `seg` of relationship type `rel` in edge-id order, for a checkpoint that
    /// merges segments: each relationship's (start, end), and which are deleted (by
    /// position: edge id minus the segment's first).
    pub fn rel_segment_ends(
        &self,
        rel: usize,
        seg: usize,
    ) -> Result<(Vec<(u64, u64)>, Bits), ReadError> {
        let s = &self.rels[rel].segs[seg];
        let n = s.out.n_edges;
        let mut ends = vec![(u64::MAX, u64::MAX); n as usize];
        let mut dead = Bits::new(n);
        let deleted = s.deleted(Direction::Out);
        let mut seen = 0u64;
        let mut bad = false;
        let mut put = |node: u64, nb: u64, e: u64, pos: u64| {
            match ends.get_mut(e as usize) {
                Some(slot) if slot.0 == u64::MAX => *slot = (node, nb),
                _ => bad = true,
            }
            if deleted.is_some_and(|d| d.get(pos)) {
                dead.set(e);
            }
            seen += 1;
        };
        for part in &s.out.parts {
            if let Ok((offsets, targets, eids)) = part.arrays() {
                // Mapped or loaded: the packed arrays in place (a stream reader costs a
                // call per word).
                let f = &part.footer;
                let mut prev = offsets.get(0);
                for node in 0..f.n_nodes {
                    let end = offsets.get(node as usize + 1);
                    if end < prev || end > f.n_edges {
                        return Err(corrupted(&part.file.path, "CSR offsets out of order"));
                    }
                    for i in prev..end {
                        let pos = part.first_entry + i;
                        let e = eids.as_ref().map_or(pos, |x| x.get(i as usize));
                        put(f.first_node + node, targets.get(i as usize), e, pos);
                    }
                    prev = end;
                }
            } else {
                part.scan(&mut |node, nb, e, pos| put(node as u64, nb as u64, e, pos))?;
            }
        }
        drop(put);
        if bad || seen != n {
            return Err(corrupted(
                &s.out.parts[0].file.path,
                "CSR edge ids are not each of the segment's once",
            ));
        }
        Ok((ends, dead))
    }

    /// The property rows of segment `seg` of relationship type `rel` as its own file
    /// stores them (patches of the type's table apply over them by row group): per row
    /// group, its rows and each column's chunk bytes (its columns are a prefix of the
    /// type's: [`Database::rel_segment_prop_columns`]), across the segment's property
    /// files. `None` when the segment has no property file.
    #[allow(clippy::type_complexity)]
    pub fn rel_segment_prop_chunks(
        &self,
        rel: usize,
        seg: usize,
    ) -> Result<Option<Vec<(u64, Vec<Vec<u8>>)>>, ReadError> {
        let Some(files) = self.rel_segment_props(rel, seg) else {
            return Ok(None);
        };
        let mut groups = Vec::new();
        for (file, footer) in files {
            for g in &footer.row_groups {
                let chunks = g
                    .chunks
                    .iter()
                    .map(|&c| file.blob(c).map(|b| b.into_owned()))
                    .collect::<Result<Vec<_>, _>>()?;
                groups.push((g.n_rows, chunks));
            }
        }
        Ok(Some(groups))
    }

    /// How many columns the property file of segment `seg` of relationship type `rel`
    /// has (segments written before a column was added have fewer than the type).
    pub fn rel_segment_prop_columns(&self, rel: usize, seg: usize) -> Option<usize> {
        self.rel_segment_props(rel, seg)
            .and_then(|f| f.iter().map(|(_, footer)| footer.columns.len()).min())
    }

    /// The property files of segment `seg` of type `rel` (one, or its parts).
    fn rel_segment_props(&self, rel: usize, seg: usize) -> Option<&[(SegFile, TableFooter)]> {
        let r = &self.rels[rel];
        let files_of = |s: &RelSegmentMeta| s.props.iter().count() + s.props_parts.len();
        let this = r.meta.segments.get(seg)?;
        this.props.as_ref()?;
        let at: usize = r.meta.segments[..seg].iter().map(files_of).sum();
        r.props.as_ref()?.files.get(at..at + files_of(this))
    }

    /// CSR sizes of a relationship type: (bytes of the out CSRs, bytes of the in CSRs).
    pub fn csr_bytes(&self, rel: usize) -> (u64, u64) {
        let r = &self.rels[rel];
        (
            r.segs.iter().map(|s| s.out.bytes()).sum(),
            r.segs.iter().map(|s| s.inc.bytes()).sum(),
        )
    }

    /// The arrays of id space `space`'s index, in the form its footer says.
    fn id_arrays(&self, space: usize, what: &'static str) -> Result<IdArrays<'_>, ReadError> {
        let idx = &self.ids[space];
        let f = &idx.footer;
        let nodes = (f.nodes, f.nodes_width);
        if let Some((min, first)) = f.dense {
            return Ok(IdArrays::Implied(min, ImpliedNodes::Consecutive(first)));
        }
        if let Some(min) = f.dense_keys {
            let nodes = idx.file.index_nodes(what, nodes, f.n_ids)?;
            return Ok(IdArrays::Implied(min, ImpliedNodes::Listed(nodes)));
        }
        let scalar = match f.id_type {
            IdType::Integer => quiver_common::ScalarType::Long,
            IdType::String => quiver_common::ScalarType::String,
        };
        let (keys, nodes, n) = idx
            .file
            .sorted_keys(what, (f.keys, scalar), nodes, f.n_ids)?;
        Ok(IdArrays::Sorted { keys, nodes, n })
    }

    /// Looks up an external id in id space `space`; `None` if absent.
    pub fn lookup_id(&self, space: usize, key: IdKey<'_>) -> Result<Option<u32>, ReadError> {
        let n_ids = self.ids[space].footer.n_ids;
        Ok(match self.id_arrays(space, "id lookup")? {
            IdArrays::Implied(min, nodes) => match key {
                IdKey::Int(k) if k >= min && (k.wrapping_sub(min) as u64) < n_ids => {
                    Some(nodes.get(k.wrapping_sub(min) as u64))
                }
                _ => None,
            },
            IdArrays::Sorted { keys, nodes, n } => {
                let pos = match key {
                    IdKey::Int(k) => {
                        let p = partition(n, |i| keys.get_i64(i).unwrap_or(i64::MIN) < k);
                        (p < n && keys.get_i64(p) == Some(k)).then_some(p)
                    }
                    IdKey::Str(s) => {
                        let p = partition(n, |i| keys.with_bytes(i, |k| k < s).unwrap_or(true));
                        (p < n && keys.with_bytes(p, |k| k == s) == Some(true)).then_some(p)
                    }
                };
                pos.map(|p| nodes.get(p) as u32)
            }
        })
    }

    /// Every entry of id space `space`'s index, in key order (what an append merges its
    /// new ids into).
    pub fn id_entries(
        &self,
        space: usize,
        f: &mut dyn FnMut(IdKey<'_>, u32),
    ) -> Result<(), ReadError> {
        let (n_ids, id_type) = (self.ids[space].footer.n_ids, self.ids[space].footer.id_type);
        match self.id_arrays(space, "id index")? {
            IdArrays::Implied(min, nodes) => {
                for i in 0..n_ids {
                    f(IdKey::Int(min + i as i64), nodes.get(i));
                }
            }
            IdArrays::Sorted { keys, nodes, n } => {
                for i in 0..n {
                    let node = nodes.get(i) as u32;
                    match id_type {
                        IdType::Integer => f(IdKey::Int(keys.get_i64(i).unwrap_or(i64::MIN)), node),
                        IdType::String => {
                            f(IdKey::Str(&keys.get_bytes(i).unwrap_or_default()), node)
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Declared index `index`: its footer, sorted keys, nodes and entry count.
    #[allow(clippy::type_complexity)]
    fn prop_index_keys(
        &self,
        index: usize,
        what: &'static str,
    ) -> Result<(&PropIndexFooter, ColumnChunk<'_>, Packed<'_>, usize), ReadError> {
        let ix = self
            .prop_idx
            .get(index)
            .ok_or_else(|| ReadError::NotFound {
                kind: "index",
                name: index.to_string(),
            })?;
        let f = &ix.footer;
        let scalar = match f.kind {
            IndexKeyKind::Integer => quiver_common::ScalarType::Long,
            IndexKeyKind::Float => quiver_common::ScalarType::Double,
            IndexKeyKind::String => quiver_common::ScalarType::String,
        };
        let (keys, nodes, n) = ix.file.sorted_keys(
            what,
            (f.keys, scalar),
            (f.nodes, f.nodes_width),
            f.n_entries,
        )?;
        Ok((f, keys, nodes, n))
    }

    /// Every entry of declared index `index` in its order (key, then node):
    /// `f(key, node)`. For a checkpoint that extends the index with new tables' nodes
    /// rather than rebuilding it; needs the file mapped or loaded.
    pub fn index_entries(
        &self,
        index: usize,
        mut f: impl FnMut(IndexKey<'_>, u64),
    ) -> Result<(), ReadError> {
        let (ft, keys, nodes, n) = self.prop_index_keys(index, "index entries")?;
        for i in 0..n {
            let node = nodes.get(i);
            match ft.kind {
                IndexKeyKind::Integer => f(IndexKey::Int(keys.get_i64(i).unwrap_or(0)), node),
                IndexKeyKind::Float => f(IndexKey::Float(keys.get_f64(i).unwrap_or(0.0)), node),
                IndexKeyKind::String => {
                    keys.with_bytes(i, |b| f(IndexKey::Str(b), node));
                }
            }
        }
        Ok(())
    }

    /// Nodes whose indexed property equals `key` in declared index `index` (position in
    /// `manifest().indexes`), in node order. O(log n) in the index size.
    pub fn index_lookup(&self, index: usize, key: IndexKey<'_>) -> Result<Vec<u64>, ReadError> {
        self.index_range(index, Some((key, true)), Some((key, true)))
    }

    /// Nodes whose indexed property lies between `lo` and `hi` (each `(key, inclusive)`,
    /// `None` for unbounded), in node order. Keys of another type than the index's match
    /// nothing.
    pub fn index_range(
        &self,
        index: usize,
        lo: Option<(IndexKey<'_>, bool)>,
        hi: Option<(IndexKey<'_>, bool)>,
    ) -> Result<Vec<u64>, ReadError> {
        use std::cmp::Ordering;
        let (f, keys, nodes, n) = self.prop_index_keys(index, "index lookup")?;
        if n == 0 {
            return Ok(Vec::new());
        }
        // Entry i compared with a key; None when the key's type is not the index's.
        let cmp = |i: usize, key: IndexKey<'_>| -> Option<Ordering> {
            Some(match (f.kind, key) {
                (IndexKeyKind::Integer, IndexKey::Int(k)) => {
                    keys.get_i64(i).unwrap_or(i64::MIN).cmp(&k)
                }
                (IndexKeyKind::Float, IndexKey::Float(k)) => {
                    keys.get_f64(i).unwrap_or(f64::NEG_INFINITY).total_cmp(&k)
                }
                (IndexKeyKind::String, IndexKey::Str(k)) => {
                    keys.with_bytes(i, |v| v.cmp(k)).unwrap_or(Ordering::Less)
                }
                _ => return None,
            })
        };
        for (k, _) in lo.iter().chain(hi.iter()) {
            if cmp(0, *k).is_none() {
                return Ok(Vec::new());
            }
        }
        let start = match lo {
            None => 0,
            Some((k, true)) => partition(n, |i| cmp(i, k) == Some(Ordering::Less)),
            Some((k, false)) => partition(n, |i| cmp(i, k) != Some(Ordering::Greater)),
        };
        let end = match hi {
            None => n,
            Some((k, true)) => partition(n, |i| cmp(i, k) != Some(Ordering::Greater)),
            Some((k, false)) => partition(n, |i| cmp(i, k) == Some(Ordering::Less)),
        };
        let mut out: Vec<u64> = (start..end.max(start)).map(|i| nodes.get(i)).collect();
        out.sort_unstable();
        Ok(out)
    }

    /// Id space index by name (`None` is the global space).
    pub fn id_space(&self, name: Option<&str>) -> Option<usize> {
        self.manifest
            .id_spaces
            .iter()
            .position(|s| s.name.as_deref() == name)
    }

    /// Verifies the checksum of every segment (reads everything).
    pub fn verify(&self) -> Result<(), ReadError> {
        self.files().try_for_each(|f| f.verify())
    }

    /// Total bytes of all segment files.
    pub fn disk_bytes(&self) -> u64 {
        self.files().map(|f| f.len).sum()
    }
}

impl RelType {
    /// Columns and row groups of the property table, across segments.
    pub fn props_footer(&self) -> Option<&TableFooter> {
        self.props.as_ref().map(|p| &p.footer)
    }

    /// CSR footers of every segment: (out, in); of its first part when it has several.
    pub fn csr_footers(&self) -> impl Iterator<Item = (&CsrFooter, &CsrFooter)> {
        self.segs
            .iter()
            .map(|s| (&s.out.parts[0].footer, &s.inc.parts[0].footer))
    }
}

fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}
