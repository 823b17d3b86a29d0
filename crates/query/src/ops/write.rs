//! Updating operators: CREATE, MERGE, SET, REMOVE, DELETE.
//!
//! Each writes through the statement's transaction ([`Cx::tx`]) and, after a batch of
//! rows, publishes the transaction's newest delta to the [`Graph`](crate::graph::Graph) so that
//! later clauses (and RETURN) read what was written.
//!
//! When an earlier clause of the statement reads the graph by scanning or expanding, the
//! operator is *eager*: it takes all of its input before writing anything, so that the
//! reads see the graph as it was when they started (openCypher's clause-at-a-time
//! semantics: `MATCH (a)-->(b) CREATE (b)-[:X]->(a)` must not meet its own edges). Input
//! that reads nothing of the graph (LOAD CSV, UNWIND, seeks by key) streams.

use crate::batch::Batch;
use crate::error::QueryError;
use crate::expr::{eval, CExpr, Env};
use crate::ops::{account, ArgCell, BoxOp, Cx, Op};
use crate::value::{PathVal, Value};
use quiver_common::memory::Grant;
use quiver_cypher::Detail;
use quiver_engine::delta::{KeyVal, Props};
use quiver_engine::Txn;
use std::collections::VecDeque;
use std::sync::Arc;

/// The input of an updating operator, taken whole first when `eager`.
pub struct Feed {
    pub input: BoxOp,
    pub eager: bool,
    buffered: Option<VecDeque<Batch>>,
    grant: Option<Grant>,
    peak: u64,
    name: &'static str,
}

impl Feed {
    pub fn new(input: BoxOp, eager: bool, name: &'static str) -> Feed {
        Feed {
            input,
            eager,
            buffered: None,
            grant: None,
            peak: 0,
            name,
        }
    }

    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        if !self.eager {
            return self.input.next(cx);
        }
        if self.buffered.is_none() {
            let mut q = VecDeque::new();
            let mut bytes = 0u64;
            let mut grant = cx
                .budget
                .try_grant(0, self.name)
                .map_err(|_| QueryError::Argument("memory budget".into()))?;
            // (Every row is read: full batches.)
            let want = std::mem::replace(&mut cx.want, crate::batch::BATCH_ROWS);
            while let Some(b) = self.input.next(cx)? {
                bytes += b.bytes() as u64;
                account(&mut grant, bytes, self.name)?;
                q.push_back(b);
            }
            cx.want = want;
            self.peak = self.peak.max(grant.bytes());
            self.grant = Some(grant);
            self.buffered = Some(q);
        }
        match self.buffered.as_mut().and_then(|q| q.pop_front()) {
            Some(b) => Ok(Some(b)),
            None => {
                // Drained: under an Argument (a CALL body, a MERGE), the next argument
                // batch is read afresh.
                self.buffered = None;
                self.grant = None;
                Ok(None)
            }
        }
    }

    fn peak(&self) -> u64 {
        self.peak
    }
}

pub(crate) fn tx<'a>(cx: &'a mut Cx) -> Result<&'a mut Txn, QueryError> {
    cx.tx.as_deref_mut().ok_or_else(|| {
        QueryError::Unsupported("this statement cannot write here (a read-only context)".into())
    })
}

/// Makes the transaction's writes visible to the rest of the statement.
fn publish(cx: &mut Cx) {
    if let Some(t) = cx.tx.as_deref() {
        cx.env.g.publish(Arc::new(t.work.clone()));
    }
}

/// A property map from a map value (nulls dropped; a node or relationship gives its
/// properties, as in `SET n = m`).
fn to_props(env: &Env, v: Value, what: &str) -> Result<Props, QueryError> {
    let pairs: Vec<(Arc<str>, Value)> = match v {
        Value::Null => Vec::new(),
        Value::Map(m) => (*m).clone(),
        Value::Node(n) => env.g.node_props(n)?,
        Value::Rel(r) => env.g.rel_props(&r)?,
        other => {
            return Err(QueryError::ty(format!(
                "{what} expects a map of properties, got {}",
                other.type_name()
            )))
        }
    };
    let mut out: Props = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        if !v.is_null() {
            match out.iter_mut().find(|(x, _)| *x == k) {
                Some(e) => e.1 = v,
                None => out.push((k, v)),
            }
        }
    }
    Ok(out)
}

/// One node or relationship of a CREATE (or of MERGE's create branch).
pub enum CreateStep {
    Node {
        slot: usize,
        labels: Vec<Arc<str>>,
        /// `(:$(e))`: more labels, evaluated per row.
        dyn_labels: Vec<CExpr>,
        props: Option<PropsExpr>,
    },
    Rel {
        slot: usize,
        ty: Arc<str>,
        /// `-[:$(e)]->`: the type, evaluated per row (`ty` is empty then).
        dyn_ty: Option<CExpr>,
        src: usize,
        dst: usize,
        props: Option<PropsExpr>,
    },
    Path {
        slot: usize,
        nodes: Vec<usize>,
        rels: Vec<usize>,
    },
    /// Makes what this CREATE made so far visible to the reads of the next step's
    /// properties (`CREATE (a {id: 0}), (:B {ref: a.id})`); planned only where a
    /// step reads an entity the same CREATE made.
    Publish,
}

fn node_of(v: &Value, what: &str) -> Result<u64, QueryError> {
    match v {
        Value::Node(n) => Ok(*n),
        other => Err(QueryError::ty(format!(
            "{what} must be a node, got {}",
            other.type_name()
        ))),
    }
}

/// The properties of a created node or relationship: a map literal's keys are made once
/// at plan time, so that creating an entity allocates its property list once, sized, and
/// evaluates only the values (no map value, no key strings per row).
pub enum PropsExpr {
    /// `{k: expr, ...}` with distinct keys (the last of a repeated key wins, as in a map).
    Literal(Vec<(Arc<str>, CExpr)>),
    /// Any other expression that gives a map (a parameter, `row`).
    Any(CExpr),
}

impl PropsExpr {
    pub fn new(e: CExpr) -> PropsExpr {
        match e {
            CExpr::Map(items) => {
                let mut out: Vec<(Arc<str>, CExpr)> = Vec::with_capacity(items.len());
                for (k, v) in items {
                    match out.iter_mut().find(|(x, _)| **x == *k) {
                        Some(e) => e.1 = v,
                        None => out.push((k, v)),
                    }
                }
                PropsExpr::Literal(out)
            }
            e => PropsExpr::Any(e),
        }
    }
}

/// The property map of a created node or relationship.
fn create_props(
    cx: &Cx,
    e: Option<&PropsExpr>,
    b: &Batch,
    row: usize,
) -> Result<Props, QueryError> {
    let mut locals = Vec::new();
    match e {
        Some(PropsExpr::Literal(items)) => {
            let mut out: Props = Vec::with_capacity(items.len());
            for (k, e) in items {
                let v = eval(&cx.env, e, b, row, &mut locals)?;
                if !v.is_null() {
                    out.push((k.clone(), v));
                }
            }
            Ok(out)
        }
        Some(PropsExpr::Any(e)) => {
            let v = eval(&cx.env, e, b, row, &mut locals)?;
            to_props(&cx.env, v, "CREATE")
        }
        None => Ok(Vec::new()),
    }
}

/// MERGE on a null property value: it could never match what it would create (null
/// equals nothing), so it is an error rather than a node made on every run.
fn merge_nulls(cx: &Cx, steps: &[CreateStep], b: &Batch) -> Result<(), QueryError> {
    let mut locals = Vec::new();
    for s in steps {
        let (CreateStep::Node {
            props: Some(PropsExpr::Literal(items)),
            ..
        }
        | CreateStep::Rel {
            props: Some(PropsExpr::Literal(items)),
            ..
        }) = s
        else {
            continue;
        };
        for (k, e) in items {
            if eval(&cx.env, e, b, 0, &mut locals)?.is_null() {
                return Err(QueryError::Semantic(Detail::MergeReadOwnWrites, format!(
                    "MERGE cannot use a null value for property `{k}`: null equals nothing, so the pattern could never match what MERGE creates; filter the nulls out first (WHERE x IS NOT NULL)"
                )));
            }
        }
    }
    Ok(())
}

fn create_row(
    cx: &mut Cx,
    steps: &[CreateStep],
    b: &mut Batch,
    row: usize,
) -> Result<(), QueryError> {
    for s in steps {
        match s {
            CreateStep::Node {
                slot,
                labels,
                dyn_labels,
                props,
            } => {
                let p = create_props(cx, props.as_ref(), b, row)?;
                let mut labels = labels.clone();
                if !dyn_labels.is_empty() {
                    let mut named = Vec::new();
                    for e in dyn_labels {
                        let v = eval(&cx.env, e, b, row, &mut Vec::new())?;
                        crate::expr::dyn_names(&v, "label", &mut named)?;
                    }
                    for l in named {
                        if !labels.contains(&l) {
                            labels.push(l);
                        }
                    }
                }
                let id = tx(cx)?.create_node(labels, p)?;
                check_unique(cx, id)?;
                b.cols[*slot][row] = Value::Node(id);
            }
            CreateStep::Rel {
                slot,
                ty,
                dyn_ty,
                src,
                dst,
                props,
            } => {
                let p = create_props(cx, props.as_ref(), b, row)?;
                let a = node_of(&b.cols[*src][row], "the start of a created relationship")?;
                let z = node_of(&b.cols[*dst][row], "the end of a created relationship")?;
                let ty = match dyn_ty {
                    None => ty.clone(),
                    Some(e) => {
                        let v = eval(&cx.env, e, b, row, &mut Vec::new())?;
                        let mut named = Vec::new();
                        crate::expr::dyn_names(&v, "relationship type", &mut named)?;
                        match <[Arc<str>; 1]>::try_from(named) {
                            Ok([t]) => t,
                            Err(named) => {
                                return Err(QueryError::InvalidArgument(
                                    Detail::InvalidArgumentValue,
                                    format!(
                                    "a created relationship has exactly one type; $(...) gave {}",
                                    named.len()
                                ),
                                ))
                            }
                        }
                    }
                };
                let r = tx(cx)?.create_rel(&ty, a, z, p)?;
                b.cols[*slot][row] = Value::Rel(r);
            }
            CreateStep::Publish => publish(cx),
            CreateStep::Path { slot, nodes, rels } => {
                let mut p = PathVal {
                    nodes: Vec::new(),
                    rels: Vec::new(),
                };
                for &n in nodes {
                    p.nodes.push(node_of(&b.cols[n][row], "a path node")?);
                }
                for &r in rels {
                    if let Value::Rel(x) = b.cols[r][row] {
                        p.rels.push(x);
                    }
                }
                b.cols[*slot][row] = Value::Path(Arc::new(p));
            }
        }
    }
    Ok(())
}

/// Widens `b` to `width` columns of nulls.
fn widen(b: &mut Batch, width: usize) {
    while b.cols.len() < width {
        b.cols.push(vec![Value::Null; b.len]);
    }
}

pub struct Create {
    feed: Feed,
    steps: Vec<CreateStep>,
    width: usize,
    /// The planner found the direct path possible (lone nodes, or relationships between
    /// matched nodes; literal keys; nothing after it reads them); it is taken unless
    /// the statement runs inside BEGIN.
    bulk: bool,
    /// Per step, its shape in the transaction's bulk write.
    shapes: Vec<usize>,
    values: Vec<Value>,
}

impl Create {
    pub fn new(feed: Feed, steps: Vec<CreateStep>, width: usize, bulk: bool) -> Create {
        Create {
            feed,
            steps,
            width,
            bulk,
            shapes: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Creates the batch's nodes or relationships through the transaction's bulk write:
    /// values only, in each shape's key order; no node or relationship value is made,
    /// as nothing reads it.
    fn bulk_rows(&mut self, cx: &mut Cx, b: &Batch) -> Result<(), QueryError> {
        fn keys_of(props: &Option<PropsExpr>) -> Vec<Arc<str>> {
            match props {
                Some(PropsExpr::Literal(items)) => items.iter().map(|(k, _)| k.clone()).collect(),
                _ => Vec::new(),
            }
        }
        if self.shapes.is_empty() {
            let t = tx(cx)?;
            for s in &self.steps {
                match s {
                    CreateStep::Node { labels, props, .. } => {
                        self.shapes.push(t.bulk_shape(labels, &keys_of(props)))
                    }
                    CreateStep::Rel { ty, props, .. } => {
                        self.shapes.push(t.bulk_rel_shape(ty, &keys_of(props)))
                    }
                    CreateStep::Path { .. } | CreateStep::Publish => {
                        return Err(QueryError::Argument(
                            "internal: a path cannot be created on the direct path".into(),
                        ))
                    }
                }
            }
        }
        let mut locals = Vec::new();
        for row in 0..b.len {
            for (s, &shape) in self.steps.iter().zip(&self.shapes) {
                self.values.clear();
                let (CreateStep::Node { props, .. } | CreateStep::Rel { props, .. }) = s else {
                    continue;
                };
                if let Some(PropsExpr::Literal(items)) = props {
                    for (_, e) in items {
                        self.values.push(eval(&cx.env, e, b, row, &mut locals)?);
                    }
                }
                match s {
                    CreateStep::Rel { src, dst, .. } => {
                        let a = node_of(&b.cols[*src][row], "the start of a created relationship")?;
                        let z = node_of(&b.cols[*dst][row], "the end of a created relationship")?;
                        tx(cx)?.bulk_rel(shape, a, z, &self.values)?;
                    }
                    _ => tx(cx)?.bulk_node(shape, &self.values)?,
                }
            }
        }
        Ok(())
    }
}

impl Op for Create {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let direct = self.bulk && !cx.explicit_tx;
        if direct {
            // What the direct path writes is seen by nobody before its commit, so the
            // reads before it need not be buffered whole.
            self.feed.eager = false;
        }
        let Some(mut b) = self.feed.next(cx)? else {
            return Ok(None);
        };
        widen(&mut b, self.width);
        if direct {
            self.bulk_rows(cx, &b)?;
            // Nothing after a bulk CREATE reads the rows: they go, and the batch keeps
            // only its length (for the row count).
            crate::batch::drop_later(std::mem::take(&mut b.cols));
            b.cols = (0..self.width).map(|_| vec![Value::Null; b.len]).collect();
        } else {
            for row in 0..b.len {
                create_row(cx, &self.steps, &mut b, row)?;
            }
            publish(cx);
        }
        cx.check_cancel()?;
        Ok(Some(b))
    }
    fn mem_peak(&self) -> u64 {
        self.feed.peak()
    }
}

/// A compiled SET or REMOVE item.
pub enum SetOp {
    Prop {
        target: CExpr,
        key: Arc<str>,
        value: CExpr,
    },
    /// `x[key] = value`: the key evaluated per row (a string).
    DynProp {
        target: CExpr,
        key: CExpr,
        value: CExpr,
    },
    /// `n = map` (`replace`) or `n += map`.
    Map {
        target: CExpr,
        value: CExpr,
        replace: bool,
    },
    Labels {
        target: CExpr,
        labels: Vec<Arc<str>>,
        /// `$(expr)` labels: each a string or a list of strings, per row.
        dynamic: Vec<CExpr>,
        add: bool,
    },
}

/// Refuses node `n` (as this transaction has it now) when it shares a key of a uniqueness
/// constraint with another node: one this transaction sees (segments and its delta) or
/// one committed since it started.
pub fn check_unique(cx: &mut Cx, n: u64) -> Result<(), QueryError> {
    let Some(ix) = cx.indexes else {
        return Ok(());
    };
    if ix.unique.is_empty() && ix.composite.is_empty() {
        return Ok(());
    }
    let g = cx.env.g;
    let t = tx(cx)?;
    let Some(rec) = t.work.nodes.get(&n).cloned() else {
        return Ok(());
    };
    if rec.deleted {
        return Ok(());
    }
    let head = t.store().snapshot();
    let labels = rec.labels_of(g.db, n)?;
    for (label, prop) in &ix.unique {
        if !labels.contains(label) {
            continue;
        }
        let v = rec.value_of(g.db, n, prop)?;
        if v.is_null() {
            continue;
        }
        let v = &v;
        let Some(kv) = KeyVal::of(v) else {
            continue;
        };
        t.claim_key(label, prop, &kv)?;
        let mut cands = t.work.index_lookup(prop, v);
        cands.extend(head.delta.index_lookup(prop, v));
        if let Some(pi) = ix.get(label, prop) {
            cands.extend(pi.lookup(g, v)?);
        }
        for c in cands {
            if c == n {
                continue;
            }
            let holds = |d: &quiver_engine::Delta| -> Result<bool, QueryError> {
                Ok(match d.nodes.get(&c) {
                    Some(r) => {
                        !r.deleted
                            && r.labels_of(g.db, c)?.contains(label)
                            && KeyVal::of(&r.value_of(g.db, c, prop)?).as_ref() == Some(&kv)
                    }
                    // An unchanged segment node found through the index has the key.
                    None => c < d.base_nodes,
                })
            };
            let deleted_here = t.work.nodes.get(&c).is_some_and(|r| r.deleted);
            if holds(&t.work)? || (!deleted_here && holds(&head.delta)?) {
                return Err(QueryError::Engine(quiver_engine::EngineError::Constraint(format!(
                    "Node({c}) already exists with label `{label}` and property `{prop}` = {} (the uniqueness constraint on :{label}({prop}) allows one)",
                    crate::render::text(g, v)?
                ))));
            }
        }
    }
    for (label, props) in &ix.composite {
        if !labels.contains(label) {
            continue;
        }
        let mut vals = Vec::with_capacity(props.len());
        for p in props {
            vals.push(rec.value_of(g.db, n, p)?);
        }
        // A node missing one of the properties is not held to it, as in Neo4j.
        let Some(keys) = vals.iter().map(KeyVal::of).collect::<Option<Vec<_>>>() else {
            continue;
        };
        if vals.iter().any(Value::is_null) {
            continue;
        }
        // Claimed by the first property's value: two transactions writing nodes that
        // share it conflict (retryably) rather than both commit a duplicate.
        t.claim_key(label, &props[0], &keys[0])?;
        let mut cands = t.work.index_lookup(&props[0], &vals[0]);
        cands.extend(head.delta.index_lookup(&props[0], &vals[0]));
        match ix.get(label, &props[0]) {
            Some(pi) => cands.extend(pi.lookup(g, &vals[0])?),
            // No index (a checkpoint dropped one it could not rebuild): every node.
            None => cands.extend(0..g.segment_nodes()),
        }
        cands.sort_unstable();
        cands.dedup();
        for c in cands {
            if c == n {
                continue;
            }
            let holds = |d: &quiver_engine::Delta| -> Result<bool, QueryError> {
                let r = match d.nodes.get(&c) {
                    Some(r) if r.deleted => return Ok(false),
                    Some(r) => Some(r),
                    None if c < d.base_nodes => None,
                    None => return Ok(false),
                };
                let has_label = match r {
                    Some(r) => r.labels_of(g.db, c)?.contains(label),
                    None => g
                        .label_id(label)
                        .is_some_and(|l| g.has_label(c, l).unwrap_or(false)),
                };
                if !has_label {
                    return Ok(false);
                }
                for (p, k) in props.iter().zip(&keys) {
                    let v = match r {
                        Some(r) => r.value_of(g.db, c, p)?,
                        None => g.node_prop(c, p)?,
                    };
                    if KeyVal::of(&v).as_ref() != Some(k) {
                        return Ok(false);
                    }
                }
                Ok(true)
            };
            let deleted_here = t.work.nodes.get(&c).is_some_and(|r| r.deleted);
            if holds(&t.work)? || (!deleted_here && holds(&head.delta)?) {
                let shown: Vec<String> = props
                    .iter()
                    .zip(&vals)
                    .map(|(p, v)| Ok(format!("`{p}` = {}", crate::render::text(g, v)?)))
                    .collect::<Result<_, QueryError>>()?;
                return Err(QueryError::Engine(quiver_engine::EngineError::Constraint(format!(
                    "Node({c}) already exists with label `{label}` and properties {} (the uniqueness constraint on (:{label} {{{}}}) allows one)",
                    shown.join(", "),
                    props.join(", ")
                ))));
            }
        }
    }
    Ok(())
}

fn set_prop(cx: &mut Cx, target: &Value, key: &Arc<str>, v: Value) -> Result<(), QueryError> {
    match target {
        Value::Null => Ok(()),
        Value::Node(n) => {
            tx(cx)?.set_node_prop(*n, key, v)?;
            if cx.indexes.is_some_and(|ix| ix.constrains(key)) {
                check_unique(cx, *n)?;
            }
            Ok(())
        }
        Value::Rel(r) => Ok(tx(cx)?.set_rel_prop(r, key, v)?),
        other => Err(QueryError::ty(format!(
            "SET and REMOVE need a node or relationship, got {}",
            other.type_name()
        ))),
    }
}

fn current_props(cx: &Cx, target: &Value) -> Result<Vec<(Arc<str>, Value)>, QueryError> {
    Ok(match target {
        Value::Node(n) => cx.env.g.node_props(*n)?,
        Value::Rel(r) => cx.env.g.rel_props(r)?,
        _ => Vec::new(),
    })
}

pub fn apply_set(cx: &mut Cx, items: &[SetOp], b: &Batch, row: usize) -> Result<(), QueryError> {
    let mut locals = Vec::new();
    for it in items {
        match it {
            SetOp::Prop { target, key, value } => {
                let t = eval(&cx.env, target, b, row, &mut locals)?;
                let v = eval(&cx.env, value, b, row, &mut locals)?;
                set_prop(cx, &t, key, v)?;
            }
            SetOp::DynProp { target, key, value } => {
                let t = eval(&cx.env, target, b, row, &mut locals)?;
                let key = match eval(&cx.env, key, b, row, &mut locals)? {
                    Value::Str(k) if !k.is_empty() => k,
                    other => {
                        return Err(QueryError::ty(format!(
                            "a property key in SET x[key] must be a non-empty string, got {}",
                            other.type_name()
                        )))
                    }
                };
                let v = eval(&cx.env, value, b, row, &mut locals)?;
                set_prop(cx, &t, &key, v)?;
            }
            SetOp::Map {
                target,
                value,
                replace,
            } => {
                let t = eval(&cx.env, target, b, row, &mut locals)?;
                if t.is_null() {
                    continue;
                }
                let raw = eval(&cx.env, value, b, row, &mut locals)?;
                // `+=` with a null value removes the key; keep the nulls for that.
                let pairs: Vec<(Arc<str>, Value)> = match &raw {
                    Value::Map(m) => m.to_vec(),
                    _ => to_props(&cx.env, raw.clone(), "SET")?,
                };
                if *replace {
                    for (k, _) in current_props(cx, &t)? {
                        if !pairs.iter().any(|(x, v)| **x == *k && !v.is_null()) {
                            set_prop(cx, &t, &k, Value::Null)?;
                        }
                    }
                }
                for (k, v) in pairs {
                    if *replace && v.is_null() {
                        continue;
                    }
                    set_prop(cx, &t, &k, v)?;
                }
            }
            SetOp::Labels {
                target,
                labels,
                dynamic,
                add,
            } => match eval(&cx.env, target, b, row, &mut locals)? {
                Value::Null => {}
                Value::Node(n) => {
                    let mut named: Vec<Arc<str>> = Vec::new();
                    for e in dynamic {
                        let v = eval(&cx.env, e, b, row, &mut locals)?;
                        crate::expr::dyn_names(&v, "label", &mut named)?;
                    }
                    for l in labels.iter().chain(&named) {
                        tx(cx)?.set_label(n, l, *add)?;
                    }
                    if *add {
                        check_unique(cx, n)?;
                    }
                }
                other => {
                    return Err(QueryError::ty(format!(
                        "labels can be set on nodes only, got {}",
                        other.type_name()
                    )))
                }
            },
        }
    }
    Ok(())
}

pub struct SetProps {
    pub feed: Feed,
    pub items: Vec<SetOp>,
}

impl Op for SetProps {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let Some(b) = self.feed.next(cx)? else {
            return Ok(None);
        };
        for row in 0..b.len {
            apply_set(cx, &self.items, &b, row)?;
        }
        publish(cx);
        cx.check_cancel()?;
        Ok(Some(b))
    }
    fn mem_peak(&self) -> u64 {
        self.feed.peak()
    }
}

pub struct Delete {
    pub feed: Feed,
    pub exprs: Vec<CExpr>,
    pub detach: bool,
}

/// The nodes and relationships a DELETE value names (paths and lists opened).
fn delete_targets(
    v: Value,
    nodes: &mut Vec<u64>,
    rels: &mut Vec<crate::value::RelRef>,
) -> Result<(), QueryError> {
    match v {
        Value::Null => {}
        Value::Node(n) => nodes.push(n),
        Value::Rel(r) => rels.push(r),
        Value::Path(p) => {
            rels.extend(p.rels.iter().copied());
            nodes.extend(p.nodes.iter().copied());
        }
        Value::List(l) => {
            for x in l.iter() {
                delete_targets(x.clone(), nodes, rels)?;
            }
        }
        other => {
            return Err(QueryError::ty(format!(
                "DELETE needs a node, relationship or path, got {}",
                other.type_name()
            )))
        }
    }
    Ok(())
}

impl Op for Delete {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let Some(b) = self.feed.next(cx)? else {
            return Ok(None);
        };
        // What the whole batch deletes: relationships first, then nodes, so that
        // `DELETE p1, p2` of paths sharing nodes, or a node and its relationship named
        // on different rows, is checked once everything named is gone.
        let mut locals = Vec::new();
        let (mut nodes, mut rels) = (Vec::new(), Vec::new());
        for row in 0..b.len {
            for e in &self.exprs {
                let v = eval(&cx.env, e, &b, row, &mut locals)?;
                delete_targets(v, &mut nodes, &mut rels)?;
            }
        }
        rels.sort_by_key(|r| (r.ty, r.eid));
        rels.dedup_by_key(|r| (r.ty, r.eid));
        nodes.sort_unstable();
        nodes.dedup();
        for r in &rels {
            tx(cx)?.delete_rel(r)?;
        }
        for &n in &nodes {
            tx(cx)?.delete_node(n, self.detach)?;
        }
        publish(cx);
        cx.check_cancel()?;
        Ok(Some(b))
    }
    fn mem_peak(&self) -> u64 {
        self.feed.peak()
    }
}

/// MERGE: per input row, the pattern's matches (with ON MATCH SET) or, when there are
/// none, the pattern created (with ON CREATE SET). Each row sees what earlier rows
/// created, so `UNWIND [1, 1] AS x MERGE (:N {v: x})` creates one node.
pub struct Merge {
    pub feed: Feed,
    pub arg: ArgCell,
    pub sub: BoxOp,
    pub create: Vec<CreateStep>,
    pub on_create: Vec<SetOp>,
    pub on_match: Vec<SetOp>,
    pub width: usize,
    pub out: VecDeque<Batch>,
}

impl Op for Merge {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        loop {
            if let Some(b) = self.out.pop_front() {
                return Ok(Some(b));
            }
            let Some(input) = self.feed.next(cx)? else {
                return Ok(None);
            };
            let mut rows: Vec<Vec<Value>> = Vec::new();
            for row in 0..input.len {
                let mut one = Batch::empty(input.width());
                one.push_row_from(&input, row, &[]);
                *self.arg.borrow_mut() = Some(one.clone());
                let mut found = false;
                while let Some(m) = self.sub.next(cx)? {
                    let mut m = m;
                    widen(&mut m, self.width);
                    for r in 0..m.len {
                        apply_set(cx, &self.on_match, &m, r)?;
                    }
                    found |= m.len > 0;
                    rows.extend((0..m.len).map(|r| m.row(r)));
                }
                if !found {
                    widen(&mut one, self.width);
                    merge_nulls(cx, &self.create, &one)?;
                    create_row(cx, &self.create, &mut one, 0)?;
                    publish(cx);
                    apply_set(cx, &self.on_create, &one, 0)?;
                    rows.push(one.row(0));
                }
                publish(cx);
            }
            cx.check_cancel()?;
            self.out.extend(Batch::chunks(self.width, rows));
        }
    }
    fn mem_peak(&self) -> u64 {
        self.feed.peak()
    }
}

/// `CALL { body } IN TRANSACTIONS OF n ROWS`: the body runs on the input rows, and the
/// statement's transaction commits after every `n` of them and goes on as a new one, so
/// a load of any size never holds more than a batch of uncommitted writes.
///
/// A body without RETURN runs on whole input batches and the input rows pass through; a
/// body with RETURN runs once per row and each row gains its returned columns. When a
/// batch fails, ON ERROR FAIL (the default) stops the statement (the batches before stay
/// committed), CONTINUE rolls the batch back and goes on with the next, BREAK rolls it
/// back and stops reading.
///
/// Between two batches a checkpoint may publish a new generation (the statement's own,
/// when the log or the delta passed its threshold, or another session's). The body is
/// then planned again on it ([`Moved`]); the input goes on reading the generation the
/// statement began on, as it was after the last batch before the move.
pub struct CallInTx {
    pub input: BoxOp,
    pub arg: ArgCell,
    pub sub: BoxOp,
    pub rows: Option<CExpr>,
    pub on_error: quiver_cypher::ast::OnError,
    pub returns: bool,
    replan: Box<dyn super::Replanner>,
    /// The body on the newest generation, once the transaction moved past the one the
    /// statement was planned on.
    moved: Option<Moved>,
    /// The statement reads the graph outside the body (its input matches, or clauses
    /// follow the CALL): after a move, the statement's writes are replayed onto the
    /// generation it began on ([`CallInTx::shadow`]), so those reads see them.
    reads_outside: bool,
    /// The statement's graph as of its first generation plus every batch's writes
    /// (kept only after a move, and only when `reads_outside`: it holds what the
    /// checkpoints took out of the newest delta).
    shadow: Option<quiver_engine::Delta>,
    batch_rows: u64,
    since_commit: u64,
    /// Input rows still to skip after a failed batch (ON ERROR CONTINUE).
    skip: u64,
    carry: Option<Batch>,
    finished: bool,
    /// Rows of the batch not committed yet: what reads them outside the body must see
    /// the batch's writes, which after a move are in the shadow only once committed.
    pending: VecDeque<Batch>,
    /// Rows to emit.
    ready: VecDeque<Batch>,
}

self_cell::self_cell!(
    /// A generation's segments and the statement's graph over them (the graph borrows
    /// the segments it reads).
    struct MovedGraph {
        owner: Arc<quiver_storage::Database>,
        #[covariant]
        dependent: Graph,
    }
);

/// The body of `CALL { } IN TRANSACTIONS` planned on a newer generation than the
/// statement's.
struct Moved {
    sub: BoxOp,
    cell: ArgCell,
    indexes: crate::index::IndexSet,
    stats: Vec<crate::ops::OpStats>,
    graph: MovedGraph,
}

use crate::graph::Graph;

/// Runs `sub` on `b` through `cell`; the rows to emit (see [`CallInTx`]).
/// The rows of each transaction of `CALL { } IN TRANSACTIONS [OF rows ROWS]` (1,000
/// by default).
pub(crate) fn batch_rows(env: &Env, rows: Option<&CExpr>) -> Result<u64, QueryError> {
    match rows {
        None => Ok(1000),
        Some(e) => match eval(env, e, &Batch::unit(), 0, &mut Vec::new())? {
            Value::Int(n) if n > 0 => Ok(n as u64),
            v => Err(QueryError::Argument(format!(
                "IN TRANSACTIONS OF n ROWS needs a positive integer, got {v:?}"
            ))),
        },
    }
}

fn run_body(
    sub: &mut BoxOp,
    cell: &ArgCell,
    returns: bool,
    cx: &mut Cx,
    b: &Batch,
) -> Result<Batch, QueryError> {
    if !returns {
        *cell.borrow_mut() = Some(b.clone());
        while sub.next(cx)?.is_some() {}
        return Ok(b.clone());
    }
    let mut rows = Vec::new();
    let mut width = b.width();
    for row in 0..b.len {
        let mut one = Batch::empty(b.width());
        one.push_row_from(b, row, &[]);
        *cell.borrow_mut() = Some(one);
        while let Some(m) = sub.next(cx)? {
            width = b.width() + m.width();
            for r in 0..m.len {
                let mut v = b.row(row);
                v.extend(m.row(r));
                rows.push(v);
            }
        }
    }
    let mut out = Batch::empty(width);
    for r in rows {
        out.push_row(r);
    }
    Ok(out)
}

impl CallInTx {
    pub(crate) fn new(
        input: BoxOp,
        arg: ArgCell,
        sub: BoxOp,
        rows: Option<CExpr>,
        on_error: quiver_cypher::ast::OnError,
        returns: bool,
        replan: Box<dyn super::Replanner>,
        reads_outside: bool,
    ) -> CallInTx {
        CallInTx {
            input,
            arg,
            sub,
            rows,
            on_error,
            returns,
            replan,
            moved: None,
            reads_outside,
            shadow: None,
            batch_rows: 0,
            since_commit: 0,
            skip: 0,
            carry: None,
            finished: false,
            pending: VecDeque::new(),
            ready: VecDeque::new(),
        }
    }

    /// Runs the body on `b`; the rows to emit.
    fn body(&mut self, cx: &mut Cx, b: &Batch) -> Result<Batch, QueryError> {
        let Some(m) = self.moved.as_mut() else {
            return run_body(&mut self.sub, &self.arg, self.returns, cx, b);
        };
        let Moved {
            sub,
            cell,
            indexes,
            stats,
            graph,
        } = m;
        let returns = self.returns;
        let first = self.replan.first_id();
        graph.with_dependent(|_, g| {
            let mut inner = Cx {
                env: Env {
                    g,
                    budget: Some(cx.budget.clone()),
                },
                budget: cx.budget.clone(),
                stats: std::mem::take(stats),
                cancel: cx.cancel,
                deadline: cx.deadline,
                tx: cx.tx.as_deref_mut(),
                explicit_tx: cx.explicit_tx,
                indexes: Some(indexes),
                load: std::mem::take(&mut cx.load),
                want: cx.want,
                temp_dir: cx.temp_dir.clone(),
                catalog: cx.catalog.clone(),
            };
            let r = run_body(sub, cell, returns, &mut inner, b);
            cx.load = std::mem::take(&mut inner.load);
            *stats = std::mem::take(&mut inner.stats);
            // PROFILE: the body's operators keep their rows (its plan has the same
            // shape on the new generation, or the counts are left as they were).
            if stats.len() == cx.stats.len() {
                for (i, s) in stats.iter_mut().enumerate().skip(first) {
                    let t = &mut cx.stats[i];
                    t.rows += std::mem::take(&mut s.rows);
                    t.batches += std::mem::take(&mut s.batches);
                    t.nanos += std::mem::take(&mut s.nanos);
                    t.peak_bytes = t.peak_bytes.max(s.peak_bytes);
                }
            }
            r
        })
    }

    /// Publishes the transaction's newest delta to the graph the body reads, and plans
    /// the body again when the transaction moved to a newer generation.
    fn follow(&mut self, cx: &mut Cx) -> Result<(), QueryError> {
        let planned = match &self.moved {
            Some(m) => m.graph.borrow_owner().manifest().generation,
            None => cx.env.g.db.manifest().generation,
        };
        let g = cx.env.g;
        let t = tx(cx)?;
        let now = t.snap.db.manifest().generation;
        if now == planned {
            let d = Arc::new(t.work.clone());
            match &self.moved {
                Some(m) => m.graph.borrow_dependent().publish(d),
                None => g.publish(d),
            }
            return Ok(());
        }
        if self.reads_outside && self.shadow.is_none() {
            // The statement's graph holds every write so far (the body published them
            // there until now).
            self.shadow = g.delta().map(|d| (**d).clone());
        }
        let db = t.snap.db.clone();
        let delta = Arc::new(t.work.clone());
        let indexes = crate::index::IndexSet::load(&db);
        let graph = MovedGraph::new(db, |db| {
            let moved = Graph::with_delta(db, Some(delta), true);
            moved.share_clock(g);
            moved
        });
        let (sub, cell, n) = graph.with_dependent(|_, g| self.replan.plan(g, &indexes))?;
        let stats = vec![crate::ops::OpStats::default(); n];
        self.moved = Some(Moved {
            sub,
            cell,
            indexes,
            stats,
            graph,
        });
        Ok(())
    }

    /// Commits the batch; its rows become ready to emit.
    fn commit(&mut self, cx: &mut Cx) -> Result<(), QueryError> {
        self.commit_batch(cx)?;
        self.ready.append(&mut self.pending);
        Ok(())
    }

    fn commit_batch(&mut self, cx: &mut Cx) -> Result<(), QueryError> {
        let ops = match self.shadow.is_some() {
            true => tx(cx)?.batch_ops(),
            false => Vec::new(),
        };
        let ts = tx(cx)?.commit_continue()?;
        if let Some(sh) = self.shadow.as_mut() {
            let g = cx.env.g;
            for op in &ops {
                sh.apply(g.db, op, ts)
                    .map_err(|e| QueryError::Engine(quiver_engine::EngineError::Apply(e)))?;
            }
            g.publish(Arc::new(sh.clone()));
        }
        self.follow(cx)?;
        self.since_commit = 0;
        Ok(())
    }
}

impl Op for CallInTx {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        use quiver_cypher::ast::OnError;
        if self.batch_rows == 0 {
            if cx.explicit_tx {
                // Neo4j's words, which clients (LangChain) read to retry outside.
                return Err(QueryError::Semantic(
                    Detail::InvalidClauseComposition,
                    "A query with 'CALL { ... } IN TRANSACTIONS' can only be executed in an implicit transaction, but tried to execute in an explicit transaction (it commits as it goes; run it on its own, outside BEGIN ... COMMIT)".into(),
                ));
            }
            tx(cx)?.batched();
            self.batch_rows = batch_rows(&cx.env, self.rows.as_ref())?;
        }
        loop {
            if let Some(b) = self.ready.pop_front() {
                return Ok(Some(b));
            }
            if self.finished {
                return Ok(None);
            }
            let next = match self.carry.take() {
                Some(b) => Some(b),
                None => self.input.next(cx)?,
            };
            let Some(mut b) = next else {
                // The last batch commits when the statement commits.
                self.finished = true;
                if self.since_commit > 0 {
                    self.commit(cx)?;
                }
                continue;
            };
            if self.skip > 0 {
                let n = self.skip.min(b.len as u64);
                b.skip(n as usize);
                self.skip -= n;
                if b.len == 0 {
                    continue;
                }
            }
            let room = self.batch_rows - self.since_commit;
            if b.len as u64 > room {
                let mut rest = b.clone();
                rest.skip(room as usize);
                b.truncate(room as usize);
                self.carry = Some(rest);
            }
            self.since_commit += b.len as u64;
            match self.body(cx, &b) {
                Ok(out) => {
                    if out.len > 0 {
                        self.pending.push_back(out);
                    }
                    if self.since_commit >= self.batch_rows {
                        self.commit(cx)?;
                    } else if !self.reads_outside {
                        // Nothing reads the rows' entities: they need not wait for the
                        // commit (a batch of a big load is not held).
                        self.ready.append(&mut self.pending);
                    }
                    cx.check_cancel()?;
                }
                Err(e) if self.on_error == OnError::Fail || matches!(e, QueryError::Cancelled) => {
                    return Err(e)
                }
                Err(_) => {
                    tx(cx)?.rollback_continue()?;
                    self.follow(cx)?;
                    // The failed batch's rows are not emitted, and the rest of it is
                    // not run.
                    self.pending.clear();
                    let left = self.batch_rows - self.since_commit;
                    self.since_commit = 0;
                    if self.on_error == OnError::Break {
                        self.carry = None;
                        self.finished = true;
                        continue;
                    }
                    self.skip = left;
                }
            }
        }
    }
}
