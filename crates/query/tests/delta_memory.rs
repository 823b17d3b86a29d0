//! The delta's memory is what it says: after SETs on imported nodes, created nodes and
//! created relationships, the bytes `SHOW STORAGE INFO` reports for the delta are
//! - within 10% of what the process allocated and still holds (a counting allocator,
//!   each block at the size glibc's malloc gives it), and
//! - within 20% of what its resident heap grew by (anonymous resident memory, with
//!   freed memory given back by `malloc_trim`), or within 6 MiB of it: `malloc_trim`
//!   does not shrink the top of a thread's arena, so a large block freed there (a big
//!   transaction's lock table) may stay resident, by chance of the thread that ran it.
//!
//! Its own process: other tests would move the heap.

mod common;

use common::{rows, run};
use quiver_common::size::anon_rss_bytes;
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::{Session, Value};
use quiver_storage::manifest::IdType;
use quiver_storage::OpenMode;
use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, Ordering};

/// Bytes glibc's malloc gives a request of `n`: an 8-byte header, rounded up to 16, at
/// least 32 (what the delta's accounting assumes too).
fn chunk(n: usize) -> i64 {
    ((n + 8 + 15) & !15).max(32) as i64
}

/// Bytes allocated and not yet freed.
static LIVE: AtomicI64 = AtomicI64::new(0);

struct Counting;

// SAFETY: every call is passed to the system allocator unchanged; the counter is an
// atomic, updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(chunk(l.size()), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(chunk(l.size()), Ordering::Relaxed);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(chunk(l.size()), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(chunk(new) - chunk(l.size()), Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

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
    let base_live = LIVE.load(Ordering::Relaxed);
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
        let live = LIVE.load(Ordering::Relaxed) - base_live;
        let said = delta_bytes(&mut s) - base_delta;
        eprintln!("{q}: allocated {live} bytes, the heap grew by {held}, the delta says {said}");
        let off = |x: i64| (x - said).abs() as f64 / said as f64;
        assert!(
            !compare || off(live) <= 0.1,
            "after {q}: the delta says {said} bytes, {live} are allocated ({:.0}% off)",
            off(live) * 100.0
        );
        assert!(
            !compare || off(held) <= 0.2 || (held - said).abs() <= 6 << 20,
            "after {q}: the delta says {said} bytes, the heap grew by {held} ({:.0}% off)",
            off(held) * 100.0
        );
    }
}
