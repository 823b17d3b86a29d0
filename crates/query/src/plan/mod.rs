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
use crate::expr::{compile_regex, CExpr, CLabel, Func, PathPart, PatternPred, PredStep};
use crate::graph::Graph;
use crate::index::IndexSet;
use crate::ops::*;
use crate::value::Value;
use quiver_cypher::ast::*;
use quiver_cypher::bind::{
    contains_aggregate, imports, is_aggregate, is_aggregate_call, same, Imports,
};
use quiver_cypher::Detail;
use quiver_storage::Direction;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

mod compile;
mod expand;
mod matching;
mod project;
mod write;

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

    /// The same row with only what a CALL body imports visible; the other columns stay
    /// in place, unnamed, so the body's rows still extend the outer ones.
    fn imported(&self, imports: &Imports) -> Scope {
        match imports {
            Imports::All => self.clone(),
            Imports::Names(names) => Scope {
                vars: self
                    .vars
                    .iter()
                    .filter(|v| names.contains(&v.0.as_str()))
                    .cloned()
                    .collect(),
                width: self.width,
            },
        }
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

/// A single-hop expansion straight out of the first clause's scan of every node, with
/// no filter (`MATCH (a:L1)-[:T]->(b:L2)`, every node an `L1`): an aggregation of
/// `b, count(*)` right above it is each `b`'s degree (see `ops::DegreeCount`).
struct DegreeCand {
    /// The expansion's plan node.
    id: usize,
    to_var: String,
    types: Vec<u32>,
    /// From `b` back to `a`.
    dir: Direction,
    label: Option<u32>,
}

pub struct Planner<'a, 'g, 'db> {
    fused: Option<Fused>,
    degree_cand: Option<DegreeCand>,
    /// Relationship variables whose types `$(expr)` gives (a filter): their expansion
    /// reads every type the graph has when it runs, not when planned, so that a MERGE
    /// finds a relationship of a type an earlier row created.
    live_types: Vec<String>,
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
    /// An updating clause came before (the direct path for relationships needs none).
    wrote: bool,
    /// The statement only reads, so a node found by a property equal to a value of the
    /// row may come from a hash table made once (`ops::ValueHashJoin`).
    hash_joins: bool,
    /// Nothing follows the clauses being planned in the statement.
    tail: bool,
    /// The procedures CALL may run (besides the built-ins).
    procs: &'a crate::procs::Procedures,
    /// Planning the body of `CALL { } IN TRANSACTIONS` in batches smaller than the
    /// direct path's: a CREATE there writes through the delta.
    small_batches: bool,
    /// The LOAD CSV that began the statement (a CREATE right after it may load column
    /// by column).
    first_load: Option<FirstLoad>,
}

/// A LOAD CSV that is the statement's first clause.
struct FirstLoad {
    /// Its plan node.
    id: usize,
    source: CExpr,
    spec: crate::ops::load::Spec,
    /// The row's variable and slot.
    var: String,
    slot: usize,
}

/// What planning the body of `CALL { } IN TRANSACTIONS` again needs: a checkpoint
/// between two batches (the statement's own automatic one, or another session's)
/// moves the transaction to a new generation, whose tables, indexes and delta the
/// body's scans and seeks must read. (Entity ids are the same in every generation, so
/// the rows in flight stay valid.)
pub(crate) struct Replan {
    body: quiver_cypher::ast::SingleQuery,
    /// Parts joined to `body` by UNION (ALL when the flag is set), for `CALL { }`.
    unions: Vec<(bool, quiver_cypher::ast::SingleQuery)>,
    /// The batches are smaller than the direct path's (`BATCH_DIRECT_MIN`).
    small_batches: bool,
    /// The outer row's scope, and whether the body sees all of it (else what its
    /// importing WITH names).
    scope: Scope,
    sees_all: bool,
    params: Params,
    procs: crate::procs::Procedures,
    tail: bool,
    touched: bool,
    wrote: bool,
    anon: usize,
    /// The body's first plan node (its operators keep their PROFILE rows).
    first_id: usize,
}

impl crate::ops::Replanner for Replan {
    fn first_id(&self) -> usize {
        self.first_id
    }

    fn plan(&self, g: &Graph, indexes: &IndexSet) -> Result<(BoxOp, ArgCell, usize), QueryError> {
        let mut p = Planner::new(g, &self.params, indexes, &self.procs);
        p.descs = (0..self.first_id)
            .map(|_| Desc {
                name: "",
                detail: String::new(),
                children: Vec::new(),
            })
            .collect();
        p.touched = self.touched;
        p.wrote = self.wrote;
        p.anon = self.anon;
        let (sub, cell, _) = p.call_body(self)?;
        Ok((sub.op, cell, p.descs.len()))
    }
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
    // A list comprehension or reduce(): its list (and initial value) outside its own
    // variables, the rest inside them.
    if let Some((vars, inside, outside)) = local_scope(e) {
        for x in outside {
            free_vars(x, bound, out);
        }
        let n = bound.len();
        bound.extend(vars);
        for x in inside {
            free_vars(x, bound, out);
        }
        bound.truncate(n);
        return;
    }
    match e {
        Expr::Var(n, _) => {
            if !bound.contains(n) {
                out.push(n.clone())
            }
        }
        Expr::PatternPred(p) => {
            for n in std::iter::once(&p.start).chain(p.steps.iter().map(|s| &s.1)) {
                if let Some(v) = &n.var {
                    out.push(v.clone())
                }
            }
        }
        // Its pattern's nodes (some bound outside), and what its predicate and mapping
        // read besides the pattern's own variables.
        Expr::PatternComp { pattern, pred, map } => {
            let mut own = Vec::new();
            for n in std::iter::once(&pattern.start).chain(pattern.steps.iter().map(|s| &s.1)) {
                if let Some(v) = &n.var {
                    out.push(v.clone());
                    own.push(v.clone());
                }
            }
            own.extend(pattern.steps.iter().filter_map(|(r, _)| r.var.clone()));
            own.extend(pattern.var.clone());
            let n = bound.len();
            bound.extend(own);
            pred.iter().for_each(|w| free_vars(w, bound, out));
            free_vars(map, bound, out);
            bound.truncate(n);
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

/// The aggregate calls in `e` (outermost), each once.
fn collect_aggs(e: &Expr, out: &mut Vec<Expr>) {
    if is_aggregate_call(e) {
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
                return Err(QueryError::Type(
                    Detail::InvalidArgumentType,
                    format!(
                        "properties in a pattern must be a map; ${p} is {}",
                        other.type_name()
                    ),
                ))
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
            // `count(n)` of the scanned node (never null, each row another node) is
            // `count(*)`.
            if a.func == AggFn::Count && matches!(a.arg, Some(CExpr::Slot(0))) {
                return Some(AggSpec {
                    func: AggFn::CountStar,
                    distinct: false,
                    arg: None,
                    extra: None,
                });
            }
            Some(AggSpec {
                arg: match &a.arg {
                    Some(x) if a.func == AggFn::Count => Some(rewrite_counted(x, &mut props)?),
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
    pub fn new(
        g: &'g Graph<'db>,
        params: &'a Params,
        indexes: &'a IndexSet,
        procs: &'a crate::procs::Procedures,
    ) -> Self {
        Planner {
            fused: None,
            degree_cand: None,
            live_types: Vec::new(),
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
            wrote: false,
            hash_joins: false,
            tail: false,
            procs,
            small_batches: false,
            first_load: None,
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

    /// Plans the body of `CALL { } IN TRANSACTIONS` (its reads start from its own
    /// input): the body, the cell its input rows go in, its column names.
    fn call_body(&mut self, r: &Replan) -> Result<(P, ArgCell, Vec<String>), QueryError> {
        self.reads_graph = false;
        self.tail = r.tail;
        let outer = std::mem::replace(&mut self.small_batches, r.small_batches);
        let body = self.body_plan(&r.scope, r.sees_all, &r.body, &r.unions);
        self.small_batches = outer;
        let (sub, cell, _, names) = body?;
        Ok((sub, cell, names))
    }

    /// A subquery body below an Argument: its plan, the cell its input row goes in, the
    /// scope after it and its columns. A body with UNION parts gives each part an
    /// Argument of its own, fed by [`FanOut`] from the one cell. Each part sees of the
    /// outer `scope` what it imports (all of it with `sees_all`).
    fn body_plan(
        &mut self,
        scope: &Scope,
        sees_all: bool,
        body: &SingleQuery,
        unions: &[(bool, SingleQuery)],
    ) -> Result<(P, ArgCell, Scope, Vec<String>), QueryError> {
        let (arg, cell) = self.argument();
        let inner = |part: &SingleQuery| scope.imported(&imports(part, sees_all));
        let (first, first_scope, names) = self.clauses(arg, inner(body), &body.clauses)?;
        if unions.is_empty() {
            return Ok((first, cell, first_scope, names));
        }
        let mut parts = vec![first];
        let mut cells = vec![cell];
        for (_, part) in unions {
            let (arg, cell) = self.argument();
            let (p, _, _) = self.clauses(arg, inner(part), &part.clauses)?;
            parts.push(p);
            cells.push(cell);
        }
        let all: Vec<bool> = unions.iter().map(|(a, _)| *a).collect();
        let u = self.union(parts, &all, names.len());
        let master: ArgCell = Rc::new(RefCell::new(None));
        let f = self.wrap(
            "FanOut",
            String::new(),
            vec![u.id],
            Box::new(FanOut {
                master: master.clone(),
                cells,
                inner: u.op,
            }),
        );
        Ok((f, master, first_scope, names))
    }

    /// `parts` joined by UNION (`all[i]`: the i-th join is UNION ALL; any plain UNION
    /// makes the whole DISTINCT), rows of `width` columns.
    fn union(&mut self, parts: Vec<P>, all: &[bool], width: usize) -> P {
        let ids = parts.iter().map(|p| p.id).collect();
        let distinct = all.iter().any(|a| !a);
        let u = self.wrap(
            "Union",
            if distinct { "distinct" } else { "all" }.into(),
            ids,
            Box::new(Union {
                parts: parts.into_iter().map(|p| p.op).collect(),
                i: 0,
            }),
        );
        if !distinct {
            return u;
        }
        self.wrap(
            "Distinct",
            String::new(),
            vec![u.id],
            Box::new(Distinct::new(u.op, width)),
        )
    }

    /// Plans a whole query: the operator tree and the output column names.
    pub fn plan(&mut self, q: &Query) -> Result<(P, Vec<String>), QueryError> {
        let mut parts = Vec::new();
        let mut names = Vec::new();
        self.tail = q.parts.len() == 1;
        self.hash_joins = q.parts.iter().all(|p| {
            p.clauses.iter().all(|c| {
                matches!(
                    c,
                    Clause::Match { .. }
                        | Clause::Unwind { .. }
                        | Clause::With(_)
                        | Clause::Return(_)
                )
            })
        });
        for part in &q.parts {
            let (p, n) = self.single(part)?;
            parts.push(p);
            names = n;
        }
        if parts.len() == 1 {
            return Ok((parts.pop().expect("one part"), names));
        }
        let w = names.len();
        Ok((self.union(parts, &q.union_all, w), names))
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
        let pushed = push_where_through_with(clauses);
        let clauses = pushed.as_deref().unwrap_or(clauses);
        let grouped = distinct_count_as_grouping(clauses);
        let clauses = grouped.as_deref().unwrap_or(clauses);
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
            if matches!(
                c,
                Clause::Merge { .. } | Clause::Set(_) | Clause::Remove(_) | Clause::Delete { .. }
            ) {
                self.wrote = true;
            }
            match c {
                Clause::Match {
                    optional: false,
                    patterns,
                    where_,
                } => {
                    // A read statement's delta is a fixed snapshot: the morsels read it
                    // beside the segments. A writing one's changes under its reads.
                    let fused = if scope.width == 0 && self.fused.is_none() && !self.g.is_writing()
                    {
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
                        Box::new(Unwind::new(cur.op, e)),
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
                    let bulk = last && self.bulk_ok(&steps);
                    self.touched = true;
                    self.wrote = true;
                    let name = if bulk { "BulkCreate" } else { "Create" };
                    let columnar = match &self.first_load {
                        Some(f) if bulk && f.id == cur.id => {
                            crate::ops::colload::plan(&f.source, &f.spec, f.slot, &steps)
                        }
                        _ => None,
                    };
                    cur = self.updating(cur, name, detail, |feed| {
                        Box::new(crate::ops::write::Create::new(feed, steps, width, bulk))
                    });
                    if let Some(c) = columnar {
                        // The row path stays below it, for an explicit transaction.
                        cur = self.wrap(
                            "ColumnarLoadCreate",
                            String::new(),
                            vec![cur.id],
                            Box::new(crate::ops::colload::ColumnarLoad::new(c, cur.op)),
                        );
                    }
                }
                Clause::Set(items) => {
                    let items = self.set_ops(items, &scope)?;
                    cur = self.updating(cur, "SetProperties", String::new(), |feed| {
                        Box::new(crate::ops::write::SetProps { feed, items })
                    });
                }
                Clause::Remove(items) => {
                    let items = self.remove_ops(items, &scope)?;
                    cur = self.updating(cur, "Remove", String::new(), |feed| {
                        Box::new(crate::ops::write::SetProps { feed, items })
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
                        Box::new(crate::ops::write::Delete {
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
                    let spec = crate::ops::load::Spec {
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
                    // The statement's first clause: a CREATE right after it may load
                    // column by column (`ops::colload`).
                    let first = (i == 0 && self.descs[cur.id].name == "Once").then(|| FirstLoad {
                        id: 0,
                        source: source.clone(),
                        spec: spec.clone(),
                        var: l.var.clone(),
                        slot: scope.width,
                    });
                    cur = self.wrap(
                        "LoadCsv",
                        detail,
                        vec![cur.id],
                        Box::new(crate::ops::load::LoadCsv::new(cur.op, source, spec)),
                    );
                    self.first_load = first.map(|f| FirstLoad { id: cur.id, ..f });
                    scope.bind(&l.var, Kind::Other);
                }
                Clause::CallProc(pc) => {
                    let proc = self.procs.find(&pc.name).ok_or_else(|| {
                        QueryError::Procedure(format!("there is no procedure {}", pc.name))
                    })?;
                    let args = match &pc.args {
                        Some(a) => a
                            .iter()
                            .map(|e| self.compile(e, &scope, &[]))
                            .collect::<Result<Vec<_>, _>>()?,
                        // Implicit arguments: the parameters named like the inputs.
                        None => proc
                            .inputs
                            .iter()
                            .map(|(n, _)| self.compile(&Expr::Param(n.clone()), &scope, &[]))
                            .collect::<Result<Vec<_>, _>>()?,
                    };
                    let standalone = clauses.len() == 1;
                    let all = || {
                        proc.outputs
                            .iter()
                            .map(|(o, _)| (o.clone(), o.clone()))
                            .collect::<Vec<_>>()
                    };
                    let yields: Vec<(String, String)> = match &pc.yields {
                        None if standalone => all(),
                        None => Vec::new(),
                        Some(_) if pc.star => all(),
                        Some(y) => y.clone(),
                    };
                    let mut outputs = Vec::new();
                    for (out, alias) in &yields {
                        let i =
                            proc.outputs
                                .iter()
                                .position(|(o, _)| o == out)
                                .ok_or_else(|| {
                                    QueryError::Argument(format!(
                                        "{}() has no output `{out}`",
                                        proc.name
                                    ))
                                })?;
                        outputs.push(i);
                        scope.bind(alias, Kind::Other);
                    }
                    let void = proc.outputs.is_empty();
                    cur = self.wrap(
                        "ProcedureCall",
                        proc.name.clone(),
                        vec![cur.id],
                        Box::new(crate::procs::CallOp::new(
                            cur.op,
                            proc.clone(),
                            args,
                            outputs,
                            void,
                        )),
                    );
                    if let Some(w) = &pc.where_ {
                        let e = self.compile(w, &scope, &[])?;
                        cur = self.filter(cur, e, w);
                    }
                    if standalone && !void {
                        let p = Projection {
                            distinct: false,
                            star: false,
                            items: yields
                                .iter()
                                .map(|(_, a)| (Expr::Var(a.clone(), 0), None))
                                .collect(),
                            order: Vec::new(),
                            skip: None,
                            limit: None,
                            where_: None,
                            texts: yields.iter().map(|(_, a)| a.clone()).collect(),
                        };
                        let (c, s, n) = self.projection(cur, &scope, &p)?;
                        cur = c;
                        scope = s;
                        names = n;
                    }
                }
                Clause::CallSubquery {
                    body,
                    optional,
                    sees_all,
                    unions,
                } => {
                    cur = self
                        .call_subquery(cur, &mut scope, body, unions, *optional, *sees_all, None)?;
                }
                Clause::CallInTx {
                    body,
                    rows,
                    on_error,
                    sees_all,
                } => {
                    let rows = match rows {
                        Some(e) => Some(self.compile(e, &Scope::default(), &[])?),
                        None => None,
                    };
                    let input_id = cur.id;
                    // What the clauses before the CALL did (planning the body marks it).
                    let before = (self.touched, self.wrote);
                    let rows_again = rows.clone();
                    let outer_scope = scope.clone();
                    // Batches below the direct path's size write through the delta:
                    // the plain CREATE, not the bulk one's builders read back at
                    // every commit (1M relationships in 1,000-row batches: 12.1 s
                    // against 10.0 s).
                    let small_batches = match &rows {
                        None => true,
                        Some(e) => match crate::expr::eval(
                            &crate::expr::Env::new(self.g),
                            e,
                            &crate::batch::Batch::unit(),
                            0,
                            &mut Vec::new(),
                        ) {
                            Ok(Value::Int(n)) => {
                                (n as u64) < quiver_common::limits::BATCH_DIRECT_MIN
                            }
                            _ => false,
                        },
                    };
                    let replan = Replan {
                        small_batches,
                        body: (**body).clone(),
                        unions: Vec::new(),
                        scope: scope.clone(),
                        sees_all: *sees_all,
                        params: self.params.clone(),
                        procs: self.procs.clone(),
                        tail: last,
                        touched: self.touched,
                        wrote: self.wrote,
                        anon: self.anon,
                        first_id: self.descs.len(),
                    };
                    let reads_outside = !last || replan.touched;
                    let fused = self.fused.take();
                    let outer_reads = self.reads_graph;
                    let outer_tail = self.tail;
                    let sub = self.call_body(&replan);
                    self.tail = outer_tail;
                    let (sub, cell, sub_names) = sub?;
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
                        Box::new(crate::ops::write::CallInTx::new(
                            cur.op,
                            cell,
                            sub.op,
                            rows,
                            *on_error,
                            returns,
                            Box::new(replan),
                            reads_outside,
                        )),
                    );
                    // `LOAD CSV ... CALL { WITH row CREATE (:L {..}) } IN TRANSACTIONS`
                    // as the whole statement loads column by column too, committing
                    // every n rows; the plan above stays below it (for BEGIN).
                    let var = match &self.first_load {
                        Some(f) if last && f.id == input_id && *on_error == OnError::Fail => {
                            Some(f.var.clone())
                        }
                        _ => None,
                    };
                    let after = (self.touched, self.wrote);
                    (self.touched, self.wrote) = before;
                    let columnar = var.and_then(|v| self.columnar_batches(v, body, &outer_scope));
                    (self.touched, self.wrote) = after;
                    if let Some(c) = columnar {
                        let c = c.in_transactions(rows_again);
                        cur = self.wrap(
                            "ColumnarLoadCreate",
                            "in transactions".into(),
                            vec![cur.id],
                            Box::new(crate::ops::colload::ColumnarLoad::new(c, cur.op)),
                        );
                    }
                }
            }
        }
        Ok((cur, scope, names))
    }

    /// `CALL { body }` over `cur` (see [`SubqueryApply`]): the body sees the variables
    /// in scope it imports, and binds the names it returns. With `count_as`, the number
    /// of rows the body gives per input row is bound to that name instead (EXISTS { }
    /// and COUNT { } over a whole query).
    #[allow(clippy::too_many_arguments)]
    fn call_subquery(
        &mut self,
        cur: P,
        scope: &mut Scope,
        body: &SingleQuery,
        unions: &[(bool, SingleQuery)],
        optional: bool,
        sees_all: bool,
        count_as: Option<&str>,
    ) -> Result<P, QueryError> {
        let returns = count_as.is_none() && matches!(body.clauses.last(), Some(Clause::Return(_)));
        // Operators that keep state across their input need a fresh plan per row (a
        // UNION's parts run one after the other, once).
        let parts = || std::iter::once(body).chain(unions.iter().map(|(_, p)| p));
        let stateful = !unions.is_empty()
            || parts().flat_map(|p| p.clauses.iter()).any(|c| match c {
                Clause::With(p) | Clause::Return(p) => {
                    p.distinct
                        || !p.order.is_empty()
                        || p.skip.is_some()
                        || p.limit.is_some()
                        || p.items.iter().any(|(e, _)| contains_aggregate(e))
                }
                Clause::Match { .. } | Clause::Unwind { .. } => false,
                _ => true,
            });
        let replan = Replan {
            small_batches: false,
            body: body.clone(),
            unions: unions.to_vec(),
            scope: scope.clone(),
            sees_all,
            params: self.params.clone(),
            procs: self.procs.clone(),
            tail: false,
            touched: self.touched,
            wrote: self.wrote,
            anon: self.anon,
            first_id: self.descs.len(),
        };
        let fused = self.fused.take();
        let outer_reads = self.reads_graph;
        let outer_tail = self.tail;
        self.reads_graph = false;
        self.tail = false;
        let planned = self.body_plan(scope, sees_all, body, unions);
        self.tail = outer_tail;
        self.reads_graph = outer_reads || self.reads_graph;
        self.fused = fused;
        let (sub, cell, sub_scope, names) = planned?;
        if parts().any(|p| p.writes()) {
            self.touched = true;
            self.wrote = true;
        }
        let out_width = if returns {
            scope.width + names.len()
        } else {
            scope.width + usize::from(count_as.is_some())
        };
        if returns {
            for n in &names {
                let kind = sub_scope.get(n).map_or(Kind::Other, |(_, k)| k);
                scope.bind(n, kind);
            }
        }
        if let Some(n) = count_as {
            scope.bind(n, Kind::Other);
        }
        Ok(self.wrap(
            if optional {
                "OptionalCallSubquery"
            } else {
                "CallSubquery"
            },
            match (stateful, count_as.is_some()) {
                (true, true) => "rows counted, planned per row",
                (true, false) => "planned per row",
                (false, true) => "rows counted",
                (false, false) => "",
            }
            .into(),
            vec![cur.id, sub.id],
            Box::new(SubqueryApply {
                input: cur.op,
                sub: sub.op,
                arg: cell,
                returns,
                count: count_as.is_some(),
                optional,
                replan: stateful.then(|| Box::new(replan) as Box<dyn Replanner>),
                out_width,
                cur: None,
            }),
        ))
    }

    /// The columnar plan of a `CALL { WITH row CREATE (...) } IN TRANSACTIONS` body
    /// over the statement's first LOAD CSV (whose row is `var`), when the body passes
    /// the row on unchanged and creates lone nodes the direct path can take.
    fn columnar_batches(
        &mut self,
        var: String,
        body: &SingleQuery,
        scope: &Scope,
    ) -> Option<crate::ops::colload::ColumnarPlan> {
        let [Clause::With(p), Clause::Create(patterns)] = &body.clauses[..] else {
            return None;
        };
        let plain = !p.distinct
            && !p.star
            && p.order.is_empty()
            && p.skip.is_none()
            && p.limit.is_none()
            && p.where_.is_none();
        let passes_row = matches!(&p.items[..], [(Expr::Var(n, _), alias)]
            if *n == var && alias.as_deref().is_none_or(|a| a == var));
        if !(plain && passes_row) {
            return None;
        }
        let f = self.first_load.as_ref()?;
        let (source, spec, slot) = (f.source.clone(), f.spec.clone(), f.slot);
        let mut sc = scope.clone();
        let mut steps = Vec::new();
        for p in patterns {
            self.create_steps(p, &mut sc, &mut steps).ok()?;
        }
        if !self.bulk_ok(&steps) {
            return None;
        }
        crate::ops::colload::plan(&source, &spec, slot, &steps)
    }

    // -------------------------------------------------------------------------------
    // Updating clauses

    fn anon_name(&mut self) -> String {
        self.anon += 1;
        format!(" anon{}", self.anon)
    }

    /// Plans each pattern comprehension in `e` as a RollUpApply over `cur` (the
    /// pattern matched for every row, its mapping collected into a list per row) and
    /// puts a hidden variable holding the list in its place.
    fn hoist(&mut self, mut cur: P, scope: &mut Scope, e: &mut Expr) -> Result<P, QueryError> {
        if !needs_hoist(e) {
            return Ok(cur);
        }
        // `EXISTS { body }` / `COUNT { body }` over a whole query: the body as a CALL
        // subquery (seeing the row's variables) whose rows the apply counts, its RETURN
        // becoming a WITH; a hidden variable holds the count (one row per input row).
        if let Expr::Subquery { kind, body } = e {
            let name = self.anon_name();
            let inner = self.anon_name();
            let mut b = (**body).clone();
            if let Some(Clause::Return(mut p)) = b.clauses.last().cloned() {
                b.clauses.pop();
                // COLLECT's one column, under a name of its own.
                if *kind == SubqueryKind::Collect {
                    if let Some(item) = p.items.first_mut() {
                        item.1 = Some(inner.clone());
                    }
                }
                b.clauses.push(Clause::With(p));
            }
            // EXISTS and COUNT: the apply counts the body's rows (no aggregation in the
            // body, which would have it planned again for every row).
            if *kind != SubqueryKind::Collect {
                cur = self.call_subquery(cur, scope, &b, &[], false, true, Some(&name))?;
                let v = Expr::Var(name, 0);
                *e = match kind {
                    SubqueryKind::Exists => {
                        Expr::Binary(BinOp::Gt, Box::new(v), Box::new(Expr::Int(0)))
                    }
                    _ => v,
                };
                return Ok(cur);
            }
            // COLLECT: each value as a one-element list, flattened after, so that its
            // nulls stay (collect() alone would skip them).
            let agg = Expr::Call {
                name: "collect".into(),
                distinct: false,
                args: vec![Expr::List(vec![Expr::Var(inner, 0)])],
            };
            b.clauses.push(Clause::Return(Projection {
                distinct: false,
                star: false,
                items: vec![(agg, Some(name.clone()))],
                order: Vec::new(),
                skip: None,
                limit: None,
                where_: None,
                texts: vec![name.clone()],
            }));
            cur = self.call_subquery(cur, scope, &b, &[], false, true, None)?;
            *e = Expr::Call {
                name: "apoc.coll.flatten".into(),
                distinct: false,
                args: vec![Expr::Var(name, 0)],
            };
            return Ok(cur);
        }
        if let Expr::PatternComp { pattern, pred, map } = e {
            let detail = short(&Expr::PatternComp {
                pattern: pattern.clone(),
                pred: pred.clone(),
                map: map.clone(),
            });
            let (arg, cell) = self.argument();
            let mut sub_scope = scope.clone();
            let row_col = sub_scope.hidden();
            let mut sub = self.match_clause(
                arg,
                &mut sub_scope,
                std::slice::from_ref(&**pattern),
                pred.as_deref().cloned(),
            )?;
            sub = self.hoist(sub, &mut sub_scope, map)?;
            let m = self.compile(map, &sub_scope, &[])?;
            let value_col = sub_scope.width;
            let sub = self.wrap(
                "Extend",
                short(map),
                vec![sub.id],
                Box::new(Extend {
                    input: sub.op,
                    exprs: vec![m],
                }),
            );
            cur = self.wrap(
                "RollUpApply",
                detail,
                vec![cur.id, sub.id],
                Box::new(RollUpApply {
                    input: cur.op,
                    sub: sub.op,
                    arg: cell,
                    row_col,
                    value_col,
                }),
            );
            let name = self.anon_name();
            scope.bind(&name, Kind::Other);
            *e = Expr::Var(name, 0);
            return Ok(cur);
        }
        // One inside a list comprehension or reduce() that reads its variable would be
        // computed before that variable has a value.
        if let Some((vars, bodies, _)) = local_scope(e) {
            // Comprehensions that start at the variable and name nothing else are
            // matched where they stand (`CExpr::PatternList`): nothing to hoist.
            if bodies.iter().all(|b| comps_start_at(b, &vars)) {
                return Ok(cur);
            }
            if bodies
                .iter()
                .any(|b| b.has_pattern_comp() && vars_of(b).iter().any(|v| vars.contains(v)))
            {
                return Err(QueryError::Unsupported(
                    "a pattern comprehension that reads the variable of a list comprehension or reduce() around it; match the pattern in a MATCH or WITH first".into(),
                ));
            }
        }
        let mut result = Ok(());
        let mut slot = Some(cur);
        e.for_each_child_mut(&mut |c| {
            if result.is_ok() {
                match self.hoist(slot.take().expect("put back"), scope, c) {
                    Ok(p) => slot = Some(p),
                    Err(err) => result = Err(err),
                }
            }
        });
        result?;
        Ok(slot.expect("put back"))
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

    /// SKIP and LIMIT: an expression of constants and parameters (no variables),
    /// evaluated once, that must give a non-negative integer.
    fn const_usize(&mut self, e: &Expr, what: &str) -> Result<usize, QueryError> {
        let c = self.compile(e, &Scope::default(), &[]).map_err(|_| {
            QueryError::Argument(format!(
                "{what} needs an expression of constants and parameters (no variables)"
            ))
        })?;
        let one = crate::batch::Batch::empty(0);
        let env = crate::expr::Env::new(self.g);
        let v = match c {
            CExpr::Const(v) => v,
            c => crate::expr::eval(&env, &c, &one, 0, &mut Vec::new())?,
        };
        match v {
            Value::Int(i) if i >= 0 => Ok(i as usize),
            v => Err(QueryError::InvalidArgument(
                if matches!(v, Value::Int(_)) {
                    Detail::NegativeIntegerArgument
                } else {
                    Detail::InvalidArgumentType
                },
                format!(
                    "{what} needs a non-negative integer, got {}",
                    crate::expr::to_string(&v)
                ),
            )),
        }
    }
}

/// Whether `e` holds a pattern comprehension that [`Planner::hoist`] plans (not one it
/// leaves in place inside a list comprehension or reduce(), see [`comps_start_at`]).
pub(crate) fn needs_hoist(e: &Expr) -> bool {
    if matches!(e, Expr::PatternComp { .. } | Expr::Subquery { .. }) {
        return true;
    }
    let Some((vars, bodies, list)) = local_scope(e) else {
        return e.children().into_iter().any(needs_hoist);
    };
    if !bodies.is_empty() && bodies.iter().all(|b| comps_start_at(b, &vars)) {
        return list.into_iter().any(needs_hoist);
    }
    e.has_pattern_comp()
}

/// A list comprehension's or reduce()'s own variables, the parts of it that see them
/// (predicate, mapping, expression), and the parts that do not (list, initial value).
type LocalScope<'e> = (Vec<String>, Vec<&'e Expr>, Vec<&'e Expr>);

fn local_scope(e: &Expr) -> Option<LocalScope<'_>> {
    match e {
        Expr::ListComp {
            var,
            list,
            pred,
            map,
        } => Some((
            vec![var.clone()],
            pred.iter().chain(map.iter()).map(|x| &**x).collect(),
            vec![&**list],
        )),
        Expr::Reduce {
            acc,
            init,
            var,
            list,
            expr,
        } => Some((
            vec![acc.clone(), var.clone()],
            vec![&**expr],
            vec![&**init, &**list],
        )),
        _ => None,
    }
}

/// Whether every pattern comprehension in `e` starts at one of `vars` in the shape
/// [`compile::local_start`] takes, without a WHERE (`e` holding none is false: there is
/// nothing to leave in place).
fn comps_start_at(e: &Expr, vars: &[String]) -> bool {
    fn all(e: &Expr, vars: &[String], any: &mut bool) -> bool {
        match e {
            Expr::PatternComp { pattern, pred, map } => {
                *any = true;
                pred.is_none() && compile::local_start(pattern, vars) && all(map, vars, any)
            }
            e => e.children().into_iter().all(|c| all(c, vars, any)),
        }
    }
    let mut any = false;
    all(e, vars, &mut any) && any
}

/// `MATCH ... WITH a, b WHERE p` where the WITH only passes variables on (no renaming,
/// DISTINCT, ORDER BY, SKIP or LIMIT): `p` joins the MATCH's WHERE, so it can pick the
/// match's anchor (an index seek) instead of filtering every row the match made. The
/// rows are the same: `p` reads only what the WITH passes, under the same names, and a
/// non-optional MATCH drops the rows `p` rejects either way. `None`: nothing to move.
/// `MATCH ... RETURN count(DISTINCT e)` (the projection's one item, after a MATCH) as
/// `MATCH ... WITH DISTINCT e AS d RETURN count(d)`: the distinct values become a
/// grouping, which a scan-aggregate computes on its typed path (mgbench's
/// `aggregate_with_distinct` over 1.6M users: 102 ms by a set of values per row). The
/// same count: DISTINCT keeps one null at most, and `count` skips it; no rows still
/// count 0. `None`: nothing to rewrite.
fn distinct_count_as_grouping(clauses: &[Clause]) -> Option<Vec<Clause>> {
    let fits = |i: usize| -> bool {
        let (Clause::Return(p) | Clause::With(p)) = &clauses[i] else {
            return false;
        };
        let counted = match &p.items[..] {
            [(
                Expr::Call {
                    name,
                    distinct: true,
                    args,
                },
                _,
            )] if name.eq_ignore_ascii_case("count") => {
                matches!(&args[..], [e] if !contains_aggregate(e))
            }
            _ => false,
        };
        counted
            && !p.distinct
            && !p.star
            && p.order.is_empty()
            && p.where_.is_none()
            && matches!(
                clauses[i - 1],
                Clause::Match {
                    optional: false,
                    ..
                }
            )
    };
    let at: Vec<usize> = (1..clauses.len()).filter(|&i| fits(i)).collect();
    if at.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(clauses.len() + at.len());
    for (i, c) in clauses.iter().enumerate() {
        let p = match c {
            Clause::Return(p) | Clause::With(p) if at.contains(&i) => p,
            c => {
                out.push(c.clone());
                continue;
            }
        };
        let (Expr::Call { args, .. }, alias) = &p.items[0] else {
            continue;
        };
        let d = "  distinct counted".to_string();
        out.push(Clause::With(Projection {
            distinct: true,
            star: false,
            items: vec![(args[0].clone(), Some(d.clone()))],
            order: Vec::new(),
            skip: None,
            limit: None,
            where_: None,
            texts: vec![d.clone()],
        }));
        let mut q = p.clone();
        q.items = vec![(
            Expr::Call {
                name: "count".into(),
                distinct: false,
                args: vec![Expr::Var(d, 0)],
            },
            // The column keeps its name.
            Some(alias.clone().unwrap_or_else(|| p.texts[0].clone())),
        )];
        out.push(match c {
            Clause::Return(_) => Clause::Return(q),
            _ => Clause::With(q),
        });
    }
    Some(out)
}

fn push_where_through_with(clauses: &[Clause]) -> Option<Vec<Clause>> {
    let movable = |w: &Clause| match w {
        Clause::With(p) => p.where_.is_some()
            && !p.distinct
            && p.order.is_empty()
            && p.skip.is_none()
            && p.limit.is_none()
            && p.items.iter().all(
                |(e, alias)| matches!(e, Expr::Var(n, _) if alias.as_ref().is_none_or(|a| a == n)),
            ),
        _ => false,
    };
    let at: Vec<usize> = (1..clauses.len())
        .filter(|&i| {
            matches!(
                clauses[i - 1],
                Clause::Match {
                    optional: false,
                    ..
                }
            ) && movable(&clauses[i])
        })
        .collect();
    if at.is_empty() {
        return None;
    }
    let mut out = clauses.to_vec();
    for i in at {
        let Clause::With(p) = &mut out[i] else {
            continue;
        };
        let w = p.where_.take().expect("movable");
        if let Clause::Match { where_, .. } = &mut out[i - 1] {
            *where_ = Some(match where_.take() {
                Some(x) => Expr::Binary(BinOp::And, Box::new(x), Box::new(w)),
                None => w,
            });
        }
    }
    Some(out)
}
