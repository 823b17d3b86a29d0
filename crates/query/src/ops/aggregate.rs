//! Grouping and aggregation (hash and dense group tables, the parallel scan-aggregate),
//! DISTINCT and distinct-on-node-ids.

use super::*;
use crate::graph::{SegRead, ValMap};
use crate::Graph;
use quiver_cypher::ast::BinOp;

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
pub(crate) enum AggState {
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
        for (key, g) in other.groups {
            self.fold_group(key.into_iter().map(|k| k.0).collect(), g.states, aggs)?;
        }
        self.bytes += other.bytes;
        Ok(())
    }

    /// Folds one group's states (from other rows) into the group of `key`.
    pub(crate) fn fold_group(
        &mut self,
        key: Vec<Value>,
        states: Vec<AggState>,
        aggs: &[AggSpec],
    ) -> Result<(), QueryError> {
        let gi = if key.is_empty() {
            0
        } else {
            let cols: Vec<Vec<Value>> = key.into_iter().map(|k| vec![k]).collect();
            self.group_of(&cols, 0, aggs)
        };
        let mine = &mut self.groups[gi].1;
        for (i, (s, o)) in mine.states.iter_mut().zip(states).enumerate() {
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
        let input = &mut self.input;
        cx.full(|cx| -> Result<(), QueryError> {
            while let Some(b) = input.next(cx)? {
                table.add(&cx.env, &self.keys, &self.aggs, &b)?;
                account(&mut grant, table.bytes, "Aggregate")?;
            }
            Ok(())
        })?;
        self.peak = grant.bytes();
        Ok(emit(
            &mut self.out,
            table.finish(&self.aggs, self.keys.len())?,
        ))
    }
}

/// Properties read as columns, and the filter, keys and aggregates rewritten to them.
pub type DirectColumns = (Vec<PropColumn>, Option<CExpr>, Vec<CExpr>, Vec<AggSpec>);

/// A column the direct path reads for each node.
#[derive(Debug, Clone, PartialEq)]
pub enum PropColumn {
    /// The property's values.
    Value(Arc<str>),
    /// `property op 'pattern'`, a string test run on the stored bytes
    /// ([`crate::expr::StringTest`]): no string value is made.
    Test(Arc<str>, BinOp, Arc<str>),
    /// `true` where the property is present, null where not: all that `IS NULL` and
    /// `count(property)` need.
    Present(Arc<str>),
}

impl PropColumn {
    /// Reads this column for nodes `lo..hi` into `out`.
    pub(crate) fn read(
        &self,
        g: &Graph<'_>,
        lo: u64,
        hi: u64,
        out: &mut Vec<Value>,
    ) -> Result<(), QueryError> {
        match self {
            PropColumn::Value(p) => g.node_prop_range(lo, hi, p, out),
            PropColumn::Test(p, op, pat) => {
                let test = crate::expr::StringTest::new(*op, pat.clone());
                let seg: &SegRead<'_> = &|c, i, t| test.on_chunk(c, i, t);
                let val: &ValMap<'_> = &|v| test.on_value(v);
                g.node_prop_range_map(lo, hi, p, out, seg, val)
            }
            PropColumn::Present(p) => {
                let seg: &SegRead<'_> = &|_, _, _| Ok(Value::Bool(true));
                let val: &ValMap<'_> = &|_| Ok(Value::Bool(true));
                g.node_prop_range_map(lo, hi, p, out, seg, val)
            }
        }
    }
}

/// A label scan (with its filter) feeding an aggregation, run on all cores: each worker
/// scans morsels of node ids into its own group table; the tables are merged. Chosen by
/// the planner when no aggregate is DISTINCT (partial tables would count twice).
pub struct ParallelAggregate {
    /// When every expression reads the node only through properties: those properties,
    /// and the expressions rewritten to read them as columns (no node column is built).
    pub direct: Option<DirectColumns>,
    /// When the direct columns are simple enough: the typed path ([`FastAgg`]).
    pub fast: Option<FastAgg>,
    pub ranges: Vec<ScanRange>,
    pub filter: Option<CExpr>,
    pub keys: Vec<CExpr>,
    pub aggs: Vec<AggSpec>,
    pub out: Option<std::vec::IntoIter<Batch>>,
    pub peak: u64,
}

/// `e` with every `Prop(Slot(0), p)` read from a column of `props` instead (a string
/// test of it against a constant, and a null test of it, from a column that makes no
/// string values); `None` when `e` uses the node in another way.
pub fn rewrite_props(e: &CExpr, props: &mut Vec<PropColumn>) -> Option<CExpr> {
    let mut column = |c: PropColumn| column_slot(props, c);
    let node_prop = |x: &CExpr| match x {
        CExpr::Prop(n, name) if matches!(**n, CExpr::Slot(0)) => Some(name.clone()),
        _ => None,
    };
    match e {
        CExpr::Bin(op, a, b) if crate::expr::is_string_test(*op) => {
            if let (Some(name), CExpr::Const(Value::Str(pat))) = (node_prop(a), &**b) {
                return Some(column(PropColumn::Test(name, *op, pat.clone())));
            }
        }
        CExpr::IsNull(x, f) => {
            if let Some(name) = node_prop(x) {
                return Some(CExpr::IsNull(
                    Box::new(column(PropColumn::Present(name))),
                    *f,
                ));
            }
        }
        CExpr::Prop(..) => {
            if let Some(name) = node_prop(e) {
                return Some(column(PropColumn::Value(name)));
            }
        }
        _ => {}
    }
    let mut rec = |x: &CExpr| rewrite_props(x, props).map(Box::new);
    Some(match e {
        CExpr::Const(v) => CExpr::Const(v.clone()),
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

/// The slot of column `c` among `props`, added if it is not there yet.
fn column_slot(props: &mut Vec<PropColumn>, c: PropColumn) -> CExpr {
    CExpr::Slot(match props.iter().position(|p| *p == c) {
        Some(i) => i,
        None => {
            props.push(c);
            props.len() - 1
        }
    })
}

/// The argument of `count(x)` rewritten as [`rewrite_props`] does, except that a bare
/// node property only needs to be present: `count(n.name)` makes no string values.
pub fn rewrite_counted(e: &CExpr, props: &mut Vec<PropColumn>) -> Option<CExpr> {
    match e {
        CExpr::Prop(n, name) if matches!(**n, CExpr::Slot(0)) => {
            Some(column_slot(props, PropColumn::Present(name.clone())))
        }
        e => rewrite_props(e, props),
    }
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
        let n_nodes = cx.env.g.n_nodes();
        for r in &self.ranges {
            let mut lo = r.lo;
            let r_hi = r.hi.min(n_nodes);
            while lo < r_hi {
                let hi = (lo + MORSEL_NODES).min(r_hi);
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
        // Nodes deleted (from the segments or by the delta) or that lost the label of
        // their range's tables are masked out, a morsel's batch at a time.
        let check_life = env.g.scans_check_life();
        let tables: Vec<(GroupTable, u64)> = morsels
            .par_iter()
            .map(|m| -> Result<(GroupTable, u64), QueryError> {
                if cancel.is_some_and(|c| c.load(AtOrd::Relaxed)) {
                    return Err(QueryError::Cancelled);
                }
                // Columns straight from the chunks where no node needs a label test
                // (a range of tables that carry the label); node values elsewhere.
                let direct = self.direct.as_ref().filter(|_| m.label.is_none());
                let (keys, aggs, filter) = match direct {
                    Some((_, f, k, a)) => (k, a, f),
                    None => (&self.keys, &self.aggs, &self.filter),
                };
                let mut live = Vec::new();
                let mut t = GroupTable::new(keys.len(), aggs);
                let mut grant = budget.empty_grant("Aggregate");
                if let (Some(fast), Some(d)) = (&self.fast, direct) {
                    // The typed path, handing back what it does not read.
                    let mut run = FastRun::new(fast);
                    run.run(env, m.table_label, m.lo, m.hi, &mut |rest| {
                        match rest {
                            Rest::Range(a, b) => direct_block(
                                env,
                                d,
                                m.table_label,
                                a,
                                b,
                                check_life,
                                &mut live,
                                &mut t,
                            )?,
                            Rest::Nodes(ns) => {
                                let mut b = Batch {
                                    cols: vec![ns.iter().map(|&x| Value::Node(x)).collect()],
                                    len: ns.len(),
                                };
                                if let Some(f) = &self.filter {
                                    b.filter(&holds(&eval_col(env, f, &b)?));
                                }
                                t.add(env, &self.keys, &self.aggs, &b)?;
                            }
                        }
                        Ok(())
                    })?;
                    account(&mut grant, t.bytes + run.bytes(), "Aggregate")?;
                    run.finish(&mut t, aggs)?;
                    account(&mut grant, t.bytes, "Aggregate")?;
                    return Ok((t, grant.bytes()));
                }
                let mut n = m.lo;
                while n < m.hi {
                    let end = (n + BATCH_ROWS as u64).min(m.hi);
                    if let Some(d) = direct {
                        direct_block(env, d, m.table_label, n, end, check_life, &mut live, &mut t)?;
                        n = end;
                        account(&mut grant, t.bytes, "Aggregate")?;
                        continue;
                    }
                    let mut col = Vec::with_capacity((end - n) as usize);
                    if check_life && m.label.is_none() {
                        env.g.live_mask(n, end, m.table_label, &mut live);
                    }
                    for x in n..end {
                        if let Some(l) = m.label {
                            if !env.g.has_label(x, l)? {
                                continue;
                            }
                        } else if check_life && !live[(x - n) as usize] {
                            continue;
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

/// The direct path's block: properties of nodes `n..end` read as columns, live nodes
/// kept, filtered, added to `t`.
#[allow(clippy::too_many_arguments)]
fn direct_block(
    env: &Env,
    (props, filter, keys, aggs): &DirectColumns,
    table_label: Option<u32>,
    n: u64,
    end: u64,
    check_life: bool,
    live: &mut Vec<bool>,
    t: &mut GroupTable,
) -> Result<(), QueryError> {
    let mut cols = Vec::with_capacity(props.len());
    for p in props {
        let mut c = Vec::with_capacity((end - n) as usize);
        p.read(&env.g, n, end, &mut c)?;
        cols.push(c);
    }
    let mut b = Batch {
        cols,
        len: (end - n) as usize,
    };
    if check_life {
        env.g.live_mask(n, end, table_label, live);
        b.filter(live);
    }
    if let Some(f) = filter {
        b.filter(&holds(&eval_col(env, f, &b)?));
    }
    t.add(env, keys, aggs, &b)
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
