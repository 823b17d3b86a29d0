//! Planning pattern expansion from the anchor both ways, and shortestPath.

use super::*;

impl<'a, 'g, 'db> Planner<'a, 'g, 'db> {
    pub(super) fn rel_types(&self, r: &RelPattern) -> Vec<u32> {
        if let Some(e) = &r.type_expr {
            // `-[:!KNOWS]->`, `-[:%]->`: the types the expression admits (a writing
            // statement has every type it names interned before it is planned).
            return (0..self.g.n_rel_types() as u32)
                .filter(|&t| {
                    let name = self.g.rel_type_name(t);
                    e.matches(&|x| *x == *name, true)
                })
                .collect();
        }
        if r.types.is_empty() {
            (0..self.g.n_rel_types() as u32).collect()
        } else {
            // `-[:T|T]->` names a type twice but matches each relationship once.
            let mut ids: Vec<u32> = Vec::with_capacity(r.types.len());
            for id in r.types.iter().filter_map(|t| self.g.rel_type_id(t)) {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            ids
        }
    }

    /// Whether plan node `input` is the first clause's scan of `from_n` (every node, or
    /// a label that every node has, nothing else bound, no property filter).
    fn scans_every_node(&self, input: usize, from_n: &NodePattern, scope: &Scope) -> bool {
        let d = &self.descs[input];
        let first = d
            .children
            .first()
            .is_some_and(|&c| self.descs[c].name == "Once");
        let covers = || match from_n.labels.as_slice() {
            [] => from_n.label_expr.is_none(),
            [l] => self.g.label_id(l).is_some_and(|id| {
                // Created nodes are none (the shape is the segments'): their ranges.
                let ranges = self.segment_label_ranges(Some(id));
                ranges.iter().all(|r| r.label.is_none())
                    && ranges.iter().map(|r| r.hi - r.lo).sum::<u64>() == self.g.n_nodes()
            }),
            _ => false,
        };
        matches!(d.name, "AllNodesScan" | "NodeByLabelScan")
            && first
            && scope.width == 1
            && from_n.props.is_none()
            && covers()
    }

    pub(super) fn pattern(
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
            let type_names = match &r.type_expr {
                Some(e) => format!(":{}", quiver_cypher::print::label_expr(e)),
                None if r.types.is_empty() => String::new(),
                None => format!(":{}", r.types.join("|")),
            };
            let rvar = r.var.clone();
            let uniq = rel_slots.clone();
            let input = cur.id;
            // `b, count(*)` over this expansion may be read from degrees: one hop,
            // straight out of a scan of every node, unfiltered, on a database whose
            // delta changes no node, label or relationship (its plan node is set once
            // made).
            self.degree_cand = (p.steps.len() == 1
                && r.range.is_none()
                && into.is_none()
                && rvar.is_none()
                && dir != Dir::Both
                && labels.len() <= 1
                && self.g.shape_unchanged()
                && !self.g.is_writing()
                && self.scans_every_node(input, from_n, scope))
            .then(|| DegreeCand {
                id: usize::MAX,
                to_var: to_var.clone(),
                types: types.clone(),
                dir: if dir == Dir::Out {
                    Direction::In
                } else {
                    Direction::Out
                },
                label: labels.first().copied(),
            });
            // The operator, its description, its DISTINCT switch, and how its relationship
            // (one, or a list for variable length) is bound and enters a named path.
            let (name, body, op, flag, rel_kind, part): (_, _, BoxOp, _, _, fn(usize) -> PathPart) =
                match r.range {
                    None => {
                        let distinct = DistinctTargets::default();
                        let flag = distinct.on.clone();
                        let live_types = rvar.as_ref().is_some_and(|v| self.live_types.contains(v));
                        let op = Expand {
                            live_types,
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
                            skip: 0,
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
            if let Some(c) = &mut self.degree_cand {
                c.id = cur.id;
            }
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
    pub(super) fn shortest(
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
        let all = p.kind == PathKind::AllShortest || r.weighted.as_ref().is_some_and(|w| w.all);
        let (node_ok, rel_ok) = match &p.var {
            Some(pv) => self.path_filters(pv, conj)?,
            None => (Vec::new(), Vec::new()),
        };
        // Memgraph's filter lambda `(e, n | pred)`: each step's relationship (slot 0)
        // and the node it reaches (slot 1).
        let step_ok = match &r.filter {
            Some(l) => Some(self.lambda(l, "a filter lambda")?),
            None => None,
        };
        // Memgraph's weighted spellings: a weight that is the same for every step makes
        // the lightest paths the shortest ones (the BFS finds them); any other weight
        // takes Dijkstra's search.
        let (weight, dijkstra) = match &r.weighted {
            Some(w) => match self.lambda(&w.weight, "a weight lambda")? {
                CExpr::Const(v @ (Value::Int(0..) | Value::Float(0.0..))) => {
                    (Some((w.total.clone(), v)), None)
                }
                e => (None, Some((w.total.clone(), e))),
            },
            None => (None, None),
        };
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
        let detail = match (node_ok.len(), rel_ok.len()) {
            (0, 0) => detail,
            (n, r) => {
                format!("{detail}, filtering in the search ({n} node, {r} relationship predicates)")
            }
        };
        cur = self.wrap(
            if dijkstra.is_some() {
                if all {
                    "AllWeightedShortestPaths"
                } else {
                    "WeightedShortestPath"
                }
            } else if all {
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
                node_ok,
                rel_ok,
                step_ok,
                weight: dijkstra.as_ref().map(|(_, e)| e.clone()),
            }),
        );
        if to.is_none() {
            scope.bind(&ev, Kind::Node);
        }
        let path_slot = scope.bind(p.var.as_deref().unwrap_or(" path"), Kind::Other);
        if let Some((total, _)) = &dijkstra {
            scope.bind(total, Kind::Other);
        }
        if let Some((total, w)) = weight {
            let w = match w {
                Value::Int(i) => Expr::Int(i),
                Value::Float(f) => Expr::Float(f),
                _ => Expr::Null,
            };
            let path = p.var.clone().unwrap_or_else(|| " path".into());
            let e = Expr::Binary(
                BinOp::Mul,
                Box::new(Expr::Call {
                    name: "length".into(),
                    distinct: false,
                    args: vec![Expr::Var(path, 0)],
                }),
                Box::new(w),
            );
            let c = self.compile(&e, scope, &[])?;
            cur = self.wrap(
                "Extend",
                format!("{} = the path's weight", total.trim()),
                vec![cur.id],
                Box::new(Extend {
                    input: cur.op,
                    exprs: vec![c],
                }),
            );
            scope.bind(&total, Kind::Other);
        }
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

    /// Memgraph's lambda `(e, n | expr)` compiled over a step: its relationship in slot 0,
    /// the node it reaches in slot 1; it may read nothing else (`what` names it in the
    /// error).
    fn lambda(&mut self, l: &Lambda, what: &str) -> Result<CExpr, QueryError> {
        if !reads_only(&l.expr, &[l.rel.clone(), l.node.clone()]) {
            return Err(QueryError::Unsupported(format!(
                "{what} may read only its own two variables (`{}`, `{}`) for now",
                l.rel, l.node
            )));
        }
        let mut sc = Scope::default();
        sc.bind(&l.rel, Kind::Rel);
        sc.bind(&l.node, Kind::Node);
        self.compile(&l.expr, &sc, &[])
    }

    /// Takes out of `conj` the predicates over every node or every relationship of path
    /// `pv` (`all(x IN nodes(pv) WHERE q)`, `none(...)`, the same over
    /// `relationships(pv)`) whose `q` reads nothing but `x`, compiled over slot 0, for
    /// the search to apply as it goes. Others stay filters on the path found.
    #[allow(clippy::type_complexity)]
    fn path_filters(
        &mut self,
        pv: &str,
        conj: &mut Vec<Expr>,
    ) -> Result<(Vec<(CExpr, bool)>, Vec<(CExpr, bool)>), QueryError> {
        let (mut nodes, mut rels) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < conj.len() {
            if let Some((of_nodes, var, q, negate)) = path_quantifier(&conj[i], pv) {
                if reads_only(q, &[var.to_string()]) {
                    let mut sc = Scope::default();
                    sc.bind(var, if of_nodes { Kind::Node } else { Kind::Rel });
                    let c = self.compile(q, &sc, &[])?;
                    if of_nodes {
                        nodes.push((c, negate));
                    } else {
                        rels.push((c, negate));
                    }
                    conj.remove(i);
                    continue;
                }
            }
            i += 1;
        }
        Ok((nodes, rels))
    }

    // -------------------------------------------------------------------------------
    // WITH / RETURN
}

/// `all(x IN nodes(pv) WHERE q)` or `none(...)`, over `nodes` or `relationships` of
/// path `pv`: (over nodes, `x`, `q`, negated).
fn path_quantifier<'e>(e: &'e Expr, pv: &str) -> Option<(bool, &'e str, &'e Expr, bool)> {
    let Expr::Call { name, args, .. } = e else {
        return None;
    };
    let negate = match name.to_ascii_lowercase().as_str() {
        "all" => false,
        "none" => true,
        _ => return None,
    };
    let [Expr::ListComp {
        var,
        list,
        pred: None,
        map: Some(q),
    }] = args.as_slice()
    else {
        return None;
    };
    let Expr::Call {
        name: f, args: fa, ..
    } = &**list
    else {
        return None;
    };
    let of_nodes = match f.to_ascii_lowercase().as_str() {
        "nodes" => true,
        "relationships" | "rels" => false,
        _ => return None,
    };
    match fa.as_slice() {
        [Expr::Var(v, _)] if v == pv => Some((of_nodes, var.as_str(), &**q, negate)),
        _ => None,
    }
}

/// Whether `e` reads no variable but those of `allowed` (its own comprehensions' aside)
/// and holds no pattern predicate.
fn reads_only(e: &Expr, allowed: &[String]) -> bool {
    fn has_pattern(e: &Expr) -> bool {
        matches!(e, Expr::PatternPred(_)) || e.children().into_iter().any(has_pattern)
    }
    !has_pattern(e) && vars_of(e).iter().all(|v| allowed.contains(v))
}
