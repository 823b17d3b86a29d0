//! Helpers the query crate's integration tests share: a session, and statements run
//! through it as the CLI runs them.
#![allow(dead_code)]

use quiver_query::{QueryError, Session, Summary, Value};
use std::collections::BTreeMap;

/// The rows `q` returns (panics with the query on an error).
pub fn rows(s: &mut Session, q: &str) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    s.run(q, &BTreeMap::new(), &mut |_, b| {
        for r in 0..b.len {
            out.push(b.row(r));
        }
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{q}: {e}"));
    out
}

/// The rows of `q` as text, sorted (for results whose order is not given: aggregation,
/// DISTINCT).
pub fn sorted(s: &mut Session, q: &str) -> Vec<String> {
    let mut r: Vec<String> = rows(s, q).iter().map(|r| format!("{r:?}")).collect();
    r.sort();
    r
}

/// Runs `q`, dropping its rows.
pub fn run(s: &mut Session, q: &str) -> Result<Summary, QueryError> {
    s.run(q, &BTreeMap::new(), &mut |_, _| Ok(()))
}

/// The first column of what `q` returns, as integers (panics on another type).
pub fn ints(s: &mut Session, q: &str) -> Vec<i64> {
    rows(s, q)
        .into_iter()
        .map(|r| match r[0] {
            Value::Int(i) => i,
            ref v => panic!("{q}: not an int: {v:?}"),
        })
        .collect()
}

/// The integer `key` of `SHOW STORAGE INFO`.
pub fn storage_info(s: &mut Session, key: &str) -> i64 {
    rows(s, "SHOW STORAGE INFO")
        .into_iter()
        .find(|r| r[0] == Value::str(key))
        .and_then(|r| match r[1] {
            Value::Int(i) => Some(i),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {key} in SHOW STORAGE INFO"))
}
