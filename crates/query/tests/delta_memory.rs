//! The delta's memory is what it says: after SETs on imported nodes, created nodes and
//! created relationships, the bytes `SHOW STORAGE INFO` reports for the delta are within
//! 20% of what the process's heap grew by (its anonymous resident memory, with freed
//! memory given back by `malloc_trim`). Its own process: other tests would move the heap.

mod common;

use common::{rows, run};
use quiver_common::size::anon_rss_bytes;
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::{Session, Value};
use quiver_storage::manifest::IdType;
use quiver_storage::OpenMode;
use std::fmt::Write;

const N: i64 = 200_000;

fn delta_bytes(s: &mut Session) -> i64 {
    rows(s, "SHOW STORAGE INFO")
        .into_iter()
        .find(|r| r[0] == Value::str("delta_bytes"))
        .and_then(|r| match r[1] {
            Value::Int(i) => Some(i),
            _ => None,
        })
        .expect("delta_bytes")
}

fn heap() -> i64 {
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe { libc::malloc_trim(0) };
    anon_rss_bytes().expect("RssAnon in /proc/self/status") as i64
}

#[test]
fn accounted_delta_bytes_match_the_heap() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("id:ID,age:int,name:string,score:double\n");
    for i in 0..N {
        writeln!(csv, "{i},{},user{i},{}", i % 90, i as f64 / 8.0).unwrap();
    }
    std::fs::write(dir.path().join("u.csv"), csv).unwrap();
    let db = dir.path().join("g.qdb");
    let mut cfg = ImportConfig::new(&db);
    cfg.nodes
        .push(InputGroup::parse(&format!("U={}", dir.path().join("u.csv").display())).unwrap());
    cfg.id_type = IdType::Integer;
    cfg.threads = 2;
    import(&cfg, &NoProgress).unwrap();

    let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
    // Warm the statement machinery (thread pools, caches) before the first reading.
    run(&mut s, "MATCH (n:U) WHERE n.id < 10 SET n.age = n.age").unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let base_delta = delta_bytes(&mut s);
    let base = heap();
    // (statement, whether to compare right after it). A statement that changes records
    // a committed one made copies them (MVCC): the old versions are freed when the old
    // head goes, as holes among live records that the heap keeps until later writes
    // reuse them, so that step is compared after the next one.
    let steps = [
        // Property changes to imported nodes: overlays of one value.
        ("MATCH (n:U) WHERE n.id % 2 = 0 SET n.age = n.age + 1", true),
        // Created nodes with a few properties.
        ("UNWIND range(1, 50000) AS i CREATE (:V {k: i, tag: 'v' + toString(i), w: i * 0.5})", true),
        // Created relationships between imported nodes.
        ("MATCH (a:U) WHERE a.id < 40000 MATCH (b:U {id: a.id + 1}) CREATE (a)-[:NEXT {d: 1}]->(b)", true),
        // A second property (a string) of nodes changed before: copies of their records.
        ("MATCH (n:U) WHERE n.id % 4 = 0 SET n.name = 'renamed-' + toString(n.id)", false),
        // More created nodes: they reuse the holes.
        ("UNWIND range(1, 60000) AS i CREATE (:W {k: i, tag: 'w' + toString(i)})", true),
    ];
    for (q, compare) in steps {
        run(&mut s, q).unwrap_or_else(|e| panic!("{q}: {e}"));
        let held = heap() - base;
        let said = delta_bytes(&mut s) - base_delta;
        eprintln!("{q}: heap grew by {held} bytes, the delta says {said}");
        let off = (held - said).abs() as f64 / said as f64;
        assert!(
            !compare || off <= 0.2,
            "after {q}: the delta says {said} bytes, the heap grew by {held} ({:.0}% off)",
            off * 100.0
        );
    }
}
