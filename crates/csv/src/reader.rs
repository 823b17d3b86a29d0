//! Reading input files as windows of whole records, on a thread of its own.
//!
//! The reader fills a window (plain or gzip-decompressed bytes), asks the parallel splitter
//! for chunk boundaries, sends the complete records on a bounded channel and carries the
//! incomplete tail into the next window. The channel holds at most two windows, which
//! bounds what input costs in memory: `3 * window_bytes` at most (one being filled, two
//! queued), plus the tail.
//!
//! A [`RecordSource`] (Parquet, Arrow) is read as typed rows instead: a window per batch
//! of rows, its chunks ranges of rows ([`TypedRows`], read by the import's parse stage).

use crate::error::{IoAt, ReadError};
use crate::split::split_records;
use crate::tokenize::{Fields, Tokenizer};
use crate::Dialect;
use crossbeam_channel::{bounded, Receiver, Sender};
use quiver_common::limits::CSV_RECORD_BYTES_MAX;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
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
    /// Typed rows (from a [`RecordSource`] that reads them typed): then `data` is empty
    /// and `chunk_ends` count rows, not bytes.
    pub typed: Option<Arc<dyn TypedRows>>,
}

impl Window {
    /// Records `s..e` of the window as CSV text (for a rejects file): a slice of a CSV
    /// window; typed rows `s..e` written as records.
    pub fn raw(&self, s: usize, e: usize) -> std::borrow::Cow<'_, [u8]> {
        match &self.typed {
            None => std::borrow::Cow::Borrowed(
                &self.data[s.min(self.data.len())..e.min(self.data.len())],
            ),
            Some(t) => {
                let mut out = Vec::new();
                t.records(s, e.min(t.rows()), &mut out);
                std::borrow::Cow::Owned(out)
            }
        }
    }
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

/// Input that is not a CSV file: a Parquet file, a folder of its parts, an Arrow
/// stream handed over by a Python caller. It gives typed rows ([`TypedRows`]) that the
/// parse stage reads column by column; everything after parsing (budgets, rejects,
/// progress) is the CSV path's. Implemented by `quiver-arrow`; this crate knows only
/// the trait.
pub trait RecordSource: Send + Sync {
    /// A fresh read from the first row; `dialect` is how rows are written as text where
    /// text is needed (a rejected row, a value read through its text); batches hold
    /// about `window_bytes` each (what a window of CSV holds, so that the reader's
    /// memory is the budget's). Each item comes with the source's bytes consumed so far
    /// (for progress).
    fn open(&self, dialect: &Dialect, window_bytes: usize) -> std::io::Result<TypedStream>;
    /// Whether `open` may be called again (a second read of the input, as an import
    /// whose ids spill to disk needs).
    fn reopenable(&self) -> bool;
    /// The types of the columns as the source knows them (an Arrow schema), `None`
    /// where it does not; used in place of sniffing for columns whose header names no
    /// type.
    fn column_types(&self) -> Vec<Option<quiver_common::types::DataType>>;
    /// The header's column names.
    fn column_names(&self) -> Vec<String>;
    /// About how many bytes the input holds (for progress).
    fn bytes_hint(&self) -> u64;
}

/// Typed rows with the source's bytes consumed once they are read.
pub type TypedStream = Box<dyn Iterator<Item = std::io::Result<(Arc<dyn TypedRows>, u64)>> + Send>;

/// A batch of typed rows (an Arrow record batch, as `quiver-arrow` hands it over), read
/// column by column by the import's parse stage: no text is written and parsed again
/// for the values it holds in the layouts of [`TypedColumn`].
pub trait TypedRows: Send + Sync {
    fn rows(&self) -> usize;
    /// Columns.
    fn width(&self) -> usize;
    /// About how many bytes the rows hold in memory (to size the parse stage's chunks).
    fn bytes(&self) -> usize;
    /// Column `col` in a layout the import reads directly, or [`TypedColumn::Other`].
    fn column(&self, col: usize) -> TypedColumn<'_>;
    /// Value `row` of `col` as a CSV field would hold it, unquoted (a list joined by
    /// the dialect's array delimiter), appended to `out`; `Ok(false)` for a null.
    fn text(&self, col: usize, row: usize, out: &mut Vec<u8>) -> std::io::Result<bool>;
    /// Rows `from..to` as CSV records in the dialect (for the rejects file).
    fn records(&self, from: usize, to: usize, out: &mut Vec<u8>);
}

/// Opens a file that is not CSV as a [`RecordSource`] (`None`: the file is CSV).
pub type TypedOpener = fn(&Path) -> Option<Result<Arc<dyn RecordSource>, String>>;

static TYPED_OPENER: std::sync::OnceLock<TypedOpener> = std::sync::OnceLock::new();

/// Registers how LOAD CSV opens files that are not CSV (Parquet): set once by a program
/// that links `quiver-arrow` (`quiver_arrow::register`), since the query engine does
/// not know Arrow.
pub fn set_typed_opener(f: TypedOpener) {
    let _ = TYPED_OPENER.set(f);
}

/// `path` as typed rows, when it is a file of a registered typed format.
pub fn typed_source(path: &Path) -> Option<Result<Arc<dyn RecordSource>, String>> {
    TYPED_OPENER.get().and_then(|f| f(path))
}

/// A bitmap slice (Arrow's validity and boolean layout: least significant bit first).
#[derive(Clone, Copy)]
pub struct Bits<'a> {
    pub bytes: &'a [u8],
    pub offset: usize,
}

impl Bits<'_> {
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        let i = i + self.offset;
        self.bytes[i >> 3] & (1 << (i & 7)) != 0
    }
}

/// A column of typed rows in a layout the import reads without text; `valid` is the
/// validity bitmap (`None`: no nulls).
pub enum TypedColumn<'a> {
    Int {
        values: &'a [i64],
        valid: Option<Bits<'a>>,
    },
    Float {
        values: &'a [f64],
        valid: Option<Bits<'a>>,
    },
    Bool {
        values: Bits<'a>,
        valid: Option<Bits<'a>>,
    },
    /// UTF-8 strings (valid by the layout's contract).
    Str {
        offsets: &'a [i32],
        data: &'a [u8],
        valid: Option<Bits<'a>>,
    },
    /// Days since 1970-01-01.
    Days {
        values: &'a [i32],
        valid: Option<Bits<'a>>,
    },
    /// Microseconds since 1970-01-01T00:00: local, or UTC for an instant (`zoned`).
    Micros {
        values: &'a [i64],
        zoned: bool,
        valid: Option<Bits<'a>>,
    },
    /// Lists: row `i`'s elements are `values[offsets[i]..offsets[i + 1]]`.
    List {
        offsets: &'a [i32],
        values: Box<TypedColumn<'a>>,
        valid: Option<Bits<'a>>,
    },
    /// Anything else: read through [`TypedRows::text`].
    Other,
}

impl TypedColumn<'_> {
    /// Whether value `i` is there (not null); [`TypedColumn::Other`] answers through
    /// [`TypedRows::text`].
    #[inline]
    pub fn is_valid(&self, i: usize) -> bool {
        let v = match self {
            TypedColumn::Int { valid, .. }
            | TypedColumn::Float { valid, .. }
            | TypedColumn::Bool { valid, .. }
            | TypedColumn::Str { valid, .. }
            | TypedColumn::Days { valid, .. }
            | TypedColumn::Micros { valid, .. }
            | TypedColumn::List { valid, .. } => valid,
            TypedColumn::Other => return true,
        };
        v.is_none_or(|v| v.get(i))
    }
}

/// One input file being read: the (possibly decompressing) reader, and what the file was
/// when it was opened, so that a file that changes under the import is an error rather
/// than a silently wrong graph.
struct Source {
    /// The decoder of a compressed file; `None` reads `file` itself, so that
    /// `read_to_end` fills the window's spare capacity without zeroing it first (`File`
    /// reads into uninitialised memory; a wrapper that only implements `read` has every
    /// window zeroed: 3% of dolt's import).
    r: Option<Box<dyn Read + Send>>,
    path: PathBuf,
    file: File,
    /// Length and modification time at open (regular files only).
    at_open: Option<(u64, Option<std::time::SystemTime>)>,
    /// Bytes read from the file (compressed bytes for gzip).
    count: Arc<std::sync::atomic::AtomicU64>,
}

impl Source {
    fn open(path: &PathBuf) -> Result<Source, ReadError> {
        let file = File::open(path).at(path)?;
        let meta = file.metadata().at(path)?;
        let at_open = meta.is_file().then(|| (meta.len(), meta.modified().ok()));
        let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let gz = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
        let r: Option<Box<dyn Read + Send>> = if gz {
            let counted = Counting {
                inner: file.try_clone().at(path)?,
                count: count.clone(),
            };
            Some(Box::new(flate2::read::MultiGzDecoder::new(
                std::io::BufReader::with_capacity(1 << 20, counted),
            )))
        } else {
            None
        };
        Ok(Source {
            r,
            path: path.clone(),
            file,
            at_open,
            count,
        })
    }

    /// Fills `buf` until `want` bytes are present or the input ends; returns EOF. Reads
    /// into spare capacity (no zeroing of the window first). At the end of the file it
    /// checks that the file is still what was opened.
    fn fill(&mut self, buf: &mut Vec<u8>, want: usize) -> Result<bool, ReadError> {
        if buf.len() >= want {
            return Ok(false);
        }
        let need = want - buf.len();
        buf.reserve_exact(need);
        let got = match &mut self.r {
            Some(r) => r.take(need as u64).read_to_end(buf).at(&self.path)?,
            None => {
                let n = (&self.file)
                    .take(need as u64)
                    .read_to_end(buf)
                    .at(&self.path)?;
                self.count.fetch_add(n as u64, Ordering::Relaxed);
                n
            }
        };
        let eof = got < need;
        if eof {
            self.check_unchanged()?;
        }
        Ok(eof)
    }

    /// A regular file must end where it ended when opened, with the same length and
    /// modification time: a file truncated or rewritten while read would otherwise import
    /// as a prefix of itself, perhaps with a cut last record.
    fn check_unchanged(&self) -> Result<(), ReadError> {
        let Some((len0, mtime0)) = self.at_open else {
            return Ok(());
        };
        let file = &self.file;
        let read = self.count.load(Ordering::Relaxed);
        let meta = file.metadata().at(&self.path)?;
        let detail = if read < len0 {
            Some(format!("{len0} bytes when opened, it ended after {read}"))
        } else if meta.len() != len0 {
            Some(format!("{len0} bytes when opened, {} now", meta.len()))
        } else if mtime0.is_some() && meta.modified().ok() != mtime0 {
            Some("it was written to after it was opened".to_string())
        } else {
            None
        };
        match detail {
            Some(detail) => Err(ReadError::Changed {
                path: self.path.clone(),
                detail,
            }),
            None => Ok(()),
        }
    }
}

/// The 0-based line at (decompressed) byte `offset` of `path`, by reading it again: only
/// error paths ask, so the normal path counts no lines.
fn line_at(path: &PathBuf, offset: u64) -> u64 {
    let Ok(mut again) = Source::open(path) else {
        return 0;
    };
    let mut left = offset;
    let mut lines = 0u64;
    let mut block = vec![0u8; 1 << 20];
    while left > 0 {
        let want = &mut block[..left.min(1 << 20) as usize];
        let read = match &mut again.r {
            Some(r) => r.read(want),
            None => (&again.file).read(want),
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        lines += memchr::memchr_iter(b'\n', &block[..n]).count() as u64;
        left -= n as u64;
    }
    lines
}

/// The reader's loop over a typed stream: the header from the source's column names,
/// then a window per batch of rows, cut into chunks of about `chunk_bytes`.
fn typed_windows(
    stream: TypedStream,
    src: &dyn RecordSource,
    path: &Path,
    header: bool,
    chunk_bytes: usize,
    cancel: &AtomicBool,
    tx: &Sender<Msg>,
) -> Result<(), ReadError> {
    if header {
        let fields = src
            .column_names()
            .into_iter()
            .map(String::into_bytes)
            .collect();
        if tx.send(Msg::Header { fields, lines: 1 }).is_err() {
            return Ok(());
        }
    }
    let mut first = true;
    let mut done = 0;
    for item in stream {
        if cancel.load(Ordering::Relaxed) {
            return Ok(());
        }
        let (rows, bytes_done) = item.at(path)?;
        let n = rows.rows();
        if n == 0 {
            continue;
        }
        let chunks = rows.bytes().div_ceil(chunk_bytes.max(1)).clamp(1, n);
        let chunk_ends = (1..=chunks).map(|k| n * k / chunks).collect();
        done = bytes_done;
        let w = Window {
            file_idx: 0,
            data: Vec::new(),
            chunk_ends,
            file_bytes_done: done,
            first_of_file: first,
            typed: Some(rows),
        };
        first = false;
        if tx.send(Msg::Window(w)).is_err() {
            return Ok(());
        }
    }
    if first {
        // An empty input still counts as read.
        let w = Window {
            file_idx: 0,
            data: Vec::new(),
            chunk_ends: Vec::new(),
            file_bytes_done: done,
            first_of_file: true,
            typed: None,
        };
        let _ = tx.send(Msg::Window(w));
    }
    Ok(())
}

/// Starts the reader thread for the files of one group (or for `source`, when given,
/// read as the one file `files[0]`).
#[allow(clippy::too_many_arguments)]
pub fn spawn_reader(
    files: Vec<PathBuf>,
    source: Option<Arc<dyn RecordSource>>,
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
                if let Some(src) = source.as_deref() {
                    let stream = src.open(&dialect, window_bytes).at(&files[0])?;
                    return typed_windows(stream, src, &files[0], header, chunk_bytes, &cancel, &tx);
                }
                for (file_idx, path) in files.iter().enumerate() {
                    let mut src = Source::open(path)?;
                    let mut buf: Vec<u8> = Vec::with_capacity(window_bytes);
                    let mut eof = src.fill(&mut buf, window_bytes)?;
                    // Decompressed bytes of the file before `buf[0]`.
                    let mut consumed = 0u64;
                    // A UTF-8 byte order mark is not data.
                    if buf.starts_with(&[0xEF, 0xBB, 0xBF]) {
                        buf.drain(..3);
                        consumed = 3;
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
                                    consumed += span.end as u64;
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
                                Err(f) if eof || buf.len() > CSV_RECORD_BYTES_MAX => {
                                    return Err(ReadError::Input {
                                        file: path.clone(),
                                        line: f.position.line,
                                        column: f.position.column,
                                        message: format!("in the header: {}", f.error),
                                    })
                                }
                                _ if buf.len() > CSV_RECORD_BYTES_MAX => {
                                    return Err(ReadError::Input {
                                        file: path.clone(),
                                        line: 0,
                                        column: 0,
                                        message: format!(
                                            "the header is longer than {} MiB, the most one record may hold",
                                            CSV_RECORD_BYTES_MAX >> 20
                                        ),
                                    })
                                }
                                _ => {
                                    want = (want * 2).min(CSV_RECORD_BYTES_MAX + 1);
                                    eof = src.fill(&mut buf, want)?;
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
                            if buf.len() > CSV_RECORD_BYTES_MAX {
                                let quoted = dialect.quote.is_some_and(|q| memchr::memchr(q, &buf).is_some());
                                return Err(ReadError::Input {
                                    file: path.clone(),
                                    line: line_at(path, consumed),
                                    column: 0,
                                    message: format!(
                                        "the record starting here is longer than {} MiB, the most one record may hold{}",
                                        CSV_RECORD_BYTES_MAX >> 20,
                                        if quoted {
                                            "; look for a quote that is opened and never closed"
                                        } else {
                                            ""
                                        }
                                    ),
                                });
                            }
                            want = (want * 2).min(CSV_RECORD_BYTES_MAX + 1);
                            eof = src.fill(&mut buf, want)?;
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
                        consumed += end as u64;
                        let w = Window {
                            file_idx,
                            data: std::mem::replace(&mut buf, next),
                            chunk_ends: ends,
                            file_bytes_done: src.count.load(Ordering::Relaxed),
                            first_of_file: first,
                            typed: None,
                        };
                        first = false;
                        if tx.send(Msg::Window(w)).is_err() {
                            return Ok(());
                        }
                        if eof && buf.is_empty() {
                            break;
                        }
                        want = window_bytes.max(buf.len() + window_bytes / 2);
                        eof = src.fill(&mut buf, want)? || eof;
                    }
                    if first {
                        // A header-only or empty file still counts as read.
                        let w = Window {
                            file_idx,
                            data: Vec::new(),
                            chunk_ends: Vec::new(),
                            file_bytes_done: src.count.load(Ordering::Relaxed),
                            first_of_file: true,
                            typed: None,
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
