//! The one file layer that durable writes go through: segment files, manifests,
//! `CURRENT`, generation folders, the write-ahead log and checkpoint moves. Each
//! operation (create, write, fsync, rename, folder create) is one *step*; a test can
//! make the n-th step fail ([`faults::arm`]) and then check that the database opens as
//! exactly before or exactly after (issue "Hardening": fault injection).
//!
//! Off, the layer costs one relaxed atomic load per operation, next to a system call.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Steps taken since [`faults::arm`].
static STEPS: AtomicU64 = AtomicU64::new(0);
/// The step that fails; `u64::MAX` when disarmed.
static FAIL_AT: AtomicU64 = AtomicU64::new(u64::MAX);

/// Fault injection for tests. The switch is process-wide (an import writes from
/// several threads), so a test that arms it runs alone in its test binary.
pub mod faults {
    use super::*;

    /// Makes step `n` (1-based, counted from now) and every later step fail, as a full
    /// disk or a yanked device would.
    pub fn arm(n: u64) {
        STEPS.store(0, Ordering::SeqCst);
        FAIL_AT.store(n, Ordering::SeqCst);
    }

    /// Turns injection off; returns how many steps were taken since [`arm`].
    pub fn disarm() -> u64 {
        FAIL_AT.store(u64::MAX, Ordering::SeqCst);
        STEPS.load(Ordering::SeqCst)
    }
}

/// One step: fails when the armed step has come.
#[inline]
fn step(what: &'static str, path: &Path) -> io::Result<()> {
    let at = FAIL_AT.load(Ordering::Relaxed);
    if at == u64::MAX {
        return Ok(());
    }
    let n = STEPS.fetch_add(1, Ordering::SeqCst) + 1;
    if n >= at {
        return Err(io::Error::other(format!(
            "injected fault at step {n} ({what} {})",
            path.display()
        )));
    }
    Ok(())
}

/// A file opened for writing through the layer: every `write` and sync is a step.
#[derive(Debug)]
pub struct DurableFile {
    file: File,
    path: std::path::PathBuf,
}

impl DurableFile {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path) -> io::Result<DurableFile> {
        step("create", path)?;
        Ok(DurableFile {
            file: File::create(path)?,
            path: path.to_path_buf(),
        })
    }

    /// Opens `path` with `opts` (append for a log).
    pub fn open_with(path: &Path, opts: &fs::OpenOptions) -> io::Result<DurableFile> {
        step("open", path)?;
        Ok(DurableFile {
            file: opts.open(path)?,
            path: path.to_path_buf(),
        })
    }

    pub fn sync_all(&self) -> io::Result<()> {
        step("fsync", &self.path)?;
        self.file.sync_all()
    }

    pub fn sync_data(&self) -> io::Result<()> {
        step("fdatasync", &self.path)?;
        self.file.sync_data()
    }

    /// The file itself, for reads, metadata and kernel hints that write nothing.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// A second handle to the same file (for syncing outside a lock).
    pub fn try_clone(&self) -> io::Result<DurableFile> {
        Ok(DurableFile {
            file: self.file.try_clone()?,
            path: self.path.clone(),
        })
    }
}

impl Write for DurableFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        step("write", &self.path)?;
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl io::Seek for DurableFile {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        self.file.seek(pos)
    }
}

/// Writes `bytes` to a new file at `path` and fsyncs it.
pub fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = DurableFile::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Fsyncs an existing file (a segment written earlier) by path.
pub fn sync_path(path: &Path) -> io::Result<()> {
    sync_existing("fsync", path)
}

/// Fsyncs a folder, so that the names created or renamed in it are durable.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    sync_existing("fsync folder", path)
}

fn sync_existing(what: &'static str, path: &Path) -> io::Result<()> {
    step(what, path)?;
    File::open(path)?.sync_all()
}

pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    step("rename", from)?;
    fs::rename(from, to)
}

pub fn create_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref();
    step("mkdir", path)?;
    fs::create_dir(path)
}

pub fn create_dir_all(path: &Path) -> io::Result<()> {
    step("mkdir", path)?;
    fs::create_dir_all(path)
}
