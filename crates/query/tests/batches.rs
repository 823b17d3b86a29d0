//! `CALL { } IN TRANSACTIONS` over checkpoints: a checkpoint between two batches (the
//! statement's own, when the log passes its threshold) moves the body to the new
//! generation instead of failing the statement; small batches go through the delta
//! rather than each becoming a table; large batches of relationships take the direct
//! path, and the checkpoints merge the segments they add, keeping edge ids, deletions
//! and property values.

mod common;

use common::{ints, rows, run};
use quiver_engine::StoreOptions;
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;
use std::path::Path;

fn open(dir: &Path, log_bytes: u64) -> Session {
    let opts = StoreOptions {
        open_mode: OpenMode::Mapped,
        checkpoint_log_bytes: log_bytes,
        ..StoreOptions::default()
    };
    Session::open_opts(&dir.join("g.qdb"), opts, true).unwrap()
}

fn one(s: &mut Session, q: &str) -> i64 {
    ints(s, q)[0]
}

/// `n` users `(:U {id})` in segments, with an index on `id`.
fn users(s: &mut Session, n: i64) {
    run(
        s,
        &format!("UNWIND range(0, {}) AS i CREATE (:U {{id: i}})", n - 1),
    )
    .unwrap();
    run(s, "CHECKPOINT").unwrap();
    run(s, "CREATE INDEX FOR (u:U) ON (u.id)").unwrap();
}

fn generation(s: &Session) -> u64 {
    s.db().manifest().generation
}

fn segments(s: &Session, ty: &str) -> Vec<u64> {
    let db = s.db();
    let r = db.rel_types().iter().find(|r| r.meta.name == ty).unwrap();
    r.meta.segments.iter().map(|s| s.n_edges).collect()
}

#[test]
fn a_checkpoint_between_batches_moves_the_body_to_the_new_generation() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path(), 64 << 10);
    users(&mut s, 2000);
    let g0 = generation(&s);
    // 30 batches of 200 relationships, each found by two index seeks: the log passes
    // 64 KiB every few batches, and the statement checkpoints between them.
    let sum = run(
        &mut s,
        "UNWIND range(0, 5999) AS i CALL { WITH i MATCH (a:U {id: i % 2000}), (b:U {id: (i * 7) % 2000}) CREATE (a)-[:F {i: i}]->(b) } IN TRANSACTIONS OF 200 ROWS",
    )
    .unwrap();
    assert_eq!(sum.counters.relationships_created, 6000);
    assert!(
        generation(&s) >= g0 + 3,
        "checkpoints ran between the batches: generation {g0} -> {}",
        generation(&s)
    );
    let (mut ea, mut eb) = (0i64, 0i64);
    for i in 0..6000i64 {
        ea += i * (i % 2000 + 1);
        eb += i * ((i * 7) % 2000 + 1);
    }
    let got = rows(
        &mut s,
        "MATCH (a:U)-[r:F]->(b:U) RETURN count(*), sum(r.i * (a.id + 1)), sum(r.i * (b.id + 1))",
    );
    assert_eq!(
        got[0],
        vec![Value::Int(6000), Value::Int(ea), Value::Int(eb)]
    );
    // A body that returns rows, and sets what it matched, across further checkpoints.
    let got = ints(
        &mut s,
        "UNWIND range(0, 1999) AS i CALL { WITH i MATCH (a:U {id: i}) SET a.v = i * 2 RETURN a.id AS x } IN TRANSACTIONS OF 50 ROWS RETURN sum(x)",
    );
    assert_eq!(got, vec![1999 * 2000 / 2]);
    assert_eq!(one(&mut s, "MATCH (a:U) RETURN sum(a.v)"), 1999 * 2000);
    assert_eq!(
        one(&mut s, "MATCH (a:U {id: 1234}) RETURN a.v"),
        2468,
        "the index seek finds the value after the checkpoints"
    );
    // What follows the CALL reads the body's writes after the moves: nodes created
    // and returned by the body, and values set on what the input matched.
    let g1 = generation(&s);
    assert_eq!(
        rows(
            &mut s,
            "UNWIND range(1, 3000) AS i CALL { WITH i CREATE (n:X {i: i}) RETURN n } IN TRANSACTIONS OF 100 ROWS RETURN sum(n.i), count(n.i)"
        )[0],
        vec![Value::Int(3000 * 3001 / 2), Value::Int(3000)]
    );
    assert_eq!(
        ints(
            &mut s,
            "MATCH (n:X) CALL { WITH n SET n.j = n.i * 2 } IN TRANSACTIONS OF 100 ROWS RETURN sum(n.j)"
        ),
        vec![3000 * 3001]
    );
    assert!(
        generation(&s) >= g1 + 2,
        "checkpoints ran in both statements"
    );
    // Everything is there after a reopen.
    drop(s);
    let mut s = open(d.path(), 64 << 10);
    assert_eq!(one(&mut s, "MATCH ()-[r:F]->() RETURN count(r)"), 6000);
    assert_eq!(one(&mut s, "MATCH (a:U) RETURN sum(a.v)"), 1999 * 2000);
}

#[test]
fn small_batches_go_through_the_delta_and_large_ones_direct() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path(), 256 << 20);
    let tables = |s: &Session| s.db().node_tables().len();
    // 120 batches of 1,000: before, every batch past the statement's first 102,400 rows
    // committed as a table and a generation of its own.
    run(
        &mut s,
        "UNWIND range(1, 120000) AS i CALL { WITH i CREATE (:N {i: i}) } IN TRANSACTIONS OF 1000 ROWS",
    )
    .unwrap();
    assert_eq!(tables(&s), 0, "the batches are in the delta");
    run(&mut s, "CHECKPOINT").unwrap();
    assert_eq!(tables(&s), 1, "one checkpoint, one table");
    // Batches of 60,000 take the direct path: a table each.
    run(
        &mut s,
        "UNWIND range(1, 120000) AS i CALL { WITH i CREATE (:M {i: i}) } IN TRANSACTIONS OF 60000 ROWS",
    )
    .unwrap();
    assert_eq!(tables(&s), 3);
    assert_eq!(
        rows(&mut s, "MATCH (n:N) RETURN count(n), sum(n.i)")[0],
        vec![Value::Int(120_000), Value::Int(120_000 * 120_001 / 2)]
    );
    assert_eq!(
        rows(&mut s, "MATCH (n:M) RETURN count(n), sum(n.i)")[0],
        vec![Value::Int(120_000), Value::Int(120_000 * 120_001 / 2)]
    );
}

/// `[(w, id(r))]` of the relationships whose `w` is a multiple of 997.
fn sample(s: &mut Session) -> Vec<(i64, i64)> {
    rows(
        s,
        "MATCH ()-[r:F]->() WHERE r.w % 997 = 0 RETURN r.w, id(r) ORDER BY r.w",
    )
    .into_iter()
    .map(|r| match (&r[0], &r[1]) {
        (Value::Int(w), Value::Int(id)) => (*w, *id),
        other => panic!("{other:?}"),
    })
    .collect()
}

#[test]
fn batched_relationship_loads_merge_their_segments_keeping_ids_deletions_and_values() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path(), 256 << 20);
    users(&mut s, 1000);
    let load = |s: &mut Session, from: i64, to: i64| {
        run(
            s,
            &format!(
                "UNWIND range({from}, {to}) AS i CALL {{ WITH i MATCH (a:U {{id: i % 1000}}), (b:U {{id: (i * 13) % 1000}}) CREATE (a)-[:F {{w: i}}]->(b) }} IN TRANSACTIONS OF 50000 ROWS"
            ),
        )
        .unwrap()
    };
    let c = load(&mut s, 0, 299_999);
    assert_eq!(c.counters.relationships_created, 300_000);
    let segs = segments(&s, "F");
    assert!(
        segs.len() <= 3 && segs.iter().sum::<u64>() == 300_000,
        "six direct batches, merged: {segs:?}"
    );
    let ids = sample(&mut s);
    assert_eq!(ids.len(), 301);
    // Deletions and property changes in what will be merged next.
    run(&mut s, "MATCH ()-[r:F]->() WHERE r.w % 10 = 3 DELETE r").unwrap();
    run(
        &mut s,
        "MATCH ()-[r:F]->() WHERE r.w % 10 = 7 SET r.x = r.w + 1",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    load(&mut s, 300_000, 499_999);
    run(&mut s, "CHECKPOINT").unwrap();
    // The first load's segments, with their deletions and the new column, merged
    // with the second's.
    let segs = segments(&s, "F");
    assert!(
        segs.len() <= 4 && segs[0] > 300_000,
        "merged again: {segs:?}"
    );
    let check = |s: &mut Session| {
        let mut ea = 0i64;
        let mut n = 0i64;
        let mut x = 0i64;
        for i in 0..500_000i64 {
            if i < 300_000 && i % 10 == 3 {
                continue;
            }
            n += 1;
            ea += i * (i % 1000 + 1) + (i * 13) % 1000;
            if i < 300_000 && i % 10 == 7 {
                x += i + 1;
            }
        }
        assert_eq!(
            rows(
                s,
                "MATCH (a:U)-[r:F]->(b:U) RETURN count(*), sum(r.w * (a.id + 1) + b.id), sum(r.x)"
            )[0],
            vec![Value::Int(n), Value::Int(ea), Value::Int(x)]
        );
        // Both directions agree.
        assert_eq!(one(s, "MATCH (b:U)<-[r:F]-() RETURN count(r)"), n);
        // (Every relationship from user 3 in the first 300,000 was deleted.)
        assert_eq!(one(s, "MATCH (a:U {id: 7})-[r:F]->() RETURN count(r)"), 500);
        assert_eq!(one(s, "MATCH (a:U {id: 3})-[r:F]->() RETURN count(r)"), 200);
        let now = sample(s);
        let kept: Vec<(i64, i64)> = ids.iter().copied().filter(|(w, _)| w % 10 != 3).collect();
        assert_eq!(
            now[..kept.len()],
            kept[..],
            "edge ids are kept by the merges"
        );
    };
    check(&mut s);
    drop(s);
    let mut s = open(d.path(), 256 << 20);
    check(&mut s);
    // A relationship of a merged segment can still be deleted.
    run(&mut s, "MATCH ()-[r:F {w: 14}]->() DELETE r").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    assert_eq!(one(&mut s, "MATCH ()-[r:F {w: 14}]->() RETURN count(r)"), 0);
}

#[test]
fn declared_indexes_are_extended_by_new_tables() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path(), 256 << 20);
    run(
        &mut s,
        "UNWIND range(0, 59999) AS i CREATE (:N {k: 'k' + toString(i), i: i})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    run(&mut s, "CREATE INDEX FOR (n:N) ON (n.k)").unwrap();
    run(&mut s, "CREATE INDEX FOR (n:N) ON (n.i)").unwrap();
    run(&mut s, "MATCH (n:N) WHERE n.i % 1000 = 5 DELETE n").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    // Two direct batches: two tables, and the indexes extended by each.
    run(
        &mut s,
        "UNWIND range(60000, 159999) AS i CALL { WITH i CREATE (:N {k: 'k' + toString(i), i: i}) } IN TRANSACTIONS OF 50000 ROWS",
    )
    .unwrap();
    let db = s.db();
    let entries: Vec<u64> = db.manifest().indexes.iter().map(|i| i.n_entries).collect();
    assert_eq!(entries, vec![160_000 - 60, 160_000 - 60]);
    assert!(db
        .manifest()
        .indexes
        .iter()
        .all(|i| i.covers_nodes == db.n_nodes()));
    drop(db);
    let plan = run(&mut s, "EXPLAIN MATCH (n:N {k: 'k7'}) RETURN n.i")
        .unwrap()
        .plan
        .unwrap();
    assert!(plan.contains("index"), "{plan}");
    for (k, want) in [
        ("k7", vec![7]),
        ("k1005", vec![]),
        ("k59999", vec![59_999]),
        ("k60000", vec![60_000]),
        ("k159999", vec![159_999]),
    ] {
        assert_eq!(
            ints(&mut s, &format!("MATCH (n:N {{k: '{k}'}}) RETURN n.i")),
            want,
            "{k}"
        );
    }
    assert_eq!(
        one(
            &mut s,
            "MATCH (n:N) WHERE n.i >= 59990 AND n.i < 60010 RETURN count(n)"
        ),
        20
    );
    assert_eq!(
        one(
            &mut s,
            "MATCH (n:N) WHERE n.i >= 1000 AND n.i < 1010 RETURN count(n)"
        ),
        9
    );
}
