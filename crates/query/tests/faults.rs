//! Fault injection (issue "Hardening"): every durable write goes through
//! `quiver_storage::fsio`, which a test can make fail at the n-th step (create, write,
//! fsync, rename, mkdir). These walks move n over every step of an import (new and
//! `--overwrite`), a commit and a checkpoint, and check after each failure that the
//! database opens as exactly before or exactly after, and that the next run works.
//!
//! The fault switch is process-wide, so this file holds one test and runs alone.

mod common;

use common::{ints, run};
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::Session;
use quiver_storage::fsio::faults;
use quiver_storage::manifest::IdType;
use quiver_storage::OpenMode;
use std::path::Path;

/// What a database holds, in a few numbers: nodes, relationships, a property sum.
type Print = Vec<i64>;

fn print_of(s: &mut Session) -> Print {
    vec![
        ints(s, "MATCH (n) RETURN count(n)")[0],
        ints(s, "MATCH ()-[r]->() RETURN count(r)")[0],
        ints(s, "MATCH (n) RETURN sum(n.v)")[0],
    ]
}

/// The print of the database at `db`, or `None` when there is no database to open.
fn fingerprint(db: &Path) -> Option<Print> {
    let mut s = Session::open_with(db, OpenMode::Mapped, false).ok()?;
    Some(print_of(&mut s))
}

/// The print of a clean import of `config(.., tag, n, ..)`.
fn imported(tag: &str, n: usize) -> Print {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    import(&config(d.path(), &db, tag, n, false), &NoProgress).unwrap();
    fingerprint(&db).unwrap()
}

fn config(dir: &Path, db: &Path, tag: &str, n: usize, overwrite: bool) -> ImportConfig {
    let nodes: String = std::iter::once("id:ID,v:int\n".to_string())
        .chain((0..n).map(|i| format!("{i},{}\n", i * tag.len())))
        .collect();
    let edges: String = std::iter::once(":START_ID,:END_ID,w:int\n".to_string())
        .chain((0..2 * n).map(|i| format!("{},{},{i}\n", i % n, (i * 7 + 1) % n)))
        .collect();
    let (np, ep) = (
        dir.join(format!("n-{tag}.csv")),
        dir.join(format!("e-{tag}.csv")),
    );
    std::fs::write(&np, nodes).unwrap();
    std::fs::write(&ep, edges).unwrap();
    let mut cfg = ImportConfig::new(db);
    cfg.nodes
        .push(InputGroup::parse(&format!("P={}", np.display())).unwrap());
    cfg.relationships
        .push(InputGroup::parse(&format!("E={}", ep.display())).unwrap());
    cfg.id_type = IdType::Integer;
    cfg.memory_budget_bytes = 64 << 20;
    cfg.threads = 2;
    cfg.overwrite = overwrite;
    cfg
}

/// Walks `attempt` (which arms step n itself) over n = 1, 2, ... until a run takes
/// fewer steps than n (no fault was reached). Returns the number of steps walked.
fn walk(mut attempt: impl FnMut(u64) -> bool) -> u64 {
    for n in 1..10_000 {
        if attempt(n) {
            return n - 1;
        }
    }
    panic!("the walk did not end");
}

#[test]
fn every_failed_step_leaves_the_database_before_or_after() {
    let mut report = Vec::new();

    // 1. A first import into a new path: after a failure there is no database (and
    //    nothing that trips the next import), or the whole new one.
    let after = imported("new", 60);
    let steps = walk(|n| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("g.qdb");
        let cfg = config(dir.path(), &db, "new", 60, false);
        faults::arm(n);
        let r = import(&cfg, &NoProgress);
        let taken = faults::disarm();
        let got = fingerprint(&db);
        match &r {
            Ok(_) => assert_eq!(got.as_ref(), Some(&after), "step {n}"),
            Err(_) => assert!(
                got.is_none() || got.as_ref() == Some(&after),
                "step {n}: {got:?} after {r:?}"
            ),
        }
        if r.is_err() {
            // The next import (over whatever is left) works.
            let again = config(dir.path(), &db, "new", 60, got.is_some());
            import(&again, &NoProgress).unwrap_or_else(|e| panic!("step {n}: retry: {e}"));
            assert_eq!(fingerprint(&db).as_ref(), Some(&after), "step {n}: retry");
        }
        r.is_ok() && taken < n
    });
    report.push(("first import", steps));

    // 2. `--overwrite` of an existing database: before or after, never a mix.
    let newer = imported("newer", 70);
    let steps = walk(|n| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("g.qdb");
        import(&config(dir.path(), &db, "old", 40, false), &NoProgress).unwrap();
        let before = fingerprint(&db).unwrap();
        let cfg = config(dir.path(), &db, "newer", 70, true);
        faults::arm(n);
        let r = import(&cfg, &NoProgress);
        let taken = faults::disarm();
        let got = fingerprint(&db).unwrap_or_else(|| panic!("step {n}: no database"));
        if r.is_ok() {
            assert_ne!(got, before, "step {n}");
        } else if got != before {
            // Failed after CURRENT was switched (a folder fsync): the new generation,
            // whole.
            assert_eq!(got, newer, "step {n}");
        }
        import(&config(dir.path(), &db, "newer", 70, true), &NoProgress)
            .unwrap_or_else(|e| panic!("step {n}: retry: {e}"));
        r.is_ok() && taken < n
    });
    report.push(("overwrite import", steps));

    // 3. A commit, then 4. a checkpoint, on an open store.
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.qdb");
    import(&config(dir.path(), &base, "old", 40, false), &NoProgress).unwrap();
    let copy = |to: &Path| {
        let out = std::process::Command::new("cp")
            .args(["-r", base.to_str().unwrap(), to.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(out.success());
    };
    let before = fingerprint(&base).unwrap();
    let steps = walk(|n| {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("c.qdb");
        copy(&db);
        let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
        faults::arm(n);
        let r = run(
            &mut s,
            "UNWIND range(1, 5) AS i CREATE (:P {v: 1000 + i})-[:E {w: i}]->(:P {v: 1})",
        );
        let taken = faults::disarm();
        drop(s);
        let got = fingerprint(&db).unwrap();
        let after = vec![before[0] + 10, before[1] + 5, before[2] + 5 * 1000 + 15 + 5];
        if r.is_ok() {
            assert_eq!(got, after, "step {n}");
        } else {
            assert!(got == before || got == after, "step {n}: {got:?}");
        }
        r.is_ok() && taken < n
    });
    report.push(("commit", steps));

    let steps = walk(|n| {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("k.qdb");
        copy(&db);
        let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
        run(&mut s, "UNWIND range(1, 30) AS i CREATE (:P {v: i})").unwrap();
        run(
            &mut s,
            "MATCH (a:P {v: 3}), (b:P {v: 4}) CREATE (a)-[:E]->(b)",
        )
        .unwrap();
        // Imported nodes and relationships changed: the checkpoint folds them into
        // patch files (and a new key into a new column).
        run(&mut s, "MATCH (p:P) WHERE p.v < 3 SET p.v = p.v + 100").unwrap();
        run(
            &mut s,
            "MATCH ()-[e:E]->() WHERE e.w < 5 SET e.w = e.w + 1000, e.x = 1",
        )
        .unwrap();
        let rel_sum = "MATCH ()-[e:E]->() RETURN sum(e.w) + sum(e.x)";
        let rel_print = |db: &Path| {
            let mut s = Session::open_with(db, OpenMode::Mapped, false).unwrap();
            ints(&mut s, rel_sum)
        };
        let committed = print_of(&mut s);
        let rels = ints(&mut s, rel_sum);
        faults::arm(n);
        let r = run(&mut s, "CHECKPOINT");
        let taken = faults::disarm();
        drop(s);
        // Committed writes survive whether or not the checkpoint got through.
        assert_eq!(fingerprint(&db), Some(committed.clone()), "step {n}: {r:?}");
        assert_eq!(rel_print(&db), rels, "step {n}: relationship properties");
        // And the next checkpoint works.
        let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
        run(&mut s, "CHECKPOINT").unwrap_or_else(|e| panic!("step {n}: retry: {e}"));
        drop(s);
        assert_eq!(fingerprint(&db), Some(committed), "step {n}: after retry");
        assert_eq!(rel_print(&db), rels, "step {n}: relationship properties");
        r.is_ok() && taken < n
    });
    report.push(("checkpoint", steps));

    // 5. A checkpoint that merges relationship segments: four checkpoints each add a
    // small segment of :E, the fifth (walked) merges the newest ones.
    let segments = |db: &Path| {
        let d = quiver_storage::Database::open(db, OpenMode::Mapped).unwrap();
        let e = d.rel_types().iter().find(|r| r.meta.name == "E").unwrap();
        e.meta.segments.len()
    };
    let steps = walk(|n| {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("k.qdb");
        copy(&db);
        let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
        for round in 0..5 {
            run(&mut s, "MATCH ()-[e:E]->() WITH e LIMIT 1 DELETE e").unwrap();
            run(
                &mut s,
                &format!("UNWIND range(0, {round}) AS i MATCH (a:P {{v: 3}}), (b:P {{v: 4}}) CREATE (a)-[:E {{w: i}}]->(b)"),
            )
            .unwrap();
            if round < 4 {
                run(&mut s, "CHECKPOINT").unwrap();
            }
        }
        let rel_sum = "MATCH ()-[e:E]->() RETURN count(e), sum(e.w)";
        let rel_print = |db: &Path| {
            let mut s = Session::open_with(db, OpenMode::Mapped, false).unwrap();
            ints(&mut s, rel_sum)
        };
        let committed = print_of(&mut s);
        let rels = ints(&mut s, rel_sum);
        let before = segments(&db);
        faults::arm(n);
        let r = run(&mut s, "CHECKPOINT");
        let taken = faults::disarm();
        drop(s);
        assert_eq!(fingerprint(&db), Some(committed.clone()), "step {n}: {r:?}");
        assert_eq!(rel_print(&db), rels, "step {n}: relationships");
        let mut s = Session::open_with(&db, OpenMode::Mapped, false).unwrap();
        run(&mut s, "CHECKPOINT").unwrap_or_else(|e| panic!("step {n}: retry: {e}"));
        drop(s);
        assert_eq!(fingerprint(&db), Some(committed), "step {n}: after retry");
        assert_eq!(rel_print(&db), rels, "step {n}: relationships after retry");
        assert!(
            segments(&db) < before + 1,
            "step {n}: the segments were merged"
        );
        r.is_ok() && taken < n
    });
    report.push(("checkpoint merging segments", steps));

    for (what, steps) in &report {
        eprintln!("fault injection: {what}: {steps} steps walked");
        assert!(
            *steps >= 2,
            "{what}: only {steps} steps: is the layer in the path?"
        );
    }
}
