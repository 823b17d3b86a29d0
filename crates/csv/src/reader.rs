//! Reading input files as windows of whole records, on a thread of its own.
//!
//! The reader fills a window (plain or gzip-decompressed bytes), asks the parallel splitter
//! for chunk boundaries, sends the complete records on a bounded channel and carries the
//! incomplete tail into the next window. The channel holds at most two windows, which
//! bounds what input costs in memory: `3 * window_bytes` at most (one being filled, two
//! queued), plus the tail.

use crate::error::{IoAt, ReadError};
use crate::split::split_records;
use crate::tokenize::{Fields, Tokenizer};
use crate::Dialect;
use crossbeam_channel::{bounded, Receiver, Sender};
use quiver_common::limits::CSV_RECORD_BYTES_MAX;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A run of whole records from one file.
pub struct Window {
    pub file_idx: usize,
    pub data: Vec<u8>,
    /// Chunk end offsets within `data` (see `split_records`).
    pub chunk_ends: Vec<usize>,
    /// Bytes of the file consumed up to the end of this window (compressed bytes for gzip).
    pub file_bytes_done: u64,
    /// The first window of a file after its header (or of a file without header).
    pub first_of_file: bool,
}

pub enum Msg {
    /// The header record of the group's first file: its fields and the line count it used.
    Header {
        fields: Vec<Vec<u8>>,
        lines: u64,
    },
    Window(Window),
    Error(ReadError),
}

/// Counts bytes read from the underlying file (for progress on compressed input).
struct Counting<R> {
    inner: R,
    count: Arc<std::sync::atomic::AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

fn open(
    path: &PathBuf,
    counter: Arc<std::sync::atomic::AtomicU64>,
) -> Result<Box<dyn Read + Send>, ReadError> {
    let f = File::open(path).map_err(|source| ReadError::Io {
        path: path.clone(),
        source,
    })?;
    let counted = Counting {
        inner: f,
        count: counter,
    };
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    Ok(if gz {
        Box::new(flate2::read::MultiGzDecoder::new(
            std::io::BufReader::with_capacity(1 << 20, counted),
        ))
    } else {
        Box::new(counted)
    })
}

/// Fills `buf` from `r` until `want` bytes are present or the input ends; returns EOF.
/// Reads into spare capacity (no zeroing of the window first).
fn fill(
    r: &mut dyn Read,
    buf: &mut Vec<u8>,
    want: usize,
    path: &PathBuf,
) -> Result<bool, ReadError> {
    if buf.len() >= want {
        return Ok(false);
    }
    let need = want - buf.len();
    buf.reserve_exact(need);
    let got = r.take(need as u64).read_to_end(buf).at(path)?;
    Ok(got < need)
}

/// Starts the reader thread for the files of one group.
pub fn spawn_reader(
    files: Vec<PathBuf>,
    dialect: Dialect,
    window_bytes: usize,
    chunk_bytes: usize,
    header: bool,
    cancel: Arc<AtomicBool>,
    pool: Arc<rayon::ThreadPool>,
) -> (Receiver<Msg>, Sender<Vec<u8>>, std::thread::JoinHandle<()>) {
    let (tx, rx) = bounded::<Msg>(1);
    // Buffers of consumed windows come back here to be refilled.
    let (recycle_tx, recycle_rx) = bounded::<Vec<u8>>(4);
    let handle = std::thread::Builder::new()
        .name("quiver-reader".into())
        .spawn(move || {
            let run = || -> Result<(), ReadError> {
                for (file_idx, path) in files.iter().enumerate() {
                    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
                    let mut r = open(path, counter.clone())?;
                    let mut buf: Vec<u8> = Vec::with_capacity(window_bytes);
                    let mut eof = fill(&mut *r, &mut buf, window_bytes, path)?;
                    // A UTF-8 byte order mark is not data.
                    if buf.starts_with(&[0xEF, 0xBB, 0xBF]) {
                        buf.drain(..3);
                    }
                    let mut first = true;
                    if header && file_idx == 0 {
                        // The header is the first record of the first file.
                        let mut want = window_bytes;
                        loop {
                            let mut t = Tokenizer::new(&buf, &dialect);
                            let mut fields = Fields::default();
                            match t.next_record(&mut fields) {
                                Ok(Some(span)) if span.end < buf.len() || eof => {
                                    let hdr: Vec<Vec<u8>> = (0..fields.len()).map(|i| fields.get(&buf, i).to_vec()).collect();
                                    let lines = t.line();
                                    buf.drain(..span.end);
                                    if tx.send(Msg::Header { fields: hdr, lines }).is_err() {
                                        return Ok(());
                                    }
                                    break;
                                }
                                Ok(None) if eof => {
                                    return Err(ReadError::Input {
                                        file: path.clone(),
                                        line: 0,
                                        column: 0,
                                        message: "the file is empty; expected a header line".into(),
                                    })
                                }
                                Err(f) if eof || want >= CSV_RECORD_BYTES_MAX => {
                                    return Err(ReadError::Input {
                                        file: path.clone(),
                                        line: f.position.line,
                                        column: f.position.column,
                                        message: format!("in the header: {}", f.error),
                                    })
                                }
                                _ => {
                                    want *= 2;
                                    eof = fill(&mut *r, &mut buf, want, path)?;
                                }
                            }
                        }
                    }
                    let mut want = window_bytes.max(buf.len());
                    loop {
                        if cancel.load(Ordering::Relaxed) {
                            return Ok(());
                        }
                        let (ends, _in_quotes) = pool.install(|| split_records(&buf, chunk_bytes, dialect.quote, eof));
                        if ends.is_empty() {
                            if eof {
                                break;
                            }
                            if want >= CSV_RECORD_BYTES_MAX {
                                return Err(ReadError::Input {
                                    file: path.clone(),
                                    line: 0,
                                    column: 0,
                                    message: format!(
                                        "a record is longer than {} MiB; this is almost always an unterminated quote",
                                        CSV_RECORD_BYTES_MAX >> 20
                                    ),
                                });
                            }
                            want *= 2;
                            eof = fill(&mut *r, &mut buf, want, path)?;
                            continue;
                        }
                        let end = *ends.last().unwrap_or(&0);
                        let tail = buf.len() - end;
                        let mut next = match recycle_rx.try_recv() {
                            Ok(mut v) => {
                                v.clear();
                                v.reserve(window_bytes.max(tail));
                                v
                            }
                            Err(_) => Vec::with_capacity(window_bytes.max(tail)),
                        };
                        next.extend_from_slice(&buf[end..]);
                        buf.truncate(end);
                        let w = Window {
                            file_idx,
                            data: std::mem::replace(&mut buf, next),
                            chunk_ends: ends,
                            file_bytes_done: counter.load(Ordering::Relaxed),
                            first_of_file: first,
                        };
                        first = false;
                        if tx.send(Msg::Window(w)).is_err() {
                            return Ok(());
                        }
                        if eof && buf.is_empty() {
                            break;
                        }
                        want = window_bytes.max(buf.len() + window_bytes / 2);
                        eof = fill(&mut *r, &mut buf, want, path)? || eof;
                    }
                    if first {
                        // A header-only or empty file still counts as read.
                        let w = Window {
                            file_idx,
                            data: Vec::new(),
                            chunk_ends: Vec::new(),
                            file_bytes_done: counter.load(Ordering::Relaxed),
                            first_of_file: true,
                        };
                        if tx.send(Msg::Window(w)).is_err() {
                            return Ok(());
                        }
                    }
                }
                Ok(())
            };
            if let Err(e) = run() {
                let _ = tx.send(Msg::Error(e));
            }
        })
        .expect("spawning the reader thread");
    (rx, recycle_tx, handle)
}
