//! The syntax tree back to Cypher text. Binary operations are fully parenthesised, so the
//! text parses back to the same tree whatever the precedence rules (`parse(print(t))`
//! prints as `print(t)`, which the round-trip tests check); EXPLAIN uses it to show
//! predicates and keys.

use crate::ast::*;
use std::fmt::Write;

fn name(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_');
    if plain {
        s.to_string()
    } else {
        format!("`{}`", s.replace('`', "``"))
    }
}

fn string(s: &str) -> String {
    let mut o = String::from("'");
    for c in s.chars() {
        match c {
            '\'' => o.push_str("\\'"),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            '\r' => o.push_str("\\r"),
            c => o.push(c),
        }
    }
    o.push('\'');
    o
}

pub fn binop(op: BinOp) -> &'static str {
    use BinOp::*;
    match op {
        Or => "OR",
        Xor => "XOR",
        And => "AND",
        Eq => "=",
        Ne => "<>",
        Lt => "<",
        Le => "<=",
        Gt => ">",
        Ge => ">=",
        Regex => "=~",
        In => "IN",
        StartsWith => "STARTS WITH",
        EndsWith => "ENDS WITH",
        Contains => "CONTAINS",
        Add => "+",
        Sub => "-",
        Mul => "*",
        Div => "/",
        Mod => "%",
        Pow => "^",
    }
}

fn list(items: &[Expr]) -> String {
    items.iter().map(expr).collect::<Vec<_>>().join(", ")
}

/// An expression as Cypher text.
pub fn expr(e: &Expr) -> String {
    match e {
        Expr::Null => "null".into(),
        Expr::Bool(b) => b.to_string(),
        Expr::Int(i) => i.to_string(),
        Expr::Float(f) => format!("{f:?}"),
        Expr::Str(s) => string(s),
        Expr::Param(p) => format!("${}", name(p)),
        Expr::Var(v, _) => name(v),
        Expr::List(items) => format!("[{}]", list(items)),
        Expr::Map(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", name(k), expr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Expr::Prop(x, k) => format!("{}.{}", postfix_base(x), name(k)),
        Expr::Index(x, i) => format!("{}[{}]", postfix_base(x), expr(i)),
        Expr::Slice(x, a, b) => format!(
            "{}[{}..{}]",
            postfix_base(x),
            a.as_deref().map(expr).unwrap_or_default(),
            b.as_deref().map(expr).unwrap_or_default()
        ),
        Expr::HasLabels(x, ls) => format!(
            "{}:{}",
            postfix_base(x),
            ls.iter().map(|l| name(l)).collect::<Vec<_>>().join("&")
        ),
        Expr::LabelTest(x, l) => format!("{}:{}", postfix_base(x), label_expr(l)),
        Expr::Unary(UnOp::Not, x) => format!("(NOT {})", expr(x)),
        Expr::Unary(UnOp::Neg, x) => format!("(-{})", expr(x)),
        Expr::Binary(op, a, b) => format!("({} {} {})", expr(a), binop(*op), expr(b)),
        Expr::IsNull(x, is_null) => format!(
            "({} IS {}NULL)",
            expr(x),
            if *is_null { "" } else { "NOT " }
        ),
        Expr::Call {
            name: n,
            distinct,
            args,
        } => format!(
            "{}({}{})",
            n,
            if *distinct { "DISTINCT " } else { "" },
            list(args)
        ),
        Expr::CountStar => "count(*)".into(),
        Expr::Case {
            subject,
            arms,
            default,
        } => {
            let mut s = String::from("CASE");
            if let Some(x) = subject {
                let _ = write!(s, " {}", expr(x));
            }
            for (w, t) in arms {
                let _ = write!(s, " WHEN {} THEN {}", expr(w), expr(t));
            }
            if let Some(d) = default {
                let _ = write!(s, " ELSE {}", expr(d));
            }
            s.push_str(" END");
            s
        }
        Expr::ListComp {
            var,
            list,
            pred,
            map,
        } => {
            let mut s = format!("[{} IN {}", name(var), expr(list));
            if let Some(p) = pred {
                let _ = write!(s, " WHERE {}", expr(p));
            }
            if let Some(m) = map {
                let _ = write!(s, " | {}", expr(m));
            }
            s.push(']');
            s
        }
        Expr::PatternPred(p) => path(p),
        Expr::Subquery { kind, body } => {
            let inner = statement(&Statement {
                explain: None,
                query: Query {
                    parts: vec![(**body).clone()],
                    union_all: vec![],
                },
            });
            let k = match kind {
                SubqueryKind::Exists => "EXISTS",
                SubqueryKind::Count => "COUNT",
                SubqueryKind::Collect => "COLLECT",
            };
            format!("{k} {{ {inner} }}")
        }
        Expr::PatternComp {
            pattern: p,
            pred,
            map,
        } => {
            let mut s = format!("[{}", pattern(p));
            if let Some(w) = pred {
                let _ = write!(s, " WHERE {}", expr(w));
            }
            let _ = write!(s, " | {}]", expr(map));
            s
        }
        Expr::Reduce {
            acc,
            init,
            var,
            list,
            expr: e,
        } => format!(
            "reduce({} = {}, {} IN {} | {})",
            name(acc),
            expr(init),
            name(var),
            expr(list),
            expr(e)
        ),
    }
}

/// Operands of `.`, `[]` and labels: atoms as they are, anything else in parentheses.
fn postfix_base(x: &Expr) -> String {
    match x {
        Expr::Var(..)
        | Expr::Param(_)
        | Expr::Prop(..)
        | Expr::Index(..)
        | Expr::Call { .. }
        | Expr::Map(_)
        | Expr::List(_)
        | Expr::CountStar => expr(x),
        _ => format!("({})", expr(x)),
    }
}

/// `:A:B`
fn labels(ls: &[String]) -> String {
    ls.iter().map(|l| format!(":{}", name(l))).collect()
}

/// A label expression, every `&` and `|` in parentheses.
pub fn label_expr(e: &LabelExpr) -> String {
    match e {
        LabelExpr::Name(l) => name(l),
        LabelExpr::Any => "%".into(),
        LabelExpr::Not(x) => format!("!{}", label_expr(x)),
        LabelExpr::And(a, b) => format!("({}&{})", label_expr(a), label_expr(b)),
        LabelExpr::Or(a, b) => format!("({}|{})", label_expr(a), label_expr(b)),
    }
}

fn node(n: &NodePattern) -> String {
    let mut s = String::from("(");
    if let Some(v) = &n.var {
        s.push_str(&name(v));
    }
    // A conjunction with `&` (never `:A:B`, which Neo4j does not let a clause mix with
    // the other symbols).
    let mut parts: Vec<String> = n.labels.iter().map(|l| name(l)).collect();
    parts.extend(n.dyn_labels.iter().map(|e| format!("$({})", expr(e))));
    parts.extend(n.label_expr.iter().map(|l| label_expr(l)));
    if !parts.is_empty() {
        let _ = write!(s, ":{}", parts.join("&"));
    }
    if let Some(p) = &n.props {
        let _ = write!(s, " {}", expr(p));
    }
    s.push(')');
    s
}

fn rel(r: &RelPattern) -> String {
    let mut body = String::new();
    if let Some(v) = &r.var {
        body.push_str(&name(v));
    }
    if !r.types.is_empty() || !r.dyn_types.is_empty() {
        let _ = write!(
            body,
            ":{}",
            r.types
                .iter()
                .map(|t| name(t))
                .chain(r.dyn_types.iter().map(|e| format!("$({})", expr(e))))
                .collect::<Vec<_>>()
                .join("|")
        );
    } else if let Some(t) = &r.type_expr {
        let _ = write!(body, ":{}", label_expr(t));
    }
    if let Some((lo, hi)) = r.range {
        body.push('*');
        match &r.weighted {
            Some(w) => {
                body.push_str(if w.all { "ALLSHORTEST " } else { "WSHORTEST " });
                if let Some(hi) = hi {
                    let _ = write!(body, "{hi} ");
                }
                let _ = write!(body, "{} {}", lambda(&w.weight), name(&w.total));
            }
            None => {
                if r.bfs {
                    body.push_str("BFS ");
                }
                let _ = write!(
                    body,
                    "{}..{}",
                    lo.map(|x| x.to_string()).unwrap_or_default(),
                    hi.map(|x| x.to_string()).unwrap_or_default()
                );
            }
        }
        if let Some(f) = &r.filter {
            let _ = write!(body, " {}", lambda(f));
        }
    }
    if let Some(p) = &r.props {
        let _ = write!(body, " {}", expr(p));
    }
    match r.dir {
        Dir::Out => format!("-[{body}]->"),
        Dir::In => format!("<-[{body}]-"),
        Dir::Both => format!("-[{body}]-"),
    }
}

fn path(p: &Pattern) -> String {
    let mut s = node(&p.start);
    for (r, n) in &p.steps {
        s.push_str(&rel(r));
        s.push_str(&node(n));
    }
    s
}

/// A pattern of MATCH, with its path variable and shortest-path wrapper.
pub fn pattern(p: &Pattern) -> String {
    let body = match p.kind {
        PathKind::Plain => path(p),
        PathKind::Shortest => format!("shortestPath({})", path(p)),
        PathKind::AllShortest => format!("allShortestPaths({})", path(p)),
    };
    match &p.var {
        Some(v) => format!("{} = {body}", name(v)),
        None => body,
    }
}

fn projection(s: &mut String, p: &Projection) {
    if p.distinct {
        s.push_str(" DISTINCT");
    }
    let mut items: Vec<String> = Vec::new();
    if p.star {
        items.push("*".into());
    }
    for (e, alias) in &p.items {
        items.push(match alias {
            Some(a) => format!("{} AS {}", expr(e), name(a)),
            None => expr(e),
        });
    }
    let _ = write!(s, " {}", items.join(", "));
    if !p.order.is_empty() {
        let o: Vec<String> = p
            .order
            .iter()
            .map(|(e, desc)| format!("{}{}", expr(e), if *desc { " DESC" } else { "" }))
            .collect();
        let _ = write!(s, " ORDER BY {}", o.join(", "));
    }
    if let Some(x) = &p.skip {
        let _ = write!(s, " SKIP {}", expr(x));
    }
    if let Some(x) = &p.limit {
        let _ = write!(s, " LIMIT {}", expr(x));
    }
    if let Some(w) = &p.where_ {
        let _ = write!(s, " WHERE {}", expr(w));
    }
}

/// A whole statement as Cypher text, one clause per line.
pub fn statement(st: &Statement) -> String {
    let mut s = String::new();
    match st.explain {
        Some(Explain::Explain) => s.push_str("EXPLAIN "),
        Some(Explain::Profile) => s.push_str("PROFILE "),
        None => {}
    }
    for (i, part) in st.query.parts.iter().enumerate() {
        if i > 0 {
            let all = st.query.union_all.get(i - 1).copied().unwrap_or(false);
            s.push_str(if all { "\nUNION ALL\n" } else { "\nUNION\n" });
        }
        for (j, c) in part.clauses.iter().enumerate() {
            if j > 0 {
                s.push('\n');
            }
            match c {
                Clause::Match {
                    optional,
                    patterns,
                    where_,
                } => {
                    if *optional {
                        s.push_str("OPTIONAL ");
                    }
                    let ps: Vec<String> = patterns.iter().map(pattern).collect();
                    let _ = write!(s, "MATCH {}", ps.join(", "));
                    if let Some(w) = where_ {
                        let _ = write!(s, " WHERE {}", expr(w));
                    }
                }
                Clause::Unwind { expr: e, var } => {
                    let _ = write!(s, "UNWIND {} AS {}", expr(e), name(var));
                }
                Clause::With(p) => {
                    s.push_str("WITH");
                    projection(&mut s, p);
                }
                Clause::Return(p) => {
                    s.push_str("RETURN");
                    projection(&mut s, p);
                }
                other => s.push_str(&update_clause(other)),
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use crate::parse_query;

    /// Printing and parsing again gives the same text: the printer loses nothing the
    /// parser reads, and the parser reads back what the printer writes.
    #[test]
    fn round_trip() {
        for q in [
            "MATCH (n:User) RETURN n.age, count(*) ORDER BY n.age",
            "MATCH (s:User {id: $id})-->()-->(n:User) RETURN DISTINCT n.id",
            "MATCH (s:User {id: $id})-[*1..2]->(n:User) RETURN DISTINCT n.id, n",
            "MATCH p = shortestPath((a:User {id: $a})-[*..15]->(b:User {id: $b})) RETURN length(p)",
            "MATCH p = allShortestPaths((a)-[:R|S*2..]-(b)) RETURN nodes(p)",
            "MATCH p=(n:User {id: $from})-[*bfs..15]->(m:User {id: $to}) RETURN extract(n in nodes(p) | n.id) AS path",
            // mgbench's Memgraph dialect: filter lambdas, weighted spellings, the hint.
            "MATCH p=(n:User {id: $from})-[*bfs..15 (e, n | n.age >= 18)]->(m:User {id: $to}) RETURN extract(n in nodes(p) | n.id) AS path",
            "MATCH p=(n:User {id: $from})-[*allshortest 2 (r, n | 1) total_weight]->(m:User {id: $to}) RETURN extract(n in nodes(p) | n.id) AS path, total_weight",
            "MATCH p=(n)-[*wshortest 10 (r, n | r.w) total (r, n | n.ok)]->(m) RETURN total",
            "USING PARALLEL EXECUTION MATCH (n:User) RETURN count(n)",
            "MATCH (a)-[r:FOLLOWS|KNOWS {since: 2020}]-(b) WHERE a.age > 20 AND NOT b.name STARTS WITH 'x' RETURN a, r, b LIMIT 10",
            "OPTIONAL MATCH (n)<-[:R]-(m) WITH n, collect(m) AS ms WHERE size(ms) > 1 RETURN n SKIP 2 LIMIT 3",
            "UNWIND [1, 2, 3] AS x RETURN x * 2 AS y UNION ALL RETURN 7 AS y UNION ALL RETURN 8 AS y",
            "MATCH (n) RETURN [p = (n)-[:T]->(m:B) WHERE m.k > 1 | [length(p), [(m)-->(z) | z.name]]] AS l",
            "RETURN CASE WHEN 1 < 2 THEN 'a' ELSE 'b' END, CASE 3 WHEN 3 THEN true END",
            "RETURN [x IN range(1, 10) WHERE x % 2 = 0 | x ^ 2][1..3], [1, 2][-1], 'it\\'s', \"q\\\"\"",
            "MATCH (a), (b) WHERE (a)-->(b) AND a:User:Admin AND a.x IS NOT NULL RETURN count(DISTINCT a.x), {k: [1, 2.5, null, true]}",
            "EXPLAIN MATCH (n) RETURN n",
            "PROFILE MATCH (n) RETURN *",
            "MATCH (`odd name`:`Odd Label`) RETURN `odd name`.`a b` AS `c d`",
            "RETURN -1, - (2 + 3), 1 - -1, 2 ^ 3 ^ 2, 1 = 1 = true, a.b.c IS NULL, 'a' =~ 'b.*' OR false XOR true",
            "MATCH (n) WHERE n.x IN [1, 2] AND n.s ENDS WITH 'z' OR n.s CONTAINS 'y' RETURN n.x[0..], n.l[..2]",
            "MATCH (n) RETURN n ORDER BY n.a DESC, n.b SKIP $s LIMIT $l",
            "WITH 1 AS x WHERE x > 0 RETURN x",
            // Label expressions (Neo4j 5, GQL).
            "MATCH (n:A|B)-[r:!T]->(m IS C&!D), (o:%)-[:(X|Y)&!Z]-(q:!%)-[:X|Y*1..2]-() WHERE n:%|(E&F) AND m IS G RETURN n:A|!B AS x",
            "MATCH (n) RETURN [x IN [n] WHERE x:(A|B) | x], [(n)-->(m:A|B) WHERE m:(C|D) | m], [x IN [n] WHERE x:A | x]",
            "MATCH (n:A&B), (m:A|B) WHERE n:C&D RETURN n",
        ] {
            let s1 = super::statement(&parse_query(q).unwrap_or_else(|e| panic!("{q}: {e}")));
            let s2 = super::statement(&parse_query(&s1).unwrap_or_else(|e| panic!("{s1}: {e}")));
            assert_eq!(s1, s2, "\noriginal: {q}");
        }
    }
}

fn set_item(i: &SetItem) -> String {
    match i {
        SetItem::Prop { target, key, value } => {
            format!("{}.{} = {}", expr(target), name(key), expr(value))
        }
        SetItem::DynProp { target, key, value } => {
            format!("{}[{}] = {}", expr(target), expr(key), expr(value))
        }
        SetItem::Replace { var, value } => format!("{} = {}", name(var), expr(value)),
        SetItem::Merge { var, value } => format!("{} += {}", name(var), expr(value)),
        SetItem::Labels { var, labels: ls } => format!("{}{}", name(var), labels(ls)),
        SetItem::LabelExprs { var, exprs } => format!("{}{}", name(var), dyn_labels(exprs)),
    }
}

fn dyn_labels(exprs: &[Expr]) -> String {
    exprs.iter().map(|e| format!(":$({})", expr(e))).collect()
}

fn items(v: &[SetItem]) -> String {
    v.iter().map(set_item).collect::<Vec<_>>().join(", ")
}

/// An updating clause (or LOAD CSV / CALL IN TRANSACTIONS) as text.
fn update_clause(c: &Clause) -> String {
    match c {
        Clause::Create(ps) => format!(
            "CREATE {}",
            ps.iter().map(pattern).collect::<Vec<_>>().join(", ")
        ),
        Clause::Merge {
            pattern: p,
            on_create,
            on_match,
        } => {
            let mut s = format!("MERGE {}", pattern(p));
            if !on_create.is_empty() {
                s.push_str(&format!(" ON CREATE SET {}", items(on_create)));
            }
            if !on_match.is_empty() {
                s.push_str(&format!(" ON MATCH SET {}", items(on_match)));
            }
            s
        }
        Clause::Set(v) => format!("SET {}", items(v)),
        Clause::Remove(v) => format!(
            "REMOVE {}",
            v.iter()
                .map(|i| match i {
                    RemoveItem::Prop { target, key } => format!("{}.{}", expr(target), name(key)),
                    RemoveItem::Labels { var, labels: ls } => {
                        format!("{}{}", name(var), labels(ls))
                    }
                    RemoveItem::LabelExprs { var, exprs } => {
                        format!("{}{}", name(var), dyn_labels(exprs))
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Clause::Delete { detach, exprs } => format!(
            "{}DELETE {}",
            if *detach { "DETACH " } else { "" },
            exprs.iter().map(expr).collect::<Vec<_>>().join(", ")
        ),
        Clause::LoadCsv(l) => {
            let mut s = format!(
                "LOAD CSV FROM {} {}",
                expr(&l.source),
                if l.header { "WITH HEADER" } else { "NO HEADER" }
            );
            if l.ignore_bad {
                s.push_str(" IGNORE BAD");
            }
            if let Some(d) = l.delimiter {
                s.push_str(&format!(
                    " DELIMITER {}",
                    expr(&Expr::Str((d as char).to_string()))
                ));
            }
            if let Some(q) = l.quote {
                s.push_str(&format!(
                    " QUOTE {}",
                    expr(&Expr::Str((q as char).to_string()))
                ));
            }
            if let Some(n) = &l.null_if {
                s.push_str(&format!(" NULLIF {}", expr(&Expr::Str(n.clone()))));
            }
            format!("{s} AS {}", name(&l.var))
        }
        Clause::CallInTx {
            body,
            rows,
            on_error,
            sees_all,
        } => {
            let inner = statement(&Statement {
                explain: None,
                query: Query {
                    parts: vec![(**body).clone()],
                    union_all: vec![],
                },
            });
            let scope = if *sees_all { "(*) " } else { "" };
            let mut s = format!("CALL {scope}{{ {inner} }} IN TRANSACTIONS");
            if let Some(r) = rows {
                s.push_str(&format!(" OF {} ROWS", expr(r)));
            }
            match on_error {
                OnError::Fail => {}
                OnError::Continue => s.push_str(" ON ERROR CONTINUE"),
                OnError::Break => s.push_str(" ON ERROR BREAK"),
            }
            s
        }
        Clause::CallSubquery {
            body,
            optional,
            sees_all,
            unions,
        } => {
            let inner = statement(&Statement {
                explain: None,
                query: Query {
                    parts: std::iter::once((**body).clone())
                        .chain(unions.iter().map(|(_, p)| p.clone()))
                        .collect(),
                    union_all: unions.iter().map(|(a, _)| *a).collect(),
                },
            });
            format!(
                "{}CALL {}{{ {inner} }}",
                if *optional { "OPTIONAL " } else { "" },
                if *sees_all { "(*) " } else { "" }
            )
        }
        _ => String::new(),
    }
}

/// Memgraph's `(e, n | expr)`.
fn lambda(l: &crate::ast::Lambda) -> String {
    format!("({}, {} | {})", name(&l.rel), name(&l.node), expr(&l.expr))
}
