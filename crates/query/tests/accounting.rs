//! What a query's operators count is what they allocate: a counting allocator (this
//! test binary's global allocator) measures the heap a query takes at its peak, beyond
//! what was live before it, and the query's accounted peak (`Summary::peak_bytes`, what
//! its grants held) must cover it, up to a fixed allowance for what is not an
//! operator's to count (batches in flight between operators, the plan, the result
//! sink). The stored columns are mapped files, not heap, and are not counted by either.

mod common;

use common::run;
use quiver_query::Session;
use quiver_storage::OpenMode;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

fn grew(by: i64) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is passed to the system allocator unchanged; the counters are
// atomics, updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grew(l.size() as i64);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        grew(l.size() as i64);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // A moving realloc holds old and new at once: count the new block first.
        grew(new as i64);
        let q = unsafe { System.realloc(p, l, new) };
        LIVE.fetch_sub(l.size() as i64, Ordering::Relaxed);
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// One query measured at a time (the counters are global).
static ONE: Mutex<()> = Mutex::new(());

/// The heap `q` took at its peak beyond what was live before, and its accounted peak.
fn measure(s: &mut Session, q: &str) -> (u64, u64) {
    // The most of three runs: memory another thread frees meanwhile (what an earlier
    // statement left to a background thread) can only make a run's peak look lower.
    let mut best = (0, 0);
    for _ in 0..3 {
        let (took, counted) = measure_once(s, q);
        if took > best.0 {
            best = (took, counted);
        }
    }
    best
}

fn measure_once(s: &mut Session, q: &str) -> (u64, u64) {
    let _one = ONE.lock().unwrap();
    // Once before, so that what the session frees on its way in (the last statement's
    // state) is gone before the baseline is taken.
    run(s, q).unwrap_or_else(|e| panic!("{q}: {e}"));
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let mut rows = 0u64;
    let sum = s
        .run(q, &BTreeMap::new(), &mut |_, b| {
            rows += b.len as u64;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{q}: {e}"));
    assert!(rows > 0, "{q}: no rows");
    let took = (PEAK.load(Ordering::Relaxed) - before).max(0) as u64;
    (took, sum.peak_bytes)
}

/// Heap a query may take past what its grants hold: batches in flight (a few thousand
/// rows of values between two operators, on each of the pool's threads), the plan and
/// its expressions.
const ALLOWANCE: u64 = 6 << 20;

#[test]
fn operators_count_what_they_allocate() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    run(
        &mut s,
        "UNWIND range(0, 199999) AS i CREATE (:P {i: i, k: i % 1000, s: 'name-' + toString(i % 5003), f: toFloat(i) / 7, t: toString(i)})",
    )
    .unwrap();
    run(
        &mut s,
        "MATCH (a:P) WITH a ORDER BY a.i WITH collect(a) AS ns UNWIND range(0, 99999) AS i WITH ns[2 * i] AS a, ns[(i * 7919) % 200000] AS b CREATE (a)-[:R]->(b)",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    s.opts.memory_limit = 1 << 40;
    for q in [
        // A full sort of every node: keys and carried columns.
        "MATCH (n:P) RETURN n.i, n.s ORDER BY n.f DESC, n.s",
        // Sort keys not whole in their normalized words (long strings): values kept.
        "MATCH (n:P) RETURN n.i ORDER BY n.s + n.t, n.i",
        // A top-k past the full-sort threshold's half.
        "MATCH (n:P) RETURN n.t ORDER BY n.t LIMIT 30000",
        // Grouping: many groups, several aggregates, collected lists.
        "MATCH (n:P) RETURN n.s, count(*), avg(n.f), collect(n.i)",
        "UNWIND range(1, 300000) AS i RETURN i % 70001 AS k, toString(i % 13) AS s, count(*) AS c",
        // DISTINCT over computed columns.
        "MATCH (n:P) RETURN DISTINCT n.t + 'x' AS t",
        // Grouping by nodes after an expansion.
        "MATCH (a:P)-[:R]->(b:P) RETURN b, count(*) AS c",
    ] {
        let (took, counted) = measure(&mut s, q);
        eprintln!("{q}: took {took} bytes, counted {counted}");
        assert!(
            took <= counted + counted / 4 + ALLOWANCE,
            "{q}: the query took {:.1} MiB of heap at its peak, but counted {:.1} MiB",
            took as f64 / 1048576.0,
            counted as f64 / 1048576.0
        );
        // Counting is not a guess far above either: the grants follow the heap.
        assert!(
            counted <= 2 * took + ALLOWANCE,
            "{q}: counted {counted} bytes for {took} taken"
        );
    }
}
