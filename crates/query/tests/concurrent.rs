//! Checkpoints and bulk loads beside open transactions: a checkpoint holds writers only
//! while it starts and while it publishes, a bulk load of nodes waits for no one, a
//! transaction open across either commits onto the new generation, and no update and
//! no acknowledged commit is lost.

mod common;

use common::{ints, rows, run};
use quiver_query::Session;
use quiver_storage::OpenMode;
use std::path::Path;

fn open(dir: &Path) -> Session {
    std::fs::create_dir_all(dir.join("import")).unwrap();
    Session::open_with(&dir.join("g.qdb"), OpenMode::Mapped, true).unwrap()
}

fn count(s: &mut Session, q: &str) -> i64 {
    ints(s, q)[0]
}

/// 100 nodes `(:N {id, v: 0})`, checkpointed into segments.
fn seeded(dir: &Path) -> Session {
    let mut s = open(dir);
    run(
        &mut s,
        "UNWIND range(1, 100) AS i CREATE (:N {id: i, v: 0})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    s
}

#[test]
fn a_transaction_open_across_a_checkpoint_commits_onto_the_new_generation() {
    let d = tempfile::tempdir().unwrap();
    let mut a = seeded(d.path());
    // A relationship of the delta, deleted ones before it (ids without an entity).
    for _ in 0..3 {
        run(
            &mut a,
            "MATCH (x:N {id: 5}), (y:N {id: 6}) CREATE (x)-[:R {w: 0}]->(y)",
        )
        .unwrap();
        run(&mut a, "MATCH ()-[r:R]->() DELETE r").unwrap();
    }
    run(
        &mut a,
        "MATCH (x:N {id: 5}), (y:N {id: 6}) CREATE (x)-[:R {w: 1}]->(y)",
    )
    .unwrap();
    let mut b = Session::on(a.store().clone());
    run(&mut b, "BEGIN").unwrap();
    run(&mut b, "MATCH (n:N {id: 1}) SET n.v = 1").unwrap();
    // Another session writes and checkpoints meanwhile: it does not wait for `b`.
    run(&mut a, "MATCH (n:N {id: 2}) SET n.v = 2").unwrap();
    run(&mut a, "CREATE (:N {id: 101, v: 0})").unwrap();
    let ids = "MATCH (n:N {id: 101}), ()-[r:R]->() RETURN id(n), id(r)";
    let before = rows(&mut a, ids);
    run(&mut a, "CHECKPOINT").unwrap();
    // Created entities keep their ids in the segments.
    assert_eq!(rows(&mut a, ids), before);
    // `b` goes on: an entity no one changed since it began, and a relationship the
    // checkpoint wrote into a segment (its id kept).
    run(&mut b, "MATCH (n:N {id: 3}) SET n.v = 3").unwrap();
    run(&mut b, "MATCH ()-[r:R]->() SET r.w = 2").unwrap();
    run(&mut b, "CREATE (:N {id: 102, v: 4})").unwrap();
    run(&mut b, "COMMIT").unwrap();
    let check = |s: &mut Session| {
        assert_eq!(count(s, "MATCH (n:N) RETURN sum(n.v)"), 1 + 2 + 3 + 4);
        assert_eq!(count(s, "MATCH (n:N) RETURN count(n)"), 102);
        assert_eq!(count(s, "MATCH ()-[r:R]->() RETURN r.w"), 2);
    };
    check(&mut a);
    run(&mut a, "CHECKPOINT").unwrap();
    check(&mut a);
    drop((a, b));
    check(&mut open(d.path()));
}

#[test]
fn a_claim_after_a_checkpoint_sees_the_changes_it_folded() {
    let d = tempfile::tempdir().unwrap();
    let mut a = seeded(d.path());
    let mut b = Session::on(a.store().clone());
    run(&mut b, "BEGIN").unwrap();
    assert_eq!(count(&mut b, "MATCH (n:N {id: 1}) RETURN n.v"), 0);
    run(&mut a, "MATCH (n:N {id: 1}) SET n.v = 10").unwrap();
    run(&mut a, "CHECKPOINT").unwrap();
    // The change is in the segments now, without a version in the delta: `b`'s update
    // would overwrite it unseen.
    let e = run(&mut b, "MATCH (n:N {id: 1}) SET n.v = n.v + 1").unwrap_err();
    assert!(
        e.to_string().contains("committed after this one started"),
        "{e}"
    );
    assert_eq!(count(&mut a, "MATCH (n:N {id: 1}) RETURN n.v"), 10);
}

#[test]
fn nodes_created_before_a_checkpoint_commit_after_it() {
    let d = tempfile::tempdir().unwrap();
    let mut a = seeded(d.path());
    let mut b = Session::on(a.store().clone());
    // `b` creates first, `a` after it and commits: the checkpoint's table of created
    // nodes holds `b`'s id as a deleted row; `b`'s commit brings it back, id and all.
    run(&mut b, "BEGIN").unwrap();
    run(&mut b, "CREATE (:M {k: 1})-[:S]->(:M {k: 10})").unwrap();
    let ids = "MATCH (m:M) RETURN m.k, id(m) ORDER BY m.k";
    let seen = rows(&mut b, ids);
    run(&mut a, "CREATE (:M {k: 2})").unwrap();
    run(&mut a, "CHECKPOINT").unwrap();
    run(&mut b, "COMMIT").unwrap();
    let check = |s: &mut Session| {
        assert_eq!(count(s, "MATCH (m:M) RETURN sum(m.k)"), 13);
        assert_eq!(count(s, "MATCH (m:M {k: 1}) RETURN count(m)"), 1);
        assert_eq!(count(s, "MATCH (:M {k: 1})-[:S]->(m:M) RETURN m.k"), 10);
        assert_eq!(count(s, "MATCH (n) RETURN count(n)"), 103);
        let r = rows(s, ids);
        assert_eq!(r.iter().filter(|r| seen.contains(r)).count(), 2, "{r:?}");
    };
    check(&mut a);
    // Through more checkpoints and a reopen, and then changed and deleted.
    run(&mut a, "CHECKPOINT").unwrap();
    check(&mut a);
    drop((a, b));
    let mut a = open(d.path());
    check(&mut a);
    run(&mut a, "MATCH (m:M {k: 1}) SET m.k = 5").unwrap();
    run(&mut a, "CHECKPOINT").unwrap();
    assert_eq!(count(&mut a, "MATCH (m:M) RETURN sum(m.k)"), 17);
    run(&mut a, "MATCH (m:M {k: 5}) DETACH DELETE m").unwrap();
    run(&mut a, "CHECKPOINT").unwrap();
    assert_eq!(count(&mut a, "MATCH (m:M) RETURN sum(m.k)"), 12);
    assert_eq!(count(&mut a, "MATCH (n) RETURN count(n)"), 102);
    drop(a);
    let mut a = open(d.path());
    assert_eq!(count(&mut a, "MATCH (m:M) RETURN sum(m.k)"), 12);
    assert_eq!(count(&mut a, "MATCH (n) RETURN count(n)"), 102);
}

/// `b` creates a relationship, `a` creates one of the same type after it and commits,
/// a checkpoint writes `b`'s id as a hole (a deleted entry): `b`'s commit brings it back
/// by its record, id and all, as a node's does, through later checkpoints, a reopen,
/// a change and a deletion.
#[test]
fn relationships_created_below_a_checkpoint_floor_commit_after_it() {
    let d = tempfile::tempdir().unwrap();
    let mut a = seeded(d.path());
    let mut b = Session::on(a.store().clone());
    run(&mut b, "BEGIN").unwrap();
    let seen = rows(
        &mut b,
        "MATCH (x:N {id: 1}), (y:N {id: 2}) CREATE (x)-[r:R {k: 1}]->(y) RETURN id(r)",
    );
    run(
        &mut a,
        "MATCH (x:N {id: 3}), (y:N {id: 4}) CREATE (x)-[:R {k: 2}]->(y)",
    )
    .unwrap();
    run(&mut a, "CHECKPOINT").unwrap();
    run(&mut b, "COMMIT").unwrap();
    let check = |s: &mut Session, sum: i64| {
        assert_eq!(count(s, "MATCH ()-[r:R]->() RETURN sum(r.k)"), sum);
        assert_eq!(count(s, "MATCH ()-[r:R]->() RETURN count(r)"), 2);
        let r = rows(
            s,
            "MATCH (x:N {id: 1})-[r:R]->(y) RETURN id(r) AS i, y.id AS o UNION ALL MATCH (y:N {id: 2})<-[r:R]-(x) RETURN id(r) AS i, x.id AS o",
        );
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0][0], seen[0][0]);
        assert_eq!(r[1][0], seen[0][0]);
    };
    check(&mut a, 3);
    run(&mut a, "CHECKPOINT").unwrap();
    check(&mut a, 3);
    drop((a, b));
    let mut a = open(d.path());
    check(&mut a, 3);
    run(&mut a, "MATCH (:N {id: 1})-[r:R]->() SET r.k = 5").unwrap();
    run(&mut a, "CHECKPOINT").unwrap();
    check(&mut a, 7);
    drop(a);
    let mut a = open(d.path());
    check(&mut a, 7);
    run(&mut a, "MATCH (:N {id: 1})-[r:R]->() DELETE r").unwrap();
    run(&mut a, "CHECKPOINT").unwrap();
    assert_eq!(count(&mut a, "MATCH ()-[r:R]->() RETURN sum(r.k)"), 2);
    drop(a);
    let mut a = open(d.path());
    assert_eq!(count(&mut a, "MATCH ()-[r:R]->() RETURN sum(r.k)"), 2);
    assert_eq!(
        count(&mut a, "MATCH (:N {id: 1})-[r]-() RETURN count(r)"),
        0
    );
}

/// `n` rows `id,score` in the import directory.
fn rows_file(dir: &Path, name: &str, n: u64) {
    let mut t = String::from("id,score\n");
    for i in 0..n {
        t += &format!("{i},{}\n", i % 10);
    }
    std::fs::write(dir.join("import").join(name), t).unwrap();
}

#[test]
fn bulk_loads_commit_beside_an_open_transaction_and_each_other() {
    let n = quiver_common::limits::BULK_ROWS_MIN + 1000;
    let d = tempfile::tempdir().unwrap();
    let mut a = seeded(d.path());
    rows_file(d.path(), "p.csv", n);
    rows_file(d.path(), "q.csv", n);
    let mut b = Session::on(a.store().clone());
    run(&mut b, "BEGIN").unwrap();
    run(&mut b, "MATCH (n:N {id: 1}) SET n.v = 7").unwrap();
    run(&mut b, "CREATE (:Small {t: 1})").unwrap();
    // Two bulk loads at once, while `b` stays open: both commit (a bulk load that
    // waited for `b` would fail after 30 s, before `b` commits below).
    let store = a.store().clone();
    let loads: Vec<_> = ["P", "Q"]
        .into_iter()
        .map(|label| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut s = Session::on(store);
                let file = format!("{}.csv", label.to_lowercase());
                run(
                    &mut s,
                    &format!("LOAD CSV FROM '{file}' WITH HEADER AS row CREATE (:{label} {{id: toInteger(row.id), score: toInteger(row.score)}})"),
                )
                .map(|s| s.counters.nodes_created)
                .map_err(|e| e.to_string())
            })
        })
        .collect();
    for l in loads {
        assert_eq!(l.join().unwrap().unwrap(), n);
    }
    run(&mut b, "MATCH (n:N {id: 2}) SET n.v = 8").unwrap();
    run(&mut b, "COMMIT").unwrap();
    let check = |s: &mut Session| {
        assert_eq!(count(s, "MATCH (p:P) RETURN count(p)"), n as i64);
        assert_eq!(count(s, "MATCH (q:Q) RETURN count(q)"), n as i64);
        assert_eq!(count(s, "MATCH (q:Q {id: 17}) RETURN q.score"), 7);
        assert_eq!(count(s, "MATCH (n:N) RETURN sum(n.v)"), 15);
        assert_eq!(count(s, "MATCH (n:N) RETURN count(n)"), 100);
        assert_eq!(count(s, "MATCH (n:Small) RETURN sum(n.t)"), 1);
    };
    check(&mut a);
    drop((a, b, store));
    let mut a = open(d.path());
    check(&mut a);
    run(&mut a, "CHECKPOINT").unwrap();
    check(&mut a);
}

#[test]
fn batched_relationship_loads_go_on_beside_an_open_transaction() {
    let d = tempfile::tempdir().unwrap();
    let mut a = seeded(d.path());
    run(&mut a, "CREATE INDEX FOR (n:N) ON (n.id)").unwrap();
    let mut b = Session::on(a.store().clone());
    run(&mut b, "BEGIN").unwrap();
    run(&mut b, "MATCH (n:N {id: 1}) SET n.v = 7").unwrap();
    // Batches of the direct size: each would need the database to itself, and `b`
    // keeps an uncommitted write open throughout. They commit through the delta
    // instead (before, the statement failed after 30 s).
    let t0 = std::time::Instant::now();
    let sum = run(
        &mut a,
        "UNWIND range(0, 119999) AS i CALL { WITH i MATCH (x:N {id: i % 99 + 2}), (y:N {id: (i * 7) % 99 + 2}) CREATE (x)-[:R {i: i}]->(y) } IN TRANSACTIONS OF 60000 ROWS",
    )
    .unwrap();
    assert_eq!(sum.counters.relationships_created, 120_000);
    assert!(t0.elapsed() < std::time::Duration::from_secs(20));
    run(&mut b, "COMMIT").unwrap();
    // With no one else writing, the same batches take the direct path.
    run(
        &mut a,
        "UNWIND range(120000, 239999) AS i CALL { WITH i MATCH (x:N {id: i % 99 + 2}), (y:N {id: (i * 7) % 99 + 2}) CREATE (x)-[:R {i: i}]->(y) } IN TRANSACTIONS OF 60000 ROWS",
    )
    .unwrap();
    let check = |s: &mut Session| {
        assert_eq!(count(s, "MATCH ()-[r:R]->() RETURN count(r)"), 240_000);
        assert_eq!(
            count(s, "MATCH ()-[r:R]->() RETURN sum(r.i)"),
            239_999 * 240_000 / 2
        );
        assert_eq!(count(s, "MATCH (n:N {id: 1}) RETURN n.v"), 7);
    };
    check(&mut a);
    run(&mut a, "CHECKPOINT").unwrap();
    drop((a, b));
    let mut s = open(d.path());
    check(&mut s);
}

#[test]
fn a_direct_relationship_load_does_not_wait_and_a_concurrent_delete_of_an_end_retries() {
    let d = tempfile::tempdir().unwrap();
    let mut a = seeded(d.path());
    run(&mut a, "CREATE INDEX FOR (n:N) ON (n.id)").unwrap();
    let mut b = Session::on(a.store().clone());
    run(&mut b, "BEGIN").unwrap();
    // Node 5 has no relationship in `b`'s snapshot.
    run(&mut b, "MATCH (n:N {id: 5}) DETACH DELETE n").unwrap();
    // One statement past the direct threshold: it commits while `b` is open (before,
    // it waited 30 s for `b` and failed), creating relationships to node 5.
    let n = quiver_common::limits::BULK_ROWS_MIN as i64 + 600;
    let t0 = std::time::Instant::now();
    let q = format!(
        "UNWIND range(0, {}) AS i MATCH (x:N {{id: i % 100 + 1}}), (y:N {{id: (i * 7) % 100 + 1}}) CREATE (x)-[:R]->(y)",
        n - 1
    );
    assert!(run(&mut a, &format!("EXPLAIN {q}"))
        .unwrap()
        .plan
        .unwrap()
        .contains("BulkCreate"));
    assert_eq!(
        run(&mut a, &q).unwrap().counters.relationships_created,
        n as u64
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(20));
    // `b` deleted node 5 without seeing them: its commit fails, retryably, and leaves
    // nothing dangling.
    let e = run(&mut b, "COMMIT").unwrap_err();
    assert!(e.is_retryable(), "{e}");
    assert_eq!(count(&mut a, "MATCH (n:N {id: 5}) RETURN count(n)"), 1);
    // The retry sees them and deletes them with the node.
    run(&mut b, "MATCH (n:N {id: 5}) DETACH DELETE n").unwrap();
    let touching = (0..n).filter(|i| i % 100 == 4 || i % 100 == 72).count() as i64;
    let check = |s: &mut Session| {
        assert_eq!(count(s, "MATCH (n:N {id: 5}) RETURN count(n)"), 0);
        assert_eq!(count(s, "MATCH ()-[r:R]->() RETURN count(r)"), n - touching);
        assert_eq!(
            count(s, "MATCH (:N)-[r:R]->(:N) RETURN count(r)"),
            n - touching
        );
    };
    check(&mut a);
    run(&mut a, "CHECKPOINT").unwrap();
    drop((a, b));
    let mut s = open(d.path());
    check(&mut s);
}

/// A transaction open across a direct write of relationships of the type it created
/// one of commits: its id was handed out before the write, whose segment starts past
/// it (a hole that the commit's record brings back).
#[test]
fn a_relationship_created_beside_a_direct_load_of_its_type_commits() {
    let d = tempfile::tempdir().unwrap();
    let mut a = seeded(d.path());
    // The type exists before (a transaction that creates the first relationships of a
    // type beside a direct write of that new type still conflicts).
    run(
        &mut a,
        "MATCH (x:N {id: 3}), (y:N {id: 4}) CREATE (x)-[:R {k: 0}]->(y)",
    )
    .unwrap();
    run(&mut a, "CHECKPOINT").unwrap();
    let mut b = Session::on(a.store().clone());
    run(&mut b, "BEGIN").unwrap();
    run(
        &mut b,
        "MATCH (x:N {id: 1}), (y:N {id: 2}) CREATE (x)-[:R {k: -1}]->(y)",
    )
    .unwrap();
    let n = quiver_common::limits::BULK_ROWS_MIN as i64 + 600;
    let q = format!(
        "UNWIND range(0, {}) AS i MATCH (x:N {{id: i % 100 + 1}}), (y:N {{id: (i * 7) % 100 + 1}}) CREATE (x)-[:R {{k: 1}}]->(y)",
        n - 1
    );
    assert_eq!(
        run(&mut a, &q).unwrap().counters.relationships_created,
        n as u64
    );
    run(&mut b, "COMMIT").unwrap();
    let check = |s: &mut Session| {
        assert_eq!(count(s, "MATCH ()-[r:R]->() RETURN count(r)"), n + 2);
        assert_eq!(count(s, "MATCH ()-[r:R]->() RETURN sum(r.k)"), n - 1);
        let q = "MATCH (:N {id: 1})-[r:R {k: -1}]->(y) RETURN y.id";
        assert_eq!(ints(s, q), vec![2]);
        assert_eq!(
            count(s, "MATCH ()-[r:R]->() RETURN count(DISTINCT id(r))"),
            n + 2
        );
    };
    check(&mut a);
    run(&mut a, "CHECKPOINT").unwrap();
    check(&mut a);
    drop((a, b));
    check(&mut open(d.path()));
}

#[test]
fn commits_beside_checkpoints_survive_a_reopen() {
    let d = tempfile::tempdir().unwrap();
    let mut a = seeded(d.path());
    let store = a.store().clone();
    let writer = std::thread::spawn(move || {
        let mut s = Session::on(store);
        let mut done = 0;
        for i in 0..300 {
            let q = format!(
                "MATCH (n:N {{id: {}}}) SET n.v = n.v + 1 CREATE (:W {{i: {i}}})",
                i % 100 + 1
            );
            // A conflict is retryable: the statement did nothing.
            loop {
                match run(&mut s, &q) {
                    Ok(_) => break,
                    Err(e)
                        if e.to_string().contains("retry") || e.to_string().contains("changed") => {
                    }
                    Err(e) => panic!("{q}: {e}"),
                }
            }
            done += 1;
        }
        done
    });
    let mut checkpoints = 0;
    while !writer.is_finished() {
        run(&mut a, "CHECKPOINT").unwrap();
        checkpoints += 1;
    }
    assert_eq!(writer.join().unwrap(), 300);
    assert!(checkpoints > 0);
    let check = |s: &mut Session| {
        assert_eq!(count(s, "MATCH (w:W) RETURN count(w)"), 300);
        assert_eq!(count(s, "MATCH (w:W) RETURN sum(w.i)"), 299 * 300 / 2);
        assert_eq!(count(s, "MATCH (n:N) RETURN sum(n.v)"), 300);
    };
    check(&mut a);
    drop(a);
    check(&mut open(d.path()));
}

/// The child half of the test below: two bulk loads at once in this process, one small
/// (it commits, and says so on stdout) and one big (killed mid-load).
#[test]
fn child_runs_two_bulk_loads() {
    let Ok(dir) = std::env::var("QUIVER_TEST_TWO_LOADS") else {
        return;
    };
    let a = open(Path::new(&dir));
    let store = a.store().clone();
    let loads: Vec<_> = [("P", "p.csv"), ("Q", "q.csv")]
        .into_iter()
        .map(|(label, file)| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut s = Session::on(store);
                run(
                    &mut s,
                    &format!("LOAD CSV FROM '{file}' WITH HEADER AS row CREATE (:{label} {{id: toInteger(row.id), score: toInteger(row.score)}})"),
                )
                .unwrap();
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                writeln!(out, "committed {label}").unwrap();
                out.flush().unwrap();
            })
        })
        .collect();
    for l in loads {
        l.join().unwrap();
    }
}

/// A SIGKILL while two bulk loads run: the one that was acknowledged is there whole,
/// the other is there whole or not at all, and the database checks clean.
#[test]
fn a_kill_during_two_bulk_loads_loses_no_acknowledged_one() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let d = tempfile::tempdir().unwrap();
    drop(seeded(d.path()));
    let small = quiver_common::limits::BULK_ROWS_MIN + 100;
    let big = 3_000_000u64;
    rows_file(d.path(), "p.csv", small);
    rows_file(d.path(), "q.csv", big);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_runs_two_bulk_loads",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("QUIVER_TEST_TWO_LOADS", d.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    // Kill once P is acknowledged and Q is still loading.
    let t = std::time::Instant::now();
    let mut acked = Vec::new();
    while t.elapsed() < std::time::Duration::from_secs(120) {
        if let Ok(l) = rx.recv_timeout(std::time::Duration::from_millis(5)) {
            acked.push(l);
        }
        if acked.iter().any(|l| l.ends_with("committed P")) || child.try_wait().unwrap().is_some() {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    while let Ok(l) = rx.try_recv() {
        acked.push(l);
    }
    // (The test harness may print its own text before the child's on a line.)
    assert!(
        acked.iter().any(|l| l.ends_with("committed P")),
        "P was not acknowledged: {acked:?}"
    );
    let mut s = open(d.path());
    assert_eq!(count(&mut s, "MATCH (p:P) RETURN count(p)"), small as i64);
    let q = count(&mut s, "MATCH (q:Q) RETURN count(q)");
    let q_acked = acked.iter().any(|l| l.ends_with("committed Q"));
    eprintln!(
        "killed with Q {}",
        if q_acked { "acknowledged" } else { "loading" }
    );
    assert!(
        q == big as i64 || (q == 0 && !q_acked),
        "Q: {q} rows, acknowledged: {q_acked}"
    );
    assert_eq!(count(&mut s, "MATCH (n:N) RETURN count(n)"), 100);
    run(&mut s, "CREATE (:N {id: 101, v: 0})").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    assert_eq!(count(&mut s, "MATCH (n:N) RETURN count(n)"), 101);
}
