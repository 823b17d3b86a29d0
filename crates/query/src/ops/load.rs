//! LOAD CSV: the records of a file as rows (a map per record with a header, a list
//! without), streamed.
//!
//! The file is read by the import's reader thread (`quiver_csv::reader`: plain or gzip,
//! windows of whole records on a bounded channel), so a load holds at most a few
//! windows of the file whatever its size, and tokenized here by the import's tokenizer,
//! one batch of records per call. A record becomes one `Value::Map` (or `List`) behind
//! an `Arc`: `row.key` and `row[i]` read it in place, nothing copies the row per use.
//!
//! Paths are confined to the import directory: a URL other than `file://`, a `..`, an
//! absolute path outside the directory or a symbolic link leading out of it is refused.
//!
//! A bad record (a quote left open, a stray quote, a field count that differs from the
//! header's, bytes that are not UTF-8) fails the statement with file:line:column, or with
//! IGNORE BAD is skipped, counted, and written to a rejects file with its reason.

use crate::batch::{Batch, BATCH_ROWS};
use crate::error::QueryError;
use crate::expr::{eval, CExpr};
use crate::ops::{BoxOp, Cx, Op};
use crate::value::Value;
use crossbeam_channel::{Receiver, Sender};
use quiver_csv::reader::{spawn_reader, typed_source, Msg, TypedColumn, TypedRows};
use quiver_csv::rejects::Rejects;
use quiver_csv::tokenize::{Fields, TokenError, Tokenizer};
use quiver_csv::Dialect;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Bytes of a file read ahead per window (the reader holds at most three).
const WINDOW_BYTES: usize = 1 << 20;

/// What the statement's LOAD CSV clauses share: where files may come from, where bad
/// rows go, and how many were skipped.
#[derive(Default)]
pub struct LoadState {
    pub import_dir: Option<PathBuf>,
    /// Where the statement's rejects file goes.
    rejects_dir: Option<PathBuf>,
    /// The statement's rejects file, made at the first bad row (a statement with no
    /// LOAD CSV pays nothing for it).
    rejects: Option<Rejects>,
    pub bad_rows: u64,
}

impl LoadState {
    pub fn new(import_dir: Option<PathBuf>, rejects_dir: Option<PathBuf>) -> LoadState {
        LoadState {
            import_dir,
            rejects_dir,
            rejects: None,
            bad_rows: 0,
        }
    }

    /// The rejects file, when a row was written to it.
    pub fn finish(&mut self) -> Result<Option<PathBuf>, QueryError> {
        match self.rejects.as_mut().filter(|r| r.count > 0) {
            Some(r) => {
                r.finish().map_err(|e| QueryError::Csv(e.to_string()))?;
                Ok(Some(r.path().to_path_buf()))
            }
            None => Ok(None),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn reject(
        &mut self,
        file: &Path,
        line: u64,
        column: u64,
        reason: &str,
        message: &str,
        raw: &[u8],
    ) -> Result<(), QueryError> {
        self.bad_rows += 1;
        if self.rejects.is_none() {
            self.rejects = self
                .rejects_dir
                .as_deref()
                .map(|d| Rejects::new(rejects_file(d)));
        }
        match self.rejects.as_mut() {
            Some(r) => r
                .write(file, line, column, reason, message, raw)
                .map_err(|e| QueryError::Csv(e.to_string())),
            None => Ok(()),
        }
    }
}

/// A rejects file name for one statement: `load-<time>-<pid>-<n>.csv` in `dir`.
fn rejects_file(dir: &Path) -> PathBuf {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!("load-{secs}-{}-{n}.csv", std::process::id()))
}

/// The file a LOAD CSV source names, inside the import directory.
pub fn resolve(import_dir: Option<&Path>, source: &str) -> Result<PathBuf, QueryError> {
    let err = |m: String| Err(QueryError::Csv(m));
    let (url, rest) = match source.split_once("://") {
        Some((scheme, rest)) => {
            if !scheme.eq_ignore_ascii_case("file") {
                return err(format!(
                    "LOAD CSV reads local files only; '{source}' is a remote URL. Download it into the import directory and load it from there"
                ));
            }
            // file://localhost/x and file:///x name the same file.
            let rest = rest.strip_prefix("localhost").unwrap_or(rest);
            (true, rest)
        }
        None => (false, source),
    };
    let Some(dir) = import_dir else {
        return err(
            "LOAD CSV has no import directory; pass --import-dir DIR (files are read from there)"
                .into(),
        );
    };
    let p = Path::new(rest);
    if p.components().any(|c| c == Component::ParentDir) {
        return err(format!(
            "'{source}': '..' is not allowed in a LOAD CSV path; files are read from the import directory {}",
            dir.display()
        ));
    }
    let cdir = dir.canonicalize().map_err(|e| {
        QueryError::Csv(format!(
            "the import directory {} cannot be read ({e}); create it and put the files there, or pass --import-dir",
            dir.display()
        ))
    })?;
    let candidate = if p.is_absolute() {
        if p.starts_with(dir) || p.starts_with(&cdir) {
            p.to_path_buf()
        } else if url {
            // Neo4j's convention: file:///x is x in the import directory.
            cdir.join(p.strip_prefix("/").unwrap_or(p))
        } else {
            return err(format!(
                "'{source}' is outside the import directory {}; put the file there or pass --import-dir",
                dir.display()
            ));
        }
    } else {
        cdir.join(p)
    };
    let real = candidate.canonicalize().map_err(|e| {
        QueryError::Csv(format!(
            "'{source}': {} ({e}); files are read from the import directory {}",
            candidate.display(),
            dir.display()
        ))
    })?;
    if !real.starts_with(&cdir) {
        return err(format!(
            "'{source}' leads outside the import directory {} (through a symbolic link); refused",
            dir.display()
        ));
    }
    if !real.is_file() {
        return err(format!("'{source}' is not a file"));
    }
    Ok(real)
}

/// The reader threads' splitter pool: windows are split in one slice, so one thread.
pub(crate) fn pool() -> Arc<rayon::ThreadPool> {
    static POOL: OnceLock<Arc<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .thread_name(|_| "quiver-load-split".into())
                .build()
                .expect("a one-thread pool"),
        )
    })
    .clone()
}

/// What the row thread of a file sends, in file order.
enum Piece {
    /// Up to a batch of records as values.
    Rows(Vec<Value>),
    /// A bad record: 0-based line and column, reason, message, raw bytes.
    Bad(u64, u64, &'static str, String, Vec<u8>),
    Error(QueryError),
}

/// One file being read: the reader thread (windows of whole records) feeds a row
/// thread that tokenizes them and makes the rows' values, a batch at a time, so that
/// the statement's own thread only evaluates and writes.
struct Reading {
    path: PathBuf,
    rx: Option<Receiver<Piece>>,
    handle: Option<std::thread::JoinHandle<()>>,
    cancel: Arc<AtomicBool>,
    done: bool,
}

impl Drop for Reading {
    fn drop(&mut self) {
        stop_thread(&self.cancel, &mut self.rx, &mut self.handle);
    }
}

/// Stops the thread feeding `rx` (a file's reader or row thread) and waits for it:
/// cancelled, and its receiver dropped, which unblocks it if it waits to send.
pub(crate) fn stop_thread<T>(
    cancel: &AtomicBool,
    rx: &mut Option<Receiver<T>>,
    handle: &mut Option<std::thread::JoinHandle<()>>,
) {
    cancel.store(true, Ordering::Relaxed);
    rx.take();
    if let Some(h) = handle.take() {
        let _ = h.join();
    }
}

pub(crate) fn read_error(e: quiver_csv::ReadError) -> QueryError {
    QueryError::Csv(e.to_string())
}

/// Batches of rows in flight between the row thread and the statement.
const PIECES_IN_FLIGHT: usize = 4;

impl Reading {
    fn open(path: PathBuf, spec: &Spec) -> Result<Reading, QueryError> {
        let empty = std::fs::metadata(&path)
            .map(|m| m.len() == 0)
            .unwrap_or(false);
        let cancel = Arc::new(AtomicBool::new(false));
        let mut r = Reading {
            path: path.clone(),
            rx: None,
            handle: None,
            cancel: cancel.clone(),
            done: false,
        };
        if spec.header && empty {
            r.done = true;
            return Ok(r);
        }
        let source = typed_source(&path).transpose().map_err(QueryError::Csv)?;
        let (reader_rx, recycle, reader) = spawn_reader(
            vec![path.clone()],
            source,
            spec.dialect,
            WINDOW_BYTES,
            WINDOW_BYTES,
            spec.header,
            cancel.clone(),
            pool(),
        );
        let (tx, rx) = crossbeam_channel::bounded(PIECES_IN_FLIGHT);
        let mut rows = Rows {
            path,
            rx: reader_rx,
            recycle,
            keys: None,
            spec: spec.clone(),
            line: 0,
            fields: Fields::default(),
        };
        let handle = std::thread::Builder::new()
            .name("quiver-load-rows".into())
            .spawn(move || {
                rows.run(&tx, &cancel);
                drop(rows.rx);
                let _ = reader.join();
            })
            .map_err(|e| QueryError::Csv(format!("cannot start the LOAD CSV row thread: {e}")))?;
        r.rx = Some(rx);
        r.handle = Some(handle);
        Ok(r)
    }

    /// The next rows into `out` (empty when a piece held only bad rows); bad rows go to
    /// the rejects file or fail the statement. The file is done when `self.done`.
    fn read(
        &mut self,
        load: &mut LoadState,
        spec: &Spec,
        out: &mut Vec<Value>,
    ) -> Result<(), QueryError> {
        while out.is_empty() && !self.done {
            match self.rx.as_ref().and_then(|rx| rx.recv().ok()) {
                None => self.done = true,
                Some(Piece::Rows(v)) => *out = v,
                Some(Piece::Error(e)) => return Err(e),
                Some(Piece::Bad(line, column, reason, msg, raw)) => {
                    if !spec.ignore_bad {
                        return Err(QueryError::Csv(format!(
                            "{}:{}:{}: {msg} (IGNORE BAD skips bad rows and writes them to a rejects file)",
                            self.path.display(),
                            line + 1,
                            column + 1
                        )));
                    }
                    load.reject(&self.path, line, column, reason, &msg, &raw)?;
                }
            }
        }
        Ok(())
    }
}

/// The row thread's state: windows in, pieces out.
struct Rows {
    path: PathBuf,
    rx: Receiver<Msg>,
    recycle: Sender<Vec<u8>>,
    /// Header names, when the file has a header.
    keys: Option<Arc<[Arc<str>]>>,
    spec: Spec,
    /// 0-based line of the file where the current window starts.
    line: u64,
    fields: Fields,
}

impl Rows {
    fn run(&mut self, tx: &Sender<Piece>, cancel: &AtomicBool) {
        if let Err(e) = self.pump(tx, cancel) {
            let _ = tx.send(Piece::Error(e));
        }
    }

    /// Reads the whole file; stops early when the statement hung up (a send fails).
    fn pump(&mut self, tx: &Sender<Piece>, cancel: &AtomicBool) -> Result<(), QueryError> {
        let mut out: Vec<Value> = Vec::with_capacity(BATCH_ROWS);
        let gone = || QueryError::Cancelled;
        while let Ok(msg) = self.rx.recv() {
            if cancel.load(Ordering::Relaxed) {
                return Ok(());
            }
            let w = match msg {
                Msg::Header { fields, lines } => {
                    self.keys = Some(header_keys(&self.path, fields)?);
                    self.line = lines;
                    continue;
                }
                Msg::Error(e) => return Err(read_error(e)),
                Msg::Window(w) => w,
            };
            if self.spec.header && self.keys.is_none() {
                // A header was asked for and the reader found none: an empty file.
                break;
            }
            if let Some(rows) = &w.typed {
                self.typed_rows(rows.as_ref(), &mut out, tx)?;
                continue;
            }
            let data = &w.data[..];
            let mut t = Tokenizer::new(data, &self.spec.dialect);
            loop {
                let rec = match t.next_record(&mut self.fields) {
                    Ok(None) => break,
                    Ok(Some(span)) => record(&self.fields, data, self.keys.as_deref(), &self.spec)
                        .map_err(|(col, reason, msg)| {
                            let column = if col < self.fields.len() {
                                self.fields.column(col)
                            } else {
                                0
                            };
                            (span.line, column, reason, msg, span.start..span.end)
                        }),
                    Err(f) => Err((
                        f.position.line,
                        f.position.column,
                        "csv",
                        token_message(f.error),
                        f.record_start..f.resume_at,
                    )),
                };
                match rec {
                    Ok(v) => {
                        out.push(v);
                        if out.len() == BATCH_ROWS {
                            let full = std::mem::replace(&mut out, Vec::with_capacity(BATCH_ROWS));
                            tx.send(Piece::Rows(full)).map_err(|_| gone())?;
                        }
                    }
                    Err((line, column, reason, msg, raw)) => {
                        if !out.is_empty() {
                            tx.send(Piece::Rows(std::mem::take(&mut out)))
                                .map_err(|_| gone())?;
                        }
                        let bad =
                            Piece::Bad(self.line + line, column, reason, msg, data[raw].to_vec());
                        tx.send(bad).map_err(|_| gone())?;
                    }
                }
            }
            self.line += t.line();
            let _ = self.recycle.try_send(w.data);
        }
        if !out.is_empty() {
            tx.send(Piece::Rows(out)).map_err(|_| gone())?;
        }
        Ok(())
    }
}

impl Rows {
    /// Typed rows (a Parquet file) as values: integers, floats, booleans, strings,
    /// dates, timestamps and lists of them as they are, other values as their text.
    fn typed_rows(
        &mut self,
        rows: &dyn TypedRows,
        out: &mut Vec<Value>,
        tx: &Sender<Piece>,
    ) -> Result<(), QueryError> {
        // The header's columns (the source's own names), or every column without one.
        let width = rows
            .width()
            .min(self.keys.as_ref().map_or(usize::MAX, |k| k.len()));
        let cols: Vec<TypedColumn<'_>> = (0..width).map(|c| rows.column(c)).collect();
        let mut text = Vec::new();
        for row in 0..rows.rows() {
            let mut vals = Vec::with_capacity(cols.len());
            for (c, col) in cols.iter().enumerate() {
                let v = match typed_value(col, row) {
                    Some(v) => v,
                    None => {
                        text.clear();
                        match rows.text(c, row, &mut text) {
                            Ok(true) => Value::str(&String::from_utf8_lossy(&text)),
                            Ok(false) => Value::Null,
                            Err(e) => {
                                return Err(QueryError::Csv(format!(
                                    "{}: row {}: column {}: {e}",
                                    self.path.display(),
                                    self.line + row as u64,
                                    c + 1
                                )))
                            }
                        }
                    }
                };
                vals.push(v);
            }
            out.push(match &self.keys {
                Some(k) => Value::Map(Arc::new(k.iter().cloned().zip(vals).collect())),
                None => Value::List(Arc::new(vals)),
            });
            if out.len() == BATCH_ROWS {
                let full = std::mem::replace(out, Vec::with_capacity(BATCH_ROWS));
                tx.send(Piece::Rows(full))
                    .map_err(|_| QueryError::Cancelled)?;
            }
        }
        self.line += rows.rows() as u64;
        Ok(())
    }
}

/// Value `i` of a typed column; `None` when it is read through its text.
fn typed_value(col: &TypedColumn<'_>, i: usize) -> Option<Value> {
    if !col.is_valid(i) {
        return Some(Value::Null);
    }
    Some(match col {
        TypedColumn::Int { values, .. } => Value::Int(values[i]),
        TypedColumn::Float { values, .. } => Value::Float(values[i]),
        TypedColumn::Bool { values, .. } => Value::Bool(values.get(i)),
        TypedColumn::Str { offsets, data, .. } => Value::str(
            std::str::from_utf8(&data[offsets[i] as usize..offsets[i + 1] as usize]).ok()?,
        ),
        TypedColumn::Days { values, .. } => Value::Date(values[i] as i64),
        TypedColumn::Micros { values, zoned, .. } => {
            if *zoned {
                Value::datetime_us(values[i])
            } else {
                Value::local_datetime_us(values[i])
            }
        }
        TypedColumn::List {
            offsets, values, ..
        } => Value::List(Arc::new(
            (offsets[i] as usize..offsets[i + 1] as usize)
                .map(|j| typed_value(values, j))
                .collect::<Option<Vec<Value>>>()?,
        )),
        TypedColumn::Other => return None,
    })
}

type Bad = (usize, &'static str, String);

/// What a bad record's tokenizer error says (both LOAD CSV paths).
pub(crate) fn token_message(e: TokenError) -> String {
    match e {
        TokenError::StrayQuote => "quote character inside an unquoted field (quote the whole field and write a quote inside it twice)".to_string(),
        e => e.to_string(),
    }
}

/// What a record with another field count than the header's says.
pub(crate) fn field_count_message(header: usize, found: usize) -> String {
    format!("expected {header} fields (as in the header), found {found}")
}

/// The header's fields as the names of a row's keys.
pub(crate) fn header_keys(
    path: &Path,
    fields: Vec<Vec<u8>>,
) -> Result<Arc<[Arc<str>]>, QueryError> {
    let mut keys = Vec::with_capacity(fields.len());
    for (i, f) in fields.into_iter().enumerate() {
        keys.push(Arc::<str>::from(String::from_utf8(f).map_err(|_| {
            QueryError::Csv(format!(
                "{}:1: header field {} is not UTF-8",
                path.display(),
                i + 1
            ))
        })?));
    }
    Ok(keys.into())
}

/// One record as a value: a map by the header's names, or a list.
fn record(
    fields: &Fields,
    data: &[u8],
    keys: Option<&[Arc<str>]>,
    spec: &Spec,
) -> Result<Value, Bad> {
    let n = fields.len();
    if let Some(k) = keys {
        if n != k.len() {
            return Err((
                n.min(k.len()),
                "field-count",
                field_count_message(k.len(), n),
            ));
        }
    }
    let value = |i: usize| -> Result<Value, Bad> {
        let f = fields.get(data, i);
        if spec.null_if.as_deref() == Some(f) {
            return Ok(Value::Null);
        }
        match simdutf8::basic::from_utf8(f) {
            Ok(s) => Ok(Value::str(s)),
            Err(_) => Err((i, "utf8", "invalid UTF-8".into())),
        }
    };
    Ok(match keys {
        Some(k) => {
            let mut m = Vec::with_capacity(n);
            for (i, key) in k.iter().enumerate() {
                m.push((key.clone(), value(i)?));
            }
            Value::Map(Arc::new(m))
        }
        None => {
            let mut l = Vec::with_capacity(n);
            for i in 0..n {
                l.push(value(i)?);
            }
            Value::List(Arc::new(l))
        }
    })
}

/// How records are read and what becomes null.
#[derive(Clone)]
pub struct Spec {
    pub header: bool,
    pub dialect: Dialect,
    pub null_if: Option<Box<[u8]>>,
    pub ignore_bad: bool,
}

/// For each input row, the records of the file its source names.
pub struct LoadCsv {
    input: BoxOp,
    source: CExpr,
    spec: Spec,
    cur: Option<Batch>,
    row: usize,
    file: Option<Reading>,
}

impl LoadCsv {
    pub fn new(input: BoxOp, source: CExpr, spec: Spec) -> LoadCsv {
        LoadCsv {
            input,
            source,
            spec,
            cur: None,
            row: 0,
            file: None,
        }
    }
}

impl Op for LoadCsv {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        loop {
            if self.cur.as_ref().is_none_or(|b| self.row >= b.len) {
                self.file = None;
                match self.input.next(cx)? {
                    None => {
                        self.cur = None;
                        return Ok(None);
                    }
                    Some(b) => {
                        self.cur = Some(b);
                        self.row = 0;
                    }
                }
                continue;
            }
            let cur = self.cur.take().expect("checked above");
            if self.file.is_none() {
                let mut locals = Vec::new();
                let src = eval(&cx.env, &self.source, &cur, self.row, &mut locals)?;
                let Value::Str(s) = src else {
                    return Err(QueryError::ty(format!(
                        "LOAD CSV FROM needs a string (a file name), got {}",
                        src.type_name()
                    )));
                };
                let path = resolve(cx.load.import_dir.as_deref(), &s)?;
                self.file = Some(Reading::open(path, &self.spec)?);
            }
            cx.check_cancel()?;
            let mut vals = Vec::new();
            let file = self.file.as_mut().expect("opened above");
            let r = file.read(&mut cx.load, &self.spec, &mut vals);
            let done = file.done;
            let mut out = Batch::empty(cur.width() + 1);
            if !vals.is_empty() {
                let w = cur.width();
                for c in 0..w {
                    let v = &cur.cols[c][self.row];
                    out.cols[c] = vec![v.clone(); vals.len()];
                }
                out.len = vals.len();
                out.cols[w] = vals;
            }
            if done {
                self.file = None;
                self.row += 1;
            }
            self.cur = Some(cur);
            r?;
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
    }
}
