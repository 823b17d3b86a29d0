//! Hash partitions on disk, for the operators that spill by key (aggregation and
//! DISTINCT; a full sort spills sorted runs instead, see `sort.rs`).
//!
//! Once an operator's grant is full it keeps what it holds and sends the rows it cannot
//! place in memory to one of [`PARTITIONS`] unnamed temporary files, chosen by a hash of
//! the row's key: rows of one key all land in one partition, so each partition is then
//! finished on its own, in a memory of its own, after the rows in memory. A partition
//! that still does not fit spills again with another hash seed, up to [`MAX_LEVEL`]
//! levels (hybrid hash aggregation, as DuckDB's and SQL Server's spilling hash
//! operators do). Values use the log's encoding (`engine::wal::encode_value`).

use super::*;
use std::hash::{BuildHasher, Hasher};
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, Write};

/// Files a spill splits its rows into.
pub(crate) const PARTITIONS: usize = 32;

/// How many times a partition may spill again before the operator waits or fails.
pub(crate) const MAX_LEVEL: u32 = 4;

/// The write buffer of each partition file, at most (an eighth of the limit for all).
const BUF_BYTES: usize = 64 << 10;

fn io_error(operator: &str, dir: &std::path::Path, e: std::io::Error) -> QueryError {
    QueryError::Argument(format!(
        "{operator} could not spill to the temporary directory {} ({e}); give one with room (--temp-dir)",
        dir.display()
    ))
}

/// Rows being written to partition files.
pub(crate) struct Partitions {
    files: Vec<BufWriter<std::fs::File>>,
    rows: Vec<u64>,
    hasher: hashbrown::DefaultHashBuilder,
    dir: std::path::PathBuf,
    operator: &'static str,
    pub level: u32,
    buf: Vec<u8>,
    buf_bytes: usize,
}

impl Partitions {
    /// Partitions whose buffers take at most an eighth of `limit_bytes`.
    pub fn new(
        dir: &std::path::Path,
        level: u32,
        operator: &'static str,
        limit_bytes: u64,
    ) -> Result<Partitions, QueryError> {
        let buf_bytes = ((limit_bytes / 8) as usize / PARTITIONS).clamp(4 << 10, BUF_BYTES);
        let mut files = Vec::with_capacity(PARTITIONS);
        for _ in 0..PARTITIONS {
            let f = tempfile::tempfile_in(dir).map_err(|e| io_error(operator, dir, e))?;
            files.push(BufWriter::with_capacity(buf_bytes, f));
        }
        Ok(Partitions {
            files,
            rows: vec![0; PARTITIONS],
            // A seed of its own: a partition that spills again splits differently.
            hasher: hashbrown::DefaultHashBuilder::default(),
            dir: dir.to_path_buf(),
            operator,
            level,
            buf: Vec::new(),
            buf_bytes,
        })
    }

    /// Bytes the write buffers hold (counted in the operator's grant).
    pub fn buffer_bytes(&self) -> u64 {
        (PARTITIONS * self.buf_bytes) as u64
    }

    /// Writes a row (`values`) to the partition of `key`.
    pub fn write<'v>(
        &mut self,
        key: impl Iterator<Item = &'v Value>,
        values: impl Iterator<Item = &'v Value>,
    ) -> Result<(), QueryError> {
        let mut h = self.hasher.build_hasher();
        for k in key {
            crate::value::hash_value(k, &mut h);
        }
        self.write_to((h.finish() >> 32) as usize % PARTITIONS, values)
    }

    /// Writes a row (`values`) to partition `p` (of [`PARTITIONS`]), for an operator
    /// that chooses partitions by a hash of its own.
    pub fn write_to<'v>(
        &mut self,
        p: usize,
        values: impl Iterator<Item = &'v Value>,
    ) -> Result<(), QueryError> {
        self.buf.clear();
        for v in values {
            quiver_engine::wal::encode_value(&mut self.buf, v);
        }
        let w = &mut self.files[p];
        w.write_all(&(self.buf.len() as u32).to_le_bytes())
            .and_then(|()| w.write_all(&self.buf))
            .map_err(|e| io_error(self.operator, &self.dir, e))?;
        self.rows[p] += 1;
        Ok(())
    }

    /// The partitions that got rows, ready to be read back.
    pub fn finish(self, width: usize) -> Result<Vec<Partition>, QueryError> {
        let mut out = Vec::new();
        for (index, (w, rows)) in self.files.into_iter().zip(self.rows).enumerate() {
            if rows == 0 {
                continue;
            }
            let mut f = w
                .into_inner()
                .map_err(|e| io_error(self.operator, &self.dir, e.into_error()))?;
            f.rewind()
                .map_err(|e| io_error(self.operator, &self.dir, e))?;
            out.push(Partition {
                r: BufReader::with_capacity(self.buf_bytes, f),
                width,
                index,
                level: self.level,
                buf: Vec::new(),
            });
        }
        Ok(out)
    }
}

/// A partition file being read back.
pub(crate) struct Partition {
    r: BufReader<std::fs::File>,
    /// Values a record holds (a capacity hint).
    width: usize,
    buf: Vec<u8>,
    /// Which of the [`PARTITIONS`] files it is.
    pub index: usize,
    /// The level of the spill that wrote it (a spill of its rows is one deeper).
    pub level: u32,
}

impl Partition {
    /// The next record's values, `None` at the end.
    pub fn next_record(&mut self) -> Result<Option<Vec<Value>>, QueryError> {
        let bad = || QueryError::Argument("a spilled partition could not be read back".into());
        if self.r.fill_buf().map_err(|_| bad())?.is_empty() {
            return Ok(None);
        }
        let mut n = [0u8; 4];
        self.r.read_exact(&mut n).map_err(|_| bad())?;
        self.buf.resize(u32::from_le_bytes(n) as usize, 0);
        self.r.read_exact(&mut self.buf).map_err(|_| bad())?;
        let mut at = 0;
        let mut rec = Vec::with_capacity(self.width);
        while at < self.buf.len() {
            rec.push(quiver_engine::wal::decode_value(&self.buf, &mut at).ok_or_else(bad)?);
        }
        Ok(Some(rec))
    }
}
