//! Compiling expressions to [`CExpr`], with pattern predicates.

use super::*;

impl<'a, 'g, 'db> Planner<'a, 'g, 'db> {
    /// A label expression with its names resolved against the graph.
    pub(super) fn label_expr(&self, l: &LabelExpr) -> CLabel {
        let r: Result<_, std::convert::Infallible> =
            l.try_map(&mut |n| Ok((self.g.label_id(n), Arc::from(n.as_str()))));
        r.unwrap_or_else(|e| match e {})
    }

    /// Compiles `e` against `scope`; expressions structurally equal to an entry of
    /// `subst` read that slot instead (grouping keys and aggregates after aggregation).
    pub(super) fn compile(
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
                ls.iter().map(|l| Arc::from(l.as_str())).collect(),
            ),
            Expr::LabelTest(x, l) => {
                CExpr::LabelTest(Box::new(c(x, self)?), Arc::new(self.label_expr(l)))
            }
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
            // Inside a list comprehension or reduce() that binds its start (left there
            // by `Planner::hoist`): matched where it stands.
            Expr::PatternComp {
                pattern,
                pred: None,
                map,
            } if local_start(pattern, &self.locals) => {
                let v = pattern.start.var.as_deref().unwrap_or_default();
                let i = self.locals.iter().rposition(|l| l == v).unwrap_or(0);
                CExpr::PatternList {
                    start: Box::new(CExpr::Local(i)),
                    pattern: Arc::new(self.pattern_pred_at(pattern, scope, 0)?),
                    map: Box::new(c(map, self)?),
                }
            }
            Expr::Subquery { .. } => {
                return Err(QueryError::Unsupported(
                    "EXISTS { } or COUNT { } over a whole query here (it is planned in WHERE, RETURN, WITH and ORDER BY); compute it in a WITH first".into(),
                ))
            }
            Expr::PatternComp { .. } => {
                return Err(QueryError::Unsupported(
                    "a pattern comprehension here (it is planned in RETURN, WITH, ORDER BY and WHERE); compute it in a WITH first".into(),
                ))
            }
            Expr::Reduce {
                acc,
                init,
                var,
                list,
                expr,
            } => {
                let init = Box::new(c(init, self)?);
                let list = Box::new(c(list, self)?);
                self.locals.push(acc.clone());
                self.locals.push(var.clone());
                let local = self.locals.len() - 2;
                self.max_locals = self.max_locals.max(self.locals.len());
                let expr = self.compile(expr, scope, subst).map(Box::new);
                self.locals.pop();
                self.locals.pop();
                CExpr::Reduce {
                    local,
                    init,
                    list,
                    expr: expr?,
                }
            }
        })
    }

    pub(super) fn pattern_pred(
        &mut self,
        p: &Pattern,
        scope: &Scope,
    ) -> Result<PatternPred, QueryError> {
        self.touched = true;
        let start =
            match p.start.var.as_deref().and_then(|v| scope.get(v)) {
                Some((s, _)) => s,
                None => return Err(QueryError::Unsupported(
                    "a pattern predicate must start at a bound variable, e.g. WHERE (a)-->(:User)"
                        .into(),
                )),
            };
        self.pattern_pred_at(p, scope, start)
    }

    /// [`Self::pattern_pred`] from the node in slot `start` (ignored by a caller that
    /// gives the start node itself).
    pub(super) fn pattern_pred_at(
        &mut self,
        p: &Pattern,
        scope: &Scope,
        start: usize,
    ) -> Result<PatternPred, QueryError> {
        self.touched = true;
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
                label: n.label_expr.as_ref().map(|l| Arc::new(self.label_expr(l))),
                bound,
            });
        }
        let start_labels = self.label_ids(&p.start);
        Ok(PatternPred {
            start,
            start_labels,
            start_label: p
                .start
                .label_expr
                .as_ref()
                .map(|l| Arc::new(self.label_expr(l))),
            steps,
            impossible,
        })
    }
}

/// Whether a pattern comprehension starts at a list comprehension's (or reduce()'s)
/// variable in `locals` and names nothing else, with no property maps: the shape
/// [`CExpr::PatternList`] matches where it stands.
pub(crate) fn local_start(p: &Pattern, locals: &[String]) -> bool {
    p.var.is_none()
        && p.kind == quiver_cypher::ast::PathKind::Plain
        && p.start.props.is_none()
        && p.start.var.as_ref().is_some_and(|v| locals.contains(v))
        && p.steps.iter().all(|(r, n)| {
            r.var.is_none() && r.props.is_none() && n.var.is_none() && n.props.is_none()
        })
}
