//! Neo4j 5.26's answers, kept as fixtures and replayed here.
//!
//! - `fixtures/rebind_neo4j.json` (written by `bench/rebind_diff.py --fixtures`): the
//!   issue's table of queries that name a bound variable again, the label-expression
//!   forms, and every generated query that ever answered differently from Neo4j. Each is
//!   run on its graph and must answer as Neo4j did: the same bag of rows (lists inside
//!   rows as bags, as the script compares them), or an error where Neo4j refused the
//!   query; on a fresh database and on one that has held (and deleted) other data.
//! - `fixtures/temporal_neo4j.json` (written by `bench/temporal_diff.py --fixtures`):
//!   generated temporal queries over Neo4j's whole range (years -999,999,999 to
//!   +999,999,999), with Neo4j's answers, and values stored and read back before and
//!   after a checkpoint.

use quiver_query::{Session, Value};
use quiver_storage::OpenMode;
use std::collections::BTreeMap;

/// A value as the script writes it: Python's `json.dumps(..., sort_keys=True)` of the
/// driver's value, lists sorted by that text, whole floats as integers.
fn canon(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => {
            out.push_str(&(*f as i64).to_string())
        }
        Value::Float(f) => out.push_str(&format!("{f:?}")),
        Value::Str(s) => {
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                        let mut buf = [0u16; 2];
                        for u in c.encode_utf16(&mut buf) {
                            out.push_str(&format!("\\u{:04x}", u));
                        }
                    }
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        Value::List(l) => {
            let mut items: Vec<String> = l
                .iter()
                .map(|x| {
                    let mut s = String::new();
                    canon(x, &mut s);
                    s
                })
                .collect();
            items.sort();
            out.push('[');
            out.push_str(&items.join(", "));
            out.push(']');
        }
        v => out.push_str(&format!("{v:?}")),
    }
}

fn row_text(row: &[Value]) -> String {
    let mut s = String::from("[");
    for (i, v) in row.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        canon(v, &mut s);
    }
    s.push(']');
    s
}

/// The rows of `q`, inside a transaction rolled back after it (the fixtures' writes
/// leave the graph as made), or `None` when it fails.
fn answer(s: &mut Session, q: &str) -> Option<Vec<String>> {
    let none = BTreeMap::new();
    s.run("BEGIN", &none, &mut |_, _| Ok(())).unwrap();
    let mut rows = Vec::new();
    let mut r = s.run(q, &none, &mut |_, b| {
        for i in 0..b.len {
            rows.push(row_text(&b.row(i)));
        }
        Ok(())
    });
    // A query that deletes is compared by the nodes it leaves (the script's
    // `AFTER_DELETE`), read in its transaction.
    if r.is_ok() && q.contains("DELETE") {
        rows.clear();
        r = s.run(
            "MATCH (n) RETURN coalesce(n.id, n.name)",
            &none,
            &mut |_, b| {
                for i in 0..b.len {
                    rows.push(row_text(&b.row(i)));
                }
                Ok(())
            },
        );
    }
    // A failed statement may have ended the transaction already.
    let _ = s.run("ROLLBACK", &none, &mut |_, _| Ok(()));
    r.ok()?;
    rows.sort();
    Some(rows)
}

/// What a database held before a fixture's graph: every label and type the fixtures
/// use, in segments and then deleted.
const HISTORY: &[&str] = &[
    "CREATE (a:A:B:C:Person:Employee {id: 100, name: 'h'})-[:R {rid: 100}]->(b:A:C {id: 101}), \
     (b)-[:S]->(a), (a)-[:KNOWS]->(b), (b)-[:WORKS]->(:Z)",
    "CHECKPOINT",
    "MATCH (n) DETACH DELETE n",
];

#[test]
fn quiver_answers_as_neo4j_did() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rebind_neo4j.json");
    let fixtures: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(fixtures.len() >= 19, "the issue's cases are there");
    // Each graph in a fresh database, and in one that first held nodes and
    // relationships of the fixtures' labels and types (checkpointed, then deleted).
    let none = BTreeMap::new();
    let mut graphs: BTreeMap<(String, bool), (tempfile::TempDir, Session)> = BTreeMap::new();
    let mut wrong = Vec::new();
    for f in &fixtures {
        let graph = f["graph"].as_str().unwrap();
        let q = f["query"].as_str().unwrap();
        for history in [false, true] {
            let (_, s) = graphs
                .entry((graph.to_string(), history))
                .or_insert_with(|| {
                    let d = tempfile::tempdir().unwrap();
                    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true)
                        .unwrap();
                    let before: &[&str] = if history { HISTORY } else { &[] };
                    for q in before.iter().chain([&graph]) {
                        s.run(q, &none, &mut |_, _| Ok(())).unwrap();
                    }
                    (d, s)
                });
            let got = answer(s, q);
            if !as_neo4j(&got, &f["neo4j"]) {
                let was = if history { "after history" } else { "fresh" };
                wrong.push(format!(
                    "{q} ({was})\n  graph:  {graph}\n  neo4j:  {}\n  quiver: {got:?}",
                    f["neo4j"]
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} differ:\n{}",
        wrong.len(),
        fixtures.len(),
        wrong.join("\n")
    );
}

/// Whether Quiver's rows (sorted; `None` for an error) are Neo4j's answer: the same
/// rows as a bag, or an error where Neo4j refused the query.
fn as_neo4j(got: &Option<Vec<String>>, neo4j: &serde_json::Value) -> bool {
    match neo4j {
        serde_json::Value::Array(rows) => {
            let mut want: Vec<String> = rows
                .iter()
                .map(|r| r.as_str().unwrap().to_string())
                .collect();
            want.sort();
            got.as_ref() == Some(&want)
        }
        _ => got.is_none(),
    }
}

#[test]
fn temporal_values_answer_as_neo4j_did() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/temporal_neo4j.json");
    let fixtures: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(fixtures.len() >= 1000, "the generated queries are there");
    let none = BTreeMap::new();
    let mut wrong = Vec::new();
    // On a fresh database, and on one that held other labels and types (checkpointed,
    // then deleted).
    for history in [false, true] {
        let d = tempfile::tempdir().unwrap();
        let mut s = Session::open_with(&d.path().join("t.qdb"), OpenMode::Mapped, true).unwrap();
        if history {
            for q in HISTORY {
                s.run(q, &none, &mut |_, _| Ok(())).unwrap();
            }
        }
        let was = if history { "after history" } else { "fresh" };
        let mut check = |s: &mut Session, f: &serde_json::Value, when: &str| {
            let q = f["query"].as_str().unwrap();
            let got = answer(s, q);
            if !as_neo4j(&got, &f["neo4j"]) {
                wrong.push(format!(
                    "{q} ({when}, {was})\n  neo4j:  {}\n  quiver: {got:?}",
                    f["neo4j"]
                ));
            }
        };
        for f in &fixtures {
            match f["setup"].as_array() {
                // Values stored, read from the delta, then from segments.
                Some(setup) => {
                    for st in setup {
                        s.run(st.as_str().unwrap(), &none, &mut |_, _| Ok(()))
                            .unwrap();
                    }
                    check(&mut s, f, "stored");
                    s.run("CHECKPOINT", &none, &mut |_, _| Ok(())).unwrap();
                    check(&mut s, f, "after CHECKPOINT");
                }
                None => check(&mut s, f, "generated"),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} differ:\n{}",
        wrong.len(),
        fixtures.len(),
        wrong.join("\n")
    );
}
