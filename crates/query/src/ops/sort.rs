//! ORDER BY: a full sort or a top-k heap, under the query's memory grant.
//!
//! A full sort holds its rows flat ([`Flat`]): every sort key as a normalized key (two
//! words of [`quiver_engine::value::order_prefix`], inverted when descending; DuckDB's
//! normalized keys, in spirit), then the row's index, in chunks. For output the rows'
//! varying bits are packed one integer a row and sorted, or each chunk is sorted where it
//! is and the chunks merged as the output is read. A key's values are kept only once
//! one of them is not whole in its prefix (a long string, a list, a large integer); ties
//! of such prefixes then compare the values. No value object is kept a key a row.
//!
//! A full sort whose rows outgrow the grant spills (seed 001's lesson: big work goes to
//! a temporary directory rather than failing): each time the grant is full the rows held
//! are sorted and written as a run to a temporary file, and the runs are merged as the
//! output is read.

use super::*;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};

/// ORDER BY (with LIMIT: a bounded top-k), giving out its rows from `skip` on.
pub struct Sort {
    input: BoxOp,
    keys: Vec<(CExpr, bool)>,
    /// Rows wanted from the start of the order (SKIP + LIMIT), `None`: all.
    limit: Option<usize>,
    /// Rows of the order left out (SKIP): passed over without being made.
    skip: usize,
    /// Columns of a row carried through the sort: the first ones (what is above reads
    /// only the projection's items, not the columns the keys were computed from).
    carry: usize,
    out: Option<std::vec::IntoIter<Batch>>,
    peak: u64,
    /// The merge of spilled runs, once the input is read (`None`: nothing spilled).
    merge: Option<Merge>,
    /// The sorted rows, in memory, given out a batch at a time, with their grant and
    /// how many rows are still to be given out.
    sorted: Option<(Flat, Grant, Option<usize>)>,
}

impl Sort {
    pub fn new(
        input: BoxOp,
        keys: Vec<(CExpr, bool)>,
        limit: Option<usize>,
        skip: usize,
        carry: usize,
    ) -> Sort {
        Sort {
            input,
            keys,
            limit,
            skip,
            carry,
            out: None,
            peak: 0,
            merge: None,
            sorted: None,
        }
    }
}

/// Sorted runs being merged: a reader per run file and its next row, plus the rows that
/// were still in memory at the end (sorted where they are, as the last run).
pub struct Merge {
    runs: Vec<(BufReader<std::fs::File>, Option<RunRow>)>,
    last: Flat,
    last_head: Option<RunRow>,
    desc: Vec<bool>,
    /// Keys with words (see [`Flat`]).
    nn: usize,
    width: usize,
    /// Rows still to pass over before the first one given out (SKIP).
    skip: usize,
    left: Option<usize>,
}

fn spill_error(dir: &std::path::Path, e: std::io::Error) -> QueryError {
    QueryError::Argument(format!(
        "ORDER BY could not spill to the temporary directory {} ({e}); give one with room (--temp-dir)",
        dir.display()
    ))
}

/// A sorted run being written (see [`RunWriter::push`]) to an unnamed temporary file in
/// `dir` (gone when closed, whatever happens to the process).
struct RunWriter<'d> {
    w: BufWriter<std::fs::File>,
    buf: Vec<u8>,
    dir: &'d std::path::Path,
}

impl<'d> RunWriter<'d> {
    fn new(dir: &'d std::path::Path) -> Result<RunWriter<'d>, QueryError> {
        let file = tempfile::tempfile_in(dir).map_err(|e| spill_error(dir, e))?;
        Ok(RunWriter {
            w: BufWriter::with_capacity(1 << 20, file),
            buf: Vec::new(),
            dir,
        })
    }

    /// Writes a row: its arrival number, its keys' words (the row index left out), the
    /// value of each key that has one kept (a flag byte a key), then its columns, in
    /// the log's value encoding, the whole record prefixed with its length.
    fn push<'v>(
        &mut self,
        words: &[u64],
        kept: impl Iterator<Item = Option<&'v Value>>,
        cols: &[Value],
        seq: u64,
    ) -> Result<(), QueryError> {
        let buf = &mut self.buf;
        buf.clear();
        buf.extend_from_slice(&seq.to_le_bytes());
        buf.extend_from_slice(&(words.len() as u32).to_le_bytes());
        for w in words {
            buf.extend_from_slice(&w.to_le_bytes());
        }
        let flags_at = buf.len();
        buf.extend_from_slice(&0u32.to_le_bytes());
        let mut nk = 0u32;
        for k in kept {
            nk += 1;
            match k {
                Some(v) => {
                    buf.push(1);
                    quiver_engine::wal::encode_value(buf, v);
                }
                None => buf.push(0),
            }
        }
        buf[flags_at..flags_at + 4].copy_from_slice(&nk.to_le_bytes());
        buf.extend_from_slice(&(cols.len() as u32).to_le_bytes());
        for v in cols {
            quiver_engine::wal::encode_value(buf, v);
        }
        self.w
            .write_all(&(self.buf.len() as u32).to_le_bytes())
            .and_then(|()| self.w.write_all(&self.buf))
            .map_err(|e| spill_error(self.dir, e))
    }

    /// The run, rewound to its start.
    fn finish(self) -> Result<std::fs::File, QueryError> {
        let dir = self.dir;
        let mut file = self
            .w
            .into_inner()
            .map_err(|e| spill_error(dir, e.into_error()))?;
        std::io::Seek::rewind(&mut file).map_err(|e| spill_error(dir, e))?;
        Ok(file)
    }
}

/// A row of a sorted run, or of the rows still in memory, as the merge holds it: its
/// keys' words, the values of the keys that kept theirs (`None`: made back from the
/// words when a tie needs it), its arrival number, and its columns, still encoded when
/// read from a run (decoded only for a row given out, not for one SKIP passes over).
struct RunRow {
    words: Vec<u64>,
    kept: Vec<Option<Value>>,
    seq: u64,
    cols: RunCols,
}

enum RunCols {
    /// A run's record, and where its columns start.
    Encoded(Vec<u8>, usize),
    /// Row `i` of the rows still in memory (taken only when given out).
    Held(usize),
}

fn bad_run() -> QueryError {
    QueryError::Argument("a spilled ORDER BY run could not be read back".into())
}

impl RunRow {
    /// The row's columns (`held`: the rows still in memory).
    fn into_cols(self, held: &mut Flat) -> Result<Vec<Value>, QueryError> {
        match self.cols {
            RunCols::Held(i) => Ok(held.take_row(i).collect()),
            RunCols::Encoded(buf, mut at) => {
                let word = buf.get(at..at + 4).ok_or_else(bad_run)?;
                let n = u32::from_le_bytes(word.try_into().expect("4 bytes")) as usize;
                at += 4;
                let mut cols = Vec::with_capacity(n);
                for _ in 0..n {
                    cols.push(quiver_engine::wal::decode_value(&buf, &mut at).ok_or_else(bad_run)?);
                }
                Ok(cols)
            }
        }
    }
}

/// Two rows' order by their keys, arrival aside: each key's words (the first `nn`
/// keys have them), then, where either row kept a value of the key (always past the
/// keys with words), the values, made back from its words for a row that kept none.
/// `kept(j)` gives a row's value of key `j` if it kept one.
fn cmp_by_words<'v>(
    desc: &[bool],
    nn: usize,
    (wa, ka): (&[u64], impl Fn(usize) -> Option<&'v Value>),
    (wb, kb): (&[u64], impl Fn(usize) -> Option<&'v Value>),
) -> std::cmp::Ordering {
    use std::borrow::Cow;
    use std::cmp::Ordering;
    for (j, &d) in desc.iter().enumerate() {
        if j < nn {
            let o = wa[2 * j..2 * j + 2].cmp(&wb[2 * j..2 * j + 2]);
            if o != Ordering::Equal {
                return o;
            }
        }
        let (x, y) = (ka(j), kb(j));
        if x.is_some() || y.is_some() {
            let value = |k: Option<&'v Value>, w: &[u64]| match k {
                Some(v) => Cow::Borrowed(v),
                None => Cow::Owned(word_value(w, j, d)),
            };
            let o = order(&value(x, wa), &value(y, wb));
            let o = if d { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
    }
    Ordering::Equal
}

/// Two merged rows' order: by their keys ([`cmp_by_words`]), then by arrival.
fn cmp_run_rows(desc: &[bool], nn: usize, a: &RunRow, b: &RunRow) -> std::cmp::Ordering {
    cmp_by_words(
        desc,
        nn,
        (&a.words, |j| a.kept[j].as_ref()),
        (&b.words, |j| b.kept[j].as_ref()),
    )
    .then(a.seq.cmp(&b.seq))
}

/// The next row of a run, `None` at its end.
fn read_run_row(r: &mut BufReader<std::fs::File>) -> Result<Option<RunRow>, QueryError> {
    if r.fill_buf().map_err(|_| bad_run())?.is_empty() {
        return Ok(None);
    }
    let mut len = [0u8; 4];
    r.read_exact(&mut len).map_err(|_| bad_run())?;
    let mut buf = vec![0u8; u32::from_le_bytes(len) as usize];
    r.read_exact(&mut buf).map_err(|_| bad_run())?;
    let u32_at = |at: usize| {
        buf.get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or_else(bad_run)
    };
    let seq = u64::from_le_bytes(buf.get(0..8).ok_or_else(bad_run)?.try_into().expect("8"));
    let nw = u32_at(8)?;
    let mut at = 12;
    let mut words = Vec::with_capacity(nw);
    for _ in 0..nw {
        let w = buf.get(at..at + 8).ok_or_else(bad_run)?;
        words.push(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        at += 8;
    }
    let nk = u32_at(at)?;
    at += 4;
    let mut kept = Vec::with_capacity(nk);
    for _ in 0..nk {
        let flag = *buf.get(at).ok_or_else(bad_run)?;
        at += 1;
        kept.push(if flag == 1 {
            Some(quiver_engine::wal::decode_value(&buf, &mut at).ok_or_else(bad_run)?)
        } else {
            None
        });
    }
    Ok(Some(RunRow {
        words,
        kept,
        seq,
        cols: RunCols::Encoded(buf, at),
    }))
}

/// Key `j` as a row's words `w` have it (`desc`: its words are inverted).
fn word_value(w: &[u64], j: usize, desc: bool) -> Value {
    let flip = if desc { u128::MAX } else { 0 };
    let p = (((w[2 * j] as u128) << 64) | w[2 * j + 1] as u128) ^ flip;
    quiver_engine::value::from_order_prefix(p).unwrap_or(Value::Null)
}

/// One carried column of a chunk of [`Flat`]: integers as they are while every value
/// has been one (8 bytes a row instead of a 32-byte value, and nothing to drop), values
/// from the first that is not.
enum Carried {
    Ints(Vec<i64>),
    Values(Vec<Value>),
}

impl Carried {
    fn with_capacity(rows: usize) -> Carried {
        let v = Vec::with_capacity(rows);
        quiver_common::memory::advise_huge_pages(&v);
        Carried::Ints(v)
    }

    /// Appends `v`; what it holds on the heap.
    fn push(&mut self, v: &Value) -> u64 {
        if let Carried::Ints(xs) = self {
            if let Value::Int(x) = v {
                xs.push(*x);
                return 0;
            }
            let mut vs = Vec::with_capacity(xs.capacity());
            quiver_common::memory::advise_huge_pages(&vs);
            vs.extend(xs.iter().map(|&x| Value::Int(x)));
            *self = Carried::Values(vs);
        }
        let Carried::Values(vs) = self else {
            unreachable!("made values above")
        };
        vs.push(v.clone());
        crate::value::heap_bytes(v) as u64
    }

    fn get(&self, r: usize) -> Value {
        match self {
            Carried::Ints(xs) => Value::Int(xs[r]),
            Carried::Values(vs) => vs[r].clone(),
        }
    }

    /// Moves row `r`'s value out (a value's slot is left null).
    fn take(&mut self, r: usize) -> Value {
        match self {
            Carried::Ints(xs) => Value::Int(xs[r]),
            Carried::Values(vs) => std::mem::take(&mut vs[r]),
        }
    }

    fn reserve_exact(&mut self, more: usize) {
        match self {
            Carried::Ints(xs) => {
                xs.reserve_exact(more);
                quiver_common::memory::advise_huge_pages(xs);
            }
            Carried::Values(vs) => {
                vs.reserve_exact(more);
                quiver_common::memory::advise_huge_pages(vs);
            }
        }
    }

    /// Bytes of its capacity.
    fn bytes(&self) -> usize {
        match self {
            Carried::Ints(xs) => xs.capacity() * 8,
            Carried::Values(vs) => vs.capacity() * 32,
        }
    }
}

/// Rows a chunk of [`Flat`] holds: at least this many, and enough that a chunk of words
/// comes from the system and goes back to it when freed
/// ([`quiver_common::memory::MMAP_THRESHOLD`]: a sort that packs its rows frees each
/// chunk of words as it is packed); fewer under a small limit (an eighth of it).
const CHUNK_ROWS: usize = 64 << 10;

/// Keys that get normalized words of their own; keys past these compare by value on a
/// tie of the first ones.
const NORM_KEYS: usize = 4;

/// The rows of a full sort, held flat, in chunks of rows each allocated once at its full
/// size (no allocation a row, and no vector that doubles and copies: a copy holds old and
/// new at once, past what is counted):
/// - `words`: per row, two words per normalized key, then the row's index (so a chunk
///   sorts as plain `[u64; K]` arrays when every key is whole in its words);
/// - `vals`: per key, its values, only once one of them was not whole in its prefix
///   (the values of the rows before are made back from their prefixes);
/// - `cols`: the row's columns.
///
/// Rows arrive in order, so row `i`'s arrival number is `first_seq + i`. Once sorted,
/// rows are taken out of the packed integers ([`Flat::pack`]) or by a heap of chunk
/// cursors ([`Flat::sort`]).
struct Flat {
    /// Keys with words: `min(desc.len(), NORM_KEYS)`.
    nn: usize,
    /// Words a row: `2 * nn + 1`.
    stride: usize,
    desc: Vec<bool>,
    width: usize,
    chunk: usize,
    limit: u64,
    words: Vec<Vec<u64>>,
    vals: Vec<Option<Vec<Vec<Value>>>>,
    /// Per chunk, its carried columns.
    cols: Vec<Vec<Carried>>,
    len: usize,
    first_seq: u64,
    /// What the held values hold on the heap.
    heap_bytes: u64,
    /// Once sorted in its chunks: the merge of the chunks, a min-heap of chunks by their
    /// next row, and each chunk's next row.
    cursor_heap: Vec<u32>,
    cursor_pos: Vec<u32>,
    /// Or, sorted for output only, each row as one integer ([`Flat::pack`]), and the
    /// next one to give.
    packed: Vec<u128>,
    at: usize,
    /// [`Flat::plain`], as it was when sorted.
    is_plain: bool,
}

impl Flat {
    fn new(desc: &[bool], limit: u64) -> Flat {
        let nk = desc.len();
        let nn = nk.min(NORM_KEYS);
        Flat {
            nn,
            stride: 2 * nn + 1,
            desc: desc.to_vec(),
            width: 0,
            chunk: CHUNK_ROWS,
            limit,
            words: Vec::new(),
            vals: (0..nk).map(|j| (j >= nn).then(Vec::new)).collect(),
            cols: Vec::new(),
            len: 0,
            first_seq: 0,
            heap_bytes: 0,
            cursor_heap: Vec::new(),
            cursor_pos: Vec::new(),
            packed: Vec::new(),
            at: 0,
            is_plain: false,
        }
    }

    /// Makes room for the next rows in the last chunk (a new chunk when it is full);
    /// how many rows fit there, at most `want`.
    fn room(&mut self, want: usize) -> usize {
        if self.len % self.chunk == 0 {
            // The first chunk grows as rows come (a small sort holds little); the next
            // ones are made at their full size.
            let (chunk, width) = (self.chunk, self.width);
            let rows = if self.len == 0 { 0 } else { chunk };
            let w = Vec::with_capacity(rows * self.stride);
            quiver_common::memory::advise_huge_pages(&w);
            self.words.push(w);
            self.cols
                .push((0..width).map(|_| Carried::with_capacity(rows)).collect());
            for v in self.vals.iter_mut().flatten() {
                v.push(Vec::with_capacity(rows));
            }
        }
        let fit = (self.chunk - self.len % self.chunk).min(want);
        if self.len < self.chunk
            && self.words[0].len() + fit * self.stride > self.words[0].capacity()
        {
            let rows = (self.len * 2).clamp(self.len + fit, self.chunk) - self.len;
            self.words[0].reserve_exact(rows * self.stride);
            for c in &mut self.cols[0] {
                c.reserve_exact(rows);
            }
            quiver_common::memory::advise_huge_pages(&self.words[0]);
            for v in self.vals.iter_mut().flatten() {
                v[0].reserve_exact(rows);
            }
        }
        fit
    }

    /// Holds rows `from..` of `b` (the first arriving as number `seq`): their keys, and
    /// their first `self.width` columns. A run of rows at a time: a key column's words,
    /// then its values where they are kept, then the columns.
    fn push(&mut self, keys: &[std::borrow::Cow<[Value]>], b: &Batch, from: usize, seq: u64) {
        if self.len == 0 && from < b.len {
            self.first_seq = seq;
            let row_bytes = (self.stride * 8 + self.width * 32).max(32) as u64;
            let most =
                CHUNK_ROWS.max(quiver_common::memory::MMAP_THRESHOLD / (self.stride * 8) + 1);
            self.chunk = ((self.limit / 8 / row_bytes) as usize).clamp(256, most);
        }
        let mut r = from;
        while r < b.len {
            let n = self.room(b.len - r);
            let stride = self.stride;
            let w = self.words.last_mut().expect("a chunk");
            let base = w.len();
            w.resize(base + n * stride, 0);
            let mut inexact = [false; NORM_KEYS];
            for (j, c) in keys.iter().enumerate().take(self.nn) {
                let flip = if self.desc[j] { u128::MAX } else { 0 };
                for (t, v) in c[r..r + n].iter().enumerate() {
                    let p = quiver_engine::value::order_prefix(v) ^ flip;
                    let at = base + t * stride + 2 * j;
                    w[at] = (p >> 64) as u64;
                    w[at + 1] = p as u64;
                    inexact[j] |= !quiver_engine::value::order_prefix_exact(v);
                }
            }
            for t in 0..n {
                w[base + t * stride + stride - 1] = (self.len + t) as u64;
            }
            for (j, c) in keys.iter().enumerate() {
                if self.vals[j].is_none() && j < self.nn && inexact[j] {
                    // The rows before this run are made back from their words; this
                    // run's values are taken as they are.
                    self.keep_values(j);
                }
                if let Some(vs) = &mut self.vals[j] {
                    let vs = vs.last_mut().expect("a chunk");
                    for v in &c[r..r + n] {
                        self.heap_bytes += crate::value::heap_bytes(v) as u64;
                        vs.push(v.clone());
                    }
                }
            }
            let cc = self.cols.last_mut().expect("a chunk");
            for (to, c) in cc.iter_mut().zip(&b.cols[..self.width]) {
                for v in &c[r..r + n] {
                    self.heap_bytes += to.push(v);
                }
            }
            self.len += n;
            r += n;
        }
    }

    /// Holds a row given as its key values and columns (`cols` as wide as
    /// `self.width`).
    fn push_values(&mut self, keys: Vec<Value>, cols: Vec<Value>, seq: u64) {
        let keys: Vec<std::borrow::Cow<[Value]>> = keys
            .into_iter()
            .map(|v| std::borrow::Cow::Owned(vec![v]))
            .collect();
        let b = Batch {
            cols: cols.into_iter().map(|v| vec![v]).collect(),
            len: 1,
        };
        self.push(&keys, &b, 0, seq);
    }

    /// From now on keeps key `j`'s values, making those of the rows before back from
    /// their (whole) prefixes.
    fn keep_values(&mut self, j: usize) {
        let mut chunks: Vec<Vec<Value>> = Vec::with_capacity(self.words.len());
        for c in 0..self.words.len() {
            let mut vs = Vec::with_capacity(self.words[c].capacity() / self.stride);
            let first = c * self.chunk;
            for i in first..self.len.min(first + self.chunk) {
                let v = self.prefix_value(i, j);
                self.heap_bytes += crate::value::heap_bytes(&v) as u64;
                vs.push(v);
            }
            chunks.push(vs);
        }
        self.vals[j] = Some(chunks);
    }

    fn words_of(&self, i: usize) -> &[u64] {
        let at = (i % self.chunk) * self.stride;
        &self.words[i / self.chunk][at..at + self.stride]
    }

    /// Key `j` of row `i` as its words have it (whole: see [`Flat::keep_values`]).
    fn prefix_value(&self, i: usize, j: usize) -> Value {
        word_value(self.words_of(i), j, self.desc[j])
    }

    /// Row `i`'s columns into `out`.
    fn row_into(&self, i: usize, out: &mut Vec<Value>) {
        out.clear();
        out.extend(
            self.cols[i / self.chunk]
                .iter()
                .map(|c| c.get(i % self.chunk)),
        );
    }

    fn seq(&self, i: usize) -> u64 {
        self.first_seq + i as u64
    }

    /// Bytes held: the chunks' capacities and the values' heap.
    fn bytes(&self) -> u64 {
        let slots: usize = self
            .vals
            .iter()
            .flatten()
            .flatten()
            .map(|c| c.capacity())
            .sum();
        let carried: usize = self.cols.iter().flatten().map(Carried::bytes).sum();
        // In words of 8 bytes: the keys' words, packed rows, the merge's cursors.
        let words: usize = self.words.iter().map(|c| c.capacity()).sum::<usize>()
            + self.packed.capacity() * 2
            + (self.cursor_heap.capacity() + self.cursor_pos.capacity()).div_ceil(2);
        (slots * 32 + carried + words * 8 + (self.words.capacity() + self.cols.capacity()) * 24)
            as u64
            + self.heap_bytes
    }

    /// Whether every key is whole in its words: rows then order as their words do.
    fn plain(&self) -> bool {
        self.vals.iter().all(Option::is_none)
    }

    /// Two rows' order, by their words (the row index last), comparing kept values
    /// where a key's words tie ([`cmp_by_words`]), then by arrival.
    fn cmp(&self, a: &[u64], b: &[u64]) -> std::cmp::Ordering {
        if self.is_plain {
            return a.cmp(b);
        }
        let (ia, ib) = (a[self.stride - 1] as usize, b[self.stride - 1] as usize);
        let (ka, kb) = (|j| self.kept_value(ia, j), |j| self.kept_value(ib, j));
        cmp_by_words(&self.desc, self.nn, (a, ka), (b, kb)).then(ia.cmp(&ib))
    }

    /// How rows pack into one `u128` each for a sort whose keys are not asked for again
    /// ([`Flat::pack`]): when every key is whole in its words and the bits that differ
    /// between rows fit in 96, per word with varying bits its lowest varying bit and
    /// how many there are (bits no row changes cannot order rows). `None` otherwise.
    fn packing(&self) -> Option<Vec<(usize, u32, u32)>> {
        let kw = self.stride - 1;
        if !self.plain() || self.len == 0 || self.len > u32::MAX as usize {
            return None;
        }
        let first: Vec<u64> = self.words[0][..kw].to_vec();
        let mut diff = vec![0u64; kw];
        for c in &self.words {
            for w in c.chunks_exact(self.stride) {
                for k in 0..kw {
                    diff[k] |= w[k] ^ first[k];
                }
            }
        }
        let runs: Vec<(usize, u32, u32)> = (0..kw)
            .filter(|&k| diff[k] != 0)
            .map(|k| {
                let lo = diff[k].trailing_zeros();
                (k, lo, 64 - diff[k].leading_zeros() - lo)
            })
            .collect();
        (runs.iter().map(|r| r.2).sum::<u32>() <= 96).then_some(runs)
    }

    /// Bytes [`Flat::pack`] adds while it runs: the packed rows, made as the words go.
    fn packed_bytes(&self) -> u64 {
        self.len as u64 * 16
    }

    /// Sorts the rows for giving them out, packed as [`Flat::packing`] says: each row
    /// one `u128` of its varying bits, in order, then its index (each chunk of words
    /// freed once packed). These sort as plain integers on the pool's threads, in well
    /// under half the room of the words.
    fn pack(&mut self, runs: &[(usize, u32, u32)]) {
        use rayon::slice::ParallelSliceMut;
        let kw = self.stride - 1;
        let bits: u32 = runs.iter().map(|r| r.2).sum();
        let mut packed: Vec<u128> = Vec::with_capacity(self.len);
        quiver_common::memory::advise_huge_pages(&packed);
        for c in std::mem::take(&mut self.words) {
            packed.extend(c.chunks_exact(self.stride).map(|w| {
                let mut key = 0u128;
                for &(k, lo, n) in runs {
                    let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
                    key = (key << n) | ((w[k] >> lo) & mask) as u128;
                }
                (key << (96 - bits) << 32) | w[kw] as u128
            }));
        }
        packed.par_sort_unstable();
        self.packed = packed;
        self.at = 0;
    }

    /// Sorts the rows where they are: each chunk's words as `[u64; K]` arrays (plain
    /// integers when every key is whole in its words), the chunks on the pool's
    /// threads; then readies the merge of the chunks. Nothing is allocated but the
    /// merge's heap of chunk cursors.
    fn sort(&mut self) {
        self.is_plain = self.plain();
        match self.stride {
            1 => self.sort_chunks::<1>(),
            3 => self.sort_chunks::<3>(),
            5 => self.sort_chunks::<5>(),
            7 => self.sort_chunks::<7>(),
            9 => self.sort_chunks::<9>(),
            s => unreachable!("{s} words a row"),
        }
        self.cursor_pos = vec![0; self.words.len()];
        self.cursor_heap = (0..self.words.len() as u32)
            .filter(|&c| !self.words[c as usize].is_empty())
            .collect();
        for i in (0..self.cursor_heap.len() / 2).rev() {
            self.sift_down(i);
        }
    }

    fn sort_chunks<const K: usize>(&mut self) {
        use rayon::prelude::*;
        let mut words = std::mem::take(&mut self.words);
        let this = &*self;
        words.par_iter_mut().for_each(|w| {
            let (rows, rest) = w.as_chunks_mut::<K>();
            debug_assert!(rest.is_empty());
            // The row index ends every row: no two are equal, so unstable is exact.
            if this.is_plain {
                rows.sort_unstable();
            } else {
                rows.sort_unstable_by(|a, b| this.cmp(a, b));
            }
        });
        self.words = words;
    }

    /// The next row of chunk `c` in the merge.
    fn head(&self, c: u32) -> &[u64] {
        let at = self.cursor_pos[c as usize] as usize * self.stride;
        &self.words[c as usize][at..at + self.stride]
    }

    fn less(&self, x: usize, y: usize) -> bool {
        let h = &self.cursor_heap;
        self.cmp(self.head(h[x]), self.head(h[y])) == std::cmp::Ordering::Less
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.cursor_heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.less(l, m) {
                m = l;
            }
            if r < n && self.less(r, m) {
                m = r;
            }
            if m == i {
                break;
            }
            self.cursor_heap.swap(i, m);
            i = m;
        }
    }

    /// The next row in order (after [`Flat::pack`] or [`Flat::sort`]): its index, and
    /// where its words are (chunk and row in it; `None` when packed).
    fn pop(&mut self) -> Option<(usize, Option<(usize, usize)>)> {
        if !self.packed.is_empty() {
            let p = self.packed.get(self.at)?;
            self.at += 1;
            return Some((*p as u32 as usize, None));
        }
        let &c = self.cursor_heap.first()?;
        let (c, pos) = (c as usize, self.cursor_pos[c as usize] as usize);
        let i = self.words[c][(pos + 1) * self.stride - 1] as usize;
        self.cursor_pos[c] += 1;
        if (pos + 1) * self.stride == self.words[c].len() {
            self.cursor_heap.swap_remove(0);
        }
        if !self.cursor_heap.is_empty() {
            self.sift_down(0);
        }
        Some((i, Some((c, pos))))
    }

    /// Passes over the next `n` rows in order.
    fn skip(&mut self, n: usize) {
        if !self.packed.is_empty() {
            self.at = (self.at + n).min(self.len);
            return;
        }
        for _ in 0..n {
            if self.pop().is_none() {
                break;
            }
        }
    }

    /// Moves row `i`'s columns out (its slots are left null).
    fn take_row(&mut self, i: usize) -> impl Iterator<Item = Value> + '_ {
        let r = i % self.chunk;
        self.cols[i / self.chunk].iter_mut().map(move |c| c.take(r))
    }

    /// The next batch of rows in order (values moved out, not cloned), at most `left`.
    fn next_batch(&mut self, left: &mut Option<usize>) -> Option<Batch> {
        let n = left.map_or(BATCH_ROWS, |l| l.min(BATCH_ROWS));
        let mut cols: Vec<Vec<Value>> = (0..self.width).map(|_| Vec::with_capacity(n)).collect();
        let mut len = 0;
        while len < n {
            let Some((i, _)) = self.pop() else { break };
            for (c, v) in cols.iter_mut().zip(self.take_row(i)) {
                c.push(v);
            }
            len += 1;
        }
        if let Some(l) = left {
            *l -= len;
        }
        (len > 0).then_some(Batch { cols, len })
    }

    /// Row `i`'s value of key `j`, if that key's values are kept.
    fn kept_value(&self, i: usize, j: usize) -> Option<&Value> {
        self.vals[j]
            .as_ref()
            .map(|vs| &vs[i / self.chunk][i % self.chunk])
    }

    /// Row `i`'s kept key values (`None` for a key whole in its words).
    fn kept(&self, i: usize) -> impl Iterator<Item = Option<&Value>> + '_ {
        (0..self.vals.len()).map(move |j| self.kept_value(i, j))
    }

    /// Writes the rows, sorted, as a run, and empties the buffer.
    fn spill(&mut self, dir: &std::path::Path) -> Result<std::fs::File, QueryError> {
        self.sort();
        let mut w = RunWriter::new(dir)?;
        let kw = self.stride - 1;
        let mut row = Vec::with_capacity(self.width);
        while let Some((i, Some((c, pos)))) = self.pop() {
            let words = &self.words[c][pos * self.stride..pos * self.stride + kw];
            self.row_into(i, &mut row);
            w.push(words, self.kept(i), &row, self.seq(i))?;
        }
        let f = w.finish()?;
        *self = Flat::new(&self.desc, self.limit);
        Ok(f)
    }

    /// The next row in order (after [`Flat::sort`]) as a [`RunRow`], for the merge
    /// with spilled runs: the rows still in memory are taken one at a time.
    fn next_run_row(&mut self) -> Option<RunRow> {
        let (i, at) = self.pop()?;
        let (c, pos) = at.expect("sorted in chunks");
        let words = self.words[c][pos * self.stride..(pos + 1) * self.stride - 1].to_vec();
        let kept = self.kept(i).map(|v| v.cloned()).collect();
        let seq = self.seq(i);
        let cols = RunCols::Held(i);
        Some(RunRow {
            words,
            kept,
            seq,
            cols,
        })
    }
}

fn cmp_keys(desc: &[bool], a: &SortRow, b: &SortRow) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    for (i, (x, y)) in a.0.iter().zip(b.0.iter()).enumerate() {
        let o = order(x, y);
        let o = if desc[i] { o.reverse() } else { o };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.2.cmp(&b.2)
}

impl Merge {
    /// The next row of run `i` (`runs.len()`: the rows kept in memory).
    fn head(&self, i: usize) -> Option<&RunRow> {
        if i == self.runs.len() {
            self.last_head.as_ref()
        } else {
            self.runs[i].1.as_ref()
        }
    }

    /// The next batch of the merged output: the least head of the runs, row by row
    /// (a linear pick among the few runs).
    fn next_batch(&mut self) -> Result<Option<Batch>, QueryError> {
        let mut out = Batch::empty(self.width);
        while out.len < crate::batch::BATCH_ROWS && self.left != Some(0) {
            let mut best: Option<usize> = None; // runs.len(): the in-memory rows
            for i in 0..=self.runs.len() {
                let Some(h) = self.head(i) else { continue };
                if best.is_none_or(|b| {
                    cmp_run_rows(&self.desc, self.nn, h, self.head(b).expect("a head"))
                        == std::cmp::Ordering::Less
                }) {
                    best = Some(i);
                }
            }
            let Some(b) = best else { break };
            let row = if b == self.runs.len() {
                std::mem::replace(&mut self.last_head, self.last.next_run_row())
            } else {
                let next = read_run_row(&mut self.runs[b].0)?;
                std::mem::replace(&mut self.runs[b].1, next)
            }
            .expect("the best head");
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            out.push_row(row.into_cols(&mut self.last)?);
            if let Some(l) = &mut self.left {
                *l -= 1;
            }
        }
        Ok((out.len > 0).then_some(out))
    }
}

/// Most rows a top-k keeps in its heap; a larger LIMIT sorts everything.
const TOP_K_MAX: usize = 1 << 16;

/// A row held by Sort: its key values, its columns, and its arrival number (rows with
/// equal keys keep their input order, with or without a limit).
type SortRow = (Vec<Value>, Vec<Value>, u64);

/// What a held row takes from the allocator beyond its slot in the rows vector: its two
/// value vectors (with glibc's 16 bytes a chunk) and what the values hold on the heap.
fn row_bytes(r: &SortRow) -> u64 {
    32 + (r.0.capacity() + r.1.capacity()) as u64 * 32
        + r.0
            .iter()
            .chain(r.1.iter())
            .map(|v| crate::value::heap_bytes(v) as u64)
            .sum::<u64>()
}

impl Op for Sort {
    fn mem_peak(&self) -> u64 {
        self.peak
    }
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        use std::cmp::Ordering;
        if let Some(it) = &mut self.out {
            return Ok(it.next());
        }
        if let Some(m) = &mut self.merge {
            return m.next_batch();
        }
        if let Some((flat, _grant, left)) = &mut self.sorted {
            let b = flat.next_batch(left);
            if b.is_none() {
                // Done: the rows' memory and its grant go back.
                self.sorted = None;
            }
            return Ok(b);
        }
        let mut runs: Vec<std::fs::File> = Vec::new();
        let mut grant = cx.budget.empty_grant("Sort");
        // Top-k's heap; a full sort holds its rows flat instead.
        let mut rows: Vec<SortRow> = Vec::new();
        let desc: Vec<bool> = self.keys.iter().map(|k| k.1).collect();
        let mut flat = Flat::new(&desc, cx.budget.limit_bytes());
        let mut width = 0;
        let mut bytes = 0u64;
        // The rows vector's slots (its capacity), then what each row holds besides.
        let held = |rows: &Vec<SortRow>, bytes: u64| {
            rows.capacity() as u64 * std::mem::size_of::<SortRow>() as u64 + bytes
        };
        // Key of row `row` of the batch's key columns against a held key.
        let cmp_at = |keys: &[std::borrow::Cow<[Value]>], row: usize, held: &[Value]| {
            for (i, c) in keys.iter().enumerate() {
                let o = order(&c[row], &held[i]);
                let o = if desc[i] { o.reverse() } else { o };
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        };
        let cmp_rows = |a: &SortRow, b: &SortRow| cmp_keys(&desc, a, b);
        let mut seq = 0u64;
        // Top-k keeps a max-heap of the k best rows (the worst on top); a row that beats
        // the top overwrites it in place, reusing its allocations.
        let mut top_k = self.limit.filter(|&k| k <= TOP_K_MAX);
        let sift_down = |h: &mut Vec<SortRow>, mut i: usize| loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < h.len() && cmp_rows(&h[l], &h[m]) == Ordering::Greater {
                m = l;
            }
            if r < h.len() && cmp_rows(&h[r], &h[m]) == Ordering::Greater {
                m = r;
            }
            if m == i {
                break;
            }
            h.swap(i, m);
            i = m;
        };
        // Every row is read whatever the LIMIT above: full batches.
        let want = std::mem::replace(&mut cx.want, crate::batch::BATCH_ROWS);
        while let Some(b) = self.input.next(cx)? {
            width = b.width().min(self.carry);
            flat.width = width;
            let keys: Vec<std::borrow::Cow<[Value]>> = self
                .keys
                .iter()
                .map(|(k, _)| crate::expr::col(&cx.env, k, &b))
                .collect::<Result<_, _>>()?;
            for row in 0..b.len {
                seq += 1;
                match top_k {
                    None => {
                        flat.push(&keys, &b, row, seq);
                        seq += (b.len - row - 1) as u64;
                        break;
                    }
                    Some(0) => {}
                    Some(k) if rows.len() == k => {
                        if cmp_at(&keys, row, &rows[0].0) != Ordering::Less {
                            continue;
                        }
                        bytes = bytes.saturating_sub(row_bytes(&rows[0]));
                        let top = &mut rows[0];
                        top.2 = seq;
                        for (i, c) in keys.iter().enumerate() {
                            top.0[i].clone_from(&c[row]);
                        }
                        for (j, c) in b.cols[..width].iter().enumerate() {
                            top.1[j].clone_from(&c[row]);
                        }
                        bytes += row_bytes(&rows[0]);
                        sift_down(&mut rows, 0);
                    }
                    Some(_) => {
                        let r: SortRow = (
                            keys.iter().map(|c| c[row].clone()).collect(),
                            b.cols[..width].iter().map(|c| c[row].clone()).collect(),
                            seq,
                        );
                        bytes += row_bytes(&r);
                        rows.push(r);
                        // Sift up.
                        let mut i = rows.len() - 1;
                        while i > 0 {
                            let p = (i - 1) / 2;
                            if cmp_rows(&rows[i], &rows[p]) != Ordering::Greater {
                                break;
                            }
                            rows.swap(i, p);
                            i = p;
                        }
                    }
                }
            }
            // A full sort spills its rows as a sorted run and goes on; so does a top-k
            // whose k rows outgrow the grant, as a full sort from then on (the rows
            // it let go can never be among the first k). A query without a temporary
            // directory waits for memory or fails.
            let now = if top_k.is_none() {
                flat.bytes()
            } else {
                held(&rows, bytes)
            };
            let spill_dir = cx.temp_dir.clone();
            let fits = match &spill_dir {
                Some(_) => account_or_spill(&mut grant, now, "Sort")?,
                None => account(&mut grant, now, "Sort").map(|()| true)?,
            };
            if let (false, Some(dir)) = (fits, spill_dir) {
                if top_k.take().is_some() {
                    rows.sort_by_key(|r| r.2);
                    for (k, c, seq) in rows.drain(..) {
                        flat.push_values(k, c, seq);
                    }
                    rows = Vec::new();
                    bytes = 0;
                }
                runs.push(flat.spill(&dir)?);
                grant.force_resize(flat.bytes());
            }
            self.peak = self.peak.max(grant.bytes());
        }
        cx.want = want;
        if !runs.is_empty() {
            let mut last = flat;
            last.sort();
            let mut readers = Vec::with_capacity(runs.len());
            for f in runs {
                let mut r = BufReader::with_capacity(1 << 16, f);
                let head = read_run_row(&mut r)?;
                readers.push((r, head));
            }
            let last_head = last.next_run_row();
            self.merge = Some(Merge {
                runs: readers,
                last,
                last_head,
                nn: desc.len().min(NORM_KEYS),
                desc,
                width,
                skip: self.skip,
                left: self.limit.map(|l| l.saturating_sub(self.skip)),
            });
            return self.merge.as_mut().expect("set").next_batch();
        }
        if top_k.is_none() {
            // Packed rows take room besides the words while they are made: counted
            // first, else the rows are sorted where they are.
            match flat.packing() {
                Some(runs) if grow(&mut grant, flat.bytes() + flat.packed_bytes()) => {
                    flat.pack(&runs)
                }
                _ => flat.sort(),
            }
            grant.force_resize(flat.bytes());
            self.peak = self.peak.max(grant.bytes());
            // SKIP: passed over in order, nothing made of them.
            flat.skip(self.skip);
            let left = self.limit.map(|l| l.saturating_sub(self.skip));
            self.sorted = Some((flat, grant, left));
            return self.next(cx);
        }
        // Top-k: its heap, at most TOP_K_MAX rows, in order.
        rows.sort_by(cmp_rows);
        if let Some(l) = self.limit {
            rows.truncate(l);
        }
        let batches = Batch::chunks(width, rows.into_iter().skip(self.skip).map(|r| r.1));
        Ok(emit(&mut self.out, batches))
    }
}
