//! Physical operators: a pull-based tree that passes [`Batch`]es.
//!
//! Each operator's `next` returns the next batch of rows (never empty) or `None` when it
//! is exhausted for the current input. Operators under an [`Optional`] read their input
//! from an [`Argument`] and are called again after each new argument batch, so pattern
//! operators keep no "done" state of their own. Blocking operators (aggregate, sort,
//! distinct, shortest path) account what they hold against the query's memory budget
//! and fail with [`QueryError::Memory`] naming themselves instead of growing unbounded.

use crate::batch::{Batch, BATCH_ROWS};
use crate::error::QueryError;
use crate::expr::{eval, eval_col, CExpr, Env};
use crate::graph::dirs;
use crate::value::{order, Key, PathVal, RelRef, Value};
use hashbrown::{HashMap, HashSet};
use quiver_common::memory::{Grant, MemoryBudget};
use quiver_common::size::human_bytes;
use quiver_cypher::ast::Dir;
use quiver_storage::Direction;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering as AtOrd};
use std::sync::Arc;
use std::time::Instant;

/// Rows, time and memory of one operator (PROFILE).
#[derive(Debug, Clone, Default)]
pub struct OpStats {
    pub rows: u64,
    pub batches: u64,
    /// Time inside `next`, children included.
    pub nanos: u64,
    pub peak_bytes: u64,
}

pub struct Cx<'g, 'db> {
    pub env: Env<'g, 'db>,
    pub budget: MemoryBudget,
    pub stats: Vec<OpStats>,
    pub cancel: Option<&'g AtomicBool>,
    /// The transaction a writing statement writes in (`None`: read only).
    pub tx: Option<&'g mut quiver_engine::Txn>,
    /// The statement runs inside BEGIN ... COMMIT.
    pub explicit_tx: bool,
    /// The declared indexes and uniqueness constraints writes must keep.
    pub indexes: Option<&'g crate::index::IndexSet>,
    /// LOAD CSV's import directory, rejects file and bad-row count.
    pub load: crate::load::LoadState,
}

impl Cx<'_, '_> {
    pub(crate) fn check_cancel(&self) -> Result<(), QueryError> {
        match self.cancel {
            Some(c) if c.load(AtOrd::Relaxed) => Err(QueryError::Cancelled),
            _ => Ok(()),
        }
    }
}

pub trait Op {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError>;
    /// Most bytes the operator has held at once (PROFILE).
    fn mem_peak(&self) -> u64 {
        0
    }
}

pub type BoxOp = Box<dyn Op>;

/// The first of `batches` now; the rest from `out` on later calls (blocking operators
/// compute everything, then hand it out batch by batch).
fn emit(out: &mut Option<std::vec::IntoIter<Batch>>, batches: Vec<Batch>) -> Option<Batch> {
    let mut it = batches.into_iter();
    let first = it.next();
    *out = Some(it);
    first
}

/// Grows `grant` to `bytes`, or fails naming `operator`.
pub(crate) fn account(
    grant: &mut Grant,
    bytes: u64,
    operator: &'static str,
) -> Result<(), QueryError> {
    if bytes <= grant.bytes() {
        return Ok(());
    }
    // Grow in steps of 1/8 so that accounting is not paid per row.
    let want = bytes.max(grant.bytes() + grant.bytes() / 8);
    grant
        .try_resize(want)
        .or_else(|_| grant.try_resize(bytes))
        .map_err(|e| QueryError::Memory {
            operator,
            limit: human_bytes(e.limit_bytes),
            asked: human_bytes(e.asked_bytes),
            database: e.limit_bytes != grant.budget().limit_bytes(),
        })
}

/// Records rows and time of the operator below it.
pub struct Counted {
    pub id: usize,
    pub inner: BoxOp,
}

impl Op for Counted {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let t = Instant::now();
        let r = self.inner.next(cx)?;
        let peak = self.inner.mem_peak();
        let s = &mut cx.stats[self.id];
        s.nanos += t.elapsed().as_nanos() as u64;
        s.peak_bytes = s.peak_bytes.max(peak);
        if let Some(b) = &r {
            s.rows += b.len as u64;
            s.batches += 1;
        }
        Ok(r)
    }
}

/// One row without columns, once.
pub struct Once {
    pub done: bool,
}

impl Op for Once {
    fn next(&mut self, _: &mut Cx) -> Result<Option<Batch>, QueryError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(None);
        }
        Ok(Some(Batch::unit()))
    }
}

pub type ArgCell = Rc<RefCell<Option<Batch>>>;

/// The batch an [`Optional`] hands to the pattern below it.
pub struct Argument {
    pub cell: ArgCell,
}

impl Op for Argument {
    fn next(&mut self, _: &mut Cx) -> Result<Option<Batch>, QueryError> {
        Ok(self.cell.borrow_mut().take())
    }
}

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
                let hi = r.hi.min(cx.env.g.n_nodes());
                let end = hi
                    .min(self.node + (BATCH_ROWS - out.len) as u64)
                    .max(self.node);
                let w = cur.width();
                let check_live = cx.env.g.has_delta();
                for n in self.node..end {
                    if let Some(l) = r.label {
                        if !cx.env.g.has_label(n, l)? {
                            continue;
                        }
                    } else if check_live {
                        let live = match r.table_label {
                            Some(l) => cx.env.g.live_keeping_label(n, l),
                            None => cx.env.g.node_live(n),
                        };
                        if !live {
                            continue;
                        }
                    }
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
    /// The imported `:ID` column's index, in an id space.
    Id {
        space: usize,
        prop: Arc<str>,
        key: CExpr,
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
    NodeId { key: CExpr },
}

/// For each input row, the nodes an index (or the internal id) finds, that carry
/// `labels`.
pub struct Seek {
    pub input: BoxOp,
    pub by: SeekBy,
    pub labels: Vec<u32>,
}

impl Seek {
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
            SeekBy::Id { space, prop, key } => {
                for k in eval_col(&cx.env, key, b)? {
                    let found: Vec<u64> = g.id_lookup(*space, &k)?.into_iter().collect();
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
            SeekBy::NodeId { key } => {
                for k in eval_col(&cx.env, key, b)? {
                    let ids: Vec<i64> = match k {
                        Value::Int(i) => vec![i],
                        Value::List(l) => l
                            .iter()
                            .filter_map(|v| {
                                if let Value::Int(i) = v {
                                    Some(*i)
                                } else {
                                    None
                                }
                            })
                            .collect(),
                        _ => Vec::new(),
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
fn with_delta(g: &crate::Graph, mut found: Vec<u64>, prop: &str, key: &Value) -> Vec<u64> {
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
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        while let Some(b) = self.input.next(cx)? {
            let found = self.candidates(cx, &b)?;
            let mut out = Batch::empty(b.width() + 1);
            for (row, nodes) in found.into_iter().enumerate() {
                for n in nodes {
                    let mut ok = true;
                    for &l in &self.labels {
                        ok &= cx.env.g.has_label(n, l)?;
                    }
                    if ok {
                        out.push_row_from(&b, row, &[Value::Node(n)]);
                    }
                }
            }
            cx.check_cancel()?;
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
        Ok(None)
    }
}

fn rel_used(r: &RelRef, b: &Batch, row: usize, uniq: &[usize]) -> bool {
    uniq.iter().any(|&s| match &b.cols[s][row] {
        Value::Rel(x) => x == r,
        Value::List(l) => l.iter().any(|v| matches!(v, Value::Rel(x) if x == r)),
        _ => false,
    })
}

/// One hop: for each input row, the neighbours of node `from` over `types` in `dir`.
/// Appends the neighbour (unless `into` names a bound node the neighbour must equal)
/// and, when `emit_rel`, the relationship.
pub struct Expand {
    pub input: BoxOp,
    pub from: usize,
    pub into: Option<usize>,
    pub emit_rel: bool,
    pub types: Vec<u32>,
    pub dir: Dir,
    pub labels: Vec<u32>,
    /// Slots of relationships (or relationship lists) this one must differ from.
    pub uniq: Vec<usize>,
    pub cur: Option<Batch>,
    pub row: usize,
    /// Set by the planner when only distinct neighbours matter downstream (a DISTINCT
    /// projection of the new node): emit the first row per neighbour only.
    pub distinct: DistinctTargets,
}

/// A set of node ids: a hash set while small, then a bitmap over all node ids (a 1.6M-node
/// graph's bitmap is 200 KiB, and a bit test is one cache line where a large hash set
/// misses the cache on most probes).
#[derive(Debug, Default)]
pub enum NodeSet {
    #[default]
    Empty,
    Small(HashSet<u64>),
    Bits(Vec<u64>),
}

/// Entries at which a [`NodeSet`] turns into a bitmap (when the bitmap is at most
/// [`NODE_BITMAP_MAX_BYTES`]).
const NODE_SET_SMALL: usize = 4096;
const NODE_BITMAP_MAX_BYTES: u64 = 64 << 20;

impl NodeSet {
    /// Inserts `n`; true when it was absent. `n_nodes` bounds the ids.
    #[inline]
    pub fn insert(&mut self, n: u64, n_nodes: u64) -> bool {
        match self {
            NodeSet::Bits(b) => {
                let (w, m) = ((n / 64) as usize, 1u64 << (n % 64));
                match b.get_mut(w) {
                    Some(x) => {
                        let new = *x & m == 0;
                        *x |= m;
                        new
                    }
                    None => false,
                }
            }
            NodeSet::Small(h) => {
                let new = h.insert(n);
                if new
                    && h.len() > NODE_SET_SMALL
                    && n_nodes > 0
                    && n_nodes.div_ceil(8) <= NODE_BITMAP_MAX_BYTES
                    && h.iter().all(|&x| x < n_nodes)
                {
                    let mut b = vec![0u64; n_nodes.div_ceil(64) as usize];
                    for &x in h.iter() {
                        if let Some(w) = b.get_mut((x / 64) as usize) {
                            *w |= 1 << (x % 64);
                        }
                    }
                    *self = NodeSet::Bits(b);
                }
                new
            }
            NodeSet::Empty => {
                *self = NodeSet::Small(HashSet::new());
                self.insert(n, n_nodes)
            }
        }
    }

    #[inline]
    pub fn contains(&self, n: u64) -> bool {
        match self {
            NodeSet::Bits(b) => b
                .get((n / 64) as usize)
                .is_some_and(|x| x & (1 << (n % 64)) != 0),
            NodeSet::Small(h) => h.contains(&n),
            NodeSet::Empty => false,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        match self {
            NodeSet::Bits(b) => b.len() as u64 * 8,
            NodeSet::Small(h) => h.capacity() as u64 * 16,
            NodeSet::Empty => 0,
        }
    }
}

/// The first-row-per-node filter of [`Expand`] and [`VarExpand`], switched on by the
/// planner after the operator is built (through the shared flag).
#[derive(Default)]
pub struct DistinctTargets {
    pub on: Rc<std::cell::Cell<bool>>,
    seen: NodeSet,
    n_nodes: u64,
    grant: Option<Grant>,
}

impl DistinctTargets {
    /// Whether `node` is new (always true when off).
    #[inline]
    fn first(&mut self, node: u64) -> bool {
        !self.on.get() || self.seen.insert(node, self.n_nodes)
    }

    /// Whether `node` was emitted already (a cheap test before any per-edge work).
    #[inline]
    fn done(&self, node: u64) -> bool {
        self.on.get() && self.seen.contains(node)
    }

    fn account(&mut self, cx: &Cx) -> Result<u64, QueryError> {
        self.n_nodes = cx.env.g.n_nodes();
        if !self.on.get() {
            return Ok(0);
        }
        let g = self
            .grant
            .get_or_insert_with(|| cx.budget.empty_grant("Expand"));
        account(g, self.seen.bytes(), "Expand (distinct targets)")?;
        Ok(g.bytes())
    }
}

impl Op for Expand {
    fn mem_peak(&self) -> u64 {
        self.distinct.grant.as_ref().map_or(0, |g| g.bytes())
    }
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let g = cx.env.g;
        self.distinct.n_nodes = g.n_nodes();
        let need_rel = self.emit_rel || !self.uniq.is_empty();
        loop {
            if self.cur.is_none() {
                match self.input.next(cx)? {
                    None => return Ok(None),
                    Some(b) => {
                        self.cur = Some(b);
                        self.row = 0;
                    }
                }
            }
            cx.check_cancel()?;
            let cur = self.cur.as_ref().expect("set above");
            let extra = usize::from(self.into.is_none()) + usize::from(self.emit_rel);
            let mut out = Batch::empty(cur.width() + extra);
            let mut ext: Vec<Value> = Vec::with_capacity(2);
            while out.len < BATCH_ROWS && self.row < cur.len {
                let row = self.row;
                self.row += 1;
                let Value::Node(node) = cur.cols[self.from][row] else {
                    continue;
                };
                let target = match self.into {
                    Some(s) => match cur.cols[s][row] {
                        Value::Node(t) => Some(t),
                        _ => continue,
                    },
                    None => None,
                };
                for &ty in &self.types {
                    for &d in dirs(self.dir) {
                        // Expand-into walks from the endpoint with the smaller degree.
                        let (start, want, d) = match target {
                            Some(t) if g.degree(ty, t, flip(d))? < g.degree(ty, node, d)? => {
                                (t, Some(node), flip(d))
                            }
                            _ => (node, target, d),
                        };
                        let both_in = self.dir == Dir::Both && d == Direction::In;
                        let mut err = None;
                        g.for_each_neighbour(ty, start, d, |nb, eid| {
                            if err.is_some() {
                                return;
                            }
                            let nb64 = nb as u64;
                            if want.is_some_and(|w| w != nb64) {
                                return;
                            }
                            if target.is_none() && self.distinct.done(nb64) {
                                return;
                            }
                            // An undirected pattern meets a self-loop once, not twice.
                            if both_in && nb64 == start && target.is_none() {
                                return;
                            }
                            ext.clear();
                            if target.is_none() {
                                for &l in &self.labels {
                                    match g.has_label(nb64, l) {
                                        Ok(true) => {}
                                        Ok(false) => return,
                                        Err(e) => {
                                            err = Some(e);
                                            return;
                                        }
                                    }
                                }
                                ext.push(Value::Node(nb64));
                            }
                            if need_rel {
                                let r = match g.rel_ref(ty, start, nb, eid, d) {
                                    Ok(r) => r,
                                    Err(e) => {
                                        err = Some(e);
                                        return;
                                    }
                                };
                                if rel_used(&r, cur, row, &self.uniq) {
                                    return;
                                }
                                if self.emit_rel {
                                    ext.push(Value::Rel(r));
                                }
                            }
                            if target.is_none() && !self.distinct.first(nb64) {
                                return;
                            }
                            out.push_row_from(cur, row, &ext);
                        })?;
                        if let Some(e) = err {
                            return Err(e);
                        }
                    }
                }
            }
            if self.row >= cur.len {
                self.cur = None;
            }
            self.distinct.account(cx)?;
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
    }
}

fn flip(d: Direction) -> Direction {
    match d {
        Direction::Out => Direction::In,
        Direction::In => Direction::Out,
    }
}

pub struct Frame {
    nbrs: Vec<(u64, RelRef)>,
    i: usize,
}

/// Variable-length expansion `-[*min..max]->`: depth-first over paths whose
/// relationships are all different (openCypher's relationship uniqueness), streaming.
pub struct VarExpand {
    pub input: BoxOp,
    pub from: usize,
    pub into: Option<usize>,
    pub emit_rels: bool,
    pub types: Vec<u32>,
    pub dir: Dir,
    pub min: u32,
    pub max: u32,
    pub labels: Vec<u32>,
    pub uniq: Vec<usize>,
    pub cur: Option<Batch>,
    pub row: usize,
    /// DFS state of the current row: frames and the relationships of the path.
    pub stack: Vec<Frame>,
    pub path: Vec<RelRef>,
    pub started: bool,
    pub pool: Vec<Vec<(u64, RelRef)>>,
    /// Emit the relationship list last-hop first (the pattern was expanded leftwards).
    pub reverse: bool,
    pub distinct: DistinctTargets,
    /// Bytes of neighbour lists held by the frames and in the pool, and their grant.
    stack_bytes: u64,
    stack_granted: u64,
    stack_grant: Option<Grant>,
}

impl VarExpand {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        input: BoxOp,
        from: usize,
        into: Option<usize>,
        emit_rels: bool,
        types: Vec<u32>,
        dir: Dir,
        (min, max): (u32, u32),
        labels: Vec<u32>,
        uniq: Vec<usize>,
    ) -> VarExpand {
        VarExpand {
            input,
            from,
            into,
            emit_rels,
            types,
            dir,
            min,
            max,
            labels,
            uniq,
            cur: None,
            row: 0,
            stack: Vec::new(),
            path: Vec::new(),
            started: false,
            pool: Vec::new(),
            reverse: false,
            distinct: DistinctTargets::default(),
            stack_bytes: 0,
            stack_granted: 0,
            stack_grant: None,
        }
    }

    fn emit(&mut self, cx: &Cx, node: u64, out: &mut Batch) -> Result<(), QueryError> {
        let cur = self.cur.as_ref().expect("row in progress");
        let depth = self.path.len() as u32;
        if depth < self.min {
            return Ok(());
        }
        let mut ext = Vec::with_capacity(2);
        match self.into {
            Some(s) => {
                if !matches!(cur.cols[s][self.row], Value::Node(t) if t == node) {
                    return Ok(());
                }
            }
            None => {
                for &l in &self.labels {
                    if !cx.env.g.has_label(node, l)? {
                        return Ok(());
                    }
                }
                if !self.distinct.first(node) {
                    return Ok(());
                }
                ext.push(Value::Node(node));
            }
        }
        if self.emit_rels {
            let mut l: Vec<Value> = self.path.iter().map(|r| Value::Rel(*r)).collect();
            if self.reverse {
                l.reverse();
            }
            ext.push(Value::list(l));
        }
        out.push_row_from(cur, self.row, &ext);
        Ok(())
    }

    fn push_frame(&mut self, cx: &Cx, node: u64) -> Result<(), QueryError> {
        let mut nbrs = self.pool.pop().unwrap_or_default();
        nbrs.clear();
        let before = nbrs.capacity();
        if (self.path.len() as u32) < self.max {
            cx.env.g.step_rels(&self.types, self.dir, node, &mut nbrs)?;
        }
        // Frames and pooled lists keep their capacity: count what grew.
        self.stack_bytes +=
            ((nbrs.capacity() - before) * std::mem::size_of::<(u64, RelRef)>()) as u64;
        self.stack.push(Frame { nbrs, i: 0 });
        // Deep paths (`*` without a bound) hold a frame per hop: account them.
        if self.stack_bytes > self.stack_granted {
            let g = self
                .stack_grant
                .get_or_insert_with(|| cx.budget.empty_grant("VarLengthExpand"));
            account(g, self.stack_bytes, "VarLengthExpand")?;
            self.stack_granted = g.bytes();
        }
        Ok(())
    }
}

impl Op for VarExpand {
    fn mem_peak(&self) -> u64 {
        self.distinct.grant.as_ref().map_or(0, |g| g.bytes()) + self.stack_granted
    }
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        self.distinct.n_nodes = cx.env.g.n_nodes();
        loop {
            if self.cur.is_none() {
                match self.input.next(cx)? {
                    None => return Ok(None),
                    Some(b) => {
                        self.cur = Some(b);
                        self.row = 0;
                        self.started = false;
                    }
                }
            }
            cx.check_cancel()?;
            let width = self.cur.as_ref().map_or(0, |c| c.width());
            let extra = usize::from(self.into.is_none()) + usize::from(self.emit_rels);
            let mut out = Batch::empty(width + extra);
            while out.len < BATCH_ROWS {
                let cur_len = self.cur.as_ref().map_or(0, |c| c.len);
                if self.row >= cur_len {
                    break;
                }
                if !self.started {
                    self.started = true;
                    let start = match self.cur.as_ref().expect("row").cols[self.from][self.row] {
                        Value::Node(n) => n,
                        _ => {
                            self.row += 1;
                            self.started = false;
                            continue;
                        }
                    };
                    self.path.clear();
                    self.emit(cx, start, &mut out)?;
                    self.push_frame(cx, start)?;
                    continue;
                }
                let Some(top) = self.stack.last_mut() else {
                    self.row += 1;
                    self.started = false;
                    continue;
                };
                if top.i >= top.nbrs.len() {
                    let f = self.stack.pop().expect("non-empty");
                    self.pool.push(f.nbrs);
                    self.path.pop();
                    continue;
                }
                let (nb, r) = top.nbrs[top.i];
                top.i += 1;
                if self.path.contains(&r)
                    || rel_used(&r, self.cur.as_ref().expect("row"), self.row, &self.uniq)
                {
                    continue;
                }
                self.path.push(r);
                self.emit(cx, nb, &mut out)?;
                self.push_frame(cx, nb)?;
            }
            let cur_len = self.cur.as_ref().map_or(0, |c| c.len);
            if self.row >= cur_len {
                self.cur = None;
            }
            self.distinct.account(cx)?;
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
    }
}

/// Shortest paths from node `from` over `types`/`dir`, at most `max` hops: to the bound
/// node `to` (bidirectional BFS, expanding the smaller frontier), or, without `to`, one
/// shortest path to every node reached (Memgraph's `*BFS`). Appends the target node
/// (without `to`) and the path.
pub struct ShortestPath {
    pub input: BoxOp,
    pub from: usize,
    pub to: Option<usize>,
    pub types: Vec<u32>,
    pub dir: Dir,
    pub min: u32,
    pub max: u32,
    pub all: bool,
    pub labels: Vec<u32>,
    pub uniq: Vec<usize>,
    pub peak: u64,
}

/// The opposite direction of a pattern step.
pub fn reverse_dir(d: Dir) -> Dir {
    match d {
        Dir::Out => Dir::In,
        Dir::In => Dir::Out,
        Dir::Both => Dir::Both,
    }
}

type Parents = HashMap<u64, Vec<(u64, RelRef)>>;

impl ShortestPath {
    /// Bidirectional BFS; all shortest paths when `self.all`.
    fn between(
        &self,
        cx: &Cx,
        grant: &mut Grant,
        s: u64,
        t: u64,
    ) -> Result<Vec<PathVal>, QueryError> {
        if s == t {
            return Ok(if self.min == 0 {
                vec![PathVal {
                    nodes: vec![s],
                    rels: vec![],
                }]
            } else {
                vec![]
            });
        }
        // Parents on each side: node -> (previous node towards that side's root, rel).
        let mut fwd: Parents = HashMap::new();
        let mut bwd: Parents = HashMap::new();
        fwd.insert(s, vec![]);
        bwd.insert(t, vec![]);
        let (mut ff, mut bf) = (vec![s], vec![t]);
        let mut depth = 0u32;
        let mut nbrs = Vec::new();
        let mut meet: Vec<u64> = Vec::new();
        while depth < self.max && !ff.is_empty() && !bf.is_empty() {
            cx.check_cancel()?;
            let forward = ff.len() <= bf.len();
            let (front, seen, other, dir) = if forward {
                (&mut ff, &mut fwd, &bwd, self.dir)
            } else {
                (&mut bf, &mut bwd, &fwd, reverse_dir(self.dir))
            };
            let mut next = Vec::new();
            let mut level: Parents = HashMap::new();
            for &u in front.iter() {
                nbrs.clear();
                cx.env.g.step_rels(&self.types, dir, u, &mut nbrs)?;
                for &(v, r) in &nbrs {
                    if seen.contains_key(&v) {
                        continue;
                    }
                    let e = level.entry(v).or_default();
                    if e.is_empty() {
                        next.push(v);
                    }
                    if e.is_empty() || self.all {
                        e.push((u, r));
                    }
                }
            }
            depth += 1;
            account(
                grant,
                ((seen.len() + level.len()) * 48 + next.len() * 8) as u64,
                "ShortestPath",
            )?;
            for v in &next {
                if other.contains_key(v) {
                    meet.push(*v);
                }
            }
            seen.extend(level);
            *front = next;
            if !meet.is_empty() {
                break;
            }
        }
        if meet.is_empty() || depth < self.min {
            return Ok(vec![]);
        }
        if !self.all {
            meet.truncate(1);
        }
        let mut out = Vec::new();
        for m in meet {
            let left = paths_to_root(&fwd, m, self.all);
            let right = paths_to_root(&bwd, m, self.all);
            for l in &left {
                for r in &right {
                    // l: m .. s (reversed), r: m .. t.
                    let mut nodes: Vec<u64> = l.0.iter().rev().copied().collect();
                    let mut rels: Vec<RelRef> = l.1.iter().rev().copied().collect();
                    nodes.extend(r.0.iter().skip(1));
                    rels.extend(r.1.iter());
                    let mut uniq = rels.clone();
                    uniq.sort_by_key(|r| (r.ty, r.eid));
                    uniq.dedup();
                    if uniq.len() == rels.len() {
                        out.push(PathVal { nodes, rels });
                    }
                }
            }
            if !self.all && !out.is_empty() {
                break;
            }
        }
        Ok(out)
    }
}

/// Every path from `m` back to its side's root through `parents`: (nodes, rels), `m` first.
fn paths_to_root(parents: &Parents, m: u64, all: bool) -> Vec<(Vec<u64>, Vec<RelRef>)> {
    let mut done = Vec::new();
    let mut work = vec![(vec![m], Vec::new())];
    while let Some((nodes, rels)) = work.pop() {
        let last = *nodes.last().expect("non-empty");
        match parents.get(&last) {
            Some(ps) if !ps.is_empty() => {
                let take = if all { ps.len() } else { 1 };
                for &(p, r) in &ps[..take] {
                    let mut n2 = nodes.clone();
                    let mut r2: Vec<RelRef> = rels.clone();
                    n2.push(p);
                    r2.push(r);
                    work.push((n2, r2));
                }
            }
            _ => done.push((nodes, rels)),
        }
    }
    done
}

impl Op for ShortestPath {
    fn mem_peak(&self) -> u64 {
        self.peak
    }
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let mut grant = cx.budget.empty_grant("ShortestPath");
        while let Some(b) = self.input.next(cx)? {
            let extra = 1 + usize::from(self.to.is_none());
            let mut out = Batch::empty(b.width() + extra);
            for row in 0..b.len {
                let Value::Node(s) = b.cols[self.from][row] else {
                    continue;
                };
                match self.to {
                    Some(ts) => {
                        let Value::Node(t) = b.cols[ts][row] else {
                            continue;
                        };
                        for p in self.between(cx, &mut grant, s, t)? {
                            out.push_row_from(&b, row, &[Value::Path(Arc::new(p))]);
                        }
                    }
                    None => self.single_source(cx, &mut grant, &b, row, s, &mut out)?,
                }
            }
            self.peak = self.peak.max(grant.bytes());
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
        Ok(None)
    }
}

impl ShortestPath {
    fn single_source(
        &self,
        cx: &Cx,
        grant: &mut Grant,
        b: &Batch,
        row: usize,
        s: u64,
        out: &mut Batch,
    ) -> Result<(), QueryError> {
        let mut parent: HashMap<u64, (u64, RelRef)> = HashMap::new();
        let mut seen: HashSet<u64> = HashSet::new();
        seen.insert(s);
        let mut front = vec![s];
        let mut depth = 0;
        let mut nbrs = Vec::new();
        let emit = |node: u64,
                    parent: &HashMap<u64, (u64, RelRef)>,
                    out: &mut Batch|
         -> Result<(), QueryError> {
            for &l in &self.labels {
                if !cx.env.g.has_label(node, l)? {
                    return Ok(());
                }
            }
            let mut nodes = vec![node];
            let mut rels = Vec::new();
            let mut at = node;
            while let Some(&(p, r)) = parent.get(&at) {
                nodes.push(p);
                rels.push(r);
                at = p;
            }
            nodes.reverse();
            rels.reverse();
            if rel_used_any(&rels, b, row, &self.uniq) {
                return Ok(());
            }
            out.push_row_from(
                b,
                row,
                &[
                    Value::Node(node),
                    Value::Path(Arc::new(PathVal { nodes, rels })),
                ],
            );
            Ok(())
        };
        if self.min == 0 {
            emit(s, &parent, out)?;
        }
        while depth < self.max && !front.is_empty() {
            cx.check_cancel()?;
            let mut next = Vec::new();
            for &u in &front {
                nbrs.clear();
                cx.env.g.step_rels(&self.types, self.dir, u, &mut nbrs)?;
                for &(v, r) in &nbrs {
                    if seen.insert(v) {
                        parent.insert(v, (u, r));
                        next.push(v);
                    }
                }
            }
            depth += 1;
            account(grant, (seen.len() * 56 + next.len() * 8) as u64, "BFS")?;
            if depth >= self.min {
                for &v in &next {
                    emit(v, &parent, out)?;
                }
            }
            front = next;
        }
        Ok(())
    }
}

fn rel_used_any(rels: &[RelRef], b: &Batch, row: usize, uniq: &[usize]) -> bool {
    rels.iter().any(|r| rel_used(r, b, row, uniq))
}

/// The next non-empty batch of `input` after dropping the rows `keep` marks false: the
/// loop of every operator that removes rows (filters, distinct).
fn next_kept(
    input: &mut BoxOp,
    cx: &mut Cx,
    mut keep: impl FnMut(&mut Cx, &Batch) -> Result<Vec<bool>, QueryError>,
) -> Result<Option<Batch>, QueryError> {
    while let Some(mut b) = input.next(cx)? {
        let k = keep(cx, &b)?;
        b.filter(&k);
        if b.len > 0 {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

/// Which rows a predicate column keeps: true, not false or null.
fn holds(v: &[Value]) -> Vec<bool> {
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
        let Some(b) = self.input.next(cx)? else {
            return Ok(None);
        };
        let cols = self
            .exprs
            .iter()
            .map(|e| match e {
                CExpr::Slot(i) => Ok(b.cols[*i].clone()),
                e => eval_col(&cx.env, e, &b),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Batch { cols, len: b.len }))
    }
}

/// UNWIND: a row per list element.
pub struct Unwind {
    pub input: BoxOp,
    pub expr: CExpr,
}

impl Op for Unwind {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        while let Some(b) = self.input.next(cx)? {
            let lists = eval_col(&cx.env, &self.expr, &b)?;
            let mut out = Batch::empty(b.width() + 1);
            for (row, l) in lists.into_iter().enumerate() {
                match l {
                    Value::Null => {}
                    Value::List(items) => {
                        for x in items.iter() {
                            out.push_row_from(&b, row, std::slice::from_ref(x));
                        }
                    }
                    v => out.push_row_from(&b, row, &[v]),
                }
            }
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
        Ok(None)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFn {
    Count,
    CountStar,
    Sum,
    Avg,
    Min,
    Max,
    Collect,
    StDev,
    StDevP,
    PercentileCont,
    PercentileDisc,
}

#[derive(Debug, Clone)]
pub struct AggSpec {
    pub func: AggFn,
    pub distinct: bool,
    pub arg: Option<CExpr>,
    /// The percentile of percentileCont/Disc.
    pub extra: Option<CExpr>,
}

#[derive(Debug, Clone)]
enum AggState {
    Count(i64),
    Sum(Value),
    Avg(f64, i64),
    Best(Value),
    List(Vec<Value>),
}

fn agg_init(f: AggFn) -> AggState {
    match f {
        AggFn::Count | AggFn::CountStar => AggState::Count(0),
        AggFn::Sum => AggState::Sum(Value::Int(0)),
        AggFn::Avg => AggState::Avg(0.0, 0),
        AggFn::Min | AggFn::Max => AggState::Best(Value::Null),
        _ => AggState::List(Vec::new()),
    }
}

fn agg_update(f: AggFn, s: &mut AggState, v: &Value) -> Result<usize, QueryError> {
    if v.is_null() && f != AggFn::CountStar {
        return Ok(0);
    }
    match (s, f) {
        (AggState::Count(c), _) => *c += 1,
        (AggState::Sum(acc), _) => {
            *acc = match (&*acc, v) {
                (Value::Int(a), Value::Int(b)) => Value::Int(
                    a.checked_add(*b)
                        .ok_or_else(|| QueryError::Argument("integer overflow in sum()".into()))?,
                ),
                (Value::Int(a), Value::Float(b)) => Value::Float(*a as f64 + b),
                (Value::Float(a), Value::Int(b)) => Value::Float(a + *b as f64),
                (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
                _ => {
                    return Err(QueryError::ty(format!(
                        "sum() needs numbers, got {}",
                        v.type_name()
                    )))
                }
            }
        }
        (AggState::Avg(sum, n), _) => match v {
            Value::Int(i) => {
                *sum += *i as f64;
                *n += 1
            }
            Value::Float(x) => {
                *sum += x;
                *n += 1
            }
            _ => {
                return Err(QueryError::ty(format!(
                    "avg() needs numbers, got {}",
                    v.type_name()
                )))
            }
        },
        (AggState::Best(b), f) => {
            let better = b.is_null()
                || match f {
                    AggFn::Min => order(v, b) == std::cmp::Ordering::Less,
                    _ => order(v, b) == std::cmp::Ordering::Greater,
                };
            if better {
                *b = v.clone();
            }
        }
        (AggState::List(l), _) => {
            l.push(v.clone());
            return Ok(32 + crate::value::heap_bytes(v));
        }
    }
    Ok(0)
}

fn agg_final(f: AggFn, s: AggState, p: Option<&Value>) -> Result<Value, QueryError> {
    Ok(match s {
        AggState::Count(c) => Value::Int(c),
        AggState::Sum(v) => v,
        AggState::Avg(sum, n) => {
            if n == 0 {
                Value::Null
            } else {
                Value::Float(sum / n as f64)
            }
        }
        AggState::Best(v) => v,
        AggState::List(l) => match f {
            AggFn::Collect => Value::list(l),
            AggFn::StDev | AggFn::StDevP => {
                let xs: Vec<f64> = l
                    .iter()
                    .map(|v| match v {
                        Value::Int(i) => Ok(*i as f64),
                        Value::Float(x) => Ok(*x),
                        _ => Err(QueryError::ty("stDev() needs numbers")),
                    })
                    .collect::<Result<_, _>>()?;
                let n = xs.len() as f64;
                let denom = if f == AggFn::StDev { n - 1.0 } else { n };
                if xs.is_empty() || denom <= 0.0 {
                    Value::Float(0.0)
                } else {
                    let mean = xs.iter().sum::<f64>() / n;
                    Value::Float(
                        (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / denom).sqrt(),
                    )
                }
            }
            _ => {
                let p = match p {
                    Some(Value::Int(i)) => *i as f64,
                    Some(Value::Float(x)) => *x,
                    _ => {
                        return Err(QueryError::Argument(
                            "percentile needs a number in 0..1".into(),
                        ))
                    }
                };
                if !(0.0..=1.0).contains(&p) {
                    return Err(QueryError::Argument(format!(
                        "percentile {p} is not in 0..1"
                    )));
                }
                let mut xs: Vec<f64> = l
                    .iter()
                    .filter_map(|v| match v {
                        Value::Int(i) => Some(*i as f64),
                        Value::Float(x) => Some(*x),
                        _ => None,
                    })
                    .collect();
                if xs.is_empty() {
                    return Ok(Value::Null);
                }
                xs.sort_by(|a, b| a.total_cmp(b));
                if f == AggFn::PercentileDisc {
                    let k = ((p * xs.len() as f64).ceil() as usize).max(1) - 1;
                    let x = xs[k.min(xs.len() - 1)];
                    if l.iter().all(|v| matches!(v, Value::Int(_))) {
                        Value::Int(x as i64)
                    } else {
                        Value::Float(x)
                    }
                } else {
                    let pos = p * (xs.len() - 1) as f64;
                    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
                    Value::Float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo as f64))
                }
            }
        },
    })
}

/// Integer grouping keys `0..DENSE_KEYS` find their group by indexing, not hashing.
const DENSE_KEYS: usize = 4096;

struct Group {
    states: Vec<AggState>,
    seen: Vec<HashSet<Key>>,
}

/// Groups and their aggregate states, in first-seen order. One grouping key (the common
/// case) is hashed without building a vector per row; small integer keys index a table.
pub struct GroupTable {
    groups: Vec<(Vec<Key>, Group)>,
    index1: HashMap<Key, usize>,
    index_n: HashMap<Vec<Key>, usize>,
    dense: Vec<u32>,
    /// The group of the null key (one key).
    null_group: u32,
    extras: Vec<Option<Value>>,
    /// Approximate bytes held.
    pub bytes: u64,
}

fn new_group(aggs: &[AggSpec]) -> Group {
    Group {
        states: aggs.iter().map(|a| agg_init(a.func)).collect(),
        seen: aggs.iter().map(|_| HashSet::new()).collect(),
    }
}

impl GroupTable {
    pub fn new(n_keys: usize, aggs: &[AggSpec]) -> GroupTable {
        let mut groups = Vec::new();
        if n_keys == 0 {
            groups.push((Vec::new(), new_group(aggs)));
        }
        GroupTable {
            groups,
            index1: HashMap::new(),
            index_n: HashMap::new(),
            dense: if n_keys == 1 {
                vec![u32::MAX; DENSE_KEYS]
            } else {
                Vec::new()
            },
            null_group: u32::MAX,
            extras: vec![None; aggs.len()],
            bytes: 0,
        }
    }

    fn group_of<K: AsRef<[Value]>>(&mut self, keys: &[K], row: usize, aggs: &[AggSpec]) -> usize {
        match keys.len() {
            0 => 0,
            1 if keys[0].as_ref()[row].is_null() && self.null_group != u32::MAX => {
                self.null_group as usize
            }
            1 if matches!(keys[0].as_ref()[row], Value::Int(i) if (0..DENSE_KEYS as i64).contains(&i)) =>
            {
                let Value::Int(i) = keys[0].as_ref()[row] else {
                    return 0;
                };
                let slot = self.dense[i as usize];
                if slot != u32::MAX {
                    return slot as usize;
                }
                self.bytes += 96 + aggs.len() as u64 * 48;
                self.groups
                    .push((vec![Key(Value::Int(i))], new_group(aggs)));
                self.dense[i as usize] = (self.groups.len() - 1) as u32;
                self.groups.len() - 1
            }
            1 => {
                let k = Key(keys[0].as_ref()[row].clone());
                if let Some(&g) = self.index1.get(&k) {
                    return g;
                }
                if k.0.is_null() {
                    self.null_group = self.groups.len() as u32;
                }
                self.bytes += 96 + crate::value::heap_bytes(&k.0) as u64 + aggs.len() as u64 * 48;
                self.groups.push((vec![k.clone()], new_group(aggs)));
                self.index1.insert(k, self.groups.len() - 1);
                self.groups.len() - 1
            }
            _ => {
                let key: Vec<Key> = keys.iter().map(|c| Key(c.as_ref()[row].clone())).collect();
                if let Some(&g) = self.index_n.get(&key) {
                    return g;
                }
                self.bytes += 64
                    + key
                        .iter()
                        .map(|k| 64 + crate::value::heap_bytes(&k.0) as u64)
                        .sum::<u64>()
                    + aggs.len() as u64 * 48;
                self.groups.push((key.clone(), new_group(aggs)));
                self.index_n.insert(key, self.groups.len() - 1);
                self.groups.len() - 1
            }
        }
    }

    /// Adds the rows of `b`.
    pub fn add(
        &mut self,
        env: &Env,
        key_exprs: &[CExpr],
        aggs: &[AggSpec],
        b: &Batch,
    ) -> Result<(), QueryError> {
        // Slots are read in place.
        let keys: Vec<std::borrow::Cow<[Value]>> = key_exprs
            .iter()
            .map(|k| match k {
                CExpr::Slot(i) => Ok(std::borrow::Cow::Borrowed(&b.cols[*i][..])),
                k => eval_col(env, k, b).map(std::borrow::Cow::Owned),
            })
            .collect::<Result<_, QueryError>>()?;
        let args: Vec<Option<Vec<Value>>> = aggs
            .iter()
            .map(|a| a.arg.as_ref().map(|e| eval_col(env, e, b)).transpose())
            .collect::<Result<_, _>>()?;
        for (i, a) in aggs.iter().enumerate() {
            if let (Some(e), None) = (&a.extra, &self.extras[i]) {
                if b.len > 0 {
                    self.extras[i] = Some(eval(env, e, b, 0, &mut Vec::new())?);
                }
            }
        }
        let only_count_star = aggs.iter().all(|a| a.func == AggFn::CountStar);
        let t = Value::Bool(true);
        for row in 0..b.len {
            let gi = self.group_of(&keys, row, aggs);
            let g = &mut self.groups[gi].1;
            if only_count_star {
                for s in &mut g.states {
                    if let AggState::Count(c) = s {
                        *c += 1;
                    }
                }
                continue;
            }
            for (i, a) in aggs.iter().enumerate() {
                let v = match &args[i] {
                    Some(col) => &col[row],
                    None => &t,
                };
                if a.distinct && !v.is_null() {
                    if !g.seen[i].insert(Key(v.clone())) {
                        continue;
                    }
                    self.bytes += 48 + crate::value::heap_bytes(v) as u64;
                }
                self.bytes += agg_update(a.func, &mut g.states[i], v)? as u64;
            }
        }
        Ok(())
    }

    /// Folds `other` (built from other rows, without DISTINCT aggregates) into `self`.
    pub fn merge(&mut self, mut other: GroupTable, aggs: &[AggSpec]) -> Result<(), QueryError> {
        for (i, e) in other.extras.iter_mut().enumerate() {
            if self.extras[i].is_none() {
                self.extras[i] = e.take();
            }
        }
        let n_keys = other.groups.first().map_or(0, |g| g.0.len());
        for (key, g) in other.groups {
            let cols: Vec<Vec<Value>> = key.iter().map(|k| vec![k.0.clone()]).collect();
            let gi = if n_keys == 0 {
                0
            } else {
                self.group_of(&cols, 0, aggs)
            };
            let mine = &mut self.groups[gi].1;
            for (i, (s, o)) in mine.states.iter_mut().zip(g.states).enumerate() {
                match (s, o) {
                    (AggState::Count(a), AggState::Count(b)) => *a += b,
                    (AggState::Avg(a, n), AggState::Avg(b, m)) => {
                        *a += b;
                        *n += m;
                    }
                    (AggState::List(a), AggState::List(b)) => a.extend(b),
                    // Sum adds; min and max keep the better value (null is skipped).
                    (s, AggState::Sum(b) | AggState::Best(b)) => {
                        agg_update(aggs[i].func, s, &b)?;
                    }
                    _ => {}
                }
            }
        }
        self.bytes += other.bytes;
        Ok(())
    }

    /// The result rows: keys, then one value per aggregate.
    pub fn finish(self, aggs: &[AggSpec], n_keys: usize) -> Result<Vec<Batch>, QueryError> {
        let rows = self
            .groups
            .into_iter()
            .map(|(key, g)| {
                let mut row: Vec<Value> = key.into_iter().map(|k| k.0).collect();
                for (i, (a, s)) in aggs.iter().zip(g.states).enumerate() {
                    row.push(agg_final(a.func, s, self.extras[i].as_ref())?);
                }
                Ok(row)
            })
            .collect::<Result<Vec<_>, QueryError>>()?;
        Ok(Batch::chunks(n_keys + aggs.len(), rows))
    }
}

/// Hash aggregation: outputs the key columns, then one column per aggregate.
pub struct Aggregate {
    pub input: BoxOp,
    pub keys: Vec<CExpr>,
    pub aggs: Vec<AggSpec>,
    pub out: Option<std::vec::IntoIter<Batch>>,
    pub peak: u64,
}

impl Op for Aggregate {
    fn mem_peak(&self) -> u64 {
        self.peak
    }
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        if let Some(it) = &mut self.out {
            return Ok(it.next());
        }
        let mut grant = cx.budget.empty_grant("Aggregate");
        let mut table = GroupTable::new(self.keys.len(), &self.aggs);
        while let Some(b) = self.input.next(cx)? {
            table.add(&cx.env, &self.keys, &self.aggs, &b)?;
            account(&mut grant, table.bytes, "Aggregate")?;
        }
        self.peak = grant.bytes();
        Ok(emit(
            &mut self.out,
            table.finish(&self.aggs, self.keys.len())?,
        ))
    }
}

/// Properties read as columns, and the filter, keys and aggregates rewritten to them.
pub type DirectColumns = (Vec<Arc<str>>, Option<CExpr>, Vec<CExpr>, Vec<AggSpec>);

/// A label scan (with its filter) feeding an aggregation, run on all cores: each worker
/// scans morsels of node ids into its own group table; the tables are merged. Chosen by
/// the planner when no aggregate is DISTINCT (partial tables would count twice).
pub struct ParallelAggregate {
    /// When every expression reads the node only through properties: those properties,
    /// and the expressions rewritten to read them as columns (no node column is built).
    pub direct: Option<DirectColumns>,
    pub ranges: Vec<ScanRange>,
    pub filter: Option<CExpr>,
    pub keys: Vec<CExpr>,
    pub aggs: Vec<AggSpec>,
    pub out: Option<std::vec::IntoIter<Batch>>,
    pub peak: u64,
}

/// `e` with every `Prop(Slot(0), p)` read from a column of `props` instead; `None` when
/// `e` uses the node in another way.
pub fn rewrite_props(e: &CExpr, props: &mut Vec<Arc<str>>) -> Option<CExpr> {
    let mut rec = |x: &CExpr| rewrite_props(x, props).map(Box::new);
    Some(match e {
        CExpr::Const(v) => CExpr::Const(v.clone()),
        CExpr::Prop(x, name) if matches!(**x, CExpr::Slot(0)) => {
            let i = match props.iter().position(|p| p == name) {
                Some(i) => i,
                None => {
                    props.push(name.clone());
                    props.len() - 1
                }
            };
            CExpr::Slot(i)
        }
        CExpr::Bin(op, a, b) => CExpr::Bin(*op, rec(a)?, rec(b)?),
        CExpr::Not(x) => CExpr::Not(rec(x)?),
        CExpr::Neg(x) => CExpr::Neg(rec(x)?),
        CExpr::IsNull(x, f) => CExpr::IsNull(rec(x)?, *f),
        CExpr::Func(f, args) => CExpr::Func(
            *f,
            args.iter()
                .map(|a| rewrite_props(a, props))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

/// Nodes per unit of parallel work.
const MORSEL_NODES: u64 = 64 * 1024;

impl Op for ParallelAggregate {
    fn mem_peak(&self) -> u64 {
        self.peak
    }
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        use rayon::prelude::*;
        if let Some(it) = &mut self.out {
            return Ok(it.next());
        }
        let mut morsels = Vec::new();
        for r in &self.ranges {
            let mut lo = r.lo;
            while lo < r.hi {
                let hi = (lo + MORSEL_NODES).min(r.hi);
                morsels.push(ScanRange {
                    lo,
                    hi,
                    label: r.label,
                    table_label: r.table_label,
                });
                lo = hi;
            }
        }
        let env = &cx.env;
        let budget = &cx.budget;
        let cancel = cx.cancel;
        let direct = self
            .direct
            .as_ref()
            .filter(|_| self.ranges.iter().all(|r| r.label.is_none()));
        let (keys, aggs, filter) = match direct {
            Some((_, f, k, a)) => (k, a, f),
            None => (&self.keys, &self.aggs, &self.filter),
        };
        let tables: Vec<(GroupTable, u64)> = morsels
            .par_iter()
            .map(|m| -> Result<(GroupTable, u64), QueryError> {
                if cancel.is_some_and(|c| c.load(AtOrd::Relaxed)) {
                    return Err(QueryError::Cancelled);
                }
                let mut t = GroupTable::new(keys.len(), aggs);
                let mut grant = budget.empty_grant("Aggregate");
                let mut n = m.lo;
                while n < m.hi {
                    let end = (n + BATCH_ROWS as u64).min(m.hi);
                    if let Some((props, ..)) = direct {
                        let mut cols = Vec::with_capacity(props.len());
                        for p in props {
                            let mut c = Vec::with_capacity((end - n) as usize);
                            env.g.node_prop_range(n, end, p, &mut c)?;
                            cols.push(c);
                        }
                        let mut b = Batch {
                            cols,
                            len: (end - n) as usize,
                        };
                        n = end;
                        if let Some(f) = filter {
                            b.filter(&holds(&eval_col(env, f, &b)?));
                        }
                        t.add(env, keys, aggs, &b)?;
                        account(&mut grant, t.bytes, "Aggregate")?;
                        continue;
                    }
                    let mut col = Vec::with_capacity((end - n) as usize);
                    for x in n..end {
                        if let Some(l) = m.label {
                            if !env.g.has_label(x, l)? {
                                continue;
                            }
                        }
                        col.push(Value::Node(x));
                    }
                    n = end;
                    let len = col.len();
                    let mut b = Batch {
                        cols: vec![col],
                        len,
                    };
                    if let Some(f) = filter {
                        b.filter(&holds(&eval_col(env, f, &b)?));
                    }
                    t.add(env, keys, aggs, &b)?;
                    account(&mut grant, t.bytes, "Aggregate")?;
                }
                Ok((t, grant.bytes()))
            })
            .collect::<Result<_, _>>()?;
        let mut merged = GroupTable::new(self.keys.len(), &self.aggs);
        let mut grant = cx.budget.empty_grant("Aggregate");
        for (t, bytes) in tables {
            self.peak = self.peak.max(bytes);
            merged.merge(t, &self.aggs)?;
            account(&mut grant, merged.bytes, "Aggregate")?;
        }
        self.peak = self.peak.max(grant.bytes());
        Ok(emit(
            &mut self.out,
            merged.finish(&self.aggs, self.keys.len())?,
        ))
    }
}

/// Drops rows equal (by equivalence) to an earlier row on the first `width` columns.
pub struct Distinct {
    pub input: BoxOp,
    pub width: usize,
    pub seen: HashSet<Vec<Key>>,
    pub seen_nodes: NodeSet,
    /// One column: integer values (and integral floats, which are equivalent to them),
    /// and every other value.
    pub seen_ints: HashSet<i64>,
    pub seen_one: HashSet<Key>,
    pub grant: Option<Grant>,
    pub bytes: u64,
}

impl Distinct {
    pub fn new(input: BoxOp, width: usize) -> Distinct {
        Distinct {
            input,
            width,
            seen: HashSet::new(),
            seen_nodes: NodeSet::default(),
            seen_ints: HashSet::new(),
            seen_one: HashSet::new(),
            grant: None,
            bytes: 0,
        }
    }
}

impl Op for Distinct {
    fn mem_peak(&self) -> u64 {
        self.grant.as_ref().map_or(0, |g| g.bytes())
    }
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let Distinct {
            input,
            width,
            seen,
            seen_nodes,
            seen_ints,
            seen_one,
            grant,
            bytes,
        } = self;
        let width = *width;
        next_kept(input, cx, |cx, b| {
            let n_nodes = cx.env.g.n_nodes();
            let mut keep = vec![false; b.len];
            for (row, k) in keep.iter_mut().enumerate() {
                if width == 1 {
                    // One column: node ids in a node set, integers (and the integral
                    // floats equivalent to them) in a set of i64, anything else as a key.
                    let v = &b.cols[0][row];
                    *k = match v {
                        Value::Node(n) => seen_nodes.insert(*n, n_nodes),
                        Value::Int(i) => seen_ints.insert(*i),
                        Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => {
                            seen_ints.insert(*f as i64)
                        }
                        v => seen_one.insert(Key(v.clone())),
                    };
                    if *k && !matches!(v, Value::Node(_)) {
                        *bytes += 40 + crate::value::heap_bytes(v) as u64;
                    }
                    continue;
                }
                let key: Vec<Key> = (0..width).map(|c| Key(b.cols[c][row].clone())).collect();
                let sz = 32
                    + key
                        .iter()
                        .map(|k| 32 + crate::value::heap_bytes(&k.0) as u64)
                        .sum::<u64>();
                *k = seen.insert(key);
                if *k {
                    *bytes += sz;
                }
            }
            let g = grant.get_or_insert_with(|| cx.budget.empty_grant("Distinct"));
            account(g, *bytes + seen_nodes.bytes(), "Distinct")?;
            Ok(keep)
        })
    }
}

/// Distinct on a set of node columns, without projecting (rows are kept whole). Placed
/// before a projection that depends only on those nodes, it removes duplicates while
/// they are still integers.
pub struct DistinctNodes {
    pub input: BoxOp,
    pub slots: Vec<usize>,
    pub seen: HashSet<Vec<u64>>,
    /// With one slot: the nodes seen, and whether a null row was.
    pub one: NodeSet,
    pub null_seen: bool,
    pub grant: Option<Grant>,
}

impl Op for DistinctNodes {
    fn mem_peak(&self) -> u64 {
        self.grant.as_ref().map_or(0, |g| g.bytes())
    }
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let DistinctNodes {
            input,
            slots,
            seen,
            one,
            null_seen,
            grant,
        } = self;
        next_kept(input, cx, |cx, b| {
            let n_nodes = cx.env.g.n_nodes();
            let mut keep = vec![false; b.len];
            for (row, k) in keep.iter_mut().enumerate() {
                if let [s] = slots[..] {
                    // One node column: a node set (null rows: one of them is kept).
                    *k = match b.cols[s][row] {
                        Value::Node(n) => one.insert(n, n_nodes),
                        _ => !std::mem::replace(null_seen, true),
                    };
                    continue;
                }
                let key: Vec<u64> = slots
                    .iter()
                    .map(|&s| match b.cols[s][row] {
                        Value::Node(n) => n,
                        _ => u64::MAX,
                    })
                    .collect();
                *k = seen.insert(key);
            }
            let g = grant.get_or_insert_with(|| cx.budget.empty_grant("DistinctNodes"));
            let held = (seen.len() * (24 + 8 * slots.len())) as u64 + one.bytes();
            account(g, held, "DistinctNodes")?;
            Ok(keep)
        })
    }
}

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
        rows.sort_by(cmp_rows);
        if let Some(l) = self.limit {
            rows.truncate(l);
        }
        let batches = Batch::chunks(width, rows.into_iter().map(|r| r.1));
        Ok(emit(&mut self.out, batches))
    }
}

/// SKIP and LIMIT; stops pulling once the limit is reached.
pub struct SkipLimit {
    pub input: BoxOp,
    pub skip: usize,
    pub limit: Option<usize>,
    pub seen: usize,
    pub emitted: usize,
}

impl Op for SkipLimit {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        loop {
            if self.limit.is_some_and(|l| self.emitted >= l) {
                return Ok(None);
            }
            let Some(mut b) = self.input.next(cx)? else {
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

#[cfg(test)]
mod tests {
    use super::NodeSet;
    use rand::{Rng, SeedableRng};

    /// The set answers like a hash set through the switch to a bitmap.
    #[test]
    fn node_set_switches_to_a_bitmap_and_agrees() {
        let mut r = rand::rngs::StdRng::seed_from_u64(3);
        let n_nodes = 100_000;
        let mut s = NodeSet::default();
        let mut h = std::collections::HashSet::new();
        for _ in 0..20_000 {
            let x = r.random_range(0..n_nodes);
            assert_eq!(s.insert(x, n_nodes), h.insert(x), "insert {x}");
        }
        assert!(matches!(s, NodeSet::Bits(_)));
        for x in 0..n_nodes {
            assert_eq!(s.contains(x), h.contains(&x));
        }
        assert_eq!(s.bytes(), n_nodes.div_ceil(64) * 8);
    }
}
