//! `quiver import --append` into a database that is open (served): the append runs
//! beside readers that hold snapshots, transactions left open across it and writers
//! that commit while it runs, and none of them waits for it or fails because of it
//! (`quiver_query::append`). After it, and after a reopen, the graph is the base, the
//! appended files and every committed write, and nothing else.

mod common;

use common::{ints, rows, run};
use quiver_import::{ImportConfig, InputGroup, NoProgress, Phase, Progress};
use quiver_query::{Session, Value};
use quiver_storage::manifest::IdType;
use quiver_storage::OpenMode;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Nodes `P` with ids `lo..hi` (name `p<i>`) and relationships `K` from each to
/// `(i * 7 + 3) % i` (an older one) and to its successor: files under `dir`.
fn files(dir: &Path, tag: &str, lo: i64, hi: i64) -> (PathBuf, PathBuf) {
    let (n, r) = (
        dir.join(format!("{tag}-p.csv")),
        dir.join(format!("{tag}-k.csv")),
    );
    let mut nodes = String::from("id:ID(P),name\n");
    let mut rels = String::from(":START_ID(P),:END_ID(P),w:int\n");
    for i in lo..hi {
        nodes += &format!("{i},p{i}\n");
        if i > 0 {
            rels += &format!("{i},{},{i}\n", (i * 7 + 3) % i);
        }
        if i + 1 < hi {
            rels += &format!("{i},{},{}\n", i + 1, -i);
        }
    }
    std::fs::write(&n, nodes).unwrap();
    std::fs::write(&r, rels).unwrap();
    (n, r)
}

fn config(db: &Path, (n, r): &(PathBuf, PathBuf)) -> ImportConfig {
    let mut cfg = ImportConfig::new(db);
    cfg.nodes
        .push(InputGroup::parse(&format!("P={}", n.display())).unwrap());
    cfg.relationships
        .push(InputGroup::parse(&format!("K={}", r.display())).unwrap());
    cfg.id_type = IdType::Integer;
    cfg.memory_budget_bytes = 64 << 20;
    cfg.threads = 2;
    cfg
}

/// A database of nodes `0..n` imported from `files`.
fn base(dir: &Path, n: i64) -> PathBuf {
    let db = dir.join("g.qdb");
    let f = files(dir, "base", 0, n);
    quiver_import::import(&config(&db, &f), &NoProgress).unwrap();
    db
}

/// What must hold of `P` for ids `0..n`: every node once, every relationship of the
/// files, seeks by id, and the appended nodes' relationships to the base's.
fn check_p(s: &mut Session, n: i64) {
    assert_eq!(ints(s, "MATCH (p:P) RETURN count(*)"), vec![n]);
    assert_eq!(
        ints(s, "MATCH (p:P) RETURN sum(p.id)"),
        vec![n * (n - 1) / 2]
    );
    // One edge from each i > 0 back, one to each successor (within each file).
    let r = rows(
        s,
        "MATCH (a:P)-[k:K]->(b:P) WHERE k.w > 0 RETURN count(*), sum(k.w)",
    );
    assert_eq!(
        r,
        vec![vec![Value::Int(n - 1), Value::Int(n * (n - 1) / 2)]]
    );
    for i in [1, n / 2, n - 1] {
        let back = (i * 7 + 3) % i;
        let q = format!("MATCH (p:P {{id: {i}}})-[k:K]->(q) WHERE k.w > 0 RETURN p.name, q.id");
        assert_eq!(
            rows(s, &q),
            vec![vec![Value::str(&format!("p{i}")), Value::Int(back)]],
            "{q}"
        );
        let q = format!("MATCH (p:P {{id: {back}}})<-[k:K {{w: {i}}}]-(q) RETURN q.id");
        assert_eq!(ints(s, &q), vec![i], "{q}");
    }
}

/// Runs `f` when the append reaches `phase` (from the import's thread).
struct At<F: Fn() + Send + Sync> {
    phase: Phase,
    f: F,
    done: AtomicBool,
}

impl<F: Fn() + Send + Sync> Progress for At<F> {
    fn phase(&self, phase: Phase, _: u64) {
        if phase == self.phase && !self.done.swap(true, Ordering::SeqCst) {
            (self.f)();
        }
    }
    fn advance(&self, _: u64, _: u64) {}
}

/// Seeds: the phase at which writers commit inside the append (each phase of it in
/// turn), the append's size, whether the transaction open across it commits or rolls
/// back, and whether a checkpoint runs just before it.
#[test]
fn an_append_beside_snapshots_open_transactions_and_writers() {
    for seed in 0..10u64 {
        beside(seed);
    }
}

fn beside(seed: u64) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let phase = Phase::ALL[seed as usize % Phase::ALL.len()];
    let size = rng.random_range(1..2500i64);
    let commit_open = rng.random_bool(0.7);
    let d = tempfile::tempdir().unwrap();
    let db = base(d.path(), 3000);
    let mut s = Session::open(&db, OpenMode::Mapped).unwrap();
    let store = s.store().clone();
    // Writes before the append, not checkpointed: the append checkpoints them first.
    run(&mut s, "CREATE (:W {i: -1})").unwrap();
    run(&mut s, "MATCH (p:P {id: 5}) SET p.seen = true").unwrap();
    // A reader holding a snapshot, and a transaction that wrote, both open across it.
    let mut reader = Session::on(store.clone());
    run(&mut reader, "BEGIN").unwrap();
    assert_eq!(ints(&mut reader, "MATCH (p:P) RETURN count(*)"), vec![3000]);
    let mut open_tx = Session::on(store.clone());
    run(&mut open_tx, "BEGIN").unwrap();
    // (Its relationship is of the type the append adds to: its id, handed out before
    // the append's publish, is a hole of it that the commit brings back.)
    run(
        &mut open_tx,
        "MATCH (a:P {id: 1}), (b:P {id: 2}) CREATE (:W {i: -2}), (a)-[:K {w: -1000000}]->(b)",
    )
    .unwrap();

    if rng.random_bool(0.3) {
        run(&mut s, "CHECKPOINT").unwrap();
    }
    let extra = files(d.path(), "more", 3000, 3000 + size);
    let cfg = config(&db, &extra);
    // Writers that commit while the append runs: one at a phase of it, one from the
    // start on another thread.
    let writes = Mutex::new(Vec::new());
    let writer = |from: i64| {
        let mut w = Session::on(store.clone());
        for i in from..from + 50 {
            let r = run(&mut w, &format!("CREATE (:W {{i: {i}}})"));
            writes.lock().unwrap().push(r.is_ok());
        }
        // Both writers set the same node: the later one may meet the other's open
        // write, a retryable conflict, and retries as a driver would.
        loop {
            match run(&mut w, "MATCH (p:P {id: 7}) SET p.touched = 1") {
                Err(e) if e.is_retryable() => std::thread::yield_now(),
                r => {
                    r.unwrap();
                    break;
                }
            }
        }
    };
    let progress = At {
        phase,
        f: || writer(0),
        done: AtomicBool::new(false),
    };
    let appended = std::thread::scope(|t| {
        let h = t.spawn(|| {
            quiver_query::append::append(&store, cfg, None, true, &Default::default(), &progress)
        });
        writer(1000);
        h.join().unwrap()
    })
    .unwrap();
    assert_eq!(appended.summary.n_nodes, size as u64);
    assert!(
        writes.lock().unwrap().iter().all(|&ok| ok),
        "a write failed beside the append"
    );

    // The reader's snapshot did not move; the open transaction commits (or not).
    assert_eq!(ints(&mut reader, "MATCH (p:P) RETURN count(*)"), vec![3000]);
    run(&mut reader, "COMMIT").unwrap();
    run(
        &mut open_tx,
        if commit_open { "COMMIT" } else { "ROLLBACK" },
    )
    .unwrap();
    let w = 101 + i64::from(commit_open);

    let check = |s: &mut Session| {
        check_p(s, 3000 + size);
        // Every write committed, once.
        assert_eq!(
            ints(s, "MATCH (w:W) RETURN count(*)"),
            vec![w],
            "seed {seed}"
        );
        assert_eq!(ints(s, "MATCH (w:W) RETURN count(DISTINCT w.i)"), vec![w]);
        let r = rows(
            s,
            "MATCH (p:P) WHERE p.seen OR p.touched = 1 RETURN p.id ORDER BY p.id",
        );
        assert_eq!(r, vec![vec![Value::Int(5)], vec![Value::Int(7)]]);
        let q = "MATCH (:P {id: 1})-[:K {w: -1000000}]->(b) RETURN b.id";
        let want = if commit_open { vec![2] } else { vec![] };
        assert_eq!(ints(s, q), want, "seed {seed}");
        // Node ids are distinct across the append and the writes beside it.
        assert_eq!(
            ints(s, "MATCH (n) RETURN count(DISTINCT id(n))"),
            vec![3000 + size + w]
        );
    };
    let mut s2 = Session::on(store.clone());
    check(&mut s2);
    // The private folder is gone.
    let bulk = db.join("bulk");
    assert!(!bulk.exists() || std::fs::read_dir(&bulk).unwrap().next().is_none());
    // Durable: after a reopen (the log replayed onto the append's generation), and
    // after a checkpoint.
    drop((s, s2, reader, open_tx, store));
    let mut s = Session::open(&db, OpenMode::Mapped).unwrap();
    check(&mut s);
    run(&mut s, "CHECKPOINT").unwrap();
    check(&mut s);
    drop(s);
    let mut s = Session::open(&db, OpenMode::Mapped).unwrap();
    check(&mut s);
}

#[test]
fn appends_at_once_all_land() {
    let d = tempfile::tempdir().unwrap();
    let db = base(d.path(), 1000);
    let s = Session::open(&db, OpenMode::Mapped).unwrap();
    let store = s.store().clone();
    // Four appends, each its own id range; their relationships reach the base's nodes.
    let cfgs: Vec<ImportConfig> = (0..4)
        .map(|k| {
            config(
                &db,
                &files(d.path(), &format!("a{k}"), 1000 + k * 500, 1500 + k * 500),
            )
        })
        .collect();
    let done: Vec<_> = std::thread::scope(|t| {
        let hs: Vec<_> = cfgs
            .into_iter()
            .map(|cfg| {
                let store = store.clone();
                t.spawn(move || {
                    quiver_query::append::append(
                        &store,
                        cfg,
                        None,
                        true,
                        &Default::default(),
                        &NoProgress,
                    )
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &done {
        assert_eq!(r.as_ref().map(|a| a.summary.n_nodes).unwrap(), 500);
    }
    let mut s = Session::open(&db, OpenMode::Mapped).unwrap();
    assert_eq!(ints(&mut s, "MATCH (p:P) RETURN count(*)"), vec![3000]);
    // Each file's edges back go to older ids, possibly in another append.
    for i in [1200i64, 1700, 2200, 2999] {
        let q = format!("MATCH (p:P {{id: {i}}})-[k:K]->(q) WHERE k.w > 0 RETURN q.id");
        assert_eq!(ints(&mut s, &q), vec![(i * 7 + 3) % i], "{q}");
    }
}

#[test]
fn a_failed_append_changes_nothing_and_writes_go_on() {
    let d = tempfile::tempdir().unwrap();
    let db = base(d.path(), 500);
    let mut s = Session::open(&db, OpenMode::Mapped).unwrap();
    let store = s.store().clone();
    let bad = files(d.path(), "bad", 500, 900);
    // A relationship to a node nobody has: the append stops (no --skip-bad-rows).
    let mut text = std::fs::read_to_string(&bad.1).unwrap();
    text += "899,123456,5\n";
    std::fs::write(&bad.1, text).unwrap();
    let err = quiver_query::append::append(
        &store,
        config(&db, &bad),
        None,
        true,
        &Default::default(),
        &NoProgress,
    );
    let msg = err.err().expect("the append must fail").to_string();
    assert!(msg.contains("123456") || msg.contains("line"), "{msg}");
    assert_eq!(ints(&mut s, "MATCH (p:P) RETURN count(*)"), vec![500]);
    run(&mut s, "CREATE (:W {i: 1})").unwrap();
    let bulk = db.join("bulk");
    assert!(!bulk.exists() || std::fs::read_dir(&bulk).unwrap().next().is_none());
    // A good append after it, and the write before it, both there after a reopen.
    let good = files(d.path(), "good", 500, 700);
    quiver_query::append::append(
        &store,
        config(&db, &good),
        None,
        true,
        &Default::default(),
        &NoProgress,
    )
    .unwrap();
    drop((s, store));
    let mut s = Session::open(&db, OpenMode::Mapped).unwrap();
    check_p(&mut s, 700);
    assert_eq!(ints(&mut s, "MATCH (w:W) RETURN count(*)"), vec![1]);
}

#[test]
fn a_node_deleted_while_an_append_connects_it_fails_the_append() {
    let d = tempfile::tempdir().unwrap();
    let db = base(d.path(), 500);
    let s = Session::open(&db, OpenMode::Mapped).unwrap();
    let store = s.store().clone();
    // Node 3 is an end of the appended relationships (from 4xx's (i * 7 + 3) % i for
    // some i); it is deleted once the append has resolved its endpoints.
    let extra = files(d.path(), "more", 500, 800);
    let targets: Vec<i64> = (500..800).map(|i| (i * 7 + 3) % i).collect();
    let victim = targets[0];
    let progress = At {
        phase: Phase::Csr,
        f: || {
            let mut w = Session::on(store.clone());
            run(
                &mut w,
                &format!("MATCH (p:P {{id: {victim}}}) DETACH DELETE p"),
            )
            .unwrap();
        },
        done: AtomicBool::new(false),
    };
    let r = quiver_query::append::append(
        &store,
        config(&db, &extra),
        None,
        true,
        &Default::default(),
        &progress,
    );
    let e = r.err().expect("the append must fail");
    assert!(e.to_string().contains("deleted"), "{e}");
    drop((s, store));
    let mut s = Session::open(&db, OpenMode::Mapped).unwrap();
    assert_eq!(ints(&mut s, "MATCH (p:P) RETURN count(*)"), vec![499]);
    let q = format!("MATCH (p:P {{id: {victim}}}) RETURN count(*)");
    assert_eq!(ints(&mut s, &q), vec![0]);
}

#[test]
fn an_append_waits_for_its_memory_grant_and_is_listed_meanwhile() {
    use quiver_engine::store::StoreOptions;
    let d = tempfile::tempdir().unwrap();
    let db = base(d.path(), 500);
    let opts = StoreOptions {
        memory_limit: 256 << 20,
        ..StoreOptions::default()
    };
    let mut s = Session::open_opts(&db, opts, false).unwrap();
    let store = s.store().clone();
    // Other work holds most of the limit: the append's 64 MiB must wait for it.
    let hog = store.memory.try_grant(224 << 20, "other work").unwrap();
    let extra = files(d.path(), "more", 500, 700);
    let cfg = config(&db, &extra);
    std::thread::scope(|t| {
        let h = t.spawn(|| {
            quiver_query::append::append(&store, cfg, None, true, &Default::default(), &NoProgress)
        });
        let listed = |s: &mut Session| {
            // (currentQuery and status, Neo4j's 7th and 9th columns)
            rows(s, "SHOW TRANSACTIONS")
                .into_iter()
                .any(|r| match (&r[6], &r[8]) {
                    (Value::Str(q), Value::Str(st)) => {
                        q.starts_with("import --append --nodes P=")
                            && st.starts_with("Waiting for memory")
                    }
                    _ => false,
                })
        };
        let t0 = std::time::Instant::now();
        while !listed(&mut s) {
            assert!(
                t0.elapsed().as_secs() < 20,
                "the waiting append is not listed: {:?}",
                rows(&mut s, "SHOW TRANSACTIONS")
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Listed as waiting: it is waiting now, however fast the listing was.
        std::thread::sleep(std::time::Duration::from_millis(5));
        drop(hog);
        let done = h.join().unwrap().unwrap();
        assert!(done.waited_for_memory > std::time::Duration::ZERO);
    });
    check_p(&mut s, 700);
    // Nothing is listed once it is done, and its grant is back.
    assert!(store.memory.used_bytes() < 64 << 20);
}
