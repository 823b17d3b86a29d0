//! Writes, transactions, the log and checkpoints, through `Session` as the CLI uses it.

mod common;

use common::{ints, rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;
use std::collections::BTreeMap;
use std::path::Path;

fn open(dir: &Path) -> Session {
    Session::open_with(dir, OpenMode::Mapped, true).unwrap()
}

fn count(s: &mut Session, q: &str) -> i64 {
    ints(s, q)[0]
}

#[test]
fn create_set_remove_delete_and_counters() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    let sum = run(
        &mut s,
        "CREATE (a:User {id: 1, name: 'Ada'})-[:FOLLOWS {since: 2020}]->(b:User {id: 2})",
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, 2);
    assert_eq!(sum.counters.relationships_created, 1);
    assert_eq!(sum.counters.properties_set, 4);
    assert_eq!(sum.counters.labels_added, 2);
    run(&mut s, "MATCH (u:User {id: 1}) SET u.age = 36, u:Admin").unwrap();
    assert_eq!(count(&mut s, "MATCH (u:Admin) RETURN u.age"), 36);
    run(
        &mut s,
        "MATCH (u:User {id: 1}) SET u += {age: null, city: 'Paris'}",
    )
    .unwrap();
    let r = rows(&mut s, "MATCH (u:User {id: 1}) RETURN u.age, u.city");
    assert!(r[0][0].is_null());
    assert_eq!(r[0][1], Value::str("Paris"));
    run(&mut s, "MATCH (u:User {id: 1}) REMOVE u.city, u:Admin").unwrap();
    assert_eq!(count(&mut s, "MATCH (u:Admin) RETURN count(u)"), 0);
    assert_eq!(
        count(&mut s, "MATCH ()-[r:FOLLOWS]->() RETURN r.since"),
        2020
    );
    // A node with relationships needs DETACH.
    let e = run(&mut s, "MATCH (u:User {id: 1}) DELETE u").unwrap_err();
    assert!(e.to_string().contains("DETACH DELETE"), "{e}");
    let sum = run(&mut s, "MATCH (u:User {id: 1}) DETACH DELETE u").unwrap();
    assert_eq!(sum.counters.nodes_deleted, 1);
    assert_eq!(sum.counters.relationships_deleted, 1);
    assert_eq!(count(&mut s, "MATCH (n) RETURN count(n)"), 1);
    assert_eq!(count(&mut s, "MATCH ()-[r]->() RETURN count(r)"), 0);
    // Property values must be storable.
    let e = run(&mut s, "CREATE (:X {m: {a: 1}})").unwrap_err();
    assert!(e.to_string().contains("property"), "{e}");
}

#[test]
fn merge_creates_once_and_matches_after() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(&d.path().join("g.qdb"));
    run(
        &mut s,
        "UNWIND [1, 1, 2, 3, 2] AS x MERGE (n:N {v: x}) ON CREATE SET n.created = true ON MATCH SET n.seen = true",
    )
    .unwrap();
    assert_eq!(
        ints(&mut s, "MATCH (n:N) RETURN n.v ORDER BY n.v"),
        vec![1, 2, 3]
    );
    assert_eq!(count(&mut s, "MATCH (n:N) WHERE n.seen RETURN count(n)"), 2);
    run(
        &mut s,
        "MATCH (a:N {v: 1}), (b:N {v: 2}) MERGE (a)-[:T]->(b)",
    )
    .unwrap();
    run(
        &mut s,
        "MATCH (a:N {v: 1}), (b:N {v: 2}) MERGE (a)-[:T]->(b)",
    )
    .unwrap();
    assert_eq!(count(&mut s, "MATCH ()-[r:T]->() RETURN count(r)"), 1);
}

#[test]
fn reads_before_a_write_are_eager() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(&d.path().join("g.qdb"));
    run(&mut s, "UNWIND range(1, 3000) AS i CREATE (:A {i: i})").unwrap();
    // The scan must not meet the nodes this statement creates.
    run(&mut s, "MATCH (a:A) CREATE (:A {i: a.i + 10000})").unwrap();
    assert_eq!(count(&mut s, "MATCH (a:A) RETURN count(a)"), 6000);
}

#[test]
fn transactions_commit_rollback_and_isolation() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut a = open(&db);
    run(&mut a, "CREATE (:C {id: 1, n: 0})").unwrap();
    let mut b = Session::on(a.store().clone());
    run(&mut a, "BEGIN").unwrap();
    run(&mut a, "MATCH (c:C {id: 1}) SET c.n = 1").unwrap();
    run(&mut a, "CREATE (:C {id: 2, n: 0})").unwrap();
    // A transaction sees its own writes; others do not until it commits.
    assert_eq!(count(&mut a, "MATCH (c:C) RETURN count(c)"), 2);
    assert_eq!(count(&mut b, "MATCH (c:C) RETURN count(c)"), 1);
    assert_eq!(count(&mut b, "MATCH (c:C {id: 1}) RETURN c.n"), 0);
    // A second writer of the same node conflicts, retryably.
    let e = run(&mut b, "MATCH (c:C {id: 1}) SET c.n = 2").unwrap_err();
    assert!(e.is_retryable(), "{e}");
    // b's snapshot stays while a commits.
    run(&mut b, "BEGIN").unwrap();
    run(&mut a, "COMMIT").unwrap();
    assert_eq!(count(&mut b, "MATCH (c:C) RETURN count(c)"), 1);
    // Writing what a committed after b began is a conflict too.
    let e = run(&mut b, "MATCH (c:C {id: 1}) SET c.n = 3").unwrap_err();
    assert!(e.to_string().contains("conflict"), "{e}");
    assert!(!b.in_transaction());
    // Retried, it succeeds.
    run(&mut b, "MATCH (c:C {id: 1}) SET c.n = c.n + 10").unwrap();
    assert_eq!(count(&mut a, "MATCH (c:C {id: 1}) RETURN c.n"), 11);
    // Rollback leaves nothing.
    run(&mut a, "BEGIN").unwrap();
    run(&mut a, "CREATE (:C {id: 3})").unwrap();
    run(&mut a, "ROLLBACK").unwrap();
    assert_eq!(count(&mut b, "MATCH (c:C) RETURN count(c)"), 2);
}

#[test]
fn concurrent_increments_lose_nothing() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    run(&mut s, "CREATE (:K {id: 1, n: 0})").unwrap();
    let store = s.store().clone();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut s = Session::on(store);
                let mut done = 0;
                while done < 25 {
                    match run(&mut s, "MATCH (k:K {id: 1}) SET k.n = k.n + 1") {
                        Ok(_) => done += 1,
                        Err(e) if e.is_retryable() => std::thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(count(&mut s, "MATCH (k:K) RETURN k.n"), 100);
}

/// Group commit: commits from many sessions share log syncs, yet each is visible to a
/// new snapshot as soon as it returns, the clock order is kept (a commit sees every
/// commit that returned before it began), and all of them survive a reopen.
#[test]
fn group_commits_are_visible_on_return_and_durable() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    run(&mut s, "CREATE (:Root {id: 0})").unwrap();
    let store = s.store().clone();
    let per = 40;
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut s = Session::on(store);
                for i in 0..per {
                    let id = t * 1000 + i;
                    // A node and a relationship to the shared root: the endpoint lock
                    // makes some of these conflict and retry.
                    let q = format!(
                        "MATCH (r:Root {{id: 0}}) CREATE (:N {{id: {id}, t: {t}}})-[:TO]->(r)"
                    );
                    loop {
                        match run(&mut s, &q) {
                            Ok(_) => break,
                            Err(e) if e.is_retryable() => std::thread::yield_now(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                    // Visible on return, to this session's next statement...
                    let mine = count(&mut s, &format!("MATCH (n:N {{t: {t}}}) RETURN count(n)"));
                    assert_eq!(mine, i + 1, "thread {t} after commit {i}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let total = 6 * per;
    assert_eq!(count(&mut s, "MATCH (n:N) RETURN count(n)"), total);
    assert_eq!(
        count(&mut s, "MATCH (:N)-[:TO]->(r:Root) RETURN count(*)"),
        total
    );
    drop(s);
    drop(store);
    let mut s = open(&db);
    assert_eq!(count(&mut s, "MATCH (n:N) RETURN count(n)"), total);
    assert_eq!(
        count(&mut s, "MATCH (:N)-[:TO]->(r:Root) RETURN count(*)"),
        total
    );
    assert_eq!(
        count(&mut s, "MATCH (n:N) RETURN count(DISTINCT n.id)"),
        total
    );
}

#[test]
fn commits_survive_reopen_and_checkpoint() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let check = |s: &mut Session| {
        assert_eq!(
            ints(s, "MATCH (u:U) RETURN u.i ORDER BY u.i"),
            vec![1, 3, 4, 5]
        );
        assert_eq!(
            ints(
                s,
                "MATCH (a:U)-[r:R]->(b:U) RETURN a.i * 10 + b.i ORDER BY a.i"
            ),
            vec![13, 34]
        );
        assert_eq!(count(s, "MATCH (u:U {i: 3}) RETURN u.x"), 7);
    };
    {
        let mut s = open(&db);
        run(&mut s, "UNWIND range(1, 5) AS i CREATE (:U {i: i})").unwrap();
        run(
            &mut s,
            "MATCH (a:U {i: 1}), (b:U {i: 3}) CREATE (a)-[:R {w: 1}]->(b)",
        )
        .unwrap();
        run(
            &mut s,
            "MATCH (a:U {i: 3}), (b:U {i: 4}) CREATE (a)-[:R]->(b)",
        )
        .unwrap();
        run(&mut s, "MATCH (u:U {i: 2}) DELETE u").unwrap();
        run(&mut s, "MATCH (u:U {i: 3}) SET u.x = 7").unwrap();
        check(&mut s);
    }
    // The log is replayed.
    let mut s = open(&db);
    check(&mut s);
    run(&mut s, "CHECKPOINT").unwrap();
    check(&mut s);
    // Changes on checkpointed nodes, then another checkpoint and a reopen.
    run(&mut s, "MATCH (u:U {i: 5}) SET u.y = 'five'").unwrap();
    run(&mut s, "MATCH (u:U {i: 4}) SET u:V").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    drop(s);
    let mut s = open(&db);
    check(&mut s);
    assert_eq!(
        rows(&mut s, "MATCH (u:U {i: 5}) RETURN u.y")[0][0],
        Value::str("five")
    );
    assert_eq!(count(&mut s, "MATCH (v:V) RETURN v.i"), 4);
    assert_eq!(
        count(&mut s, "MATCH ()-[r:R]->() WHERE r.w = 1 RETURN count(r)"),
        1
    );
}

#[test]
fn a_torn_log_tail_is_cut_and_the_rest_kept() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let end = {
        let mut s = open(&db);
        for i in 0..5 {
            run(&mut s, &format!("CREATE (:T {{i: {i}}})")).unwrap();
        }
        s.store().log_bytes() as usize
    };
    let log = std::fs::read_dir(&db)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("wal-"))
        .unwrap()
        .path();
    // The last record loses its last 3 bytes (the file's preallocated zeros after it
    // go too).
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..end - 3]).unwrap();
    let mut s = open(&db);
    assert_eq!(
        ints(&mut s, "MATCH (t:T) RETURN t.i ORDER BY t.i"),
        vec![0, 1, 2, 3]
    );
    // And the log takes new commits after the cut.
    run(&mut s, "CREATE (:T {i: 9})").unwrap();
    drop(s);
    let mut s = open(&db);
    assert_eq!(
        ints(&mut s, "MATCH (t:T) RETURN t.i ORDER BY t.i"),
        vec![0, 1, 2, 3, 9]
    );
}

#[test]
fn analytical_mode_writes_without_log_until_checkpoint() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    run(&mut s, "STORAGE MODE IN_MEMORY_ANALYTICAL").unwrap();
    run(&mut s, "UNWIND range(1, 100) AS i CREATE (:P {i: i})").unwrap();
    assert_eq!(count(&mut s, "MATCH (p:P) RETURN count(p)"), 100);
    assert_eq!(
        s.store().log_bytes(),
        24,
        "analytical writes are not logged"
    );
    // Back to transactional: the analytical writes are checkpointed first.
    run(&mut s, "STORAGE MODE IN_MEMORY_TRANSACTIONAL").unwrap();
    drop(s);
    let mut s = open(&db);
    assert_eq!(count(&mut s, "MATCH (p:P) RETURN count(p)"), 100);
}

#[test]
fn a_commit_on_an_unchanged_head_keeps_conflicts_exact() {
    let d = tempfile::tempdir().unwrap();
    let mut a = open(&d.path().join("g.qdb"));
    let mut b = Session::on(a.store().clone());
    // Created and committed with nothing committed in between: later writers see no
    // conflict on what it created.
    run(&mut a, "CREATE (:N {id: 1, x: 0})").unwrap();
    run(&mut b, "MATCH (n:N {id: 1}) SET n.x = 1").unwrap();
    run(&mut a, "MATCH (n:N {id: 1}) SET n.x = 2").unwrap();
    // A writer whose snapshot predates a change conflicts with it.
    run(&mut a, "BEGIN").unwrap();
    run(&mut b, "BEGIN").unwrap();
    assert_eq!(count(&mut b, "MATCH (n:N {id: 1}) RETURN n.x"), 2);
    run(&mut a, "MATCH (n:N {id: 1}) SET n.x = 3").unwrap();
    run(&mut a, "COMMIT").unwrap();
    let e = run(&mut b, "MATCH (n:N {id: 1}) SET n.x = 4").unwrap_err();
    assert!(e.is_retryable(), "{e}");
    assert_eq!(count(&mut a, "MATCH (n:N {id: 1}) RETURN n.x"), 3);
    // And the log holds every commit: a reopen reads the same.
    drop((a, b));
    let mut a = open(&d.path().join("g.qdb"));
    assert_eq!(count(&mut a, "MATCH (n:N {id: 1}) RETURN n.x"), 3);
}

#[test]
fn declared_indexes_follow_checkpoints() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    run(&mut s, "UNWIND range(1, 100) AS i CREATE (:U {k: i})").unwrap();
    run(&mut s, "CREATE INDEX ON :U(k)").unwrap();
    run(&mut s, "UNWIND range(101, 200) AS i CREATE (:U {k: i})").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    // Found through the index, which now holds the nodes the checkpoint wrote.
    assert_eq!(count(&mut s, "MATCH (u:U {k: 150}) RETURN count(u)"), 1);
    assert_eq!(
        count(&mut s, "MATCH (u:U) WHERE u.k >= 190 RETURN count(u)"),
        11
    );
    let plan = rows(&mut s, "EXPLAIN MATCH (u:U {k: 150}) RETURN u");
    assert!(plan.is_empty());
    drop(s);
    let mut s = open(&db);
    assert_eq!(count(&mut s, "MATCH (u:U {k: 200}) RETURN count(u)"), 1);
    let idx = rows(&mut s, "SHOW INDEXES");
    assert_eq!(idx[0][14], Value::Int(200), "{idx:?}");
}

#[test]
fn uniqueness_constraints_reject_duplicates() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    // Declared on an empty database, in both spellings.
    run(
        &mut s,
        "CREATE CONSTRAINT FOR (u:User) REQUIRE u.id IS UNIQUE",
    )
    .unwrap();
    assert!(run(
        &mut s,
        "CREATE CONSTRAINT ON (u:User) ASSERT u.id IS UNIQUE"
    )
    .is_err());
    run(
        &mut s,
        "CREATE CONSTRAINT IF NOT EXISTS FOR (u:User) REQUIRE u.id IS UNIQUE",
    )
    .unwrap();
    // Neo4j 5's parenthesized form, with a name (the tutorials' spelling).
    run(
        &mut s,
        "CREATE CONSTRAINT user_id IF NOT EXISTS FOR (u:User) REQUIRE (u.id) IS UNIQUE",
    )
    .unwrap();
    // Several properties (composite): nodes sharing all of them break it, nodes
    // missing one are not held to it; the name drops it.
    run(
        &mut s,
        "CREATE (:Movie {title: 'A', year: 1999}), (:Movie {title: 'A', year: 2003})",
    )
    .unwrap();
    run(
        &mut s,
        "CREATE CONSTRAINT movie_key FOR (m:Movie) REQUIRE (m.title, m.year) IS UNIQUE",
    )
    .unwrap();
    for q in [
        "CREATE (:Movie {title: 'A', year: 1999})",
        "MATCH (m:Movie {year: 2003}) SET m.year = 1999.0",
    ] {
        let e = run(&mut s, q).unwrap_err().to_string();
        assert!(e.contains("`title` = \"A\", `year` = 1999"), "{q}: {e}");
    }
    run(
        &mut s,
        "CREATE (:Movie {title: 'A'}), (:Movie {title: 'A'}), (:Movie {title: 'B', year: 1999})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    assert!(run(&mut s, "CREATE (:Movie {title: 'B', year: 1999})").is_err());
    let e = run(&mut s, "DROP INDEX ON :Movie(title)")
        .unwrap_err()
        .to_string();
    assert!(e.contains("DROP CONSTRAINT movie_key first"), "{e}");
    let e = run(
        &mut s,
        "CREATE CONSTRAINT movie_key FOR (m:Movie) REQUIRE m.x IS UNIQUE",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("named movie_key exists already"), "{e}");
    let c = rows(&mut s, "SHOW CONSTRAINTS");
    assert_eq!(c.len(), 2);
    assert_eq!(c[1][1], Value::str("movie_key"));
    assert_eq!(
        format!("{:?}", c[1][5]),
        format!("{:?}", rows(&mut s, "RETURN ['title', 'year']")[0][0])
    );
    run(&mut s, "DROP CONSTRAINT movie_key").unwrap();
    run(&mut s, "DROP CONSTRAINT movie_key IF EXISTS").unwrap();
    assert!(run(&mut s, "DROP CONSTRAINT movie_key").is_err());
    run(&mut s, "CREATE (:Movie {title: 'B', year: 1999})").unwrap();
    // Data that breaks it refuses it, naming the nodes and values.
    let e = run(
        &mut s,
        "CREATE CONSTRAINT FOR (m:Movie) REQUIRE (m.title, m.year) IS UNIQUE",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("both have (title, year) = [\"B\", 1999]"), "{e}");
    run(&mut s, "MATCH (m:Movie) DETACH DELETE m").unwrap();
    let e = run(
        &mut s,
        "CREATE CONSTRAINT FOR (m:Movie) REQUIRE m.title IS NOT NULL",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("UNIQUE"), "{e}");
    run(&mut s, "UNWIND range(1, 50) AS i CREATE (:User {id: i})").unwrap();
    let dup = |s: &mut Session, q: &str| {
        let e = run(s, q).unwrap_err().to_string();
        assert!(e.contains("uniqueness constraint on :User(id)"), "{q}: {e}");
    };
    dup(&mut s, "CREATE (:User {id: 7})");
    dup(&mut s, "MATCH (u:User {id: 8}) SET u.id = 9");
    dup(&mut s, "CREATE (n:Person {id: 10}) SET n:User");
    dup(&mut s, "UNWIND [100, 100] AS i CREATE (:User {id: i})");
    // Other labels and other values are fine; MERGE finds the node by its key.
    run(&mut s, "CREATE (:Other {id: 7}), (:User {id: 51})").unwrap();
    let sum = run(&mut s, "UNWIND range(45, 55) AS i MERGE (:User {id: i})").unwrap();
    assert_eq!(sum.counters.nodes_created, 4);
    assert!(rows(&mut s, "EXPLAIN MERGE (:User {id: 1})").is_empty());
    // Two open transactions writing one key: the second conflicts at once.
    let mut t = Session::on(s.store().clone());
    run(&mut s, "BEGIN").unwrap();
    run(&mut t, "BEGIN").unwrap();
    run(&mut s, "CREATE (:User {id: 500})").unwrap();
    let e = run(&mut t, "CREATE (:User {id: 500})").unwrap_err();
    assert!(e.is_retryable(), "{e}");
    run(&mut s, "COMMIT").unwrap();
    // ... and one that starts later sees the committed node.
    dup(&mut t, "CREATE (:User {id: 500})");
    // Kept across a checkpoint and a reopen.
    run(&mut s, "CHECKPOINT").unwrap();
    dup(&mut s, "CREATE (:User {id: 500})");
    drop((s, t));
    let mut s = open(&db);
    dup(&mut s, "CREATE (:User {id: 3})");
    // Neo4j 5's columns: id, name, type, entityType, labelsOrTypes, properties,
    // ownedIndex, propertyType.
    let c = rows(&mut s, "SHOW CONSTRAINTS");
    assert_eq!(c.len(), 1);
    let name = match &c[0][1] {
        Value::Str(n) => n.to_string(),
        v => panic!("{v:?}"),
    };
    assert!(name.starts_with("constraint_"), "{name}");
    assert_eq!(c[0][2], Value::str("UNIQUENESS"));
    assert_eq!(c[0][3], Value::str("NODE"));
    assert_eq!(c[0][6], Value::str(&name));
    // Adding a constraint over data that breaks it is refused and names the value.
    run(&mut s, "CREATE (:Tag {name: 'a'}), (:Tag {name: 'a'})").unwrap();
    let e = run(
        &mut s,
        "CREATE CONSTRAINT ON (t:Tag) ASSERT t.name IS UNIQUE",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("both have name = 'a'"), "{e}");
    run(&mut s, "DROP CONSTRAINT ON (u:User) ASSERT u.id IS UNIQUE").unwrap();
    run(&mut s, "CREATE (:User {id: 3})").unwrap();
}

/// `--memory-limit`: writes past it fail and roll back, leaving the database usable; a
/// query's operators draw on it too; LOAD CSV's direct path writes row groups early
/// instead of failing.
#[test]
fn the_database_memory_limit_is_enforced() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let opts = quiver_engine::StoreOptions {
        memory_limit: 8 << 20,
        ..Default::default()
    };
    let mut s = Session::open_opts(&db, opts, true).unwrap();
    run(&mut s, "CREATE (:Root {id: 1})").unwrap();
    // Through the delta: 150,000 relationships and nodes do not fit in 8 MiB.
    let e = run(
        &mut s,
        "MATCH (r:Root) UNWIND range(1, 150000) AS i CREATE (r)-[:T]->(:N {i: i})",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("memory limit") && e.contains("--memory-limit"),
        "{e}"
    );
    assert_eq!(count(&mut s, "MATCH (n:N) RETURN count(n)"), 0);
    // In one transaction, statements small enough for their operators pile up
    // uncommitted writes until the transaction's own grant is refused: it rolls back.
    run(&mut s, "BEGIN").unwrap();
    let mut failed = None;
    for _ in 0..100 {
        if let Err(e) = run(
            &mut s,
            "MATCH (r:Root) UNWIND range(1, 2000) AS i CREATE (r)-[:T]->(:N {i: i})",
        ) {
            failed = Some(e.to_string());
            break;
        }
    }
    let e = failed.expect("the transaction outgrew 8 MiB");
    assert!(
        e.contains("this transaction's writes") && e.contains("--memory-limit"),
        "{e}"
    );
    assert!(!s.in_transaction(), "the failed transaction is rolled back");
    assert_eq!(count(&mut s, "MATCH (n:N) RETURN count(n)"), 0);
    // The limit is free again: a small write and a read work.
    run(&mut s, "MATCH (r:Root) CREATE (r)-[:T]->(:N {i: 0})").unwrap();
    assert_eq!(
        count(&mut s, "MATCH (:Root)-[:T]->(n:N) RETURN count(n)"),
        1
    );
    let info = rows(&mut s, "SHOW STORAGE INFO");
    let get = |k: &str| {
        info.iter()
            .find(|r| r[0] == Value::str(k))
            .map(|r| r[1].clone())
            .unwrap()
    };
    assert_eq!(get("memory_limit"), Value::Int(8 << 20));
    match get("memory_in_use") {
        Value::Int(i) => assert!(i > 0 && i < 8 << 20, "{i}"),
        v => panic!("{v:?}"),
    }
    // A query's operators take their grants from the database's limit as well: a
    // DISTINCT that cannot spill (no temporary directory) and is the only query
    // holding memory gives way at once rather than wait for memory no one will free.
    let tmp = s.opts.temp_dir.take();
    let t0 = std::time::Instant::now();
    let e = run(&mut s, "UNWIND range(1, 2000000) AS i RETURN DISTINCT i")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the database's memory limit") && e.contains("--memory-limit"),
        "{e}"
    );
    assert!(e.contains("gave way"), "{e}");
    assert!(
        t0.elapsed().as_secs() < 20,
        "it did not wait out the timeout"
    );
    // With a temporary directory it spills and answers.
    s.opts.temp_dir = tmp;
    assert_eq!(
        count(
            &mut s,
            "UNWIND range(1, 2000000) AS i WITH DISTINCT i RETURN count(i)"
        ),
        2000000
    );
    // The direct path (lone nodes after UNWIND) flushes row groups under pressure.
    run(
        &mut s,
        "UNWIND range(1, 300000) AS i CREATE (:B {i: i, s: 'a string of some thirty bytes'})",
    )
    .unwrap();
    assert_eq!(count(&mut s, "MATCH (b:B) RETURN count(b)"), 300000);
    assert_eq!(
        count(&mut s, "MATCH (b:B) RETURN sum(b.i)"),
        300000 * 300001 / 2
    );
}

/// A seek that finds many nodes sends them on in batches of at most 1,024 rows and
/// accounts what it holds; CREATE INDEX accounts what it collects and sorts, so an
/// index that does not fit the database's limit is a clear error (issue "Hardening").
#[test]
fn seeks_stream_and_index_builds_take_grants() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let opts = quiver_engine::StoreOptions {
        memory_limit: 64 << 20,
        ..Default::default()
    };
    let mut s = Session::open_opts(&db, opts, true).unwrap();
    run(
        &mut s,
        "UNWIND range(1, 5000) AS i CREATE (:A {k: i % 2, s: 'key-' + toString(i % 3)})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    run(&mut s, "CREATE INDEX ON :A(k)").unwrap();
    run(&mut s, "CREATE INDEX ON :A(s)").unwrap();
    let mut sizes = Vec::new();
    s.run(
        "MATCH (a:A {k: 0}) RETURN a.s AS s",
        &BTreeMap::new(),
        &mut |_, b| {
            sizes.push(b.len);
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(sizes.iter().sum::<usize>(), 2500);
    assert!(sizes.iter().all(|&n| n <= 1024), "{sizes:?}");
    let plan = run(&mut s, "EXPLAIN MATCH (a:A {k: 0}) RETURN a")
        .unwrap()
        .plan
        .unwrap();
    assert!(format!("{plan:?}").contains("Seek"), "{plan:?}");
    // Under a query limit smaller than the seek's candidates: the operator is named.
    s.opts.memory_limit = 8 << 10;
    let e = run(&mut s, "MATCH (a:A {k: 1}) RETURN a")
        .unwrap_err()
        .to_string();
    assert!(e.contains("Seek"), "{e}");
    drop(s);

    // CREATE INDEX past the database's limit: 200,000 string keys of 100 bytes.
    let db2 = d.path().join("h.qdb");
    let opts = quiver_engine::StoreOptions {
        memory_limit: 16 << 20,
        ..Default::default()
    };
    let mut s = Session::open_opts(&db2, opts, true).unwrap();
    for part in 0..10 {
        run(
            &mut s,
            &format!(
                "UNWIND range(1, 20000) AS i CREATE (:B {{s: '{}' + toString(i + {part} * 20000)}})",
                "x".repeat(100)
            ),
        )
        .unwrap();
        run(&mut s, "CHECKPOINT").unwrap();
    }
    let e = run(&mut s, "CREATE INDEX ON :B(s)")
        .unwrap_err()
        .to_string();
    assert!(e.contains("CREATE INDEX") && e.contains("memory"), "{e}");
    // The database is as it was, and a smaller index still builds.
    assert_eq!(count(&mut s, "MATCH (b:B) RETURN count(b)"), 200_000);
    run(&mut s, "CREATE INDEX ON :A(k)").unwrap();
}

/// Neo4j 5.26's dynamic labels in SET and REMOVE (`n:$(expr)`, what LangChain's
/// graph import writes): a string or a list of strings per row, beside named labels;
/// anything else is a type error; they last through a checkpoint and a reopen.
#[test]
fn dynamic_labels_in_set_and_remove() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    run(
        &mut s,
        "CREATE (:P {t: 'Person', ls: ['A', 'B']}), (:P {t: 'Org', ls: []})",
    )
    .unwrap();
    let sum = run(&mut s, "MATCH (n:P) SET n:$(n.t):X:$(n.ls)").unwrap();
    assert_eq!(sum.counters.labels_added, 6);
    let labels = |s: &mut Session| {
        rows(s, "MATCH (n:P) RETURN labels(n) ORDER BY n.t")
            .into_iter()
            .map(|r| format!("{:?}", r[0]))
            .collect::<Vec<_>>()
    };
    let both = labels(&mut s);
    assert!(both[0].contains("Org") && both[0].contains("X"), "{both:?}");
    assert!(
        both[1].contains("Person") && both[1].contains("\"B\""),
        "{both:?}"
    );
    assert_eq!(count(&mut s, "MATCH (n:Person:A:B:X) RETURN count(n)"), 1);
    // From a parameter, and removed again.
    let mut params = std::collections::BTreeMap::new();
    params.insert("ls".to_string(), Value::list(vec![Value::str("X")]));
    s.run(
        "MATCH (n:P) REMOVE n:$($ls):$(n.t)",
        &params,
        &mut |_, _| Ok(()),
    )
    .unwrap();
    assert_eq!(count(&mut s, "MATCH (n:X) RETURN count(n)"), 0);
    assert_eq!(count(&mut s, "MATCH (n:Person) RETURN count(n)"), 0);
    assert_eq!(count(&mut s, "MATCH (n:A:B) RETURN count(n)"), 1);
    // Not a string: a type error, nothing changed.
    let e = run(&mut s, "MATCH (n:P) SET n:$(1)").unwrap_err();
    assert!(e.to_string().contains("string or a list of strings"), "{e}");
    let e = run(&mut s, "MATCH (n:P) SET n:$('')").unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    run(&mut s, "CHECKPOINT").unwrap();
    drop(s);
    let mut s = open(&db);
    assert_eq!(count(&mut s, "MATCH (n:A:B:P) RETURN count(n)"), 1);
}

/// Neo4j 5.26's dynamic labels and types in patterns: `(n:$(e))` and `-[r:$(e)]->` in
/// MATCH (a filter), CREATE and MERGE (a MERGE row finds what an earlier row made, of a
/// type the statement created), on segments and with a delta; refused in a pattern
/// expression, on a variable-length relationship, and as two types to create.
#[test]
fn dynamic_labels_and_types_in_patterns() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    run(
        &mut s,
        "UNWIND [['A', 'B'], 'C', ['A']] AS l CREATE (:N:$(l) {l: l})",
    )
    .unwrap();
    for checkpoint in [false, true] {
        if checkpoint {
            run(&mut s, "CHECKPOINT").unwrap();
        }
        assert_eq!(count(&mut s, "MATCH (n:$('A')) RETURN count(n)"), 2);
        assert_eq!(
            count(&mut s, "MATCH (n:N:$(['A', 'B'])) RETURN count(n)"),
            1
        );
        assert_eq!(count(&mut s, "MATCH (n:$('Z')) RETURN count(n)"), 0);
        assert_eq!(
            count(
                &mut s,
                "UNWIND ['A', 'C'] AS l MATCH (n:$(l)) RETURN count(n)"
            ),
            3
        );
    }
    // MERGE of nodes: a row finds what an earlier row created.
    let sum = run(
        &mut s,
        "UNWIND ['P', 'P', 'Q', 'P'] AS l MERGE (n:$(l) {id: 1}) ON CREATE SET n.made = true ON MATCH SET n.seen = true",
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, 2);
    assert_eq!(count(&mut s, "MATCH (n:P {seen: true}) RETURN count(n)"), 1);
    // MERGE of relationships of types the statement creates, then CREATE of one more.
    let sum = run(
        &mut s,
        "MATCH (a:P), (b:Q) UNWIND ['T', 'T', 'U', 'T', 'U'] AS t MERGE (a)-[r:$(t)]->(b) ON MATCH SET r.again = true",
    )
    .unwrap();
    assert_eq!(sum.counters.relationships_created, 2);
    run(
        &mut s,
        "MATCH (a:P), (b:Q) WITH a, b, 'V' AS t CREATE (a)-[:$(t) {w: 1}]->(b)",
    )
    .unwrap();
    for checkpoint in [false, true] {
        if checkpoint {
            run(&mut s, "CHECKPOINT").unwrap();
            drop(s);
            s = open(&db);
        }
        let r = rows(
            &mut s,
            "MATCH ()-[r]->() RETURN type(r), r.again, r.w ORDER BY type(r)",
        );
        assert_eq!(
            format!("{r:?}"),
            format!(
                "{:?}",
                vec![
                    vec![Value::str("T"), Value::Bool(true), Value::Null],
                    vec![Value::str("U"), Value::Bool(true), Value::Null],
                    vec![Value::str("V"), Value::Null, Value::Int(1)],
                ]
            )
        );
        assert_eq!(
            count(&mut s, "MATCH ()-[r:T|$(['V'])]->() RETURN count(r)"),
            2
        );
        assert_eq!(count(&mut s, "MATCH ()-[r:$('U')]-() RETURN count(r)"), 2);
    }
    for (q, want) in [
        (
            "MATCH (n) WHERE (n)-[:$('T')]->() RETURN n",
            "pattern expression",
        ),
        ("MATCH (n)-[:$('T')*1..2]->() RETURN n", "variable-length"),
        (
            "MATCH (a:P), (b:Q) CREATE (a)-[:$(['T', 'U'])]->(b)",
            "exactly one type",
        ),
        ("CREATE (:$(1))", "string or a list of strings"),
        ("CREATE (:$(''))", "empty"),
    ] {
        let e = run(&mut s, q).unwrap_err().to_string();
        assert!(e.contains(want), "{q}: {e}");
    }
}

/// The APOC procedures LangChain's graph import and neo4j-graphrag's writer call, with
/// their queries as those libraries send them.
#[test]
fn apoc_merge_and_create_as_the_libraries_call_them() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(&d.path().join("g.qdb"));
    let mut params = BTreeMap::new();
    let row = |pairs: &[(&str, Value)]| {
        Value::Map(std::sync::Arc::new(
            pairs
                .iter()
                .map(|(k, v)| (std::sync::Arc::from(*k), v.clone()))
                .collect(),
        ))
    };
    let props = |k: &str, v: Value| row(&[(k, v)]);
    params.insert(
        "data".to_string(),
        Value::list(vec![
            row(&[
                ("id", Value::str("ann")),
                ("type", Value::str("Person")),
                ("properties", props("age", Value::Int(30))),
            ]),
            row(&[
                ("id", Value::str("acme")),
                ("type", Value::str("Company")),
                ("properties", props("size", Value::Int(9))),
            ]),
            row(&[
                ("id", Value::str("ann")),
                ("type", Value::str("Person")),
                ("properties", props("age", Value::Int(99))),
            ]),
        ]),
    );
    // LangChain 0.11's node import without a base label.
    s.run(
        "UNWIND $data AS row CALL apoc.merge.node([row.type], {id: row.id}, row.properties, {}) YIELD node RETURN distinct 'done' AS result",
        &params,
        &mut |_, _| Ok(()),
    )
    .unwrap();
    assert_eq!(
        count(&mut s, "MATCH (n:Person {id: 'ann'}) RETURN n.age"),
        30
    );
    assert_eq!(count(&mut s, "MATCH (n:Company) RETURN n.size"), 9);
    params.insert(
        "data".to_string(),
        Value::list(vec![row(&[
            ("source", Value::str("ann")),
            ("source_label", Value::str("Person")),
            ("target", Value::str("acme")),
            ("target_label", Value::str("Company")),
            ("type", Value::str("WORKS_AT")),
            ("properties", props("since", Value::Int(2020))),
        ])]),
    );
    // Its relationship import, twice: one relationship.
    for _ in 0..2 {
        s.run(
            "UNWIND $data AS row CALL apoc.merge.node([row.source_label], {id: row.source},{}, {}) YIELD node as source CALL apoc.merge.node([row.target_label], {id: row.target},{}, {}) YIELD node as target CALL apoc.merge.relationship(source, row.type, {}, row.properties, target) YIELD rel RETURN distinct 'done'",
            &params,
            &mut |_, _| Ok(()),
        )
        .unwrap();
    }
    assert_eq!(
        count(&mut s, "MATCH (:Person {id: 'ann'})-[r:WORKS_AT]->(:Company {id: 'acme'}) RETURN sum(r.since) + count(r) * 0"),
        2020
    );
    assert_eq!(count(&mut s, "MATCH (n) RETURN count(n)"), 2);
    // neo4j-graphrag's writer: CREATE, then apoc.create.addLabels; its relationship
    // merge sets the properties on create and on match.
    run(
        &mut s,
        "UNWIND [{id: 1, labels: ['Entity', 'Drug']}] AS row CREATE (n:__KGBuilder__ {__tmp_internal_id: row.id}) WITH n, row CALL apoc.create.addLabels(n, row.labels) YIELD node WITH node as n, row RETURN elementId(n) AS element_id",
    )
    .unwrap();
    assert_eq!(
        count(
            &mut s,
            "MATCH (n:__KGBuilder__:Entity:Drug) RETURN count(n)"
        ),
        1
    );
    run(
        &mut s,
        "MATCH (start:__KGBuilder__), (end:Company) WITH start, end CALL apoc.merge.relationship(start, 'MAKES', {}, {n: 1}, end, {n: 2}) YIELD rel RETURN elementId(rel)",
    )
    .unwrap();
    run(
        &mut s,
        "MATCH (start:__KGBuilder__), (end:Company) WITH start, end CALL apoc.merge.relationship(start, 'MAKES', {}, {n: 1}, end, {n: 2}) YIELD rel RETURN elementId(rel)",
    )
    .unwrap();
    assert_eq!(
        count(
            &mut s,
            "MATCH ()-[r:MAKES]->() RETURN sum(r.n) * 10 + count(r)"
        ),
        21
    );
    // apoc.create.node / relationship, a WHERE after YIELD, and the errors.
    let r = ints(
        &mut s,
        "UNWIND [1, 2, 3] AS i CALL apoc.create.node(['Made'], {i: i}) YIELD node WHERE node.i > 1 RETURN node.i",
    );
    assert_eq!(r, vec![2, 3]);
    run(
        &mut s,
        "MATCH (a:Made {i: 1}), (b:Made {i: 2}) CALL apoc.create.relationship(a, 'NEXT', {w: 5}, b) YIELD rel RETURN rel",
    )
    .unwrap();
    assert_eq!(
        count(
            &mut s,
            "MATCH (:Made {i: 1})-[r:NEXT]->(:Made {i: 2}) RETURN r.w"
        ),
        5
    );
    for (q, want) in [
        ("CALL apoc.merge.node(['X'], $m) YIELD node RETURN node", "map literal"),
        ("CALL apoc.merge.node(['X']) YIELD node RETURN node", "2 to 4 argument"),
        ("CALL apoc.merge.node(['X'], {id: 1}) YIELD rel RETURN rel", "yields one column"),
        (
            "CREATE (a), (b) WITH a, b CALL apoc.merge.relationship(a, 'T', {}, {}, b {x: 1}) YIELD rel RETURN rel",
            "",
        ),
    ] {
        let e = run(&mut s, q).unwrap_err().to_string();
        assert!(e.contains(want), "{q}: {e}");
    }
}

/// An element id names its entity for the entity's life: `WHERE elementId(x) = $id`
/// finds the same node or relationship (of a type with properties and of one without)
/// after checkpoints that fold creations and deletions into segments, and a reopen.
#[test]
fn element_ids_last_through_checkpoints_and_restarts() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    run(&mut s, "UNWIND range(0, 29) AS i CREATE (:N {i: i})").unwrap();
    run(
        &mut s,
        "MATCH (a:N), (b:N) WHERE b.i = (a.i * 7 + 3) % 30 CREATE (a)-[:W {i: a.i}]->(b), (a)-[:P]->(b)",
    )
    .unwrap();
    // (kind, i) -> element id, read once.
    let ids = |s: &mut Session| -> BTreeMap<(String, i64), String> {
        let mut m = BTreeMap::new();
        for r in rows(s, "MATCH (n:N) RETURN n.i, elementId(n)") {
            if let (Value::Int(i), Value::Str(e)) = (&r[0], &r[1]) {
                m.insert(("node".to_string(), *i), e.to_string());
            }
        }
        for r in rows(s, "MATCH (a:N)-[r]->() RETURN type(r), a.i, elementId(r)") {
            if let (Value::Str(t), Value::Int(i), Value::Str(e)) = (&r[0], &r[1], &r[2]) {
                m.insert((t.to_string(), *i), e.to_string());
            }
        }
        m
    };
    let find = |s: &mut Session, kind: &str, id: &str| -> Vec<Vec<Value>> {
        let mut params = BTreeMap::new();
        params.insert("id".to_string(), Value::str(id));
        let q = if kind == "node" {
            "MATCH (n) WHERE elementId(n) = $id RETURN n.i"
        } else {
            "MATCH (a)-[r]->() WHERE elementId(r) = $id RETURN a.i"
        };
        let mut out = Vec::new();
        s.run(q, &params, &mut |_, b| {
            for i in 0..b.len {
                out.push(b.row(i));
            }
            Ok(())
        })
        .unwrap();
        out
    };
    let before = ids(&mut s);
    assert_eq!(before.len(), 90);
    let check = |s: &mut Session, live: &BTreeMap<(String, i64), String>, when: &str| {
        for ((kind, i), e) in live {
            assert_eq!(
                find(s, kind, e),
                vec![vec![Value::Int(*i)]],
                "{when}: {kind} {i} by element id {e}"
            );
        }
    };
    check(&mut s, &before, "in the delta");
    run(&mut s, "CHECKPOINT").unwrap();
    check(&mut s, &before, "after a checkpoint");
    // Deletions and creations folded by a second checkpoint, then a reopen.
    run(&mut s, "MATCH (n:N) WHERE n.i % 5 = 0 DETACH DELETE n").unwrap();
    run(
        &mut s,
        "MATCH (a:N {i: 1}), (b:N {i: 2}) CREATE (a)-[:W {i: 100}]->(b), (:N {i: 100})",
    )
    .unwrap();
    let live: BTreeMap<(String, i64), String> = before
        .iter()
        .filter(|((_, i), _)| i % 5 != 0)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // The relationships into a deleted node went with it.
    let live: BTreeMap<_, _> = live
        .into_iter()
        .filter(|((kind, i), _)| kind == "node" || ((i * 7 + 3) % 30) % 5 != 0)
        .collect();
    check(&mut s, &live, "after deletes, in the delta");
    run(&mut s, "CHECKPOINT").unwrap();
    check(&mut s, &live, "after deletes were folded");
    drop(s);
    let mut s = open(&db);
    check(&mut s, &live, "after a reopen");
}

/// Vector indexes in Neo4j's syntax: `CREATE VECTOR INDEX` (name and options from
/// parameters), SHOW INDEXES with their options, `db.index.vector.queryNodes` against
/// a brute-force ranking (cosine and euclidean), following writes, a checkpoint and a
/// reopen; DROP INDEX by name; the errors.
#[test]
fn vector_indexes_search_and_follow_writes() {
    use rand::{Rng, SeedableRng};
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    let mut r = rand_pcg::Pcg64::seed_from_u64(9);
    let dims = 8;
    let vecs: Vec<Vec<f64>> = (0..200)
        .map(|_| (0..dims).map(|_| r.random_range(-1.0..1.0)).collect())
        .collect();
    let lit = |v: &[f64]| {
        format!(
            "[{}]",
            v.iter()
                .map(|x| format!("{x:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    run(
        &mut s,
        &format!(
            "UNWIND range(0, {}) AS i WITH i, [{}][i] AS v CREATE (:Doc {{i: i, emb: v}})",
            vecs.len() - 1,
            vecs.iter().map(|v| lit(v)).collect::<Vec<_>>().join(", ")
        ),
    )
    .unwrap();
    let mut params = BTreeMap::new();
    params.insert("name".to_string(), Value::str("docs"));
    params.insert("dims".to_string(), Value::Int(dims as i64));
    s.run(
        "CREATE VECTOR INDEX $name IF NOT EXISTS FOR (n:Doc) ON n.emb OPTIONS { indexConfig: { `vector.dimensions`: toInteger($dims), `vector.similarity_function`: 'cosine' } }",
        &params,
        &mut |_, _| Ok(()),
    )
    .unwrap();
    let shown = rows(
        &mut s,
        "SHOW INDEXES YIELD name, type, labelsOrTypes, properties, options WHERE type = 'VECTOR' RETURN name, options.indexConfig.`vector.dimensions`",
    );
    assert_eq!(
        format!("{shown:?}"),
        format!("{:?}", vec![vec![Value::str("docs"), Value::Int(8)]])
    );
    let cos = |a: &[f64], b: &[f64]| {
        let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let n = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        (1.0 + dot / (n(a) * n(b))) / 2.0
    };
    let top = |s: &mut Session, q: &[f64], k: usize| -> Vec<i64> {
        ints(
            s,
            &format!(
                "CALL db.index.vector.queryNodes('docs', {k}, {}) YIELD node, score RETURN node.i",
                lit(q)
            ),
        )
    };
    let brute = |vecs: &[(i64, Vec<f64>)], q: &[f64], k: usize| -> Vec<i64> {
        let mut v: Vec<(f64, i64)> = vecs.iter().map(|(i, x)| (cos(x, q), *i)).collect();
        v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        v.into_iter().take(k).map(|x| x.1).collect()
    };
    let mut live: Vec<(i64, Vec<f64>)> = vecs
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, v)| (i as i64, v))
        .collect();
    let queries: Vec<Vec<f64>> = (0..10)
        .map(|_| (0..dims).map(|_| r.random_range(-1.0..1.0)).collect())
        .collect();
    for q in &queries {
        assert_eq!(top(&mut s, q, 10), brute(&live, q, 10));
    }
    // Writes: deleted nodes leave, new and changed vectors count, a wrong-sized vector
    // is no candidate.
    run(&mut s, "MATCH (n:Doc) WHERE n.i % 10 = 0 DELETE n").unwrap();
    live.retain(|(i, _)| i % 10 != 0);
    let fresh: Vec<f64> = queries[0].clone();
    run(
        &mut s,
        &format!(
            "CREATE (:Doc {{i: 1000, emb: {}}}), (:Doc {{i: 1001, emb: [1.0, 2.0]}})",
            lit(&fresh)
        ),
    )
    .unwrap();
    live.push((1000, fresh.clone()));
    run(
        &mut s,
        &format!("MATCH (n:Doc {{i: 1}}) SET n.emb = {}", lit(&queries[1])),
    )
    .unwrap();
    live.iter_mut().find(|(i, _)| *i == 1).unwrap().1 = queries[1].clone();
    for round in 0..3 {
        if round == 1 {
            run(&mut s, "CHECKPOINT").unwrap();
        }
        if round == 2 {
            drop(s);
            s = open(&db);
        }
        for q in &queries {
            assert_eq!(top(&mut s, q, 5), brute(&live, q, 5), "round {round}");
        }
        assert_eq!(top(&mut s, &queries[0], 1), vec![1000]);
    }
    // Euclidean scores, Neo4j's: 1 / (1 + squared distance).
    run(&mut s, "DROP INDEX docs").unwrap();
    run(
        &mut s,
        "CREATE VECTOR INDEX e FOR (n:Doc) ON (n.emb) OPTIONS {indexConfig: {`vector.dimensions`: 8, `vector.similarity_function`: 'EUCLIDEAN'}}",
    )
    .unwrap();
    let r = rows(
        &mut s,
        &format!(
            "CALL db.index.vector.queryNodes('e', 1, {}) YIELD node, score RETURN node.i, score",
            lit(&fresh)
        ),
    );
    assert_eq!(
        format!("{r:?}"),
        format!("{:?}", vec![vec![Value::Int(1000), Value::Float(1.0)]])
    );
    for (q, want) in [
        ("CALL db.index.vector.queryNodes('nope', 1, [1.0]) YIELD node RETURN node", "no vector index named nope"),
        ("CALL db.index.vector.queryNodes('e', 1, [1.0]) YIELD node RETURN node", "list of 8 numbers"),
        ("CALL db.index.vector.queryNodes('e', 0, [1,2,3,4,5,6,7,8]) YIELD node RETURN node", "positive integer"),
        ("CREATE VECTOR INDEX x FOR (n:Doc) ON n.emb OPTIONS {indexConfig: {`vector.dimensions`: 'eight'}}", "integer from 1 to 4096"),
        ("CREATE VECTOR INDEX x FOR (n:Doc) ON n.emb OPTIONS {indexConfig: {`vector.dimensions`: 8, `vector.similarity_function`: 'dot'}}", "'cosine' or 'euclidean'"),
        ("CREATE VECTOR INDEX e FOR (n:Doc) ON n.emb OPTIONS {indexConfig: {`vector.dimensions`: 8}}", "exists already"),
        ("DROP INDEX nope", "there is no index named nope"),
    ] {
        let e = run(&mut s, q).unwrap_err().to_string();
        assert!(e.contains(want), "{q}: {e}");
    }
    run(&mut s, "DROP INDEX nope IF EXISTS").unwrap();
}

/// `apoc.meta.data()` as LangChain's and neo4j-graphrag's schema readers query it: node
/// properties with their types, relationship properties, and which labels each
/// relationship type joins; the same over segments and over the delta.
#[test]
fn apoc_meta_data_answers_the_schema_readers() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(&d.path().join("g.qdb"));
    run(
        &mut s,
        "CREATE (a:Person {name: 'a', age: 3, tags: ['x']})-[:KNOWS {since: 2020}]->(:Person {name: 'b'})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    // After the checkpoint, in the delta: a new label and a new type.
    run(
        &mut s,
        "MATCH (a:Person {name: 'a'}) CREATE (a)-[:WORKS_AT]->(:Org {name: 'o', founded: date('2001-02-03')})",
    )
    .unwrap();
    let text = |q: &str, s: &mut Session| -> Vec<String> {
        let mut v: Vec<String> = rows(s, q).iter().map(|r| format!("{:?}", r[0])).collect();
        v.sort();
        v
    };
    let nodes = text(
        "CALL apoc.meta.data() YIELD label, other, elementType, type, property \
         WHERE NOT type = 'RELATIONSHIP' AND elementType = 'node' \
         RETURN label + '.' + property + ':' + type",
        &mut s,
    );
    let want = |v: &[&str]| {
        v.iter()
            .map(|x| format!("{:?}", Value::str(x)))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        nodes,
        want(&[
            "Org.founded:DATE",
            "Org.name:STRING",
            "Person.age:INTEGER",
            "Person.name:STRING",
            "Person.tags:LIST"
        ])
    );
    let rels = text(
        "CALL apoc.meta.data() YIELD label, elementType, type, property \
         WHERE NOT type = 'RELATIONSHIP' AND elementType = 'relationship' \
         RETURN label + '.' + property + ':' + type",
        &mut s,
    );
    assert_eq!(rels, want(&["KNOWS.since:INTEGER"]));
    let ends = text(
        "CALL apoc.meta.data() YIELD label, other, elementType, type, property \
         WHERE type = 'RELATIONSHIP' AND elementType = 'node' \
         UNWIND other AS other_node RETURN label + '-' + property + '->' + toString(other_node)",
        &mut s,
    );
    assert_eq!(
        ends,
        want(&["Person-KNOWS->Person", "Person-WORKS_AT->Org"])
    );
}

/// The APOC calls LlamaIndex's property graph store makes: `apoc.map.clean`,
/// `apoc.meta.subGraph`, `apoc.schema.nodes`, `apoc.schema.properties.distinct`.
#[test]
fn apoc_schema_calls_as_llamaindex_makes_them() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    assert_eq!(
        rows(
            &mut s,
            "RETURN apoc.map.clean({a: 1, b: null, c: 'x', d: 2}, ['a'], ['x']) AS m"
        ),
        rows(&mut s, "RETURN {d: 2} AS m")
    );
    run(
        &mut s,
        "CREATE (:P {name: 'a', k: 1})-[:R]->(:P {name: 'b', k: 1}), (:P {name: 'c', k: 2}), (:Q)",
    )
    .unwrap();
    run(&mut s, "CREATE INDEX FOR (n:P) ON (n.k)").unwrap();
    let sub = rows(
        &mut s,
        "CALL apoc.meta.subGraph({}) YIELD nodes, relationships RETURN [n IN nodes | [apoc.any.property(n, 'name'), apoc.any.property(n, 'count')]] AS n, [r IN relationships | apoc.any.property(r, 'count')] AS r",
    );
    assert_eq!(
        format!("{:?}", sub[0][1]),
        format!("{:?}", Value::list(vec![Value::Int(1)]))
    );
    assert!(format!("{:?}", sub[0][0]).contains("\"P\""), "{sub:?}");
    let ix = rows(
        &mut s,
        "CALL apoc.schema.nodes() YIELD label, properties, type, size, valuesSelectivity WHERE type = 'RANGE' AND properties = ['k'] RETURN size, size * valuesSelectivity AS distinctValues",
    );
    assert_eq!(
        format!("{ix:?}"),
        format!("{:?}", vec![vec![Value::Int(3), Value::Float(2.0)]])
    );
    let mut distinct = ints(
        &mut s,
        "CALL apoc.schema.properties.distinct('P', 'k') YIELD value UNWIND value AS v RETURN v",
    );
    distinct.sort();
    assert_eq!(distinct, vec![1, 2]);
    // apoc.meta.schema: APOC's map, whole counts.
    let m = rows(
        &mut s,
        "CALL apoc.meta.schema() YIELD value RETURN value.P.type, value.P.count, value.P.properties.k.type, value.P.relationships.R.direction, value.R.type, value.R.count",
    );
    assert_eq!(
        format!("{m:?}"),
        format!(
            "{:?}",
            vec![vec![
                Value::str("node"),
                Value::Int(3),
                Value::str("INTEGER"),
                Value::str("out"),
                Value::str("relationship"),
                Value::Int(1)
            ]]
        )
    );
    // apoc.create.setLabels: exactly the labels given.
    let l = rows(
        &mut s,
        "MATCH (n:P {name: 'c'}) CALL apoc.create.setLabels(n, ['X', 'Y']) YIELD node RETURN labels(node) AS l",
    );
    assert_eq!(
        format!("{l:?}"),
        format!(
            "{:?}",
            vec![vec![Value::list(vec![Value::str("X"), Value::str("Y")])]]
        )
    );
}

/// `apoc.periodic.iterate`, the batched update of import scripts, read as `CALL (*) {
/// action } IN TRANSACTIONS OF batchSize ROWS` over the iterate statement's rows, with
/// APOC's counts as its one row.
#[test]
fn apoc_periodic_iterate_commits_in_batches() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(&mut s, "UNWIND range(1, 2500) AS i CREATE (:P {i: i})").unwrap();
    let r = rows(
        &mut s,
        "CALL apoc.periodic.iterate('MATCH (p:P) RETURN p', 'SET p.done = true, p.twice = p.i * 2', {batchSize: 1000, parallel: true}) YIELD batches, total RETURN batches, total",
    );
    assert_eq!(
        format!("{r:?}"),
        format!("{:?}", vec![vec![Value::Int(3), Value::Int(2500)]])
    );
    assert_eq!(
        ints(&mut s, "MATCH (p:P) WHERE p.done RETURN count(*)"),
        vec![2500]
    );
    assert_eq!(
        ints(&mut s, "MATCH (p:P) RETURN sum(p.twice)"),
        vec![2500 * 2501]
    );
    // Standalone, no YIELD: one row of every column; the iterate statement's columns
    // are the action's variables.
    let r = rows(
        &mut s,
        "CALL apoc.periodic.iterate('MATCH (p:P) WHERE p.i <= 10 RETURN p.i AS i', 'CREATE (:Q {i: i})', {batchSize: 3})",
    );
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].len(), 13);
    assert_eq!(ints(&mut s, "MATCH (q:Q) RETURN sum(q.i)"), vec![55]);
    for (q, want) in [
        (
            "CALL apoc.periodic.iterate($it, 'SET p.x = 1', {})",
            "string literal",
        ),
        (
            "CALL apoc.periodic.iterate('MATCH (p:P) RETURN p', 'SET p.x = $v', {params: {v: 1}})",
            "params",
        ),
        (
            "CALL apoc.periodic.iterate('MATCH (p:P) SET p.y = 1', 'SET p.x = 1', {})",
            "must end with RETURN",
        ),
        (
            "CALL apoc.periodic.iterate('MATCH (p:P RETURN p', 'SET p.x = 1', {})",
            "the iterate statement",
        ),
    ] {
        let e = run(&mut s, q).unwrap_err().to_string();
        assert!(e.contains(want), "{q}: {e}");
    }
}

/// Setting a property to the value it has is counted (as Neo4j does) and writes no log
/// record; a value of another type is a change; and a value another transaction
/// changed since the snapshot is still a conflict, not a no-op.
#[test]
fn setting_the_value_a_property_has_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    run(
        &mut s,
        "CREATE (:P {id: 1, v: -1})-[:R {w: 2}]->(:P {id: 2})",
    )
    .unwrap();
    let log = s.store().log_bytes();
    let sum = run(&mut s, "MATCH (p:P {id: 1}) SET p.v = -1").unwrap();
    assert_eq!(sum.counters.properties_set, 1);
    let sum = run(&mut s, "MATCH (:P)-[r:R]->() SET r.w = 2").unwrap();
    assert_eq!(sum.counters.properties_set, 1);
    assert_eq!(s.store().log_bytes(), log, "an unchanged value was logged");
    // -1.0 is not -1: a float replaces the integer.
    run(&mut s, "MATCH (p:P {id: 1}) SET p.v = -1.0").unwrap();
    assert!(s.store().log_bytes() > log);
    let r = rows(&mut s, "MATCH (p:P {id: 1}) RETURN p.v");
    assert_eq!(r[0][0], Value::Float(-1.0));
    // Changed and changed back in one transaction: the second set compares with the
    // transaction's own first one.
    run(&mut s, "BEGIN").unwrap();
    run(&mut s, "MATCH (p:P {id: 2}) SET p.v = 5").unwrap();
    run(&mut s, "MATCH (p:P {id: 2}) SET p.v = 7").unwrap();
    run(&mut s, "MATCH (p:P {id: 2}) SET p.v = 5").unwrap();
    run(&mut s, "COMMIT").unwrap();
    assert_eq!(count(&mut s, "MATCH (p:P {id: 2}) RETURN p.v"), 5);
    // b's snapshot has v = 5; a commits 6; b's "unchanged" 5 is a conflict.
    let mut b = Session::on(s.store().clone());
    run(&mut b, "BEGIN").unwrap();
    assert_eq!(count(&mut b, "MATCH (p:P {id: 2}) RETURN p.v"), 5);
    run(&mut s, "MATCH (p:P {id: 2}) SET p.v = 6").unwrap();
    let e = run(&mut b, "MATCH (p:P {id: 2}) SET p.v = 5").unwrap_err();
    assert!(e.is_retryable(), "{e}");
    run(&mut b, "MATCH (p:P {id: 2}) SET p.v = 5").unwrap();
    assert_eq!(count(&mut s, "MATCH (p:P {id: 2}) RETURN p.v"), 5);
    drop(b);
    drop(s);
    let mut s = open(&db);
    assert_eq!(count(&mut s, "MATCH (p:P {id: 2}) RETURN p.v"), 5);
    assert_eq!(count(&mut s, "MATCH ()-[r:R]->() RETURN r.w"), 2);
}

/// How [`block_on_sync`] has a sync begun when none running covers its commit.
#[derive(Clone, Copy)]
enum Begin {
    /// Leads it itself.
    Here,
    /// Hands it to a new thread.
    Thread,
    /// Drops the hand-off unrun (it runs then, on this thread).
    Dropped,
}

/// Waits for `u`'s sync as a server's connection does: polled, parked while another
/// committer leads the sync, woken when it ends.
fn block_on_sync(u: quiver_engine::Unsynced) -> u64 {
    block_on_sync_by(u, Begin::Here)
}

fn block_on_sync_by(mut u: quiver_engine::Unsynced, begin: Begin) -> u64 {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut hand = |h: quiver_engine::SyncHandoff| match begin {
        Begin::Thread => drop(std::thread::spawn(move || h.run())),
        _ => drop(h),
    };
    loop {
        let lead = match begin {
            Begin::Here => quiver_engine::Lead::Here,
            _ => quiver_engine::Lead::Elsewhere(&mut hand),
        };
        match u.poll_synced(&mut cx, lead) {
            std::task::Poll::Ready(r) => return r.unwrap(),
            // (Not woken within a minute: a lost wake-up, which would hang a client.)
            std::task::Poll::Pending => {
                let t = std::time::Instant::now();
                std::thread::park_timeout(std::time::Duration::from_secs(60));
                assert!(
                    t.elapsed() < std::time::Duration::from_secs(60),
                    "never woken"
                );
            }
        }
    }
}

/// Commits left unsynced (`Session::defer_sync`, as the server's inline writes): none is
/// visible before its sync, one sync publishes every commit written before it, a
/// dropped one is synced anyway, and under contention every waiter is woken, sees its
/// commit on return, and finds it after a reopen, whether the waiters lead syncs
/// themselves or hand them to other threads (or drop the hand-off unrun).
#[test]
fn unsynced_commits_publish_on_their_sync() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    run(&mut s, "CREATE (:Root {id: 0})").unwrap();
    let store = s.store().clone();
    let mut a = Session::on(store.clone());
    a.defer_sync = true;
    run(&mut a, "CREATE (:U {id: 1})").unwrap();
    let u1 = a.take_unsynced().expect("a write left unsynced");
    let mut b = Session::on(store.clone());
    b.defer_sync = true;
    run(&mut b, "CREATE (:U {id: 2})").unwrap();
    let u2 = b.take_unsynced().expect("a write left unsynced");
    assert!(u2.ts() > u1.ts());
    assert_eq!(count(&mut s, "MATCH (u:U) RETURN count(u)"), 0);
    // The later one's sync covers both; the earlier finds itself synced.
    block_on_sync(u2);
    assert_eq!(count(&mut s, "MATCH (u:U) RETURN count(u)"), 2);
    block_on_sync(u1);
    // A read-only statement leaves nothing to sync; a dropped commit is synced.
    run(&mut a, "MATCH (u:U) RETURN count(u)").unwrap();
    assert!(a.take_unsynced().is_none());
    run(&mut a, "CREATE (:U {id: 3})").unwrap();
    drop(a.take_unsynced());
    assert_eq!(count(&mut s, "MATCH (u:U) RETURN count(u)"), 3);
    // One not taken is synced before the session's next statement.
    run(&mut a, "CREATE (:U {id: 4})").unwrap();
    assert_eq!(count(&mut a, "MATCH (u:U) RETURN count(u)"), 4);
    let per = 40;
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut s = Session::on(store);
                for i in 0..per {
                    let q = format!(
                        "MATCH (r:Root {{id: 0}}) CREATE (:N {{id: {}, t: {t}}})-[:TO]->(r)",
                        t * 1000 + i
                    );
                    loop {
                        s.defer_sync = true;
                        let r = run(&mut s, &q);
                        s.defer_sync = false;
                        match r {
                            Ok(_) => break,
                            Err(e) if e.is_retryable() => std::thread::yield_now(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                    let begin = [Begin::Here, Begin::Thread, Begin::Dropped][(t % 3) as usize];
                    block_on_sync_by(s.take_unsynced().expect("unsynced"), begin);
                    let mine = count(&mut s, &format!("MATCH (n:N {{t: {t}}}) RETURN count(n)"));
                    assert_eq!(mine, i + 1, "thread {t} after commit {i}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    drop((a, b, s, store));
    let mut s = open(&db);
    assert_eq!(count(&mut s, "MATCH (n:N) RETURN count(n)"), 6 * per);
    assert_eq!(count(&mut s, "MATCH (u:U) RETURN count(u)"), 4);
}
