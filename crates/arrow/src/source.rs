//! Parquet files and Arrow streams as import input: one [`RecordSource`],
//! [`ArrowSource`], over a closure that opens the stream (a Parquet reader, a Python table).

use crate::encode::{quiver_type, TypedBatch};
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use quiver_common::types::DataType;
use quiver_csv::reader::{RecordSource, TypedRows, TypedStream};
use quiver_csv::Dialect;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows per batch read from Parquet (a row group is read a batch at a time, so memory
/// holds one batch of decoded columns, not the group).
const PARQUET_BATCH_ROWS: usize = 64 * 1024;

/// The fewest rows a batch is cut to (below that, per-batch costs show).
const MIN_BATCH_ROWS: usize = 1024;

/// Whether `path` is Parquet input: a `.parquet` / `.parq` / `.pq` file, or a folder
/// holding such files (the parts a Spark or DuckDB export writes).
pub fn is_parquet(path: &Path) -> bool {
    let ext = |p: &Path| {
        p.extension().and_then(|e| e.to_str()).is_some_and(|e| {
            e.eq_ignore_ascii_case("parquet")
                || e.eq_ignore_ascii_case("parq")
                || e.eq_ignore_ascii_case("pq")
        })
    };
    ext(path) || (path.is_dir() && parts(path).is_ok_and(|p| !p.is_empty()))
}

/// The Parquet files of a folder, in name order (hidden files and `_SUCCESS`-style
/// markers skipped).
fn parts(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.starts_with('.') && !name.starts_with('_') && p.is_file() && is_parquet(p)
        })
        .collect();
    out.sort();
    Ok(out)
}

fn schema_types(
    schema: &SchemaRef,
    what: &Path,
) -> Result<(Vec<String>, Vec<Option<DataType>>), String> {
    let mut names = Vec::new();
    let mut types = Vec::new();
    for f in schema.fields() {
        names.push(f.name().clone());
        types.push(Some(quiver_type(f.data_type()).map_err(|e| {
            format!("{}: column {}: {e}", what.display(), f.name())
        })?));
    }
    Ok((names, types))
}

/// One or more Parquet files (or folders of parts) read as one input, the schema of
/// the first for all: the footers of `paths` are read now and must agree on their
/// columns. Read again from the start on every open.
pub fn parquet_source(paths: &[PathBuf]) -> Result<ArrowSource, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let found = parts(p).map_err(|e| format!("{}: {e}", p.display()))?;
            if found.is_empty() {
                return Err(format!(
                    "{}: the folder holds no .parquet files",
                    p.display()
                ));
            }
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    let mut first: Option<Vec<String>> = None;
    let (mut bytes, mut rows) = (0, 0);
    for f in &files {
        let file = std::fs::File::open(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let b = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| format!("{}: not a Parquet file Quiver can read: {e}", f.display()))?;
        bytes += b
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.total_byte_size().max(0) as u64)
            .sum::<u64>();
        rows += b.metadata().file_metadata().num_rows().max(0) as u64;
        let (names, _) = schema_types(b.schema(), f)?;
        match &first {
            None => first = Some(names),
            Some(n0) if *n0 != names => {
                return Err(format!(
                    "{}: its columns ({}) are not those of {} ({}); the files of one group share their columns",
                    f.display(),
                    names.join(", "),
                    files[0].display(),
                    n0.join(", ")
                ))
            }
            Some(_) => {}
        }
    }
    if first.is_none() {
        return Err("no Parquet files given".into());
    }
    let what = files[0].clone();
    let open = move |batch_rows: usize| -> Result<(SchemaRef, Batches), String> {
        let mut batches = ParquetBatches {
            files: files.clone().into_iter(),
            cur: None,
            batch_rows,
        };
        batches
            .open_next()
            .ok_or("no Parquet files given")?
            .map_err(|e| e.to_string())?;
        let schema = batches
            .cur
            .as_ref()
            .map(|r| r.schema())
            .ok_or("no Parquet files given")?;
        Ok((schema, Box::new(batches)))
    };
    let mut source = ArrowSource::new(Box::new(open), true, None, bytes, &what)?;
    source.rows = Some(rows);
    source.row_bytes = (rows > 0).then(|| (bytes / rows).max(1));
    Ok(source)
}

/// The batches of several Parquet files in turn.
struct ParquetBatches {
    files: std::vec::IntoIter<PathBuf>,
    cur: Option<parquet::arrow::arrow_reader::ParquetRecordBatchReader>,
    batch_rows: usize,
}

impl Iterator for ParquetBatches {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = &mut self.cur {
                match r.next() {
                    Some(b) => return Some(b),
                    None => self.cur = None,
                }
            }
            if let Err(e) = self.open_next()? {
                return Some(Err(e));
            }
        }
    }
}

impl ParquetBatches {
    /// Opens the next file as the current reader; `None` past the last.
    fn open_next(&mut self) -> Option<Result<(), ArrowError>> {
        let f = self.files.next()?;
        let opened = std::fs::File::open(&f)
            .map_err(|e| ArrowError::IoError(format!("{}: {e}", f.display()), e))
            .and_then(|file| {
                ParquetRecordBatchReaderBuilder::try_new(file)
                    .and_then(|b| b.with_batch_size(self.batch_rows).build())
                    .map_err(|e| ArrowError::ExternalError(Box::new(e)))
            });
        Some(opened.map(|r| self.cur = Some(r)))
    }
}

/// Batches with their schema, as an Arrow stream gives them.
pub type Batches = Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>> + Send>;

/// Opens an Arrow stream: its schema and batches (a new stream each call, for a table
/// that can be read again; an error past the first for a stream that cannot). The
/// argument is how many rows a batch should hold, for a source that can choose (a
/// Parquet reader); others give their batches as they are.
pub type OpenStream = dyn Fn(usize) -> Result<(SchemaRef, Batches), String> + Send + Sync;

/// An Arrow stream as import input (a DataFrame or Arrow table handed over by Python).
pub struct ArrowSource {
    open: Box<OpenStream>,
    reopenable: bool,
    /// Renames of columns (Arrow name → header name), for a caller that names the id
    /// and endpoint columns by argument.
    names: Vec<String>,
    types: Vec<Option<DataType>>,
    bytes: u64,
    /// Rows the input holds, when known (a Parquet footer says), for progress.
    rows: Option<u64>,
    /// Bytes a row takes decoded, when known (a Parquet footer says), to size batches.
    row_bytes: Option<u64>,
    /// The first stream, opened to read the schema, kept for the first read.
    first: std::sync::Mutex<Option<Batches>>,
}

impl ArrowSource {
    /// `open` is called now (for the schema) and on every later read; `names` replaces
    /// the schema's column names in the header when given.
    pub fn new(
        open: Box<OpenStream>,
        reopenable: bool,
        names: Option<Vec<String>>,
        bytes: u64,
        what: &Path,
    ) -> Result<ArrowSource, String> {
        let (schema, batches) = open(PARQUET_BATCH_ROWS)?;
        let (schema_names, types) = schema_types(&schema, what)?;
        let names = names.unwrap_or(schema_names);
        if names.len() != schema.fields().len() {
            return Err(format!(
                "{}: {} names for {} columns",
                what.display(),
                names.len(),
                schema.fields().len()
            ));
        }
        Ok(ArrowSource {
            open,
            reopenable,
            names,
            types,
            bytes,
            rows: None,
            row_bytes: None,
            first: std::sync::Mutex::new(Some(batches)),
        })
    }
}

impl RecordSource for ArrowSource {
    fn open(&self, dialect: &Dialect, window_bytes: usize) -> io::Result<TypedStream> {
        // A batch about a window of the import's: the memory in flight is the budget's.
        let window_bytes = window_bytes.max(1);
        let want = self
            .row_bytes
            .map_or(PARQUET_BATCH_ROWS, |rb| window_bytes / rb as usize)
            .clamp(MIN_BATCH_ROWS, PARQUET_BATCH_ROWS);
        let kept = self.first.lock().map(|mut f| f.take()).unwrap_or(None);
        let batches = match kept {
            // The stream opened for the schema, unless a new one can be sized.
            Some(b) if !self.reopenable => b,
            _ => (self.open)(want).map_err(io::Error::other)?.1,
        };
        // Batches given whole (a frame is often one) are cut to about a window each, and
        // each slice said to hold its share of the batch's bytes (a slice's own buffers
        // are its parent's, which would make the parse stage cut it too fine).
        type Sliced = Result<(RecordBatch, usize), ArrowError>;
        let batches = batches.flat_map(move |b| -> Vec<Sliced> {
            match b {
                Err(e) => vec![Err(e)],
                Ok(b) => {
                    let (n, mem) = (b.num_rows(), b.get_array_memory_size().max(1));
                    let rows = (window_bytes as u128 * n as u128 / mem as u128) as usize;
                    // At least MIN_BATCH_ROWS, at most the batch (`clamp` would panic on a
                    // batch smaller than the minimum).
                    let rows = rows.max(MIN_BATCH_ROWS).min(n.max(1));
                    (0..n)
                        .step_by(rows)
                        .map(|s| {
                            let k = rows.min(n - s);
                            Ok((
                                b.slice(s, k),
                                (mem as u128 * k as u128 / n as u128) as usize,
                            ))
                        })
                        .collect()
                }
            }
        });
        let (dialect, total, rows_hint) = (*dialect, self.bytes, self.rows);
        let (mut rows, mut mem) = (0u64, 0u64);
        Ok(Box::new(batches.map(move |b| {
            let (b, bytes) = b.map_err(io::Error::other)?;
            let t = TypedBatch::new(&b, bytes, dialect).map_err(io::Error::other)?;
            rows += t.rows() as u64;
            mem += t.bytes() as u64;
            // Progress in the source's bytes: by rows when their number is known, else
            // by what the batches held, up to the hint.
            let done = match rows_hint {
                Some(n) if n > 0 => (total as u128 * rows.min(n) as u128 / n as u128) as u64,
                _ => mem.min(total),
            };
            Ok((Arc::new(t) as Arc<dyn TypedRows>, done))
        })))
    }

    fn reopenable(&self) -> bool {
        self.reopenable
    }

    fn column_types(&self) -> Vec<Option<DataType>> {
        self.types.clone()
    }

    fn column_names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn bytes_hint(&self) -> u64 {
        self.bytes
    }
}

/// The source of a group whose files are Parquet (`None` when none is; an error when
/// some are and some are not).
pub fn parquet_group(files: &[PathBuf]) -> Result<Option<Arc<dyn RecordSource>>, String> {
    let n = files.iter().filter(|f| is_parquet(f)).count();
    if n == 0 {
        return Ok(None);
    }
    if n < files.len() {
        return Err(format!(
            "{}: a group's files are all CSV or all Parquet; import the others as a group of their own",
            files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(",")
        ));
    }
    Ok(Some(Arc::new(parquet_source(files)?)))
}
