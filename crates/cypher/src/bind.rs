//! The semantic pass between parsing and planning: every variable is defined before it
//! is used, `WITH` and `RETURN` end scopes the way openCypher says, aggregates appear only
//! in projections and never inside one another, projected expressions are named, and the
//! parts of a UNION return the same columns. Errors point at the offending variable.

use crate::ast::*;
use crate::detail::Detail;
use crate::parse::{error_at, ParseError};
use std::collections::{BTreeMap, BTreeSet};

/// What a variable is known to hold, for the type checks of patterns
/// (openCypher's VariableTypeConflict and VariableAlreadyBound).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Node,
    Rel,
    /// A variable-length relationship variable: a list of relationships.
    Rels,
    Path,
    /// A literal's value: never a graph entity.
    Value,
    /// Anything (an expression's result, an UNWIND element, a parameter).
    Unknown,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Node => "a node",
            Kind::Rel => "a relationship",
            Kind::Rels => "a list of relationships (variable length)",
            Kind::Path => "a path",
            Kind::Value | Kind::Unknown => "a value",
        }
    }
}

type Kinds = BTreeMap<String, Kind>;

/// The type of a literal (`None`: not a literal, or null).
fn literal_type(e: &Expr) -> Option<&'static str> {
    Some(match e {
        Expr::Bool(_) => "BOOLEAN",
        Expr::Int(_) => "INTEGER",
        Expr::Float(_) => "FLOAT",
        Expr::Str(_) => "STRING",
        Expr::List(_) => "LIST",
        Expr::Map(_) => "MAP",
        _ => return None,
    })
}

/// The kind of what `e` gives.
fn kind_of(e: &Expr, kinds: &Kinds) -> Kind {
    match e {
        Expr::Var(n, _) => kinds.get(n).copied().unwrap_or(Kind::Unknown),
        Expr::Bool(_) | Expr::Int(_) | Expr::Float(_) | Expr::Str(_) | Expr::Map(_) => Kind::Value,
        // `[r1, r2]` may be the relationships of a variable-length pattern.
        // A list of nodes (`[n]`) is a value too: it cannot stand for a node.
        Expr::List(items)
            if items
                .iter()
                .all(|x| matches!(kind_of(x, kinds), Kind::Value | Kind::Node)) =>
        {
            Kind::Value
        }
        _ => Kind::Unknown,
    }
}

/// Variables a WITH bound to a literal that is not a map, with what it is.
type Literals = BTreeMap<String, &'static str>;

/// What a literal that is not a map is (`None` for anything else).
fn literal_kind(e: &Expr) -> Option<&'static str> {
    match e {
        Expr::Bool(_) => Some("a boolean"),
        Expr::Int(_) => Some("an integer"),
        Expr::Float(_) => Some("a float"),
        Expr::Str(_) => Some("a string"),
        Expr::List(_) => Some("a list"),
        _ => None,
    }
}

/// Whether `e` applies a numeric operator to variable `var` (`+` too when `plus`: on
/// booleans it is no concatenation either).
fn arithmetic_on(e: &Expr, var: &str, plus: bool) -> bool {
    if let Expr::Binary(op, a, b) = e {
        let numeric = matches!(
            op,
            BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod | BinOp::Pow
        ) || (plus && *op == BinOp::Add);
        let is_var = |x: &Expr| matches!(x, Expr::Var(n, _) if n == var);
        if numeric && (is_var(a) || is_var(b)) {
            return true;
        }
    }
    e.children()
        .into_iter()
        .any(|c| arithmetic_on(c, var, plus))
}

/// Whether `e` is a call of an aggregate (`count(*)` included).
pub fn is_aggregate_call(e: &Expr) -> bool {
    matches!(e, Expr::CountStar) || matches!(e, Expr::Call { name, .. } if is_aggregate(name))
}

/// Whether `e` calls an aggregate anywhere in it.
pub fn contains_aggregate(e: &Expr) -> bool {
    is_aggregate_call(e) || e.children().into_iter().any(contains_aggregate)
}

/// What a CALL body sees of the outer row.
pub enum Imports<'a> {
    All,
    /// These names (those of them the outer row has).
    Names(Vec<&'a str>),
}

/// The outer variables a CALL body sees: all with `sees_all` (`CALL (*) { }`) or an
/// importing `WITH *`; else the variables its first clause, an importing WITH, names;
/// else none. (The binder has checked the importing WITH's form.)
pub fn imports(body: &SingleQuery, sees_all: bool) -> Imports<'_> {
    match body.clauses.first() {
        _ if sees_all => Imports::All,
        Some(Clause::With(p)) if p.star => Imports::All,
        Some(Clause::With(p)) => Imports::Names(
            p.items
                .iter()
                .filter_map(|(e, _)| match e {
                    Expr::Var(n, _) => Some(n.as_str()),
                    _ => None,
                })
                .collect(),
        ),
        _ => Imports::Names(Vec::new()),
    }
}

/// The first variable `e` reads, with its offset.
fn first_var(e: &Expr) -> Option<(&str, usize)> {
    match e {
        Expr::Var(v, at) => Some((v, *at)),
        e => e.children().into_iter().find_map(first_var),
    }
}

/// Whether `e` calls function `f`.
fn contains_call(e: &Expr, f: &str) -> bool {
    matches!(e, Expr::Call { name, .. } if name == f)
        || e.children().into_iter().any(|c| contains_call(c, f))
}

/// Functions that aggregate rows.
pub const AGGREGATES: [&str; 10] = [
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "collect",
    "stdev",
    "stdevp",
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
    fn fail<T>(&self, detail: Detail, offset: usize, message: String) -> Result<T, ParseError> {
        Err(error_at(self.text, offset, message).with_detail(detail))
    }

    /// A type error found in the text, before anything runs.
    fn fail_type<T>(
        &self,
        detail: Detail,
        offset: usize,
        message: String,
    ) -> Result<T, ParseError> {
        let mut e = error_at(self.text, offset, message).with_detail(detail);
        e.type_error = true;
        Err(e)
    }

    /// Arguments whose type the text fixes and no function or operator takes:
    /// a property of a variable a WITH bound to a literal that is not a map
    /// (`WITH 123 AS x RETURN x.num`, a type error), `size()` of a path or of a pattern,
    /// `properties()` of a literal that is not a map (syntax errors, as openCypher's
    /// kit expects them).
    fn literal_args(&self, e: &Expr, kinds: &Kinds, literals: &Literals) -> Result<(), ParseError> {
        match e {
            Expr::Prop(x, key) => {
                if let Expr::Var(n, at) = &**x {
                    if let Some(what) = literals.get(n) {
                        return self.fail_type(
                            Detail::InvalidArgumentType,
                            *at,
                            format!("`{n}` is {what}, which has no properties (`{n}.{key}`)"),
                        );
                    }
                }
            }
            Expr::Call { name, args, .. } if args.len() == 1 => {
                let arg = &args[0];
                let at = first_offset(arg).unwrap_or(0);
                // A graph function given an entity of another kind.
                if let Expr::Var(n, _) = arg {
                    let k = kinds.get(n).copied();
                    let wrong = match name.to_ascii_lowercase().as_str() {
                        "labels" => matches!(k, Some(Kind::Path | Kind::Rel | Kind::Rels)),
                        "type" => matches!(k, Some(Kind::Node | Kind::Path)),
                        "length" => matches!(k, Some(Kind::Node | Kind::Rel)),
                        _ => false,
                    };
                    if let (true, Some(k)) = (wrong, k) {
                        return self.fail(
                            Detail::InvalidArgumentType,
                            at,
                            format!("{name}() does not take {} (`{n}`)", k.name()),
                        );
                    }
                }
                if name.eq_ignore_ascii_case("size") {
                    let path = matches!(arg, Expr::Var(n, _) if kinds.get(n) == Some(&Kind::Path));
                    if path || matches!(arg, Expr::PatternPred(_)) {
                        return self.fail(Detail::InvalidArgumentType,
                            at,
                            "size() takes a string or a list, not a path or a pattern (length() gives a path's length; count the pattern with COUNT { })".into(),
                        );
                    }
                }
                // `none(x IN ['Clara'] WHERE x % 2 = 0)`: arithmetic on elements that
                // are all strings or booleans.
                let quantifier = ["all", "any", "none", "single"]
                    .iter()
                    .any(|q| name.eq_ignore_ascii_case(q));
                // (The parser keeps a quantifier's predicate where a comprehension's
                // mapping goes.)
                if let (
                    true,
                    Expr::ListComp {
                        var,
                        list,
                        pred,
                        map,
                    },
                ) = (quantifier, arg)
                {
                    let pred = pred.as_deref().or(map.as_deref());
                    if let (Expr::List(items), Some(pred)) = (&**list, pred) {
                        let bools = items.iter().all(|x| matches!(x, Expr::Bool(_)));
                        let texts = items
                            .iter()
                            .all(|x| matches!(x, Expr::Str(_) | Expr::Bool(_)));
                        if !items.is_empty() && texts && arithmetic_on(pred, var, bools) {
                            return self.fail(Detail::InvalidArgumentType,
                                at,
                                format!("arithmetic on `{var}`, whose values in the list are not numbers"),
                            );
                        }
                    }
                }
                if name.eq_ignore_ascii_case("properties") && literal_kind(arg).is_some() {
                    return self.fail(
                        Detail::InvalidArgumentType,
                        at,
                        format!(
                            "properties() takes a node, a relationship or a map, not {}",
                            literal_kind(arg).unwrap_or("a literal")
                        ),
                    );
                }
            }
            _ => {}
        }
        e.children()
            .into_iter()
            .try_for_each(|c| self.literal_args(c, kinds, literals))
    }

    /// In `RETURN a.x + count(*)`, what lies outside the aggregate must be a grouping key
    /// of the same projection (a variable, or a property of one, projected on its own),
    /// or a constant: otherwise which row's `a.x` is meant is ambiguous.
    fn unambiguous_aggregation(&self, p: &Projection) -> Result<(), ParseError> {
        let has_agg = |e: &Expr| contains_aggregate(e);
        // Only variables and their properties count as keys here: `a.x + b.y` projected
        // on its own does not make `a.x + b.y + count(*)` unambiguous (the TCK's rule).
        let keys: Vec<&Expr> = p
            .items
            .iter()
            .map(|(e, _)| e)
            .filter(|e| !has_agg(e))
            .filter(|e| match e {
                Expr::Var(..) => true,
                Expr::Prop(x, _) => matches!(**x, Expr::Var(..)),
                _ => false,
            })
            .collect();
        fn walk<'e>(
            b: &Checker,
            e: &'e Expr,
            keys: &[&Expr],
            local: &mut Vec<&'e str>,
        ) -> Result<(), ParseError> {
            match e {
                Expr::CountStar => Ok(()),
                Expr::Call { name, args, .. } if is_aggregate(name) => {
                    for a in args {
                        if contains_call(a, "rand") {
                            return b.fail(
                                Detail::NonConstantExpression,
                                first_offset(a).unwrap_or(0),
                                format!("{name}() of rand(): an aggregate needs a deterministic argument"),
                            );
                        }
                    }
                    Ok(())
                }
                _ if keys.iter().any(|k| same(k, e)) => Ok(()),
                Expr::Var(n, at) if !local.contains(&n.as_str()) => b.fail(
                    Detail::AmbiguousAggregationExpression,
                    *at,
                    format!("`{n}` is used next to an aggregate but is not a grouping key; project it on its own (RETURN {n}, ...) or put it inside the aggregate"),
                ),
                Expr::ListComp { var, list, pred, map } => {
                    walk(b, list, keys, local)?;
                    local.push(var);
                    for x in [pred, map].into_iter().flatten() {
                        walk(b, x, keys, local)?;
                    }
                    local.pop();
                    Ok(())
                }
                _ => e
                    .children()
                    .into_iter()
                    .try_for_each(|c| walk(b, c, keys, local)),
            }
        }
        for (e, _) in &p.items {
            if has_agg(e) {
                walk(self, e, &keys, &mut Vec::new())?;
            }
        }
        Ok(())
    }

    /// A property read on a path variable (`p.name`): paths have no properties.
    fn no_path_props(&self, e: &Expr, kinds: &Kinds) -> Result<(), ParseError> {
        if let Expr::Prop(x, key) = e {
            if let Expr::Var(n, at) = &**x {
                if kinds.get(n) == Some(&Kind::Path) {
                    return self.fail(Detail::InvalidArgumentType,
                        *at,
                        format!("`{n}` is a path, which has no properties (`{n}.{key}`); use nodes({n}) or relationships({n})"),
                    );
                }
            }
        }
        e.children()
            .into_iter()
            .try_for_each(|c| self.no_path_props(c, kinds))
    }

    /// What a pattern may be in its clause, checked before anything runs: CREATE and
    /// MERGE make relationships of exactly one type, one hop long, and CREATE in a
    /// direction. A parameter map as a pattern's properties (`(n $props)`) is CREATE's
    /// only: MATCH and MERGE refuse it, as openCypher and Neo4j do (which properties it
    /// holds is not known when the query is planned).
    /// Dynamic labels and types stand in MATCH, CREATE and MERGE, not in a pattern
    /// expression.
    fn static_pattern(&self, p: &Pattern) -> Result<(), ParseError> {
        if has_dynamic(p) {
            return self.fail(
                Detail::UnexpectedSyntax,
                p.start.var_at,
                "a label or type given by $(...) inside a pattern expression; match it with MATCH, or test labels(n) / type(r)".into(),
            );
        }
        Ok(())
    }

    fn pattern_shape(&self, p: &Pattern, clause: &str) -> Result<(), ParseError> {
        let at = |var_at: usize| if var_at > 0 { var_at } else { p.start.var_at };
        if clause != "CREATE" {
            let nodes = std::iter::once(&p.start).chain(p.steps.iter().map(|(_, n)| n));
            let param = nodes
                .map(|n| (n.props.as_ref(), n.var_at))
                .chain(p.steps.iter().map(|(r, _)| (r.props.as_ref(), r.var_at)))
                .find(|(props, _)| matches!(props, Some(Expr::Param(_))));
            if let Some((Some(Expr::Param(name)), var_at)) = param {
                return self.fail(Detail::InvalidParameterUse,
                    at(var_at),
                    format!(
                        "parameter maps cannot be used in {clause} patterns; name the properties, e.g. {{id: ${name}.id}}"
                    ),
                );
            }
        }
        if let Some((r, _)) = p
            .steps
            .iter()
            .find(|(r, _)| r.range.is_some() && !r.dyn_types.is_empty())
        {
            return self.fail(
                Detail::UnexpectedSyntax,
                at(r.var_at),
                "a variable-length relationship with a type given by $(...); name the types (-[:A|B*1..3]->) or filter on type() of its relationships".into(),
            );
        }
        if clause == "MATCH" {
            return Ok(());
        }
        let nodes = std::iter::once(&p.start).chain(p.steps.iter().map(|(_, n)| n));
        if let Some(n) = nodes.into_iter().find(|n| n.label_expr.is_some()) {
            return self.fail(
                Detail::UnexpectedSyntax,
                at(n.var_at),
                format!("{clause} gives a node the labels it names: join them with ':' or '&' (no '|', '!' or '%')"),
            );
        }
        for (r, _) in &p.steps {
            if r.range.is_some() {
                return self.fail(Detail::CreatingVarLength,
                    at(r.var_at),
                    format!("{clause} cannot make a variable-length relationship; give one hop, like -[:KNOWS]->"),
                );
            }
            if r.types.len() + r.dyn_types.len() != 1 {
                return self.fail(
                    Detail::NoSingleRelationshipType,
                    at(r.var_at),
                    format!(
                        "a relationship made by {clause} needs exactly one type, like -[:KNOWS]->"
                    ),
                );
            }
            if clause == "CREATE" && r.dir == Dir::Both {
                return self.fail(
                    Detail::RequiresDirectedRelationship,
                    at(r.var_at),
                    "a created relationship needs a direction: -[:T]-> or <-[:T]-".into(),
                );
            }
        }
        Ok(())
    }

    /// Checks `e` against `scope`; `agg_ok` says whether an aggregate may appear here.
    fn expr(&self, e: &Expr, scope: &BTreeSet<String>, agg_ok: bool) -> Result<bool, ParseError> {
        let mut has_agg = false;
        self.literal_types(e)?;
        match e {
            Expr::Var(name, at) => {
                if !scope.contains(name) {
                    return self.fail(
                        Detail::UndefinedVariable,
                        *at,
                        format!("variable `{name}` is not defined here"),
                    );
                }
            }
            Expr::CountStar => {
                if !agg_ok {
                    return self.fail(Detail::InvalidAggregation, 0, "count(*) is an aggregate; it belongs in WITH or RETURN, not inside another aggregate or in WHERE".into());
                }
                has_agg = true;
            }
            Expr::Call { name, args, .. } => {
                let agg = is_aggregate(name);
                if agg && agg_ok {
                    if let Some(inner) = args.iter().find(|a| contains_aggregate(a)) {
                        return self.fail(
                            Detail::NestedAggregation,
                            first_offset(inner).unwrap_or(0),
                            format!("an aggregate inside {name}(); aggregate in a WITH first, then aggregate its result"),
                        );
                    }
                }
                if agg && !agg_ok {
                    let at = args.iter().find_map(first_offset).unwrap_or(0);
                    return self.fail(Detail::InvalidAggregation,
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
            Expr::Reduce {
                acc,
                init,
                var,
                list,
                expr,
            } => {
                has_agg |= self.expr(init, scope, agg_ok)?;
                has_agg |= self.expr(list, scope, agg_ok)?;
                let mut inner = scope.clone();
                inner.insert(acc.clone());
                inner.insert(var.clone());
                self.expr(expr, &inner, false)?;
            }
            Expr::PatternComp { pattern, pred, map } => {
                self.static_pattern(pattern)?;
                // The pattern's new variables (and its path's) are seen by the predicate
                // and the mapping only.
                for props in pattern_props(pattern) {
                    self.expr(props, scope, false)?;
                }
                let mut inner = scope.clone();
                let mut names = Vec::new();
                pattern_vars(pattern, &mut names);
                inner.extend(names);
                inner.extend(pattern.var.clone());
                if let Some(w) = pred {
                    self.expr(w, &inner, false)?;
                }
                self.expr(map, &inner, false)?;
            }
            // A whole-query subquery sees the row's variables; its own stay inside.
            Expr::Subquery { body, .. } => {
                self.single_in(body, scope.clone())?;
            }
            Expr::PatternPred(p) => {
                self.static_pattern(p)?;
                // A pattern predicate may only use variables already bound (no new ones).
                let mut names = Vec::new();
                pattern_vars(p, &mut names);
                for n in names {
                    if !scope.contains(&n) {
                        return self.fail(Detail::UndefinedVariable, 0, format!("variable `{n}` in a pattern predicate is not defined; a pattern in WHERE cannot introduce new variables"));
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
        // `WITH *` over nothing passes the rows on; `RETURN *` would return nothing.
        if p.star && scope.is_empty() && clause == "RETURN" {
            return self.fail(
                Detail::NoVariablesInScope,
                0,
                format!("{clause} * with no variables in scope"),
            );
        }
        let mut any_agg = false;
        // A WITH expression without an alias, reported after ORDER BY's checks (which
        // openCypher raises first).
        let mut unaliased = None;
        for (e, alias) in &p.items {
            any_agg |= self.expr(e, scope, true)?;
            let name = match (alias, e) {
                (Some(a), _) => a.clone(),
                (None, Expr::Var(n, _)) => n.clone(),
                (None, _) if clause == "RETURN" => String::new(),
                (None, other) => {
                    unaliased = unaliased.or(Some(first_offset(other).unwrap_or(0)));
                    String::new()
                }
            };
            if !name.is_empty() && !out.insert(name.clone()) && !p.star {
                return self.fail(
                    Detail::ColumnNameConflict,
                    0,
                    format!("column `{name}` appears twice in {clause}"),
                );
            }
        }
        if any_agg {
            self.unambiguous_aggregation(p)?;
        }
        // A literal SKIP or LIMIT must be a non-negative integer.
        for (e, what) in [(&p.skip, "SKIP"), (&p.limit, "LIMIT")] {
            let bad = match e {
                Some(Expr::Int(i)) if *i < 0 => Some(Detail::NegativeIntegerArgument),
                Some(Expr::Float(_)) => Some(Detail::InvalidArgumentType),
                Some(Expr::Unary(UnOp::Neg, x)) => match **x {
                    Expr::Int(_) => Some(Detail::NegativeIntegerArgument),
                    Expr::Float(_) => Some(Detail::InvalidArgumentType),
                    _ => None,
                },
                _ => None,
            };
            if let Some(detail) = bad {
                let at = e.as_ref().and_then(first_offset).unwrap_or(0);
                return self.fail(detail, at, format!("{what} needs a non-negative integer"));
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
            if any_agg {
                self.order_with_aggregates(e, p, scope, &order_scope)?;
                continue;
            }
            self.expr(e, &order_scope, any_agg)?;
        }
        if let Some(at) = unaliased {
            return self.fail(
                Detail::NoExpressionAlias,
                at,
                "an expression in WITH must be aliased (use AS)".into(),
            );
        }
        for x in [&p.skip, &p.limit].into_iter().flatten() {
            if let Some((v, at)) = first_var(x) {
                return self.fail(
                    Detail::NonConstantExpression,
                    at,
                    format!("SKIP and LIMIT take constants and parameters, not a variable (`{v}`)"),
                );
            }
            self.expr(x, &BTreeSet::new(), false)?;
        }
        // A WITH's WHERE sees the incoming names too unless aggregating (under DISTINCT
        // through the projected expressions: `WITH DISTINCT a.x AS x WHERE a.x = 1`).
        if let Some(w) = &p.where_ {
            let mut where_scope = out.clone();
            if !any_agg {
                where_scope.extend(scope.iter().cloned());
            }
            self.expr(w, &where_scope, false)?;
        }
        Ok(out)
    }

    /// An ORDER BY expression of an aggregating projection: made of projected names,
    /// grouping keys as they were written (`me.age` for `me.age AS age`), aggregates
    /// over the incoming rows (computed with the others), and constants:
    /// `ORDER BY me.age + count(you.age)`.
    fn order_with_aggregates(
        &self,
        e: &Expr,
        p: &Projection,
        incoming: &BTreeSet<String>,
        projected: &BTreeSet<String>,
    ) -> Result<(), ParseError> {
        let projected_expr = p.items.iter().any(|(item, _)| same(item, e));
        if is_aggregate_call(e) {
            if !projected_expr {
                let at = first_offset(e).unwrap_or(0);
                // Its variables are gone after the aggregation, which openCypher reports
                // first.
                let detail = match first_var(e) {
                    Some((v, _)) if !projected.contains(v) => Detail::UndefinedVariable,
                    _ => Detail::InvalidAggregation,
                };
                return self.fail(detail,
                    at,
                    "an aggregate the projection computes (ORDER BY may combine the projected aggregates, not new ones)".into(),
                );
            }
            self.expr(e, incoming, true)?;
            return Ok(());
        }
        if projected_expr {
            if matches!(e, Expr::Var(..) | Expr::Prop(..)) {
                return Ok(());
            }
            let at = first_offset(e).unwrap_or(0);
            return self.fail(Detail::AmbiguousAggregationExpression,
                at,
                "a projected name instead of this expression beside an aggregate in ORDER BY (which row's value is meant is ambiguous)".into(),
            );
        }
        if let Expr::Var(n, at) = e {
            if !projected.contains(n) {
                return self.fail(
                    Detail::UndefinedVariable,
                    *at,
                    format!("variable `{n}` is not defined here"),
                );
            }
            return Ok(());
        }
        if matches!(
            e,
            Expr::ListComp { .. } | Expr::Reduce { .. } | Expr::PatternComp { .. }
        ) {
            self.expr(e, projected, false)?;
            return Ok(());
        }
        e.children()
            .into_iter()
            .try_for_each(|c| self.order_with_aggregates(c, p, incoming, projected))
    }

    /// Operands whose type is known from the text and wrong for the operator: a literal
    /// that is not a boolean under NOT, AND, OR, XOR; a literal that is not a list right
    /// of IN. (openCypher raises these at compile time; other mismatches are found when
    /// the values are.)
    fn literal_types(&self, e: &Expr) -> Result<(), ParseError> {
        let at = || first_offset(e).unwrap_or(0);
        let not_bool = |x: &Expr| literal_type(x).filter(|t| *t != "BOOLEAN");
        match e {
            Expr::Unary(UnOp::Not, x) => {
                if let Some(t) = not_bool(x) {
                    return self.fail(
                        Detail::InvalidArgumentType,
                        at(),
                        format!("NOT needs a boolean, got a {t} literal"),
                    );
                }
            }
            Expr::Binary(op @ (BinOp::And | BinOp::Or | BinOp::Xor), x, y) => {
                if let Some(t) = not_bool(x).or_else(|| not_bool(y)) {
                    return self.fail(
                        Detail::InvalidArgumentType,
                        at(),
                        format!(
                            "{} needs booleans, got a {t} literal",
                            format!("{op:?}").to_uppercase()
                        ),
                    );
                }
            }
            Expr::Binary(BinOp::In, _, y) => {
                if let Some(t) = literal_type(y).filter(|t| *t != "LIST") {
                    return self.fail(
                        Detail::InvalidArgumentType,
                        at(),
                        format!("IN needs a list on its right, got a {t} literal"),
                    );
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Checks the variables of `p` against what they already hold, and records them.
    /// `clause` is MATCH, CREATE or MERGE; `fresh` holds the relationship variables this
    /// clause has bound so far (a relationship appears once per MATCH).
    fn pattern_kinds(
        &self,
        p: &Pattern,
        kinds: &mut Kinds,
        fresh: &mut BTreeSet<String>,
        clause: &str,
    ) -> Result<(), ParseError> {
        // A path's variable names a new path: an earlier use of the name is a second
        // binding (openCypher's VariableAlreadyBound), not a change of type.
        let conflict = |v: &str, at: usize, was: Kind, now: Kind| {
            self.fail::<()>(
                if now == Kind::Path {
                    Detail::VariableAlreadyBound
                } else {
                    Detail::VariableTypeConflict
                },
                at,
                format!(
                    "variable `{v}` is {} here but already {} (a variable keeps one type)",
                    now.name(),
                    was.name()
                ),
            )
        };
        let creates = clause != "MATCH";
        if let Some(v) = &p.var {
            if let Some(&k) = kinds.get(v) {
                if k == Kind::Path || k == Kind::Unknown {
                    return self.fail(
                        Detail::VariableAlreadyBound,
                        p.var_at,
                        format!("variable `{v}` is already bound; a path variable must be new"),
                    );
                }
                return conflict(v, p.var_at, k, Kind::Path);
            }
        }
        let nodes = std::iter::once(&p.start).chain(p.steps.iter().map(|(_, n)| n));
        for n in nodes {
            let Some(v) = &n.var else { continue };
            match kinds.get(v) {
                Some(&k) if matches!(k, Kind::Rel | Kind::Rels | Kind::Path | Kind::Value) => {
                    return conflict(v, n.var_at, k, Kind::Node)
                }
                Some(_)
                    if creates
                        && (!n.labels.is_empty()
                            || !n.dyn_labels.is_empty()
                            || n.props.is_some()) =>
                {
                    return self.fail(Detail::VariableAlreadyBound,
                        n.var_at,
                        format!("variable `{v}` is already bound; {clause} cannot add labels or properties to it (use SET)"),
                    )
                }
                Some(_) if creates && p.steps.is_empty() && fresh.contains(v) => {
                    return self.fail(Detail::VariableAlreadyBound, n.var_at, format!("variable `{v}` is already bound; {clause} would create it again"))
                }
                Some(_) if creates && p.steps.is_empty() => {
                    return self.fail(Detail::VariableAlreadyBound, n.var_at, format!("variable `{v}` is already bound; {clause} ({v}) would create nothing"))
                }
                _ => {
                    kinds.insert(v.clone(), Kind::Node);
                }
            }
        }
        for (r, _) in &p.steps {
            let Some(v) = &r.var else { continue };
            let now = if r.range.is_some() {
                Kind::Rels
            } else {
                Kind::Rel
            };
            match kinds.get(v) {
                Some(&k) if matches!(k, Kind::Node | Kind::Path | Kind::Value) => {
                    return conflict(v, r.var_at, k, now)
                }
                Some(_) if creates => {
                    return self.fail(Detail::VariableAlreadyBound, r.var_at, format!("variable `{v}` is already bound; {clause} makes a new relationship, so it needs a new variable"))
                }
                Some(_) if fresh.contains(v) => {
                    return self.fail(Detail::RelationshipUniquenessViolation,
                        r.var_at,
                        format!("relationship variable `{v}` appears twice in one MATCH; a relationship is matched once per pattern"),
                    );
                }
                Some(&k) if (k == Kind::Rels) != (now == Kind::Rels) && k != Kind::Unknown => {
                    return conflict(v, r.var_at, k, now)
                }
                _ => {
                    kinds.insert(v.clone(), now);
                }
            }
            fresh.insert(v.clone());
        }
        for (r, _) in &p.steps {
            if let Some(w) = &r.weighted {
                kinds.insert(w.total.clone(), Kind::Value);
            }
        }
        if let Some(v) = &p.var {
            // Not bound before this pattern (checked above): bound now means the
            // pattern names one of its own nodes or relationships like the path.
            if let Some(&k) = kinds.get(v) {
                return conflict(v, p.var_at, k, Kind::Path);
            }
            kinds.insert(v.clone(), Kind::Path);
        }
        Ok(())
    }

    fn single(&self, q: &SingleQuery) -> Result<Vec<String>, ParseError> {
        self.single_in(q, BTreeSet::new())
    }

    /// A pattern expression tests whether its pattern exists (Neo4j 5, openCypher):
    /// as a projected value, a SET value or a function's argument (`head((n)-->())`)
    /// it is refused; beside AND, OR, NOT, in a WHERE, a CASE and `exists()` it stays
    /// the predicate. `value`: whether `e` stands where a value (not a predicate) is
    /// taken.
    fn pattern_values(&self, e: &Expr, value: bool) -> Result<(), ParseError> {
        match e {
            Expr::PatternPred(p) if value => self.fail(Detail::UnexpectedSyntax,
                p.start.var_at,
                "a pattern expression only tests whether the pattern exists (in WHERE, NOT, AND, OR or exists()); for its matches use COLLECT { MATCH ... RETURN ... } or a pattern comprehension [(a)-->(b) | b]".to_string(),
            ),
            Expr::Call { name, args, .. } if name != "exists" => args
                .iter()
                .try_for_each(|a| self.pattern_values(a, true)),
            e => e
                .children()
                .into_iter()
                .try_for_each(|c| self.pattern_values(c, false)),
        }
    }

    /// `WHERE n` where `n` is a node, relationship or path: a graph entity is not a
    /// predicate (through AND, OR, XOR and NOT).
    fn entity_predicate(&self, e: &Expr, kinds: &Kinds) -> Result<(), ParseError> {
        match e {
            Expr::Binary(BinOp::And | BinOp::Or | BinOp::Xor, a, b) => {
                self.entity_predicate(a, kinds)?;
                self.entity_predicate(b, kinds)
            }
            Expr::Unary(UnOp::Not, a) => self.entity_predicate(a, kinds),
            Expr::Var(v, at) => match kinds.get(v) {
                Some(k @ (Kind::Node | Kind::Rel | Kind::Rels | Kind::Path)) => self.fail(
                    Detail::InvalidArgumentType,
                    *at,
                    format!("WHERE needs a boolean; `{v}` is {}", k.name()),
                ),
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn set_item(&self, i: &SetItem, scope: &BTreeSet<String>) -> Result<(), ParseError> {
        match i {
            SetItem::Prop { target, value, .. } => {
                self.expr(target, scope, false)?;
                self.expr(value, scope, false)?;
                self.pattern_values(value, true)?;
            }
            SetItem::DynProp { target, key, value } => {
                self.expr(target, scope, false)?;
                self.expr(key, scope, false)?;
                self.expr(value, scope, false)?;
                self.pattern_values(value, true)?;
            }
            SetItem::Replace { var, value } | SetItem::Merge { var, value } => {
                self.expr(&Expr::Var(var.clone(), 0), scope, false)?;
                self.expr(value, scope, false)?;
            }
            SetItem::Labels { var, .. } => {
                self.expr(&Expr::Var(var.clone(), 0), scope, false)?;
            }
            SetItem::LabelExprs { var, exprs } => {
                self.expr(&Expr::Var(var.clone(), 0), scope, false)?;
                for e in exprs {
                    self.expr(e, scope, false)?;
                }
            }
        }
        Ok(())
    }

    /// The outer variables a CALL body sees, after checking its importing WITH as Neo4j
    /// 5 does: simple references only. (Neo4j also refuses a WHERE, ORDER BY, DISTINCT,
    /// SKIP or LIMIT on it; Quiver runs them, as on any WITH.)
    fn importing(
        &self,
        body: &SingleQuery,
        sees_all: bool,
        outer: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, ParseError> {
        if sees_all {
            return Ok(outer.clone());
        }
        let Some(Clause::With(p)) = body.clauses.first() else {
            return Ok(BTreeSet::new());
        };
        fn reads(e: &Expr, outer: &BTreeSet<String>) -> bool {
            match e {
                Expr::Var(n, _) => outer.contains(n),
                e => e.children().into_iter().any(|c| reads(c, outer)),
            }
        }
        let reads_outer = |e: &Expr| reads(e, outer);
        if !p.star && !p.items.iter().any(|(e, _)| reads_outer(e)) {
            return Ok(BTreeSet::new());
        }
        let rule = "Importing WITH should consist only of simple references to outside variables.";
        for (e, alias) in &p.items {
            let simple = matches!((e, alias), (Expr::Var(_, _), None))
                || matches!((e, alias), (Expr::Var(n, _), Some(a)) if a == n);
            if !simple {
                return self.fail(
                    Detail::InvalidClauseComposition,
                    first_offset(e).unwrap_or(0),
                    format!("{rule} Aliasing or expressions are not supported (import with CALL (a) {{ }}, then WITH a AS b inside)"),
                );
            }
        }
        Ok(match imports(body, sees_all) {
            Imports::All => outer.clone(),
            Imports::Names(names) => names
                .into_iter()
                .filter(|n| outer.contains(*n))
                .map(str::to_string)
                .collect(),
        })
    }

    fn single_in(
        &self,
        q: &SingleQuery,
        mut scope: BTreeSet<String>,
    ) -> Result<Vec<String>, ParseError> {
        let mut columns = Vec::new();
        // Kinds of the variables in scope (variables outside `kinds` are Unknown).
        let mut kinds: Kinds = BTreeMap::new();
        let mut literals: Literals = BTreeMap::new();
        for c in &q.clauses {
            match c {
                Clause::Match {
                    patterns, where_, ..
                } => {
                    let mut fresh = BTreeSet::new();
                    for p in patterns {
                        self.pattern_kinds(p, &mut kinds, &mut fresh, "MATCH")?;
                        self.pattern_shape(p, "MATCH")?;
                    }
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
                        self.no_path_props(w, &kinds)?;
                        self.literal_args(w, &kinds, &literals)?;
                        self.entity_predicate(w, &kinds)?;
                        self.pattern_values(w, false)?;
                    }
                }
                Clause::Unwind { expr, var } => {
                    self.expr(expr, &scope, false)?;
                    scope.insert(var.clone());
                    kinds.insert(var.clone(), Kind::Unknown);
                    literals.remove(var);
                }
                Clause::With(p) => {
                    scope = self.projection(p, &scope, "WITH")?;
                    for e in p.items.iter().map(|i| &i.0).chain(&p.where_) {
                        self.literal_args(e, &kinds, &literals)?;
                    }
                    for (e, _) in &p.items {
                        self.pattern_values(e, true)?;
                    }
                    let mut next: Kinds = if p.star {
                        kinds.clone()
                    } else {
                        BTreeMap::new()
                    };
                    let mut next_literals = if p.star {
                        literals.clone()
                    } else {
                        BTreeMap::new()
                    };
                    for (e, alias) in &p.items {
                        let name = match (alias, e) {
                            (Some(a), _) => a.clone(),
                            (None, Expr::Var(n, _)) => n.clone(),
                            _ => continue,
                        };
                        next.insert(name.clone(), kind_of(e, &kinds));
                        let what = match e {
                            Expr::Var(n, _) => literals.get(n).copied(),
                            e => literal_kind(e),
                        };
                        match what {
                            Some(w) => next_literals.insert(name, w),
                            None => next_literals.remove(&name),
                        };
                    }
                    kinds = next;
                    literals = next_literals;
                }
                Clause::Create(patterns) => {
                    let mut fresh = BTreeSet::new();
                    for p in patterns {
                        self.pattern_kinds(p, &mut kinds, &mut fresh, "CREATE")?;
                        self.pattern_shape(p, "CREATE")?;
                        for n in std::iter::once(&p.start).chain(p.steps.iter().map(|(_, n)| n)) {
                            if let Some(v) = &n.var {
                                if !scope.contains(v) {
                                    fresh.insert(v.clone());
                                }
                            }
                        }
                    }
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
                    self.pattern_kinds(pattern, &mut kinds, &mut BTreeSet::new(), "MERGE")?;
                    self.pattern_shape(pattern, "MERGE")?;
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
                            RemoveItem::LabelExprs { var, exprs } => {
                                for x in exprs {
                                    self.expr(x, &scope, false)?;
                                }
                                Expr::Var(var.clone(), 0)
                            }
                        };
                        self.expr(&e, &scope, false)?;
                    }
                }
                Clause::Delete { exprs, .. } => {
                    for e in exprs {
                        self.expr(e, &scope, false)?;
                        // DELETE takes nodes, relationships and paths (or expressions
                        // that may give them), not labels or numbers.
                        let bad = match e {
                            Expr::HasLabels(..) => Some((Detail::InvalidDelete, "DELETE removes nodes and relationships; to remove a label use REMOVE n:Label")),
                            Expr::Int(_) | Expr::Float(_) | Expr::Str(_) | Expr::Bool(_) => {
                                Some((Detail::InvalidArgumentType, "DELETE needs a node, relationship or path, not a literal"))
                            }
                            Expr::Binary(op, ..)
                                if matches!(
                                    op,
                                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod | BinOp::Pow
                                ) =>
                            {
                                Some((Detail::InvalidArgumentType, "DELETE needs a node, relationship or path, not arithmetic"))
                            }
                            _ => None,
                        };
                        if let Some((detail, msg)) = bad {
                            return self.fail(detail, first_offset(e).unwrap_or(0), msg.into());
                        }
                    }
                }
                Clause::LoadCsv(l) => {
                    self.expr(&l.source, &scope, false)?;
                    scope.insert(l.var.clone());
                    kinds.insert(l.var.clone(), Kind::Unknown);
                }
                Clause::CallInTx {
                    body,
                    rows,
                    sees_all,
                    ..
                } => {
                    if let Some(r) = rows {
                        self.expr(r, &BTreeSet::new(), false)?;
                    }
                    let inner = self.importing(body, *sees_all, &scope)?;
                    // A body that returns adds its columns to the outer rows.
                    for c in self.single_in(body, inner)? {
                        kinds.insert(c.clone(), Kind::Unknown);
                        scope.insert(c);
                    }
                }
                Clause::CallSubquery {
                    body,
                    unions,
                    sees_all,
                    ..
                } => {
                    let inner = self.importing(body, *sees_all, &scope)?;
                    let cols = self.single_in(body, inner)?;
                    for (_, part) in unions {
                        let inner = self.importing(part, *sees_all, &scope)?;
                        let other = self.single_in(part, inner)?;
                        if other != cols {
                            return self.fail(Detail::DifferentColumnsInUnion,
                                0,
                                format!(
                                    "the parts of a UNION inside CALL {{ }} return different columns ({} and {}); give them the same names",
                                    cols.join(", "),
                                    other.join(", ")
                                ),
                            );
                        }
                    }
                    for c in cols {
                        if scope.contains(&c) {
                            return self.fail(Detail::VariableAlreadyBound,
                                0,
                                format!("`{c}` is already bound; a CALL {{ }} subquery must RETURN it AS another name"),
                            );
                        }
                        kinds.insert(c.clone(), Kind::Unknown);
                        scope.insert(c);
                    }
                }
                Clause::CallProc(pc) => {
                    if pc.star && q.clauses.len() > 1 {
                        return self.fail(
                            Detail::UnexpectedSyntax,
                            pc.at,
                            "YIELD * is only allowed in a standalone CALL; name the outputs (YIELD a, b)".into(),
                        );
                    }
                    for a in pc.args.iter().flatten() {
                        if contains_aggregate(a) {
                            return self.fail(Detail::InvalidAggregation,
                                first_offset(a).unwrap_or(pc.at),
                                format!("an aggregate cannot be an argument of {}(); aggregate in a WITH first", pc.name),
                            );
                        }
                        self.expr(a, &scope, false)?;
                    }
                    let mut new = BTreeSet::new();
                    for (_, alias) in pc.yields.iter().flatten() {
                        if scope.contains(alias) || !new.insert(alias.clone()) {
                            return self.fail(
                                Detail::VariableAlreadyBound,
                                pc.at,
                                format!("`{alias}` is already bound; YIELD it AS another name"),
                            );
                        }
                    }
                    for n in new {
                        kinds.insert(n.clone(), Kind::Unknown);
                        scope.insert(n);
                    }
                    if let Some(w) = &pc.where_ {
                        self.expr(w, &scope, false)?;
                    }
                }
                Clause::Return(p) => {
                    self.projection(p, &scope, "RETURN")?;
                    for (e, _) in &p.items {
                        self.pattern_values(e, true)?;
                    }
                    for e in p
                        .items
                        .iter()
                        .map(|i| &i.0)
                        .chain(p.order.iter().map(|o| &o.0))
                    {
                        self.literal_args(e, &kinds, &literals)?;
                    }
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
        (Expr::LabelTest(x, k), Expr::LabelTest(y, l)) => k == l && same(x, y),
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
        Expr::Prop(x, _)
        | Expr::HasLabels(x, _)
        | Expr::LabelTest(x, _)
        | Expr::Unary(_, x)
        | Expr::IsNull(x, _) => first_offset(x),
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
        if let Some(w) = &r.weighted {
            out.push(w.total.clone());
        }
        if let Some(v) = &n.var {
            out.push(v.clone());
        }
    }
}

/// The expressions inside a pattern: property maps and dynamic labels and types.
fn pattern_props(p: &Pattern) -> Vec<&Expr> {
    let mut v: Vec<&Expr> = p.start.props.iter().chain(&p.start.dyn_labels).collect();
    for (r, n) in &p.steps {
        v.extend(r.props.iter().chain(&r.dyn_types));
        v.extend(n.props.iter().chain(&n.dyn_labels));
    }
    v
}

/// Whether a pattern has a label or type given by `$(expr)`.
pub fn has_dynamic(p: &Pattern) -> bool {
    let nodes = std::iter::once(&p.start).chain(p.steps.iter().map(|(_, n)| n));
    nodes.into_iter().any(|n| !n.dyn_labels.is_empty())
        || p.steps.iter().any(|(r, _)| !r.dyn_types.is_empty())
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
                    Detail::DifferentColumnsInUnion,
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
        assert_eq!(e.detail, Detail::UndefinedVariable);
        let e = bind("MATCH (a)-->(b) WITH a RETURN b").unwrap_err();
        assert!(e.message.contains("`b`"), "WITH ends the scope of b: {e}");
        let e = bind("MATCH (a) WHERE count(a.x) > 1 RETURN a").unwrap_err();
        assert!(e.message.contains("count() is an aggregate"), "{e}");
        assert_eq!(e.detail, Detail::InvalidAggregation);
        let e = bind("MATCH (a) RETURN sum(count(a.x))").unwrap_err();
        assert!(e.message.contains("an aggregate inside sum()"), "{e}");
        assert_eq!(e.detail, Detail::NestedAggregation);
        let e = bind("MATCH (a) WITH a.x RETURN 1").unwrap_err();
        assert!(e.message.contains("must be aliased"), "{e}");
        assert_eq!(e.detail, Detail::NoExpressionAlias);
        let e = bind("MATCH (a) RETURN a LIMIT a.x").unwrap_err();
        assert_eq!(e.detail, Detail::NonConstantExpression, "{e}");
        let e = bind("MATCH p = (a) MATCH p = (b) RETURN p").unwrap_err();
        assert_eq!(e.detail, Detail::VariableAlreadyBound, "{e}");
        let e = bind("MATCH p = (a) MATCH (p)-->() RETURN p").unwrap_err();
        assert_eq!(e.detail, Detail::VariableTypeConflict, "{e}");
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

    #[test]
    fn a_variable_keeps_its_type() {
        for (q, want) in [
            (
                "MATCH ()-[r]-() MATCH (r) RETURN r",
                "is a node here but already a relationship",
            ),
            ("MATCH (r)-[r]->() RETURN r", "already a node"),
            ("MATCH p = ()-->() MATCH (p) RETURN p", "already a path"),
            ("WITH 1 AS r MATCH ()-[r]-() RETURN r", "already a value"),
            (
                "MATCH (a)-[r]->()-[r]->(b) RETURN r",
                "appears twice in one MATCH",
            ),
            ("MATCH (a) CREATE (a:L) RETURN a", "cannot add labels"),
            (
                "MATCH ()-[r]->() CREATE ()-[r:T]->() RETURN r",
                "needs a new variable",
            ),
            ("MATCH (p) MATCH p = ()-->() RETURN p", "already a node"),
        ] {
            let e = bind(q).unwrap_err();
            assert!(e.message.contains(want), "{q}: {e}");
            // The error points at the variable.
            let v = if q.contains("(a") && want.contains("labels") {
                "a"
            } else if q.contains("(p)") {
                "p"
            } else {
                "r"
            };
            assert!(q[e.column..].starts_with(v), "{q}: {e}");
        }
        for ok in [
            "MATCH (a)-[r1]->()-[r2]->(b) WITH [r1, r2] AS rs, a MATCH (a)-[rs*]->() RETURN a",
            "MATCH ()-[r]->() MATCH ()-[r]->() RETURN r",
            "MATCH (a) CREATE (a)-[:T]->(b) RETURN b",
            "UNWIND [1] AS n MATCH (n) RETURN n",
        ] {
            bind(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }
}
