//! Seed 004's direct path: a statement that creates at least 102,400 nodes writes them
//! straight into row groups of a new node table, committed as a checkpoint; smaller
//! writes go through the delta. Both must read the same.

use quiver_common::limits::BULK_ROWS_MIN;
mod common;

use common::{rows, run};
use quiver_query::{Session, Value};
use quiver_storage::{Database, OpenMode};
use std::path::Path;

fn open(dir: &Path) -> Session {
    std::fs::create_dir_all(dir.join("import")).unwrap();
    Session::open_with(&dir.join("g.qdb"), OpenMode::Mapped, true).unwrap()
}

/// `n` rows `id,name,score,tag`: tag is an integer except on every 1000th row (a value
/// of another type than its column's), name is empty (null) on every 7th.
fn people(dir: &Path, name: &str, n: u64) {
    let mut t = String::from("id,name,score,tag\n");
    for i in 0..n {
        let nm = if i % 7 == 0 {
            String::new()
        } else {
            format!("p{i}")
        };
        let tag = if i % 1000 == 999 {
            "x".to_string()
        } else {
            (i % 13).to_string()
        };
        t += &format!("{i},{nm},{}.5,{tag}\n", i % 100);
    }
    std::fs::create_dir_all(dir.join("import")).unwrap();
    std::fs::write(dir.join("import").join(name), t).unwrap();
}

const CREATE: &str = "CREATE (:P {id: toInteger(row.id), name: row.name, score: toFloat(row.score), tag: coalesce(toInteger(row.tag), row.tag)})";

fn tables(dir: &Path) -> Vec<String> {
    let db = Database::open(&dir.join("g.qdb"), OpenMode::Mapped).unwrap();
    db.node_tables()
        .iter()
        .map(|t| t.meta.name.clone())
        .collect()
}

/// What every load of `people` must read back, whichever path it took.
fn check(s: &mut Session, n: i64) {
    let r = rows(
        s,
        "MATCH (p:P) RETURN count(p), sum(p.id), count(p.name), sum(p.score), count(p.tag)",
    );
    let named = n - (n + 6) / 7;
    let score: f64 = (0..n).map(|i| (i % 100) as f64 + 0.5).sum();
    assert_eq!(
        r,
        vec![vec![
            Value::Int(n),
            Value::Int(n * (n - 1) / 2),
            Value::Int(named),
            Value::Float(score),
            Value::Int(n),
        ]]
    );
    // The misfits kept their values.
    let r = rows(s, "MATCH (p:P {id: 1999}) RETURN p.tag, p.name");
    assert_eq!(r, vec![vec![Value::str("x"), Value::str("p1999")]]);
    let r = rows(s, "MATCH (p:P {id: 14}) RETURN p.tag, p.name");
    assert_eq!(r, vec![vec![Value::Int(1), Value::Null]]);
}

#[test]
fn a_big_load_goes_straight_to_a_node_table_and_reads_the_same() {
    let d = tempfile::tempdir().unwrap();
    let n = BULK_ROWS_MIN + 3_000;
    people(d.path(), "p.csv", n);
    let mut s = open(d.path());
    let sum = run(
        &mut s,
        &format!("LOAD CSV FROM 'p.csv' WITH HEADER NULLIF '' AS row {CREATE}"),
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, n);
    assert!(tables(d.path()).iter().any(|t| t.starts_with("bulk-")));
    check(&mut s, n as i64);
    // No table files are left outside the generation.
    let left = std::fs::read_dir(d.path().join("g.qdb/bulk"))
        .map(|r| r.count())
        .unwrap_or(0);
    assert_eq!(left, 0);
    // Writes after it, and a reopen, see the same.
    run(&mut s, "CREATE (:P {id: -1})").unwrap();
    drop(s);
    let mut s = open(d.path());
    assert_eq!(
        rows(&mut s, "MATCH (p:P) RETURN count(p)"),
        vec![vec![Value::Int(n as i64 + 1)]]
    );
    run(&mut s, "MATCH (p:P {id: -1}) DELETE p").unwrap();
    check(&mut s, n as i64);
}

#[test]
fn batches_switch_to_the_direct_path_once_the_statement_passes_the_threshold() {
    let d = tempfile::tempdir().unwrap();
    let n = BULK_ROWS_MIN + 20_000;
    people(d.path(), "p.csv", n);
    let mut s = open(d.path());
    let sum = run(
        &mut s,
        &format!(
            "LOAD CSV FROM 'p.csv' WITH HEADER NULLIF '' AS row CALL {{ WITH row {CREATE} }} IN TRANSACTIONS OF 50000 ROWS"
        ),
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, n);
    // Two batches through the delta (50,000 and 100,000 rows are below the threshold),
    // the third direct: it checkpoints the first two with it.
    let t = tables(d.path());
    assert!(t.iter().any(|t| t.starts_with("bulk-")), "{t:?}");
    assert!(t.iter().any(|t| t.starts_with("delta-")), "{t:?}");
    check(&mut s, n as i64);
}

#[test]
fn a_small_load_goes_through_the_delta() {
    let d = tempfile::tempdir().unwrap();
    people(d.path(), "p.csv", 5_000);
    let mut s = open(d.path());
    run(
        &mut s,
        &format!("LOAD CSV FROM 'p.csv' WITH HEADER NULLIF '' AS row {CREATE}"),
    )
    .unwrap();
    assert!(tables(d.path()).is_empty());
    check(&mut s, 5_000);
}

#[test]
fn a_failed_big_load_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let n = BULK_ROWS_MIN + 5_000;
    people(d.path(), "p.csv", n);
    // A bad row at the end, after the direct path has written row groups.
    let p = d.path().join("import/p.csv");
    let mut t = std::fs::read_to_string(&p).unwrap();
    t += "1,2\n";
    std::fs::write(&p, t).unwrap();
    let mut s = open(d.path());
    let e = run(
        &mut s,
        &format!("LOAD CSV FROM 'p.csv' WITH HEADER NULLIF '' AS row {CREATE}"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("expected 4 fields"), "{e}");
    assert_eq!(
        rows(&mut s, "MATCH (p:P) RETURN count(p)"),
        vec![vec![Value::Int(0)]]
    );
    let left = std::fs::read_dir(d.path().join("g.qdb/bulk"))
        .map(|r| r.count())
        .unwrap_or(0);
    assert_eq!(left, 0);
}

#[test]
fn analytical_mode_and_explicit_transactions() {
    let d = tempfile::tempdir().unwrap();
    let n = BULK_ROWS_MIN + 1_000;
    people(d.path(), "p.csv", n);
    let mut s = open(d.path());
    run(&mut s, "STORAGE MODE IN_MEMORY_ANALYTICAL").unwrap();
    run(&mut s, "CREATE (:Q {k: 1})").unwrap();
    run(
        &mut s,
        &format!("LOAD CSV FROM 'p.csv' WITH HEADER NULLIF '' AS row {CREATE}"),
    )
    .unwrap();
    check(&mut s, n as i64);
    // The direct write's checkpoint made the earlier analytical write durable too.
    run(&mut s, "STORAGE MODE IN_MEMORY_TRANSACTIONAL").unwrap();
    drop(s);
    let mut s = open(d.path());
    assert_eq!(
        rows(&mut s, "MATCH (q:Q) RETURN q.k"),
        vec![vec![Value::Int(1)]]
    );
    check(&mut s, n as i64);
    // Inside BEGIN the statement's nodes are read by the next statement: the delta.
    run(&mut s, "BEGIN").unwrap();
    people(d.path(), "p2.csv", 10);
    run(
        &mut s,
        "LOAD CSV WITH HEADERS FROM 'p2.csv' AS row CREATE (:R {id: toInteger(row.id)})",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, "MATCH (r:R) RETURN count(r)"),
        vec![vec![Value::Int(10)]]
    );
    run(&mut s, "ROLLBACK").unwrap();
    assert_eq!(
        rows(&mut s, "MATCH (r:R) RETURN count(r)"),
        vec![vec![Value::Int(0)]]
    );
}
