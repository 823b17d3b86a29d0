//! The one file layer that durable writes go through: segment files, manifests,
//! `CURRENT`, generation folders, the write-ahead log and checkpoint moves. Each
//! operation (create, write, fsync, rename, folder create) is one *step*; a test can
//! make the n-th step fail ([`faults::arm`]) and then check that the database opens as
//! exactly before or exactly after (issue "Hardening": fault injection).
//!
//! Off, the layer costs one relaxed atomic load per operation, next to a system call.

use std::fs::{self, File};
use std::io::{self, Read, Write};
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

/// Bytes per write of a [`DirectWriter`] and read of a [`DirectReader`] unless told
/// otherwise; a multiple of every logical block size.
pub const DIRECT_BUF: usize = 1 << 20;
/// Buffers a [`DirectWriter`] may hold: one filling, the others queued or being written.
const DIRECT_BUFS: usize = 2;
/// Alignment of direct writes: their memory, length and file offset.
const ALIGN: usize = 4096;

/// A buffer of `len` bytes at a 4 KiB-aligned address, inside a vector (no `unsafe`).
struct Aligned {
    raw: Vec<u8>,
    off: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let raw = vec![0u8; len + ALIGN];
        let off = raw.as_ptr().align_offset(ALIGN);
        Aligned { raw, off, len }
    }

    fn buf(&mut self) -> &mut [u8] {
        &mut self.raw[self.off..self.off + self.len]
    }
}

/// A buffer size rounded to whole 4 KiB blocks, at least one.
fn block_multiple(bytes: usize) -> usize {
    bytes.max(1).next_multiple_of(ALIGN)
}

/// A full buffer on its way to the writer thread (`len` bytes of it).
struct Job {
    buf: Aligned,
    len: usize,
}

/// A file written sequentially (segments, spill files), bypassing the page cache where
/// the file system allows (Linux `O_DIRECT`), from a thread of its own.
///
/// Why: on the machines measured (virtual, 2 cores), a buffered write of a fresh file
/// costs the writer 1-2 s of CPU per GiB, copying into newly allocated page-cache pages
/// (`copy_folio_from_iter_atomic` was a fifth of the CPU profile of the 10M-row dolt
/// import, and 16% of the social import's, writing its spill file), and the fsync at
/// publish then writes it all out again. A direct write is a DMA from our buffer: 0.05 s
/// of CPU per GiB, and the device time overlaps the import.
///
/// Bytes gather in aligned buffers (1 MiB unless told otherwise); a full one goes to the
/// writer thread (started with the first one) and a free one comes back, so a file holds
/// at most two. The
/// last partial block is padded with zeros, written, and cut off with `set_len` by
/// [`finish`](Self::finish). A file system that refuses `O_DIRECT` at open or on a write
/// gets buffered writes of the same buffers instead. Every buffer handed over is one
/// [`step`] of fault injection, taken on the caller's thread.
pub struct DirectWriter {
    file: Option<File>,
    path: std::path::PathBuf,
    cur: Aligned,
    fill: usize,
    /// Bytes handed over so far (whole buffers).
    handed: u64,
    free: Vec<Aligned>,
    made: usize,
    queue: Option<crossbeam_channel::Sender<Job>>,
    back: Option<crossbeam_channel::Receiver<io::Result<Aligned>>>,
    /// The writer thread; it gives the file back when its queue closes.
    thread: Option<std::thread::JoinHandle<File>>,
    in_flight: usize,
}

impl DirectWriter {
    /// Creates (or truncates) `path`, with buffers of [`DIRECT_BUF`].
    pub fn create(path: &Path) -> io::Result<DirectWriter> {
        DirectWriter::with_buffer(path, DIRECT_BUF)
    }

    /// Creates (or truncates) `path`, with two buffers of `bytes` (rounded up to 4 KiB):
    /// smaller for files written many at a time, such as partitions.
    pub fn with_buffer(path: &Path, bytes: usize) -> io::Result<DirectWriter> {
        step("create", path)?;
        Ok(DirectWriter {
            file: Some(open_direct(path)?),
            path: path.to_path_buf(),
            cur: Aligned::new(block_multiple(bytes)),
            fill: 0,
            handed: 0,
            free: Vec::new(),
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
        let next = match self.free.pop() {
            Some(b) => b,
            None if self.made < DIRECT_BUFS => {
                self.made += 1;
                Aligned::new(self.cur.len)
            }
            None => self.wait_one()?,
        };
        let buf = std::mem::replace(&mut self.cur, next);
        let job = Job {
            buf,
            len: self.fill,
        };
        let queue = self.queue.as_ref().expect("started");
        queue
            .send(job)
            .map_err(|_| io::Error::other("direct writer thread stopped"))?;
        self.in_flight += 1;
        self.handed += self.fill as u64;
        self.fill = 0;
        Ok(())
    }

    fn start(&mut self) -> io::Result<()> {
        let mut file = self.file.take().expect("open");
        let (queue, jobs) = crossbeam_channel::bounded::<Job>(DIRECT_BUFS);
        let (done, back) = crossbeam_channel::bounded(DIRECT_BUFS);
        let path = self.path.clone();
        let thread = std::thread::Builder::new()
            .name("quiver-writer".into())
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
            .map_err(|_| io::Error::other("direct writer thread stopped"))?;
        self.in_flight -= 1;
        r
    }

    /// Writes what is left, waits for the writer thread, and cuts the file to its length.
    /// The caller fsyncs (at publish).
    pub fn finish(mut self) -> io::Result<u64> {
        let len = self.position();
        while self.in_flight > 0 {
            let b = self.wait_one()?;
            self.free.push(b);
        }
        self.queue = None;
        let mut file = match (self.file.take(), self.thread.take()) {
            (Some(f), _) => f,
            (None, Some(t)) => t
                .join()
                .map_err(|_| io::Error::other("direct writer thread panicked"))?,
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

impl Drop for DirectWriter {
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

impl Write for DirectWriter {
    fn write(&mut self, mut data: &[u8]) -> io::Result<usize> {
        let n = data.len();
        while !data.is_empty() {
            let take = (self.cur.len - self.fill).min(data.len());
            let fill = self.fill;
            self.cur.buf()[fill..fill + take].copy_from_slice(&data[..take]);
            self.fill += take;
            data = &data[take..];
            if self.fill == self.cur.len {
                self.hand_over()?;
            }
        }
        Ok(n)
    }

    /// Whole buffers are already handed over; the last partial block is written by
    /// [`DirectWriter::finish`], which a direct write needs to pad.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A file read sequentially, bypassing the page cache where the file system allows: the
/// reader of what a [`DirectWriter`] wrote (spill files read back once or twice), which
/// is on the device, not in the page cache. A direct read of 1 MiB costs almost no CPU
/// (3 GB/s measured); a buffered read of an uncached file costs as much as the buffered
/// write did (fresh page-cache pages, then a copy). A thread reads one buffer ahead, so
/// the device time overlaps the caller's work; a reader holds two buffers.
pub struct DirectReader {
    /// Filled buffers (with their length; 0 at the end) from the read-ahead thread.
    full: Option<crossbeam_channel::Receiver<io::Result<(Aligned, usize)>>>,
    /// Buffers given back to it.
    empty: Option<crossbeam_channel::Sender<Aligned>>,
    cur: Option<(Aligned, usize)>,
    pos: usize,
    ended: bool,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Buffers of a [`DirectReader`]: one being read by the caller, one being filled.
const READ_BUFS: usize = 2;

impl DirectReader {
    /// Opens `path` with buffers of [`DIRECT_BUF`].
    pub fn open(path: &Path) -> io::Result<DirectReader> {
        DirectReader::with_buffer(path, DIRECT_BUF)
    }

    /// Opens `path` with two buffers of `bytes` (rounded up to 4 KiB): smaller for files
    /// read many at a time, such as the runs of a merge.
    pub fn with_buffer(path: &Path, bytes: usize) -> io::Result<DirectReader> {
        let bytes = block_multiple(bytes);
        let (mut file, mut direct) = (None, false);
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::OpenOptionsExt;
            match fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(path)
            {
                Ok(f) => (file, direct) = (Some(f), true),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(e),
            }
        }
        let mut file = match file {
            Some(f) => f,
            None => File::open(path)?,
        };
        let path = path.to_path_buf();
        let (to_caller, full) = crossbeam_channel::bounded(READ_BUFS);
        let (empty, from_caller) = crossbeam_channel::bounded::<Aligned>(READ_BUFS);
        let thread = std::thread::Builder::new()
            .name("quiver-reader-ahead".into())
            .spawn(move || {
                let mut made = 0;
                loop {
                    let mut b = match from_caller.try_recv() {
                        Ok(b) => b,
                        Err(_) if made < READ_BUFS => {
                            made += 1;
                            Aligned::new(bytes)
                        }
                        Err(_) => match from_caller.recv() {
                            Ok(b) => b,
                            Err(_) => return,
                        },
                    };
                    let r = fill(&mut file, &path, &mut direct, b.buf());
                    let stop = !matches!(r, Ok(n) if n > 0);
                    if to_caller.send(r.map(|n| (b, n))).is_err() || stop {
                        return;
                    }
                }
            })?;
        Ok(DirectReader {
            full: Some(full),
            empty: Some(empty),
            cur: None,
            pos: 0,
            ended: false,
            thread: Some(thread),
        })
    }
}

/// Fills `buf` from `file`: whole, or short at the end of the file. Returns its length.
fn fill(file: &mut File, path: &Path, direct: &mut bool, buf: &mut [u8]) -> io::Result<usize> {
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if *direct && e.raw_os_error() == Some(EINVAL) => {
                // Refused (or a short read left the offset unaligned): buffered from here.
                clear_direct(file, path, &e)?;
                *direct = false;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(len)
}

impl Read for DirectReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some((b, len)) = &mut self.cur {
                if self.pos < *len {
                    let n = out.len().min(*len - self.pos);
                    out[..n].copy_from_slice(&b.buf()[self.pos..self.pos + n]);
                    self.pos += n;
                    return Ok(n);
                }
            }
            if self.ended || out.is_empty() {
                return Ok(0);
            }
            if let (Some((b, _)), Some(empty)) = (self.cur.take(), &self.empty) {
                let _ = empty.send(b);
            }
            let full = self.full.as_ref().expect("open until dropped");
            let (b, len) = full
                .recv()
                .map_err(|_| io::Error::other("read-ahead thread stopped"))??;
            self.ended = len == 0;
            self.cur = Some((b, len));
            self.pos = 0;
        }
    }
}

impl Drop for DirectReader {
    fn drop(&mut self) {
        // Closing both channels ends the thread wherever it waits.
        self.full = None;
        self.empty = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(target_os = "linux")]
const EINVAL: i32 = libc::EINVAL;
#[cfg(not(target_os = "linux"))]
const EINVAL: i32 = i32::MIN;

/// Turns `O_DIRECT` off for `file` after the file system refused a direct transfer
/// (`refused`).
fn clear_direct(file: &File, path: &Path, refused: &io::Error) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own, setting its own flags minus O_DIRECT.
        let ok = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_DIRECT) == 0
        };
        if ok {
            return Ok(());
        }
    }
    let _ = file;
    Err(io::Error::other(format!(
        "{}: direct transfer refused and buffered mode unavailable: {refused}",
        path.display()
    )))
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
            Err(e) if e.raw_os_error() == Some(EINVAL) && !buffered => {
                clear_direct(file, path, &e)?;
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

    /// Writes `sizes` pieces of a known pattern through a `DirectWriter` in `dir` and
    /// checks the file holds exactly them.
    fn round_trip(dir: &Path, sizes: &[usize], buffer: usize) {
        let path = dir.join("seg");
        let mut f = DirectWriter::with_buffer(&path, buffer).unwrap();
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
        // And back through a DirectReader, in reads of odd sizes.
        let mut r = DirectReader::with_buffer(&path, buffer).unwrap();
        let mut back = Vec::new();
        let mut piece = vec![0u8; 777_777];
        loop {
            let n = r.read(&mut piece).unwrap();
            if n == 0 {
                break;
            }
            back.extend_from_slice(&piece[..n]);
        }
        assert!(back == want, "{sizes:?}: read back differs");
    }

    #[test]
    fn direct_files_hold_exactly_what_was_written() {
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
                &[DIRECT_BUF],
                &[DIRECT_BUF + 1],
                &[3, DIRECT_BUF * 5 + 17, 4095, 1],
                &[DIRECT_BUF - 1, 1, 1, DIRECT_BUF * 2],
                &[700_001; 9],
            ] {
                for buffer in [DIRECT_BUF, 5000] {
                    round_trip(dir.path(), sizes, buffer);
                }
            }
        }
    }
}
