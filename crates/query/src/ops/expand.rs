//! Following relationships: one-hop expansion over the CSR and the delta, variable-length
//! expansion, and shortest paths (bidirectional BFS).

use super::*;

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
    /// Every type the graph has at each input batch (a `$(expr)` type, filtered above):
    /// types made after planning (by an earlier row of a MERGE) count.
    pub live_types: bool,
    pub dir: Dir,
    pub labels: Vec<u32>,
    /// Slots of relationships (or relationship lists) this one must differ from.
    pub uniq: Vec<usize>,
    pub cur: Option<Batch>,
    pub row: usize,
    /// Neighbours of row `row` met already: a batch that filled up (to what a LIMIT
    /// wants) in the middle of a node's neighbours ends there, and the next call goes
    /// on past them (a node with 7,184 in-neighbours gave them all for `LIMIT 1`).
    pub skip: usize,
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

/// A bitmap over node ids `0..n_nodes` with `ids` set (those past it left out).
fn bitmap_of(ids: impl Iterator<Item = u64>, n_nodes: u64) -> Vec<u64> {
    let mut b = vec![0u64; n_nodes.div_ceil(64) as usize];
    for x in ids {
        if let Some(w) = b.get_mut((x / 64) as usize) {
            *w |= 1 << (x % 64);
        }
    }
    b
}

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
                    *self = NodeSet::Bits(bitmap_of(h.iter().copied(), n_nodes));
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
                        if self.live_types {
                            self.types = (0..g.n_rel_types() as u32).collect();
                        }
                    }
                }
            }
            cx.check_cancel()?;
            let cur = self.cur.as_ref().expect("set above");
            let extra = usize::from(self.into.is_none()) + usize::from(self.emit_rel);
            let mut out = Batch::empty(cur.width() + extra);
            let mut ext: Vec<Value> = Vec::with_capacity(2);
            let limit = cx.batch_target();
            while out.len < limit && self.row < cur.len {
                let row = self.row;
                let Value::Node(node) = cur.cols[self.from][row] else {
                    self.row += 1;
                    continue;
                };
                let target = match self.into {
                    Some(s) => match cur.cols[s][row] {
                        Value::Node(t) => Some(t),
                        _ => {
                            self.row += 1;
                            continue;
                        }
                    },
                    None => None,
                };
                // Neighbours are counted in the order they come (deterministic), so a
                // row resumed skips those it handled.
                let (resume, mut met, mut full) = (self.skip, 0usize, false);
                for &ty in &self.types {
                    for &d in dirs(self.dir) {
                        // Expand-into walks from the endpoint with the smaller degree.
                        let (start, want, d) = match target {
                            Some(t) if g.far_end_smaller(ty, node, t, d)? => {
                                (t, Some(node), flip(d))
                            }
                            _ => (node, target, d),
                        };
                        let both_in = self.dir == Dir::Both && d == Direction::In;
                        let mut err = None;
                        g.for_each_neighbour(ty, start, d, |nb, eid| {
                            if err.is_some() || full {
                                return;
                            }
                            met += 1;
                            if met <= resume {
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
                            if both_in && nb64 == start {
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
                            full = out.len >= limit;
                        })?;
                        if let Some(e) = err {
                            return Err(e);
                        }
                    }
                }
                if full {
                    self.skip = met;
                } else {
                    self.skip = 0;
                    self.row += 1;
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
            let target = cx.batch_target();
            while out.len < target {
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
    /// Predicates every node (every relationship) of the path must meet, over slot 0:
    /// `all(x IN nodes(p) WHERE ...)` (`false`), or `none(...)` (`true`: negated). The
    /// search admits only what meets them, so the path it finds is the shortest of those
    /// that do (Neo4j's shortest path planning), not the shortest one dropped after.
    pub node_ok: Vec<(CExpr, bool)>,
    pub rel_ok: Vec<(CExpr, bool)>,
    /// Memgraph's filter lambda over each step: its relationship (slot 0) and the node
    /// it reaches (slot 1).
    pub step_ok: Option<CExpr>,
    /// Memgraph's weight lambda over each step (slots as `step_ok`'s) when it differs
    /// between steps: Dijkstra's search (`weighted.rs`), which appends the path's
    /// total weight after the path.
    pub weight: Option<CExpr>,
}

/// A step of a shortest-path search: (from, to, relationship, whether the
/// relationship's edge id is still the in CSR's: see `Graph::step_rels_lazy`).
pub(super) type Step = (u64, u64, RelRef, bool);

/// Memgraph's lambda `(e, n | expr)` over each step: its relationship (slot 0) and the
/// node it reaches (slot 1; `backward`: a search from the far end, whose step reaches
/// `u` in the path), evaluated a batch at a time.
pub(super) fn step_lambda(
    cx: &Cx,
    e: &CExpr,
    steps: &[Step],
    backward: bool,
) -> Result<Vec<Value>, QueryError> {
    let mut out = Vec::with_capacity(steps.len());
    for part in steps.chunks(BATCH_ROWS) {
        let b = Batch {
            len: part.len(),
            cols: vec![
                part.iter().map(|&(_, _, r, _)| Value::Rel(r)).collect(),
                part.iter()
                    .map(|&(u, v, ..)| Value::Node(if backward { u } else { v }))
                    .collect(),
            ],
        };
        out.extend(crate::expr::eval_col(&cx.env, e, &b)?);
    }
    Ok(out)
}

/// Whether each value meets every predicate of `preds` (evaluated a batch at a time
/// over a one-column batch of `vals`; null is not met).
fn meets(cx: &Cx, preds: &[(CExpr, bool)], vals: Vec<Value>) -> Result<Vec<bool>, QueryError> {
    let mut ok = vec![true; vals.len()];
    if preds.is_empty() || vals.is_empty() {
        return Ok(ok);
    }
    let b = Batch {
        len: vals.len(),
        cols: vec![vals],
    };
    for (e, negate) in preds {
        for (o, v) in ok.iter_mut().zip(crate::expr::eval_col(&cx.env, e, &b)?) {
            *o &= v == Value::Bool(!negate);
        }
    }
    Ok(ok)
}

/// The nodes a search has judged against its path predicates, and which passed: a hash
/// map while few, then two bitmaps over node ids (as [`Parents::bits`]: every
/// relationship a filtered search meets asks). One map, not two [`NodeSet`]s: those
/// cost a second hash insert for each node that passes, and measured 10-25% slower.
pub(super) struct Verdicts {
    map: HashMap<u64, bool>,
    judged: Vec<u64>,
    passed: Vec<u64>,
    n_nodes: u64,
}

impl Verdicts {
    pub(super) fn new(n_nodes: u64) -> Verdicts {
        Verdicts {
            map: HashMap::with_capacity(1024),
            judged: Vec::new(),
            passed: Vec::new(),
            n_nodes,
        }
    }

    /// Enters `n` as judged and refused unless it was judged before: whether it was new.
    #[inline]
    fn enter(&mut self, n: u64) -> bool {
        let (w, m) = ((n / 64) as usize, 1u64 << (n % 64));
        if let Some(x) = self.judged.get_mut(w) {
            let new = *x & m == 0;
            *x |= m;
            return new;
        }
        match self.map.entry(n) {
            hashbrown::hash_map::Entry::Occupied(_) => false,
            hashbrown::hash_map::Entry::Vacant(e) => {
                e.insert(false);
                if self.map.len() >= PARENTS_BITS_AFTER
                    && self.judged.is_empty()
                    && self.n_nodes.div_ceil(8) <= NODE_BITMAP_MAX_BYTES
                {
                    self.judged = bitmap_of(self.map.keys().copied(), self.n_nodes);
                    let passed = self.map.iter().filter(|e| *e.1).map(|e| *e.0);
                    self.passed = bitmap_of(passed, self.n_nodes);
                }
                true
            }
        }
    }

    /// Marks `n` (entered) as passed.
    #[inline]
    fn pass(&mut self, n: u64) {
        match self.passed.get_mut((n / 64) as usize) {
            Some(x) => *x |= 1 << (n % 64),
            None => {
                self.map.insert(n, true);
            }
        }
    }

    #[inline]
    fn passed(&self, n: u64) -> bool {
        match self.passed.get((n / 64) as usize) {
            Some(x) => x >> (n % 64) & 1 != 0,
            None => self.map.get(&n).copied().unwrap_or(false),
        }
    }

    pub(super) fn bytes(&self) -> u64 {
        (self.map.capacity() * 17 + (self.judged.capacity() + self.passed.capacity()) * 8) as u64
    }
}

impl ShortestPath {
    /// Keeps the steps `(v, r)` of `nbrs` whose relationship and far node meet the
    /// path predicates (`verdicts` remembers the nodes judged so far).
    /// (`backward`: the steps of a search from the far end, whose relationship leads
    /// from `v` to `u` in the path: the node a step reaches, which the filter lambda
    /// judges, is then `u`.)
    pub(super) fn admit(
        &self,
        cx: &Cx,
        steps: &mut Vec<Step>,
        verdicts: &mut Verdicts,
        backward: bool,
    ) -> Result<(), QueryError> {
        self.admit_rels(cx, steps, backward)?;
        self.admit_nodes(cx, steps, verdicts)
    }

    /// Keeps the steps of `steps` whose far node meets the node predicates.
    fn admit_nodes(
        &self,
        cx: &Cx,
        steps: &mut Vec<Step>,
        verdicts: &mut Verdicts,
    ) -> Result<(), QueryError> {
        if !self.node_ok.is_empty() {
            self.judge(cx, steps.iter().map(|s| s.1), verdicts)?;
            steps.retain(|(_, v, ..)| verdicts.passed(*v));
        }
        Ok(())
    }

    /// Keeps the steps of `steps` whose relationship meets the relationship
    /// predicates and the filter lambda (as [`ShortestPath::admit`]'s).
    fn admit_rels(&self, cx: &Cx, steps: &mut Vec<Step>, backward: bool) -> Result<(), QueryError> {
        // (Predicates over relationships see canonical ones: `level` reads them so.)
        if !self.rel_ok.is_empty() {
            let mut ok = Vec::with_capacity(steps.len());
            for part in steps.chunks(BATCH_ROWS) {
                ok.extend(meets(
                    cx,
                    &self.rel_ok,
                    part.iter().map(|&(_, _, r, _)| Value::Rel(r)).collect(),
                )?);
            }
            let mut i = 0;
            steps.retain(|_| {
                i += 1;
                ok[i - 1]
            });
        }
        if let Some(e) = &self.step_ok {
            let ok: Vec<bool> = step_lambda(cx, e, steps, backward)?
                .into_iter()
                .map(|v| v == Value::Bool(true))
                .collect();
            let mut i = 0;
            steps.retain(|_| {
                i += 1;
                ok[i - 1]
            });
        }
        Ok(())
    }

    /// Judges the nodes of `nodes` not judged before against the node predicates,
    /// each once, a batch at a time.
    fn judge(
        &self,
        cx: &Cx,
        nodes: impl Iterator<Item = u64>,
        verdicts: &mut Verdicts,
    ) -> Result<(), QueryError> {
        // Entered as refused until judged.
        let fresh: Vec<u64> = nodes.filter(|&v| verdicts.enter(v)).collect();
        // (Not sorted into row order: the column reads hint their rows ahead, and
        // the sort cost more than it saved, 7% of a filtered search.)
        for part in fresh.chunks(BATCH_ROWS) {
            let ok = meets(
                cx,
                &self.node_ok,
                part.iter().map(|&v| Value::Node(v)).collect(),
            )?;
            for (&v, ok) in part.iter().zip(ok) {
                if ok {
                    verdicts.pass(v);
                }
            }
        }
        Ok(())
    }

    /// The nodes of `nodes` that meet the node predicates (judged unless judged
    /// before): `nodes` itself when there are none.
    fn passing<'a>(
        &self,
        cx: &Cx,
        nodes: &'a [u64],
        verdicts: &mut Verdicts,
    ) -> Result<std::borrow::Cow<'a, [u64]>, QueryError> {
        if self.node_ok.is_empty() {
            return Ok(std::borrow::Cow::Borrowed(nodes));
        }
        self.judge(cx, nodes.iter().copied(), verdicts)?;
        Ok(nodes
            .iter()
            .copied()
            .filter(|&v| verdicts.passed(v))
            .collect())
    }

    /// Whether node `n` meets the node predicates (judged unless judged before).
    fn passes(&self, cx: &Cx, n: u64, verdicts: &mut Verdicts) -> Result<bool, QueryError> {
        if self.node_ok.is_empty() {
            return Ok(true);
        }
        self.judge(cx, std::iter::once(n), verdicts)?;
        Ok(verdicts.passed(n))
    }

    /// The steps from the nodes of `front` (`dir`, the search's types) to nodes not
    /// `seen` whose relationships meet the path predicates, in order: (from, to,
    /// relationship). The nodes reached are not judged here (a bidirectional search
    /// judges a node when it expands it or meets it there, not when it reaches it;
    /// a single-source one with [`ShortestPath::admit_nodes`]).
    fn level(
        &self,
        cx: &Cx,
        front: &[u64],
        dir: Dir,
        backward: bool,
        seen: impl Fn(u64) -> bool,
    ) -> Result<Vec<Step>, QueryError> {
        let mut steps = Vec::new();
        // Relationships are made canonical only on the path found, unless a predicate
        // reads each one.
        let lazy = self.rel_ok.is_empty() && self.step_ok.is_none();
        let mut nbrs = Vec::new();
        let mut eager = Vec::new();
        for (i, &u) in front.iter().enumerate() {
            prefetch_ahead(cx.env.g, &self.types, dir, front, i);
            nbrs.clear();
            if lazy {
                cx.env.g.step_rels_lazy(&self.types, dir, u, &mut nbrs)?;
            } else {
                eager.clear();
                cx.env.g.step_rels(&self.types, dir, u, &mut eager)?;
                nbrs.extend(eager.iter().map(|&(v, r)| (v, r, false)));
            }
            steps.extend(
                nbrs.iter()
                    .filter(|&&(v, ..)| !seen(v))
                    .map(|&(v, r, raw)| (u, v, r, raw)),
            );
        }
        self.admit_rels(cx, &mut steps, backward)?;
        Ok(steps)
    }

    /// Whether node `n` meets the node predicates (a path's ends must too).
    pub(super) fn node_meets(&self, cx: &Cx, n: u64) -> Result<bool, QueryError> {
        Ok(meets(cx, &self.node_ok, vec![Value::Node(n)])?[0])
    }
}

/// Before expanding `front[i]`: hints the offsets of the node [`PREFETCH_OFFSETS`]
/// places ahead, and the entries of the one [`PREFETCH_TARGETS`] ahead (whose offsets
/// were hinted earlier). A front's nodes lie anywhere in the adjacency, a cache miss or
/// two each; hinted, they overlap.
#[inline]
fn prefetch_ahead(g: &crate::graph::Graph, types: &[u32], dir: Dir, front: &[u64], i: usize) {
    if let Some(&w) = front.get(i + PREFETCH_OFFSETS) {
        g.prefetch_steps(types, dir, w, false);
    }
    if let Some(&w) = front.get(i + PREFETCH_TARGETS) {
        g.prefetch_steps(types, dir, w, true);
    }
}

const PREFETCH_OFFSETS: usize = 8;
const PREFETCH_TARGETS: usize = 4;

/// The opposite direction of a pattern step.
pub fn reverse_dir(d: Dir) -> Dir {
    match d {
        Dir::Out => Dir::In,
        Dir::In => Dir::Out,
        Dir::Both => Dir::Both,
    }
}

/// A zeroed bitmap over node ids lent by the thread's pool for one search, and the
/// words it set: given back (those words cleared) when dropped. A search that marks
/// the nodes it reaches in it from its first step costs a bit test a node, where a
/// fresh bitmap costs zeroing 200 KiB a side on social 1 (as much as 2,000 hash
/// probes), and a hash map a probe and its growth (a fifth of a search).
///
/// The side's lists of steps and nodes reached come from the pool too (growing them
/// from empty each search copied them some five times: 8% of a search).
struct Marks {
    bits: Vec<u64>,
    touched: Vec<u32>,
    steps: Vec<(u64, RelRef, bool)>,
    order: Vec<u64>,
    ups: Vec<u64>,
}

/// The largest bitmap a thread keeps between searches (32M nodes), and how many (one
/// search's two sides): what a thread holds outside any query's grant is at most
/// 2 x (4 MiB + 3.5 MiB of lists), and goes when the thread does (a server's idle
/// workers end after seconds).
const MARKS_POOLED_BYTES: u64 = 4 << 20;
const MARKS_POOLED: usize = 2;
/// Lists of steps longer than this (a search that reached 64K nodes on a side) are
/// not kept (2.5 MiB of steps).
const MARKS_POOLED_STEPS: usize = 1 << 16;

/// A pooled bitmap (all zero) with its side's lists (empty).
type Pooled = (Vec<u64>, Vec<(u64, RelRef, bool)>, Vec<u64>, Vec<u64>);

// One pool a thread, not one for the process: a bitmap a thread used last is in its
// core's cache. (A process-wide pool behind a mutex, tried, took 228-246 µs of server
// CPU a search at 4 clients against 190-198, two alternating rounds.)
thread_local! {
    static MARKS_POOL: std::cell::RefCell<Vec<Pooled>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Marks {
    /// A zeroed bitmap over `n_nodes` node ids, if a graph that size is pooled.
    fn lend(n_nodes: u64) -> Option<Marks> {
        if n_nodes.div_ceil(8) > MARKS_POOLED_BYTES {
            return None;
        }
        let words = n_nodes.div_ceil(64) as usize;
        let (mut bits, mut steps, mut order, mut ups) = MARKS_POOL
            .try_with(|p| p.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_default();
        // (Pooled bitmaps are all zero: a larger graph's grows with zeros.)
        bits.resize(words, 0);
        steps.reserve(1024);
        order.reserve(1024);
        ups.reserve(1024);
        Some(Marks {
            bits,
            touched: Vec::with_capacity(1024),
            steps,
            order,
            ups,
        })
    }

    /// Sets `n`'s bit: whether it was clear.
    #[inline]
    fn set(&mut self, n: u64) -> bool {
        let w = (n / 64) as usize;
        let m = 1u64 << (n % 64);
        if w >= self.bits.len() {
            // (A node made after the bitmap was lent.)
            self.bits.resize(w + 1, 0);
        }
        let x = &mut self.bits[w];
        if *x & m != 0 {
            return false;
        }
        if *x == 0 {
            self.touched.push(w as u32);
        }
        *x |= m;
        true
    }

    #[inline]
    fn contains(&self, n: u64) -> bool {
        self.bits
            .get((n / 64) as usize)
            .is_some_and(|w| w >> (n % 64) & 1 != 0)
    }

    fn bytes(&self) -> u64 {
        (self.bits.capacity() * 8 + self.touched.capacity() * 4) as u64
    }
}

impl Drop for Marks {
    fn drop(&mut self) {
        for &w in &self.touched {
            self.bits[w as usize] = 0;
        }
        if self.steps.capacity().max(self.order.capacity()) > MARKS_POOLED_STEPS
            || self.bits.len() as u64 * 8 > MARKS_POOLED_BYTES
        {
            return;
        }
        self.steps.clear();
        self.order.clear();
        self.ups.clear();
        let kept = (
            std::mem::take(&mut self.bits),
            std::mem::take(&mut self.steps),
            std::mem::take(&mut self.order),
            std::mem::take(&mut self.ups),
        );
        let _ = MARKS_POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < MARKS_POOLED {
                p.push(kept);
            }
        });
    }
}

/// One side of a bidirectional search: each node reached, with the step that reached
/// it first (none for the root), and for allShortestPaths the other steps of the same
/// level (one allocation a node, not a list each, was 15% of a search's time). The map
/// holds an index into `steps`, not the step: 16-byte entries rather than 48, which a
/// search probes for every relationship it meets and rehashes as it grows.
#[derive(Default)]
struct Parents {
    first: HashMap<u64, u32>,
    steps: Vec<(u64, RelRef, bool)>,
    more: HashMap<u64, Vec<(u64, RelRef, bool)>>,
    /// The nodes of `first` as a bitmap over node ids, once they are many
    /// ([`PARENTS_BITS_AFTER`]): a search tests every relationship's far node against
    /// both sides, and most were reached already; a bit in a 200 KiB bitmap (social 1)
    /// is a cache hit where the hash map's probe mostly missed.
    bits: Vec<u64>,
    /// Node ids the bitmap covers (the graph's when it was made).
    n_nodes: u64,
    /// In a one-path search, where the thread lends a bitmap: the nodes reached,
    /// marked from the first step, with `order[i]` the node `steps[i]` reached, and
    /// no map (the path found is walked back through `order`).
    marks: Option<Marks>,
    order: Vec<u64>,
    /// With marks, in a search that keeps no relationships ([`Parents::reach_to`]):
    /// `ups[i]` is the node that reached `order[i]`.
    ups: Vec<u64>,
}

impl Drop for Parents {
    fn drop(&mut self) {
        // The pooled lists go back with the bitmap.
        if let Some(m) = &mut self.marks {
            m.steps = std::mem::take(&mut self.steps);
            m.order = std::mem::take(&mut self.order);
            m.ups = std::mem::take(&mut self.ups);
        }
    }
}

/// [`Parents::first`]'s entry for a root.
const ROOT: u32 = u32::MAX;

/// Nodes a side reaches before its bitmap is made (zeroing it costs about as much as
/// this many probes on social 1's 1.6M nodes).
const PARENTS_BITS_AFTER: usize = 2048;

impl Parents {
    /// A side's parents; `one_path`: a search for one path, which takes a bitmap
    /// from the thread's pool if the graph's size allows.
    fn new(n_nodes: u64, one_path: bool) -> Parents {
        let mut p = Parents::default();
        p.n_nodes = n_nodes;
        p.marks = one_path.then(|| Marks::lend(n_nodes)).flatten();
        // Room for a typical search's nodes up front (growing from empty rehashed
        // every entry some ten times: 11% of a search).
        if let Some(m) = &mut p.marks {
            p.steps = std::mem::take(&mut m.steps);
            p.order = std::mem::take(&mut m.order);
            p.ups = std::mem::take(&mut m.ups);
        } else {
            p.first.reserve(1024);
            p.steps.reserve(1024);
        }
        p
    }

    #[inline]
    fn contains(&self, n: u64) -> bool {
        if let Some(m) = &self.marks {
            return m.contains(n);
        }
        if let Some(w) = self.bits.get((n / 64) as usize) {
            return w >> (n % 64) & 1 != 0;
        }
        self.first.contains_key(&n)
    }

    /// Enters the root `n`.
    fn root(&mut self, n: u64) {
        match &mut self.marks {
            Some(m) => {
                m.set(n);
            }
            None => {
                self.first.insert(n, ROOT);
            }
        }
    }

    /// Enters `v`, reached from `u` over `r`, unless it was reached before: whether it
    /// was new.
    #[inline]
    fn reach(&mut self, u: u64, v: u64, r: RelRef, raw: bool) -> Result<bool, QueryError> {
        if let Some(m) = &mut self.marks {
            if !m.set(v) {
                return Ok(false);
            }
            self.steps.push((u, r, raw));
            self.order.push(v);
            return Ok(true);
        }
        let i = u32::try_from(self.steps.len())
            .ok()
            .filter(|&i| i != ROOT)
            .ok_or_else(|| {
                QueryError::Unsupported("a shortest path search past 4 billion nodes".into())
            })?;
        if let Some(w) = self.bits.get_mut((v / 64) as usize) {
            let m = 1u64 << (v % 64);
            if *w & m != 0 {
                return Ok(false);
            }
            *w |= m;
            self.first.insert(v, i);
        } else {
            // (One probe: most steps reach a node not reached before.)
            match self.first.entry(v) {
                hashbrown::hash_map::Entry::Occupied(_) => return Ok(false),
                hashbrown::hash_map::Entry::Vacant(e) => {
                    e.insert(i);
                }
            }
        }
        self.steps.push((u, r, raw));
        if self.bits.is_empty()
            && self.first.len() >= PARENTS_BITS_AFTER
            && self.n_nodes.div_ceil(8) <= NODE_BITMAP_MAX_BYTES
        {
            self.bits = bitmap_of(self.first.keys().copied(), self.n_nodes);
        }
        Ok(true)
    }

    /// Enters `v`, reached from `u`, unless it was reached before: whether it was
    /// new. Only with marks, in a search that finds its path's relationships after.
    #[inline]
    fn reach_to(&mut self, u: u64, v: u64) -> bool {
        let Some(m) = &mut self.marks else {
            return false;
        };
        if !m.set(v) {
            return false;
        }
        self.order.push(v);
        self.ups.push(u);
        true
    }

    /// The nodes from `m` back to the root as [`Parents::reach_to`] reached them,
    /// `m` first. (A node's parent came before it: each step scans the nodes reached
    /// before the last one found.)
    fn chain(&self, m: u64) -> Vec<u64> {
        let mut out = vec![m];
        let (mut cur, mut end) = (m, self.order.len());
        while let Some(i) = self.order[..end].iter().rposition(|&x| x == cur) {
            cur = self.ups[i];
            out.push(cur);
            end = i;
        }
        out
    }

    /// The step that first reached `n` (none for the root or a node not reached).
    fn step(&self, n: u64) -> Option<(u64, RelRef, bool)> {
        if self.marks.is_some() {
            // (Walking back one path: a scan a step, from the last reached.)
            let i = self.order.iter().rposition(|&x| x == n)?;
            return self.steps.get(i).copied();
        }
        match self.first.get(&n) {
            Some(&i) if i != ROOT => self.steps.get(i as usize).copied(),
            _ => None,
        }
    }

    /// Bytes held, for the memory grant.
    fn bytes(&self, front: usize) -> u64 {
        (self.first.capacity() * 17
            + self.steps.capacity() * std::mem::size_of::<(u64, RelRef, bool)>()
            + self.more.len() * 64
            + self.bits.capacity() * 8
            + self.marks.as_ref().map_or(0, Marks::bytes) as usize
            + (self.order.capacity() + self.ups.capacity()) * 8
            + front * 8) as u64
    }
}

impl ShortestPath {
    /// Bidirectional BFS; all shortest paths when `self.all`.
    fn between(
        &self,
        cx: &Cx,
        grant: &mut Grant,
        s: u64,
        t: u64,
    ) -> Result<Vec<PathVal>, QueryError> {
        if !self.node_meets(cx, s)? || !self.node_meets(cx, t)? {
            return Ok(vec![]);
        }
        // (Room for a typical search's nodes up front, as for its parents.)
        let mut verdicts = Verdicts::new(cx.env.g.n_nodes());
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
        let n_nodes = cx.env.g.n_nodes();
        let mut fwd = Parents::new(n_nodes, !self.all);
        let mut bwd = Parents::new(n_nodes, !self.all);
        fwd.root(s);
        bwd.root(t);
        // The fronts, and the list a level fills (the front before last's, reused),
        // with room for a typical search's levels.
        let (mut ff, mut bf) = (Vec::with_capacity(1024), Vec::with_capacity(1024));
        ff.push(s);
        bf.push(t);
        let mut spare: Vec<u64> = Vec::with_capacity(4096);
        let g = &cx.env.g;
        let mut depth = 0u32;
        let mut meet: Vec<u64> = Vec::new();
        // With no predicate over relationships or steps, a one-path search tests each
        // step as the adjacency gives it, with no list.
        let stepwise = !self.all && self.rel_ok.is_empty() && self.step_ok.is_none();
        // Stepwise with both sides in pooled bitmaps, a side keeps only which node
        // reached which (no edge id read: the in CSR keeps its ids in a second array).
        let targets_only = stepwise && fwd.marks.is_some() && bwd.marks.is_some();
        // Node predicates are judged on the nodes a side expands (a few at a time, so
        // that those judged are about as many as those expanded) and on meets, not on
        // every node reached: a search's last level, its largest, goes unjudged save its
        // meets. A node that fails may be reached; it is never expanded nor met.
        verdicts.enter(s);
        verdicts.pass(s);
        verdicts.enter(t);
        verdicts.pass(t);
        while depth < self.max && !ff.is_empty() && !bf.is_empty() {
            cx.check_cancel()?;
            // Grow the side with the smaller front. (The side whose front's degrees sum
            // least, tried, took twice as long on social 1: a search stops at its first
            // meet, which comes soonest from the small front into the large side.)
            let forward = ff.len() <= bf.len();
            let (front, seen, other, dir) = if forward {
                (&mut ff, &mut fwd, &bwd, self.dir)
            } else {
                (&mut bf, &mut bwd, &fwd, reverse_dir(self.dir))
            };
            let mut next = std::mem::take(&mut spare);
            next.clear();
            if !self.all {
                // One path: stop at the first node the other side has reached (and that
                // passes). Every meet of this level is as short as any (no meet so far:
                // the distance is past both depths summed), and the last level is the
                // largest.
                let chunk = if self.node_ok.is_empty() {
                    front.len().max(1)
                } else {
                    64
                };
                'front: for part in front.chunks(chunk) {
                    let part = self.passing(cx, part, &mut verdicts)?;
                    if stepwise {
                        for (i, &u) in part.iter().enumerate() {
                            prefetch_ahead(g, &self.types, dir, &part, i);
                            let mut failed = None;
                            let mut visit =
                                |seen: &mut Parents, v: u64, r: Option<(RelRef, bool)>| {
                                    if !meet.is_empty() || failed.is_some() {
                                        return;
                                    }
                                    let new = match r {
                                        Some((r, raw)) => seen.reach(u, v, r, raw),
                                        None => Ok(seen.reach_to(u, v)),
                                    };
                                    match new {
                                        Ok(true) => {
                                            next.push(v);
                                            if other.contains(v) {
                                                match self.passes(cx, v, &mut verdicts) {
                                                    Ok(true) => meet.push(v),
                                                    Ok(false) => {}
                                                    Err(e) => failed = Some(e),
                                                }
                                            }
                                        }
                                        Ok(false) => {}
                                        Err(e) => failed = Some(e),
                                    }
                                };
                            if targets_only {
                                g.for_each_step_target(&self.types, dir, u, |v| {
                                    visit(seen, v, None)
                                })?;
                            } else {
                                g.for_each_step_lazy(&self.types, dir, u, |v, r, raw| {
                                    visit(seen, v, Some((r, raw)))
                                })?;
                            }
                            if let Some(e) = failed {
                                return Err(e);
                            }
                            if !meet.is_empty() {
                                break 'front;
                            }
                        }
                        continue;
                    }
                    let steps = self.level(cx, &part, dir, !forward, |v| seen.contains(v))?;
                    for &(u, v, r, raw) in &steps {
                        if seen.reach(u, v, r, raw)? {
                            next.push(v);
                            if other.contains(v) && self.passes(cx, v, &mut verdicts)? {
                                meet.push(v);
                                break 'front;
                            }
                        }
                    }
                }
            } else {
                let part = self.passing(cx, front, &mut verdicts)?;
                let steps = self.level(cx, &part, dir, !forward, |v| seen.contains(v))?;
                // The steps lead only to nodes not reached before this level, so a node
                // already in `seen` here was reached at this level.
                seen.first.reserve(steps.len());
                for (u, v, r, raw) in steps {
                    if seen.reach(u, v, r, raw)? {
                        next.push(v);
                    } else {
                        seen.more.entry(v).or_default().push((u, r, raw));
                    }
                }
                for &v in &next {
                    if other.contains(v) && self.passes(cx, v, &mut verdicts)? {
                        meet.push(v);
                    }
                }
            }
            depth += 1;
            account(
                grant,
                seen.bytes(next.len()) + other.bytes(0) + verdicts.bytes(),
                "ShortestPath",
            )?;
            spare = std::mem::replace(front, next);
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
        if targets_only {
            // The path's nodes from both sides' chains; each step's relationship
            // found in its node's adjacency (any one: the steps had no predicate).
            let mut nodes = fwd.chain(meet[0]);
            nodes.reverse();
            nodes.extend(bwd.chain(meet[0]).into_iter().skip(1));
            let mut rels = Vec::with_capacity(nodes.len());
            for w in nodes.windows(2) {
                let r = g.step_to(&self.types, self.dir, w[0], w[1])?;
                rels.push(r.ok_or_else(|| {
                    QueryError::EntityNotFound(format!(
                        "the relationship from node {} to node {} of a shortest path",
                        w[0], w[1]
                    ))
                })?);
            }
            return Ok(vec![PathVal { nodes, rels }]);
        }
        let mut out = Vec::new();
        for m in meet {
            let left = paths_to_root(&fwd, m, self.all);
            let right = paths_to_root(&bwd, m, self.all);
            for l in &left {
                for r in &right {
                    // l: m .. s (reversed), r: m .. t.
                    let mut nodes: Vec<u64> = l.0.iter().rev().copied().collect();
                    let mut rels = Vec::with_capacity(l.1.len() + r.1.len());
                    for &(x, raw) in l.1.iter().rev().chain(&r.1) {
                        rels.push(cx.env.g.settle_rel(x, raw)?);
                    }
                    nodes.extend(r.0.iter().skip(1));
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
#[allow(clippy::type_complexity)]
fn paths_to_root(parents: &Parents, m: u64, all: bool) -> Vec<(Vec<u64>, Vec<(RelRef, bool)>)> {
    let mut done = Vec::new();
    let mut work = vec![(vec![m], Vec::new())];
    while let Some((nodes, rels)) = work.pop() {
        let last = *nodes.last().expect("non-empty");
        let Some(first) = parents.step(last) else {
            done.push((nodes, rels));
            continue;
        };
        let more = match parents.more.get(&last) {
            Some(v) if all => &v[..],
            _ => &[],
        };
        for &(p, r, raw) in std::iter::once(&first).chain(more) {
            let mut n2 = nodes.clone();
            let mut r2: Vec<(RelRef, bool)> = rels.clone();
            n2.push(p);
            r2.push((r, raw));
            work.push((n2, r2));
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
            let extra = 1 + usize::from(self.to.is_none()) + usize::from(self.weight.is_some());
            let mut out = Batch::empty(b.width() + extra);
            for row in 0..b.len {
                let Value::Node(s) = b.cols[self.from][row] else {
                    continue;
                };
                if let Some(w) = &self.weight {
                    let t = match self.to.map(|ts| &b.cols[ts][row]) {
                        None => None,
                        Some(Value::Node(t)) => Some(*t),
                        Some(_) => continue,
                    };
                    self.weighted(cx, w, &mut grant, &b, row, s, t, &mut out)?;
                    continue;
                }
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
        let mut parent: HashMap<u64, (u64, RelRef, bool)> = HashMap::new();
        let mut seen: HashSet<u64> = HashSet::new();
        seen.insert(s);
        let mut front = vec![s];
        let mut depth = 0;
        let emit = |node: u64,
                    parent: &HashMap<u64, (u64, RelRef, bool)>,
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
            while let Some(&(p, r, raw)) = parent.get(&at) {
                nodes.push(p);
                rels.push(cx.env.g.settle_rel(r, raw)?);
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
        if !self.node_meets(cx, s)? {
            return Ok(());
        }
        // (Room for a typical search's nodes up front, as for its parents.)
        let mut verdicts = Verdicts::new(cx.env.g.n_nodes());
        if self.min == 0 {
            emit(s, &parent, out)?;
        }
        while depth < self.max && !front.is_empty() {
            cx.check_cancel()?;
            let mut next = Vec::new();
            let mut steps = self.level(cx, &front, self.dir, false, |v| seen.contains(&v))?;
            self.admit_nodes(cx, &mut steps, &mut verdicts)?;
            for (u, v, r, raw) in steps {
                if seen.insert(v) {
                    parent.insert(v, (u, r, raw));
                    next.push(v);
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

pub(super) fn rel_used_any(rels: &[RelRef], b: &Batch, row: usize, uniq: &[usize]) -> bool {
    rels.iter().any(|r| rel_used(r, b, row, uniq))
}

/// The next non-empty batch of `input` after dropping the rows `keep` marks false: the
/// loop of every operator that removes rows (filters, distinct).
pub(super) fn next_kept(
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
