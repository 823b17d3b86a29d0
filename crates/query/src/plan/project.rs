//! Planning RETURN / WITH: projections, aggregation, DISTINCT, ORDER BY, SKIP and LIMIT.

use super::*;

impl<'a, 'g, 'db> Planner<'a, 'g, 'db> {
    pub(super) fn projection(
        &mut self,
        mut cur: P,
        scope: &Scope,
        p: &Projection,
    ) -> Result<(P, Scope, Vec<String>), QueryError> {
        // Pattern comprehensions in the items and ORDER BY are lists computed per row
        // first (RollUpApply); the items then read them as hidden variables.
        if p.items
            .iter()
            .map(|i| &i.0)
            .chain(p.order.iter().map(|o| &o.0))
            .any(needs_hoist)
        {
            let mut scope = scope.clone();
            let mut p = p.clone();
            if p.texts.len() < p.items.len() {
                let texts: Vec<String> = p.items.iter().map(|(e, _)| short(e)).collect();
                p.texts = texts;
            }
            for e in p
                .items
                .iter_mut()
                .map(|i| &mut i.0)
                .chain(p.order.iter_mut().map(|o| &mut o.0))
            {
                cur = self.hoist(cur, &mut scope, e)?;
            }
            return self.projection(cur, &scope, &p);
        }
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
        let aggregating = items.iter().any(|(e, _)| contains_aggregate(e));
        let kind_of = |e: &Expr| match e {
            Expr::Var(n, _) => scope.get(n).map_or(Kind::Other, |s| s.1),
            _ => Kind::Other,
        };
        let detail = names.join(", ");
        // What the items are computed from: the input rows, or after aggregation the
        // grouping keys and aggregates (reached through `src_subst`, by expression).
        // DISTINCT right over a label scan (and not cut short by a LIMIT without ORDER
        // BY, where streaming stops early) is a grouping by its items with no
        // aggregates: the parallel scan-aggregate reads their columns typed, and groups
        // spill; a Distinct would make a vector of values per row.
        let distinct_by_groups = p.distinct
            && !aggregating
            && (p.limit.is_none() || !p.order.is_empty())
            && self.fused.as_ref().is_some_and(|f| {
                f.id == cur.id && scope.width == 1 && scope.get(&f.var).map(|s| s.0) == Some(0)
            });
        // Rows already distinct: their nodes were made distinct before the projection
        // and each row names its node (a Distinct over the items would hash each row's
        // values only to keep them all).
        let mut rows_distinct = false;
        let (src_scope, src_subst) = if aggregating || distinct_by_groups {
            let (c, src) = self.aggregate(cur, scope, &items, p)?;
            cur = c;
            src
        } else {
            let deduped;
            (cur, deduped) = self.distinct_nodes(cur, scope, &items, p);
            rows_distinct = deduped && items_name_their_nodes(&items);
            (scope.clone(), Vec::new())
        };
        let n_items = items.len();
        // ORDER BY may use what the items were computed from: keep those columns after
        // the items until it has run.
        // So may a WITH's WHERE (`WITH c WHERE r IS NULL`: variables from before the
        // WITH that it does not project, as the standard scopes them).
        let where_src = p
            .where_
            .as_ref()
            .is_some_and(|w| vars_of(w).iter().any(|v| !names.contains(v)));
        let keep_src = (!p.order.is_empty() || where_src) && (aggregating || !p.distinct);
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
        if p.distinct && !distinct_by_groups && !rows_distinct {
            cur = self.wrap(
                "Distinct",
                String::new(),
                vec![cur.id],
                Box::new(Distinct::new(cur.op, n_items)),
            );
        }
        // A WHERE that reads the source columns runs before they are dropped (and so a
        // sort carries them too).
        let where_early = where_src && keep_src;
        let carry = if where_early {
            new_scope.width
        } else {
            n_items
        };
        cur = self.order_limit(cur, &new_scope, p, &subst, carry)?;
        if let (Some(w), true) = (&p.where_, where_early) {
            // A subquery or pattern comprehension in it is a hidden column, which the
            // trim below drops.
            cur = self.filter_hoisted(cur, &mut new_scope, w.clone(), &subst)?;
        }
        cur = self.trim(cur, &mut new_scope, n_items);
        if let (Some(w), false) = (&p.where_, where_early) {
            // An item's expression stands for the item (`WITH DISTINCT a.x AS x
            // WHERE a.x = 1`).
            let items_only: Vec<(Expr, usize)> = subst
                .iter()
                .filter(|(_, s)| *s < n_items)
                .cloned()
                .collect();
            cur = self.filter_hoisted(cur, &mut new_scope, w.clone(), &items_only)?;
            cur = self.trim(cur, &mut new_scope, n_items);
        }
        Ok((cur, new_scope, names))
    }

    /// The aggregation of a projection (serial, or a parallel scan-aggregate right after
    /// a fusable scan): the operator, and the scope and substitutions its output is read
    /// through (grouping keys first, then aggregates).
    #[allow(clippy::type_complexity)]
    pub(super) fn aggregate(
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
            .filter(|e| !contains_aggregate(e))
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
        // `b, count(*)` right over a one-hop expansion from every node: degrees.
        let degrees = self.degree_cand.take().filter(|c| {
            c.id == cur.id
                && !p.distinct
                && matches!(keys.as_slice(), [Expr::Var(v, _)] if *v == c.to_var)
                && specs.len() == 1
                && specs[0].func == AggFn::CountStar
        });
        if let Some(c) = degrees {
            let op = self.wrap(
                "DegreeCount",
                format!("({}) {detail}", c.to_var.trim()),
                vec![],
                Box::new(DegreeCount {
                    types: c.types,
                    dir: c.dir,
                    label: c.label,
                    next: 0,
                }),
            );
            let width = subst.len();
            return Ok((
                op,
                (
                    Scope {
                        vars: Vec::new(),
                        width,
                    },
                    subst,
                ),
            ));
        }
        let fused = self.fused.take().filter(|f| {
            f.id == cur.id
                && scope.width == 1
                && scope.get(&f.var).map(|s| s.0) == Some(0)
                && specs.iter().all(|a| !a.distinct)
        });
        let op = match fused {
            Some(f) => {
                let direct = direct_columns(f.filter.as_ref(), &key_exprs, &specs);
                let fast = direct.as_ref().and_then(FastAgg::plan);
                // "typed": keys and arguments read as typed columns (see ops::colagg).
                let typed = if fast.is_some() { ", typed" } else { "" };
                self.wrap(
                    "ParallelScanAggregate",
                    format!("({}{typed}) {detail}", f.var.trim()),
                    vec![],
                    Box::new(ParallelAggregate {
                        direct,
                        fast,
                        ranges: f.ranges,
                        filter: f.filter,
                        keys: key_exprs,
                        aggs: specs,
                        out: None,
                        extras: Vec::new(),
                        peak: 0,
                    }),
                )
            }
            None => self.wrap(
                "Aggregate",
                detail,
                vec![cur.id],
                Box::new(Aggregate::new(cur.op, key_exprs, specs)),
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
    /// Whether it did.
    pub(super) fn distinct_nodes(
        &mut self,
        mut cur: P,
        scope: &Scope,
        items: &[(Expr, String)],
        p: &Projection,
    ) -> (P, bool) {
        if !p.distinct {
            return (cur, false);
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
                    _ => return (cur, false),
                }
            }
        }
        if node_slots.is_empty() {
            return (cur, false);
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
                return (cur, true);
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
        (cur, true)
    }

    /// ORDER BY, SKIP and LIMIT over `cur`; a sort carries only the first `carry`
    /// columns (the items: the columns after them, kept for the keys, are trimmed next).
    pub(super) fn order_limit(
        &mut self,
        mut cur: P,
        scope: &Scope,
        p: &Projection,
        subst: &[(Expr, usize)],
        carry: usize,
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
            ) + &if skip > 0 {
                format!(", skip {skip}")
            } else {
                String::new()
            };
            cur = self.wrap(
                if top.is_some() { "Top" } else { "Sort" },
                detail,
                vec![cur.id],
                Box::new(Sort::new(cur.op, keys, top, skip, carry)),
            );
        }
        // Sort passes over the SKIP rows itself.
        let skip = if p.order.is_empty() { skip } else { 0 };
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
                    drain: self.wrote,
                    pulls: 0,
                }),
            );
        }
        Ok(cur)
    }

    pub(super) fn agg_spec(&mut self, a: &Expr, scope: &Scope) -> Result<AggSpec, QueryError> {
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
}

/// Whether every item of a DISTINCT projection is a variable or a property of one, and
/// every variable a property is read from is an item too: rows of distinct nodes (as
/// [`Planner::distinct_nodes`] leaves them, its items' variables all nodes) are then
/// distinct rows (`RETURN DISTINCT n.id, n`; not `RETURN DISTINCT n.id`, where two
/// nodes may share the value).
fn items_name_their_nodes(items: &[(Expr, String)]) -> bool {
    let named = |v: &str| {
        items
            .iter()
            .any(|(e, _)| matches!(e, Expr::Var(x, _) if x == v))
    };
    items.iter().all(|(e, _)| match e {
        Expr::Var(..) => true,
        Expr::Prop(inner, _) => matches!(&**inner, Expr::Var(v, _) if named(v)),
        _ => false,
    })
}
