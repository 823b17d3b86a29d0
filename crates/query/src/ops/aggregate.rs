//! Grouping and aggregation (hash and dense group tables, the parallel scan-aggregate),
//! DISTINCT and distinct-on-node-ids.

use super::*;
use crate::graph::Graph;
use crate::graph::{SegRead, ValMap};
use quiver_cypher::ast::BinOp;
use quiver_cypher::Detail;

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
            // The list's slots as allocated (it doubles), and what the value holds.
            let before = l.capacity();
            l.push(v.clone());
            return Ok((l.capacity() - before) * 32 + crate::value::heap_bytes(v));
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
                        return Err(QueryError::ArgumentValue(
                            Detail::InvalidArgumentType,
                            "percentile needs a number in 0..1".into(),
                        ))
                    }
                };
                if !(0.0..=1.0).contains(&p) {
                    return Err(QueryError::ArgumentValue(
                        Detail::NumberOutOfRange,
                        format!("percentile {p} is not in 0..1"),
                    ));
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

/// Node keys below this id find their group by indexing a table grown to the largest id
/// seen (4 bytes a node: 64 MiB at most), not hashing: grouping by a node (the in-degree
/// of every user) otherwise spends its time in hash probes.
const DENSE_NODES: u64 = 1 << 24;

/// Groups and their aggregate states, in first-seen order, stored flat (group `g`'s
/// keys at `keys[g * n_keys..]`, its states at `states[g * n_aggs..]`): no allocation
/// per group. One grouping key (the common case) is hashed without building a vector
/// per row; small integer keys and node keys index a table.
pub struct GroupTable {
    n_keys: usize,
    n_aggs: usize,
    n_groups: usize,
    keys: Vec<Value>,
    states: Vec<AggState>,
    /// The values seen per group and DISTINCT aggregate (empty when there is none).
    seen: Vec<HashSet<Key>>,
    any_distinct: bool,
    index1: HashMap<Key, u32>,
    /// Several keys: group numbers, hashed and compared through the flat `keys`
    /// (no key vector per row, none stored twice).
    index_n: hashbrown::HashTable<u32>,
    hasher: hashbrown::DefaultHashBuilder,
    dense: Vec<u32>,
    nodes: Vec<u32>,
    /// `count(*)` per node id, for a table keyed by one node whose aggregates are all
    /// `count(*)` (the in-degree of every node): a counter per node, 8 bytes, instead of
    /// a group; they become rows in [`into_rows`](Self::into_rows) (or groups, by
    /// [`flush_node_counts`](Self::flush_node_counts), when the table is merged).
    node_counts: Vec<i64>,
    counts_only: bool,
    /// The group of the null key (one key).
    null_group: u32,
    extras: Vec<Option<Value>>,
    /// Heap bytes the keys, states and DISTINCT sets hold beyond their slots.
    heap: u64,
}

impl GroupTable {
    pub fn new(n_keys: usize, aggs: &[AggSpec]) -> GroupTable {
        let mut t = GroupTable {
            n_keys,
            n_aggs: aggs.len(),
            n_groups: 0,
            keys: Vec::new(),
            states: Vec::new(),
            seen: Vec::new(),
            any_distinct: aggs.iter().any(|a| a.distinct),
            index1: HashMap::new(),
            index_n: hashbrown::HashTable::new(),
            hasher: Default::default(),
            dense: if n_keys == 1 {
                vec![u32::MAX; DENSE_KEYS]
            } else {
                Vec::new()
            },
            nodes: Vec::new(),
            node_counts: Vec::new(),
            counts_only: n_keys == 1
                && !aggs.is_empty()
                && aggs.iter().all(|a| a.func == AggFn::CountStar),
            null_group: u32::MAX,
            extras: vec![None; aggs.len()],
            heap: 0,
        };
        if n_keys == 0 {
            t.push_group(Vec::new(), aggs);
        }
        t
    }

    /// Bytes held: every slot's capacity (keys, states, hash tables, index tables) and
    /// what values hold on the heap.
    pub fn bytes(&self) -> u64 {
        use std::mem::size_of;
        let slots = self.keys.capacity() * size_of::<Value>()
            + self.states.capacity() * size_of::<AggState>()
            + self.seen.capacity() * size_of::<HashSet<Key>>()
            + self.index1.capacity() * (size_of::<(Key, u32)>() + 1)
            + self.index_n.capacity() * (size_of::<u32>() + 1)
            + (self.dense.capacity() + self.nodes.capacity()) * 4
            + self.node_counts.capacity() * 8;
        slots as u64 + self.heap
    }

    /// Makes groups of the per-node counters (see `node_counts`).
    pub(crate) fn flush_node_counts(&mut self, aggs: &[AggSpec]) {
        let counts = std::mem::take(&mut self.node_counts);
        for (n, &c) in counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let gi = self.group_of(&[[Value::Node(n as u64)]], 0, aggs);
            for s in &mut self.states[gi * self.n_aggs..(gi + 1) * self.n_aggs] {
                if let AggState::Count(x) = s {
                    *x += c;
                }
            }
        }
    }

    fn push_group(&mut self, key: Vec<Value>, aggs: &[AggSpec]) -> usize {
        for k in &key {
            self.heap += crate::value::heap_bytes(k) as u64;
        }
        self.keys.extend(key);
        self.states.extend(aggs.iter().map(|a| agg_init(a.func)));
        if self.any_distinct {
            self.seen.extend(aggs.iter().map(|_| HashSet::new()));
        }
        self.n_groups += 1;
        self.n_groups - 1
    }

    fn group_of<K: AsRef<[Value]>>(&mut self, keys: &[K], row: usize, aggs: &[AggSpec]) -> usize {
        match keys.len() {
            0 => 0,
            1 => {
                let v = &keys[0].as_ref()[row];
                match v {
                    Value::Null if self.null_group != u32::MAX => self.null_group as usize,
                    Value::Int(i) if (0..DENSE_KEYS as i64).contains(i) => {
                        let slot = self.dense[*i as usize];
                        if slot != u32::MAX {
                            return slot as usize;
                        }
                        let g = self.push_group(vec![v.clone()], aggs);
                        self.dense[*i as usize] = g as u32;
                        g
                    }
                    Value::Node(n) if *n < DENSE_NODES => {
                        let n = *n as usize;
                        if n >= self.nodes.len() {
                            let len = (n + 1).max(self.nodes.len() * 2).max(1024);
                            self.nodes.resize(len.min(DENSE_NODES as usize), u32::MAX);
                        }
                        let slot = self.nodes[n];
                        if slot != u32::MAX {
                            return slot as usize;
                        }
                        let g = self.push_group(vec![v.clone()], aggs);
                        self.nodes[n] = g as u32;
                        g
                    }
                    _ => {
                        let k = Key(v.clone());
                        if let Some(&g) = self.index1.get(&k) {
                            return g as usize;
                        }
                        if k.0.is_null() {
                            self.null_group = self.n_groups as u32;
                        }
                        self.heap += crate::value::heap_bytes(&k.0) as u64;
                        let g = self.push_group(vec![k.0.clone()], aggs);
                        self.index1.insert(k, g as u32);
                        g
                    }
                }
            }
            _ => {
                use std::hash::{BuildHasher, Hasher};
                let mut h = self.hasher.build_hasher();
                for c in keys {
                    crate::value::hash_value(&c.as_ref()[row], &mut h);
                }
                let hash = h.finish();
                let nk = self.n_keys;
                let stored = &self.keys;
                let same = |g: &u32| {
                    let at = *g as usize * nk;
                    keys.iter()
                        .zip(&stored[at..at + nk])
                        .all(|(c, k)| crate::value::equivalent(&c.as_ref()[row], k))
                };
                if let Some(&g) = self.index_n.find(hash, same) {
                    return g as usize;
                }
                let key: Vec<Value> = keys.iter().map(|c| c.as_ref()[row].clone()).collect();
                let g = self.push_group(key, aggs);
                let (nk, stored, hasher) = (self.n_keys, &self.keys, &self.hasher);
                self.index_n.insert_unique(hash, g as u32, |&g| {
                    let mut h = hasher.build_hasher();
                    for k in &stored[g as usize * nk..(g as usize + 1) * nk] {
                        crate::value::hash_value(k, &mut h);
                    }
                    h.finish()
                });
                g
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
        let (keys, args) = self.columns(env, key_exprs, aggs, b)?;
        if self.counts_only {
            // Counters per node id; other keys (and nodes past the dense range) as groups.
            for row in 0..b.len {
                match keys[0][row] {
                    Value::Node(n) if n < DENSE_NODES => {
                        let n = n as usize;
                        if n >= self.node_counts.len() {
                            let len = (n + 1).max(self.node_counts.len() * 2).max(1024);
                            self.node_counts.resize(len.min(DENSE_NODES as usize), 0);
                        }
                        self.node_counts[n] += 1;
                    }
                    _ => {
                        let gi = self.group_of(&keys, row, aggs);
                        self.update(gi, aggs, &args, row)?;
                    }
                }
            }
            return Ok(());
        }
        for row in 0..b.len {
            let gi = self.group_of(&keys, row, aggs);
            self.update(gi, aggs, &args, row)?;
        }
        Ok(())
    }

    /// The key and argument columns of `b` (slots read in place), and the extras (the
    /// percentile) noted.
    #[allow(clippy::type_complexity)]
    fn columns<'b>(
        &mut self,
        env: &Env,
        key_exprs: &[CExpr],
        aggs: &[AggSpec],
        b: &'b Batch,
    ) -> Result<(Vec<std::borrow::Cow<'b, [Value]>>, Vec<Option<Vec<Value>>>), QueryError> {
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
        Ok((keys, args))
    }

    /// Folds row `row` of the argument columns into group `gi`.
    #[inline]
    fn update(
        &mut self,
        gi: usize,
        aggs: &[AggSpec],
        args: &[Option<Vec<Value>>],
        row: usize,
    ) -> Result<(), QueryError> {
        const TRUE: Value = Value::Bool(true);
        let base = gi * self.n_aggs;
        for (i, a) in aggs.iter().enumerate() {
            let s = &mut self.states[base + i];
            if a.func == AggFn::CountStar {
                if let AggState::Count(c) = s {
                    *c += 1;
                }
                continue;
            }
            let v = match &args[i] {
                Some(col) => &col[row],
                None => &TRUE,
            };
            if a.distinct && !v.is_null() {
                if !self.seen[base + i].insert(Key(v.clone())) {
                    continue;
                }
                self.heap += 48 + crate::value::heap_bytes(v) as u64;
            }
            self.heap += agg_update(a.func, s, v)? as u64;
        }
        Ok(())
    }

    /// Folds `other` (built from other rows, without DISTINCT aggregates) into `self`.
    pub fn merge(&mut self, mut other: GroupTable, aggs: &[AggSpec]) -> Result<(), QueryError> {
        other.flush_node_counts(aggs);
        for (i, e) in other.extras.iter_mut().enumerate() {
            if self.extras[i].is_none() {
                self.extras[i] = e.take();
            }
        }
        let (nk, na) = (other.n_keys, other.n_aggs);
        let mut keys = other.keys.into_iter();
        let mut states = other.states.into_iter();
        for _ in 0..other.n_groups {
            let key: Vec<Value> = keys.by_ref().take(nk).collect();
            let st: Vec<AggState> = states.by_ref().take(na).collect();
            self.fold_group(key, st, aggs)?;
        }
        Ok(())
    }

    /// Folds one group's states (from other rows) into the group of `key`.
    pub(crate) fn fold_group(
        &mut self,
        key: Vec<Value>,
        states: Vec<AggState>,
        aggs: &[AggSpec],
    ) -> Result<(), QueryError> {
        self.fold(key, states.into_iter().map(|s| (s, None)), aggs)
    }

    /// Folds partial states into the group of `key`; a DISTINCT aggregate's comes as
    /// the values it has seen, each counted here if it is new here.
    fn fold(
        &mut self,
        key: Vec<Value>,
        states: impl Iterator<Item = (AggState, Option<Arc<Vec<Value>>>)>,
        aggs: &[AggSpec],
    ) -> Result<(), QueryError> {
        let gi = if key.is_empty() {
            0
        } else {
            let cols: Vec<[Value; 1]> = key.into_iter().map(|k| [k]).collect();
            self.group_of(&cols, 0, aggs)
        };
        let base = gi * self.n_aggs;
        for (i, (o, seen)) in states.enumerate() {
            if let Some(seen) = seen {
                for x in seen.iter() {
                    if self.seen[base + i].insert(Key(x.clone())) {
                        self.heap += 48 + crate::value::heap_bytes(x) as u64;
                        self.heap +=
                            agg_update(aggs[i].func, &mut self.states[base + i], x)? as u64;
                    }
                }
                continue;
            }
            match (&mut self.states[base + i], o) {
                (AggState::Count(a), AggState::Count(b)) => *a += b,
                (AggState::Avg(a, n), AggState::Avg(b, m)) => {
                    *a += b;
                    *n += m;
                }
                (AggState::List(a), AggState::List(b)) => {
                    let before = a.capacity();
                    self.heap += b
                        .iter()
                        .map(|v| crate::value::heap_bytes(v) as u64)
                        .sum::<u64>();
                    a.extend(b);
                    self.heap += (a.capacity() - before) as u64 * 32;
                }
                // Sum adds; min and max keep the better value (null is skipped).
                (s, AggState::Sum(b) | AggState::Best(b)) => {
                    agg_update(aggs[i].func, s, &b)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Writes every group as a record of partial states (keys, then per aggregate its
    /// state and, for a DISTINCT one, the values it has seen) to the partition of its
    /// key, and empties the table: the spill of a hash aggregation. Records of one key
    /// fold back in the order written, so `collect` keeps its order.
    pub(crate) fn spill_to(
        &mut self,
        p: &mut super::spill::Partitions,
        aggs: &[AggSpec],
    ) -> Result<(), QueryError> {
        let counts = std::mem::take(&mut self.node_counts);
        for (n, &c) in counts.iter().enumerate() {
            if c != 0 {
                let (k, v) = (Value::Node(n as u64), Value::Int(c));
                p.write(
                    std::iter::once(&k),
                    [&k].into_iter().chain(aggs.iter().map(|_| &v)),
                )?;
            }
        }
        drop(counts);
        let nk = self.n_keys;
        let mut rec: Vec<Value> = Vec::new();
        for g in 0..self.n_groups {
            rec.clear();
            rec.extend(self.keys[g * nk..(g + 1) * nk].iter().cloned());
            for (i, a) in aggs.iter().enumerate() {
                let st =
                    std::mem::replace(&mut self.states[g * self.n_aggs + i], AggState::Count(0));
                rec.push(match st {
                    AggState::Count(c) => Value::Int(c),
                    AggState::Sum(v) | AggState::Best(v) => v,
                    AggState::Avg(sum, n) => Value::list(vec![Value::Float(sum), Value::Int(n)]),
                    AggState::List(l) => Value::list(l),
                });
                if a.distinct {
                    let seen = std::mem::take(&mut self.seen[g * self.n_aggs + i]);
                    rec.push(Value::list(seen.into_iter().map(|k| k.0).collect()));
                }
            }
            p.write(rec[..nk].iter(), rec.iter())?;
        }
        let extras = std::mem::take(&mut self.extras);
        *self = GroupTable::new(nk, aggs);
        self.extras = extras;
        Ok(())
    }

    /// Folds a record [`spill_to`](Self::spill_to) wrote (`rec`: keys, then states).
    pub(crate) fn fold_record(
        &mut self,
        mut rec: std::vec::IntoIter<Value>,
        aggs: &[AggSpec],
    ) -> Result<(), QueryError> {
        let bad = || QueryError::Argument("a spilled aggregation record is malformed".into());
        let key: Vec<Value> = rec.by_ref().take(self.n_keys).collect();
        let mut states = Vec::with_capacity(aggs.len());
        for a in aggs {
            let v = rec.next().ok_or_else(bad)?;
            if a.distinct {
                let Some(Value::List(seen)) = rec.next() else {
                    return Err(bad());
                };
                states.push((AggState::Count(0), Some(seen)));
                continue;
            }
            let st = match (agg_init(a.func), v) {
                (AggState::Count(_), Value::Int(x)) => AggState::Count(x),
                (AggState::Avg(..), Value::List(l)) => match &l[..] {
                    [Value::Float(sum), Value::Int(n)] => AggState::Avg(*sum, *n),
                    _ => return Err(bad()),
                },
                (AggState::List(_), Value::List(l)) => {
                    AggState::List(Arc::try_unwrap(l).unwrap_or_else(|l| (*l).clone()))
                }
                (AggState::Sum(_), v) => AggState::Sum(v),
                (AggState::Best(_), v) => {
                    self.heap += crate::value::heap_bytes(&v) as u64;
                    AggState::Best(v)
                }
                _ => return Err(bad()),
            };
            states.push((st, None));
        }
        self.fold(key, states.into_iter(), aggs)
    }

    /// The result rows (keys, then one value per aggregate), made a batch at a time as
    /// they are read: never a second copy of every group. `grant` (what the table
    /// held) is returned when the last is read. Per-node counters become rows there
    /// too (added to the node's group where one exists).
    pub fn into_rows(mut self, aggs: &[AggSpec], grant: Option<Grant>) -> Rows {
        for n in 0..self.node_counts.len() {
            let c = self.node_counts[n];
            if c == 0 {
                continue;
            }
            if let Some(g) = self.nodes.get(n).copied().filter(|&g| g != u32::MAX) {
                let g = g as usize;
                for st in &mut self.states[g * self.n_aggs..(g + 1) * self.n_aggs] {
                    if let AggState::Count(x) = st {
                        *x += c;
                    }
                }
                self.node_counts[n] = 0;
            }
        }
        Rows {
            keys: std::mem::take(&mut self.keys).into_iter(),
            states: std::mem::take(&mut self.states).into_iter(),
            groups_left: self.n_groups,
            counts: std::mem::take(&mut self.node_counts),
            next_node: 0,
            n_keys: self.n_keys,
            funcs: aggs.iter().map(|a| a.func).collect(),
            extras: std::mem::take(&mut self.extras),
            grant,
        }
    }
}

/// A group table's result rows, made a batch at a time (see [`GroupTable::into_rows`]).
pub struct Rows {
    keys: std::vec::IntoIter<Value>,
    states: std::vec::IntoIter<AggState>,
    groups_left: usize,
    counts: Vec<i64>,
    next_node: usize,
    n_keys: usize,
    funcs: Vec<AggFn>,
    extras: Vec<Option<Value>>,
    grant: Option<Grant>,
}

impl Rows {
    /// No rows.
    pub fn none() -> Rows {
        Rows {
            keys: Vec::new().into_iter(),
            states: Vec::new().into_iter(),
            groups_left: 0,
            counts: Vec::new(),
            next_node: 0,
            n_keys: 0,
            funcs: Vec::new(),
            extras: Vec::new(),
            grant: None,
        }
    }

    pub fn next_batch(&mut self) -> Result<Option<Batch>, QueryError> {
        let width = self.n_keys + self.funcs.len();
        let mut cols: Vec<Vec<Value>> = (0..width)
            .map(|_| Vec::with_capacity(BATCH_ROWS.min(self.groups_left.max(16))))
            .collect();
        let mut len = 0;
        while len < BATCH_ROWS && self.groups_left > 0 {
            self.groups_left -= 1;
            for c in cols.iter_mut().take(self.n_keys) {
                c.push(self.keys.next().unwrap_or_default());
            }
            for (i, &f) in self.funcs.iter().enumerate() {
                let st = self.states.next().unwrap_or(AggState::Count(0));
                cols[self.n_keys + i].push(agg_final(f, st, self.extras[i].as_ref())?);
            }
            len += 1;
        }
        while len < BATCH_ROWS && self.next_node < self.counts.len() {
            let n = self.next_node;
            self.next_node += 1;
            let c = self.counts[n];
            if c == 0 {
                continue;
            }
            cols[0].push(Value::Node(n as u64));
            for col in cols.iter_mut().skip(1) {
                col.push(Value::Int(c));
            }
            len += 1;
        }
        if len == 0 {
            self.grant = None;
            return Ok(None);
        }
        Ok(Some(Batch { cols, len }))
    }
}

/// Hash aggregation: outputs the key columns, then one column per aggregate. When its
/// grant is full it spills (see [`aggregate_pass`] and `spill.rs`).
pub struct Aggregate {
    pub input: BoxOp,
    pub keys: Vec<CExpr>,
    pub aggs: Vec<AggSpec>,
    /// Its rows, then its spilled partitions (`None`: the input is not read yet).
    out: Option<Drain>,
    pub peak: u64,
    /// The percentiles (evaluated once), carried to the partitions.
    extras: Vec<Option<Value>>,
}

impl Aggregate {
    pub fn new(input: BoxOp, keys: Vec<CExpr>, aggs: Vec<AggSpec>) -> Aggregate {
        Aggregate {
            input,
            keys,
            aggs,
            out: None,
            peak: 0,
            extras: Vec::new(),
        }
    }
}

/// What one pass of hash aggregation made: its groups' rows, the partitions it
/// spilled (then no rows: every group went to them), its percentiles and the most it
/// held.
type Pass = (Rows, Vec<super::spill::Partition>, Vec<Option<Value>>, u64);

/// What a pass aggregates: rows, or a spilled partition's records of partial states.
pub(crate) enum PassInput<'a> {
    Rows(&'a mut dyn FnMut(&mut Cx) -> Result<Option<Batch>, QueryError>),
    States(super::spill::Partition),
}

/// Aggregates `input` into a group table. When the grant is full (see
/// [`account_or_spill`]) the table's groups go to partition files as partial states and
/// the table starts empty again; at the end, if anything spilled, the rest follows
/// them, and each partition is aggregated by a pass of its own (one level deeper).
pub(crate) fn aggregate_pass(
    cx: &mut Cx,
    mut input: PassInput,
    keys: &[CExpr],
    aggs: &[AggSpec],
    extras: Option<Vec<Option<Value>>>,
    level: u32,
) -> Result<Pass, QueryError> {
    use super::spill::{Partitions, MAX_LEVEL};
    let mut grant = cx.budget.empty_grant("Aggregate");
    let mut table = GroupTable::new(keys.len(), aggs);
    if let Some(e) = extras {
        table.extras = e;
    }
    let spill_dir = cx.temp_dir.clone().filter(|_| level < MAX_LEVEL);
    let mut parts: Option<Partitions> = None;
    let mut peak = 0;
    loop {
        let more = match &mut input {
            PassInput::Rows(next) => match next(cx)? {
                Some(b) => {
                    table.add(&cx.env, keys, aggs, &b)?;
                    true
                }
                None => false,
            },
            PassInput::States(part) => {
                let mut n = 0;
                while n < BATCH_ROWS {
                    let Some(rec) = part.next_record()? else {
                        break;
                    };
                    table.fold_record(rec.into_iter(), aggs)?;
                    n += 1;
                }
                n > 0
            }
        };
        if !more {
            break;
        }
        let bytes = table.bytes();
        let fits = match &spill_dir {
            Some(_) => account_or_spill(&mut grant, bytes, "Aggregate")?,
            None => account(&mut grant, bytes, "Aggregate").map(|()| true)?,
        };
        peak = peak.max(grant.bytes());
        if let (false, Some(dir)) = (fits, &spill_dir) {
            cx.check_cancel()?;
            let p = match &mut parts {
                Some(p) => p,
                None => parts.insert(Partitions::new(
                    dir,
                    level,
                    "Aggregate",
                    grant.budget().limit_bytes(),
                )?),
            };
            table.spill_to(p, aggs)?;
            grant.force_resize(p.buffer_bytes());
        }
    }
    let extras = table.extras.clone();
    match parts {
        Some(mut p) => {
            table.spill_to(&mut p, aggs)?;
            drop(table);
            let width = keys.len()
                + aggs
                    .iter()
                    .map(|a| if a.distinct { 2 } else { 1 })
                    .sum::<usize>();
            Ok((Rows::none(), p.finish(width)?, extras, peak))
        }
        None => Ok((table.into_rows(aggs, Some(grant)), Vec::new(), extras, peak)),
    }
}

/// What an aggregation or a DISTINCT hands out after its input: the rows being handed
/// out, then the spilled partitions, each aggregated on its own (one level deeper).
#[derive(Default)]
pub(crate) struct Drain {
    out: Option<Rows>,
    pending: Vec<super::spill::Partition>,
}

impl Drain {
    /// The next batch; partitions' records are `n_keys` keys, then `aggs`' states.
    fn next(
        &mut self,
        cx: &mut Cx,
        n_keys: usize,
        aggs: &[AggSpec],
        extras: &[Option<Value>],
        peak: &mut u64,
    ) -> Result<Option<Batch>, QueryError> {
        loop {
            if let Some(b) = self
                .out
                .as_mut()
                .map(|r| r.next_batch())
                .transpose()?
                .flatten()
            {
                return Ok(Some(b));
            }
            let Some(part) = self.pending.pop() else {
                return Ok(None);
            };
            cx.check_cancel()?;
            let keys: Vec<CExpr> = (0..n_keys).map(CExpr::Slot).collect();
            let level = part.level + 1;
            let (rows, parts, _, p) = aggregate_pass(
                cx,
                PassInput::States(part),
                &keys,
                aggs,
                Some(extras.to_vec()),
                level,
            )?;
            *peak = (*peak).max(p);
            self.pending.extend(parts);
            self.out = Some(rows);
        }
    }
}

impl Op for Aggregate {
    fn mem_peak(&self) -> u64 {
        self.peak
    }
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        if self.out.is_none() {
            let input = &mut self.input;
            let (rows, parts, extras, peak) = cx.full(|cx| {
                aggregate_pass(
                    cx,
                    PassInput::Rows(&mut |cx| input.next(cx)),
                    &self.keys,
                    &self.aggs,
                    None,
                    0,
                )
            })?;
            self.peak = peak;
            self.extras = extras;
            self.out = Some(Drain {
                out: Some(rows),
                pending: parts,
            });
        }
        let (nk, aggs, extras) = (self.keys.len(), &self.aggs, &self.extras);
        self.out
            .as_mut()
            .expect("set")
            .next(cx, nk, aggs, extras, &mut self.peak)
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
    /// This column's value for a node whose delta record is `r`, when the record decides
    /// the property (`None`: the segment row does).
    pub(crate) fn of_record(
        &self,
        r: &quiver_engine::delta::NodeRec,
    ) -> Option<Result<Value, QueryError>> {
        let (PropColumn::Value(p) | PropColumn::Test(p, ..) | PropColumn::Present(p)) = self;
        let v = r.get(p)?;
        if v.is_null() {
            return Some(Ok(Value::Null));
        }
        Some(match self {
            PropColumn::Value(_) => Ok(v.clone()),
            PropColumn::Test(_, op, pat) => {
                crate::expr::StringTest::new(*op, pat.clone()).on_value(v.clone())
            }
            PropColumn::Present(_) => Ok(Value::Bool(true)),
        })
    }

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
    /// The result (`None`: not made yet): made a batch at a time from the merged table
    /// (its grant held until the last row), or, when the morsels' tables outgrew the
    /// grant and there is a temporary directory, by a serial pass that spills (see
    /// [`ParallelAggregate::serial`]), its partitions after it.
    pub(crate) out: Option<Drain>,
    /// The percentiles of a serial pass (evaluated once), carried to its partitions.
    pub(crate) extras: Vec<Option<Value>>,
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

/// The nodes `n..end` of morsel `m` as a batch of one node column: those with the
/// label (a range whose tables do not all carry it), or those alive (`live` is scratch
/// for the mask), then filtered.
fn morsel_nodes(
    env: &Env,
    m: &ScanRange,
    n: u64,
    end: u64,
    check_life: bool,
    live: &mut Vec<bool>,
    filter: Option<&CExpr>,
) -> Result<Batch, QueryError> {
    if check_life && m.label.is_none() {
        env.g.live_mask(n, end, m.table_label, live);
    }
    let mut col = Vec::with_capacity((end - n) as usize);
    if m.label.is_some() && env.g.has_delta() && n >= env.g.segment_nodes() {
        // Created nodes of the label: the delta's records of them, not every id.
        let mut ids = Vec::new();
        env.g.created_nodes(n, end, m.label, usize::MAX, &mut ids);
        col.extend(ids.into_iter().map(Value::Node));
    } else {
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
    }
    let len = col.len();
    let mut b = Batch {
        cols: vec![col],
        len,
    };
    if let Some(f) = filter {
        b.filter(&holds(&eval_col(env, f, &b)?));
    }
    Ok(b)
}

impl ParallelAggregate {
    /// The aggregation as one serial pass that spills (as Aggregate does): the morsels'
    /// nodes in order, a batch at a time (label and life tested, filtered), through
    /// [`aggregate_pass`]. Taken when the parallel tables outgrew the grant and there is
    /// a temporary directory: what they held has been given back.
    fn serial(
        &mut self,
        cx: &mut Cx,
        morsels: Vec<ScanRange>,
    ) -> Result<Option<Batch>, QueryError> {
        let check_life = cx.env.g.scans_check_life();
        let filter = self.filter.clone();
        let mut at = 0usize;
        let mut n = morsels.first().map_or(0, |m| m.lo);
        let mut live = Vec::new();
        let mut next = |cx: &mut Cx| -> Result<Option<Batch>, QueryError> {
            while let Some(m) = morsels.get(at) {
                if n >= m.hi {
                    at += 1;
                    n = morsels.get(at).map_or(0, |m| m.lo);
                    continue;
                }
                let end = (n + BATCH_ROWS as u64).min(m.hi);
                let b = morsel_nodes(&cx.env, m, n, end, check_life, &mut live, filter.as_ref())?;
                n = end;
                if b.len > 0 {
                    return Ok(Some(b));
                }
            }
            Ok(None)
        };
        let (keys, aggs) = (&self.keys, &self.aggs);
        let (rows, parts, extras, peak) =
            cx.full(|cx| aggregate_pass(cx, PassInput::Rows(&mut next), keys, aggs, None, 0))?;
        self.peak = self.peak.max(peak);
        self.extras = extras;
        self.out = Some(Drain {
            out: Some(rows),
            pending: parts,
        });
        self.next(cx)
    }
}

impl Op for ParallelAggregate {
    fn mem_peak(&self) -> u64 {
        self.peak
    }
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        use rayon::prelude::*;
        if let Some(drain) = &mut self.out {
            let (nk, aggs, extras) = (self.keys.len(), &self.aggs, &self.extras);
            return drain.next(cx, nk, aggs, extras, &mut self.peak);
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
        let stop = cx.stop();
        // Nodes deleted (from the segments or by the delta) or that lost the label of
        // their range's tables are masked out, a morsel's batch at a time.
        let check_life = env.g.scans_check_life();
        // With a temporary directory, a morsel whose table outgrows the grant stops
        // (`None`), and the aggregation is done again by a serial pass that spills.
        let can_spill = cx.temp_dir.is_some();
        let fits = |grant: &mut Grant, bytes: u64| -> Result<bool, QueryError> {
            if can_spill {
                account_or_spill(grant, bytes, "Aggregate")
            } else {
                account(grant, bytes, "Aggregate").map(|()| true)
            }
        };
        // Each morsel's table comes back with its grant, held until it is merged.
        let one = |m: &ScanRange| -> Result<Option<(GroupTable, Grant)>, QueryError> {
            stop.check()?;
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
                if !fits(&mut grant, t.bytes() + run.bytes())? {
                    return Ok(None);
                }
                run.finish(&mut t, aggs)?;
                if !fits(&mut grant, t.bytes())? {
                    return Ok(None);
                }
                return Ok(Some((t, grant)));
            }
            let mut n = m.lo;
            while n < m.hi {
                let end = (n + BATCH_ROWS as u64).min(m.hi);
                if let Some(d) = direct {
                    direct_block(env, d, m.table_label, n, end, check_life, &mut live, &mut t)?;
                    n = end;
                    if !fits(&mut grant, t.bytes())? {
                        return Ok(None);
                    }
                    continue;
                }
                let b = morsel_nodes(env, m, n, end, check_life, &mut live, filter.as_ref())?;
                n = end;
                t.add(env, keys, aggs, &b)?;
                if !fits(&mut grant, t.bytes())? {
                    return Ok(None);
                }
            }
            Ok(Some((t, grant)))
        };
        // A scan of a morsel's worth or less runs here: handing it to the pool costs
        // more than it (a count over 3,000 nodes beside 1,000 created: 25-68 us with
        // the hand-off).
        let small = morsels.iter().map(|m| m.hi - m.lo).sum::<u64>() <= MORSEL_NODES;
        let tables: Vec<Option<(GroupTable, Grant)>> = if small {
            morsels.iter().map(one).collect::<Result<_, _>>()?
        } else {
            morsels.par_iter().map(one).collect::<Result<_, _>>()?
        };
        let held: u64 = tables.iter().flatten().map(|(_, g)| g.bytes()).sum();
        self.peak = self.peak.max(held);
        let Some(tables) = tables.into_iter().collect::<Option<Vec<_>>>() else {
            return self.serial(cx, morsels);
        };
        let mut merged = GroupTable::new(self.keys.len(), &self.aggs);
        let mut grant = cx.budget.empty_grant("Aggregate");
        let mut tables = tables.into_iter();
        while let Some((t, g)) = tables.next() {
            merged.merge(t, &self.aggs)?;
            drop(g);
            if !fits(&mut grant, merged.bytes())? {
                drop((merged, grant, tables));
                return self.serial(cx, morsels);
            }
        }
        self.peak = self.peak.max(grant.bytes());
        self.out = Some(Drain {
            out: Some(merged.into_rows(&self.aggs, Some(grant))),
            pending: Vec::new(),
        });
        self.next(cx)
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
    /// Once the grant is full: where rows not seen go (see `spill.rs`); after the
    /// input, the partitions, each deduplicated on its own as an aggregation by every
    /// column, and the rows of the one being handed out.
    parts: Option<super::spill::Partitions>,
    drain: Drain,
    input_done: bool,
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
            parts: None,
            drain: Drain::default(),
            input_done: false,
        }
    }

    /// The spilled rows, deduplicated partition by partition: records of a grouping by
    /// every column, without aggregates.
    fn next_spilled(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let mut peak = 0;
        self.drain.next(cx, self.width, &[], &[], &mut peak)
    }
}

impl Op for Distinct {
    fn mem_peak(&self) -> u64 {
        self.grant.as_ref().map_or(0, |g| g.bytes())
    }
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        if self.input_done {
            return self.next_spilled(cx);
        }
        let Distinct {
            input,
            width,
            seen,
            seen_nodes,
            seen_ints,
            seen_one,
            grant,
            bytes,
            parts,
            ..
        } = self;
        let width = *width;
        let got = next_kept(input, cx, |cx, b| {
            let n_nodes = cx.env.g.n_nodes();
            let mut keep = vec![false; b.len];
            if let Some(p) = parts {
                // Spilling: rows seen are dropped, others go to the partitions.
                for (row, k) in keep.iter_mut().enumerate() {
                    if width == 1 {
                        let v = &b.cols[0][row];
                        let new = match v {
                            // The node set (a bitmap at most) still takes nodes: a
                            // new one is kept.
                            Value::Node(n) => {
                                *k = seen_nodes.insert(*n, n_nodes);
                                continue;
                            }
                            Value::Int(i) => !seen_ints.contains(i),
                            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => {
                                !seen_ints.contains(&(*f as i64))
                            }
                            v => !seen_one.contains(&Key(v.clone())),
                        };
                        if new {
                            p.write(std::iter::once(v), std::iter::once(v))?;
                        }
                        continue;
                    }
                    let key: Vec<Key> = (0..width).map(|c| Key(b.cols[c][row].clone())).collect();
                    if !seen.contains(&key) {
                        let vals = (0..width).map(|c| &b.cols[c][row]);
                        p.write(vals.clone(), vals)?;
                    }
                }
                return Ok(keep);
            }
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
            let held = *bytes + seen_nodes.bytes();
            match cx.temp_dir.clone() {
                Some(dir) => {
                    if !account_or_spill(g, held, "Distinct")? {
                        // What is held stays, counted; rows not seen go to partitions.
                        let p = super::spill::Partitions::new(
                            &dir,
                            0,
                            "Distinct",
                            g.budget().limit_bytes(),
                        )?;
                        g.force_resize(held + p.buffer_bytes());
                        *parts = Some(p);
                    }
                }
                None => account(g, held, "Distinct")?,
            }
            Ok(keep)
        })?;
        if got.is_some() {
            return Ok(got);
        }
        self.input_done = true;
        if let Some(p) = self.parts.take() {
            self.drain.pending = p.finish(self.width)?;
            // The rows seen are out; the partitions need the memory now.
            self.seen = HashSet::new();
            self.seen_one = HashSet::new();
            self.seen_ints = HashSet::new();
            self.seen_nodes = NodeSet::default();
            if let Some(g) = &mut self.grant {
                g.force_resize(0);
            }
        }
        self.next_spilled(cx)
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

/// `MATCH (a)-[:T]->(b:L) RETURN b, count(*)` where every node is an `a` (a scan of every
/// node, or of a label every node has, with no filter) and the delta changes no node,
/// label or relationship (`Graph::shape_unchanged`; property SETs are fine): each `b`'s
/// count is its degree over the types, read from the adjacency offsets, no relationship
/// visited (the planner checks all of it; see
/// `Planner::aggregate`). Rows are `b` and its count, for each `b` with one or more.
pub struct DegreeCount {
    pub types: Vec<u32>,
    /// From `b` back to `a`.
    pub dir: quiver_storage::Direction,
    pub label: Option<u32>,
    /// The next node to look at.
    pub next: u64,
}

impl Op for DegreeCount {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let g = &cx.env.g;
        let n = g.n_nodes();
        let (mut nodes, mut counts) = (Vec::new(), Vec::new());
        while self.next < n && nodes.len() < BATCH_ROWS {
            let b = self.next;
            self.next += 1;
            if let Some(l) = self.label {
                if !g.has_label(b, l)? {
                    continue;
                }
            }
            let mut c = 0;
            for &t in &self.types {
                c += g.segment_degree(t, b, self.dir)?;
            }
            if c > 0 {
                nodes.push(Value::Node(b));
                counts.push(Value::Int(c as i64));
            }
        }
        Ok((!nodes.is_empty()).then(|| Batch {
            len: nodes.len(),
            cols: vec![nodes, counts],
        }))
    }
}
