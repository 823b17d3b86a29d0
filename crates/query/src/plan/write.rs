//! Planning the updating clauses: CREATE (and whether it takes the direct path), SET,
//! REMOVE, DELETE and MERGE.

use super::*;

/// Plans a [`CreateStep::Publish`](crate::ops::write::CreateStep) before a step whose
/// property expression reads a node or relationship this CREATE made earlier.
fn publish_if_read(e: &Expr, scope: &Scope, steps: &mut Vec<crate::ops::write::CreateStep>) {
    use crate::ops::write::CreateStep;
    let names = vars_of(e);
    let made = |slot: usize| {
        steps.iter().any(|s| {
            matches!(s, CreateStep::Node { slot: x, .. } | CreateStep::Rel { slot: x, .. } if *x == slot)
        })
    };
    let reads = names
        .iter()
        .any(|n| scope.get(n).is_some_and(|(slot, _)| made(slot)));
    if reads && !matches!(steps.last(), Some(CreateStep::Publish)) {
        steps.push(CreateStep::Publish);
    }
}

impl<'a, 'g, 'db> Planner<'a, 'g, 'db> {
    /// The create steps of one pattern: bound nodes are reused, the rest created.
    pub(super) fn create_steps(
        &mut self,
        p: &Pattern,
        scope: &mut Scope,
        steps: &mut Vec<crate::ops::write::CreateStep>,
    ) -> Result<(), QueryError> {
        use crate::ops::write::CreateStep;
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
                    if !n.labels.is_empty() || !n.dyn_labels.is_empty() || n.props.is_some() {
                        return Err(QueryError::Argument(format!(
                            "variable {v} is already bound: CREATE cannot add labels or properties to it (use SET)"
                        )));
                    }
                    return Ok(slot);
                }
            }
            let props = match &n.props {
                Some(e) => {
                    publish_if_read(e, scope, steps);
                    Some(crate::ops::write::PropsExpr::new(this.compile(
                        e,
                        scope,
                        &[],
                    )?))
                }
                None => None,
            };
            let dyn_labels = n
                .dyn_labels
                .iter()
                .map(|e| this.compile(e, scope, &[]))
                .collect::<Result<_, _>>()?;
            let name = n.var.clone().unwrap_or_else(|| this.anon_name());
            let slot = scope.bind(&name, Kind::Node);
            steps.push(CreateStep::Node {
                slot,
                labels: n.labels.iter().map(|l| Arc::from(l.as_str())).collect(),
                dyn_labels,
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
            let (ty, dyn_ty) = match (r.types.as_slice(), r.dyn_types.as_slice()) {
                ([ty], []) => (Arc::from(ty.as_str()), None),
                ([], [e]) => (Arc::from(""), Some(self.compile(e, scope, &[])?)),
                _ => {
                    return Err(QueryError::Argument(
                        "a created relationship needs exactly one type, like -[:KNOWS]->".into(),
                    ))
                }
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
                Some(e) => {
                    publish_if_read(e, scope, steps);
                    Some(crate::ops::write::PropsExpr::new(self.compile(
                        e,
                        scope,
                        &[],
                    )?))
                }
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
                ty,
                dyn_ty,
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

    /// Whether a CREATE that ends the statement may take the direct path (seed 004,
    /// `quiver_engine::bulk`): properties as map literals (so the shape is known at plan
    /// time), and either lone nodes, with nothing before touching the graph and no
    /// uniqueness constraint on their labels, or relationships only, between nodes
    /// bound before (read, not written, by the clauses before). In the body of `CALL
    /// { } IN TRANSACTIONS` a batch's direct commit publishes a new generation, and the
    /// body is planned again on it before the next batch (`write::CallInTx`); batches
    /// smaller than `BATCH_DIRECT_MIN` take the plain CREATE.
    pub(super) fn bulk_ok(&self, steps: &[crate::ops::write::CreateStep]) -> bool {
        use crate::ops::write::{CreateStep, PropsExpr};
        if self.small_batches {
            return false;
        }
        let literal = |p: &Option<PropsExpr>| matches!(p, None | Some(PropsExpr::Literal(_)));
        let nodes = !self.touched
            && steps.iter().all(|s| match s {
                CreateStep::Node {
                    labels,
                    dyn_labels,
                    props,
                    ..
                } => {
                    literal(props)
                        && dyn_labels.is_empty()
                        && !labels.iter().any(|l| self.indexes.constrains_label(l))
                }
                _ => false,
            });
        let rels = !self.wrote
            && steps.iter().all(|s| match s {
                CreateStep::Rel { props, dyn_ty, .. } => literal(props) && dyn_ty.is_none(),
                _ => false,
            });
        !steps.is_empty() && (nodes || rels)
    }

    /// An updating operator over `cur`: its input is eager when an earlier operator
    /// scanned or expanded.
    pub(super) fn updating(
        &mut self,
        cur: P,
        name: &'static str,
        detail: String,
        make: impl FnOnce(crate::ops::write::Feed) -> BoxOp,
    ) -> P {
        let feed = crate::ops::write::Feed::new(cur.op, self.reads_graph, name);
        self.wrap(name, detail, vec![cur.id], make(feed))
    }

    /// REMOVE items as the SET items they amount to: a property set to null, labels
    /// taken away.
    pub(super) fn remove_ops(
        &mut self,
        items: &[RemoveItem],
        scope: &Scope,
    ) -> Result<Vec<crate::ops::write::SetOp>, QueryError> {
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
                RemoveItem::LabelExprs { var, exprs } => SetItem::LabelExprs {
                    var: var.clone(),
                    exprs: exprs.clone(),
                },
            })
            .collect();
        let mut ops = self.set_ops(&as_set, scope)?;
        for op in &mut ops {
            if let crate::ops::write::SetOp::Labels { add, .. } = op {
                *add = false;
            }
        }
        Ok(ops)
    }

    pub(super) fn set_ops(
        &mut self,
        items: &[SetItem],
        scope: &Scope,
    ) -> Result<Vec<crate::ops::write::SetOp>, QueryError> {
        use crate::ops::write::SetOp;
        let mut ops = Vec::new();
        for i in items {
            ops.push(match i {
                SetItem::Prop { target, key, value } => SetOp::Prop {
                    target: self.compile(target, scope, &[])?,
                    key: Arc::from(key.as_str()),
                    value: self.compile(value, scope, &[])?,
                },
                SetItem::DynProp { target, key, value } => SetOp::DynProp {
                    target: self.compile(target, scope, &[])?,
                    key: self.compile(key, scope, &[])?,
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
                    dynamic: Vec::new(),
                    add: true,
                },
                SetItem::LabelExprs { var, exprs } => SetOp::Labels {
                    target: self.compile(&Expr::Var(var.clone(), 0), scope, &[])?,
                    labels: Vec::new(),
                    dynamic: exprs
                        .iter()
                        .map(|e| self.compile(e, scope, &[]))
                        .collect::<Result<_, _>>()?,
                    add: true,
                },
            });
        }
        Ok(ops)
    }

    pub(super) fn merge(
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
        // An undirected MERGE matches either way and creates left to right.
        let mut create_pat = pat.clone();
        for (r, _) in &mut create_pat.steps {
            if r.dir == Dir::Both {
                r.dir = Dir::Out;
            }
        }
        self.create_steps(&create_pat, &mut create_scope, &mut steps)?;
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
                crate::ops::write::CreateStep::Node { slot, .. } => fix(slot),
                crate::ops::write::CreateStep::Rel { slot, src, dst, .. } => {
                    fix(slot);
                    fix(src);
                    fix(dst);
                }
                crate::ops::write::CreateStep::Path { slot, nodes, rels } => {
                    fix(slot);
                    nodes.iter_mut().for_each(fix);
                    rels.iter_mut().for_each(fix);
                }
                crate::ops::write::CreateStep::Publish => {}
            }
        }
        let on_create = self.set_ops(on_create, &sub_scope)?;
        let on_match = self.set_ops(on_match, &sub_scope)?;
        *scope = sub_scope;
        Ok(self.wrap(
            "Merge",
            quiver_cypher::print::pattern(pattern),
            vec![cur.id, sub.id],
            Box::new(crate::ops::write::Merge {
                feed: crate::ops::write::Feed::new(cur.op, eager, "Merge"),
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
}
