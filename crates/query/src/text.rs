//! Values and summaries as text, for front ends that take text (the CLI's `--param`,
//! `--bench-params` files): parameters parsed from `name=value`, JSON values, the
//! counters line, and whether a text is a command.

use super::*;

/// Whether `text` is a command (transaction, storage, index DDL) rather than a query.
pub fn is_command(text: &str) -> bool {
    matches!(quiver_cypher::parse(text), Ok(Parsed::Command(_)))
}

/// The write counters as one line, Neo4j style ("2 nodes created, 3 properties set"),
/// and the rows LOAD CSV skipped with where they went.
pub fn counters_line(s: &Summary) -> Option<String> {
    let mut items: Vec<String> = s
        .counters
        .items()
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    if s.bad_rows > 0 {
        items.push(match &s.rejects_path {
            Some(p) => format!("{} bad rows skipped (see {})", s.bad_rows, p.display()),
            None => format!("{} bad rows skipped", s.bad_rows),
        });
    }
    (!items.is_empty()).then(|| items.join(", "))
}

/// Parses `--param name=value`: integers, floats, true/false/null, JSON lists and maps,
/// quoted strings; anything else is a string.
pub fn parse_param(s: &str) -> Result<(String, Value), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("--param {s}: expected name=value"))?;
    Ok((
        k.trim().trim_start_matches('$').to_string(),
        parse_value(v.trim()),
    ))
}

/// A parameter value from text (see [`parse_param`]).
pub fn parse_value(v: &str) -> Value {
    if let Ok(i) = v.parse::<i64>() {
        return Value::Int(i);
    }
    if let Ok(f) = v.parse::<f64>() {
        if v.contains(['.', 'e', 'E'])
            && !v.chars().any(|c| c.is_alphabetic() && c != 'e' && c != 'E')
        {
            return Value::Float(f);
        }
    }
    match v {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" => return Value::Null,
        _ => {}
    }
    if v.starts_with('[') || v.starts_with('{') || v.starts_with('"') {
        if let Ok(j) = serde_json::from_str::<serde_json::Value>(v) {
            return from_json(&j);
        }
    }
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        return Value::str(&v[1..v.len() - 1]);
    }
    Value::str(v)
}

pub(crate) fn from_json(j: &serde_json::Value) -> Value {
    match j {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(Value::Int)
            .unwrap_or_else(|| Value::Float(n.as_f64().unwrap_or(f64::NAN))),
        serde_json::Value::String(s) => Value::str(s),
        serde_json::Value::Array(a) => Value::list(a.iter().map(from_json).collect()),
        serde_json::Value::Object(o) => Value::Map(Arc::new(
            o.iter()
                .map(|(k, v)| (Arc::from(k.as_str()), from_json(v)))
                .collect(),
        )),
    }
}
