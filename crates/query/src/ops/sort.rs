//! ORDER BY: a full sort or a top-k heap, under the query's memory grant.

use super::*;

/// ORDER BY (with LIMIT: a bounded top-k).
pub struct Sort {
    pub input: BoxOp,
    pub keys: Vec<(CExpr, bool)>,
    pub limit: Option<usize>,
    pub out: Option<std::vec::IntoIter<Batch>>,
    pub peak: u64,
}

/// Most rows a top-k keeps in its heap; a larger LIMIT sorts everything.
const TOP_K_MAX: usize = 1 << 16;

/// A row held by Sort: its key values, its columns, and its arrival number (rows with
/// equal keys keep their input order, with or without a limit).
type SortRow = (Vec<Value>, Vec<Value>, u64);

fn row_bytes(r: &SortRow) -> u64 {
    48 + (r.0.len() + r.1.len()) as u64 * 32
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
        let mut grant = cx.budget.empty_grant("Sort");
        let mut rows: Vec<SortRow> = Vec::new();
        let mut width = 0;
        let mut bytes = 0u64;
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
        let cmp = |a: &[Value], b: &[Value]| {
            for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
                let o = order(x, y);
                let o = if desc[i] { o.reverse() } else { o };
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        };
        let cmp_rows = |a: &SortRow, b: &SortRow| cmp(&a.0, &b.0).then(a.2.cmp(&b.2));
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
            account(&mut grant, bytes, "Sort")?;
            self.peak = self.peak.max(grant.bytes());
        }
        cx.want = want;
        rows.sort_by(cmp_rows);
        if let Some(l) = self.limit {
            rows.truncate(l);
        }
        let batches = Batch::chunks(width, rows.into_iter().map(|r| r.1));
        Ok(emit(&mut self.out, batches))
    }
}
