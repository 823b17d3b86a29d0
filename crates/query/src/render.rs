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
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if c.is_control() => o.push_str(&format!("\\u{:04X}", c as u32)),
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
        Value::Int(_) | Value::Bool(_) => to_string(v),
        _ => to_string(v),
    })
}

/// A CSV cell: scalars as themselves, graph values and collections as JSON.
pub fn csv_cell(g: &Graph, v: &Value) -> Result<String, QueryError> {
    Ok(match v {
        Value::Null => String::new(),
        Value::Str(s) => s.to_string(),
        Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::Duration(_) => to_string(v),
        v if v.is_temporal() => to_string(v),
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
        _ => J::String(to_string(v)),
    })
}

/// Widest cell a table shows, in terminal columns; longer cells end in `…` (the CSV
/// and JSON formats carry every value whole).
pub const TABLE_CELL_WIDTH_MAX: usize = 120;

/// The box drawing of Quiver's tables, in comfy-table's preset order: borders, a line
/// under the header, no lines between rows.
const TABLE_STYLE: &str = "││──├─┼┤│    ┬┴┌┐└┘";

/// A cell made safe and short for a terminal: control characters (which a stored value
/// could use to send escape sequences) written as `\uXXXX`, and cut to
/// [`TABLE_CELL_WIDTH_MAX`] display columns (East Asian wide characters count two).
fn table_cell(s: &str) -> String {
    use unicode_width::UnicodeWidthChar;
    let mut out = String::with_capacity(s.len().min(TABLE_CELL_WIDTH_MAX * 4));
    let mut width = 0;
    for c in s.chars() {
        // An escape `\uXXXX` is six columns wide.
        let w = if c.is_control() {
            6
        } else {
            c.width().unwrap_or(0)
        };
        if width + w > TABLE_CELL_WIDTH_MAX - 1 {
            out.push('…');
            return out;
        }
        width += w;
        if c.is_control() {
            out.push_str(&format!("\\u{:04X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Rows as an aligned text table (comfy-table: columns sized by display width).
pub fn table(columns: &[String], cells: &[Vec<String>]) -> String {
    if columns.is_empty() {
        return String::new();
    }
    let mut t = comfy_table::Table::new();
    t.load_preset(TABLE_STYLE)
        .set_content_arrangement(comfy_table::ContentArrangement::Disabled)
        .set_header(columns.iter().map(|c| table_cell(c)));
    for r in cells {
        t.add_row(r.iter().map(|c| table_cell(c)));
    }
    let mut out = t.to_string();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_by_display_width_and_escape_control_characters() {
        let t = table(
            &["name".into(), "n".into()],
            &[
                vec!["\"日本語\"".into(), "1".into()],
                vec!["\"a\u{1b}[2Jb\"".into(), "22".into()],
            ],
        );
        assert!(!t.contains('\u{1b}'), "{t}");
        assert!(t.contains("a\\u001B[2Jb"), "{t}");
        // Every line has the same display width.
        use unicode_width::UnicodeWidthStr;
        let widths: Vec<usize> = t.lines().map(|l| l.width()).collect();
        assert!(widths.windows(2).all(|w| w[0] == w[1]), "{t}\n{widths:?}");
        assert!(t.starts_with('┌') && t.ends_with("┘\n"), "{t}");
    }

    #[test]
    fn long_cells_are_cut() {
        let long = "字".repeat(500);
        let t = table(&["x".into()], &[vec![long]]);
        use unicode_width::UnicodeWidthStr;
        let line = t.lines().nth(3).unwrap();
        assert!(line.width() <= TABLE_CELL_WIDTH_MAX + 4, "{line}");
        assert!(line.contains('…'));
    }

    #[test]
    fn quoted_strings_escape_control_characters() {
        assert_eq!(quote("a\tb\u{7}"), "\"a\\tb\\u0007\"");
    }
}
