//! The APOC procedures that client libraries call to write (LangChain's graph import,
//! neo4j-graphrag's knowledge-graph writer), read as the Cypher they stand for: Neo4j
//! 5.26's dynamic labels and types in MERGE, CREATE and SET. No JVM, no procedure
//! runtime: the planner sees a MERGE, with its index seeks and its conflict rules.
//!
//! | call | read as |
//! |---|---|
//! | `apoc.merge.node(labels, ident, onCreate, onMatch) YIELD node` | `MERGE (node:$(labels) ident) ON CREATE SET node += onCreate ON MATCH SET node += onMatch` |
//! | `apoc.merge.relationship(a, type, ident, onCreate, b, onMatch) YIELD rel` | `MERGE (a)-[rel:$(type) ident]->(b) ON CREATE SET rel += onCreate ON MATCH SET rel += onMatch` |
//! | `apoc.create.node(labels, props) YIELD node` | `CREATE (node:$(labels)) SET node += props` |
//! | `apoc.create.relationship(a, type, props, b) YIELD rel` | `CREATE (a)-[rel:$(type)]->(b) SET rel += props` |
//! | `apoc.create.addLabels(n, labels) YIELD node` | `SET n:$(labels) WITH *, n AS node` |
//! | `apoc.create.setLabels(n, labels) YIELD node` | `REMOVE n:$(labels(n)) SET n:$(labels) WITH *, n AS node` |
//! | `db.create.setNodeVectorProperty(n, key, vector)` (and `...Relationship...`) | `SET n[key] = [x IN vector \| toFloat(x)]` |
//!
//! | `apoc.periodic.iterate('iterate', 'action', {batchSize: n})` | `iterate` (its RETURN a WITH) `CALL (*) { action } IN TRANSACTIONS OF n ROWS`, then one row of APOC's counts |
//!
//! `ident` is a map literal (`{id: row.id}`), as MERGE's pattern takes; a node or
//! relationship argument is a variable. A WHERE after YIELD filters after the write.

use crate::ast::*;

/// The clauses a call of one of the procedures above stands for; `None` for any other
/// procedure; an error (for the caller to place) when the arguments do not fit.
pub fn rewrite(pc: &ProcCall) -> Option<Result<Vec<Clause>, String>> {
    let name = pc.name.to_ascii_lowercase();
    if name == "apoc.periodic.iterate" {
        return Some(periodic_iterate(pc));
    }
    let name = name.strip_suffix(".eager").unwrap_or(&name);
    let (arity, out): ((usize, usize), &str) = match name {
        "apoc.merge.node" => ((2, 4), "node"),
        "apoc.merge.relationship" => ((5, 6), "rel"),
        "apoc.create.node" => ((2, 2), "node"),
        "apoc.create.relationship" => ((4, 4), "rel"),
        "apoc.create.addlabels" | "apoc.create.setlabels" => ((2, 2), "node"),
        "db.create.setnodevectorproperty" | "db.create.setrelationshipvectorproperty" => {
            ((3, 3), "")
        }
        _ => return None,
    };
    Some(clauses(pc, name, arity, out))
}

fn clauses(
    pc: &ProcCall,
    name: &str,
    (lo, hi): (usize, usize),
    out: &str,
) -> Result<Vec<Clause>, String> {
    let args = pc
        .args
        .as_deref()
        .ok_or_else(|| format!("{}() takes its arguments in parentheses", pc.name))?;
    if args.len() < lo || args.len() > hi {
        return Err(format!(
            "{}() takes {} argument(s), got {}",
            pc.name,
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo} to {hi}")
            },
            args.len()
        ));
    }
    let alias = match (&pc.yields, pc.star) {
        (Some(_), _) | (_, true) if out.is_empty() => {
            return Err(format!("{}() yields nothing", pc.name))
        }
        (None, _) | (_, true) => out.to_string(),
        (Some(y), false) => match y.as_slice() {
            [(o, alias)] if o == out => alias.clone(),
            _ => return Err(format!("{}() yields one column, `{out}`", pc.name)),
        },
    };
    let var = |e: &Expr, what: &str| match e {
        Expr::Var(v, _) => Ok(v.clone()),
        _ => Err(format!(
            "{}(): the {what} must be a variable bound before the call",
            pc.name
        )),
    };
    // A map literal, as MERGE's pattern takes; `{}` is no properties.
    let ident = |e: &Expr| match e {
        Expr::Map(m) if m.is_empty() => Ok(None),
        Expr::Map(_) => Ok(Some(e.clone())),
        Expr::Null => Ok(None),
        _ => Err(format!(
            "{}(): Quiver takes the identifying properties as a map literal, like {{id: row.id}}",
            pc.name
        )),
    };
    // `SET x += e`, left out for an empty map literal or null.
    let add = |x: &str, e: Option<&Expr>| -> Vec<SetItem> {
        match e {
            None | Some(Expr::Null) => Vec::new(),
            Some(Expr::Map(m)) if m.is_empty() => Vec::new(),
            Some(e) => vec![SetItem::Merge {
                var: x.to_string(),
                value: e.clone(),
            }],
        }
    };
    let node = |v: Option<String>, dyn_labels: Vec<Expr>, props: Option<Expr>| NodePattern {
        var: v,
        var_at: pc.at,
        labels: Vec::new(),
        dyn_labels,
        label_expr: None,
        props,
    };
    let rel = |v: &str, ty: &Expr, props: Option<Expr>| RelPattern {
        var: Some(v.to_string()),
        var_at: pc.at,
        types: Vec::new(),
        dyn_types: vec![ty.clone()],
        type_expr: None,
        props,
        dir: Dir::Out,
        range: None,
        bfs: false,
        weighted: None,
        filter: None,
    };
    let pattern = |start: NodePattern, steps: Vec<(RelPattern, NodePattern)>| Pattern {
        var: None,
        var_at: pc.at,
        kind: PathKind::Plain,
        start,
        steps,
    };
    let mut cs = match name {
        "apoc.merge.node" => vec![Clause::Merge {
            pattern: pattern(
                node(Some(alias.clone()), vec![args[0].clone()], ident(&args[1])?),
                Vec::new(),
            ),
            on_create: add(&alias, args.get(2)),
            on_match: add(&alias, args.get(3)),
        }],
        "apoc.merge.relationship" => {
            let (a, b) = (var(&args[0], "start node")?, var(&args[4], "end node")?);
            vec![Clause::Merge {
                pattern: pattern(
                    node(Some(a), Vec::new(), None),
                    vec![(
                        rel(&alias, &args[1], ident(&args[2])?),
                        node(Some(b), Vec::new(), None),
                    )],
                ),
                on_create: add(&alias, args.get(3)),
                on_match: add(&alias, args.get(5)),
            }]
        }
        "apoc.create.node" => {
            let mut cs = vec![Clause::Create(vec![pattern(
                node(Some(alias.clone()), vec![args[0].clone()], None),
                Vec::new(),
            )])];
            let set = add(&alias, args.get(1));
            if !set.is_empty() {
                cs.push(Clause::Set(set));
            }
            cs
        }
        "apoc.create.relationship" => {
            let (a, b) = (var(&args[0], "start node")?, var(&args[3], "end node")?);
            let mut cs = vec![Clause::Create(vec![pattern(
                node(Some(a), Vec::new(), None),
                vec![(rel(&alias, &args[1], None), node(Some(b), Vec::new(), None))],
            )])];
            let set = add(&alias, args.get(2));
            if !set.is_empty() {
                cs.push(Clause::Set(set));
            }
            cs
        }
        "db.create.setnodevectorproperty" | "db.create.setrelationshipvectorproperty" => {
            let x = var(&args[0], "entity")?;
            let el = " v".to_string();
            vec![Clause::Set(vec![SetItem::DynProp {
                target: Expr::Var(x, pc.at),
                key: args[1].clone(),
                value: Expr::ListComp {
                    var: el.clone(),
                    list: Box::new(args[2].clone()),
                    pred: None,
                    map: Some(Box::new(Expr::Call {
                        name: "tofloat".into(),
                        distinct: false,
                        args: vec![Expr::Var(el, pc.at)],
                    })),
                },
            }])]
        }
        // apoc.create.addLabels; apoc.create.setLabels removes the others first.
        _ => {
            let n = var(&args[0], "node")?;
            let mut cs = Vec::new();
            if name == "apoc.create.setlabels" {
                cs.push(Clause::Remove(vec![RemoveItem::LabelExprs {
                    var: n.clone(),
                    exprs: vec![Expr::Call {
                        name: "labels".into(),
                        distinct: false,
                        args: vec![Expr::Var(n.clone(), pc.at)],
                    }],
                }]));
            }
            cs.push(Clause::Set(vec![SetItem::LabelExprs {
                var: n.clone(),
                exprs: vec![args[1].clone()],
            }]));
            if n != alias {
                cs.push(Clause::With(Projection {
                    distinct: false,
                    star: true,
                    items: vec![(Expr::Var(n, pc.at), Some(alias.clone()))],
                    order: Vec::new(),
                    skip: None,
                    limit: None,
                    where_: None,
                    texts: vec![alias],
                }));
            }
            cs
        }
    };
    if let Some(w) = &pc.where_ {
        cs.push(Clause::With(Projection {
            distinct: false,
            star: true,
            items: Vec::new(),
            order: Vec::new(),
            skip: None,
            limit: None,
            where_: Some(w.clone()),
            texts: Vec::new(),
        }));
    }
    Ok(cs)
}

/// What `apoc.periodic.iterate` yields, in APOC's order.
const ITERATE_OUT: [&str; 13] = [
    "batches",
    "total",
    "timeTaken",
    "committedOperations",
    "failedOperations",
    "failedBatches",
    "retries",
    "errorMessages",
    "batch",
    "operations",
    "wasTerminated",
    "failedParams",
    "updateStatistics",
];

/// `apoc.periodic.iterate(iterate, action, config)`: the two statements (string
/// literals, read as Cypher here) as one, the action a `CALL (*) { } IN TRANSACTIONS OF
/// batchSize ROWS` over the iterate statement's rows (its RETURN made a WITH, so the
/// action sees its columns as variables, as APOC's does), then APOC's counts as one row.
/// A failing batch fails the statement (APOC counts it and goes on); `parallel`,
/// `batchMode` and `retries` are read and ignored; `params` is not taken yet.
fn periodic_iterate(pc: &ProcCall) -> Result<Vec<Clause>, String> {
    let name = &pc.name;
    let args = pc
        .args
        .as_deref()
        .ok_or_else(|| format!("{name}() takes its arguments in parentheses"))?;
    if !(2..=3).contains(&args.len()) {
        return Err(format!(
            "{name}(cypherIterate, cypherAction, config) takes 2 or 3 arguments, got {}",
            args.len()
        ));
    }
    let text = |e: &Expr, what: &str| {
        match e {
        Expr::Str(s) => Ok(s.clone()),
        _ => Err(format!(
            "{name}(): Quiver reads the {what} statement as Cypher when the query is parsed: give it as a string literal"
        )),
    }
    };
    let (iterate, action) = (text(&args[0], "iterate")?, text(&args[1], "action")?);
    let mut batch = 10_000i64;
    match args.get(2) {
        None | Some(Expr::Null) => {}
        Some(Expr::Map(m)) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("batchSize", Expr::Int(n)) if *n > 0 => batch = *n,
                    ("batchSize", _) => {
                        return Err(format!("{name}(): batchSize must be a positive integer"))
                    }
                    ("params", Expr::Map(p)) if p.is_empty() => {}
                    ("params", _) => {
                        return Err(format!(
                            "{name}(): config.params is not supported yet; write the values into the statements or pass them as the query's parameters"
                        ))
                    }
                    _ => {} // parallel, batchMode, retries, concurrency...: ignored
                }
            }
        }
        Some(_) => return Err(format!("{name}(): the config must be a map literal")),
    }
    let inner = |t: &str, what: &str| -> Result<SingleQuery, String> {
        let st =
            super::parse_query(t).map_err(|e| format!("{name}(): the {what} statement: {e}"))?;
        match st.query.parts.as_slice() {
            [one] if st.query.parts.len() == 1 => Ok(one.clone()),
            _ => Err(format!("{name}(): the {what} statement cannot be a UNION")),
        }
    };
    let mut it = inner(&iterate, "iterate")?;
    match it.clauses.pop() {
        Some(Clause::Return(p)) => it.clauses.push(Clause::With(p)),
        _ => {
            return Err(format!(
                "{name}(): the iterate statement must end with RETURN (its columns are the action's variables)"
            ))
        }
    }
    let act = inner(&action, "action")?;
    let at = pc.at;
    let var = |v: &str| Expr::Var(v.to_string(), at);
    let proj = |items: Vec<(Expr, Option<String>)>, where_: Option<Expr>| Projection {
        distinct: false,
        star: false,
        texts: items
            .iter()
            .map(|(_, a)| a.clone().unwrap_or_default())
            .collect(),
        items,
        order: Vec::new(),
        skip: None,
        limit: None,
        where_,
    };
    let mut cs = it.clauses;
    cs.push(Clause::CallInTx {
        body: Box::new(act),
        rows: Some(Expr::Int(batch)),
        on_error: OnError::Fail,
        sees_all: true,
    });
    cs.push(Clause::With(proj(
        vec![(Expr::CountStar, Some("total".into()))],
        None,
    )));
    let map = |pairs: Vec<(&str, Expr)>| {
        Expr::Map(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    };
    let batches = Expr::Binary(
        BinOp::Div,
        Box::new(Expr::Binary(
            BinOp::Add,
            Box::new(var("total")),
            Box::new(Expr::Int(batch - 1)),
        )),
        Box::new(Expr::Int(batch)),
    );
    let counts = |n: Expr| {
        map(vec![
            ("total", n.clone()),
            ("committed", n),
            ("failed", Expr::Int(0)),
            ("errors", map(Vec::new())),
        ])
    };
    let value = |out: &str| -> Expr {
        match out {
            "batches" => batches.clone(),
            "total" | "committedOperations" => var("total"),
            "timeTaken" | "failedOperations" | "failedBatches" | "retries" => Expr::Int(0),
            "batch" => counts(batches.clone()),
            "operations" => counts(var("total")),
            "wasTerminated" => Expr::Bool(false),
            _ => map(Vec::new()), // errorMessages, failedParams, updateStatistics
        }
    };
    match (&pc.yields, pc.star) {
        (Some(y), false) => {
            let mut items = Vec::new();
            for (o, alias) in y {
                if !ITERATE_OUT.contains(&o.as_str()) {
                    return Err(format!(
                        "{name}() yields {}; not {o}",
                        ITERATE_OUT.join(", ")
                    ));
                }
                items.push((value(o), Some(alias.clone())));
            }
            cs.push(Clause::With(proj(items, pc.where_.clone())));
        }
        _ => {
            let items = ITERATE_OUT
                .iter()
                .map(|o| (value(o), Some(o.to_string())))
                .collect();
            if pc.star {
                cs.push(Clause::With(proj(items, pc.where_.clone())));
            } else {
                cs.push(Clause::Return(proj(items, None)));
            }
        }
    }
    Ok(cs)
}
