//! The semantic pass between parsing and planning: every variable is defined before it
//! is used, `WITH` and `RETURN` end scopes the way openCypher says, aggregates appear only
//! in projections and never inside one another, projected expressions are named, and the
//! parts of a UNION return the same columns. Errors point at the offending variable.

use crate::ast::*;
use crate::parse::{error_at, ParseError};
use std::collections::BTreeSet;

/// Functions that aggregate rows.
pub const AGGREGATES: [&str; 9] = [
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "collect",
    "stdev",
    "percentilecont",
    "percentiledisc",
];

pub fn is_aggregate(name: &str) -> bool {
    AGGREGATES.contains(&name)
}

struct Checker<'t> {
    text: &'t str,
}

impl Checker<'_> {
    fn fail<T>(&self, offset: usize, message: String) -> Result<T, ParseError> {
        Err(error_at(self.text, offset, message))
    }

    /// Checks `e` against `scope`; `agg_ok` says whether an aggregate may appear here.
    fn expr(&self, e: &Expr, scope: &BTreeSet<String>, agg_ok: bool) -> Result<bool, ParseError> {
        let mut has_agg = false;
        match e {
            Expr::Var(name, at) => {
                if !scope.contains(name) {
                    return self.fail(*at, format!("variable `{name}` is not defined here"));
                }
            }
            Expr::CountStar => {
                if !agg_ok {
                    return self.fail(0, "count(*) is an aggregate; it belongs in WITH or RETURN, not inside another aggregate or in WHERE".into());
                }
                has_agg = true;
            }
            Expr::Call { name, args, .. } => {
                let agg = is_aggregate(name);
                if agg && !agg_ok {
                    let at = args.iter().find_map(first_offset).unwrap_or(0);
                    return self.fail(
                        at,
                        format!("{name}() is an aggregate; it belongs in WITH or RETURN, not inside another aggregate or in WHERE"),
                    );
                }
                for a in args {
                    self.expr(a, scope, agg_ok && !agg)?;
                }
                has_agg |= agg;
            }
            Expr::ListComp {
                var,
                list,
                pred,
                map,
            } => {
                has_agg |= self.expr(list, scope, agg_ok)?;
                let mut inner = scope.clone();
                inner.insert(var.clone());
                for x in [pred, map].into_iter().flatten() {
                    self.expr(x, &inner, false)?;
                }
            }
            Expr::PatternPred(p) => {
                // A pattern predicate may only use variables already bound (no new ones).
                let mut names = Vec::new();
                pattern_vars(p, &mut names);
                for n in names {
                    if !scope.contains(&n) {
                        return self.fail(0, format!("variable `{n}` in a pattern predicate is not defined; a pattern in WHERE cannot introduce new variables"));
                    }
                }
            }
            // Everything else: its sub-expressions, in the same scope.
            e => {
                for x in e.children() {
                    has_agg |= self.expr(x, scope, agg_ok)?;
                }
            }
        }
        Ok(has_agg)
    }

    fn projection(
        &self,
        p: &Projection,
        scope: &BTreeSet<String>,
        clause: &str,
    ) -> Result<BTreeSet<String>, ParseError> {
        let mut out = if p.star {
            scope.clone()
        } else {
            BTreeSet::new()
        };
        if p.star && scope.is_empty() {
            return self.fail(0, format!("{clause} * with no variables in scope"));
        }
        let mut any_agg = false;
        for (e, alias) in &p.items {
            any_agg |= self.expr(e, scope, true)?;
            let name = match (alias, e) {
                (Some(a), _) => a.clone(),
                (None, Expr::Var(n, _)) => n.clone(),
                (None, _) if clause == "RETURN" => String::new(),
                (None, other) => {
                    let at = first_offset(other).unwrap_or(0);
                    return self.fail(at, "an expression in WITH must be aliased (use AS)".into());
                }
            };
            if !name.is_empty() && !out.insert(name.clone()) && !p.star {
                return self.fail(0, format!("column `{name}` appears twice in {clause}"));
            }
        }
        // ORDER BY sees the projected names, and the incoming ones unless aggregating or
        // DISTINCT (then only what is projected exists).
        let mut order_scope = out.clone();
        if !any_agg && !p.distinct {
            order_scope.extend(scope.iter().cloned());
        }
        for (e, _) in &p.order {
            // An ORDER BY expression that is one of the projected ones (a grouping key)
            // is fine even when its variables are no longer in scope.
            if p.items.iter().any(|(item, _)| same(item, e)) {
                continue;
            }
            self.expr(e, &order_scope, any_agg)?;
        }
        for x in [&p.skip, &p.limit].into_iter().flatten() {
            self.expr(x, &BTreeSet::new(), false)?;
        }
        if let Some(w) = &p.where_ {
            self.expr(w, &out, false)?;
        }
        Ok(out)
    }

    fn single(&self, q: &SingleQuery) -> Result<Vec<String>, ParseError> {
        self.single_in(q, BTreeSet::new())
    }

    fn set_item(&self, i: &SetItem, scope: &BTreeSet<String>) -> Result<(), ParseError> {
        match i {
            SetItem::Prop { target, value, .. } => {
                self.expr(target, scope, false)?;
                self.expr(value, scope, false)?;
            }
            SetItem::Replace { var, value } | SetItem::Merge { var, value } => {
                self.expr(&Expr::Var(var.clone(), 0), scope, false)?;
                self.expr(value, scope, false)?;
            }
            SetItem::Labels { var, .. } => {
                self.expr(&Expr::Var(var.clone(), 0), scope, false)?;
            }
        }
        Ok(())
    }

    fn single_in(
        &self,
        q: &SingleQuery,
        mut scope: BTreeSet<String>,
    ) -> Result<Vec<String>, ParseError> {
        let mut columns = Vec::new();
        for c in &q.clauses {
            match c {
                Clause::Match {
                    patterns, where_, ..
                } => {
                    for p in patterns {
                        let mut names = Vec::new();
                        pattern_vars(p, &mut names);
                        for n in names {
                            scope.insert(n);
                        }
                        // Property maps may use any variable of the pattern (they become
                        // predicates) or bound before it.
                        for props in pattern_props(p) {
                            self.expr(props, &scope, false)?;
                        }
                    }
                    if let Some(w) = where_ {
                        self.expr(w, &scope, false)?;
                    }
                }
                Clause::Unwind { expr, var } => {
                    self.expr(expr, &scope, false)?;
                    scope.insert(var.clone());
                }
                Clause::With(p) => scope = self.projection(p, &scope, "WITH")?,
                Clause::Create(patterns) => {
                    for p in patterns {
                        for props in pattern_props(p) {
                            self.expr(props, &scope, false)?;
                        }
                        let mut names = Vec::new();
                        pattern_vars(p, &mut names);
                        scope.extend(names);
                    }
                }
                Clause::Merge {
                    pattern,
                    on_create,
                    on_match,
                } => {
                    let mut names = Vec::new();
                    pattern_vars(pattern, &mut names);
                    scope.extend(names);
                    for props in pattern_props(pattern) {
                        self.expr(props, &scope, false)?;
                    }
                    for i in on_create.iter().chain(on_match) {
                        self.set_item(i, &scope)?;
                    }
                }
                Clause::Set(items) => {
                    for i in items {
                        self.set_item(i, &scope)?;
                    }
                }
                Clause::Remove(items) => {
                    for i in items {
                        let e = match i {
                            RemoveItem::Prop { target, .. } => target.clone(),
                            RemoveItem::Labels { var, .. } => Expr::Var(var.clone(), 0),
                        };
                        self.expr(&e, &scope, false)?;
                    }
                }
                Clause::Delete { exprs, .. } => {
                    for e in exprs {
                        self.expr(e, &scope, false)?;
                    }
                }
                Clause::LoadCsv(l) => {
                    self.expr(&l.source, &scope, false)?;
                    scope.insert(l.var.clone());
                }
                Clause::CallInTx { body, rows, .. } => {
                    if let Some(r) = rows {
                        self.expr(r, &BTreeSet::new(), false)?;
                    }
                    // A body that returns adds its columns to the outer rows.
                    for c in self.single_in(body, scope.clone())? {
                        scope.insert(c);
                    }
                }
                Clause::Return(p) => {
                    self.projection(p, &scope, "RETURN")?;
                    columns = p
                        .items
                        .iter()
                        .map(|(e, a)| a.clone().unwrap_or_else(|| column_name(e)))
                        .collect();
                }
            }
        }
        Ok(columns)
    }
}

/// Structural equality that ignores where variables were written.
pub fn same(a: &Expr, b: &Expr) -> bool {
    match (a, b) {
        (Expr::Var(x, _), Expr::Var(y, _)) => x == y,
        (Expr::Prop(x, k), Expr::Prop(y, l)) => k == l && same(x, y),
        (Expr::HasLabels(x, k), Expr::HasLabels(y, l)) => k == l && same(x, y),
        (Expr::Unary(o, x), Expr::Unary(p, y)) => o == p && same(x, y),
        (Expr::IsNull(x, k), Expr::IsNull(y, l)) => k == l && same(x, y),
        (Expr::Index(x, i), Expr::Index(y, j)) => same(x, y) && same(i, j),
        (Expr::Binary(o, x1, x2), Expr::Binary(p, y1, y2)) => {
            o == p && same(x1, y1) && same(x2, y2)
        }
        (
            Expr::Call {
                name: n,
                distinct: d,
                args: a,
            },
            Expr::Call {
                name: m,
                distinct: e,
                args: b,
            },
        ) => n == m && d == e && a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y)),
        (Expr::List(a), Expr::List(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        }
        _ => a == b,
    }
}

/// Byte offset of the first variable in `e`, for pointing at an expression.
fn first_offset(e: &Expr) -> Option<usize> {
    match e {
        Expr::Var(_, at) => Some(*at),
        Expr::Prop(x, _) | Expr::HasLabels(x, _) | Expr::Unary(_, x) | Expr::IsNull(x, _) => {
            first_offset(x)
        }
        Expr::Index(a, b) | Expr::Binary(_, a, b) => first_offset(a).or_else(|| first_offset(b)),
        Expr::Call { args, .. } => args.iter().find_map(first_offset),
        Expr::List(items) => items.iter().find_map(first_offset),
        _ => None,
    }
}

/// The name a RETURN column gets without an alias (the variable, or `a.b` for a property).
fn column_name(e: &Expr) -> String {
    match e {
        Expr::Var(n, _) => n.clone(),
        Expr::Prop(x, k) => format!("{}.{k}", column_name(x)),
        Expr::CountStar => "count(*)".into(),
        Expr::Call { name, .. } => format!("{name}(...)"),
        _ => "?column?".into(),
    }
}

fn pattern_vars(p: &Pattern, out: &mut Vec<String>) {
    if let Some(v) = &p.var {
        out.push(v.clone());
    }
    if let Some(v) = &p.start.var {
        out.push(v.clone());
    }
    for (r, n) in &p.steps {
        if let Some(v) = &r.var {
            out.push(v.clone());
        }
        if let Some(v) = &n.var {
            out.push(v.clone());
        }
    }
}

fn pattern_props(p: &Pattern) -> Vec<&Expr> {
    let mut v: Vec<&Expr> = p.start.props.iter().collect();
    for (r, n) in &p.steps {
        v.extend(r.props.iter());
        v.extend(n.props.iter());
    }
    v
}

/// Checks a parsed statement; `text` is the query it was parsed from (for positions).
pub fn check(text: &str, s: &Statement) -> Result<(), ParseError> {
    let c = Checker { text };
    let mut first: Option<Vec<String>> = None;
    for part in &s.query.parts {
        let cols = c.single(part)?;
        match &first {
            None => first = Some(cols),
            Some(f) if *f != cols => {
                return c.fail(
                    0,
                    format!("all parts of a UNION must return the same columns: {f:?} vs {cols:?}"),
                );
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_query;

    fn bind(q: &str) -> Result<(), ParseError> {
        check(q, &parse_query(q).unwrap_or_else(|e| panic!("{q}: {e}")))
    }

    #[test]
    fn valid_queries_bind() {
        for q in [
            "MATCH (n:User) RETURN n.age, count(*) ORDER BY n.age",
            "MATCH (s:User {id: $id})-[*1..2]->(n:User) RETURN DISTINCT n.id",
            "MATCH p = shortestPath((a {id: 1})-[*..15]->(b {id: 2})) RETURN length(p)",
            "MATCH (a)-->(b) WITH a, count(b) AS c WHERE c > 2 RETURN a.name, c ORDER BY c DESC LIMIT 3",
            "UNWIND [1, 2] AS x WITH x RETURN [y IN range(1, x) WHERE y > 0 | y * x] AS ys",
            "MATCH (a), (b) WHERE (a)-->(b) RETURN a UNION MATCH (c) RETURN c AS a",
            "MATCH (a) RETURN a ORDER BY a.name",
            "MATCH (a)-[r]->(b {name: a.name}) RETURN r",
            "MATCH (a) WITH * RETURN a",
        ] {
            bind(q).unwrap_or_else(|e| panic!("{q}\n{e}"));
        }
    }

    #[test]
    fn mistakes_are_named_and_placed() {
        let e = bind("MATCH (a) RETURN b").unwrap_err();
        assert!(e.message.contains("variable `b` is not defined"), "{e}");
        assert_eq!((e.line, e.column), (0, 17));
        let e = bind("MATCH (a)-->(b) WITH a RETURN b").unwrap_err();
        assert!(e.message.contains("`b`"), "WITH ends the scope of b: {e}");
        let e = bind("MATCH (a) WHERE count(a.x) > 1 RETURN a").unwrap_err();
        assert!(e.message.contains("count() is an aggregate"), "{e}");
        let e = bind("MATCH (a) RETURN sum(count(a.x))").unwrap_err();
        assert!(e.message.contains("count() is an aggregate"), "{e}");
        let e = bind("MATCH (a) WITH a.x RETURN 1").unwrap_err();
        assert!(e.message.contains("must be aliased"), "{e}");
        let e = bind("MATCH (a) WHERE (a)-->(z) RETURN a").unwrap_err();
        assert!(e.message.contains("`z`"), "{e}");
        let e = bind("RETURN 1 AS x UNION RETURN 2 AS y").unwrap_err();
        assert!(e.message.contains("same columns"), "{e}");
        let e = bind("MATCH (a) RETURN count(a) ORDER BY a.name").unwrap_err();
        assert!(
            e.message.contains("`a`"),
            "after aggregation only projected names exist: {e}"
        );
        let e = bind("UNWIND [1] AS x RETURN [y IN [1] | z]").unwrap_err();
        assert!(e.message.contains("`z`"), "{e}");
    }
}
