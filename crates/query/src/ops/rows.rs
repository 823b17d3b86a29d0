//! Row plumbing: filters, OPTIONAL, projections, UNWIND, SKIP / LIMIT and UNION.

use super::*;

/// Which rows a predicate column keeps: true, not false or null.
pub(super) fn holds(v: &[Value]) -> Vec<bool> {
    v.iter().map(|x| x.truth() == Some(true)).collect()
}

/// Keeps rows where the predicate is true.
pub struct Filter {
    pub input: BoxOp,
    pub pred: CExpr,
}

impl Op for Filter {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let pred = &self.pred;
        next_kept(&mut self.input, cx, |cx, b| {
            Ok(holds(&eval_col(&cx.env, pred, b)?))
        })
    }
}

/// OPTIONAL MATCH: runs `sub` on each input batch (with the row number appended as a
/// hidden column) and adds, for input rows `sub` found nothing for, the row padded with
/// nulls to `out_width`.
pub struct Optional {
    pub input: BoxOp,
    pub sub: BoxOp,
    pub arg: ArgCell,
    pub out_width: usize,
    pub cur: Option<Batch>,
    pub covered: Vec<bool>,
}

impl Op for Optional {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        loop {
            if self.cur.is_none() {
                let Some(mut b) = self.input.next(cx)? else {
                    return Ok(None);
                };
                b.cols
                    .push((0..b.len).map(|i| Value::Int(i as i64)).collect());
                self.covered = vec![false; b.len];
                *self.arg.borrow_mut() = Some(b.clone());
                self.cur = Some(b);
            }
            let in_width = self.cur.as_ref().map_or(0, |c| c.width());
            if let Some(out) = self.sub.next(cx)? {
                for v in &out.cols[in_width - 1] {
                    if let Value::Int(i) = v {
                        if let Some(c) = self.covered.get_mut(*i as usize) {
                            *c = true;
                        }
                    }
                }
                return Ok(Some(out));
            }
            let cur = self.cur.take().expect("set above");
            *self.arg.borrow_mut() = None;
            let mut out = Batch::empty(self.out_width);
            let nulls = vec![Value::Null; self.out_width - in_width];
            for row in 0..cur.len {
                if !self.covered[row] {
                    out.push_row_from(&cur, row, &nulls);
                }
            }
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
    }
}

/// A pattern comprehension per row: the input batch, with its row numbers in column
/// `row_col`, goes to `sub` through `arg`; `sub` matches the pattern and appends the
/// mapping at `value_col`; each input row gets the list of its mappings.
pub struct RollUpApply {
    pub input: BoxOp,
    pub sub: BoxOp,
    pub arg: ArgCell,
    pub row_col: usize,
    pub value_col: usize,
}

impl Op for RollUpApply {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let Some(mut b) = self.input.next(cx)? else {
            return Ok(None);
        };
        let mut with_rows = b.clone();
        with_rows
            .cols
            .push((0..b.len).map(|i| Value::Int(i as i64)).collect());
        *self.arg.borrow_mut() = Some(with_rows);
        let mut lists: Vec<Vec<Value>> = vec![Vec::new(); b.len];
        let mut bytes = 0u64;
        let grant = &mut cx.budget.empty_grant("RollUpApply");
        while let Some(out) = cx.full(|cx| self.sub.next(cx))? {
            for (r, v) in out.cols[self.row_col].iter().zip(&out.cols[self.value_col]) {
                if let Value::Int(i) = r {
                    bytes += 32 + crate::value::heap_bytes(v) as u64;
                    lists[*i as usize].push(v.clone());
                }
            }
            account(grant, bytes, "RollUpApply")?;
            cx.check_cancel()?;
        }
        *self.arg.borrow_mut() = None;
        b.cols
            .push(lists.into_iter().map(|l| Value::List(l.into())).collect());
        Ok(Some(b))
    }
}

/// Appends a column per expression.
pub struct Extend {
    pub input: BoxOp,
    pub exprs: Vec<CExpr>,
}

impl Op for Extend {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let Some(mut b) = self.input.next(cx)? else {
            return Ok(None);
        };
        for e in &self.exprs {
            let c = eval_col(&cx.env, e, &b)?;
            b.cols.push(c);
        }
        Ok(Some(b))
    }
}

/// Replaces the columns by the expressions' values.
pub struct Project {
    pub input: BoxOp,
    pub exprs: Vec<CExpr>,
}

impl Op for Project {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let Some(mut b) = self.input.next(cx)? else {
            return Ok(None);
        };
        // Expressions first (they read the input's columns), then the columns passed on
        // as they are: moved out of the input at their last use, not copied.
        let mut cols: Vec<Vec<Value>> = Vec::with_capacity(self.exprs.len());
        for e in &self.exprs {
            cols.push(match e {
                CExpr::Slot(_) => Vec::new(),
                e => eval_col(&cx.env, e, &b)?,
            });
        }
        for (k, e) in self.exprs.iter().enumerate() {
            if let CExpr::Slot(i) = e {
                let again = self.exprs[k + 1..]
                    .iter()
                    .any(|x| matches!(x, CExpr::Slot(j) if j == i));
                cols[k] = if again {
                    b.cols[*i].clone()
                } else {
                    std::mem::take(&mut b.cols[*i])
                };
            }
        }
        Ok(Some(Batch { cols, len: b.len }))
    }
}

/// UNWIND: a row per list element.
/// UNWIND: one row per element of the list each input row gives. Output batches hold
/// at most [`BATCH_ROWS`](crate::batch::BATCH_ROWS) rows, and one input row's list is
/// held at a time: `UNWIND range(1, 10000000) AS x UNWIND range(1, 10000000) AS y`
/// used to build the inner list for a whole batch of outer rows at once (22 GB resident
/// under a 256 MiB query limit).
pub struct Unwind {
    pub input: BoxOp,
    pub expr: CExpr,
    /// The input batch being unwound, its next row, and that row's list and position.
    pub cur: Option<(Batch, usize)>,
    pub list: Option<(Arc<Vec<Value>>, usize)>,
    /// `UNWIND range(...)`: the range's values are made as they are unwound (first,
    /// step, count, next), not as a list: any length in constant memory.
    pub range: Option<(i64, i64, u128, u128)>,
}

impl Unwind {
    pub fn new(input: BoxOp, expr: CExpr) -> Unwind {
        Unwind {
            input,
            expr,
            cur: None,
            list: None,
            range: None,
        }
    }
}

impl Op for Unwind {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let mut locals = Vec::new();
        loop {
            if self.cur.is_none() {
                match self.input.next(cx)? {
                    Some(b) => self.cur = Some((b, 0)),
                    None => return Ok(None),
                }
            }
            let (b, next_row) = self.cur.as_mut().expect("set above");
            let mut out = Batch::empty(b.width() + 1);
            while out.len < crate::batch::BATCH_ROWS {
                if let Some((lo, step, n, pos)) = &mut self.range {
                    let row = *next_row - 1;
                    let take = ((*n - *pos) as usize).min(crate::batch::BATCH_ROWS - out.len);
                    for i in 0..take as u128 {
                        let x =
                            Value::Int((*lo as i128 + (*pos + i) as i128 * *step as i128) as i64);
                        out.push_row_from(b, row, std::slice::from_ref(&x));
                    }
                    *pos += take as u128;
                    if *pos == *n {
                        self.range = None;
                    }
                    continue;
                }
                if let Some((items, pos)) = &mut self.list {
                    let row = *next_row - 1;
                    let take = (items.len() - *pos).min(crate::batch::BATCH_ROWS - out.len);
                    for x in &items[*pos..*pos + take] {
                        out.push_row_from(b, row, std::slice::from_ref(x));
                    }
                    *pos += take;
                    if *pos == items.len() {
                        self.list = None;
                    }
                    continue;
                }
                if *next_row >= b.len {
                    break;
                }
                let row = *next_row;
                *next_row += 1;
                if let CExpr::Func(crate::expr::Func::Range, args) = &self.expr {
                    let vals = args
                        .iter()
                        .map(|a| eval(&cx.env, a, b, row, &mut locals))
                        .collect::<Result<Vec<_>, _>>()?;
                    if let Some((lo, step, n)) = crate::expr::func::range_bounds(&vals)? {
                        if n > 0 {
                            self.range = Some((lo, step, n, 0));
                        }
                    }
                    continue;
                }
                match eval(&cx.env, &self.expr, b, row, &mut locals)? {
                    Value::Null => {}
                    Value::List(items) => self.list = Some((items, 0)),
                    v => out.push_row_from(b, row, &[v]),
                }
            }
            if self.list.is_none() && self.range.is_none() && *next_row >= b.len {
                self.cur = None;
            }
            cx.check_cancel()?;
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
    }
}

/// SKIP and LIMIT; stops pulling once the limit is reached.
pub struct SkipLimit {
    pub input: BoxOp,
    pub skip: usize,
    pub limit: Option<usize>,
    pub seen: usize,
    pub emitted: usize,
    /// Writes come before: the input runs to its end whatever the limit, since every
    /// row's writes happen (`CREATE ... RETURN n LIMIT 0` still creates).
    pub drain: bool,
    /// Batches asked for so far (the size asked for doubles with each).
    pub pulls: u32,
}

impl Op for SkipLimit {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        loop {
            if self.limit.is_some_and(|l| self.emitted >= l) {
                if self.drain {
                    while self.input.next(cx)?.is_some() {}
                }
                return Ok(None);
            }
            // Ask for what is still needed, at least 1, 2, 4, ... rows (a selective
            // filter in between then costs a few small batches, not thousands).
            let want = match self.limit {
                Some(l) if !self.drain => {
                    let need = (self.skip - self.seen) + (l - self.emitted);
                    need.max(1 << self.pulls.min(10))
                }
                _ => cx.want,
            };
            self.pulls += 1;
            let saved = std::mem::replace(&mut cx.want, want);
            let got = self.input.next(cx);
            cx.want = saved;
            let Some(mut b) = got? else {
                return Ok(None);
            };
            if self.seen < self.skip {
                let drop = (self.skip - self.seen).min(b.len);
                self.seen += drop;
                b.skip(drop);
            }
            if let Some(l) = self.limit {
                b.truncate(l - self.emitted);
            }
            self.emitted += b.len;
            if b.len > 0 {
                return Ok(Some(b));
            }
        }
    }
}

/// The parts of a UNION, one after another.
pub struct Union {
    pub parts: Vec<BoxOp>,
    pub i: usize,
}

impl Op for Union {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        while self.i < self.parts.len() {
            if let Some(b) = self.parts[self.i].next(cx)? {
                return Ok(Some(b));
            }
            self.i += 1;
        }
        Ok(None)
    }
}

/// The input row of a `CALL { }` body with UNION parts, handed to each part's
/// Argument: what the apply puts in `master` goes to every cell in `cells` before the
/// union of the parts runs (the body is planned again for each row, so it runs once).
pub struct FanOut {
    pub master: ArgCell,
    pub cells: Vec<ArgCell>,
    pub inner: BoxOp,
}

impl Op for FanOut {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        if let Some(b) = self.master.borrow_mut().take() {
            for c in &self.cells {
                *c.borrow_mut() = Some(b.clone());
            }
        }
        self.inner.next(cx)
    }
}

/// `CALL { ... }`: for each input row, the body (planned below an Argument) runs on that
/// row alone; each row it returns extends the input row, and a row it returns nothing
/// for is dropped (a body without RETURN passes every input row on once, after running).
/// A body whose operators keep state across their input (aggregation, DISTINCT, ORDER BY,
/// SKIP, LIMIT, writes) is planned again for each row (`replan`), so that it starts
/// fresh; others are run again on the next row's argument.
pub struct SubqueryApply {
    pub input: BoxOp,
    pub sub: BoxOp,
    pub arg: ArgCell,
    pub returns: bool,
    /// Each input row gets one more column: the number of rows the body gave for it.
    pub count: bool,
    /// `OPTIONAL CALL`: a row the body returns nothing for is kept, with nulls.
    pub optional: bool,
    pub(crate) replan: Option<Box<dyn super::Replanner>>,
    pub out_width: usize,
    /// The input batch being answered and its next row.
    pub cur: Option<(Batch, usize)>,
}

impl Op for SubqueryApply {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        loop {
            let (b, mut row) = match self.cur.take() {
                Some(c) => c,
                None => match self.input.next(cx)? {
                    Some(b) => (b, 0),
                    None => return Ok(None),
                },
            };
            let mut out = Batch::empty(self.out_width);
            while row < b.len && out.len < BATCH_ROWS {
                cx.check_cancel()?;
                if let Some(r) = &self.replan {
                    let none = crate::index::IndexSet::default();
                    let (sub, cell, _) = r.plan(cx.env.g, cx.indexes.unwrap_or(&none))?;
                    (self.sub, self.arg) = (sub, cell);
                }
                let mut one = Batch::empty(b.width());
                one.push_row_from(&b, row, &[]);
                *self.arg.borrow_mut() = Some(one);
                if self.returns {
                    let before = out.len;
                    while let Some(m) = self.sub.next(cx)? {
                        for r in 0..m.len {
                            let mut v = b.row(row);
                            v.extend(m.row(r));
                            out.push_row(v);
                        }
                    }
                    if self.optional && out.len == before {
                        let mut v = b.row(row);
                        v.resize(self.out_width, Value::Null);
                        out.push_row(v);
                    }
                } else {
                    let mut n = 0;
                    while let Some(m) = self.sub.next(cx)? {
                        n += m.len as i64;
                    }
                    let mut v = b.row(row);
                    if self.count {
                        v.push(Value::Int(n));
                    }
                    out.push_row(v);
                }
                row += 1;
            }
            if row < b.len {
                self.cur = Some((b, row));
            }
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
    }
}
