//! Finding nodes: scans of node id ranges (label scans, all nodes) and seeks through
//! the id index, declared property indexes and internal ids, merged with the delta.

use super::*;

/// A node id range to scan; `check` says whether rows need a label test.
#[derive(Debug, Clone)]
pub struct ScanRange {
    pub lo: u64,
    pub hi: u64,
    pub label: Option<u32>,
    /// The range's tables carry this label: only nodes the delta holds (which may
    /// have lost it) need a test.
    pub table_label: Option<u32>,
}

/// For each input row, every node of the ranges (a label scan, or all nodes).
pub struct Scan {
    pub input: BoxOp,
    pub ranges: Vec<ScanRange>,
    pub cur: Option<Batch>,
    pub row: usize,
    pub range: usize,
    pub node: u64,
    /// The nodes of one round (reused).
    pub created: Vec<u64>,
    /// Which rows of one round live (reused).
    pub mask: Vec<bool>,
}

impl Op for Scan {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        loop {
            if self.cur.is_none() {
                match self.input.next(cx)? {
                    None => return Ok(None),
                    Some(b) => {
                        self.cur = Some(b);
                        self.row = 0;
                        self.range = 0;
                        self.node = self.ranges.first().map_or(0, |r| r.lo);
                    }
                }
            }
            cx.check_cancel()?;
            let cur = self.cur.as_ref().expect("set above");
            let mut out = Batch::empty(cur.width() + 1);
            for c in &mut out.cols {
                c.reserve(BATCH_ROWS);
            }
            while out.len < BATCH_ROWS && self.row < cur.len {
                let Some(r) = self.ranges.get(self.range) else {
                    self.row += 1;
                    self.range = 0;
                    self.node = self.ranges.first().map_or(0, |r| r.lo);
                    continue;
                };
                let g = cx.env.g;
                let hi = r.hi.min(g.n_nodes());
                let seg = g.segment_nodes();
                // The nodes of this round, then where it ends.
                self.created.clear();
                let end = if self.node >= seg && self.node < hi {
                    // Created nodes: the delta's live records, not every id handed out.
                    let room = BATCH_ROWS - out.len;
                    g.created_nodes(self.node, hi, r.label, room, &mut self.created)
                } else {
                    // Segment rows here; created ones (past `seg`) on the next round.
                    let end = hi
                        .min(seg.max(self.node))
                        .min(self.node + (BATCH_ROWS - out.len) as u64)
                        .max(self.node);
                    match r.label {
                        // Life (and the label, for tables that carry it) of the whole run
                        // at once: a table's bitmap a word at a time, the delta's records
                        // in it.
                        None if g.scans_check_life() => {
                            g.live_mask(self.node, end, r.table_label, &mut self.mask);
                            let lo = self.node;
                            self.created.extend(
                                self.mask
                                    .iter()
                                    .enumerate()
                                    .filter(|(_, &l)| l)
                                    .map(|(i, _)| lo + i as u64),
                            );
                        }
                        None => self.created.extend(self.node..end),
                        Some(l) => {
                            // Rows the segments hold deleted are skipped a run at a time.
                            let skip_dead = g.db.has_deleted_nodes();
                            let mut n = self.node;
                            while n < end {
                                if skip_dead {
                                    n = g.next_scan_candidate(n, end);
                                    if n >= end {
                                        break;
                                    }
                                }
                                if g.has_label(n, l)? {
                                    self.created.push(n);
                                }
                                n += 1;
                            }
                        }
                    }
                    end
                };
                let w = cur.width();
                for &n in &self.created {
                    for c in 0..w {
                        out.cols[c].push(cur.cols[c][self.row].clone());
                    }
                    out.cols[w].push(Value::Node(n));
                    out.len += 1;
                }
                self.node = end;
                if end >= hi {
                    self.range += 1;
                    self.node = self.ranges.get(self.range).map_or(0, |r| r.lo);
                }
            }
            if self.row >= cur.len {
                self.cur = None;
            }
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
    }
}

/// How a seek finds nodes from an input row.
pub enum SeekBy {
    /// The imported `:ID` column's index, in an id space, and a scan of the node
    /// ranges of tables that can hold the label outside it.
    Id {
        space: usize,
        prop: Arc<str>,
        key: CExpr,
        residual: Vec<(u64, u64)>,
    },
    /// A declared index, equality.
    Index {
        index: Arc<crate::index::PropIndex>,
        prop: Arc<str>,
        key: CExpr,
    },
    /// A declared index, a range (each bound `(expr, inclusive)`).
    Range {
        index: Arc<crate::index::PropIndex>,
        prop: Arc<str>,
        lo: Option<(CExpr, bool)>,
        hi: Option<(CExpr, bool)>,
    },
    /// Internal node ids: `id(n) = x` or `id(n) IN list`.
    /// `id(n) = key` (integers), or with `element`, `elementId(n) = key` (a node's
    /// element id is its id in decimal: strings of that form).
    NodeId { key: CExpr, element: bool },
}

/// For each input row, the nodes an index (or the internal id) finds, that carry
/// `labels`. The candidates of one input batch are held (and accounted: a range or a
/// common key can find millions) and sent on in batches of [`BATCH_ROWS`].
pub struct Seek {
    pub input: BoxOp,
    pub by: SeekBy,
    pub labels: Vec<u32>,
    /// The input batch being answered and its candidates per row.
    pending: Option<(Batch, Vec<Vec<u64>>)>,
    row: usize,
    at: usize,
    grant: Option<Grant>,
}

impl Seek {
    pub fn new(input: BoxOp, by: SeekBy, labels: Vec<u32>) -> Seek {
        Seek {
            input,
            by,
            labels,
            pending: None,
            row: 0,
            at: 0,
            grant: None,
        }
    }

    /// Candidate nodes of every row of `b`.
    fn candidates(&self, cx: &Cx, b: &Batch) -> Result<Vec<Vec<u64>>, QueryError> {
        let g = cx.env.g;
        let opt_col = |e: &Option<(CExpr, bool)>| {
            e.as_ref()
                .map(|(x, inc)| eval_col(&cx.env, x, b).map(|c| (c, *inc)))
                .transpose()
        };
        let mut out = Vec::with_capacity(b.len);
        match &self.by {
            SeekBy::Id {
                space,
                prop,
                key,
                residual,
            } => {
                let mut vals = Vec::new();
                for k in eval_col(&cx.env, key, b)? {
                    let mut found: Vec<u64> = g.id_lookup(*space, &k)?.into_iter().collect();
                    if let (false, Some(want)) =
                        (residual.is_empty(), quiver_engine::delta::KeyVal::of(&k))
                    {
                        for &(lo, hi) in residual {
                            vals.clear();
                            g.node_prop_range(lo, hi, prop, &mut vals)?;
                            found.extend(
                                vals.iter()
                                    .enumerate()
                                    .filter(|(_, v)| {
                                        quiver_engine::delta::KeyVal::of(v).as_ref() == Some(&want)
                                    })
                                    .map(|(i, _)| lo + i as u64),
                            );
                        }
                    }
                    out.push(with_delta(g, found, prop, &k));
                }
            }
            SeekBy::Index { index, prop, key } => {
                for k in eval_col(&cx.env, key, b)? {
                    let found = index.lookup(g, &k)?;
                    out.push(with_delta(g, found, prop, &k));
                }
            }
            SeekBy::Range {
                index,
                prop,
                lo,
                hi,
            } => {
                let (lo, hi) = (opt_col(lo)?, opt_col(hi)?);
                for row in 0..b.len {
                    let l = lo.as_ref().map(|(c, inc)| (&c[row], *inc));
                    let h = hi.as_ref().map(|(c, inc)| (&c[row], *inc));
                    // A null bound compares to nothing.
                    if l.is_some_and(|x| x.0.is_null()) || h.is_some_and(|x| x.0.is_null()) {
                        out.push(Vec::new());
                    } else {
                        let mut found = index.range(g, l, h)?;
                        if g.has_delta() {
                            // Changed nodes answer from the delta, not the index.
                            let held = g.delta_nodes();
                            found.retain(|n| held.binary_search(n).is_err() && g.node_live(*n));
                            for n in held {
                                let v = g.node_prop(n, prop)?;
                                let ok_lo = l.is_none_or(|(b, inc)| {
                                    v.cmp3(b).is_some_and(|o| o.is_gt() || (inc && o.is_eq()))
                                });
                                let ok_hi = h.is_none_or(|(b, inc)| {
                                    v.cmp3(b).is_some_and(|o| o.is_lt() || (inc && o.is_eq()))
                                });
                                if ok_lo && ok_hi {
                                    found.push(n);
                                }
                            }
                        }
                        out.push(found);
                    }
                }
            }
            SeekBy::NodeId { key, element } => {
                // An element id matches only as the exact text the node's id gives.
                let as_id = |v: &Value| match v {
                    Value::Int(i) if !*element => Some(*i),
                    Value::Str(s) if *element => s
                        .parse::<i64>()
                        .ok()
                        .filter(|i| *i >= 0 && i.to_string() == **s),
                    _ => None,
                };
                for k in eval_col(&cx.env, key, b)? {
                    let ids: Vec<i64> = match &k {
                        Value::List(l) => l.iter().filter_map(as_id).collect(),
                        v => as_id(v).into_iter().collect(),
                    };
                    out.push(
                        ids.into_iter()
                            .filter(|&i| i >= 0 && g.node_live(i as u64))
                            .map(|i| i as u64)
                            .collect(),
                    );
                }
            }
        }
        Ok(out)
    }
}

/// Index candidates corrected by the delta: nodes it changed are checked again, nodes
/// it holds with that key are added.
fn with_delta(g: &crate::graph::Graph, mut found: Vec<u64>, prop: &str, key: &Value) -> Vec<u64> {
    if !g.has_delta() {
        return found;
    }
    found.retain(|&n| g.still_matches(n, prop, key));
    for n in g.delta_key_nodes(prop, key) {
        if !found.contains(&n) {
            found.push(n);
        }
    }
    found
}

impl Op for Seek {
    fn mem_peak(&self) -> u64 {
        self.grant.as_ref().map_or(0, |g| g.bytes())
    }

    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        loop {
            if self.pending.is_none() {
                let Some(b) = self.input.next(cx)? else {
                    return Ok(None);
                };
                let found = self.candidates(cx, &b)?;
                let bytes: usize = found.iter().map(|v| v.capacity() * 8 + 24).sum();
                let grant = self
                    .grant
                    .get_or_insert_with(|| cx.budget.empty_grant("Seek"));
                account(grant, bytes as u64, "Seek")?;
                self.pending = Some((b, found));
                (self.row, self.at) = (0, 0);
            }
            let (b, found) = self.pending.as_ref().expect("set above");
            let mut out = Batch::empty(b.width() + 1);
            while self.row < found.len() && out.len < BATCH_ROWS {
                let nodes = &found[self.row];
                let Some(&n) = nodes.get(self.at) else {
                    (self.row, self.at) = (self.row + 1, 0);
                    continue;
                };
                self.at += 1;
                // Indexes keep entries of nodes a checkpoint marked deleted (and the
                // delta may have brought back a deleted row: a created node's id).
                let mut ok = cx.env.g.node_live(n);
                for &l in &self.labels {
                    ok &= cx.env.g.has_label(n, l)?;
                }
                if ok {
                    out.push_row_from(b, self.row, &[Value::Node(n)]);
                }
            }
            if self.row >= found.len() {
                self.pending = None;
            }
            cx.check_cancel()?;
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
    }
}
