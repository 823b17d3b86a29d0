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

enum Backing {
    Mapped(memmap2::Mmap),
    Loaded(Vec<u8>),
    Offline(File),
}

/// One open segment file.
struct SegFile {
    path: PathBuf,
    backing: Backing,
    len: u64,
    trailer: Trailer,
}

/// An id index as read: keys `min .. min + n_ids` implied by position, or sorted keys.
enum IdArrays<'a> {
    Implied(i64, ImpliedNodes<'a>),
    Sorted {
        keys: ColumnChunk<'a>,
        nodes: Packed<'a>,
        n: usize,
    },
}

/// The nodes of implied keys, by position: consecutive from a first node (`dense`), or
/// listed (`dense_keys`).
enum ImpliedNodes<'a> {
    Consecutive(u64),
    Listed(Packed<'a>),
}

impl ImpliedNodes<'_> {
    fn get(&self, pos: u64) -> u32 {
        match self {
            ImpliedNodes::Consecutive(first) => (first + pos) as u32,
            ImpliedNodes::Listed(p) => p.get(pos as usize) as u32,
        }
    }
}

impl SegFile {
    /// The node array of an index: the node of each key, bit-packed.
    fn index_nodes(
        &self,
        what: &'static str,
        (nodes, width): (BlobRef, u32),
        n_entries: u64,
    ) -> Result<Packed<'_>, ReadError> {
        let bytes = self.bytes(what)?;
        let slice = nodes.slice(bytes).map_err(|source| ReadError::Format {
            file: self.path.clone(),
            source,
        })?;
        Packed::new(slice, width, n_entries as usize)
            .ok_or_else(|| corrupted(&self.path, "index nodes"))
    }

    /// The two blobs of an index (id or property): sorted keys as a column chunk and the
    /// node of each key bit-packed; also how many entries both hold.
    fn sorted_keys(
        &self,
        what: &'static str,
        (keys, scalar): (BlobRef, quiver_common::ScalarType),
        nodes: (BlobRef, u32),
        n_entries: u64,
    ) -> Result<(ColumnChunk<'_>, Packed<'_>, usize), ReadError> {
        let bytes = self.bytes(what)?;
        let fmt = |source| ReadError::Format {
            file: self.path.clone(),
            source,
        };
        let dtype = quiver_common::DataType::Scalar(scalar);
        let keys = ColumnChunk::open(keys.slice(bytes).map_err(fmt)?, dtype).map_err(fmt)?;
        let nodes = self.index_nodes(what, nodes, n_entries)?;
        let n = keys.len().min(n_entries as usize);
        Ok((keys, nodes, n))
    }

    fn open<F: serde::de::DeserializeOwned>(
        dir: &Path,
        rel: &str,
        mode: OpenMode,
    ) -> Result<(SegFile, F), OpenError> {
        let path = dir.join(rel);
        let io = |source| OpenError::Io {
            path: path.clone(),
            source,
        };
        let fmt = |source| OpenError::Format {
            file: path.clone(),
            source,
        };
        let mut file = File::open(&path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let (backing, footer_bytes, trailer) = match mode {
            OpenMode::Mapped | OpenMode::Loaded => {
                let backing = if mode == OpenMode::Mapped {
                    // SAFETY: segment files are immutable once published (crate invariant);
                    // nothing truncates or rewrites them while a reader maps them.
                    Backing::Mapped(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?)
                } else {
                    let mut v = Vec::with_capacity(len as usize);
                    file.read_to_end(&mut v).map_err(io)?;
                    Backing::Loaded(v)
                };
                let bytes: &[u8] = match &backing {
                    Backing::Mapped(m) => m,
                    Backing::Loaded(v) => v,
                    Backing::Offline(_) => unreachable!(),
                };
                let (body, footer, trailer) = segment::open_segment(bytes).map_err(fmt)?;
                if mode == OpenMode::Loaded {
                    segment::verify_body(body, &trailer).map_err(fmt)?;
                }
                let footer = footer.to_vec();
                (backing, footer, trailer)
            }
            OpenMode::Offline => {
                if len < TRAILER_LEN as u64 {
                    return Err(OpenError::Corrupted {
                        file: path.clone(),
                        what: "shorter than its trailer".into(),
                    });
                }
                let mut t = [0u8; TRAILER_LEN];
                file.read_exact_at(&mut t, len - TRAILER_LEN as u64)
                    .map_err(io)?;
                let trailer = Trailer::parse(&t).map_err(fmt)?;
                if trailer.footer_len > len - TRAILER_LEN as u64 {
                    return Err(OpenError::Corrupted {
                        file: path.clone(),
                        what: "footer length".into(),
                    });
                }
                let mut footer = vec![0u8; trailer.footer_len as usize];
                file.read_exact_at(&mut footer, len - TRAILER_LEN as u64 - trailer.footer_len)
                    .map_err(io)?;
                if crc32fast::hash(&footer) != trailer.footer_crc {
                    return Err(OpenError::Corrupted {
                        file: path.clone(),
                        what: "footer checksum mismatch".into(),
                    });
                }
                file.seek(SeekFrom::Start(0)).map_err(io)?;
                (Backing::Offline(file), footer, trailer)
            }
        };
        let footer: F =
            serde_json::from_slice(&footer_bytes).map_err(|e| OpenError::Corrupted {
                file: path.clone(),
                what: format!("footer: {e}"),
            })?;
        Ok((
            SegFile {
                path,
                backing,
                len,
                trailer,
            },
            footer,
        ))
    }

    fn bytes(&self, what: &'static str) -> Result<&[u8], ReadError> {
        match &self.backing {
            Backing::Mapped(m) => Ok(m),
            Backing::Loaded(v) => Ok(v),
            Backing::Offline(_) => Err(ReadError::OfflineRandomAccess { what }),
        }
    }

    /// A blob's bytes: borrowed when mapped or loaded, read from the file when offline.
    fn blob(&self, r: BlobRef) -> Result<Cow<'_, [u8]>, ReadError> {
        let fmt = |source| ReadError::Format {
            file: self.path.clone(),
            source,
        };
        match &self.backing {
            Backing::Mapped(m) => Ok(Cow::Borrowed(r.slice(m).map_err(fmt)?)),
            Backing::Loaded(v) => Ok(Cow::Borrowed(r.slice(v).map_err(fmt)?)),
            Backing::Offline(f) => {
                if r.offset.saturating_add(r.len) > self.len {
                    return Err(fmt(quiver_format::FormatError::Corrupted {
                        what: "blob past end of file".into(),
                    }));
                }
                let mut v = vec![0u8; r.len as usize];
                f.read_exact_at(&mut v, r.offset)
                    .map_err(|source| ReadError::Io {
                        path: self.path.clone(),
                        source,
                    })?;
                Ok(Cow::Owned(v))
            }
        }
    }

    /// A sequential reader over a blob (offline streaming).
    fn blob_reader(&self, r: BlobRef) -> Result<Box<dyn Read + '_>, ReadError> {
        match &self.backing {
            // Positioned reads: several streams of one file (offsets, targets, edge ids)
            // advance independently, which a shared file cursor would not allow.
            Backing::Offline(f) => Ok(Box::new(BufReader::with_capacity(
                1 << 20,
                PositionedReader {
                    file: f,
                    pos: r.offset,
                    end: r.offset + r.len,
                },
            ))),
            _ => Ok(Box::new(std::io::Cursor::new(self.blob(r)?))),
        }
    }

    fn verify(&self) -> Result<(), ReadError> {
        let fmt = |source| ReadError::Format {
            file: self.path.clone(),
            source,
        };
        let body_len = self.len - TRAILER_LEN as u64 - self.trailer.footer_len;
        let mut hasher = crc32fast::Hasher::new();
        let mut r = self.blob_reader(BlobRef {
            offset: 0,
            len: body_len,
        })?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = r.read(&mut buf).map_err(|source| ReadError::Io {
                path: self.path.clone(),
                source,
            })?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        if hasher.finalize() != self.trailer.body_crc {
            return Err(fmt(quiver_format::FormatError::Corrupted {
                what: "body checksum mismatch".into(),
            }));
        }
        Ok(())
    }

    fn resident_bytes(&self) -> u64 {
        match &self.backing {
            Backing::Loaded(v) => v.len() as u64,
            _ => 0,
        }
    }
}

struct PositionedReader<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for PositionedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (buf.len() as u64).min(self.end - self.pos) as usize;
        if n == 0 {
            return Ok(0);
        }
        let got = self.file.read_at(&mut buf[..n], self.pos)?;
        self.pos += got as u64;
        Ok(got)
    }
}

/// Typed columns in row groups, over one or more segment files (a table grows by
/// segments: later imports and checkpoints add files beside the first), with the chunks
/// of its patch files standing in for the segments' where a checkpoint rewrote them.
struct Table {
    /// All row groups of all segments, `first_row` counted across segments; columns
    /// are the manifest's (segments' plus patches'), chunk refs the segment's or the
    /// patch's that replaces it (their lengths, for sizes; offsets are per file).
    footer: TableFooter,
    files: Vec<(SegFile, TableFooter)>,
    /// Global row group -> (segment, row group within it).
    rg_map: Vec<(usize, usize)>,
    /// Patch files, oldest first.
    patch_files: Vec<SegFile>,
    /// (global row group, column) -> (patch file, blob), for patched chunks only.
    patched: std::collections::HashMap<(u32, u32), (u32, BlobRef)>,
}

impl Table {
    /// Opens a table's `segments` and `patches`; `columns` are the manifest's.
    fn open(
        dir: &Path,
        segments: &[crate::manifest::SegmentMeta],
        patches: &[crate::manifest::SegmentMeta],
        columns: &[crate::manifest::PropertyMeta],
        mode: OpenMode,
    ) -> Result<Table, OpenError> {
        let mut files = Vec::new();
        let mut rg_map = Vec::new();
        // The table's columns: the manifest's; segments hold a prefix of them (a column
        // a checkpoint added lives in patch files for the row groups before it).
        let mut footer = TableFooter {
            n_rows: 0,
            columns: columns.to_vec(),
            row_groups: Vec::new(),
        };
        // Columns each row group's segment holds itself.
        let mut native: Vec<usize> = Vec::new();
        for (si, seg) in segments.iter().enumerate() {
            let (file, f): (SegFile, TableFooter) = SegFile::open(dir, &seg.file, mode)?;
            if f.columns.len() > footer.columns.len()
                || f.columns[..] != footer.columns[..f.columns.len()]
            {
                return Err(OpenError::Corrupted {
                    file: dir.join(&seg.file),
                    what: "segment columns differ from the table's".into(),
                });
            }
            for (ri, rg) in f.row_groups.iter().enumerate() {
                let mut g = rg.clone();
                g.first_row = footer.n_rows + rg.first_row;
                g.chunks.resize(footer.columns.len(), BlobRef::default());
                footer.row_groups.push(g);
                rg_map.push((si, ri));
                native.push(f.columns.len());
            }
            footer.n_rows += f.n_rows;
            files.push((file, f));
        }
        let mut patch_files = Vec::new();
        let mut patched = std::collections::HashMap::new();
        for (pi, seg) in patches.iter().enumerate() {
            let path = dir.join(&seg.file);
            let bad = |what: &str| OpenError::Corrupted {
                file: path.clone(),
                what: what.into(),
            };
            let (file, f): (SegFile, crate::manifest::PatchFooter) =
                SegFile::open(dir, &seg.file, mode)?;
            if f.columns.len() > footer.columns.len()
                || f.columns[..] != footer.columns[..f.columns.len()]
            {
                return Err(bad("patch columns differ from the table's"));
            }
            for ch in &f.chunks {
                let g = footer
                    .row_groups
                    .get_mut(ch.row_group as usize)
                    .filter(|g| g.n_rows == ch.n_rows && (ch.column as usize) < f.columns.len())
                    .ok_or_else(|| bad("patch chunk outside the table"))?;
                g.chunks[ch.column as usize] = ch.blob;
                patched.insert((ch.row_group as u32, ch.column), (pi as u32, ch.blob));
            }
            patch_files.push(file);
        }
        // Every row group has a chunk of every column, its segment's or a patch's.
        for (rg, &n) in native.iter().enumerate() {
            for c in n..footer.columns.len() {
                if !patched.contains_key(&(rg as u32, c as u32)) {
                    return Err(OpenError::Corrupted {
                        file: patches
                            .last()
                            .map_or_else(|| dir.to_path_buf(), |p| dir.join(&p.file)),
                        what: format!("no chunk of column {c} for row group {rg}"),
                    });
                }
            }
        }
        Ok(Table {
            footer,
            files,
            rg_map,
            patch_files,
            patched,
        })
    }

    /// Where chunk (`rg`, `column`) is stored: the newest patch file that has it, else
    /// its segment's file.
    fn chunk_at(&self, rg: usize, column: usize) -> Result<(&SegFile, BlobRef), ReadError> {
        let &(si, lrg) = self.rg_map.get(rg).ok_or_else(|| ReadError::NotFound {
            kind: "row group",
            name: rg.to_string(),
        })?;
        if !self.patched.is_empty() {
            if let Some(&(pi, blob)) = self.patched.get(&(rg as u32, column as u32)) {
                return Ok((&self.patch_files[pi as usize], blob));
            }
        }
        let (file, footer) = &self.files[si];
        let r = footer
            .row_groups
            .get(lrg)
            .and_then(|g| g.chunks.get(column))
            .ok_or_else(|| ReadError::NotFound {
                kind: "column",
                name: column.to_string(),
            })?;
        Ok((file, *r))
    }

    fn with_chunk<R>(
        &self,
        rg: usize,
        column: usize,
        f: impl FnOnce(&ColumnChunk<'_>) -> R,
    ) -> Result<R, ReadError> {
        let (file, blob) = self.chunk_at(rg, column)?;
        let dtype = self.footer.columns[column].dtype;
        open_chunk(file, blob, dtype, self.footer.row_groups[rg].n_rows, f)
    }

    /// Every file of the table: segments, then patches.
    fn all_files(&self) -> impl Iterator<Item = &SegFile> {
        self.files
            .iter()
            .map(|(f, _)| f)
            .chain(self.patch_files.iter())
    }

    /// The raw bytes of chunk (`rg`, `column`) as stored (for a checkpoint that carries
    /// a patched chunk into a new patch file unchanged).
    fn chunk_bytes(&self, rg: usize, column: usize) -> Result<Cow<'_, [u8]>, ReadError> {
        let (file, blob) = self.chunk_at(rg, column)?;
        file.blob(blob)
    }
}

/// A deletion bitmap: a bit per row or CSR entry. In a mapped database it is read in
/// place from its file (an open reads none of it: after 10% of social 1 was
/// detach-deleted, 7.6 MB of relationship bitmaps made an open 2x a fresh import's);
/// otherwise, and once changed, its words are held.
#[derive(Debug, Clone, Default)]
pub struct Bits {
    words: Words,
    len: u64,
}

#[derive(Clone)]
enum Words {
    Owned(Vec<u64>),
    /// Little-endian words at `offset` of a mapped deletion file (shared by its maps).
    Mapped {
        map: Arc<memmap2::Mmap>,
        offset: usize,
        n: usize,
    },
}

impl Default for Words {
    fn default() -> Self {
        Words::Owned(Vec::new())
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Words::Owned(w) => write!(f, "{} words", w.len()),
            Words::Mapped { n, .. } => write!(f, "{n} mapped words"),
        }
    }
}

impl Words {
    fn len(&self) -> usize {
        match self {
            Words::Owned(w) => w.len(),
            Words::Mapped { n, .. } => *n,
        }
    }

    /// Word `k` (0 past the end).
    #[inline]
    fn get(&self, k: usize) -> u64 {
        match self {
            Words::Owned(w) => w.get(k).copied().unwrap_or(0),
            Words::Mapped { map, offset, n } if k < *n => {
                let at = offset + k * 8;
                u64::from_le_bytes(map[at..at + 8].try_into().unwrap_or([0; 8]))
            }
            Words::Mapped { .. } => 0,
        }
    }

    /// The words, held (a mapped map is copied once, to be changed).
    fn owned(&mut self) -> &mut Vec<u64> {
        if let Words::Mapped { .. } = self {
            *self = Words::Owned((0..self.len()).map(|k| self.get(k)).collect());
        }
        match self {
            Words::Owned(w) => w,
            Words::Mapped { .. } => unreachable!("made owned above"),
        }
    }
}

impl Bits {
    /// `len` bits, none set.
    pub fn new(len: u64) -> Bits {
        Bits {
            words: Words::Owned(vec![0; len.div_ceil(64) as usize]),
            len,
        }
    }

    #[inline]
    pub fn get(&self, i: u64) -> bool {
        self.words.get((i / 64) as usize) >> (i % 64) & 1 == 1
    }

    pub fn set(&mut self, i: u64) {
        if i < self.len {
            self.words.owned()[(i / 64) as usize] |= 1 << (i % 64);
        }
    }

    pub fn clear(&mut self, i: u64) {
        if i < self.len {
            self.words.owned()[(i / 64) as usize] &= !(1 << (i % 64));
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The words (copied out of a mapped file).
    pub fn words(&self) -> Cow<'_, [u64]> {
        match &self.words {
            Words::Owned(w) => Cow::Borrowed(w),
            m => Cow::Owned((0..m.len()).map(|k| m.get(k)).collect()),
        }
    }

    /// Appends, for each bit of `a..b`, whether it is clear (a live row of a deletion
    /// bitmap), a word at a time.
    pub fn clear_into(&self, a: u64, b: u64, out: &mut Vec<bool>) {
        out.reserve((b - a) as usize);
        let mut i = a;
        while i < b {
            let w = self.words.get((i / 64) as usize);
            let (from, to) = (i % 64, (b - (i - i % 64)).min(64));
            out.extend((from..to).map(|k| w >> k & 1 == 0));
            i += to - from;
        }
    }

    /// Set bits in `a..b`.
    pub fn count_range(&self, a: u64, b: u64) -> u64 {
        (a..b.min(self.len)).filter(|&i| self.get(i)).count() as u64
    }

    pub fn count(&self) -> u64 {
        (0..self.words.len())
            .map(|k| self.words.get(k).count_ones() as u64)
            .sum()
    }

    /// Reads the maps of a deletion file.
    fn open(
        dir: &Path,
        meta: &crate::manifest::DeletedMeta,
        mode: OpenMode,
    ) -> Result<Vec<Bits>, OpenError> {
        let rel = &meta.file.file;
        let (file, f): (SegFile, crate::manifest::BitmapFooter) = SegFile::open(dir, rel, mode)?;
        let n = f.len.div_ceil(64) as usize;
        let mut out = Vec::new();
        if let Backing::Mapped(map) = file.backing {
            // Read in place: the bounds checked now, the bits when a read asks.
            let map = Arc::new(map);
            for r in &f.maps {
                let bytes = r.slice(&map).map_err(|e| OpenError::Corrupted {
                    file: dir.join(rel),
                    what: e.to_string(),
                })?;
                if (bytes.len() as u64) < n as u64 * 8 {
                    return Err(OpenError::Corrupted {
                        file: dir.join(rel),
                        what: "deletion bitmap shorter than its length".into(),
                    });
                }
                out.push(Bits {
                    words: Words::Mapped {
                        map: map.clone(),
                        offset: r.offset as usize,
                        n,
                    },
                    len: f.len,
                });
            }
            return Ok(out);
        }
        for r in &f.maps {
            let bytes = file.blob(*r).map_err(|e| OpenError::Corrupted {
                file: dir.join(rel),
                what: e.to_string(),
            })?;
            if (bytes.len() as u64) < f.len.div_ceil(64) * 8 {
                return Err(OpenError::Corrupted {
                    file: dir.join(rel),
                    what: "deletion bitmap shorter than its length".into(),
                });
            }
            let words = bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            out.push(Bits {
                words: Words::Owned(words),
                len: f.len,
            });
        }
        Ok(out)
    }
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

/// One file of a CSR: the entries of nodes `footer.first_node ..` `+ footer.n_nodes`.
struct CsrPart {
    footer: CsrFooter,
    file: SegFile,
    /// Position of the part's first entry among the CSR's.
    first_entry: u64,
}

/// A CSR in one file, or in several (a Spark build writes one a task): parts over
/// consecutive node ranges from node 0, entry positions running on across them.
struct Csr {
    parts: Vec<CsrPart>,
    n_nodes: u64,
    n_edges: u64,
}

/// One segment of a relationship type: CSR both ways over its own edges.
struct RelSeg {
    out: Csr,
    inc: Csr,
    /// Edge id of the segment's edge 0.
    first_edge: u64,
    /// Deleted entries of the out CSR and of the in CSR, by position.
    deleted: Option<[Bits; 2]>,
}

impl RelSeg {
    fn csr(&self, dir: Direction) -> &Csr {
        match dir {
            Direction::Out => &self.out,
            Direction::In => &self.inc,
        }
    }

    fn deleted(&self, dir: Direction) -> Option<&Bits> {
        self.deleted.as_ref().map(|d| match dir {
            Direction::Out => &d[0],
            Direction::In => &d[1],
        })
    }
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

/// The entries of one node in one CSR segment: `pos .. end` index the part's arrays;
/// `base + i` is entry `i`'s position in the whole CSR (what deletion bitmaps mark, and
/// the edge id of an entry without one).
struct Part<'a> {
    targets: Packed<'a>,
    edge_ids: Option<Packed<'a>>,
    pos: usize,
    end: usize,
    base: u64,
    eid_base: u64,
    /// Deleted entries of the segment, skipped.
    deleted: Option<&'a Bits>,
}

impl Part<'_> {
    /// Entry `i`'s edge id within the segment (without `eid_base`).
    #[inline]
    fn raw_eid(&self, i: usize) -> u64 {
        self.edge_ids.map_or(self.base + i as u64, |e| e.get(i))
    }
}

/// The neighbours of one node: (neighbour node id, edge id), segment after segment.
pub struct Neighbours<'a> {
    cur: Option<Part<'a>>,
    /// Further segments (empty, and not allocated, for a single-segment type).
    rest: Vec<Part<'a>>,
}

impl Neighbours<'_> {
    /// Moves to the next entry that is not deleted: its index in `cur`, the part that
    /// holds it when this returns.
    #[inline]
    fn advance(&mut self) -> Option<usize> {
        loop {
            let p = self.cur.as_mut()?;
            while p.pos < p.end {
                let i = p.pos;
                p.pos += 1;
                if p.deleted.is_some_and(|d| d.get(p.base + i as u64)) {
                    continue;
                }
                return Some(i);
            }
            self.cur = if self.rest.is_empty() {
                None
            } else {
                Some(self.rest.remove(0))
            };
        }
    }

    /// The next neighbour's node id alone, its edge id not read (the in CSR's is a
    /// second array): for a search that records only which node reached which.
    #[inline]
    pub fn next_target(&mut self) -> Option<u32> {
        let i = self.advance()?;
        Some(self.cur.as_ref()?.targets.get(i) as u32)
    }
}

impl Iterator for Neighbours<'_> {
    type Item = (u32, u64);
    #[inline]
    fn next(&mut self) -> Option<(u32, u64)> {
        let i = self.advance()?;
        let p = self.cur.as_ref()?;
        Some((p.targets.get(i) as u32, p.eid_base + p.raw_eid(i)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.cur.as_ref().map_or(0, |p| p.end - p.pos)
            + self.rest.iter().map(|p| p.end - p.pos).sum::<usize>();
        let deletions = self
            .cur
            .iter()
            .chain(&self.rest)
            .any(|p| p.deleted.is_some());
        (if deletions { 0 } else { n }, Some(n))
    }
}

fn corrupted(file: &Path, what: &str) -> ReadError {
    ReadError::Format {
        file: file.to_path_buf(),
        source: quiver_format::FormatError::Corrupted {
            what: what.to_string(),
        },
    }
}

impl CsrPart {
    fn packed<'a>(
        &self,
        bytes: &'a [u8],
        r: BlobRef,
        width: u32,
        n: u64,
    ) -> Result<Packed<'a>, ReadError> {
        let b = r.slice(bytes).map_err(|source| ReadError::Format {
            file: self.file.path.clone(),
            source,
        })?;
        Packed::new(b, width, n as usize)
            .ok_or_else(|| corrupted(&self.file.path, "packed array too short"))
    }

    /// The part's three arrays in place (mapped or loaded).
    #[allow(clippy::type_complexity)]
    fn arrays(&self) -> Result<(Packed<'_>, Packed<'_>, Option<Packed<'_>>), ReadError> {
        let bytes = self.file.bytes("neighbours of a node")?;
        let f = &self.footer;
        let offsets = self.packed(bytes, f.offsets, f.offsets_width, f.n_nodes + 1)?;
        let targets = self.packed(bytes, f.targets, f.targets_width, f.n_edges)?;
        let edge_ids = match f.edge_ids {
            Some(r) => Some(self.packed(bytes, r, f.edge_ids_width, f.n_edges)?),
            None => None,
        };
        Ok((offsets, targets, edge_ids))
    }

    /// Streams every entry in node order: `f(node, neighbour, raw edge id, position)`,
    /// positions and ids counted across the CSR's parts.
    fn scan(&self, f: &mut dyn FnMut(u32, u32, u64, u64)) -> Result<(), ReadError> {
        let ft = &self.footer;
        let io = |source| ReadError::Io {
            path: self.file.path.clone(),
            source,
        };
        let mut offsets = StreamUnpacker::new(self.file.blob_reader(ft.offsets)?, ft.offsets_width);
        let mut targets = StreamUnpacker::new(self.file.blob_reader(ft.targets)?, ft.targets_width);
        let mut eids = match ft.edge_ids {
            Some(r) => Some(StreamUnpacker::new(
                self.file.blob_reader(r)?,
                ft.edge_ids_width,
            )),
            None => None,
        };
        let mut prev = offsets.next().map_err(io)?;
        let mut pos = self.first_entry;
        for node in 0..ft.n_nodes {
            let end = offsets.next().map_err(io)?;
            if end < prev || end > ft.n_edges {
                return Err(corrupted(&self.file.path, "CSR offsets out of order"));
            }
            for _ in prev..end {
                let t = targets.next().map_err(io)?;
                let e = match &mut eids {
                    Some(u) => u.next().map_err(io)?,
                    None => pos,
                };
                f((ft.first_node + node) as u32, t as u32, e, pos);
                pos += 1;
            }
            prev = end;
        }
        Ok(())
    }
}

impl Csr {
    /// A CSR of the parts opened (in node order), checked to follow one another.
    fn new(parts: Vec<(SegFile, CsrFooter)>) -> Result<Csr, OpenError> {
        let mut out = Vec::with_capacity(parts.len());
        let (mut n_nodes, mut n_edges) = (0u64, 0u64);
        let edge_ids = parts.first().is_some_and(|(_, f)| f.edge_ids.is_some());
        for (file, footer) in parts {
            if footer.first_node != n_nodes || footer.edge_ids.is_some() != edge_ids {
                return Err(OpenError::Corrupted {
                    file: file.path.clone(),
                    what: format!(
                        "a CSR part must start at node {n_nodes} (it starts at {}) and \
                         carry edge ids as the first part does",
                        footer.first_node
                    ),
                });
            }
            n_nodes += footer.n_nodes;
            let first_entry = n_edges;
            n_edges += footer.n_edges;
            out.push(CsrPart {
                footer,
                file,
                first_entry,
            });
        }
        Ok(Csr {
            parts: out,
            n_nodes,
            n_edges,
        })
    }

    /// Whether entries carry explicit edge ids (every part does, or none: `new` checks).
    fn edge_ids(&self) -> bool {
        self.parts[0].footer.edge_ids.is_some()
    }

    /// The part that holds `node`'s entries (`node < n_nodes`).
    #[inline]
    fn part(&self, node: u64) -> &CsrPart {
        if self.parts.len() == 1 {
            return &self.parts[0];
        }
        let i = self
            .parts
            .partition_point(|p| p.footer.first_node + p.footer.n_nodes <= node);
        &self.parts[i.min(self.parts.len() - 1)]
    }

    fn neighbours(&self, node: u32, eid_base: u64) -> Result<Part<'_>, ReadError> {
        if node as u64 >= self.n_nodes {
            return Err(ReadError::NodeOutOfRange {
                id: node as u64,
                n_nodes: self.n_nodes,
            });
        }
        let part = self.part(node as u64);
        let (offsets, targets, edge_ids) = part.arrays()?;
        let local = (node as u64 - part.footer.first_node) as usize;
        let (s, e) = (offsets.get(local) as usize, offsets.get(local + 1) as usize);
        if s > e || e as u64 > part.footer.n_edges {
            return Err(corrupted(&part.file.path, "CSR offsets out of order"));
        }
        Ok(Part {
            targets,
            edge_ids,
            pos: s,
            end: e,
            base: part.first_entry,
            eid_base,
            deleted: None,
        })
    }

    /// Hints the CPU to load what [`neighbours`](Self::neighbours) of `node` reads
    /// first: its offsets, or with `targets` the start of its entries (which reads the
    /// offsets: hint them first, a little earlier).
    fn prefetch(&self, node: u32, targets: bool) {
        if node as u64 >= self.n_nodes {
            return;
        }
        let part = self.part(node as u64);
        let Ok((offsets, t, e)) = part.arrays() else {
            return;
        };
        let local = (node as u64 - part.footer.first_node) as usize;
        if local + 1 >= offsets.len() {
            return;
        }
        if !targets {
            offsets.prefetch(local);
            return;
        }
        let s = offsets.get(local) as usize;
        if s < t.len() {
            t.prefetch(s);
            if let Some(e) = e {
                e.prefetch(s);
            }
        }
    }

    fn degree(&self, node: u32, deleted: Option<&Bits>) -> Result<u64, ReadError> {
        let p = self.neighbours(node, 0)?;
        let gone = deleted.map_or(0, |d| {
            d.count_range(p.base + p.pos as u64, p.base + p.end as u64)
        });
        Ok((p.end - p.pos) as u64 - gone)
    }

    /// Streams every entry in node order: `f(node, neighbour, edge_id)`, skipping
    /// `deleted` positions.
    fn scan(
        &self,
        eid_base: u64,
        deleted: Option<&Bits>,
        mut f: impl FnMut(u32, u32, u64),
    ) -> Result<(), ReadError> {
        for part in &self.parts {
            part.scan(&mut |node, t, e, pos| {
                if !deleted.is_some_and(|d| d.get(pos)) {
                    f(node, t, eid_base + e);
                }
            })?;
        }
        Ok(())
    }

    fn files(&self) -> impl Iterator<Item = &SegFile> {
        self.parts.iter().map(|p| &p.file)
    }

    fn bytes(&self) -> u64 {
        self.files().map(|f| f.len).sum()
    }
}

/// Sequential bit-unpacking from a byte stream (offline scans hold no offsets in memory).
struct StreamUnpacker<'a> {
    r: Box<dyn Read + 'a>,
    width: u32,
    acc: u128,
    bits: u32,
}

impl<'a> StreamUnpacker<'a> {
    fn new(r: Box<dyn Read + 'a>, width: u32) -> Self {
        StreamUnpacker {
            r,
            width,
            acc: 0,
            bits: 0,
        }
    }

    #[inline]
    fn next(&mut self) -> std::io::Result<u64> {
        if self.width == 0 {
            return Ok(0);
        }
        while self.bits < self.width {
            let mut b = [0u8; 1];
            self.r.read_exact(&mut b)?;
            self.acc |= (b[0] as u128) << self.bits;
            self.bits += 8;
        }
        let mask = if self.width == 64 {
            u64::MAX
        } else {
            (1u64 << self.width) - 1
        };
        let v = self.acc as u64 & mask;
        self.acc >>= self.width;
        self.bits -= self.width;
        Ok(v)
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

/// Runs `f` on the chunk at `r` in `file`, checked to hold `n_rows` values.
fn open_chunk<R>(
    file: &SegFile,
    r: BlobRef,
    dtype: quiver_common::DataType,
    n_rows: u64,
    f: impl FnOnce(&ColumnChunk<'_>) -> R,
) -> Result<R, ReadError> {
    let bytes = file.blob(r)?;
    let chunk = ColumnChunk::open(&bytes, dtype).map_err(|source| ReadError::Format {
        file: file.path.clone(),
        source,
    })?;
    if chunk.len() as u64 != n_rows {
        return Err(corrupted(
            &file.path,
            "column chunk row count differs from its row group",
        ));
    }
    Ok(f(&chunk))
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
