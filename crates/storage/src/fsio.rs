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

    /// Reserves blocks for bytes `offset..offset + len` and makes the file that long
    /// (zeros where nothing was written): later writes there change no file size, so
    /// `fdatasync` after them flushes the data alone (an append that grows the file
    /// also journals its new size: 170-240 µs a sync on this project's test machine
    /// against 115-160 µs). Ok(false) where the file system cannot preallocate.
    pub fn allocate(&self, offset: u64, len: u64) -> io::Result<bool> {
        step("allocate", &self.path)?;
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: a plain system call on an open descriptor this value owns.
            let r = unsafe {
                libc::fallocate(
                    self.file.as_raw_fd(),
                    0,
                    offset as libc::off_t,
                    len as libc::off_t,
                )
            };
            if r == 0 {
                return Ok(true);
            }
            let e = io::Error::last_os_error();
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS)
            ) {
                return Ok(false);
            }
            Err(e)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (offset, len);
            Ok(false)
        }
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

/// Bytes per write of a [`SegmentFile`]; a multiple of every logical block size.
const SEGMENT_BUF: usize = 1 << 20;
/// Buffers a [`SegmentFile`] may hold: one filling, the others queued or being written.
const SEGMENT_BUFS: usize = 2;
/// Alignment of direct writes: their memory, length and file offset.
const ALIGN: usize = 4096;

/// A 1 MiB buffer at a 4 KiB-aligned address, inside a vector (no `unsafe`).
struct Aligned {
    raw: Vec<u8>,
    off: usize,
}

impl Aligned {
    fn new() -> Aligned {
        let raw = vec![0u8; SEGMENT_BUF + ALIGN];
        let off = raw.as_ptr().align_offset(ALIGN);
        Aligned { raw, off }
    }

    fn buf(&mut self) -> &mut [u8] {
        &mut self.raw[self.off..self.off + SEGMENT_BUF]
    }
}

/// A full buffer on its way to the writer thread (`len` bytes of it).
struct Job {
    buf: Aligned,
    len: usize,
}

/// A segment file written sequentially, bypassing the page cache where the file system
/// allows (Linux `O_DIRECT`), from a thread of its own.
///
/// Why: on the machines measured (virtual, 2 cores), a buffered write of a fresh file
/// costs the writer 1-2 s of CPU per GiB, copying into newly allocated page-cache pages
/// (`copy_folio_from_iter_atomic` was a fifth of the CPU profile of the 10M-row dolt
/// import), and the fsync at publish then writes it all out again. A direct write is a
/// DMA from our buffer: 0.05 s of CPU per GiB, and the device time overlaps the import.
///
/// Only for files the import does not read back. Temporary files (the edge spill, the
/// runs of spilled ids) stay buffered: they are read back soon, some several times, and
/// the page cache serves those reads. Writing and reading them directly was measured
/// slower on the 20M-id graph at 256 MiB (108 to 139 s: the CSR build re-reads the edge
/// spill once per pass, 8.6 to 21.4 s; merging the id runs 1.0 to 7.4 s) and no faster
/// on the social graph.
///
/// Bytes gather in aligned 1 MiB buffers; a full one goes to the writer thread (started
/// with the first one) and a free one comes back, so a file holds at most 2 MiB (three
/// buffers took social scale 4 at 256 MiB from 317.7 to 327.4 MiB peak, two CSR
/// directions being written at once). The last partial block is padded with zeros,
/// written, and cut off with `set_len` by [`finish`](Self::finish). A file system that refuses `O_DIRECT` at open or on a write
/// gets buffered writes of the same buffers instead. Every buffer handed over is one
/// [`step`] of fault injection, taken on the caller's thread.
pub struct SegmentFile {
    file: Option<File>,
    path: std::path::PathBuf,
    cur: Aligned,
    fill: usize,
    /// Bytes handed over so far (whole buffers).
    handed: u64,
    /// Buffers made so far (at most `SEGMENT_BUFS`).
    made: usize,
    queue: Option<crossbeam_channel::Sender<Job>>,
    back: Option<crossbeam_channel::Receiver<io::Result<Aligned>>>,
    /// The writer thread; it gives the file back when its queue closes.
    thread: Option<std::thread::JoinHandle<File>>,
    in_flight: usize,
}

impl SegmentFile {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path) -> io::Result<SegmentFile> {
        step("create", path)?;
        Ok(SegmentFile {
            file: Some(open_direct(path)?),
            path: path.to_path_buf(),
            cur: Aligned::new(),
            fill: 0,
            handed: 0,
            made: 1,
            queue: None,
            back: None,
            thread: None,
            in_flight: 0,
        })
    }

    /// Bytes written so far, including those still in the buffer.
    pub fn position(&self) -> u64 {
        self.handed + self.fill as u64
    }

    /// Hands the current (full) buffer to the writer thread and takes a free one.
    fn hand_over(&mut self) -> io::Result<()> {
        step("write", &self.path)?;
        if self.queue.is_none() {
            self.start()?;
        }
        let next = if self.made < SEGMENT_BUFS {
            self.made += 1;
            Aligned::new()
        } else {
            self.wait_one()?
        };
        let buf = std::mem::replace(&mut self.cur, next);
        let job = Job {
            buf,
            len: self.fill,
        };
        let queue = self.queue.as_ref().expect("started");
        queue
            .send(job)
            .map_err(|_| io::Error::other("segment writer thread stopped"))?;
        self.in_flight += 1;
        self.handed += self.fill as u64;
        self.fill = 0;
        Ok(())
    }

    fn start(&mut self) -> io::Result<()> {
        let mut file = self.file.take().expect("open");
        let (queue, jobs) = crossbeam_channel::bounded::<Job>(SEGMENT_BUFS);
        let (done, back) = crossbeam_channel::bounded(SEGMENT_BUFS);
        let path = self.path.clone();
        let thread = std::thread::Builder::new()
            .name("quiver-segment-writer".into())
            .spawn(move || {
                for mut job in jobs {
                    let r = write_block(&mut file, &path, &job.buf.buf()[..job.len]);
                    let failed = r.is_err();
                    if done.send(r.map(|()| job.buf)).is_err() || failed {
                        break;
                    }
                }
                file
            })?;
        self.queue = Some(queue);
        self.back = Some(back);
        self.thread = Some(thread);
        Ok(())
    }

    /// Waits for the writer thread to finish one buffer; returns it or its error.
    fn wait_one(&mut self) -> io::Result<Aligned> {
        let back = self.back.as_ref().expect("started");
        let r = back
            .recv()
            .map_err(|_| io::Error::other("segment writer thread stopped"))?;
        self.in_flight -= 1;
        r
    }

    /// Writes what is left, waits for the writer thread, and cuts the file to its length.
    /// The caller fsyncs (at publish).
    pub fn finish(mut self) -> io::Result<u64> {
        let len = self.position();
        while self.in_flight > 0 {
            self.wait_one()?;
        }
        self.queue = None;
        let mut file = match (self.file.take(), self.thread.take()) {
            (Some(f), _) => f,
            (None, Some(t)) => t
                .join()
                .map_err(|_| io::Error::other("segment writer thread panicked"))?,
            (None, None) => unreachable!("a segment file has its file or its thread"),
        };
        if self.fill > 0 {
            step("write", &self.path)?;
            let padded = self.fill.next_multiple_of(ALIGN);
            let fill = self.fill;
            let buf = self.cur.buf();
            buf[fill..padded].fill(0);
            write_block(&mut file, &self.path, &buf[..padded])?;
            if padded != fill {
                file.set_len(len)?;
            }
        }
        Ok(len)
    }
}

impl Drop for SegmentFile {
    fn drop(&mut self) {
        // An abandoned file (an error on the way): stop the thread; the file is removed
        // with its staging folder.
        self.queue = None;
        self.back = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Write for SegmentFile {
    fn write(&mut self, mut data: &[u8]) -> io::Result<usize> {
        let n = data.len();
        while !data.is_empty() {
            let take = (SEGMENT_BUF - self.fill).min(data.len());
            let fill = self.fill;
            self.cur.buf()[fill..fill + take].copy_from_slice(&data[..take]);
            self.fill += take;
            data = &data[take..];
            if self.fill == SEGMENT_BUF {
                self.hand_over()?;
            }
        }
        Ok(n)
    }

    /// Whole buffers are already handed over; the last partial block is written by
    /// [`SegmentFile::finish`], which a direct write needs to pad.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Opens `path` for writing with `O_DIRECT` where the platform and file system take it.
fn open_direct(path: &Path) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let direct = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        match direct {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            r => return r,
        }
    }
    File::create(path)
}

/// Writes one aligned block; when the file system refuses the direct write, turns
/// `O_DIRECT` off for the file and writes the rest buffered.
fn write_block(file: &mut File, path: &Path, block: &[u8]) -> io::Result<()> {
    let mut done = 0;
    let mut buffered = false;
    while done < block.len() {
        match file.write(&block[done..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            #[cfg(target_os = "linux")]
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && !buffered => {
                use std::os::unix::io::AsRawFd;
                let fd = file.as_raw_fd();
                // SAFETY: fcntl on a descriptor we own, setting its own flags minus
                // O_DIRECT.
                let ok = unsafe {
                    let flags = libc::fcntl(fd, libc::F_GETFL);
                    flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_DIRECT) == 0
                };
                if !ok {
                    return Err(io::Error::other(format!(
                        "{}: direct write refused and buffered mode unavailable: {e}",
                        path.display()
                    )));
                }
                buffered = true;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `sizes` pieces of a known pattern through a `SegmentFile` in `dir` and
    /// checks the file holds exactly them.
    fn round_trip(dir: &Path, sizes: &[usize]) {
        let path = dir.join("seg");
        let mut f = SegmentFile::create(&path).unwrap();
        let mut want = Vec::new();
        for (k, &n) in sizes.iter().enumerate() {
            let piece: Vec<u8> = (0..n).map(|i| (i * 31 + k * 7) as u8).collect();
            f.write_all(&piece).unwrap();
            want.extend_from_slice(&piece);
            assert_eq!(f.position(), want.len() as u64);
        }
        assert_eq!(f.finish().unwrap(), want.len() as u64);
        let got = fs::read(&path).unwrap();
        assert_eq!(got.len(), want.len(), "{sizes:?}");
        assert!(got == want, "{sizes:?}: contents differ");
    }

    #[test]
    fn segment_files_hold_exactly_what_was_written() {
        let dirs: Vec<std::path::PathBuf> = [Some(std::env::temp_dir()), {
            // tmpfs, where O_DIRECT may be refused at open: the buffered path.
            let shm = Path::new("/dev/shm");
            shm.is_dir().then(|| shm.to_path_buf())
        }]
        .into_iter()
        .flatten()
        .collect();
        for base in dirs {
            let dir = tempfile::tempdir_in(base).unwrap();
            for sizes in [
                &[][..],
                &[1],
                &[4096],
                &[SEGMENT_BUF],
                &[SEGMENT_BUF + 1],
                &[3, SEGMENT_BUF * 5 + 17, 4095, 1],
                &[SEGMENT_BUF - 1, 1, 1, SEGMENT_BUF * 2],
                &[700_001; 9],
            ] {
                round_trip(dir.path(), sizes);
            }
        }
    }
}
