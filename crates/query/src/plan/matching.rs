//! Planning MATCH: anchor choice (bound node, id seek, declared index, label scan, all
//! nodes), pushed-down filters, and the label ranges a scan covers.

use super::*;

impl<'a, 'g, 'db> Planner<'a, 'g, 'db> {
    pub(super) fn match_clause(
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
        // The node variables as written, in order: a node whose variable an earlier
        // one names is found there (read from `patterns`, which naming leaves as they
        // are; no allocation: this runs for every plan).
        let written = || {
            patterns.iter().flat_map(|p| {
                std::iter::once(&p.start)
                    .chain(p.steps.iter().map(|s| &s.1))
                    .map(|n| n.var.as_deref())
            })
        };
        let mut at = 0usize;
        for p in &mut pats {
            let mut nodes: Vec<&mut NodePattern> = std::iter::once(&mut p.start)
                .chain(p.steps.iter_mut().map(|s| &mut s.1))
                .collect();
            for n in nodes.iter_mut() {
                let seen = n.var.is_some() && written().take(at).any(|w| w == n.var.as_deref());
                at += 1;
                if n.var.is_none() {
                    self.anon += 1;
                    n.var = Some(format!(" anon{}", self.anon));
                }
                let v = n.var.clone().expect("named above");
                if let Some(props) = n.props.take() {
                    prop_conjuncts(&v, props, self.params, &mut conj)?;
                }
                // A node that is found elsewhere is tested for the labels this
                // occurrence names: `MATCH (n:A) MATCH (n:B)` keeps the nodes with both.
                let elsewhere = seen || scope.get(&v).is_some();
                if elsewhere && !n.labels.is_empty() {
                    conj.push(Expr::HasLabels(
                        Box::new(Expr::Var(v.clone(), 0)),
                        std::mem::take(&mut n.labels),
                    ));
                }
                if let Some(l) = &n.label_expr {
                    conj.push(label_test(&v, l));
                    if elsewhere {
                        n.label_expr = None;
                    }
                }
                for l in &n.labels {
                    if self.g.label_id(l).is_none() {
                        conj.push(Expr::Bool(false));
                    }
                }
                // `(n:$(e))`: a filter on the labels e names per row; a parameter or a
                // literal naming labels the graph has is a plain label (a label scan).
                for e in std::mem::take(&mut n.dyn_labels) {
                    let constant = match &e {
                        Expr::Param(p) => self.params.get(p).cloned(),
                        Expr::Str(l) => Some(Value::str(l)),
                        _ => None,
                    };
                    let mut named = Vec::new();
                    if let Some(v) = constant {
                        if crate::expr::dyn_names(&v, "label", &mut named).is_ok()
                            && named.iter().all(|l| self.g.label_id(l).is_some())
                        {
                            n.labels.extend(named.iter().map(|l| l.to_string()));
                            continue;
                        }
                    }
                    conj.push(Expr::Call {
                        name: "quiver.haslabels".into(),
                        distinct: false,
                        args: vec![Expr::Var(v.clone(), 0), e],
                    });
                }
            }
            for (r, _) in &mut p.steps {
                if r.var.is_none() && (n_rels > 1 || p.var.is_some()) {
                    r.var = Some(self.anon_name());
                }
                // `-[r:A|$(e)]-`: any type, and a filter on the types named.
                if !r.dyn_types.is_empty() {
                    let v = match &r.var {
                        Some(v) => v.clone(),
                        None => {
                            let v = self.anon_name();
                            r.var = Some(v.clone());
                            v
                        }
                    };
                    self.live_types.push(v.clone());
                    let mut args = vec![Expr::Var(v, 0)];
                    args.extend(std::mem::take(&mut r.types).into_iter().map(Expr::Str));
                    args.extend(std::mem::take(&mut r.dyn_types));
                    conj.push(Expr::Call {
                        name: "quiver.hastype".into(),
                        distinct: false,
                        args,
                    });
                }
                // A relationship (or list of them) bound by an earlier clause: match a
                // fresh one and keep the rows where it is the bound one. The bound
                // variable keeps its value (an OPTIONAL MATCH that finds nothing does
                // not null it).
                if let Some(v) = r.var.clone().filter(|v| scope.get(v).is_some()) {
                    let fresh = self.anon_name();
                    conj.push(Expr::Binary(
                        BinOp::Eq,
                        Box::new(Expr::Var(fresh.clone(), 0)),
                        Box::new(Expr::Var(v, 0)),
                    ));
                    r.var = Some(fresh);
                }
                if let Some(props) = r.props.take() {
                    let v = r.var.clone().unwrap_or_else(|| {
                        self.anon += 1;
                        format!(" anon{}", self.anon)
                    });
                    r.var = Some(v.clone());
                    if r.range.is_some() {
                        // `-[*1..3 {k: x}]->`: every relationship on the path has it.
                        let el = self.anon_name();
                        let mut each = Vec::new();
                        prop_conjuncts(&el, props, self.params, &mut each)?;
                        conj.extend(each.into_iter().map(|c| Expr::Call {
                            name: "all".into(),
                            distinct: false,
                            args: vec![Expr::ListComp {
                                var: el.clone(),
                                list: Box::new(Expr::Var(v.clone(), 0)),
                                pred: None,
                                map: Some(Box::new(c)),
                            }],
                        }));
                    } else {
                        prop_conjuncts(&v, props, self.params, &mut conj)?;
                    }
                }
            }
        }
        let mut rel_slots: Vec<usize> = Vec::new();
        // Filters that need nothing from the pattern (constants, earlier variables) first.
        cur = self.push_filters(cur, scope, &mut conj)?;
        for p in &pats {
            cur = self.pattern(cur, scope, p, &mut conj, &mut rel_slots)?;
        }
        // Conjuncts holding a pattern comprehension, once every variable is bound.
        let mut i = 0;
        while i < conj.len() {
            if conj[i].has_pattern_comp() {
                let c = conj.remove(i);
                cur = self.filter_hoisted(cur, scope, c, &[])?;
            } else {
                i += 1;
            }
        }
        if !conj.is_empty() {
            // Everything is bound now; whatever is left references unknown variables.
            let c = conj.remove(0);
            let e = self.compile(&c, scope, &[])?;
            cur = self.filter(cur, e, &c);
        }
        Ok(cur)
    }

    pub(super) fn filter(&mut self, cur: P, pred: CExpr, src: &Expr) -> P {
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

    /// A filter by `pred` whose subqueries and pattern comprehensions are computed per
    /// row first, as hidden columns of `scope`.
    pub(super) fn filter_hoisted(
        &mut self,
        cur: P,
        scope: &mut Scope,
        mut pred: Expr,
        subst: &[(Expr, usize)],
    ) -> Result<P, QueryError> {
        let cur = self.hoist(cur, scope, &mut pred)?;
        let e = self.compile(&pred, scope, subst)?;
        Ok(self.filter(cur, e, &pred))
    }

    /// Applies every conjunct whose variables are all bound.
    pub(super) fn push_filters(
        &mut self,
        mut cur: P,
        scope: &Scope,
        conj: &mut Vec<Expr>,
    ) -> Result<P, QueryError> {
        let mut i = 0;
        while i < conj.len() {
            let vars = vars_of(&conj[i]);
            if vars.iter().all(|v| scope.get(v).is_some()) && !conj[i].has_pattern_comp() {
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
    pub(super) fn take_eq(
        conj: &mut Vec<Expr>,
        scope: &Scope,
        var: &str,
        prop: &str,
    ) -> Option<Expr> {
        let (i, e) = Self::find_eq(conj, scope, var, prop).map(|(i, e)| (i, e.clone()))?;
        conj.remove(i);
        Some(e)
    }

    /// [`take_eq`](Self::take_eq) without taking: where the conjunct is, and its value.
    pub(super) fn find_eq<'c>(
        conj: &'c [Expr],
        scope: &Scope,
        var: &str,
        prop: &str,
    ) -> Option<(usize, &'c Expr)> {
        eq_conjunct(conj, var, |k, y| {
            (k == prop && vars_of(y).iter().all(|v| scope.get(v).is_some())).then_some(y)
        })
    }

    /// A conjunct `id(var) = e` or `id(var) IN list` with `e` computable now: removes it
    /// and returns `e`.
    pub(super) fn take_id_eq(conj: &mut Vec<Expr>, scope: &Scope, var: &str) -> Option<Expr> {
        Self::take_id_eq_of(conj, scope, var, "id")
    }

    /// [`take_id_eq`](Self::take_id_eq) for function `f` (`id` or `elementId`).
    pub(super) fn take_id_eq_of(
        conj: &mut Vec<Expr>,
        scope: &Scope,
        var: &str,
        f: &str,
    ) -> Option<Expr> {
        let i = Self::find_id_eq_of(conj, scope, var, f)?;
        match conj.remove(i) {
            Expr::Binary(_, a, b) => Some(if is_call_of(&a, f, var) { *b } else { *a }),
            _ => None,
        }
    }

    /// Where [`take_id_eq_of`](Self::take_id_eq_of)'s conjunct is, leaving it.
    pub(super) fn find_id_eq_of(conj: &[Expr], scope: &Scope, var: &str, f: &str) -> Option<usize> {
        let is_id = |x: &Expr| is_call_of(x, f, var);
        let ready = |y: &Expr| vars_of(y).iter().all(|v| scope.get(v).is_some());
        conj.iter().position(|c| match c {
            Expr::Binary(BinOp::Eq, a, b) => (is_id(a) && ready(b)) || (is_id(b) && ready(a)),
            Expr::Binary(BinOp::In, a, b) => is_id(a) && ready(b),
            _ => false,
        })
    }

    /// Bounds on `var.prop` from conjuncts `var.prop < e` and the like (either side),
    /// with `e` computable now: (lower, upper), each `(e, inclusive)`. The conjuncts stay:
    /// they remain filters after the seek.
    pub(super) fn range_bounds(
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
                (op.flipped(), a)
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
    pub(super) fn range_props(conj: &[Expr], var: &str) -> Vec<String> {
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
    pub(super) fn anchor_cost(&self, n: &NodePattern, scope: &Scope, conj: &[Expr]) -> (u32, u64) {
        let v = n.var.as_deref().unwrap_or("");
        if scope.get(v).is_some() {
            return (0, 0);
        }
        let mut best = (4, self.g.n_nodes());
        if Self::find_id_eq_of(conj, scope, v, "id").is_some()
            || Self::find_id_eq_of(conj, scope, v, "elementId").is_some()
        {
            return (1, 1);
        }
        if self.join_key(v, scope, conj).is_some() {
            best = (2, 2);
        }
        if n.labels.is_empty() {
            for prop in self.eq_props(conj, v) {
                if self.g.id_seek_any(&prop).is_some()
                    && Self::find_eq(conj, scope, v, &prop).is_some()
                {
                    return (1, 1);
                }
            }
        }
        if n.labels.is_empty() {
            if let Some(cover) = self.label_cover(n) {
                let rows: u64 = cover.iter().map(|&l| self.label_rows(l)).sum();
                best = best.min((3, rows));
            }
        }
        for l in &n.labels {
            let Some(lid) = self.g.label_id(l) else {
                return (1, 0);
            };
            for prop in self.eq_props(conj, v) {
                if self.g.id_seek_space(lid, &prop).is_some()
                    && Self::find_eq(conj, scope, v, &prop).is_some()
                {
                    return (1, 1);
                }
                if self.indexes.get(l, &prop).is_some()
                    && Self::find_eq(conj, scope, v, &prop).is_some()
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
            best = best.min((3, self.label_rows(lid)));
        }
        best
    }

    /// The rows of the tables that can hold `label`.
    fn label_rows(&self, label: u32) -> u64 {
        self.g
            .label_scan(label)
            .tables
            .iter()
            .map(|&(t, _)| {
                let (a, b) = self.g.table_range(t);
                b - a
            })
            .sum()
    }

    /// The labels one of which every node matching `n`'s label expression carries
    /// (those the graph has), when there is such a set: a union of their scans finds
    /// the matches (`(n:A|B)`), each then tested by the expression.
    pub(super) fn label_cover(&self, n: &NodePattern) -> Option<Vec<u32>> {
        let cover = n.label_expr.as_ref()?.cover()?;
        Some(cover.iter().filter_map(|l| self.g.label_id(l)).collect())
    }

    /// The node ranges of a union of label scans, merged so that each node is
    /// visited once; a range's nodes are not tested for a label (the expression's
    /// filter does that), only for life.
    pub(super) fn union_ranges(&self, labels: &[u32]) -> Vec<ScanRange> {
        let mut spans: Vec<(u64, u64)> = labels
            .iter()
            .flat_map(|&l| self.label_ranges(Some(l)))
            .map(|r| (r.lo, r.hi))
            .collect();
        spans.sort_unstable();
        let mut out: Vec<ScanRange> = Vec::new();
        for (lo, hi) in spans {
            match out.last_mut() {
                Some(last) if lo <= last.hi => last.hi = last.hi.max(hi),
                _ => out.push(ScanRange {
                    lo,
                    hi,
                    label: None,
                    table_label: None,
                }),
            }
        }
        out
    }

    pub(super) fn eq_props(&self, conj: &[Expr], var: &str) -> Vec<String> {
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

    /// The `:ID` index seek of `who` (`(v)` or `(v:L)`) by `prop = key` in id space
    /// `space`, scanning the `residual` node ranges outside the index beside it.
    fn id_seek(
        &mut self,
        who: String,
        prop: &str,
        key: Expr,
        scope: &Scope,
        space: usize,
        residual: Vec<(u64, u64)>,
    ) -> Result<(&'static str, String, SeekBy), QueryError> {
        let rest: u64 = residual.iter().map(|(a, b)| b - a).sum();
        let detail = format!(
            "{who} by id index on {prop} = {}{}",
            short(&key),
            if rest > 0 {
                format!(", and a scan of {rest} nodes outside it")
            } else {
                String::new()
            }
        );
        let key = self.compile(&key, scope, &[])?;
        Ok((
            "NodeSeek",
            detail,
            SeekBy::Id {
                space,
                prop: Arc::from(prop),
                key,
                residual,
            },
        ))
    }

    /// The seek that finds node `n` (variable `v`) from the conjuncts, best first: the
    /// `:ID` index, a declared index's equality, `id(v)`, a declared index's range. Takes
    /// the conjuncts a seek enforces exactly (ranges stay as filters). `None`: scan.
    #[allow(clippy::type_complexity)]
    pub(super) fn seek_for(
        &mut self,
        n: &NodePattern,
        v: &str,
        scope: &Scope,
        conj: &mut Vec<Expr>,
    ) -> Result<Option<(&'static str, String, SeekBy)>, QueryError> {
        if n.labels.is_empty() {
            // A node of any label by the `:ID` property of the one id space that has
            // it (mgbench's `MATCH (n {id: $id})`): the index, and a scan of the tables
            // outside it that have the property.
            for prop in self.eq_props(conj, v) {
                let Some((space, residual)) = self.g.id_seek_any(&prop) else {
                    continue;
                };
                let Some(key) = Self::take_eq(conj, scope, v, &prop) else {
                    continue;
                };
                let who = format!("({})", v.trim());
                return self
                    .id_seek(who, &prop, key, scope, space, residual)
                    .map(Some);
            }
        }
        for l in &n.labels {
            let Some(lid) = self.g.label_id(l) else {
                continue;
            };
            for prop in self.eq_props(conj, v) {
                if let Some(space) = self.g.id_seek_space(lid, &prop) {
                    if let Some(key) = Self::take_eq(conj, scope, v, &prop) {
                        let residual = self.g.id_seek_residual(lid, &prop, space);
                        let who = format!("({}:{l})", v.trim());
                        return self
                            .id_seek(who, &prop, key, scope, space, residual)
                            .map(Some);
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
            return Ok(Some((
                "NodeByIdSeek",
                detail,
                SeekBy::NodeId {
                    key,
                    element: false,
                },
            )));
        }
        // The element id drivers send back (OGMs, the Browser): the same seek.
        if let Some(key) = Self::take_id_eq_of(conj, scope, v, "elementId") {
            let detail = format!("({}) elementId = {}", v.trim(), short(&key));
            let key = self.compile(&key, scope, &[])?;
            return Ok(Some((
                "NodeByElementIdSeek",
                detail,
                SeekBy::NodeId { key, element: true },
            )));
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

    /// A conjunct `var.prop = e` with `e` computed from the row (not a constant) that a
    /// hash join can answer: `(its index in conj, prop, e)`.
    pub(super) fn join_key(
        &self,
        var: &str,
        scope: &Scope,
        conj: &[Expr],
    ) -> Option<(usize, String, Expr)> {
        if !self.hash_joins {
            return None;
        }
        eq_conjunct(conj, var, |k, y| {
            let vars = vars_of(y);
            (!vars.is_empty() && vars.iter().all(|v| scope.get(v).is_some()))
                .then(|| (k.to_string(), y.clone()))
        })
        .map(|(i, (k, y))| (i, k, y))
    }

    /// Binds node `n` on its own (seek, hash join or scan), for each row of `cur`.
    pub(super) fn bind_node(
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
                Box::new(Seek::new(cur.op, by, labels)),
            );
            scope.bind(&v, Kind::Node);
            return Ok(p);
        }
        let cover = if labels.is_empty() {
            self.label_cover(n)
        } else {
            None
        };
        let ranges = match &cover {
            Some(c) => self.union_ranges(c),
            None => self.label_ranges(labels.first().copied()),
        };
        let detail = match (labels.first(), &n.label_expr) {
            (Some(&l), _) => format!("({}:{})", v.trim(), self.g.label_name(l)),
            (None, Some(e)) if cover.is_some() => format!(
                "({}:{}) by a union of label scans",
                v.trim(),
                quiver_cypher::print::label_expr(e)
            ),
            _ => format!("({})", v.trim()),
        };
        let mut p = if let Some((i, prop, key)) = self.join_key(&v, scope, conj) {
            conj.remove(i); // the join enforces it
            let detail = format!("{detail} by {}.{prop} = {}", v.trim(), short(&key));
            let key = self.compile(&key, scope, &[])?;
            self.wrap(
                "ValueHashJoin",
                detail,
                vec![cur.id],
                Box::new(ValueHashJoin::new(
                    cur.op,
                    ranges,
                    Arc::from(prop.as_str()),
                    key,
                )),
            )
        } else {
            let name = if cover.is_some() {
                "UnionNodeByLabelsScan"
            } else if labels.is_empty() {
                "AllNodesScan"
            } else {
                "NodeByLabelScan"
            };
            self.wrap(
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
                    created: Vec::new(),
                    mask: Vec::new(),
                }),
            )
        };
        let slot = scope.bind(&v, Kind::Node);
        if labels.len() > 1 {
            let e = CExpr::HasLabels(
                Box::new(CExpr::Slot(slot)),
                labels[1..].iter().map(|&l| Some(l)).collect(),
                Arc::from([]),
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
    pub(super) fn label_ids(&self, n: &NodePattern) -> Vec<u32> {
        n.labels.iter().filter_map(|l| self.g.label_id(l)).collect()
    }

    /// Node id ranges holding `label` (all nodes for `None`); created nodes last.
    pub(super) fn label_ranges(&self, label: Option<u32>) -> Vec<ScanRange> {
        let mut v = self.segment_label_ranges(label);
        // Created nodes: up to whatever exists when the scan runs (a MERGE scans again
        // after each row it created).
        if let Some(d) = self.g.delta() {
            // Segment nodes that gained the label outside the tables that carry it.
            let relabeled = d.relabels_segment_nodes();
            let name = label.and_then(|l| d.labels.get(l as usize));
            if let (Some(l), Some(name), true) = (label, name, relabeled) {
                for (&n, r) in d.nodes.range(..d.base_nodes) {
                    if !r.deleted
                        && !r.seg_labels
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

    pub(super) fn segment_label_ranges(&self, label: Option<u32>) -> Vec<ScanRange> {
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
    pub(super) fn fusable_scan(
        &mut self,
        patterns: &[Pattern],
        where_: &Option<Expr>,
    ) -> Option<Fused> {
        let [p] = patterns else { return None };
        if !p.steps.is_empty()
            || p.var.is_some()
            || p.kind != PathKind::Plain
            || quiver_cypher::bind::has_dynamic(p)
        {
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
        if let Some(l) = &n.label_expr {
            conj.push(label_test(&v, l));
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
                Arc::from([]),
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
        let ranges = match self.label_cover(n).filter(|_| labels.is_empty()) {
            Some(c) => self.union_ranges(&c),
            None => self.label_ranges(labels.first().copied()),
        };
        Some(Fused {
            id: usize::MAX,
            ranges,
            filter,
            var: v,
        })
    }
}

/// `var:l`, the test of a node pattern's label expression.
fn label_test(var: &str, l: &LabelExpr) -> Expr {
    Expr::LabelTest(Box::new(Expr::Var(var.to_string(), 0)), l.clone())
}

/// `f(var)`, a call of function `f` (any case) on variable `var`.
fn is_call_of(x: &Expr, f: &str, var: &str) -> bool {
    matches!(x, Expr::Call { name, args, .. } if name.eq_ignore_ascii_case(f) && matches!(args.as_slice(), [Expr::Var(n, _)] if n == var))
}

/// The first conjunct `var.k = y` (either side) for which `f(k, y)` gives a value: its
/// index and that value.
fn eq_conjunct<'c, T>(
    conj: &'c [Expr],
    var: &str,
    f: impl Fn(&str, &'c Expr) -> Option<T>,
) -> Option<(usize, T)> {
    conj.iter().enumerate().find_map(|(i, c)| {
        let Expr::Binary(BinOp::Eq, a, b) = c else {
            return None;
        };
        [(a, b), (b, a)].into_iter().find_map(|(x, y)| match &**x {
            Expr::Prop(v, k) if matches!(&**v, Expr::Var(n, _) if n == var) => {
                f(k, y).map(|t| (i, t))
            }
            _ => None,
        })
    })
}
