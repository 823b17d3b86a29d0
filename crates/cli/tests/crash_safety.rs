//! A killed import leaves no database and nothing the next run trips on; a killed
//! `--overwrite` leaves the previous database as it was.

mod common;
use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts quiver with `args` and sends `signal` as soon as `started(dir)` sees the
/// import's first written file: the signal lands mid-import, not at a time guessed
/// for this machine. Returns the child's output; panics if the run ended before the
/// file appeared (the test would otherwise pass without testing anything).
fn signal_when(args: &[&str], signal: i32, started: impl Fn() -> bool) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !started() {
        if child.try_wait().unwrap().is_some() {
            panic!("the import ended before it wrote anything we could see");
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no file appeared");
        std::thread::sleep(Duration::from_micros(200));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let out = child.wait_with_output().unwrap();
    assert!(
        !out.status.success(),
        "the import finished before the signal arrived; make the input larger"
    );
    out
}

/// A segment file in a generation folder of a staging directory beside `db` (a first
/// import) or inside `db` (generation `gen` of an overwrite).
fn segment_written(db: &std::path::Path, gen: &str) -> bool {
    let parent = db.parent().unwrap();
    let name = db.file_name().unwrap().to_string_lossy().to_string();
    let mut dirs: Vec<std::path::PathBuf> = vec![db.join(gen)];
    if let Ok(rd) = std::fs::read_dir(parent) {
        for e in rd.flatten() {
            if e.file_name()
                .to_string_lossy()
                .starts_with(&format!(".{name}.staging-"))
            {
                dirs.push(e.path().join(gen));
            }
        }
    }
    dirs.iter().any(|d| {
        std::fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        })
    })
}

#[test]
fn killed_imports_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(&["generate", "social", "--scale", "0.2", "--out", s(d)]);
    let db = d.join("g.qdb");
    let owned = social_import(&db, d);
    let args: Vec<&str> = owned.iter().map(|a| a.as_str()).collect();
    for round in 0..3 {
        signal_when(&args, libc::SIGKILL, || segment_written(&db, "g000001"));
        // Nothing published: no database at the path (or no CURRENT in it).
        assert!(
            !db.join("CURRENT").exists(),
            "killed in round {round} left a database"
        );
        let err = fails(&["info", "--db", s(&db)]);
        assert!(
            err.contains("no quiver database here") || err.contains("No such file"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&db);
    }
    // The next run succeeds and cleans what the killed runs left.
    ok(&args);
    ok(&["check", "--db", s(&db)]);
    let stray: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("staging"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");

    // Killed while replacing: the old database stays whole.
    let before = info(&db, "mapped");
    let mut over = args.to_vec();
    over.push("--overwrite");
    for _ in 0..3 {
        // The previous round's leftover generation would look like this round's
        // progress; the next writer removes it anyway (checked at the end).
        let _ = std::fs::remove_dir_all(db.join("g000002"));
        signal_when(&over, libc::SIGKILL, || segment_written(&db, "g000002"));
        let (a, b) = (&before, info(&db, "mapped"));
        assert_eq!(a["nodes"], b["nodes"]);
        assert_eq!(a["relationships"], b["relationships"]);
        ok(&["check", "--db", s(&db)]);
    }
    // Leave a killed run's generation in place: the next overwrite removes it and
    // every generation the new one does not use.
    signal_when(&over, libc::SIGKILL, || segment_written(&db, "g000002"));
    ok(&over);
    assert_eq!(generation_dirs(&db), vec!["g000002".to_string()]);
}

#[test]
fn ctrl_c_stops_cleanly_and_removes_the_staging() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(&["generate", "social", "--scale", "0.3", "--out", s(d)]);
    let db = d.join("g.qdb");
    let owned = social_import(&db, d);
    let args: Vec<&str> = owned.iter().map(|a| a.as_str()).collect();
    let out = signal_when(&args, libc::SIGINT, || segment_written(&db, "g000001"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("interrupted"), "{err}");
    assert!(!db.exists());
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_killed_bulk_load_leaves_the_database_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let db = d.join("g.qdb");
    ok(&["query", "--db", s(&db), "CREATE (:P {id: -1})"]);
    // Enough rows that the direct path writes row groups (one per 1,048,576) well before
    // the statement ends.
    let mut csv = String::from("id,v\n");
    for i in 0..2_500_000u64 {
        csv += &format!("{i},{}\n", i * 7);
    }
    std::fs::create_dir_all(d.join("import")).unwrap();
    write(&d.join("import"), "p.csv", &csv);
    let mut child = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args([
            "query",
            "--db",
            s(&db),
            "LOAD CSV WITH HEADERS FROM 'p.csv' AS row CREATE (:P {id: toInteger(row.id), v: toInteger(row.v)})",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once a table file is being written, so the kill is known to land mid-load.
    let bulk = db.join("bulk");
    let t = Instant::now();
    let mut seen = false;
    while t.elapsed() < Duration::from_secs(120) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::fs::read_dir(&bulk).is_ok_and(|mut r| r.next().is_some()) {
            seen = true;
            child.kill().unwrap(); // SIGKILL: no destructor runs.
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.wait().unwrap();
    assert!(seen, "the load finished before a table file appeared");
    // Nothing of the load is visible; its files are gone at the next open.
    let out = ok(&[
        "query",
        "--db",
        s(&db),
        "--format",
        "csv",
        "MATCH (p:P) RETURN count(p)",
    ]);
    assert!(out.lines().any(|l| l.trim() == "1"), "{out}");
    assert!(std::fs::read_dir(&bulk).map_or(true, |mut r| r.next().is_none()));
    ok(&["check", "--db", s(&db)]);
    ok(&["query", "--db", s(&db), "CREATE (:P {id: -2})"]);
}

/// Whether a checkpoint is writing a generation: a generation folder past the one
/// `CURRENT` names.
fn checkpoint_running(db: &std::path::Path) -> bool {
    let Ok(current) = std::fs::read_to_string(db.join("CURRENT")) else {
        return false;
    };
    // `manifest-000011.json <crc>`: generation 11.
    let Some(gen) = current
        .strip_prefix("manifest-")
        .and_then(|r| r.split('.').next())
        .and_then(|n| n.parse::<u64>().ok())
    else {
        return false;
    };
    generation_dirs(db)
        .iter()
        .filter_map(|g| g.strip_prefix('g').and_then(|n| n.parse::<u64>().ok()))
        .any(|g| g > gen)
}

/// `quiver shell` on `db` with an automatic checkpoint every `log_size` of log, its
/// stdin to write statements to, and a count of the statements it acknowledged (each
/// prints its counters, one line with "nodes created"), kept by the thread returned.
#[allow(clippy::type_complexity)]
fn counting_shell(
    db: &std::path::Path,
    log_size: &str,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
    std::thread::JoinHandle<()>,
) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["shell", "--db", s(db), "--checkpoint-log-size", log_size])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let acks = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let reader = {
        let acks = acks.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("nodes created") {
                    acks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        })
    };
    (child, stdin, acks, reader)
}

/// A SIGKILL while an automatic checkpoint writes its generation loses no commit the
/// shell acknowledged: each statement sets a property of an imported node and creates
/// a node, a checkpoint runs every few hundred of them (`--checkpoint-log-size 32KiB`),
/// and the kill lands once one is seen writing. Then every acknowledged statement's
/// writes are there, the database checks clean, and it takes writes and checkpoints.
#[test]
fn a_kill_during_an_automatic_checkpoint_loses_no_acknowledged_commit() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let db = d.join("g.qdb");
    const USERS: u64 = 20_000;
    let mut csv = String::from("id:ID(U),v:int\n");
    for i in 0..USERS {
        csv += &format!("{i},0\n");
    }
    let users = write(d, "u.csv", &csv);
    ok(&[
        "import",
        "--db",
        s(&db),
        "--id-type",
        "integer",
        "--nodes",
        &format!("U={}", users.display()),
    ]);
    let (mut child, mut stdin, acks, reader) = counting_shell(&db, "32KiB");
    let t = Instant::now();
    let mut sent = 0u64;
    let mut killed_at = None;
    while t.elapsed() < Duration::from_secs(300) {
        // Keep a few statements ahead of the acknowledgements.
        while sent < acks.load(std::sync::atomic::Ordering::SeqCst) + 4 {
            let i = sent;
            writeln!(
                stdin,
                "MATCH (n:U {{id: {}}}) SET n.v = {} CREATE (:W {{k: {i}}});",
                i % USERS,
                i + 1
            )
            .unwrap();
            stdin.flush().unwrap();
            sent += 1;
        }
        if sent > 100 && checkpoint_running(&db) {
            child.kill().unwrap(); // SIGKILL: no destructor runs.
            killed_at = Some(acks.load(std::sync::atomic::Ordering::SeqCst));
            break;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    child.wait().unwrap();
    reader.join().unwrap();
    let acked = acks.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!("killed at {killed_at:?} acknowledged, {acked} in all, {sent} sent");
    assert!(
        killed_at.is_some(),
        "no automatic checkpoint was seen writing in 300 s ({acked} statements acknowledged)"
    );
    assert!(acked >= 100, "only {acked} statements acknowledged");
    // Every acknowledged statement's node and SET are there (later ones may be too).
    let q = |cypher: &str| -> u64 {
        let out = ok(&["query", "--db", s(&db), "--format", "csv", cypher]);
        out.lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("{cypher}: {out}"))
    };
    assert_eq!(
        q(&format!(
            "MATCH (w:W) WHERE w.k < {acked} RETURN count(DISTINCT w.k)"
        )),
        acked
    );
    assert_eq!(
        q(&format!(
            "MATCH (n:U) WHERE n.id < {acked} AND n.v < n.id + 1 RETURN count(n)"
        )),
        0,
        "a SET that was acknowledged is missing"
    );
    assert!(q("MATCH (w:W) RETURN count(w)") <= sent);
    ok(&["check", "--db", s(&db)]);
    ok(&["query", "--db", s(&db), "CREATE (:W {k: -1})"]);
    ok(&["query", "--db", s(&db), "CHECKPOINT"]);
    assert_eq!(q("MATCH (w:W {k: -1}) RETURN count(w)"), 1);
}

/// A SIGKILL while checkpoints compact the tables of a queue's consumed events: each
/// statement creates an event and deletes those three behind it, a checkpoint runs
/// every few hundred statements and empties the tables whose rows all died, and the
/// kill lands once one is seen writing. The database then opens as before: the users
/// untouched, every acknowledged deletion there, `quiver check` clean, and it takes
/// writes and checkpoints.
#[test]
fn a_kill_during_a_compacting_checkpoint_loses_nothing() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let db = d.join("g.qdb");
    let mut csv = String::from("id:ID(U),v:int\n");
    for i in 0..1000 {
        csv += &format!("{i},0\n");
    }
    let users = write(d, "u.csv", &csv);
    ok(&[
        "import",
        "--db",
        s(&db),
        "--id-type",
        "integer",
        "--nodes",
        &format!("U={}", users.display()),
    ]);
    let (mut child, mut stdin, acks, reader) = counting_shell(&db, "16KiB");
    let t = Instant::now();
    let mut sent = 0u64;
    let mut checkpoints_seen = 0;
    let mut was_running = false;
    let mut killed = false;
    while t.elapsed() < Duration::from_secs(300) {
        while sent < acks.load(std::sync::atomic::Ordering::SeqCst) + 4 {
            let i = sent;
            writeln!(
                stdin,
                "CREATE (:E {{k: {i}, body: 'event {i}'}}) WITH 1 AS one MATCH (e:E) WHERE e.k <= {} DELETE e;",
                i as i64 - 3
            )
            .unwrap();
            stdin.flush().unwrap();
            sent += 1;
        }
        // Past a few checkpoints (tables to compact exist), kill one as it writes.
        let running = checkpoint_running(&db);
        if running && !was_running {
            checkpoints_seen += 1;
        }
        was_running = running;
        if running && checkpoints_seen >= 4 {
            child.kill().unwrap(); // SIGKILL: no destructor runs.
            killed = true;
            break;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    child.wait().unwrap();
    reader.join().unwrap();
    let acked = acks.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!(
        "killed after {acked} acknowledged, {sent} sent, {checkpoints_seen} checkpoints seen"
    );
    assert!(
        killed,
        "no fourth checkpoint seen writing in 300 s ({acked} acknowledged)"
    );
    let q = |cypher: &str| -> i64 {
        let out = ok(&["query", "--db", s(&db), "--format", "csv", cypher]);
        out.lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("{cypher}: {out}"))
    };
    ok(&["check", "--db", s(&db)]);
    assert_eq!(q("MATCH (u:U) RETURN count(u)"), 1000);
    assert_eq!(q("MATCH (u:U) RETURN sum(u.id)"), 999 * 1000 / 2);
    // Statement `acked - 1` was acknowledged: every event it deleted is gone.
    assert_eq!(
        q(&format!(
            "MATCH (e:E) WHERE e.k <= {} RETURN count(e)",
            acked as i64 - 4
        )),
        0
    );
    assert!(q("MATCH (e:E) RETURN count(e)") <= 3 + (sent - acked) as i64);
    ok(&["query", "--db", s(&db), "CREATE (:E {k: -1})"]);
    ok(&["query", "--db", s(&db), "CHECKPOINT"]);
    assert_eq!(q("MATCH (e:E {k: -1}) RETURN count(e)"), 1);
    ok(&["check", "--db", s(&db)]);
}
