//! A batch of rows, stored by column: `cols[slot][row]`. Operators pass batches of up to
//! [`BATCH_ROWS`] rows, so that per-operator and per-expression dispatch is paid once per
//! batch rather than once per row.

use crate::value::{heap_bytes, Value};

/// Rows per batch an operator aims for.
pub const BATCH_ROWS: usize = 1024;

#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub cols: Vec<Vec<Value>>,
    pub len: usize,
}

impl Batch {
    /// A batch of `width` empty columns.
    pub fn empty(width: usize) -> Batch {
        Batch {
            cols: (0..width).map(|_| Vec::new()).collect(),
            len: 0,
        }
    }

    /// One row with no columns (the input of a query that starts without MATCH).
    pub fn unit() -> Batch {
        Batch {
            cols: Vec::new(),
            len: 1,
        }
    }

    pub fn width(&self) -> usize {
        self.cols.len()
    }

    /// Appends row `row` of `src` (same width) and then `extra` values.
    #[inline]
    pub fn push_row_from(&mut self, src: &Batch, row: usize, extra: &[Value]) {
        let w = src.cols.len();
        for c in 0..w {
            self.cols[c].push(src.cols[c][row].clone());
        }
        for (i, v) in extra.iter().enumerate() {
            self.cols[w + i].push(v.clone());
        }
        self.len += 1;
    }

    /// Keeps the rows where `keep` is true.
    pub fn filter(&mut self, keep: &[bool]) {
        for c in &mut self.cols {
            let mut i = 0;
            c.retain(|_| {
                let k = keep[i];
                i += 1;
                k
            });
        }
        self.len = keep.iter().filter(|&&k| k).count();
    }

    pub fn truncate(&mut self, n: usize) {
        for c in &mut self.cols {
            c.truncate(n);
        }
        self.len = self.len.min(n);
    }

    /// Drops the first `n` rows.
    pub fn skip(&mut self, n: usize) {
        let n = n.min(self.len);
        for c in &mut self.cols {
            c.drain(..n);
        }
        self.len -= n;
    }

    /// Row `row` as a vector.
    pub fn row(&self, row: usize) -> Vec<Value> {
        self.cols.iter().map(|c| c[row].clone()).collect()
    }

    pub fn push_row(&mut self, row: Vec<Value>) {
        for (c, v) in self.cols.iter_mut().zip(row) {
            c.push(v);
        }
        self.len += 1;
    }

    /// Rows of `width` values as batches of up to [`BATCH_ROWS`].
    pub fn chunks(width: usize, rows: impl IntoIterator<Item = Vec<Value>>) -> Vec<Batch> {
        let mut batches = Vec::new();
        let mut out = Batch::empty(width);
        for r in rows {
            out.push_row(r);
            if out.len == BATCH_ROWS {
                batches.push(std::mem::replace(&mut out, Batch::empty(width)));
            }
        }
        if out.len > 0 {
            batches.push(out);
        }
        batches
    }

    /// Approximate bytes the batch holds.
    pub fn bytes(&self) -> usize {
        self.cols
            .iter()
            .map(|c| {
                c.len() * std::mem::size_of::<Value>() + c.iter().map(heap_bytes).sum::<usize>()
            })
            .sum()
    }
}

/// Drops `cols` on a thread of its own: rows that another thread made (LOAD CSV's row
/// thread) are freed there in the background rather than on the statement's thread,
/// which measured a tenth of a bulk load's time. Inline when the thread is behind.
pub fn drop_later(cols: Vec<Vec<Value>>) {
    use std::sync::mpsc::{sync_channel, SyncSender};
    use std::sync::OnceLock;
    static TX: OnceLock<Option<SyncSender<Vec<Vec<Value>>>>> = OnceLock::new();
    let tx = TX.get_or_init(|| {
        let (tx, rx) = sync_channel::<Vec<Vec<Value>>>(16);
        std::thread::Builder::new()
            .name("quiver-free".into())
            .spawn(move || while rx.recv().is_ok() {})
            .ok()
            .map(|_| tx)
    });
    // Full or gone: the columns come back in the error and are dropped here.
    if let Some(tx) = tx {
        let _ = tx.try_send(cols);
    }
}
