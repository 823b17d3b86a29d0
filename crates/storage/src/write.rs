//! Writing a new generation and publishing it atomically.
//!
//! A new database is staged in a hidden sibling directory (`.name.staging-<pid>`) and
//! renamed into place: until that rename there is no database at the path. Replacing an
//! existing database (`--overwrite`) writes a new generation folder inside it and then
//! replaces `CURRENT` by rename, so readers see the old or the new generation, never a mix.
//! A killed writer leaves a staging directory or an unreferenced generation folder; the
//! next writer removes them (after taking the lock), so nothing trips the next run.

use crate::error::{IoContext, WriteError};
use crate::fsio::{self, SegmentFile};
use crate::manifest::{
    CsrFooter, IdIndexFooter, IdType, Manifest, PropertyMeta, RowGroupMeta, SegmentMeta,
    TableFooter,
};
use quiver_format::bitpack::{bits_for, BitWriter};
use quiver_format::column::{ColumnBuilder, EncodeMemo};
use quiver_format::segment::{BlobRef, SegmentWriter};
use rayon::prelude::*;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub const CURRENT: &str = "CURRENT";
pub const LOCK: &str = "LOCK";
const STAGING_MARK: &str = ".staging-";

fn fsync_dir(path: &Path) -> Result<(), WriteError> {
    fsio::sync_dir(path).at(path)
}

fn lock_file(path: &Path) -> Result<File, WriteError> {
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .at(path)?;
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a valid descriptor; LOCK_NB makes it fail instead of waiting.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(WriteError::Locked {
            path: path.parent().unwrap_or(path).to_path_buf(),
        });
    }
    Ok(f)
}

/// Takes the database's writer lock (held while the returned file is open); fails with
/// [`WriteError::Locked`] when another writer holds it.
pub fn lock_database(db: &Path) -> Result<File, WriteError> {
    lock_file(&db.join(LOCK))
}

fn pid_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    unsafe { libc::kill(pid as i32, 0) == 0 || *libc::__errno_location() != libc::ESRCH }
}

/// Reads `CURRENT`: the manifest file name and its checksum.
pub fn read_current(db: &Path) -> std::io::Result<Option<(String, u32)>> {
    let text = match fs::read_to_string(db.join(CURRENT)) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut parts = text.split_whitespace();
    let name = parts.next().unwrap_or("").to_string();
    let crc = parts
        .next()
        .and_then(|c| u32::from_str_radix(c, 16).ok())
        .unwrap_or(0);
    Ok(Some((name, crc)))
}

enum Target {
    /// A new database staged at `staging`, renamed to `final_dir` on publish.
    New {
        staging: PathBuf,
        final_dir: PathBuf,
    },
    /// A new generation inside an existing database.
    Existing { db: PathBuf },
    /// Files for a later generation to take in, in a folder of their own (never
    /// published; removed when dropped).
    Private { dir: PathBuf },
    /// A folder that many writers (a Spark job's tasks, other processes) fill with
    /// parts and one publish later takes in: never published, kept when dropped.
    Parts { dir: PathBuf },
}

/// A generation being written.
pub struct Staging {
    target: Target,
    /// Directory that holds `CURRENT` (the staging dir or the database).
    root: PathBuf,
    generation: u64,
    gen_dir_name: String,
    /// `None` when the caller holds the database's lock (an open writable store).
    _lock: Option<File>,
    published: bool,
}

impl Staging {
    /// Starts writing `db`. Refuses an existing database unless `overwrite`.
    pub fn begin(db: &Path, overwrite: bool) -> Result<Staging, WriteError> {
        let db = db.to_path_buf();
        let parent = match db.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = db
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .ok_or_else(|| WriteError::NotEmpty { path: db.clone() })?;
        fsio::create_dir_all(&parent).at(&parent)?;
        cleanup_stale_staging(&parent, &name);
        if db.exists() {
            let is_db = db.join(CURRENT).exists();
            let empty = fs::read_dir(&db).at(&db)?.next().is_none();
            if is_db && !overwrite {
                return Err(WriteError::Exists { path: db });
            }
            if !is_db && !empty {
                // A directory left by a killed first import has a LOCK and generation
                // folders but no CURRENT: that is ours to reuse.
                let ours = fs::read_dir(&db).at(&db)?.flatten().all(|e| {
                    let n = e.file_name().to_string_lossy().to_string();
                    n == LOCK || is_generation_dir(&n) || parse_generation(&n).is_some()
                });
                if !ours {
                    return Err(WriteError::NotEmpty { path: db });
                }
            }
            if is_db || !empty {
                let lock = lock_file(&db.join(LOCK))?;
                let generation = match read_current(&db).at(&db)? {
                    Some((m, _)) => parse_generation(&m).unwrap_or(0) + 1,
                    None => 1,
                };
                remove_unreferenced(&db);
                let gen_dir_name = format!("g{generation:06}");
                let _ = fs::remove_dir_all(db.join(&gen_dir_name));
                fsio::create_dir(db.join(&gen_dir_name)).at(&db.join(&gen_dir_name))?;
                return Ok(Staging {
                    root: db.clone(),
                    target: Target::Existing { db },
                    generation,
                    gen_dir_name,
                    _lock: Some(lock),
                    published: false,
                });
            }
            fs::remove_dir(&db).at(&db)?;
        }
        // Unique within the process too: a server runs several writers at once.
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let staging = parent.join(format!(".{name}{STAGING_MARK}{}-{seq}", std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        fsio::create_dir(&staging).at(&staging)?;
        let lock = lock_file(&staging.join(LOCK))?;
        let gen_dir_name = "g000001".to_string();
        fsio::create_dir(staging.join(&gen_dir_name)).at(&staging)?;
        Ok(Staging {
            root: staging.clone(),
            target: Target::New {
                staging,
                final_dir: db,
            },
            generation: 1,
            gen_dir_name,
            _lock: Some(lock),
            published: false,
        })
    }

    /// Starts a new generation of the existing database `db` whose `LOCK` the caller
    /// already holds (see [`lock_database`]).
    pub fn begin_held(db: &Path) -> Result<Staging, WriteError> {
        let generation = match read_current(db).at(db)? {
            Some((m, _)) => parse_generation(&m).unwrap_or(0) + 1,
            None => {
                return Err(WriteError::NotEmpty {
                    path: db.to_path_buf(),
                })
            }
        };
        remove_unreferenced(db);
        let gen_dir_name = format!("g{generation:06}");
        let _ = fs::remove_dir_all(db.join(&gen_dir_name));
        fsio::create_dir(db.join(&gen_dir_name)).at(&db.join(&gen_dir_name))?;
        Ok(Staging {
            root: db.to_path_buf(),
            target: Target::Existing {
                db: db.to_path_buf(),
            },
            generation,
            gen_dir_name,
            _lock: None,
            published: false,
        })
    }

    /// Files under `<db>/<folder>` (a folder the database removes at open, such as
    /// its bulk folder) for a writer that moves them into a generation it publishes
    /// itself: a live database's append. The generation number is the next one's, for
    /// names; [`Staging::publish`] refuses it, and dropping it removes the folder with
    /// what is still in it.
    pub fn private(db: &Path, folder: &str) -> Result<Staging, WriteError> {
        let generation = match read_current(db).at(db)? {
            Some((m, _)) => parse_generation(&m).unwrap_or(0) + 1,
            None => {
                return Err(WriteError::NotEmpty {
                    path: db.to_path_buf(),
                })
            }
        };
        let dir = db.join(folder);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).at(&dir)?;
        Ok(Staging {
            root: db.to_path_buf(),
            target: Target::Private { dir },
            generation,
            gen_dir_name: folder.to_string(),
            _lock: None,
            published: false,
        })
    }

    /// Files in the shared folder `dir` (made if missing, kept as it is otherwise),
    /// named relative to its parent: one writer of a database built in parts, whose
    /// files a publish elsewhere takes in. Dropping it leaves the folder.
    pub fn parts(dir: &Path) -> Result<Staging, WriteError> {
        let (root, name) = match (dir.parent(), dir.file_name()) {
            (Some(p), Some(n)) => (p.to_path_buf(), n.to_string_lossy().to_string()),
            _ => {
                return Err(WriteError::NotEmpty {
                    path: dir.to_path_buf(),
                })
            }
        };
        fs::create_dir_all(dir).at(dir)?;
        Ok(Staging {
            root,
            target: Target::Parts {
                dir: dir.to_path_buf(),
            },
            generation: 0,
            gen_dir_name: name,
            _lock: None,
            published: false,
        })
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The directory the files' names are relative to (what a manifest of them is
    /// opened against before it is published).
    pub fn root(&self) -> PathBuf {
        self.root.clone()
    }

    /// The path of a new file in this generation, and its name relative to the database.
    pub fn file(&self, name: &str) -> (PathBuf, String) {
        let rel = format!("{}/{name}", self.gen_dir_name);
        (self.root.join(&rel), rel)
    }

    /// Makes the generation the database's current one: fsyncs, writes the manifest and
    /// switches `CURRENT` (or renames the staged database into place).
    pub fn publish(mut self, manifest: &Manifest) -> Result<PathBuf, WriteError> {
        if let Target::Private { dir } | Target::Parts { dir } = &self.target {
            return Err(WriteError::Io {
                path: dir.clone(),
                source: std::io::Error::other("a private staging folder is never published"),
            });
        }
        let gen_dir = self.root.join(&self.gen_dir_name);
        for e in fs::read_dir(&gen_dir).at(&gen_dir)?.flatten() {
            fsio::sync_path(&e.path()).at(&e.path())?;
        }
        fsync_dir(&gen_dir)?;
        let manifest_name = format!("manifest-{:06}.json", self.generation);
        let json = serde_json::to_vec_pretty(manifest).map_err(|e| WriteError::Io {
            path: self.root.join(&manifest_name),
            source: std::io::Error::other(e),
        })?;
        let mpath = self.root.join(&manifest_name);
        write_synced(&mpath, &json)?;
        let current = format!("{manifest_name} {:08x}\n", crc32fast::hash(&json));
        let tmp = self.root.join("CURRENT.tmp");
        write_synced(&tmp, current.as_bytes())?;
        fsio::rename(&tmp, &self.root.join(CURRENT)).at(&tmp)?;
        if matches!(self.target, Target::Existing { .. }) {
            // `CURRENT` names the new generation from here on: whatever fails next,
            // the guard must not delete it.
            self.published = true;
        }
        fsync_dir(&self.root)?;
        match &self.target {
            Target::New { staging, final_dir } => {
                fsio::rename(staging, final_dir).at(final_dir)?;
                // The database is in place under its name; the staging path is gone.
                self.published = true;
                if let Some(p) = final_dir.parent() {
                    if !p.as_os_str().is_empty() {
                        fsync_dir(p)?;
                    }
                }
                Ok(final_dir.clone())
            }
            Target::Existing { db } => {
                remove_unreferenced(db);
                Ok(db.clone())
            }
            Target::Private { dir } | Target::Parts { dir } => Ok(dir.clone()),
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if self.published {
            return;
        }
        match &self.target {
            Target::New { staging, .. } => {
                let _ = fs::remove_dir_all(staging);
            }
            Target::Existing { db } => {
                let _ = fs::remove_dir_all(db.join(&self.gen_dir_name));
            }
            Target::Private { dir } => {
                let _ = fs::remove_dir_all(dir);
            }
            Target::Parts { .. } => {}
        }
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    fsio::write_synced(path, bytes).at(path)
}

fn parse_generation(manifest_name: &str) -> Option<u64> {
    manifest_name
        .strip_prefix("manifest-")?
        .strip_suffix(".json")?
        .parse()
        .ok()
}

/// A generation folder's name: `g` and its number (`g000001`).
fn is_generation_dir(n: &str) -> bool {
    n.strip_prefix('g')
        .is_some_and(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()))
}

/// Removes staging directories of dead writers for database `name` in `parent`. A
/// staging directory is in use while its writer holds the flock on its `LOCK` (a
/// writer in this process or another): one whose lock can be taken is stale. One
/// without a `LOCK` (killed before it made one) is stale once its process is gone.
fn cleanup_stale_staging(parent: &Path, name: &str) {
    let prefix = format!(".{name}{STAGING_MARK}");
    let Ok(rd) = fs::read_dir(parent) else { return };
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        let Some(tag) = n.strip_prefix(&prefix) else {
            continue;
        };
        let Some(pid) = tag.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let lock = e.path().join(LOCK);
        // Held while we remove the folder, so no writer can start using it meanwhile.
        let held = lock.exists().then(|| lock_file(&lock).ok());
        let stale = match &held {
            Some(guard) => guard.is_some(),
            None => pid != std::process::id() && !pid_alive(pid),
        };
        if stale {
            let _ = fs::remove_dir_all(e.path());
        }
        drop(held);
    }
}

/// Removes generation folders and manifests that `CURRENT` does not name, and in the
/// older folders it still names, the segment files it does not (a table a checkpoint
/// compacted, a deletion bitmap or patch rewritten since): a database's disk follows
/// what its current generation holds.
fn remove_unreferenced(db: &Path) {
    let current = read_current(db).ok().flatten().map(|(m, _)| m);
    let keep_gen = current.as_deref().and_then(parse_generation);
    // A generation may reference files of earlier ones (an index added to an imported
    // database): keep every generation directory the current manifest names.
    let mut keep_dirs: Vec<String> = Vec::new();
    let mut named: std::collections::HashSet<String> = Default::default();
    if let Some(m) = &current {
        match fs::read(db.join(m))
            .ok()
            .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
        {
            Some(man) => {
                for f in man.files() {
                    if let Some((d, _)) = f.split_once('/') {
                        keep_dirs.push(d.to_string());
                    }
                    named.insert(f.to_string());
                }
            }
            // Unreadable manifest: remove nothing.
            None => return,
        }
    }
    // (A process that maps a file keeps its pages after the unlink, as it keeps a
    // removed generation's.)
    for d in &keep_dirs {
        if Some(d.as_str()) == keep_gen.map(|g| format!("g{g:06}")).as_deref() {
            continue;
        }
        let Ok(rd) = fs::read_dir(db.join(d)) else {
            continue;
        };
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if n.ends_with(".seg") && !named.contains(&format!("{d}/{n}")) {
                let _ = fs::remove_file(e.path());
            }
        }
    }
    let Ok(rd) = fs::read_dir(db) else { return };
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        if let Some(g) = n.strip_prefix('g').and_then(|g| g.parse::<u64>().ok()) {
            if Some(g) != keep_gen && !keep_dirs.contains(&n) {
                let _ = fs::remove_dir_all(e.path());
            }
        } else if n.starts_with("manifest-") && Some(n.as_str()) != current.as_deref()
            || n == "CURRENT.tmp"
        {
            let _ = fs::remove_file(e.path());
        }
    }
}

// ---------------------------------------------------------------------------------------
// Segment writers

const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// A segment being written: checksummed blobs over a [`SegmentFile`] (direct writes from
/// a thread of its own).
type Out = SegmentWriter<SegmentFile>;

fn create(path: &Path) -> Result<Out, WriteError> {
    Ok(SegmentWriter::new(SegmentFile::create(path).at(path)?))
}

fn finish<F: serde::Serialize>(
    w: Out,
    footer: &F,
    path: &Path,
    rel: String,
) -> Result<SegmentMeta, WriteError> {
    let (out, bytes) = w.finish(footer).at(path)?;
    let written = out.finish().at(path)?;
    debug_assert_eq!(written, bytes);
    Ok(SegmentMeta { file: rel, bytes })
}

/// Writes a table of typed columns, one row group at a time.
pub struct TableWriter {
    path: PathBuf,
    rel: String,
    w: Out,
    footer: TableFooter,
    /// Each column's encoding choices, kept across row groups.
    memos: Vec<EncodeMemo>,
    /// The buffers columns are encoded into, one per column encoded at once, kept
    /// across row groups: a fresh buffer per column faulted its pages in again for
    /// every group (a 15 MB string column encoded at 1 GB/s, page faults most of it).
    bufs: Vec<Vec<u8>>,
}

impl TableWriter {
    pub fn create(
        staging: &Staging,
        name: &str,
        columns: Vec<PropertyMeta>,
    ) -> Result<Self, WriteError> {
        let (path, rel) = staging.file(name);
        Self::create_at(path, rel, columns)
    }

    /// A table written at `path` outside any staging generation (a bulk write that a
    /// later checkpoint moves into its generation); `rel` is the name its
    /// [`SegmentMeta`] gets.
    pub fn create_at(
        path: PathBuf,
        rel: String,
        columns: Vec<PropertyMeta>,
    ) -> Result<Self, WriteError> {
        Ok(TableWriter {
            w: create(&path)?,
            path,
            rel,
            memos: columns.iter().map(|_| EncodeMemo::default()).collect(),
            footer: TableFooter {
                n_rows: 0,
                columns,
                row_groups: Vec::new(),
            },
            bufs: Vec::new(),
        })
    }

    /// Encodes the columns (in parallel) and appends them as one row group.
    pub fn write_row_group(&mut self, columns: &[ColumnBuilder]) -> Result<(), WriteError> {
        debug_assert_eq!(columns.len(), self.footer.columns.len());
        let n_rows = columns.first().map_or(0, |c| c.len()) as u64;
        debug_assert!(columns.iter().all(|c| c.len() as u64 == n_rows));
        if n_rows == 0 {
            return Ok(());
        }
        // Encode as many columns at once as there are threads, and write them before
        // encoding the next ones: the encoded copy in memory is a few columns, not the
        // whole row group.
        let width = rayon::current_num_threads().max(1);
        self.bufs.resize_with(width.min(columns.len()), Vec::new);
        let mut chunks = Vec::with_capacity(columns.len());
        for (group, memos) in columns.chunks(width).zip(self.memos.chunks_mut(width)) {
            let bufs = &mut self.bufs[..group.len()];
            group
                .par_iter()
                .zip(memos.par_iter_mut())
                .zip(bufs.par_iter_mut())
                .for_each(|((c, memo), out)| {
                    out.clear();
                    out.reserve(c.encoded_len_bound());
                    c.encode_with(out, memo);
                });
            for b in bufs.iter() {
                chunks.push(self.w.write_blob(b).at(&self.path)?);
            }
        }
        self.footer.row_groups.push(RowGroupMeta {
            first_row: self.footer.n_rows,
            n_rows,
            chunks,
        });
        self.footer.n_rows += n_rows;
        Ok(())
    }

    /// Appends a row group of `n_rows` whose column chunks are encoded already (as
    /// another table stores them: a checkpoint that merges segments copies them).
    pub fn copy_row_group(&mut self, n_rows: u64, chunks: &[Vec<u8>]) -> Result<(), WriteError> {
        debug_assert_eq!(chunks.len(), self.footer.columns.len());
        let mut refs = Vec::with_capacity(chunks.len());
        for c in chunks {
            refs.push(self.w.write_blob(c).at(&self.path)?);
        }
        self.footer.row_groups.push(RowGroupMeta {
            first_row: self.footer.n_rows,
            n_rows,
            chunks: refs,
        });
        self.footer.n_rows += n_rows;
        Ok(())
    }

    pub fn n_rows(&self) -> u64 {
        self.footer.n_rows
    }

    pub fn finish(self) -> Result<SegmentMeta, WriteError> {
        finish(self.w, &self.footer, &self.path, self.rel)
    }
}

/// Writes a deletion file: `maps` bitmaps (as `u64` words) of `len` bits each.
pub fn write_bitmaps(
    staging: &Staging,
    name: &str,
    len: u64,
    maps: &[&[u64]],
) -> Result<SegmentMeta, WriteError> {
    let (path, rel) = staging.file(name);
    let mut w = create(&path)?;
    let mut refs = Vec::with_capacity(maps.len());
    for m in maps {
        let words = len.div_ceil(64) as usize;
        let mut bytes = Vec::with_capacity(words * 8);
        for i in 0..words {
            bytes.extend_from_slice(&m.get(i).copied().unwrap_or(0).to_le_bytes());
        }
        refs.push(w.write_blob(&bytes).at(&path)?);
    }
    let footer = crate::manifest::BitmapFooter { len, maps: refs };
    finish(w, &footer, &path, rel)
}

/// Writes a patch file: column chunks that stand in for a table's (see
/// [`crate::manifest::PatchFooter`]).
pub struct PatchWriter {
    path: PathBuf,
    rel: String,
    w: Out,
    chunks: Vec<crate::manifest::PatchChunk>,
}

impl PatchWriter {
    pub fn create(staging: &Staging, name: &str) -> Result<Self, WriteError> {
        let (path, rel) = staging.file(name);
        Ok(PatchWriter {
            w: create(&path)?,
            path,
            rel,
            chunks: Vec::new(),
        })
    }

    /// Appends an encoded chunk of `n_rows` values for (`row_group`, `column`).
    pub fn write_chunk(
        &mut self,
        row_group: u64,
        column: u32,
        n_rows: u64,
        encoded: &[u8],
    ) -> Result<(), WriteError> {
        let blob = self.w.write_blob(encoded).at(&self.path)?;
        self.chunks.push(crate::manifest::PatchChunk {
            row_group,
            column,
            n_rows,
            blob,
        });
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Finishes the file; `columns` are the table's as of this patch.
    pub fn finish(self, columns: Vec<PropertyMeta>) -> Result<SegmentMeta, WriteError> {
        let footer = crate::manifest::PatchFooter {
            columns,
            chunks: self.chunks,
        };
        finish(self.w, &footer, &self.path, self.rel)
    }
}

/// Writes one direction of a CSR: offsets from the degrees, then the neighbour lists in
/// node order, streamed.
/// Where a CSR part sits: its first node, and the nodes and edges of the whole CSR.
#[derive(Debug, Clone, Copy)]
pub struct CsrPartOf {
    pub first_node: u64,
    pub n_nodes: u64,
    pub n_edges: u64,
}

pub struct CsrWriter {
    path: PathBuf,
    rel: String,
    w: Out,
    footer: CsrFooter,
    targets: BitWriter,
    /// Packed target bytes waiting to be written (one `write_raw` per 64 KiB, not per word).
    buf: Vec<u8>,
    /// Edge ids stream to a side file (they follow the targets in the segment) and are
    /// copied in on `finish`.
    edge_ids: Option<(PathBuf, BufWriter<File>, BitWriter)>,
    written: u64,
}

impl CsrWriter {
    /// `degrees[v]` is the number of entries of node `v`; `with_edge_ids` when entries
    /// need an explicit edge id (they are written to a side file and appended).
    pub fn create(
        staging: &Staging,
        name: &str,
        degrees: &[u32],
        n_edges: u64,
        with_edge_ids: bool,
    ) -> Result<Self, WriteError> {
        let all = CsrPartOf {
            first_node: 0,
            n_nodes: degrees.len() as u64,
            n_edges,
        };
        Self::create_part(staging, name, degrees, n_edges, all, with_edge_ids)
    }

    /// One part of a CSR written in parts: the entries of nodes `whole.first_node ..`
    /// `+ degrees.len()`, `n_edges` of them, in a CSR over `whole.n_nodes` nodes and
    /// `whole.n_edges` edges (what sizes its targets and edge ids).
    pub fn create_part(
        staging: &Staging,
        name: &str,
        degrees: &[u32],
        n_edges: u64,
        whole: CsrPartOf,
        with_edge_ids: bool,
    ) -> Result<Self, WriteError> {
        let (path, rel) = staging.file(name);
        let mut w = create(&path)?;
        let n_nodes = degrees.len() as u64;
        let offsets_width = bits_for(n_edges);
        let start = w.position();
        let mut bw = BitWriter::new(offsets_width);
        let mut acc = 0u64;
        let mut buf = Vec::with_capacity(1 << 16);
        bw.push_to_vec(0, &mut buf);
        for &d in degrees {
            acc += d as u64;
            bw.push_to_vec(acc, &mut buf);
            if buf.len() >= 1 << 16 {
                w.write_raw(&buf).at(&path)?;
                buf.clear();
            }
        }
        debug_assert_eq!(acc, n_edges);
        bw.finish_to_vec(&mut buf);
        w.write_raw(&buf).at(&path)?;
        let offsets = BlobRef {
            offset: start,
            len: w.position() - start,
        };
        let targets_width = bits_for(whole.n_nodes.saturating_sub(1));
        let edge_ids = if with_edge_ids {
            let p = path.with_extension("eid.tmp");
            let f = File::create(&p).at(&p)?;
            Some((
                p,
                BufWriter::with_capacity(WRITE_BUFFER_BYTES, f),
                BitWriter::new(bits_for(whole.n_edges.saturating_sub(1))),
            ))
        } else {
            None
        };
        let eid_width = bits_for(whole.n_edges.saturating_sub(1));
        let targets_start = w.position();
        Ok(CsrWriter {
            footer: CsrFooter {
                first_node: whole.first_node,
                n_nodes,
                n_edges,
                offsets,
                offsets_width,
                targets: BlobRef {
                    offset: targets_start,
                    len: 0,
                },
                targets_width,
                edge_ids: None,
                edge_ids_width: if with_edge_ids { eid_width } else { 0 },
            },
            targets: BitWriter::new(targets_width),
            buf: Vec::with_capacity(1 << 16),
            edge_ids,
            path,
            rel,
            w,
            written: 0,
        })
    }

    /// Appends the next entry (entries come in node order, sorted within a node).
    #[inline]
    pub fn push(&mut self, target: u32, edge_id: u64) -> Result<(), WriteError> {
        self.targets.push_to_vec(target as u64, &mut self.buf);
        if self.buf.len() >= 1 << 16 {
            self.w.write_raw(&self.buf).at(&self.path)?;
            self.buf.clear();
        }
        if let Some((p, w, bw)) = &mut self.edge_ids {
            bw.push(edge_id, w).at(p)?;
        }
        self.written += 1;
        Ok(())
    }

    pub fn finish(mut self) -> Result<SegmentMeta, WriteError> {
        debug_assert_eq!(self.written, self.footer.n_edges);
        let targets = std::mem::replace(&mut self.targets, BitWriter::new(0));
        targets.finish_to_vec(&mut self.buf);
        self.w.write_raw(&self.buf).at(&self.path)?;
        self.buf = Vec::new();
        self.footer.targets.len = self.w.position() - self.footer.targets.offset;
        if let Some((p, mut w, bw)) = self.edge_ids.take() {
            bw.finish(&mut w).at(&p)?;
            w.flush().at(&p)?;
            drop(w);
            let start = self.w.position();
            let mut f = File::open(&p).at(&p)?;
            std::io::copy(&mut f, &mut WriterSink(&mut self.w)).at(&p)?;
            self.footer.edge_ids = Some(BlobRef {
                offset: start,
                len: self.w.position() - start,
            });
            let _ = fs::remove_file(&p);
        }
        finish(self.w, &self.footer, &self.path, self.rel)
    }
}

/// Adapts a `SegmentWriter` to `io::Write` so that bit writers can stream into it.
struct WriterSink<'a>(&'a mut Out);

impl Write for WriterSink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_raw(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The two blobs of an index: the sorted keys as a column chunk, and the node of each
/// key bit-packed; returns their references and the node width.
fn write_sorted_keys(
    w: &mut Out,
    path: &Path,
    keys: &ColumnBuilder,
    nodes: impl Iterator<Item = u64>,
    n_nodes_total: u64,
) -> Result<(BlobRef, BlobRef, u32), WriteError> {
    let mut kb = Vec::new();
    keys.encode(&mut kb);
    let keys_ref = w.write_blob(&kb).at(path)?;
    drop(kb);
    let width = bits_for(n_nodes_total.saturating_sub(1));
    let mut nb = Vec::new();
    quiver_format::bitpack::pack(nodes, width, &mut nb);
    Ok((keys_ref, w.write_blob(&nb).at(path)?, width))
}

/// Writes an id index from keys sorted ascending and their node ids (in memory: the
/// streaming writer below, scanning the arrays).
pub fn write_id_index(
    staging: &Staging,
    name: &str,
    id_type: IdType,
    keys: &ColumnBuilder,
    nodes: &[u32],
    n_nodes_total: u64,
) -> Result<SegmentMeta, WriteError> {
    struct Arrays<'a> {
        keys: &'a ColumnBuilder,
        nodes: &'a [u32],
        integer: bool,
    }
    impl SortedIds for Arrays<'_> {
        fn scan(
            &mut self,
            f: &mut dyn FnMut(crate::IdKey<'_>, u32) -> std::io::Result<()>,
        ) -> std::io::Result<()> {
            for (i, &node) in self.nodes.iter().enumerate() {
                let k = if self.integer {
                    crate::IdKey::Int(self.keys.i64_values()[i])
                } else {
                    crate::IdKey::Str(self.keys.bytes_at(i))
                };
                f(k, node)?;
            }
            Ok(())
        }
    }
    let key_bytes = match &keys.data {
        quiver_format::column::ColumnData::Bytes { data, .. } => data.len() as u64,
        _ => 0,
    };
    write_id_index_streaming(
        staging,
        name,
        id_type,
        nodes.len() as u64,
        key_bytes,
        n_nodes_total,
        &mut Arrays {
            keys,
            nodes,
            integer: id_type == IdType::Integer,
        },
    )
}

/// Writes id space `space`'s index of `db` with new ids merged in: `n_new` of them,
/// sorted, none already in the index; `new(j)` is the `j`-th (key, node). Both are
/// streamed into the writer (no merged copy in memory). Returns the segment and the
/// number of ids. `import --append` and a checkpoint that indexes created nodes use it.
pub fn write_id_index_merged<'a>(
    staging: &Staging,
    name: &str,
    db: &crate::Database,
    space: usize,
    n_new: usize,
    new: &'a dyn Fn(usize) -> (crate::IdKey<'a>, u32),
    n_nodes_total: u64,
) -> Result<(SegmentMeta, u64), WriteError> {
    use crate::IdKey;
    struct Merged<'d, 'a> {
        db: &'d crate::Database,
        space: usize,
        n_new: usize,
        new: &'a dyn Fn(usize) -> (IdKey<'a>, u32),
    }
    impl SortedIds for Merged<'_, '_> {
        fn scan(
            &mut self,
            f: &mut dyn FnMut(IdKey<'_>, u32) -> std::io::Result<()>,
        ) -> std::io::Result<()> {
            let below = |a: IdKey<'_>, b: IdKey<'_>| match (a, b) {
                (IdKey::Int(a), IdKey::Int(b)) => a < b,
                (IdKey::Str(a), IdKey::Str(b)) => a < b,
                _ => false,
            };
            let (mut j, mut failed) = (0usize, None);
            self.db
                .id_entries(self.space, &mut |k, node| {
                    if failed.is_some() {
                        return;
                    }
                    // New keys below this old one go first.
                    while j < self.n_new && below((self.new)(j).0, k) {
                        let (nk, nn) = (self.new)(j);
                        if let Err(e) = f(nk, nn) {
                            failed = Some(e);
                            return;
                        }
                        j += 1;
                    }
                    if let Err(e) = f(k, node) {
                        failed = Some(e);
                    }
                })
                .map_err(std::io::Error::other)?;
            if let Some(e) = failed {
                return Err(e);
            }
            for j in j..self.n_new {
                let (k, node) = (self.new)(j);
                f(k, node)?;
            }
            Ok(())
        }
    }
    let id_type = db.manifest().id_spaces[space].id_type;
    // String keys: the writer needs their total length up front.
    let mut key_bytes = 0u64;
    if id_type == IdType::String {
        db.id_entries(space, &mut |k, _| {
            if let IdKey::Str(b) = k {
                key_bytes += b.len() as u64;
            }
        })
        .map_err(|e| WriteError::Io {
            path: staging.file(name).0,
            source: std::io::Error::other(e),
        })?;
        for j in 0..n_new {
            if let IdKey::Str(b) = new(j).0 {
                key_bytes += b.len() as u64;
            }
        }
    }
    let n = db.manifest().id_spaces[space].n_ids + n_new as u64;
    let seg = write_id_index_streaming(
        staging,
        name,
        id_type,
        n,
        key_bytes,
        n_nodes_total,
        &mut Merged {
            db,
            space,
            n_new,
            new,
        },
    )?;
    Ok((seg, n))
}

/// Ids sorted ascending with their nodes, scanned as often as a streaming writer needs.
pub trait SortedIds {
    fn scan(
        &mut self,
        f: &mut dyn FnMut(crate::IdKey<'_>, u32) -> std::io::Result<()>,
    ) -> std::io::Result<()>;
}

/// Writes an id index from `n` sorted ids whose keys take `key_bytes`, read in up to
/// three sequential scans (keys or offsets, string data, nodes) and written as they
/// come, so memory stays a buffer: ids that do not fit in memory are scanned from disk.
pub fn write_id_index_streaming(
    staging: &Staging,
    name: &str,
    id_type: IdType,
    n: u64,
    key_bytes: u64,
    n_nodes_total: u64,
    ids: &mut dyn SortedIds,
) -> Result<SegmentMeta, WriteError> {
    use crate::IdKey;
    use quiver_format::column::{bytes_chunk_header, i64_chunk_header};
    let (path, rel) = staging.file(name);
    let mut w = create(&path)?;
    // Scan 1: the key range and whether the ids are dense.
    let integer = id_type == IdType::Integer;
    let (mut min, mut max, mut first) = (0i64, 0i64, 0u64);
    let mut dense = integer;
    let mut keys_dense = integer;
    let mut i = 0u64;
    if integer {
        ids.scan(&mut |k, node| {
            let IdKey::Int(k) = k else {
                return Err(std::io::Error::other("string key in an integer id space"));
            };
            if i == 0 {
                (min, first) = (k, node as u64);
            }
            keys_dense &= k.wrapping_sub(min) as u64 == i;
            dense &= keys_dense && node as u64 == first + i;
            max = k;
            i += 1;
            Ok(())
        })
        .at(&path)?;
    }
    let dense = (dense && n > 0).then_some((min, first));
    let dense_keys = (keys_dense && dense.is_none() && n > 0).then_some(min);
    let (keys_ref, nodes_ref, width) = if dense.is_some() {
        (BlobRef::default(), BlobRef::default(), 0)
    } else {
        let mut buf: Vec<u8> = Vec::with_capacity(WRITE_BUFFER_BYTES + 64);
        let keys_start = w.position();
        let spill = |w: &mut Out, buf: &mut Vec<u8>| {
            let r = w.write_raw(buf);
            buf.clear();
            r
        };
        if dense_keys.is_some() {
            // The keys are implied by their position.
        } else if integer {
            let width = bits_for(max.wrapping_sub(min) as u64);
            i64_chunk_header(n as u32, min, width, &mut buf);
            let mut bw = BitWriter::new(width);
            ids.scan(&mut |k, _| {
                if let IdKey::Int(k) = k {
                    bw.push_to_vec(k.wrapping_sub(min) as u64, &mut buf);
                }
                if buf.len() >= WRITE_BUFFER_BYTES {
                    spill(&mut w, &mut buf)?;
                }
                Ok(())
            })
            .at(&path)?;
            bw.finish_to_vec(&mut buf);
        } else {
            let width = bits_for(key_bytes);
            bytes_chunk_header(n as u32, key_bytes, width, &mut buf);
            let mut bw = BitWriter::new(width);
            bw.push_to_vec(0, &mut buf);
            let mut end = 0u64;
            ids.scan(&mut |k, _| {
                if let IdKey::Str(k) = k {
                    end += k.len() as u64;
                }
                bw.push_to_vec(end, &mut buf);
                if buf.len() >= WRITE_BUFFER_BYTES {
                    spill(&mut w, &mut buf)?;
                }
                Ok(())
            })
            .at(&path)?;
            bw.finish_to_vec(&mut buf);
            if end != key_bytes {
                return Err(std::io::Error::other(format!(
                    "the sorted ids changed between scans ({end} key bytes, {key_bytes} expected)"
                )))
                .at(&path);
            }
            ids.scan(&mut |k, _| {
                if let IdKey::Str(k) = k {
                    buf.extend_from_slice(k);
                }
                if buf.len() >= WRITE_BUFFER_BYTES {
                    spill(&mut w, &mut buf)?;
                }
                Ok(())
            })
            .at(&path)?;
        }
        spill(&mut w, &mut buf).at(&path)?;
        let keys_ref = BlobRef {
            offset: keys_start,
            len: w.position() - keys_start,
        };
        let width = bits_for(n_nodes_total.saturating_sub(1));
        let nodes_start = w.position();
        let mut bw = BitWriter::new(width);
        ids.scan(&mut |_, node| {
            bw.push_to_vec(node as u64, &mut buf);
            if buf.len() >= WRITE_BUFFER_BYTES {
                spill(&mut w, &mut buf)?;
            }
            Ok(())
        })
        .at(&path)?;
        bw.finish_to_vec(&mut buf);
        spill(&mut w, &mut buf).at(&path)?;
        let nodes_ref = BlobRef {
            offset: nodes_start,
            len: w.position() - nodes_start,
        };
        (keys_ref, nodes_ref, width)
    };
    let footer = IdIndexFooter {
        id_type,
        n_ids: n,
        dense,
        dense_keys,
        keys: keys_ref,
        nodes: nodes_ref,
        nodes_width: width,
    };
    finish(w, &footer, &path, rel)
}

/// Writes a property index: `keys` sorted (an i64, f64 or string column), `nodes[i]` the
/// node of `keys[i]`.
pub fn write_prop_index(
    staging: &Staging,
    name: &str,
    kind: crate::manifest::IndexKeyKind,
    keys: &ColumnBuilder,
    nodes: &[u64],
    n_nodes_total: u64,
) -> Result<SegmentMeta, WriteError> {
    let (path, rel) = staging.file(name);
    let mut w = create(&path)?;
    let (keys_ref, nodes_ref, width) =
        write_sorted_keys(&mut w, &path, keys, nodes.iter().copied(), n_nodes_total)?;
    let footer = crate::manifest::PropIndexFooter {
        kind,
        n_entries: nodes.len() as u64,
        keys: keys_ref,
        nodes: nodes_ref,
        nodes_width: width,
    };
    finish(w, &footer, &path, rel)
}
