//! `EXPLAIN` / `PROFILE` plans in the Bolt summary, as Neo4j sends them (the `plan` or
//! `profile` entry of the last SUCCESS): a tree of operators, each a map of
//! `operatorType`, `args` (with `Details`), `identifiers` and `children`, plus `rows`,
//! `dbHits`, `time` and the page-cache counts when profiled. The Neo4j Browser draws it,
//! the drivers give it as `summary.plan` / `summary.profile`.
//!
//! Built from the plan's text (`quiver_query::Summary::plan`): one operator a line, two
//! spaces of indentation a level, a profile's figures in brackets at the end.

use crate::packstream::Pack;

struct Node {
    op: String,
    details: String,
    rows: Option<i64>,
    /// The operator's own time, in nanoseconds.
    time_ns: Option<i64>,
    children: Vec<Node>,
}

/// `[rows 3, time 0.254 ms (self 0.001 ms), ...]` at the end of a profiled line.
fn figures(line: &str) -> (&str, Option<i64>, Option<i64>) {
    let Some(at) = line.rfind("  [rows ") else {
        return (line, None, None);
    };
    let (text, fig) = (&line[..at], &line[at + 3..]);
    let num = |key: &str| -> Option<f64> {
        let i = fig.find(key)? + key.len();
        let rest = &fig[i..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    };
    let rows = num("rows ").map(|r| r as i64);
    let time = num("self ").map(|ms| (ms * 1e6) as i64);
    (text, rows, time)
}

fn parse(text: &str) -> Option<Node> {
    // (depth, node) of the open path from the root.
    let mut stack: Vec<(usize, Node)> = Vec::new();
    let mut root = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let depth = (line.len() - line.trim_start().len()) / 2;
        let (body, rows, time_ns) = figures(line.trim());
        let (op, details) = body.split_once(' ').unwrap_or((body, ""));
        let node = Node {
            op: op.to_string(),
            details: details.trim().to_string(),
            rows,
            time_ns,
            children: Vec::new(),
        };
        while stack.last().is_some_and(|(d, _)| *d >= depth) {
            let (_, done) = stack.pop()?;
            match stack.last_mut() {
                Some((_, parent)) => parent.children.push(done),
                None => root = Some(done),
            }
        }
        stack.push((depth, node));
    }
    while let Some((_, done)) = stack.pop() {
        match stack.last_mut() {
            Some((_, parent)) => parent.children.push(done),
            None => root = Some(done),
        }
    }
    root
}

fn pack(n: Node, profiled: bool, top: bool) -> Pack {
    let mut args = vec![
        ("Details".to_string(), Pack::str(n.details.as_str())),
        ("EstimatedRows".to_string(), Pack::Float(0.0)),
    ];
    if top {
        for (k, v) in [
            ("planner", "COST"),
            ("runtime", "QUIVER"),
            ("runtime-impl", "QUIVER"),
            ("Database", "neo4j"),
        ] {
            args.push((k.to_string(), Pack::str(v)));
        }
    }
    let mut m = vec![
        (
            "operatorType".to_string(),
            Pack::str(format!("{}@neo4j", n.op)),
        ),
        ("args".to_string(), Pack::Map(args)),
        ("identifiers".to_string(), Pack::List(Vec::new())),
        (
            "children".to_string(),
            Pack::List(
                n.children
                    .into_iter()
                    .map(|c| pack(c, profiled, false))
                    .collect(),
            ),
        ),
    ];
    if profiled {
        m.push(("rows".to_string(), Pack::Int(n.rows.unwrap_or(0))));
        m.push(("dbHits".to_string(), Pack::Int(0)));
        m.push(("pageCacheHits".to_string(), Pack::Int(0)));
        m.push(("pageCacheMisses".to_string(), Pack::Int(0)));
        m.push(("time".to_string(), Pack::Int(n.time_ns.unwrap_or(0))));
    }
    Pack::Map(m)
}

/// The summary entry of a plan's text: `("plan", tree)` for EXPLAIN, `("profile",
/// tree)` for PROFILE; `None` when the text has no operator.
pub(crate) fn entry(text: &str, profiled: bool) -> Option<(&'static str, Pack)> {
    let root = parse(text)?;
    Some((
        if profiled { "profile" } else { "plan" },
        pack(root, profiled, true),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_becomes_a_tree_with_its_figures() {
        let text = "Limit skip 0, limit 3  [rows 3, time 0.254 ms (self 0.001 ms)]\n  Filter (b.age > 3)  [rows 44, time 0.233 ms (self 0.211 ms)]\n    Expand (a)-[]->(b)  [rows 61, time 0.023 ms (self 0.009 ms)]\n  Once  [rows 1, time 0.001 ms (self 0.001 ms)]\n";
        let root = parse(text).unwrap();
        assert_eq!(root.op, "Limit");
        assert_eq!(root.details, "skip 0, limit 3");
        assert_eq!(root.children.len(), 2);
        assert_eq!(root.children[0].op, "Filter");
        assert_eq!(root.children[0].rows, Some(44));
        assert_eq!(root.children[0].time_ns, Some(211_000));
        assert_eq!(root.children[0].children[0].op, "Expand");
        assert_eq!(root.children[1].op, "Once");
        assert!(parse("").is_none());
    }
}
