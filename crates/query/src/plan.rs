//! The planner: a bound query to a tree of physical operators, and its description for
//! EXPLAIN / PROFILE.
//!
//! Rules, in order of what they save:
//! - **Anchor choice.** Each pattern starts at its cheapest node: one already bound, then
//!   an id-index seek (`{id: $x}` or `WHERE n.id = $x` on the imported `:ID` column), then
//!   a declared property index, then a label scan, then all nodes. The rest of the
//!   pattern is expanded from there, both ways.
//! - **Expansion over the CSR** in the written direction (the in-CSR for `<-`), and
//!   expand-into from the endpoint with the smaller degree when both ends are bound.
//! - **Filters pushed down**: each WHERE conjunct and inline property is applied right
//!   after the operator that binds its last variable.
//! - **Top-k** for ORDER BY with a constant LIMIT; **distinct on node ids** before a
//!   DISTINCT projection that depends only on nodes.
//! - **Bidirectional BFS** for shortestPath between bound endpoints.

use crate::error::QueryError;
use crate::expr::{compile_regex, CExpr, Func, PathPart, PatternPred, PredStep};
use crate::graph::Graph;
use crate::index::IndexSet;
use crate::ops::*;
use crate::value::Value;
use quiver_cypher::ast::*;
use quiver_cypher::bind::{is_aggregate, same};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

pub type Params = BTreeMap<String, Value>;

/// A range bound: the expression and whether it is inclusive.
type Bound = (Expr, bool);

/// One operator in the plan description.
#[derive(Debug, Clone)]
pub struct Desc {
    pub name: &'static str,
    pub detail: String,
    pub children: Vec<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Node,
    Rel,
    Other,
}

#[derive(Debug, Clone, Default)]
struct Scope {
    /// Visible variables: name, slot, kind.
    vars: Vec<(String, usize, Kind)>,
    width: usize,
}

impl Scope {
    fn get(&self, name: &str) -> Option<(usize, Kind)> {
        self.vars
            .iter()
            .rev()
            .find(|v| v.0 == name)
            .map(|v| (v.1, v.2))
    }

    fn bind(&mut self, name: &str, kind: Kind) -> usize {
        let slot = self.width;
        self.width += 1;
        self.vars.push((name.to_string(), slot, kind));
        slot
    }

    fn hidden(&mut self) -> usize {
        self.width += 1;
        self.width - 1
    }
}

/// A planned operator and its description's id.
pub struct P {
    pub op: BoxOp,
    pub id: usize,
}

/// See [`Planner::fusable_scan`].
struct Fused {
    /// The plan node the scan (and its filters) ended at.
    id: usize,
    ranges: Vec<ScanRange>,
    filter: Option<CExpr>,
    var: String,
}

pub struct Planner<'a, 'g, 'db> {
    fused: Option<Fused>,
    /// The last expansion that bound a new node: (plan node, node slot, its distinct
    /// switch), for pushing a DISTINCT on that node into it.
    /// A filter on that node alone keeps the push-down valid (it rejects every row of a
    /// node or none), so the plan node moves up past it.
    last_expand: Option<(usize, usize, Rc<std::cell::Cell<bool>>)>,
    g: &'g Graph<'db>,
    params: &'a Params,
    indexes: &'a IndexSet,
    pub descs: Vec<Desc>,
    locals: Vec<String>,
    max_locals: usize,
    anon: usize,
    /// An operator planned so far scans or expands (writes after it must be eager).
    reads_graph: bool,
    /// An earlier clause of the statement reads or writes the graph (a CREATE after
    /// one cannot take the direct path).
    touched: bool,
    /// Nothing follows the clauses being planned in the statement.
    tail: bool,
}

/// Names of anonymous pattern parts start with a space, which no user variable can.
fn is_hidden(name: &str) -> bool {
    name.starts_with(' ')
}

fn split_and(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Binary(BinOp::And, a, b) => {
            split_and(*a, out);
            split_and(*b, out);
        }
        e => out.push(e),
    }
}

/// Variables an expression reads (excluding list-comprehension variables).
fn free_vars(e: &Expr, bound: &mut Vec<String>, out: &mut Vec<String>) {
    match e {
        Expr::Var(n, _) => {
            if !bound.contains(n) {
                out.push(n.clone())
            }
        }
        Expr::ListComp {
            var,
            list,
            pred,
            map,
        } => {
            free_vars(list, bound, out);
            bound.push(var.clone());
            for x in [pred, map].into_iter().flatten() {
                free_vars(x, bound, out);
            }
            bound.pop();
        }
        Expr::PatternPred(p) => {
            for n in std::iter::once(&p.start).chain(p.steps.iter().map(|s| &s.1)) {
                if let Some(v) = &n.var {
                    out.push(v.clone())
                }
            }
        }
        e => e
            .children()
            .into_iter()
            .for_each(|x| free_vars(x, bound, out)),
    }
}

fn vars_of(e: &Expr) -> Vec<String> {
    let mut out = Vec::new();
    free_vars(e, &mut Vec::new(), &mut out);
    out
}

fn is_agg_call(e: &Expr) -> bool {
    matches!(e, Expr::CountStar) || matches!(e, Expr::Call { name, .. } if is_aggregate(name))
}

fn contains_agg(e: &Expr) -> bool {
    is_agg_call(e) || e.children().into_iter().any(contains_agg)
}

/// The aggregate calls in `e` (outermost), each once.
fn collect_aggs(e: &Expr, out: &mut Vec<Expr>) {
    if is_agg_call(e) {
        if !out.iter().any(|x| same(x, e)) {
            out.push(e.clone())
        }
    } else {
        e.children().into_iter().for_each(|x| collect_aggs(x, out))
    }
}

/// `(v {k: e, ...})` or `(v $map)` as conjuncts `v.k = e`.
fn prop_conjuncts(
    v: &str,
    props: Expr,
    params: &Params,
    conj: &mut Vec<Expr>,
) -> Result<(), QueryError> {
    let eq = |k: String, e: Expr| {
        Expr::Binary(
            BinOp::Eq,
            Box::new(Expr::Prop(Box::new(Expr::Var(v.to_string(), 0)), k)),
            Box::new(e),
        )
    };
    match props {
        Expr::Map(m) => conj.extend(m.into_iter().map(|(k, e)| eq(k, e))),
        Expr::Param(p) => match params.get(&p) {
            Some(Value::Map(m)) => {
                for (k, _) in m.iter() {
                    let e = Expr::Index(
                        Box::new(Expr::Param(p.clone())),
                        Box::new(Expr::Str(k.to_string())),
                    );
                    conj.push(eq(k.to_string(), e));
                }
            }
            Some(other) => {
                return Err(QueryError::Type(format!(
                    "properties in a pattern must be a map; ${p} is {}",
                    other.type_name()
                )))
            }
            None => return Err(QueryError::MissingParam(p)),
        },
        other => {
            return Err(QueryError::Unsupported(format!(
                "properties in a pattern must be a map or a parameter, not {}",
                short(&other)
            )))
        }
    }
    Ok(())
}

/// Hop bounds of `*min..max` (an absent minimum is 1; an absent maximum is unbounded).
fn hop_bounds((lo, hi): (Option<u64>, Option<u64>)) -> (u32, u32) {
    let clamp = |x: u64| x.min(u32::MAX as u64) as u32;
    (clamp(lo.unwrap_or(1)), clamp(hi.unwrap_or(u64::MAX)))
}

/// For a scan-aggregate whose filter, keys and aggregate arguments read the scanned node
/// only through properties: those properties and the expressions rewritten to read
/// them as columns (see [`rewrite_props`]); `None` otherwise.
fn direct_columns(
    filter: Option<&CExpr>,
    keys: &[CExpr],
    specs: &[AggSpec],
) -> Option<DirectColumns> {
    let mut props = Vec::new();
    let filter = match filter {
        Some(x) => Some(rewrite_props(x, &mut props)?),
        None => None,
    };
    let keys = keys
        .iter()
        .map(|k| rewrite_props(k, &mut props))
        .collect::<Option<Vec<_>>>()?;
    let aggs = specs
        .iter()
        .map(|a| {
            Some(AggSpec {
                arg: match &a.arg {
                    Some(x) => Some(rewrite_props(x, &mut props)?),
                    None => None,
                },
                ..a.clone()
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some((props, filter, keys, aggs))
}

fn short(e: &Expr) -> String {
    quiver_cypher::print::expr(e)
}

impl<'a, 'g, 'db> Planner<'a, 'g, 'db> {
    pub fn new(g: &'g Graph<'db>, params: &'a Params, indexes: &'a IndexSet) -> Self {
        Planner {
            fused: None,
            last_expand: None,
            g,
            params,
            indexes,
            descs: Vec::new(),
            locals: Vec::new(),
            max_locals: 0,
            anon: 0,
            reads_graph: false,
            touched: false,
            tail: false,
        }
    }

    fn wrap(&mut self, name: &'static str, detail: String, children: Vec<usize>, op: BoxOp) -> P {
        if matches!(
            name,
            "AllNodesScan"
                | "NodeByLabelScan"
                | "Expand"
                | "ExpandInto"
                | "VarLengthExpand"
                | "ShortestPath"
                | "AllShortestPaths"
        ) {
            self.reads_graph = true;
        }
        let id = self.descs.len();
        self.descs.push(Desc {
            name,
            detail,
            children,
        });
        P {
            op: Box::new(Counted { id, inner: op }),
            id,
        }
    }

    /// The input of a sub-plan (OPTIONAL MATCH, MERGE, a CALL body) and the cell its
    /// parent fills with each batch.
    fn argument(&mut self) -> (P, ArgCell) {
        let cell: ArgCell = Rc::new(RefCell::new(None));
        let arg = self.wrap(
            "Argument",
            String::new(),
            vec![],
            Box::new(Argument { cell: cell.clone() }),
        );
        (arg, cell)
    }

    /// Plans a whole query: the operator tree and the output column names.
    pub fn plan(&mut self, q: &Query) -> Result<(P, Vec<String>), QueryError> {
        let mut parts = Vec::new();
        let mut names = Vec::new();
        self.tail = q.parts.len() == 1;
        for part in &q.parts {
            let (p, n) = self.single(part)?;
            parts.push(p);
            names = n;
        }
        if parts.len() == 1 {
            return Ok((parts.pop().expect("one part"), names));
        }
        let ids = parts.iter().map(|p| p.id).collect();
        let distinct = q.union_all.iter().any(|a| !a);
        let u = self.wrap(
            "Union",
            if distinct { "distinct" } else { "all" }.into(),
            ids,
            Box::new(Union {
                parts: parts.into_iter().map(|p| p.op).collect(),
                i: 0,
            }),
        );
        if distinct {
            let w = names.len();
            let d = self.wrap(
                "Distinct",
                String::new(),
                vec![u.id],
                Box::new(Distinct::new(u.op, w)),
            );
            return Ok((d, names));
        }
        Ok((u, names))
    }

    fn single(&mut self, q: &SingleQuery) -> Result<(P, Vec<String>), QueryError> {
        let cur = self.wrap(
            "Once",
            String::new(),
            vec![],
            Box::new(Once { done: false }),
        );
        let (cur, _, names) = self.clauses(cur, Scope::default(), &q.clauses)?;
        Ok((cur, names))
    }

    /// Plans `clauses` on top of `cur`, whose rows bind `scope`; the plan, the scope
    /// after the last clause and the names of the columns a RETURN gives.
    fn clauses(
        &mut self,
        mut cur: P,
        mut scope: Scope,
        clauses: &[Clause],
    ) -> Result<(P, Scope, Vec<String>), QueryError> {
        let mut names = Vec::new();
        for (i, c) in clauses.iter().enumerate() {
            let last = self.tail && i + 1 == clauses.len();
            if matches!(
                c,
                Clause::Match { .. }
                    | Clause::Merge { .. }
                    | Clause::Set(_)
                    | Clause::Remove(_)
                    | Clause::Delete { .. }
            ) {
                self.touched = true;
            }
            match c {
                Clause::Match {
                    optional: false,
                    patterns,
                    where_,
                } => {
                    let fused = if scope.width == 0 && self.fused.is_none() && !self.g.has_delta() {
                        self.fusable_scan(patterns, where_)
                    } else {
                        None
                    };
                    cur = self.match_clause(cur, &mut scope, patterns, where_.clone())?;
                    self.fused = fused.map(|f| Fused { id: cur.id, ..f });
                }
                Clause::Match {
                    optional: true,
                    patterns,
                    where_,
                } => {
                    let (arg, cell) = self.argument();
                    let mut sub_scope = scope.clone();
                    sub_scope.hidden();
                    let sub = self.match_clause(arg, &mut sub_scope, patterns, where_.clone())?;
                    // Variables the optional part binds are null where it found nothing.
                    let out_width = sub_scope.width;
                    cur = self.wrap(
                        "Optional",
                        String::new(),
                        vec![cur.id, sub.id],
                        Box::new(Optional {
                            input: cur.op,
                            sub: sub.op,
                            arg: cell,
                            out_width,
                            cur: None,
                            covered: Vec::new(),
                        }),
                    );
                    scope = sub_scope;
                }
                Clause::Unwind { expr, var } => {
                    let e = self.compile(expr, &scope, &[])?;
                    cur = self.wrap(
                        "Unwind",
                        format!("{} AS {var}", short(expr)),
                        vec![cur.id],
                        Box::new(Unwind {
                            input: cur.op,
                            expr: e,
                        }),
                    );
                    scope.bind(var, Kind::Other);
                }
                Clause::With(p) => {
                    let (c, s, _) = self.projection(cur, &scope, p)?;
                    cur = c;
                    scope = s;
                }
                Clause::Return(p) => {
                    let (c, s, n) = self.projection(cur, &scope, p)?;
                    cur = c;
                    scope = s;
                    names = n;
                }
                Clause::Create(patterns) => {
                    let mut steps = Vec::new();
                    for p in patterns {
                        self.create_steps(p, &mut scope, &mut steps)?;
                    }
                    let detail = patterns
                        .iter()
                        .map(quiver_cypher::print::pattern)
                        .collect::<Vec<_>>()
                        .join(", ");
                    let width = scope.width;
                    let bulk = last && !self.touched && self.bulk_ok(&steps);
                    self.touched = true;
                    let name = if bulk { "BulkCreate" } else { "Create" };
                    cur = self.updating(cur, name, detail, |feed| {
                        Box::new(crate::write::Create::new(feed, steps, width, bulk))
                    });
                }
                Clause::Set(items) => {
                    let items = self.set_ops(items, &scope)?;
                    cur = self.updating(cur, "SetProperties", String::new(), |feed| {
                        Box::new(crate::write::SetProps { feed, items })
                    });
                }
                Clause::Remove(items) => {
                    let items = self.remove_ops(items, &scope)?;
                    cur = self.updating(cur, "Remove", String::new(), |feed| {
                        Box::new(crate::write::SetProps { feed, items })
                    });
                }
                Clause::Delete { detach, exprs } => {
                    let mut cs = Vec::new();
                    for e in exprs {
                        cs.push(self.compile(e, &scope, &[])?);
                    }
                    let detail = exprs.iter().map(short).collect::<Vec<_>>().join(", ");
                    let name = if *detach { "DetachDelete" } else { "Delete" };
                    let detach = *detach;
                    cur = self.updating(cur, name, detail, |feed| {
                        Box::new(crate::write::Delete {
                            feed,
                            exprs: cs,
                            detach,
                        })
                    });
                }
                Clause::Merge {
                    pattern,
                    on_create,
                    on_match,
                } => {
                    cur = self.merge(cur, &mut scope, pattern, on_create, on_match)?;
                }
                Clause::LoadCsv(l) => {
                    let source = self.compile(&l.source, &scope, &[])?;
                    let dialect = quiver_csv::Dialect {
                        delimiter: l.delimiter.unwrap_or(b','),
                        quote: Some(l.quote.unwrap_or(b'"')),
                        ..quiver_csv::Dialect::default()
                    };
                    let spec = crate::load::Spec {
                        header: l.header,
                        dialect,
                        null_if: l.null_if.as_ref().map(|s| s.as_bytes().into()),
                        ignore_bad: l.ignore_bad,
                    };
                    let detail = format!(
                        "{}{} AS {}",
                        if l.header {
                            "WITH HEADERS FROM "
                        } else {
                            "FROM "
                        },
                        short(&l.source),
                        l.var
                    );
                    cur = self.wrap(
                        "LoadCsv",
                        detail,
                        vec![cur.id],
                        Box::new(crate::load::LoadCsv::new(cur.op, source, spec)),
                    );
                    scope.bind(&l.var, Kind::Other);
                }
                Clause::CallInTx {
                    body,
                    rows,
                    on_error,
                } => {
                    let rows = match rows {
                        Some(e) => Some(self.compile(e, &Scope::default(), &[])?),
                        None => None,
                    };
                    let (arg, cell) = self.argument();
                    // The body's reads start from its own input.
                    let outer_reads = std::mem::replace(&mut self.reads_graph, false);
                    let fused = self.fused.take();
                    let outer_tail = std::mem::replace(&mut self.tail, last);
                    let sub = self.clauses(arg, scope.clone(), &body.clauses);
                    self.tail = outer_tail;
                    let (sub, _, sub_names) = sub?;
                    self.reads_graph = outer_reads;
                    self.fused = fused;
                    let returns = matches!(body.clauses.last(), Some(Clause::Return(_)));
                    for n in &sub_names {
                        scope.bind(n, Kind::Other);
                    }
                    cur = self.wrap(
                        "CallInTransactions",
                        format!("{on_error:?}"),
                        vec![cur.id, sub.id],
                        Box::new(crate::write::CallInTx::new(
                            cur.op, cell, sub.op, rows, *on_error, returns,
                        )),
                    );
                }
            }
        }
        Ok((cur, scope, names))
    }

    // -------------------------------------------------------------------------------
    // Updating clauses

    /// The create steps of one pattern: bound nodes are reused, the rest created.
    fn create_steps(
        &mut self,
        p: &Pattern,
        scope: &mut Scope,
        steps: &mut Vec<crate::write::CreateStep>,
    ) -> Result<(), QueryError> {
        use crate::write::CreateStep;
        if p.kind != PathKind::Plain {
            return Err(QueryError::Argument(
                "CREATE and MERGE take plain patterns, not shortestPath".into(),
            ));
        }
        let mut node_slots = Vec::new();
        let mut rel_slots = Vec::new();
        let node = |this: &mut Self,
                    n: &NodePattern,
                    scope: &mut Scope,
                    steps: &mut Vec<CreateStep>|
         -> Result<usize, QueryError> {
            if let Some(v) = &n.var {
                if let Some((slot, kind)) = scope.get(v) {
                    if kind != Kind::Node && kind != Kind::Other {
                        return Err(QueryError::ty(format!("variable {v} is not a node")));
                    }
                    if !n.labels.is_empty() || n.props.is_some() {
                        return Err(QueryError::Argument(format!(
                            "variable {v} is already bound: CREATE cannot add labels or properties to it (use SET)"
                        )));
                    }
                    return Ok(slot);
                }
            }
            let props = match &n.props {
                Some(e) => Some(crate::write::PropsExpr::new(this.compile(e, scope, &[])?)),
                None => None,
            };
            let name = n.var.clone().unwrap_or_else(|| this.anon_name());
            let slot = scope.bind(&name, Kind::Node);
            steps.push(CreateStep::Node {
                slot,
                labels: n.labels.iter().map(|l| Arc::from(l.as_str())).collect(),
                props,
            });
            Ok(slot)
        };
        let mut prev = node(self, &p.start, scope, steps)?;
        node_slots.push(prev);
        for (r, n) in &p.steps {
            let next = node(self, n, scope, steps)?;
            if r.range.is_some() {
                return Err(QueryError::Argument(
                    "CREATE and MERGE cannot create variable-length relationships".into(),
                ));
            }
            let [ty] = r.types.as_slice() else {
                return Err(QueryError::Argument(
                    "a created relationship needs exactly one type, like -[:KNOWS]->".into(),
                ));
            };
            let (src, dst) = match r.dir {
                Dir::Out => (prev, next),
                Dir::In => (next, prev),
                Dir::Both => {
                    return Err(QueryError::Argument(
                        "a created relationship needs a direction: -[:T]-> or <-[:T]-".into(),
                    ))
                }
            };
            let props = match &r.props {
                Some(e) => Some(crate::write::PropsExpr::new(self.compile(e, scope, &[])?)),
                None => None,
            };
            let name = r.var.clone().unwrap_or_else(|| self.anon_name());
            if r.var.is_some() && scope.get(&name).is_some() {
                return Err(QueryError::Argument(format!(
                    "variable {name} is already bound: CREATE makes new relationships"
                )));
            }
            let slot = scope.bind(&name, Kind::Rel);
            steps.push(CreateStep::Rel {
                slot,
                ty: Arc::from(ty.as_str()),
                src,
                dst,
                props,
            });
            rel_slots.push(slot);
            node_slots.push(next);
            prev = next;
        }
        if let Some(v) = &p.var {
            let slot = scope.bind(v, Kind::Other);
            steps.push(CreateStep::Path {
                slot,
                nodes: node_slots,
                rels: rel_slots,
            });
        }
        Ok(())
    }

    /// Whether a CREATE of `steps` can take the direct path (seed 004; see
    /// `quiver_engine::bulk`): lone nodes whose properties are map literals (so the
    /// keys, and the shape, are known now), with no uniqueness constraint to check.
    /// The caller checks that nothing before it touched the graph and nothing after it
    /// reads what it made.
    fn bulk_ok(&self, steps: &[crate::write::CreateStep]) -> bool {
        use crate::write::{CreateStep, PropsExpr};
        steps.iter().all(|s| match s {
            CreateStep::Node { labels, props, .. } => {
                matches!(props, None | Some(PropsExpr::Literal(_)))
                    && !self.indexes.unique.iter().any(|(l, _)| labels.contains(l))
            }
            _ => false,
        })
    }

    /// An updating operator over `cur`: its input is eager when an earlier operator
    /// scanned or expanded.
    fn updating(
        &mut self,
        cur: P,
        name: &'static str,
        detail: String,
        make: impl FnOnce(crate::write::Feed) -> BoxOp,
    ) -> P {
        let feed = crate::write::Feed::new(cur.op, self.reads_graph, name);
        self.wrap(name, detail, vec![cur.id], make(feed))
    }

    /// REMOVE items as the SET items they amount to: a property set to null, labels
    /// taken away.
    fn remove_ops(
        &mut self,
        items: &[RemoveItem],
        scope: &Scope,
    ) -> Result<Vec<crate::write::SetOp>, QueryError> {
        let as_set: Vec<SetItem> = items
            .iter()
            .map(|i| match i {
                RemoveItem::Prop { target, key } => SetItem::Prop {
                    target: target.clone(),
                    key: key.clone(),
                    value: Expr::Null,
                },
                RemoveItem::Labels { var, labels } => SetItem::Labels {
                    var: var.clone(),
                    labels: labels.clone(),
                },
            })
            .collect();
        let mut ops = self.set_ops(&as_set, scope)?;
        for op in &mut ops {
            if let crate::write::SetOp::Labels { add, .. } = op {
                *add = false;
            }
        }
        Ok(ops)
    }

    fn set_ops(
        &mut self,
        items: &[SetItem],
        scope: &Scope,
    ) -> Result<Vec<crate::write::SetOp>, QueryError> {
        use crate::write::SetOp;
        let mut ops = Vec::new();
        for i in items {
            ops.push(match i {
                SetItem::Prop { target, key, value } => SetOp::Prop {
                    target: self.compile(target, scope, &[])?,
                    key: Arc::from(key.as_str()),
                    value: self.compile(value, scope, &[])?,
                },
                SetItem::Replace { var, value } | SetItem::Merge { var, value } => SetOp::Map {
                    target: self.compile(&Expr::Var(var.clone(), 0), scope, &[])?,
                    value: self.compile(value, scope, &[])?,
                    replace: matches!(i, SetItem::Replace { .. }),
                },
                SetItem::Labels { var, labels } => SetOp::Labels {
                    target: self.compile(&Expr::Var(var.clone(), 0), scope, &[])?,
                    labels: labels.iter().map(|l| Arc::from(l.as_str())).collect(),
                    add: true,
                },
            });
        }
        Ok(ops)
    }

    fn merge(
        &mut self,
        cur: P,
        scope: &mut Scope,
        pattern: &Pattern,
        on_create: &[SetItem],
        on_match: &[SetItem],
    ) -> Result<P, QueryError> {
        // Name every part so that the match and the create branch agree on slots.
        let mut pat = pattern.clone();
        if pat.start.var.is_none() {
            pat.start.var = Some(self.anon_name());
        }
        for (r, n) in &mut pat.steps {
            if r.var.is_none() {
                r.var = Some(self.anon_name());
            }
            if n.var.is_none() {
                n.var = Some(self.anon_name());
            }
        }
        let eager = self.reads_graph;
        let (arg, cell) = self.argument();
        let mut sub_scope = scope.clone();
        let sub = self.match_clause(arg, &mut sub_scope, std::slice::from_ref(&pat), None)?;
        // The create branch binds the same names in the same slots.
        let mut create_scope = scope.clone();
        let mut steps = Vec::new();
        self.create_steps(&pat, &mut create_scope, &mut steps)?;
        let remap: Vec<(usize, usize)> = create_scope
            .vars
            .iter()
            .filter(|(n, _, _)| scope.get(n).is_none())
            .filter_map(|(n, s, _)| sub_scope.get(n).map(|(t, _)| (*s, t)))
            .collect();
        for st in &mut steps {
            let fix = |x: &mut usize| {
                if let Some(&(_, t)) = remap.iter().find(|(s, _)| s == x) {
                    *x = t;
                }
            };
            match st {
                crate::write::CreateStep::Node { slot, .. } => fix(slot),
                crate::write::CreateStep::Rel { slot, src, dst, .. } => {
                    fix(slot);
                    fix(src);
                    fix(dst);
                }
                crate::write::CreateStep::Path { slot, nodes, rels } => {
                    fix(slot);
                    nodes.iter_mut().for_each(fix);
                    rels.iter_mut().for_each(fix);
                }
            }
        }
        let on_create = self.set_ops(on_create, &sub_scope)?;
        let on_match = self.set_ops(on_match, &sub_scope)?;
        *scope = sub_scope;
        Ok(self.wrap(
            "Merge",
            quiver_cypher::print::pattern(pattern),
            vec![cur.id, sub.id],
            Box::new(crate::write::Merge {
                feed: crate::write::Feed::new(cur.op, eager, "Merge"),
                arg: cell,
                sub: sub.op,
                create: steps,
                on_create,
                on_match,
                width: scope.width,
                out: Default::default(),
            }),
        ))
    }

    // -------------------------------------------------------------------------------
    // MATCH

    fn anon_name(&mut self) -> String {
        self.anon += 1;
        format!(" anon{}", self.anon)
    }

    fn match_clause(
        &mut self,
        mut cur: P,
        scope: &mut Scope,
        patterns: &[Pattern],
        where_: Option<Expr>,
    ) -> Result<P, QueryError> {
        let mut conj = Vec::new();
        if let Some(w) = where_ {
            split_and(w, &mut conj);
        }
        // Name every part, and turn inline properties into conjuncts.
        let mut pats: Vec<Pattern> = patterns.to_vec();
        let n_rels: usize = pats.iter().map(|p| p.steps.len()).sum();
        for p in &mut pats {
            let mut nodes: Vec<&mut NodePattern> = std::iter::once(&mut p.start)
                .chain(p.steps.iter_mut().map(|s| &mut s.1))
                .collect();
            for n in nodes.iter_mut() {
                if n.var.is_none() {
                    self.anon += 1;
                    n.var = Some(format!(" anon{}", self.anon));
                }
                let v = n.var.clone().expect("named above");
                if let Some(props) = n.props.take() {
                    prop_conjuncts(&v, props, self.params, &mut conj)?;
                }
                for l in &n.labels {
                    if self.g.label_id(l).is_none() {
                        conj.push(Expr::Bool(false));
                    }
                }
            }
            for (r, _) in &mut p.steps {
                if r.var.is_none() && (n_rels > 1 || p.var.is_some()) {
                    r.var = Some(self.anon_name());
                }
                if let Some(props) = r.props.take() {
                    let v = r.var.clone().unwrap_or_else(|| {
                        self.anon += 1;
                        format!(" anon{}", self.anon)
                    });
                    r.var = Some(v.clone());
                    prop_conjuncts(&v, props, self.params, &mut conj)?;
                }
            }
        }
        let mut rel_slots: Vec<usize> = Vec::new();
        // Filters that need nothing from the pattern (constants, earlier variables) first.
        cur = self.push_filters(cur, scope, &mut conj)?;
        for p in &pats {
            cur = self.pattern(cur, scope, p, &mut conj, &mut rel_slots)?;
        }
        if !conj.is_empty() {
            // Everything is bound now; whatever is left references unknown variables.
            let c = conj.remove(0);
            let e = self.compile(&c, scope, &[])?;
            cur = self.filter(cur, e, &c);
        }
        Ok(cur)
    }

    fn filter(&mut self, cur: P, pred: CExpr, src: &Expr) -> P {
        self.wrap(
            "Filter",
            short(src),
            vec![cur.id],
            Box::new(Filter {
                input: cur.op,
                pred,
            }),
        )
    }

    /// Applies every conjunct whose variables are all bound.
    fn push_filters(
        &mut self,
        mut cur: P,
        scope: &Scope,
        conj: &mut Vec<Expr>,
    ) -> Result<P, QueryError> {
        let mut i = 0;
        while i < conj.len() {
            let vars = vars_of(&conj[i]);
            if vars.iter().all(|v| scope.get(v).is_some()) {
                let c = conj.remove(i);
                let e = self.compile(&c, scope, &[])?;
                let before = cur.id;
                cur = self.filter(cur, e, &c);
                if let Some(le) = &mut self.last_expand {
                    let only_target = vars.iter().all(|v| scope.get(v).map(|s| s.0) == Some(le.1));
                    if le.0 == before && only_target && !vars.is_empty() {
                        le.0 = cur.id;
                    }
                }
            } else {
                i += 1;
            }
        }
        Ok(cur)
    }

    /// A conjunct `var.prop = e` (either side) with `e` computable now: removes it and
    /// returns `e`.
    fn take_eq(conj: &mut Vec<Expr>, scope: &Scope, var: &str, prop: &str) -> Option<Expr> {
        let mut found = None;
        'outer: for (i, c) in conj.iter().enumerate() {
            if let Expr::Binary(BinOp::Eq, a, b) = c {
                for (x, y) in [(a, b), (b, a)] {
                    if let Expr::Prop(v, k) = &**x {
                        if matches!(&**v, Expr::Var(n, _) if n == var)
                            && k == prop
                            && vars_of(y).iter().all(|v| scope.get(v).is_some())
                        {
                            found = Some((i, (**y).clone()));
                            break 'outer;
                        }
                    }
                }
            }
        }
        let (i, e) = found?;
        conj.remove(i);
        Some(e)
    }

    /// A conjunct `id(var) = e` or `id(var) IN list` with `e` computable now: removes it
    /// and returns `e`.
    fn take_id_eq(conj: &mut Vec<Expr>, scope: &Scope, var: &str) -> Option<Expr> {
        let is_id = |x: &Expr| matches!(x, Expr::Call { name, args, .. } if name == "id" && matches!(args.as_slice(), [Expr::Var(n, _)] if n == var));
        let ready = |y: &Expr| vars_of(y).iter().all(|v| scope.get(v).is_some());
        let i = conj.iter().position(|c| match c {
            Expr::Binary(BinOp::Eq, a, b) => (is_id(a) && ready(b)) || (is_id(b) && ready(a)),
            Expr::Binary(BinOp::In, a, b) => is_id(a) && ready(b),
            _ => false,
        })?;
        match conj.remove(i) {
            Expr::Binary(_, a, b) => Some(if is_id(&a) { *b } else { *a }),
            _ => None,
        }
    }

    /// Bounds on `var.prop` from conjuncts `var.prop < e` and the like (either side),
    /// with `e` computable now: (lower, upper), each `(e, inclusive)`. The conjuncts stay:
    /// they remain filters after the seek.
    fn range_bounds(
        conj: &[Expr],
        scope: &Scope,
        var: &str,
        prop: &str,
    ) -> (Option<Bound>, Option<Bound>) {
        let (mut lo, mut hi) = (None, None);
        let is_prop = |x: &Expr| matches!(x, Expr::Prop(v, k) if k == prop && matches!(&**v, Expr::Var(n, _) if n == var));
        for c in conj {
            let Expr::Binary(op, a, b) = c else { continue };
            let (op, e) = if is_prop(a) {
                (*op, b)
            } else if is_prop(b) {
                (
                    match op {
                        BinOp::Lt => BinOp::Gt,
                        BinOp::Le => BinOp::Ge,
                        BinOp::Gt => BinOp::Lt,
                        BinOp::Ge => BinOp::Le,
                        o => *o,
                    },
                    a,
                )
            } else {
                continue;
            };
            if !vars_of(e).iter().all(|v| scope.get(v).is_some()) {
                continue;
            }
            match op {
                BinOp::Gt if lo.is_none() => lo = Some(((**e).clone(), false)),
                BinOp::Ge if lo.is_none() => lo = Some(((**e).clone(), true)),
                BinOp::Lt if hi.is_none() => hi = Some(((**e).clone(), false)),
                BinOp::Le if hi.is_none() => hi = Some(((**e).clone(), true)),
                _ => {}
            }
        }
        (lo, hi)
    }

    /// Properties of `var` that some comparison conjunct bounds.
    fn range_props(conj: &[Expr], var: &str) -> Vec<String> {
        let mut out = Vec::new();
        for c in conj {
            if let Expr::Binary(BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge, a, b) = c {
                for x in [a, b] {
                    if let Expr::Prop(v, k) = &**x {
                        if matches!(&**v, Expr::Var(n, _) if n == var) && !out.contains(k) {
                            out.push(k.clone());
                        }
                    }
                }
            }
        }
        out
    }

    /// How a node could be found on its own: (cost class, label rows).
    fn anchor_cost(&self, n: &NodePattern, scope: &Scope, conj: &[Expr]) -> (u32, u64) {
        let v = n.var.as_deref().unwrap_or("");
        if scope.get(v).is_some() {
            return (0, 0);
        }
        let mut best = (4, self.g.n_nodes());
        if Self::take_id_eq(&mut conj.to_vec(), scope, v).is_some() {
            return (1, 1);
        }
        for l in &n.labels {
            let Some(lid) = self.g.label_id(l) else {
                return (1, 0);
            };
            let mut c = conj.to_vec();
            for prop in self.eq_props(&c, v) {
                if self.g.id_seek_space(lid, &prop).is_some()
                    && Self::take_eq(&mut c, scope, v, &prop).is_some()
                {
                    return (1, 1);
                }
                if self.indexes.get(l, &prop).is_some()
                    && Self::take_eq(&mut c, scope, v, &prop).is_some()
                {
                    best = best.min((2, 1));
                }
            }
            for prop in Self::range_props(conj, v) {
                if self.indexes.get(l, &prop).is_some() {
                    let (lo, hi) = Self::range_bounds(conj, scope, v, &prop);
                    if lo.is_some() || hi.is_some() {
                        best = best.min((3, 0));
                    }
                }
            }
            let rows: u64 = self
                .g
                .label_scan(lid)
                .tables
                .iter()
                .map(|&(t, _)| {
                    let (a, b) = self.g.table_range(t);
                    b - a
                })
                .sum();
            best = best.min((3, rows));
        }
        best
    }

    fn eq_props(&self, conj: &[Expr], var: &str) -> Vec<String> {
        let mut out = Vec::new();
        for c in conj {
            if let Expr::Binary(BinOp::Eq, a, b) = c {
                for x in [a, b] {
                    if let Expr::Prop(v, k) = &**x {
                        if matches!(&**v, Expr::Var(n, _) if n == var) {
                            out.push(k.clone());
                        }
                    }
                }
            }
        }
        out
    }

    /// The seek that finds node `n` (variable `v`) from the conjuncts, best first: the
    /// `:ID` index, a declared index's equality, `id(v)`, a declared index's range. Takes
    /// the conjuncts a seek enforces exactly (ranges stay as filters). `None`: scan.
    #[allow(clippy::type_complexity)]
    fn seek_for(
        &mut self,
        n: &NodePattern,
        v: &str,
        scope: &Scope,
        conj: &mut Vec<Expr>,
    ) -> Result<Option<(&'static str, String, SeekBy)>, QueryError> {
        for l in &n.labels {
            let Some(lid) = self.g.label_id(l) else {
                continue;
            };
            for prop in self.eq_props(conj, v) {
                if let Some(space) = self.g.id_seek_space(lid, &prop) {
                    if let Some(key) = Self::take_eq(conj, scope, v, &prop) {
                        let detail =
                            format!("({}:{l}) by id index on {prop} = {}", v.trim(), short(&key));
                        let key = self.compile(&key, scope, &[])?;
                        let prop = Arc::from(prop.as_str());
                        return Ok(Some(("NodeSeek", detail, SeekBy::Id { space, prop, key })));
                    }
                }
                if let Some(index) = self.indexes.get(l, &prop) {
                    if let Some(key) = Self::take_eq(conj, scope, v, &prop) {
                        let detail = format!(
                            "({}:{l}) by index on {l}({prop}) = {}",
                            v.trim(),
                            short(&key)
                        );
                        let key = self.compile(&key, scope, &[])?;
                        return Ok(Some((
                            "NodeIndexSeek",
                            detail,
                            SeekBy::Index {
                                index,
                                prop: Arc::from(prop.as_str()),
                                key,
                            },
                        )));
                    }
                }
            }
        }
        if let Some(key) = Self::take_id_eq(conj, scope, v) {
            let detail = format!("({}) id = {}", v.trim(), short(&key));
            let key = self.compile(&key, scope, &[])?;
            return Ok(Some(("NodeByIdSeek", detail, SeekBy::NodeId { key })));
        }
        for l in &n.labels {
            for prop in Self::range_props(conj, v) {
                let Some(index) = self.indexes.get(l, &prop) else {
                    continue;
                };
                let (lo, hi) = Self::range_bounds(conj, scope, v, &prop);
                if lo.is_none() && hi.is_none() {
                    continue;
                }
                let show = |b: &Option<Bound>, open: &str, closed: &str| {
                    b.as_ref()
                        .map(|(e, inc)| {
                            format!(" {} {}", if *inc { closed } else { open }, short(e))
                        })
                        .unwrap_or_default()
                };
                let detail = format!(
                    "({}:{l}) by index on {l}({prop}){}{}",
                    v.trim(),
                    show(&lo, ">", ">="),
                    show(&hi, "<", "<=")
                );
                let mut compile = |b: Option<Bound>| {
                    b.map(|(e, inc)| self.compile(&e, scope, &[]).map(|c| (c, inc)))
                        .transpose()
                };
                let (lo, hi) = (compile(lo)?, compile(hi)?);
                return Ok(Some((
                    "NodeIndexRangeSeek",
                    detail,
                    SeekBy::Range {
                        index,
                        prop: Arc::from(prop.as_str()),
                        lo,
                        hi,
                    },
                )));
            }
        }
        Ok(None)
    }

    /// Binds node `n` on its own (seek or scan), for each row of `cur`.
    fn bind_node(
        &mut self,
        cur: P,
        scope: &mut Scope,
        n: &NodePattern,
        conj: &mut Vec<Expr>,
    ) -> Result<P, QueryError> {
        let v = n.var.clone().expect("named");
        let labels: Vec<u32> = self.label_ids(n);
        if let Some((name, detail, by)) = self.seek_for(n, &v, scope, conj)? {
            let p = self.wrap(
                name,
                detail,
                vec![cur.id],
                Box::new(Seek {
                    input: cur.op,
                    by,
                    labels,
                }),
            );
            scope.bind(&v, Kind::Node);
            return Ok(p);
        }
        let ranges = self.label_ranges(labels.first().copied());
        let detail = match labels.first() {
            Some(&l) => format!("({}:{})", v.trim(), self.g.label_name(l)),
            None => format!("({})", v.trim()),
        };
        let name = if labels.is_empty() {
            "AllNodesScan"
        } else {
            "NodeByLabelScan"
        };
        let mut p = self.wrap(
            name,
            detail,
            vec![cur.id],
            Box::new(Scan {
                input: cur.op,
                ranges,
                cur: None,
                row: 0,
                range: 0,
                node: 0,
            }),
        );
        let slot = scope.bind(&v, Kind::Node);
        if labels.len() > 1 {
            let e = CExpr::HasLabels(
                Box::new(CExpr::Slot(slot)),
                labels[1..].iter().map(|&l| Some(l)).collect(),
            );
            p = self.wrap(
                "Filter",
                format!("{}: more labels", v.trim()),
                vec![p.id],
                Box::new(Filter {
                    input: p.op,
                    pred: e,
                }),
            );
        }
        Ok(p)
    }

    /// Label ids of a node pattern (labels the database lacks are dropped; the planner
    /// has already made such a pattern match nothing).
    fn label_ids(&self, n: &NodePattern) -> Vec<u32> {
        n.labels.iter().filter_map(|l| self.g.label_id(l)).collect()
    }

    /// Node id ranges holding `label` (all nodes for `None`); created nodes last.
    fn label_ranges(&self, label: Option<u32>) -> Vec<ScanRange> {
        let mut v = self.segment_label_ranges(label);
        // Created nodes: up to whatever exists when the scan runs (a MERGE scans again
        // after each row it created).
        if let Some(d) = self.g.delta() {
            // Segment nodes that gained the label outside the tables that carry it.
            if let (Some(l), Some(name)) = (label, label.and_then(|l| d.labels.get(l as usize))) {
                for (&n, r) in d.nodes.range(..d.base_nodes) {
                    if !r.deleted
                        && r.labels.contains(name)
                        && !v.iter().any(|x| x.lo <= n && n < x.hi)
                    {
                        v.push(ScanRange {
                            lo: n,
                            hi: n + 1,
                            label: Some(l),
                            table_label: None,
                        });
                    }
                }
            }
            match label {
                Some(l) => v.push(ScanRange {
                    lo: d.base_nodes,
                    hi: u64::MAX,
                    label: Some(l),
                    table_label: None,
                }),
                None => {
                    if let Some(r) = v.last_mut() {
                        r.hi = u64::MAX;
                    }
                }
            }
        }
        v
    }

    fn segment_label_ranges(&self, label: Option<u32>) -> Vec<ScanRange> {
        match label {
            Some(l) => self
                .g
                .label_scan(l)
                .tables
                .iter()
                .map(|&(t, check)| {
                    let (lo, hi) = self.g.table_range(t);
                    ScanRange {
                        lo,
                        hi,
                        label: check.then_some(l),
                        table_label: (!check).then_some(l),
                    }
                })
                .collect(),
            None => vec![ScanRange {
                lo: 0,
                hi: self.g.n_nodes(),
                label: None,
                table_label: None,
            }],
        }
    }

    /// A first MATCH of one node pattern found by a scan: its ranges and filter, so that
    /// an aggregation right after it can run as a parallel scan-aggregate.
    fn fusable_scan(&mut self, patterns: &[Pattern], where_: &Option<Expr>) -> Option<Fused> {
        let [p] = patterns else { return None };
        if !p.steps.is_empty() || p.var.is_some() || p.kind != PathKind::Plain {
            return None;
        }
        let n = &p.start;
        let v = n.var.clone()?;
        let labels: Vec<u32> = n
            .labels
            .iter()
            .map(|l| self.g.label_id(l))
            .collect::<Option<_>>()?;
        let mut conj = Vec::new();
        if let Some(w) = where_ {
            split_and(w.clone(), &mut conj);
        }
        if let Some(props) = &n.props {
            prop_conjuncts(&v, props.clone(), self.params, &mut conj).ok()?;
        }
        let mut scope = Scope::default();
        if self.anchor_cost(n, &scope, &conj).0 < 3 && !labels.is_empty() {
            return None; // a seek is better
        }
        let slot = scope.bind(&v, Kind::Node);
        let mut filter: Option<CExpr> = None;
        let mut preds: Vec<CExpr> = Vec::new();
        if labels.len() > 1 {
            preds.push(CExpr::HasLabels(
                Box::new(CExpr::Slot(slot)),
                labels[1..].iter().map(|&l| Some(l)).collect(),
            ));
        }
        for c in &conj {
            if vars_of(c).iter().any(|x| x != &v) {
                return None;
            }
            preds.push(self.compile(c, &scope, &[]).ok()?);
        }
        for p in preds {
            filter = Some(match filter {
                None => p,
                Some(f) => CExpr::Bin(BinOp::And, Box::new(f), Box::new(p)),
            });
        }
        Some(Fused {
            id: usize::MAX,
            ranges: self.label_ranges(labels.first().copied()),
            filter,
            var: v,
        })
    }

    fn rel_types(&self, r: &RelPattern) -> Vec<u32> {
        if r.types.is_empty() {
            (0..self.g.n_rel_types() as u32).collect()
        } else {
            r.types
                .iter()
                .filter_map(|t| self.g.rel_type_id(t))
                .collect()
        }
    }

    fn pattern(
        &mut self,
        mut cur: P,
        scope: &mut Scope,
        p: &Pattern,
        conj: &mut Vec<Expr>,
        rel_slots: &mut Vec<usize>,
    ) -> Result<P, QueryError> {
        let nodes: Vec<&NodePattern> = std::iter::once(&p.start)
            .chain(p.steps.iter().map(|s| &s.1))
            .collect();
        if p.kind != PathKind::Plain || (p.steps.len() == 1 && p.steps[0].0.bfs) {
            return self.shortest(cur, scope, p, conj, rel_slots);
        }
        // Anchor: the cheapest node to find first.
        let mut anchor = 0;
        let mut best = (u32::MAX, u64::MAX);
        for (i, n) in nodes.iter().enumerate() {
            let c = self.anchor_cost(n, scope, conj);
            if c < best {
                best = c;
                anchor = i;
            }
        }
        let av = nodes[anchor].var.clone().expect("named");
        if scope.get(&av).is_none() {
            cur = self.bind_node(cur, scope, nodes[anchor], conj)?;
            cur = self.push_filters(cur, scope, conj)?;
        }
        // Rel slots in pattern order, for a named path.
        let mut step_slots: Vec<Option<PathPart>> = vec![None; p.steps.len()];
        let order: Vec<(usize, bool)> = (anchor..p.steps.len())
            .map(|i| (i, true))
            .chain((0..anchor).rev().map(|i| (i, false)))
            .collect();
        for (i, rightward) in order {
            let (r, _) = &p.steps[i];
            let (from_n, to_n) = if rightward {
                (nodes[i], nodes[i + 1])
            } else {
                (nodes[i + 1], nodes[i])
            };
            let dir = if rightward { r.dir } else { reverse_dir(r.dir) };
            let from = scope
                .get(from_n.var.as_deref().expect("named"))
                .expect("bound")
                .0;
            let to_var = to_n.var.clone().expect("named");
            let into = scope.get(&to_var).map(|s| s.0);
            // A bound endpoint's labels are a filter; a new one's are checked as it is found.
            let labels = if into.is_some() {
                vec![]
            } else {
                self.label_ids(to_n)
            };
            let types = self.rel_types(r);
            let type_names = if r.types.is_empty() {
                String::new()
            } else {
                format!(":{}", r.types.join("|"))
            };
            let rvar = r.var.clone();
            let uniq = rel_slots.clone();
            let input = cur.id;
            // The operator, its description, its DISTINCT switch, and how its relationship
            // (one, or a list for variable length) is bound and enters a named path.
            let (name, body, op, flag, rel_kind, part): (_, _, BoxOp, _, _, fn(usize) -> PathPart) =
                match r.range {
                    None => {
                        let distinct = DistinctTargets::default();
                        let flag = distinct.on.clone();
                        let op = Expand {
                            input: cur.op,
                            from,
                            into,
                            emit_rel: rvar.is_some(),
                            types,
                            dir,
                            labels,
                            uniq,
                            cur: None,
                            row: 0,
                            distinct,
                        };
                        let name = if into.is_some() {
                            "ExpandInto"
                        } else {
                            "Expand"
                        };
                        (
                            name,
                            type_names,
                            Box::new(op),
                            flag,
                            Kind::Rel,
                            PathPart::Rel,
                        )
                    }
                    Some(range) => {
                        let (min, max) = hop_bounds(range);
                        let mut ve = VarExpand::new(
                            cur.op,
                            from,
                            into,
                            rvar.is_some(),
                            types,
                            dir,
                            (min, max),
                            labels,
                            uniq,
                        );
                        ve.reverse = !rightward;
                        let flag = ve.distinct.on.clone();
                        let max = if max == u32::MAX {
                            String::new()
                        } else {
                            max.to_string()
                        };
                        let body = format!("{type_names}*{min}..{max}");
                        (
                            "VarLengthExpand",
                            body,
                            Box::new(ve),
                            flag,
                            Kind::Other,
                            PathPart::Rels,
                        )
                    }
                };
            let rel = format!("{}{body}", rvar.as_deref().unwrap_or("").trim());
            let detail = format!(
                "({}){}({}{})",
                from_n.var.as_deref().unwrap_or("").trim(),
                match dir {
                    Dir::Out => format!("-[{rel}]->"),
                    Dir::In => format!("<-[{rel}]-"),
                    Dir::Both => format!("-[{rel}]-"),
                },
                to_var.trim(),
                to_n.labels
                    .iter()
                    .map(|l| format!(":{l}"))
                    .collect::<String>()
            );
            cur = self.wrap(name, detail, vec![input], op);
            match into {
                None => {
                    let s = scope.bind(&to_var, Kind::Node);
                    self.last_expand = Some((cur.id, s, flag));
                }
                Some(_) => {
                    for l in &to_n.labels {
                        conj.push(Expr::HasLabels(
                            Box::new(Expr::Var(to_var.clone(), 0)),
                            vec![l.clone()],
                        ));
                    }
                }
            }
            if let Some(rv) = &rvar {
                let s = scope.bind(rv, rel_kind);
                rel_slots.push(s);
                step_slots[i] = Some(part(s));
            }
            cur = self.push_filters(cur, scope, conj)?;
        }
        if let Some(pv) = &p.var {
            let mut parts = vec![PathPart::Node(
                scope
                    .get(p.start.var.as_deref().expect("named"))
                    .expect("bound")
                    .0,
            )];
            parts.extend(step_slots.into_iter().flatten());
            cur = self.wrap(
                "ProjectPath",
                pv.clone(),
                vec![cur.id],
                Box::new(Extend {
                    input: cur.op,
                    exprs: vec![CExpr::MakePath(parts)],
                }),
            );
            scope.bind(pv, Kind::Other);
            cur = self.push_filters(cur, scope, conj)?;
        }
        Ok(cur)
    }

    /// shortestPath / allShortestPaths / `*BFS` over a single variable-length step.
    fn shortest(
        &mut self,
        mut cur: P,
        scope: &mut Scope,
        p: &Pattern,
        conj: &mut Vec<Expr>,
        rel_slots: &mut Vec<usize>,
    ) -> Result<P, QueryError> {
        if p.steps.len() != 1 || p.steps[0].0.range.is_none() {
            return Err(QueryError::Unsupported(
                "shortestPath needs exactly one variable-length relationship, e.g. shortestPath((a)-[*..15]->(b))".into(),
            ));
        }
        let (r, end) = &p.steps[0];
        let start = &p.start;
        let sv = start.var.clone().expect("named");
        let ev = end.var.clone().expect("named");
        if scope.get(&sv).is_none() {
            cur = self.bind_node(cur, scope, start, conj)?;
            cur = self.push_filters(cur, scope, conj)?;
        }
        // The far end is bound first when it can be found cheaply (seek), or when the
        // query asks for shortestPath (which needs both ends).
        let end_cost = self.anchor_cost(end, scope, conj);
        let to = if scope.get(&ev).is_some() {
            scope.get(&ev).map(|s| s.0)
        } else if end_cost.0 <= 2 || p.kind != PathKind::Plain {
            cur = self.bind_node(cur, scope, end, conj)?;
            cur = self.push_filters(cur, scope, conj)?;
            scope.get(&ev).map(|s| s.0)
        } else {
            None
        };
        // A shortest path starts at length 0 or 1.
        let (min, max) = hop_bounds(r.range.unwrap_or((Some(1), None)));
        let min = min.min(1);
        let from = scope.get(&sv).expect("bound").0;
        let labels: Vec<u32> = self.label_ids(end);
        let all = p.kind == PathKind::AllShortest;
        let detail = format!(
            "({})-[*{}..{}]-({}){}",
            sv.trim(),
            min,
            if max == u32::MAX {
                String::new()
            } else {
                max.to_string()
            },
            ev.trim(),
            if to.is_some() {
                " bidirectional"
            } else {
                " single source"
            }
        );
        cur = self.wrap(
            if all {
                "AllShortestPaths"
            } else if to.is_some() {
                "ShortestPath"
            } else {
                "BFS"
            },
            detail,
            vec![cur.id],
            Box::new(ShortestPath {
                input: cur.op,
                from,
                to,
                types: self.rel_types(r),
                dir: r.dir,
                min,
                max,
                all,
                labels,
                uniq: rel_slots.clone(),
                peak: 0,
            }),
        );
        if to.is_none() {
            scope.bind(&ev, Kind::Node);
        }
        let path_slot = scope.bind(p.var.as_deref().unwrap_or(" path"), Kind::Other);
        if let Some(rv) = &r.var {
            cur = self.wrap(
                "Extend",
                format!("{} = relationships(path)", rv.trim()),
                vec![cur.id],
                Box::new(Extend {
                    input: cur.op,
                    exprs: vec![CExpr::Func(
                        Func::Relationships,
                        vec![CExpr::Slot(path_slot)],
                    )],
                }),
            );
            let s = scope.bind(rv, Kind::Other);
            rel_slots.push(s);
        }
        self.push_filters(cur, scope, conj)
    }

    // -------------------------------------------------------------------------------
    // WITH / RETURN

    fn projection(
        &mut self,
        mut cur: P,
        scope: &Scope,
        p: &Projection,
    ) -> Result<(P, Scope, Vec<String>), QueryError> {
        let mut items: Vec<(Expr, String)> = Vec::new();
        if p.star {
            for (n, _, _) in &scope.vars {
                if !is_hidden(n) && !items.iter().any(|(_, m)| m == n) {
                    items.push((Expr::Var(n.clone(), 0), n.clone()));
                }
            }
        }
        for (i, (e, alias)) in p.items.iter().enumerate() {
            let name = alias
                .clone()
                .unwrap_or_else(|| p.texts.get(i).cloned().unwrap_or_else(|| short(e)));
            items.push((e.clone(), name));
        }
        let names: Vec<String> = items.iter().map(|i| i.1.clone()).collect();
        let aggregating = items.iter().any(|(e, _)| contains_agg(e));
        let kind_of = |e: &Expr| match e {
            Expr::Var(n, _) => scope.get(n).map_or(Kind::Other, |s| s.1),
            _ => Kind::Other,
        };
        let detail = names.join(", ");
        // What the items are computed from: the input rows, or after aggregation the
        // grouping keys and aggregates (reached through `src_subst`, by expression).
        let (src_scope, src_subst) = if aggregating {
            let (c, src) = self.aggregate(cur, scope, &items, p)?;
            cur = c;
            src
        } else {
            cur = self.distinct_nodes(cur, scope, &items, p);
            (scope.clone(), Vec::new())
        };
        let n_items = items.len();
        // ORDER BY may use what the items were computed from: keep those columns after
        // the items until it has run.
        let keep_src = !p.order.is_empty() && (aggregating || !p.distinct);
        let mut exprs = items
            .iter()
            .map(|(e, _)| self.compile(e, &src_scope, &src_subst))
            .collect::<Result<Vec<_>, _>>()?;
        let mut new_scope = Scope {
            vars: Vec::new(),
            width: n_items,
        };
        let mut subst: Vec<(Expr, usize)> = Vec::new();
        if keep_src {
            exprs.extend((0..src_scope.width).map(CExpr::Slot));
            new_scope.width += src_scope.width;
            for (n, s, k) in &src_scope.vars {
                new_scope.vars.push((n.clone(), n_items + s, *k));
            }
            for (e, s) in &src_subst {
                subst.push((e.clone(), n_items + s));
            }
        }
        // Items shadow the names they were computed from.
        for (i, (e, n)) in items.iter().enumerate() {
            new_scope.vars.push((n.clone(), i, kind_of(e)));
            subst.push((e.clone(), i));
        }
        cur = self.wrap(
            "Project",
            detail,
            vec![cur.id],
            Box::new(Project {
                input: cur.op,
                exprs,
            }),
        );
        if p.distinct {
            cur = self.wrap(
                "Distinct",
                String::new(),
                vec![cur.id],
                Box::new(Distinct::new(cur.op, n_items)),
            );
        }
        cur = self.order_limit(cur, &new_scope, p, &subst)?;
        cur = self.trim(cur, &mut new_scope, n_items);
        if let Some(w) = &p.where_ {
            let e = self.compile(w, &new_scope, &[])?;
            cur = self.filter(cur, e, w);
        }
        Ok((cur, new_scope, names))
    }

    /// The aggregation of a projection (serial, or a parallel scan-aggregate right after
    /// a fusable scan): the operator, and the scope and substitutions its output is read
    /// through (grouping keys first, then aggregates).
    #[allow(clippy::type_complexity)]
    fn aggregate(
        &mut self,
        cur: P,
        scope: &Scope,
        items: &[(Expr, String)],
        p: &Projection,
    ) -> Result<(P, (Scope, Vec<(Expr, usize)>)), QueryError> {
        let mut aggs = Vec::new();
        for e in items
            .iter()
            .map(|i| &i.0)
            .chain(p.order.iter().map(|o| &o.0))
        {
            collect_aggs(e, &mut aggs);
        }
        let keys: Vec<&Expr> = items
            .iter()
            .map(|i| &i.0)
            .filter(|e| !contains_agg(e))
            .collect();
        let key_exprs = keys
            .iter()
            .map(|e| self.compile(e, scope, &[]))
            .collect::<Result<Vec<_>, _>>()?;
        let specs = aggs
            .iter()
            .map(|a| self.agg_spec(a, scope))
            .collect::<Result<Vec<_>, _>>()?;
        let subst: Vec<(Expr, usize)> = keys
            .iter()
            .map(|e| (*e).clone())
            .chain(aggs.iter().cloned())
            .enumerate()
            .map(|(i, e)| (e, i))
            .collect();
        let detail = format!(
            "keys: [{}], aggregates: [{}]",
            keys.iter().map(|k| short(k)).collect::<Vec<_>>().join(", "),
            aggs.iter().map(short).collect::<Vec<_>>().join(", ")
        );
        let fused = self.fused.take().filter(|f| {
            f.id == cur.id
                && scope.width == 1
                && scope.get(&f.var).map(|s| s.0) == Some(0)
                && specs.iter().all(|a| !a.distinct)
        });
        let op = match fused {
            Some(f) => {
                let direct = direct_columns(f.filter.as_ref(), &key_exprs, &specs);
                self.wrap(
                    "ParallelScanAggregate",
                    format!("({}) {detail}", f.var.trim()),
                    vec![],
                    Box::new(ParallelAggregate {
                        direct,
                        ranges: f.ranges,
                        filter: f.filter,
                        keys: key_exprs,
                        aggs: specs,
                        out: None,
                        peak: 0,
                    }),
                )
            }
            None => self.wrap(
                "Aggregate",
                detail,
                vec![cur.id],
                Box::new(Aggregate {
                    input: cur.op,
                    keys: key_exprs,
                    aggs: specs,
                    out: None,
                    peak: 0,
                }),
            ),
        };
        // After aggregation only grouping keys and aggregates are visible.
        let width = subst.len();
        Ok((
            op,
            (
                Scope {
                    vars: Vec::new(),
                    width,
                },
                subst,
            ),
        ))
    }

    /// Before a DISTINCT projection whose items depend only on node variables, duplicate
    /// nodes are dropped while they are still integers: inside the expansion that binds
    /// the node when it is the only one (see `last_expand`), else by DistinctNodes.
    fn distinct_nodes(
        &mut self,
        mut cur: P,
        scope: &Scope,
        items: &[(Expr, String)],
        p: &Projection,
    ) -> P {
        if !p.distinct {
            return cur;
        }
        let mut node_slots = Vec::new();
        for (e, _) in items {
            for v in vars_of(e) {
                match scope.get(&v) {
                    Some((s, Kind::Node)) => {
                        if !node_slots.contains(&s) {
                            node_slots.push(s)
                        }
                    }
                    _ => return cur,
                }
            }
        }
        if node_slots.is_empty() {
            return cur;
        }
        if let Some((id, slot, flag)) = &self.last_expand {
            if *id == cur.id && node_slots == [*slot] {
                // The expansion itself emits each new node once.
                flag.set(true);
                let mut d = *id;
                // The push-down lands on the expansion below any filters.
                while !matches!(self.descs[d].name, "Expand" | "VarLengthExpand") {
                    match self.descs[d].children.first() {
                        Some(&c) => d = c,
                        None => break,
                    }
                }
                self.descs[d].detail.push_str(" (distinct targets)");
                return cur;
            }
        }
        let d = node_slots
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        cur = self.wrap(
            "DistinctNodes",
            format!("slots {d}"),
            vec![cur.id],
            Box::new(DistinctNodes {
                input: cur.op,
                slots: node_slots,
                seen: Default::default(),
                one: NodeSet::default(),
                null_seen: false,
                grant: None,
            }),
        );
        cur
    }

    fn trim(&mut self, cur: P, scope: &mut Scope, n: usize) -> P {
        if scope.width == n {
            return cur;
        }
        scope.width = n;
        scope.vars.retain(|v| v.1 < n);
        self.wrap(
            "Project",
            format!("first {n} columns"),
            vec![cur.id],
            Box::new(Project {
                input: cur.op,
                exprs: (0..n).map(CExpr::Slot).collect(),
            }),
        )
    }

    fn const_usize(&mut self, e: &Expr, what: &str) -> Result<usize, QueryError> {
        let c = self.compile(e, &Scope::default(), &[])?;
        match c {
            CExpr::Const(Value::Int(i)) if i >= 0 => Ok(i as usize),
            _ => Err(QueryError::Argument(format!(
                "{what} needs a non-negative integer constant or parameter"
            ))),
        }
    }

    fn order_limit(
        &mut self,
        mut cur: P,
        scope: &Scope,
        p: &Projection,
        subst: &[(Expr, usize)],
    ) -> Result<P, QueryError> {
        let skip = p
            .skip
            .as_ref()
            .map(|e| self.const_usize(e, "SKIP"))
            .transpose()?
            .unwrap_or(0);
        let limit = p
            .limit
            .as_ref()
            .map(|e| self.const_usize(e, "LIMIT"))
            .transpose()?;
        if !p.order.is_empty() {
            let keys = p
                .order
                .iter()
                .map(|(e, desc)| Ok((self.compile(e, scope, subst)?, *desc)))
                .collect::<Result<Vec<_>, QueryError>>()?;
            let top = limit.map(|l| l + skip);
            let detail = format!(
                "{}{}",
                p.order
                    .iter()
                    .map(|(e, d)| format!("{}{}", short(e), if *d { " DESC" } else { "" }))
                    .collect::<Vec<_>>()
                    .join(", "),
                top.map(|t| format!(", top {t}")).unwrap_or_default()
            );
            cur = self.wrap(
                if top.is_some() { "Top" } else { "Sort" },
                detail,
                vec![cur.id],
                Box::new(Sort {
                    input: cur.op,
                    keys,
                    limit: top,
                    out: None,
                    peak: 0,
                }),
            );
        }
        if skip > 0 || limit.is_some() {
            cur = self.wrap(
                "Limit",
                format!(
                    "skip {skip}{}",
                    limit.map(|l| format!(", limit {l}")).unwrap_or_default()
                ),
                vec![cur.id],
                Box::new(SkipLimit {
                    input: cur.op,
                    skip,
                    limit,
                    seen: 0,
                    emitted: 0,
                }),
            );
        }
        Ok(cur)
    }

    fn agg_spec(&mut self, a: &Expr, scope: &Scope) -> Result<AggSpec, QueryError> {
        match a {
            Expr::CountStar => Ok(AggSpec {
                func: AggFn::CountStar,
                distinct: false,
                arg: None,
                extra: None,
            }),
            Expr::Call {
                name,
                distinct,
                args,
            } => {
                let func = match name.as_str() {
                    "count" => AggFn::Count,
                    "sum" => AggFn::Sum,
                    "avg" => AggFn::Avg,
                    "min" => AggFn::Min,
                    "max" => AggFn::Max,
                    "collect" => AggFn::Collect,
                    "stdev" => AggFn::StDev,
                    "stdevp" => AggFn::StDevP,
                    "percentilecont" => AggFn::PercentileCont,
                    _ => AggFn::PercentileDisc,
                };
                let want = if matches!(func, AggFn::PercentileCont | AggFn::PercentileDisc) {
                    2
                } else {
                    1
                };
                if args.len() != want {
                    return Err(QueryError::Argument(format!(
                        "{name}() takes {want} argument(s), got {}",
                        args.len()
                    )));
                }
                let arg = Some(self.compile(&args[0], scope, &[])?);
                let extra = if want == 2 {
                    Some(self.compile(&args[1], scope, &[])?)
                } else {
                    None
                };
                Ok(AggSpec {
                    func,
                    distinct: *distinct,
                    arg,
                    extra,
                })
            }
            _ => Err(QueryError::Unsupported("not an aggregate".into())),
        }
    }

    // -------------------------------------------------------------------------------
    // Expressions

    /// Compiles `e` against `scope`; expressions structurally equal to an entry of
    /// `subst` read that slot instead (grouping keys and aggregates after aggregation).
    fn compile(
        &mut self,
        e: &Expr,
        scope: &Scope,
        subst: &[(Expr, usize)],
    ) -> Result<CExpr, QueryError> {
        if let Some((_, s)) = subst.iter().find(|(x, _)| same(x, e)) {
            return Ok(CExpr::Slot(*s));
        }
        let c = |x: &Expr, me: &mut Self| me.compile(x, scope, subst);
        Ok(match e {
            Expr::Null => CExpr::Const(Value::Null),
            Expr::Bool(b) => CExpr::Const(Value::Bool(*b)),
            Expr::Int(i) => CExpr::Const(Value::Int(*i)),
            Expr::Float(f) => CExpr::Const(Value::Float(*f)),
            Expr::Str(s) => CExpr::Const(Value::str(s)),
            Expr::Param(p) => CExpr::Const(
                self.params
                    .get(p)
                    .cloned()
                    .ok_or_else(|| QueryError::MissingParam(p.clone()))?,
            ),
            Expr::Var(n, _) => {
                if let Some(i) = self.locals.iter().rposition(|l| l == n) {
                    CExpr::Local(i)
                } else if let Some((s, _)) = scope.get(n) {
                    CExpr::Slot(s)
                } else {
                    return Err(QueryError::Unsupported(format!(
                        "variable `{n}` is not available here (after WITH or an aggregation only projected names remain)"
                    )));
                }
            }
            Expr::List(xs) => {
                let items = xs
                    .iter()
                    .map(|x| c(x, self))
                    .collect::<Result<Vec<_>, _>>()?;
                if items.iter().all(|i| matches!(i, CExpr::Const(_))) {
                    CExpr::Const(Value::list(
                        items
                            .into_iter()
                            .map(|i| {
                                if let CExpr::Const(v) = i {
                                    v
                                } else {
                                    Value::Null
                                }
                            })
                            .collect(),
                    ))
                } else {
                    CExpr::List(items)
                }
            }
            Expr::Map(xs) => CExpr::Map(
                xs.iter()
                    .map(|(k, x)| Ok((Arc::from(k.as_str()), c(x, self)?)))
                    .collect::<Result<_, QueryError>>()?,
            ),
            Expr::Prop(x, k) => CExpr::Prop(Box::new(c(x, self)?), Arc::from(k.as_str())),
            Expr::Index(x, i) => CExpr::Index(Box::new(c(x, self)?), Box::new(c(i, self)?)),
            Expr::Slice(x, a, b) => CExpr::Slice(
                Box::new(c(x, self)?),
                a.as_ref().map(|a| c(a, self).map(Box::new)).transpose()?,
                b.as_ref().map(|b| c(b, self).map(Box::new)).transpose()?,
            ),
            Expr::HasLabels(x, ls) => CExpr::HasLabels(
                Box::new(c(x, self)?),
                ls.iter().map(|l| self.g.label_id(l)).collect(),
            ),
            Expr::Unary(UnOp::Not, x) => CExpr::Not(Box::new(c(x, self)?)),
            Expr::Unary(UnOp::Neg, x) => match c(x, self)? {
                CExpr::Const(Value::Int(i)) if i != i64::MIN => CExpr::Const(Value::Int(-i)),
                CExpr::Const(Value::Float(f)) => CExpr::Const(Value::Float(-f)),
                x => CExpr::Neg(Box::new(x)),
            },
            Expr::Binary(BinOp::Regex, x, p) => {
                let x = c(x, self)?;
                match c(p, self)? {
                    CExpr::Const(Value::Str(s)) => {
                        CExpr::RegexConst(Box::new(x), Arc::new(compile_regex(&s)?))
                    }
                    p => CExpr::Bin(BinOp::Regex, Box::new(x), Box::new(p)),
                }
            }
            Expr::Binary(op, a, b) => CExpr::Bin(*op, Box::new(c(a, self)?), Box::new(c(b, self)?)),
            Expr::IsNull(x, neg) => CExpr::IsNull(Box::new(c(x, self)?), *neg),
            Expr::CountStar => {
                return Err(QueryError::Unsupported(
                    "count(*) is only allowed in WITH and RETURN".into(),
                ))
            }
            Expr::Call { name, args, .. } => {
                if is_aggregate(name) {
                    return Err(QueryError::Unsupported(format!(
                        "aggregate {name}() is only allowed in WITH and RETURN items and ORDER BY"
                    )));
                }
                if name == "exists" && matches!(args.first(), Some(Expr::PatternPred(_))) {
                    return c(&args[0], self);
                }
                let f = Func::from_name(name)
                    .ok_or_else(|| QueryError::UnknownFunction(name.clone()))?;
                CExpr::Func(
                    f,
                    args.iter().map(|x| c(x, self)).collect::<Result<_, _>>()?,
                )
            }
            Expr::Case {
                subject,
                arms,
                default,
            } => CExpr::Case {
                subject: subject
                    .as_ref()
                    .map(|s| c(s, self).map(Box::new))
                    .transpose()?,
                arms: arms
                    .iter()
                    .map(|(w, t)| Ok((c(w, self)?, c(t, self)?)))
                    .collect::<Result<_, QueryError>>()?,
                default: default
                    .as_ref()
                    .map(|d| c(d, self).map(Box::new))
                    .transpose()?,
            },
            Expr::ListComp {
                var,
                list,
                pred,
                map,
            } => {
                let list = Box::new(c(list, self)?);
                self.locals.push(var.clone());
                let local = self.locals.len() - 1;
                self.max_locals = self.max_locals.max(self.locals.len());
                let pred = pred
                    .as_ref()
                    .map(|p| self.compile(p, scope, subst).map(Box::new))
                    .transpose();
                let map = map
                    .as_ref()
                    .map(|m| self.compile(m, scope, subst).map(Box::new))
                    .transpose();
                self.locals.pop();
                CExpr::ListComp {
                    local,
                    list,
                    pred: pred?,
                    map: map?,
                }
            }
            Expr::PatternPred(p) => CExpr::Pattern(Arc::new(self.pattern_pred(p, scope)?)),
        })
    }

    fn pattern_pred(&mut self, p: &Pattern, scope: &Scope) -> Result<PatternPred, QueryError> {
        self.touched = true;
        let start =
            match p.start.var.as_deref().and_then(|v| scope.get(v)) {
                Some((s, _)) => s,
                None => return Err(QueryError::Unsupported(
                    "a pattern predicate must start at a bound variable, e.g. WHERE (a)-->(:User)"
                        .into(),
                )),
            };
        let mut impossible = p.start.labels.iter().any(|l| self.g.label_id(l).is_none());
        let mut steps = Vec::new();
        for (r, n) in &p.steps {
            if r.props.is_some() || n.props.is_some() {
                return Err(QueryError::Unsupported(
                    "property maps inside a pattern predicate; move them to WHERE".into(),
                ));
            }
            let (min, max) = r.range.map_or((1, 1), hop_bounds);
            impossible |= n.labels.iter().any(|l| self.g.label_id(l).is_none());
            let bound = match n.var.as_deref() {
                Some(v) => match scope.get(v) {
                    Some((s, _)) => Some(s),
                    None => {
                        return Err(QueryError::Unsupported(format!(
                            "variable `{v}` in a pattern predicate must be bound earlier"
                        )))
                    }
                },
                None => None,
            };
            steps.push(PredStep {
                types: self.rel_types(r),
                dir: r.dir,
                min,
                max,
                labels: self.label_ids(n),
                bound,
            });
        }
        let start_labels = self.label_ids(&p.start);
        Ok(PatternPred {
            start,
            start_labels,
            steps,
            impossible,
        })
    }
}
