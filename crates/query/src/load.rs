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
use quiver_csv::reader::{spawn_reader, Msg, Window};
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
    /// The statement's rejects file (written from the first bad row on).
    rejects: Option<Rejects>,
    pub bad_rows: u64,
}

impl LoadState {
    pub fn new(import_dir: Option<PathBuf>, rejects_path: Option<PathBuf>) -> LoadState {
        LoadState {
            import_dir,
            rejects: rejects_path.map(Rejects::new),
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
    fn reject(
        &mut self,
        file: &Path,
        line: u64,
        column: u64,
        reason: &str,
        message: &str,
        raw: &[u8],
    ) -> Result<(), QueryError> {
        self.bad_rows += 1;
        match self.rejects.as_mut() {
            Some(r) => r
                .write(file, line, column, reason, message, raw)
                .map_err(|e| QueryError::Csv(e.to_string())),
            None => Ok(()),
        }
    }
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
fn pool() -> Arc<rayon::ThreadPool> {
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

/// One file being read.
struct Reading {
    path: PathBuf,
    rx: Option<Receiver<Msg>>,
    recycle: Sender<Vec<u8>>,
    handle: Option<std::thread::JoinHandle<()>>,
    cancel: Arc<AtomicBool>,
    /// Header names, when the file has a header.
    keys: Option<Arc<[String]>>,
    window: Option<Window>,
    /// Offset of the next record in the window.
    pos: usize,
    /// 0-based line of the file at `pos`.
    line: u64,
    fields: Fields,
    done: bool,
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        // Dropping the receiver unblocks a reader waiting to send.
        self.rx.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn read_error(e: quiver_csv::ReadError) -> QueryError {
    QueryError::Csv(e.to_string())
}

impl Reading {
    fn open(path: PathBuf, header: bool, dialect: Dialect) -> Result<Reading, QueryError> {
        let empty = std::fs::metadata(&path)
            .map(|m| m.len() == 0)
            .unwrap_or(false);
        let cancel = Arc::new(AtomicBool::new(false));
        let (rx, recycle, handle) = spawn_reader(
            vec![path.clone()],
            dialect,
            WINDOW_BYTES,
            WINDOW_BYTES,
            header && !empty,
            cancel.clone(),
            pool(),
        );
        let mut r = Reading {
            path,
            rx: Some(rx),
            recycle,
            handle: Some(handle),
            cancel,
            keys: None,
            window: None,
            pos: 0,
            line: 0,
            fields: Fields::default(),
            done: false,
        };
        if header && empty {
            r.done = true;
        } else if header {
            match r.recv() {
                Some(Msg::Header { fields, lines }) => {
                    let mut keys = Vec::with_capacity(fields.len());
                    for (i, f) in fields.into_iter().enumerate() {
                        keys.push(String::from_utf8(f).map_err(|_| {
                            QueryError::Csv(format!(
                                "{}:1: header field {} is not UTF-8",
                                r.path.display(),
                                i + 1
                            ))
                        })?);
                    }
                    r.keys = Some(keys.into());
                    r.line = lines;
                }
                Some(Msg::Error(e)) => return Err(read_error(e)),
                _ => r.done = true,
            }
        }
        Ok(r)
    }

    fn recv(&mut self) -> Option<Msg> {
        self.rx.as_ref().and_then(|rx| rx.recv().ok())
    }

    /// Appends up to `room` records to `out` as `(input row, value)` pairs; the file is
    /// done when `self.done`.
    fn read(
        &mut self,
        load: &mut LoadState,
        spec: &Spec,
        room: usize,
        out: &mut Vec<Value>,
    ) -> Result<(), QueryError> {
        while out.len() < room && !self.done {
            let exhausted = self
                .window
                .as_ref()
                .is_none_or(|w| self.pos >= w.data.len());
            if exhausted {
                if let Some(w) = self.window.take() {
                    let _ = self.recycle.try_send(w.data);
                }
                match self.recv() {
                    Some(Msg::Window(w)) => {
                        self.window = Some(w);
                        self.pos = 0;
                    }
                    Some(Msg::Error(e)) => return Err(read_error(e)),
                    Some(Msg::Header { .. }) => {}
                    None => self.done = true,
                }
                continue;
            }
            let w = self.window.as_ref().expect("checked above");
            let data = &w.data[self.pos..];
            let mut t = Tokenizer::new(data, &spec.dialect);
            while out.len() < room {
                let rec = match t.next_record(&mut self.fields) {
                    Ok(None) => break,
                    Ok(Some(span)) => record(&self.fields, data, self.keys.as_deref(), spec)
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
                        match f.error {
                            TokenError::StrayQuote => "quote character inside an unquoted field (quote the whole field and write a quote inside it twice)".to_string(),
                            e => e.to_string(),
                        },
                        f.record_start..f.resume_at,
                    )),
                };
                match rec {
                    Ok(v) => out.push(v),
                    Err((line, column, reason, msg, raw)) => {
                        let line = self.line + line;
                        if !spec.ignore_bad {
                            return Err(QueryError::Csv(format!(
                                "{}:{}:{}: {msg} (IGNORE BAD skips bad rows and writes them to a rejects file)",
                                self.path.display(),
                                line + 1,
                                column + 1
                            )));
                        }
                        load.reject(&self.path, line, column, reason, &msg, &data[raw])?;
                    }
                }
            }
            self.pos += t.offset();
            self.line += t.line();
        }
        Ok(())
    }
}

type Bad = (usize, &'static str, String);

/// One record as a value: a map by the header's names, or a list.
fn record(
    fields: &Fields,
    data: &[u8],
    keys: Option<&[String]>,
    spec: &Spec,
) -> Result<Value, Bad> {
    let n = fields.len();
    if let Some(k) = keys {
        if n != k.len() {
            return Err((
                n.min(k.len()),
                "field-count",
                format!("expected {} fields (as in the header), found {n}", k.len()),
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
                self.file = Some(Reading::open(path, self.spec.header, self.spec.dialect)?);
            }
            cx.check_cancel()?;
            let mut vals = Vec::with_capacity(BATCH_ROWS);
            let file = self.file.as_mut().expect("opened above");
            let r = file.read(&mut cx.load, &self.spec, BATCH_ROWS, &mut vals);
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
