//! Values as text: Cypher-literal style for tables, JSON for programs, plain cells for
//! CSV. Nodes, relationships and paths are rendered as graph values (id, labels or type,
//! properties) by reading their properties at output time.

use crate::error::QueryError;
use crate::expr::{format_float, to_string};
use crate::graph::Graph;
use crate::value::{RelRef, Value};
use serde_json::{json, Map as JMap, Value as J};
use std::sync::Arc;

fn quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn props_text(g: &Graph, props: &[(Arc<str>, Value)]) -> Result<String, QueryError> {
    if props.is_empty() {
        return Ok(String::new());
    }
    let items = props
        .iter()
        .map(|(k, v)| Ok(format!("{k}: {}", text(g, v)?)))
        .collect::<Result<Vec<_>, QueryError>>()?;
    Ok(format!(" {{{}}}", items.join(", ")))
}

fn node_text(g: &Graph, n: u64) -> Result<String, QueryError> {
    let labels: String = g.labels(n)?.iter().map(|l| format!(":{l}")).collect();
    Ok(format!("({labels}{})", props_text(g, &g.node_props(n)?)?))
}

fn rel_text(g: &Graph, r: &RelRef) -> Result<String, QueryError> {
    Ok(format!(
        "[:{}{}]",
        g.rel_type_name(r.ty),
        props_text(g, &g.rel_props(r)?)?
    ))
}

/// A value as Cypher-like text (table cells, the shell).
pub fn text(g: &Graph, v: &Value) -> Result<String, QueryError> {
    Ok(match v {
        Value::Null => "null".into(),
        Value::Str(s) => quote(s),
        Value::Float(f) => format_float(*f),
        Value::List(l) => format!(
            "[{}]",
            l.iter()
                .map(|x| text(g, x))
                .collect::<Result<Vec<_>, _>>()?
                .join(", ")
        ),
        Value::Map(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, x)| Ok(format!("{k}: {}", text(g, x)?)))
                .collect::<Result<Vec<_>, QueryError>>()?
                .join(", ")
        ),
        Value::Node(n) => node_text(g, *n)?,
        Value::Rel(r) => rel_text(g, r)?,
        Value::Path(p) => {
            let mut s = node_text(g, p.nodes[0])?;
            for (i, r) in p.rels.iter().enumerate() {
                let from = p.nodes[i];
                let rt = rel_text(g, r)?;
                if r.src as u64 == from {
                    s.push_str(&format!("-{rt}->"));
                } else {
                    s.push_str(&format!("<-{rt}-"));
                }
                s.push_str(&node_text(g, p.nodes[i + 1])?);
            }
            s
        }
        Value::Date(_) | Value::LocalDateTime(_) | Value::DateTime(_) => to_string(v),
        Value::Int(_) | Value::Bool(_) => to_string(v),
    })
}

/// A CSV cell: scalars as themselves, graph values and collections as JSON.
pub fn csv_cell(g: &Graph, v: &Value) -> Result<String, QueryError> {
    Ok(match v {
        Value::Null => String::new(),
        Value::Str(s) => s.to_string(),
        Value::Int(_)
        | Value::Float(_)
        | Value::Bool(_)
        | Value::Date(_)
        | Value::LocalDateTime(_)
        | Value::DateTime(_) => to_string(v),
        _ => json(g, v)?.to_string(),
    })
}

fn props_json(g: &Graph, props: Vec<(Arc<str>, Value)>) -> Result<J, QueryError> {
    let mut m = JMap::new();
    for (k, v) in props {
        m.insert(k.to_string(), json(g, &v)?);
    }
    Ok(J::Object(m))
}

fn rel_json(g: &Graph, r: &RelRef) -> Result<J, QueryError> {
    Ok(json!({
        "id": ((r.ty as i64) << 40) | r.eid as i64,
        "type": &*g.rel_type_name(r.ty),
        "start": r.src,
        "end": r.dst,
        "properties": props_json(g, g.rel_props(r)?)?,
    }))
}

fn node_json(g: &Graph, n: u64) -> Result<J, QueryError> {
    let labels: Vec<String> = g.labels(n)?.iter().map(|l| l.to_string()).collect();
    Ok(json!({
        "id": n,
        "labels": labels,
        "properties": props_json(g, g.node_props(n)?)?,
    }))
}

/// A value as JSON: graph values are objects with their id, labels or type and
/// properties.
pub fn json(g: &Graph, v: &Value) -> Result<J, QueryError> {
    Ok(match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => json!(i),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Value::Str(s) => J::String(s.to_string()),
        Value::List(l) => J::Array(l.iter().map(|x| json(g, x)).collect::<Result<_, _>>()?),
        Value::Map(m) => {
            let mut o = JMap::new();
            for (k, x) in m.iter() {
                o.insert(k.to_string(), json(g, x)?);
            }
            J::Object(o)
        }
        Value::Node(n) => node_json(g, *n)?,
        Value::Rel(r) => rel_json(g, r)?,
        Value::Path(p) => json!({
            "nodes": p.nodes.iter().map(|&n| node_json(g, n)).collect::<Result<Vec<_>, _>>()?,
            "relationships": p.rels.iter().map(|r| rel_json(g, r)).collect::<Result<Vec<_>, _>>()?,
        }),
        Value::Date(_) | Value::LocalDateTime(_) | Value::DateTime(_) => J::String(to_string(v)),
    })
}

/// Rows as an aligned text table.
pub fn table(columns: &[String], cells: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = columns.iter().map(|c| c.chars().count()).collect();
    for r in cells {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |out: &mut String, l: char, m: char, r: char| {
        out.push(l);
        for (i, wi) in w.iter().enumerate() {
            out.extend(std::iter::repeat_n('─', wi + 2));
            out.push(if i + 1 == w.len() { r } else { m });
        }
        out.push('\n');
    };
    let row = |out: &mut String, vals: &[String]| {
        out.push('│');
        for (i, v) in vals.iter().enumerate() {
            let pad = w[i] - v.chars().count();
            out.push(' ');
            out.push_str(v);
            out.extend(std::iter::repeat_n(' ', pad + 1));
            out.push('│');
        }
        out.push('\n');
    };
    let mut out = String::new();
    if w.is_empty() {
        return out;
    }
    line(&mut out, '┌', '┬', '┐');
    row(&mut out, columns);
    line(&mut out, '├', '┼', '┤');
    for r in cells {
        row(&mut out, r);
    }
    line(&mut out, '└', '┴', '┘');
    out
}
