//! Seed 004's direct path: a statement that creates at least 102,400 nodes writes them
//! straight into row groups of a new node table, committed as a checkpoint; smaller
//! writes go through the delta. Both must read the same.

use quiver_common::limits::{BATCH_DIRECT_MIN, BULK_ROWS_MIN};
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
fn batches_of_the_direct_size_go_direct_each_and_smaller_ones_through_the_delta() {
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
    // Two batches of 50,000 (BATCH_DIRECT_MIN) direct, a table each; the last 22,400
    // rows through the delta, into a table at the next checkpoint.
    assert_eq!(BATCH_DIRECT_MIN, 50_000);
    let t = tables(d.path());
    assert_eq!(
        t.iter().filter(|t| t.starts_with("bulk-")).count(),
        2,
        "{t:?}"
    );
    assert!(!t.iter().any(|t| t.starts_with("delta-")), "{t:?}");
    check(&mut s, n as i64);
    run(&mut s, "CHECKPOINT").unwrap();
    let t = tables(d.path());
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

/// The plan of `q`, as EXPLAIN describes it.
fn plan(s: &mut Session, q: &str) -> String {
    run(s, &format!("EXPLAIN {q}")).unwrap().plan.unwrap()
}

#[test]
fn big_relationship_creates_go_straight_to_a_segment_and_read_the_same() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    let n = BULK_ROWS_MIN as i64 + 500;
    run(&mut s, "CREATE INDEX ON :N(id)").unwrap();
    run(&mut s, "UNWIND range(0, 999) AS i CREATE (:N {id: i})").unwrap();
    // A type the segments have already, with an integer column `w`.
    run(
        &mut s,
        "MATCH (a:N {id: 0}), (b:N {id: 1}) CREATE (a)-[:T {w: 5}]->(b)",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    // `w` is a string on every 1000th relationship (not the column's type), `z` a key
    // the type has no column for, set on every 10,000th.
    let big_t = format!(
        "UNWIND range(0, {}) AS i MATCH (a:N {{id: i % 1000}}), (b:N {{id: (i * 7) % 1000}}) \
         CREATE (a)-[:T {{w: CASE WHEN i % 1000 = 999 THEN 'x' ELSE i END, z: CASE WHEN i % 10000 = 0 THEN i END}}]->(b)",
        n - 1
    );
    assert!(plan(&mut s, &big_t).contains("BulkCreate"));
    let sum = run(&mut s, &big_t).unwrap();
    assert_eq!(sum.counters.relationships_created, n as u64);
    assert_eq!(
        sum.counters.properties_set,
        n as u64 + (n as u64).div_ceil(10_000)
    );
    // A new type, without properties.
    let big_u = format!(
        "UNWIND range(0, {}) AS i MATCH (a:N {{id: i % 1000}}), (b:N {{id: (i + 1) % 1000}}) CREATE (a)-[:U]->(b)",
        n - 1
    );
    run(&mut s, &big_u).unwrap();
    // Both went to segments: nothing in the delta.
    let info = rows(&mut s, "SHOW STORAGE INFO");
    let get = |k: &str| {
        info.iter()
            .find(|r| r[0] == Value::str(k))
            .map(|r| r[1].clone())
            .unwrap()
    };
    assert_eq!(get("delta_changes"), Value::Int(0), "{info:?}");
    let db = Database::open(&d.path().join("g.qdb"), OpenMode::Mapped).unwrap();
    assert_eq!(db.manifest().rel_types.len(), 2);
    assert_eq!(db.manifest().rel_types[0].segments.len(), 2);
    drop(db);

    let check = |s: &mut Session| {
        let ints: i64 = (0..n).filter(|i| i % 1000 != 999).sum::<i64>() + 5;
        let r = rows(
            s,
            "MATCH ()-[r:T]->() RETURN count(r), sum(CASE WHEN r.w = 'x' THEN 0 ELSE r.w END), \
             count(CASE WHEN r.w = 'x' THEN 1 END), sum(r.z), count(r.z)",
        );
        let zs: i64 = (0..n).filter(|i| i % 10_000 == 0).sum();
        let xs = (0..n).filter(|i| i % 1000 == 999).count() as i64;
        let nz = (0..n).filter(|i| i % 10_000 == 0).count() as i64;
        assert_eq!(
            r,
            vec![vec![
                Value::Int(n + 1),
                Value::Int(ints),
                Value::Int(xs),
                Value::Int(zs),
                Value::Int(nz)
            ]]
        );
        // Both directions of the CSR, by type.
        let out_of_3 = (0..n).filter(|i| i % 1000 == 3).count() as i64;
        let into_21 = (0..n).filter(|i| (i * 7) % 1000 == 21).count() as i64;
        assert_eq!(
            rows(s, "MATCH (:N {id: 3})-[r:T]->() RETURN count(r)"),
            vec![vec![Value::Int(out_of_3)]]
        );
        assert_eq!(
            rows(s, "MATCH (:N {id: 21})<-[r:T]-() RETURN count(r)"),
            vec![vec![Value::Int(into_21)]]
        );
        assert_eq!(
            rows(s, "MATCH (a:N {id: 998})-[:U]->(b) RETURN DISTINCT b.id"),
            vec![vec![Value::Int(999)]]
        );
        assert_eq!(
            rows(s, "MATCH ()-[r:U]->() RETURN count(r)"),
            vec![vec![Value::Int(n)]]
        );
        assert_eq!(
            rows(
                s,
                "MATCH (:N {id: 1000 - 1})-[r:T {w: 'x'}]->(b) RETURN count(r), min(b.id)"
            ),
            vec![vec![Value::Int(xs), Value::Int((999 * 7) % 1000)]]
        );
    };
    check(&mut s);
    // Written to the new segment's ends, the relationships can be deleted and changed.
    run(&mut s, "MATCH (:N {id: 998})-[r:U]->() DELETE r").unwrap();
    run(&mut s, "MATCH (:N {id: 998})-[:U]->() RETURN 1").unwrap();
    drop(s);
    let mut s = open(d.path());
    let left = rows(&mut s, "MATCH ()-[r:U]->() RETURN count(r)");
    let gone = (0..n).filter(|i| i % 1000 == 998).count() as i64;
    assert_eq!(left, vec![vec![Value::Int(n - gone)]]);
    run(
        &mut s,
        "MATCH (a:N {id: 998}), (b:N {id: 999}) CREATE (a)-[:U]->(b)",
    )
    .unwrap();
    run(&mut s, &format!("MATCH (a:N {{id: 998}}) WITH a MATCH (b:N {{id: 999}}) WITH a, b LIMIT 1 UNWIND range(1, {}) AS i CREATE (a)-[:U]->(b)", gone - 1)).unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    check(&mut s);

    // Inside CALL { } IN TRANSACTIONS, batches of the direct path's size plan the bulk
    // CREATE (the body is planned again after a batch whose commit published a
    // generation); smaller ones write through the delta.
    let batched = "UNWIND range(0, 9) AS i CALL { WITH i MATCH (a:N {id: i}), (b:N {id: i + 1}) CREATE (a)-[:V]->(b) } IN TRANSACTIONS OF 2 ROWS";
    assert!(!plan(&mut s, batched).contains("BulkCreate"));
    assert!(plan(&mut s, &batched.replace("OF 2 ROWS", "OF 50000 ROWS")).contains("BulkCreate"));
    run(&mut s, batched).unwrap();
    assert_eq!(
        rows(&mut s, "SHOW STORAGE INFO")
            .iter()
            .find(|r| r[0] == Value::str("delta_changes"))
            .map(|r| r[1] != Value::Int(0)),
        Some(true)
    );
    assert_eq!(
        rows(&mut s, "MATCH ()-[r:V]->() RETURN count(r)"),
        vec![vec![Value::Int(10)]]
    );
}

#[test]
fn a_small_relationship_create_goes_through_the_delta() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(&mut s, "UNWIND range(0, 99) AS i CREATE (:N {id: i})").unwrap();
    let q = "MATCH (a:N), (b:N) WHERE b.id = (a.id + 1) % 100 CREATE (a)-[:T {w: a.id}]->(b)";
    assert!(plan(&mut s, q).contains("BulkCreate"));
    let sum = run(&mut s, q).unwrap();
    assert_eq!(sum.counters.relationships_created, 100);
    assert_eq!(sum.counters.properties_set, 100);
    let info = rows(&mut s, "SHOW STORAGE INFO");
    assert!(info
        .iter()
        .any(|r| r[0] == Value::str("delta_changes") && r[1] != Value::Int(0)));
    assert_eq!(
        rows(&mut s, "MATCH (:N {id: 99})-[r:T]->(b) RETURN r.w, b.id"),
        vec![vec![Value::Int(99), Value::Int(0)]]
    );
}

/// A direct write of relationships that the database's memory limit cannot hold while
/// other work holds most of it waits for that memory instead of failing, and commits
/// once it comes back.
#[test]
fn a_direct_write_short_of_memory_waits_for_it() {
    use quiver_engine::store::StoreOptions;
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("g.qdb");
    let opts = StoreOptions {
        memory_limit: 64 << 20,
        ..StoreOptions::default()
    };
    let mut s = Session::open_opts(&dir, opts, true).unwrap();
    run(&mut s, "CREATE INDEX ON :N(id)").unwrap();
    run(&mut s, "UNWIND range(0, 999) AS i CREATE (:N {id: i})").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let store = s.store().clone();
    // Other work holds all but 1 MiB; the write's 200,000 pairs need about 3 MiB.
    let free = store.memory.available_bytes();
    let hog = store
        .memory
        .try_grant(free - (1 << 20), "other work")
        .unwrap();
    let n = 200_000;
    let q = format!(
        "UNWIND range(0, {}) AS i MATCH (a:N {{id: i % 1000}}), (b:N {{id: (i * 7) % 1000}}) CREATE (a)-[:T]->(b)",
        n - 1
    );
    assert!(plan(&mut s, &q).contains("BulkCreate"));
    // (Without waiting it fails at once: the memory is held for half a second.)
    let r = std::thread::scope(|t| {
        t.spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(500));
            drop(hog);
        });
        run(&mut s, &q)
    });
    let sum = r.unwrap();
    assert_eq!(sum.counters.relationships_created, n as u64);
    assert_eq!(
        rows(&mut s, "MATCH ()-[r:T]->() RETURN count(r)"),
        vec![vec![Value::Int(n)]]
    );
}
