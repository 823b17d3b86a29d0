//! Churn: records created and deleted all day (a queue, sessions, events) cost nothing
//! once no open transaction can see them. Their tombstones leave the delta, their ids
//! are handed out again, scans visit the living, and an old reader keeps what it sees.

mod common;

use common::{ints, rows, run};
use quiver_query::Session;
use quiver_storage::OpenMode;
use std::path::Path;

fn open(dir: &Path) -> Session {
    Session::open_with(&dir.join("g.qdb"), OpenMode::Mapped, true).unwrap()
}

fn count(s: &mut Session, q: &str) -> i64 {
    ints(s, q)[0]
}

/// One round of a queue's life: `n` events created, then consumed.
fn churn(s: &mut Session, n: i64) {
    run(
        s,
        &format!("UNWIND range(1, {n}) AS i CREATE (:E {{i: i, body: 'payload ' + toString(i)}})"),
    )
    .unwrap();
    run(s, "MATCH (e:E) DELETE e").unwrap();
}

fn delta_bytes(s: &Session) -> u64 {
    s.store().snapshot().delta.bytes
}

#[test]
fn a_queue_at_steady_state_costs_what_is_live() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(&mut s, "UNWIND range(1, 300) AS i CREATE (:N {i: i})").unwrap();
    let live = delta_bytes(&s);
    let top = s.store().snapshot().delta.next_node;
    for _ in 0..40 {
        churn(&mut s, 300);
    }
    // The last round's tombstones went when its transaction ended, with no commit after.
    assert!(s.store().snapshot().delta.graves.is_empty());
    assert!(
        delta_bytes(&s) <= 2 * live + 4096,
        "{} against {live}",
        delta_bytes(&s)
    );
    run(&mut s, "CREATE (:Marker)").unwrap();
    let snap = s.store().snapshot();
    // Ids are handed out again: the created range is what was live at once (the
    // nodes, one round of events and its tombstones), not everything ever created.
    assert!(
        snap.delta.next_node <= top + 2 * 300 + 1,
        "{} ids after 12,000 events",
        snap.delta.next_node
    );
    assert!(
        snap.delta.graves.len() <= 1,
        "{} graves",
        snap.delta.graves.len()
    );
    // What the delta holds is the live nodes' (within 2x, with the map's leaves).
    assert!(
        delta_bytes(&s) <= 2 * live + 4096,
        "{} bytes against {live} live",
        delta_bytes(&s)
    );
    assert_eq!(count(&mut s, "MATCH (n:N) RETURN count(n)"), 300);
    assert_eq!(count(&mut s, "MATCH (e:E) RETURN count(e)"), 0);
    assert_eq!(count(&mut s, "MATCH (n) RETURN count(n)"), 301);
    assert_eq!(
        count(&mut s, "MATCH (a:N), (b:N) RETURN count(*)"),
        300 * 300
    );
    assert_eq!(count(&mut s, "MATCH (n:N) RETURN sum(n.i)"), 300 * 301 / 2);
    // A reused id carries its new node, not the old one's properties.
    run(&mut s, "CREATE (:E {i: -1})").unwrap();
    assert_eq!(rows(&mut s, "MATCH (e:E) RETURN e.i, e.body").len(), 1);
    assert!(rows(&mut s, "MATCH (e:E) RETURN e.body")[0][0].is_null());
    // The log replays to the same graph, and the open collects what it left.
    drop(s);
    let mut s = open(d.path());
    assert!(s.store().snapshot().delta.graves.is_empty());
    assert_eq!(count(&mut s, "MATCH (n:N) RETURN count(n)"), 300);
    assert_eq!(count(&mut s, "MATCH (e:E) RETURN e.i"), -1);
    // And a checkpoint folds it: the collected ids past the last live node are no
    // table's holes, and the next rounds start past the new segments.
    run(&mut s, "CHECKPOINT").unwrap();
    let m = s.db().manifest().clone();
    assert_eq!(
        m.n_nodes,
        302,
        "{:?}",
        m.node_tables
            .iter()
            .map(|t| (t.first_node, t.n_rows))
            .collect::<Vec<_>>()
    );
    for _ in 0..5 {
        churn(&mut s, 100);
    }
    // (The rounds consumed the event made before the reopen too.)
    assert_eq!(count(&mut s, "MATCH (n) RETURN count(n)"), 301);
    assert_eq!(count(&mut s, "MATCH (e:E) RETURN count(e)"), 0);
}

#[test]
fn an_old_reader_keeps_its_rows_and_its_ids_stay_taken() {
    let d = tempfile::tempdir().unwrap();
    let mut a = open(d.path());
    run(&mut a, "UNWIND range(1, 50) AS i CREATE (:E {i: i})").unwrap();
    let old_ids = ints(&mut a, "MATCH (e:E) RETURN id(e) ORDER BY id(e)");
    // A transaction opened before the deletion.
    let mut b = Session::on(a.store().clone());
    run(&mut b, "BEGIN").unwrap();
    assert_eq!(count(&mut b, "MATCH (e:E) RETURN count(e)"), 50);
    run(&mut a, "MATCH (e:E) DELETE e").unwrap();
    // Commits go on beside it; none may collect what it still sees.
    for _ in 0..3 {
        run(&mut a, "UNWIND range(1, 50) AS i CREATE (:F {i: i})").unwrap();
    }
    let fresh = ints(&mut a, "MATCH (f:F) RETURN id(f)");
    assert!(
        fresh.iter().all(|id| !old_ids.contains(id)),
        "an id the open transaction still sees was handed out again"
    );
    // The reader sees its snapshot whole, and writes to it fail as conflicts would.
    assert_eq!(count(&mut b, "MATCH (e:E) RETURN count(e)"), 50);
    assert_eq!(count(&mut b, "MATCH (e:E) RETURN sum(e.i)"), 50 * 51 / 2);
    assert_eq!(count(&mut b, "MATCH (f:F) RETURN count(f)"), 0);
    run(&mut b, "ROLLBACK").unwrap();
    // Once it is gone, the next commit collects the tombstones and their ids return.
    run(&mut a, "CREATE (:G)").unwrap();
    run(&mut a, "UNWIND range(1, 50) AS i CREATE (:H {i: i})").unwrap();
    let reused = ints(&mut a, "MATCH (h:H) RETURN id(h)");
    assert!(
        reused.iter().any(|id| old_ids.contains(id)),
        "collected ids were not handed out again: {reused:?}"
    );
    assert_eq!(count(&mut a, "MATCH (h:H) RETURN sum(h.i)"), 50 * 51 / 2);
    assert_eq!(count(&mut a, "MATCH (e:E) RETURN count(e)"), 0);
    assert_eq!(count(&mut a, "MATCH (n) RETURN count(n)"), 50 * 3 + 1 + 50);
}

#[test]
fn relationships_that_come_and_go_leave_nothing_behind() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(&mut s, "UNWIND range(1, 20) AS i CREATE (:N {i: i})").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let mut top = 0;
    for round in 0..30 {
        run(
            &mut s,
            "MATCH (a:N), (b:N) WHERE b.i = a.i % 20 + 1 CREATE (a)-[:NEXT {w: a.i}]->(b)",
        )
        .unwrap();
        // Created nodes with relationships of their own, detach-deleted.
        run(
            &mut s,
            "MATCH (a:N {i: 1}) CREATE (a)-[:HAS]->(:Tmp {r: 1})-[:HAS]->(:Tmp {r: 2})",
        )
        .unwrap();
        assert_eq!(count(&mut s, "MATCH ()-[r:NEXT]->() RETURN count(r)"), 20);
        assert_eq!(
            count(&mut s, "MATCH (:N {i: 3})-[:NEXT]->(b) RETURN b.i"),
            4
        );
        assert_eq!(
            count(&mut s, "MATCH (:N {i: 1})-[:HAS*]->(t) RETURN count(t)"),
            2
        );
        run(&mut s, "MATCH ()-[r:NEXT]->() DELETE r").unwrap();
        run(&mut s, "MATCH (t:Tmp) DETACH DELETE t").unwrap();
        let ids = ints(
            &mut s,
            "CREATE (x:Probe)-[r:NEXT]->(x) WITH x, r RETURN id(r)",
        );
        run(&mut s, "MATCH (x:Probe) DETACH DELETE x").unwrap();
        if round == 5 {
            top = ids[0];
        } else if round > 5 {
            // Edge ids are handed out again too: they stop growing.
            assert!(ids[0] <= top + 21, "edge id {} in round {round}", ids[0]);
        }
    }
    run(&mut s, "CREATE (:Marker)").unwrap();
    let snap = s.store().snapshot();
    assert!(
        snap.delta.rels.len() <= 25,
        "{} relationship records",
        snap.delta.rels.len()
    );
    assert_eq!(count(&mut s, "MATCH ()-[r]->() RETURN count(r)"), 0);
    assert_eq!(count(&mut s, "MATCH (n) RETURN count(n)"), 21);
    // Reopened and checkpointed, the graph is the same.
    drop(s);
    let mut s = open(d.path());
    assert_eq!(count(&mut s, "MATCH ()-[r]->() RETURN count(r)"), 0);
    run(&mut s, "CHECKPOINT").unwrap();
    assert_eq!(count(&mut s, "MATCH (n) RETURN count(n)"), 21);
    assert_eq!(count(&mut s, "MATCH ()-[r]->() RETURN count(r)"), 0);
    // The collected edge ids are not holes of the next segment of their type.
    run(
        &mut s,
        "MATCH (a:N), (b:N) WHERE b.i = a.i % 20 + 1 CREATE (a)-[:NEXT {w: a.i}]->(b)",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let m = s.db().manifest().clone();
    let next = m.rel_types.iter().find(|t| t.name == "NEXT").unwrap();
    assert_eq!(
        next.n_edges,
        20,
        "{:?}",
        next.segments.iter().map(|g| g.n_edges).collect::<Vec<_>>()
    );
    assert_eq!(
        count(&mut s, "MATCH (:N {i: 3})-[:NEXT]->(b) RETURN b.i"),
        4
    );
}

#[test]
fn scans_skip_rows_a_checkpoint_left_deleted() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(&mut s, "UNWIND range(1, 5000) AS i CREATE (:E {i: i})").unwrap();
    run(&mut s, "UNWIND range(1, 7) AS i CREATE (:N {i: i})").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    // Most rows of the table deleted, a few kept here and there.
    run(&mut s, "MATCH (e:E) WHERE e.i % 1000 <> 0 DELETE e").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    assert_eq!(
        ints(&mut s, "MATCH (e:E) RETURN e.i ORDER BY e.i"),
        vec![1000, 2000, 3000, 4000, 5000]
    );
    assert_eq!(count(&mut s, "MATCH (n) RETURN count(n)"), 12);
    assert_eq!(count(&mut s, "MATCH (a:N), (b:N) RETURN count(*)"), 49);
    assert_eq!(
        count(&mut s, "MATCH (n) WHERE n.i = 3000 RETURN count(n)"),
        1
    );
}

fn dir_bytes(d: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let m = e.metadata().unwrap();
        n += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    n
}

#[test]
fn checkpoints_give_back_the_disk_of_tables_whose_rows_all_died() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(d.path());
    run(&mut s, "UNWIND range(1, 300) AS i CREATE (:N {i: i})").unwrap();
    let mut sizes = Vec::new();
    // A queue checkpointed while events are live: each checkpoint writes a table of
    // them, which the next rounds consume.
    for round in 0..12 {
        run(
            &mut s,
            &format!("UNWIND range(1, 2000) AS i CREATE (:E {{round: {round}, i: i, body: 'event ' + toString(i)}})"),
        )
        .unwrap();
        run(&mut s, "CHECKPOINT").unwrap();
        run(
            &mut s,
            &format!("MATCH (e:E) WHERE e.round = {round} DELETE e"),
        )
        .unwrap();
        sizes.push(dir_bytes(&db));
    }
    run(&mut s, "CHECKPOINT").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let end = dir_bytes(&db);
    // The tables of consumed events hold no columns any more, and their files are gone:
    // the directory is what the live nodes take, not what all events took.
    let m = s.db().manifest().clone();
    let emptied = m
        .node_tables
        .iter()
        .filter(|t| t.columns.is_empty() && t.n_rows > 0)
        .count();
    assert!(
        emptied >= 10,
        "{emptied} tables emptied: {:?}",
        m.node_tables
            .iter()
            .map(|t| (t.n_rows, t.columns.len()))
            .collect::<Vec<_>>()
    );
    assert!(
        end < sizes[1] + 64 * 1024,
        "{end} bytes at the end, {:?} along the way",
        sizes
    );
    assert_eq!(count(&mut s, "MATCH (n) RETURN count(n)"), 300);
    assert_eq!(count(&mut s, "MATCH (e:E) RETURN count(e)"), 0);
    assert_eq!(count(&mut s, "MATCH (n:N) RETURN sum(n.i)"), 300 * 301 / 2);
    // The same after a reopen, and the database takes writes where the events were.
    drop(s);
    let mut s = open(d.path());
    assert_eq!(count(&mut s, "MATCH (n) RETURN count(n)"), 300);
    run(&mut s, "CREATE (:E {round: 99})").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    assert_eq!(count(&mut s, "MATCH (e:E) RETURN e.round"), 99);
    assert_eq!(count(&mut s, "MATCH (n) RETURN count(n)"), 301);
}

#[test]
fn a_table_mostly_dead_is_rewritten_with_its_living_rows_whole() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(d.path());
    run(
        &mut s,
        "UNWIND range(1, 20000) AS i CREATE (:S {i: i, f: i * 0.5, b: i % 2 = 0, \
         name: 'session ' + toString(i) + ' of a user with a long agent string', \
         tags: ['a', toString(i)], day: date('2026-01-01') + duration({days: i % 300})})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    // A SET folded into a patch file first: the rewrite takes the patched values.
    run(
        &mut s,
        "MATCH (x:S) WHERE x.i % 100 = 7 SET x.name = 'changed ' + toString(x.i)",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let before = dir_bytes(&db);
    let want = rows(
        &mut s,
        "MATCH (x:S) WHERE x.i % 10 = 7 RETURN x.i, x.f, x.b, x.name, x.tags, x.day ORDER BY x.i",
    );
    // Nine sessions in ten end.
    run(&mut s, "MATCH (x:S) WHERE x.i % 10 <> 7 DELETE x").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let after = dir_bytes(&db);
    let m = s.db().manifest().clone();
    let t = m.node_tables.iter().find(|t| t.n_rows == 20000).unwrap();
    assert!(t.patches.is_empty() && t.segments.len() == 1, "{t:?}");
    // (Measured 715 KB -> 267 KB: a dead row's fixed-width values keep their slots as
    // nulls, its strings and lists go.)
    assert!(after * 2 < before, "{before} bytes before, {after} after");
    let q =
        "MATCH (x:S) WHERE x.i % 10 = 7 RETURN x.i, x.f, x.b, x.name, x.tags, x.day ORDER BY x.i";
    assert_eq!(rows(&mut s, q), want);
    assert_eq!(count(&mut s, "MATCH (x:S) RETURN count(x)"), 2000);
    drop(s);
    let mut s = open(d.path());
    assert_eq!(rows(&mut s, q), want);
    assert_eq!(count(&mut s, "MATCH (x:S {i: 1007}) RETURN count(x)"), 1);
    assert_eq!(count(&mut s, "MATCH (x:S {i: 1008}) RETURN count(x)"), 0);
}

#[test]
fn a_label_scan_of_created_nodes_follows_their_labels() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(&mut s, "UNWIND range(1, 10) AS i CREATE (:A {i: i})").unwrap();
    run(&mut s, "MATCH (n:A) WHERE n.i <= 4 SET n:B").unwrap();
    run(&mut s, "MATCH (n:A) WHERE n.i <= 2 REMOVE n:A").unwrap();
    assert_eq!(
        ints(&mut s, "MATCH (n:A) RETURN n.i ORDER BY n.i"),
        (3..=10).collect::<Vec<_>>()
    );
    assert_eq!(
        ints(&mut s, "MATCH (n:B) RETURN n.i ORDER BY n.i"),
        vec![1, 2, 3, 4]
    );
    // Deleted, collected, and their ids given to nodes of another label.
    run(&mut s, "MATCH (n:B) DELETE n").unwrap();
    run(&mut s, "UNWIND range(1, 4) AS i CREATE (:C {i: i})").unwrap();
    assert_eq!(count(&mut s, "MATCH (n:B) RETURN count(n)"), 0);
    assert_eq!(
        ints(&mut s, "MATCH (n:A) RETURN n.i ORDER BY n.i"),
        (5..=10).collect::<Vec<_>>()
    );
    assert_eq!(
        ints(&mut s, "MATCH (n:C) RETURN n.i ORDER BY n.i"),
        vec![1, 2, 3, 4]
    );
    // Inside a transaction, its own creations and label changes too.
    run(&mut s, "BEGIN").unwrap();
    run(&mut s, "CREATE (:B {i: 100})").unwrap();
    run(&mut s, "MATCH (n:C {i: 1}) SET n:B REMOVE n:C").unwrap();
    assert_eq!(
        ints(&mut s, "MATCH (n:B) RETURN n.i ORDER BY n.i"),
        vec![1, 100]
    );
    assert_eq!(count(&mut s, "MATCH (n:C) RETURN count(n)"), 3);
    run(&mut s, "ROLLBACK").unwrap();
    assert_eq!(count(&mut s, "MATCH (n:B) RETURN count(n)"), 0);
    assert_eq!(count(&mut s, "MATCH (n:C) RETURN count(n)"), 4);
    drop(s);
    let mut s = open(d.path());
    assert_eq!(
        ints(&mut s, "MATCH (n:C) RETURN n.i ORDER BY n.i"),
        vec![1, 2, 3, 4]
    );
    assert_eq!(count(&mut s, "MATCH (n:A) RETURN count(n)"), 6);
}

#[test]
fn checkpoint_compact_rewrites_every_table_with_a_dead_row_beside_a_reader() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(d.path());
    run(
        &mut s,
        "UNWIND range(1, 10000) AS i CREATE (:S {i: i, name: 'a session of a user with a long agent string ' + toString(i)})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    // A reader opened before the deletions and kept open through the compaction.
    let mut r = Session::on(s.store().clone());
    run(&mut r, "BEGIN").unwrap();
    let all = "MATCH (x:S) WHERE x.i % 1000 = 1 RETURN x.i, x.name ORDER BY x.i";
    let before_rows = rows(&mut r, all);
    assert_eq!(before_rows.len(), 10);
    // A third of the sessions end: below the share an ordinary checkpoint rewrites at.
    run(&mut s, "MATCH (x:S) WHERE x.i % 3 = 0 DELETE x").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let segs = |s: &Session| s.db().manifest().node_tables[0].segments.clone();
    let plain = segs(&s);
    run(&mut s, "CHECKPOINT").unwrap();
    assert_eq!(
        segs(&s),
        plain,
        "an ordinary checkpoint rewrote a table a third dead"
    );
    let size = dir_bytes(&db);
    let out = run(&mut s, "CHECKPOINT COMPACT").unwrap();
    assert!(format!("{out:?}").contains("1 tables compacted"), "{out:?}");
    assert_ne!(segs(&s), plain);
    run(&mut s, "CHECKPOINT").unwrap(); // (the older files go at the next one)
    assert!(
        dir_bytes(&db) < size * 4 / 5,
        "{} -> {}",
        size,
        dir_bytes(&db)
    );
    // The reader still sees its snapshot, read from files the compaction replaced.
    assert_eq!(rows(&mut r, all), before_rows);
    assert_eq!(count(&mut r, "MATCH (x:S) RETURN count(x)"), 10000);
    run(&mut r, "COMMIT").unwrap();
    assert_eq!(count(&mut s, "MATCH (x:S) RETURN count(x)"), 6667);
    let want: Vec<_> = before_rows
        .into_iter()
        .filter(|row| matches!(row[0], quiver_query::Value::Int(i) if i % 3 != 0))
        .collect();
    assert_eq!(rows(&mut s, all), want);
    drop((s, r));
    let mut s = open(d.path());
    assert_eq!(rows(&mut s, all), want);
}

#[test]
fn a_large_deletion_is_collected_when_it_ends() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(
        &mut s,
        "UNWIND range(1, 150000) AS i CALL { WITH i CREATE (:Big {i: i}) } IN TRANSACTIONS OF 10000 ROWS",
    )
    .unwrap();
    let full = delta_bytes(&s);
    run(&mut s, "MATCH (n:Big) DELETE n").unwrap();
    let snap = s.store().snapshot();
    assert!(
        snap.delta.graves.is_empty(),
        "{} graves left",
        snap.delta.graves.len()
    );
    assert!(
        snap.delta.bytes < full / 20,
        "{} of {full} bytes left",
        snap.delta.bytes
    );
    assert_eq!(count(&mut s, "MATCH (n) RETURN count(n)"), 0);
    // The ids come back lowest first.
    assert_eq!(ints(&mut s, "CREATE (n:X) RETURN id(n)"), vec![0]);
}
