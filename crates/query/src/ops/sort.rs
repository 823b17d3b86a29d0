//! ORDER BY: a full sort or a top-k heap, under the query's memory grant. A full sort
//! whose rows outgrow the grant spills (seed 001's lesson: big work goes to a temporary
//! directory rather than failing): each time the grant is full the rows held are sorted
//! and written as a run to a temporary file, and the runs are merged as the output is
//! read.

use super::*;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};

/// ORDER BY (with LIMIT: a bounded top-k).
pub struct Sort {
    pub input: BoxOp,
    pub keys: Vec<(CExpr, bool)>,
    pub limit: Option<usize>,
    pub out: Option<std::vec::IntoIter<Batch>>,
    pub peak: u64,
    /// The merge of spilled runs, once the input is read (`None`: nothing spilled).
    pub merge: Option<Merge>,
}

/// Sorted runs being merged: a reader per run file and its next row, plus the rows that
/// were still in memory at the end (sorted, as the last run).
pub struct Merge {
    runs: Vec<(BufReader<std::fs::File>, Option<SortRow>)>,
    last: std::vec::IntoIter<SortRow>,
    last_head: Option<SortRow>,
    desc: Vec<bool>,
    width: usize,
    left: Option<usize>,
}

/// Writes sorted `rows` as a run: per row its keys, its columns and its arrival number,
/// in the log's value encoding, to an unnamed temporary file in `dir` (gone when closed,
/// whatever happens to the process).
fn write_run<'r>(
    dir: &std::path::Path,
    rows: impl Iterator<Item = (&'r [Value], &'r [Value], u64)>,
) -> Result<std::fs::File, QueryError> {
    let io = |e: std::io::Error| {
        QueryError::Argument(format!(
            "ORDER BY could not spill to the temporary directory {} ({e}); give one with room (--temp-dir)",
            dir.display()
        ))
    };
    let file = tempfile::tempfile_in(dir).map_err(io)?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let mut buf = Vec::new();
    for (keys, cols, seq) in rows {
        buf.clear();
        buf.extend_from_slice(&(keys.len() as u32).to_le_bytes());
        buf.extend_from_slice(&(cols.len() as u32).to_le_bytes());
        buf.extend_from_slice(&seq.to_le_bytes());
        for v in keys.iter().chain(cols.iter()) {
            quiver_engine::wal::encode_value(&mut buf, v);
        }
        w.write_all(&(buf.len() as u32).to_le_bytes()).map_err(io)?;
        w.write_all(&buf).map_err(io)?;
    }
    let mut file = w.into_inner().map_err(|e| io(e.into_error()))?;
    std::io::Seek::rewind(&mut file).map_err(io)?;
    Ok(file)
}

/// The next row of a run, `None` at its end.
fn read_row(r: &mut BufReader<std::fs::File>) -> Result<Option<SortRow>, QueryError> {
    let bad = || QueryError::Argument("a spilled ORDER BY run could not be read back".into());
    if r.fill_buf().map_err(|_| bad())?.is_empty() {
        return Ok(None);
    }
    let mut len = [0u8; 4];
    r.read_exact(&mut len).map_err(|_| bad())?;
    let mut buf = vec![0u8; u32::from_le_bytes(len) as usize];
    r.read_exact(&mut buf).map_err(|_| bad())?;
    let word = |at: usize| {
        buf.get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    let (nk, nc) = (
        word(0).ok_or_else(bad)? as usize,
        word(4).ok_or_else(bad)? as usize,
    );
    let seq = u64::from_le_bytes(buf.get(8..16).ok_or_else(bad)?.try_into().unwrap());
    let mut at = 16;
    let mut vals = Vec::with_capacity(nk + nc);
    for _ in 0..nk + nc {
        vals.push(quiver_engine::wal::decode_value(&buf, &mut at).ok_or_else(bad)?);
    }
    let cols = vals.split_off(nk);
    Ok(Some((vals, cols, seq)))
}

/// Rows a chunk of [`Flat`] holds.
const CHUNK_ROWS: usize = 16 << 10;

/// The rows of a full sort, held flat: every row's keys and its columns in chunks of
/// rows, each allocated once at its full size (no allocation a row, and
/// no vector that doubles and copies: a copy holds old and new at once, past what is
/// counted). Rows arrive in order, so row `i`'s arrival number is `first_seq + i`.
struct Flat {
    nk: usize,
    width: usize,
    /// Rows a chunk holds: [`CHUNK_ROWS`], fewer under a small limit (an eighth of it).
    chunk: usize,
    limit: u64,
    keys: Vec<Vec<Value>>,
    cols: Vec<Vec<Value>>,
    len: usize,
    first_seq: u64,
    /// What the values hold on the heap.
    heap: u64,
}

impl Flat {
    fn new(nk: usize, limit: u64) -> Flat {
        Flat {
            nk,
            width: 0,
            chunk: CHUNK_ROWS,
            limit,
            keys: Vec::new(),
            cols: Vec::new(),
            len: 0,
            first_seq: 0,
            heap: 0,
        }
    }

    fn push(&mut self, keys: &[std::borrow::Cow<[Value]>], b: &Batch, row: usize, seq: u64) {
        if self.len == 0 {
            self.first_seq = seq;
            self.width = b.cols.len();
            let row_bytes = ((self.nk + b.cols.len()) * 32).max(32) as u64;
            self.chunk = ((self.limit / 8 / row_bytes) as usize).clamp(256, CHUNK_ROWS);
        }
        if self.len % self.chunk == 0 {
            self.keys.push(Vec::with_capacity(self.chunk * self.nk));
            self.cols
                .push(Vec::with_capacity(self.chunk * b.cols.len()));
        }
        let (kc, cc) = (
            self.keys.last_mut().expect("a chunk"),
            self.cols.last_mut().expect("a chunk"),
        );
        for c in keys {
            let v = &c[row];
            self.heap += crate::value::heap_bytes(v) as u64;
            kc.push(v.clone());
        }
        for c in &b.cols {
            let v = &c[row];
            self.heap += crate::value::heap_bytes(v) as u64;
            cc.push(v.clone());
        }
        self.len += 1;
    }

    /// Bytes held: the chunks' capacities and the values' heap.
    fn bytes(&self) -> u64 {
        let slots: usize = self
            .keys
            .iter()
            .chain(self.cols.iter())
            .map(|c| c.capacity())
            .sum();
        (slots * 32 + (self.keys.capacity() + self.cols.capacity()) * 24) as u64 + self.heap
    }

    fn key(&self, i: usize) -> &[Value] {
        let at = (i % self.chunk) * self.nk;
        &self.keys[i / self.chunk][at..at + self.nk]
    }

    fn row(&self, i: usize) -> &[Value] {
        let at = (i % self.chunk) * self.width;
        &self.cols[i / self.chunk][at..at + self.width]
    }

    fn seq(&self, i: usize) -> u64 {
        self.first_seq + i as u64
    }

    /// The rows' order (indices), as [`cmp_keys`] orders them: by a 128-bit prefix of
    /// the first key ([`quiver_engine::value::order_prefix`], inverted when
    /// descending) in a compact array, comparing keys only where prefixes tie.
    fn order(&self, desc: &[bool]) -> Vec<u32> {
        use std::cmp::Ordering;
        let cmp = |a: usize, b: usize| {
            for (i, (x, y)) in self.key(a).iter().zip(self.key(b)).enumerate() {
                let o = order(x, y);
                let o = if desc[i] { o.reverse() } else { o };
                if o != Ordering::Equal {
                    return o;
                }
            }
            a.cmp(&b)
        };
        if self.nk == 0 {
            return (0..self.len as u32).collect();
        }
        let flip = if desc[0] { u128::MAX } else { 0 };
        let mut idx: Vec<(u128, u32)> = (0..self.len)
            .map(|i| {
                let p = quiver_engine::value::order_prefix(&self.key(i)[0]);
                (p ^ flip, i as u32)
            })
            .collect();
        // Ties end on the arrival order, so no two rows are equal: unstable is exact.
        idx.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| cmp(a.1 as usize, b.1 as usize)));
        idx.into_iter().map(|(_, i)| i).collect()
    }

    /// Writes the rows, sorted, as a run, and empties the buffer.
    fn spill(&mut self, dir: &std::path::Path, desc: &[bool]) -> Result<std::fs::File, QueryError> {
        let order = self.order(desc);
        let f = write_run(
            dir,
            order.iter().map(|&i| {
                (
                    self.key(i as usize),
                    self.row(i as usize),
                    self.seq(i as usize),
                )
            }),
        )?;
        self.keys = Vec::new();
        self.cols = Vec::new();
        self.len = 0;
        self.heap = 0;
        Ok(f)
    }

    /// Moves row `i`'s columns out (its slots are left null).
    fn take_row(&mut self, i: usize) -> impl Iterator<Item = Value> + '_ {
        let at = (i % self.chunk) * self.width;
        self.cols[i / self.chunk][at..at + self.width]
            .iter_mut()
            .map(std::mem::take)
    }

    /// The rows in `order`, the first `limit`, as batches (values moved, not cloned).
    fn into_batches(mut self, order: &[u32], limit: Option<usize>) -> Vec<Batch> {
        let n = limit.map_or(order.len(), |l| l.min(order.len()));
        let w = self.width;
        let mut out = Vec::with_capacity(n.div_ceil(BATCH_ROWS));
        for chunk in order[..n].chunks(BATCH_ROWS) {
            let mut cols: Vec<Vec<Value>> =
                (0..w).map(|_| Vec::with_capacity(chunk.len())).collect();
            for &i in chunk {
                for (c, v) in cols.iter_mut().zip(self.take_row(i as usize)) {
                    c.push(v);
                }
            }
            out.push(Batch {
                cols,
                len: chunk.len(),
            });
        }
        out
    }

    /// The rows in `order` as [`SortRow`]s (for the merge with spilled runs).
    fn into_sort_rows(mut self, order: &[u32]) -> Vec<SortRow> {
        order
            .iter()
            .map(|&i| {
                let i = i as usize;
                let k: Vec<Value> = self.key(i).to_vec();
                let c: Vec<Value> = self.take_row(i).collect();
                (k, c, self.seq(i))
            })
            .collect()
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
    fn head(&self, i: usize) -> Option<&SortRow> {
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
                    cmp_keys(&self.desc, h, self.head(b).expect("a head"))
                        == std::cmp::Ordering::Less
                }) {
                    best = Some(i);
                }
            }
            let Some(b) = best else { break };
            let row = if b == self.runs.len() {
                std::mem::replace(&mut self.last_head, self.last.next())
            } else {
                let next = read_row(&mut self.runs[b].0)?;
                std::mem::replace(&mut self.runs[b].1, next)
            }
            .expect("the best head");
            out.push_row(row.1);
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
        let mut runs: Vec<std::fs::File> = Vec::new();
        let mut grant = cx.budget.empty_grant("Sort");
        // Top-k's heap; a full sort holds its rows flat instead.
        let mut rows: Vec<SortRow> = Vec::new();
        let mut flat = Flat::new(self.keys.len(), cx.budget.limit_bytes());
        let mut width = 0;
        let mut bytes = 0u64;
        // The rows vector's slots (its capacity), then what each row holds besides.
        let held = |rows: &Vec<SortRow>, bytes: u64| {
            rows.capacity() as u64 * std::mem::size_of::<SortRow>() as u64 + bytes
        };
        let desc: Vec<bool> = self.keys.iter().map(|k| k.1).collect();
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
        let top_k = self.limit.filter(|&k| k <= TOP_K_MAX);
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
            width = b.width();
            let keys: Vec<std::borrow::Cow<[Value]>> = self
                .keys
                .iter()
                .map(|(k, _)| crate::expr::col(&cx.env, k, &b))
                .collect::<Result<_, _>>()?;
            for row in 0..b.len {
                seq += 1;
                if top_k.is_none() {
                    flat.push(&keys, &b, row, seq);
                    continue;
                }
                match top_k {
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
                        for (j, c) in b.cols.iter().enumerate() {
                            top.1[j].clone_from(&c[row]);
                        }
                        bytes += row_bytes(&rows[0]);
                        sift_down(&mut rows, 0);
                    }
                    _ => {
                        let r: SortRow = (
                            keys.iter().map(|c| c[row].clone()).collect(),
                            b.row(row),
                            seq,
                        );
                        bytes += row_bytes(&r);
                        rows.push(r);
                        if top_k.is_some() {
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
            }
            // A full sort spills its rows as a sorted run and goes on; a top-k (which
            // holds only k rows) or a query without a temporary directory waits for
            // memory or fails.
            flat.width = width;
            let now = if top_k.is_none() {
                flat.bytes()
            } else {
                held(&rows, bytes)
            };
            let spill_dir = cx.temp_dir.clone().filter(|_| top_k.is_none());
            let fits = match &spill_dir {
                Some(_) => account_or_spill(&mut grant, now, "Sort")?,
                None => account(&mut grant, now, "Sort").map(|()| true)?,
            };
            if let (false, Some(dir)) = (fits, spill_dir) {
                runs.push(flat.spill(&dir, &desc)?);
                grant.force_resize(flat.bytes());
            }
            self.peak = self.peak.max(grant.bytes());
        }
        cx.want = want;
        if !runs.is_empty() {
            let order = flat.order(&desc);
            let mut last = flat.into_sort_rows(&order).into_iter();
            let mut readers = Vec::with_capacity(runs.len());
            for f in runs {
                let mut r = BufReader::with_capacity(1 << 16, f);
                let head = read_row(&mut r)?;
                readers.push((r, head));
            }
            let last_head = last.next();
            self.merge = Some(Merge {
                runs: readers,
                last,
                last_head,
                desc,
                width,
                left: self.limit,
            });
            return self.merge.as_mut().expect("set").next_batch();
        }
        if top_k.is_none() {
            flat.width = width;
            let order = flat.order(&desc);
            let batches = flat.into_batches(&order, self.limit);
            return Ok(emit(&mut self.out, batches));
        }
        // Top-k: its heap, at most TOP_K_MAX rows, in order.
        rows.sort_by(cmp_rows);
        if let Some(l) = self.limit {
            rows.truncate(l);
        }
        let batches = Batch::chunks(width, rows.into_iter().map(|r| r.1));
        Ok(emit(&mut self.out, batches))
    }
}
