//! Several servers of one database (issue "Past one machine"): one writer and two
//! `--read-only` readers on the same folder, each answering ROUTE with the same table.
//! The official Python driver, given a `neo4j://` address, spreads read transactions
//! over the readers and sends writes to the writer; a write sent straight to a reader
//! fails with NotALeader. Needs the neo4j driver (`.ci/run` installs it and sets
//! QUIVER_REQUIRE_BOLT_DRIVER); skipped, saying so, elsewhere.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// A port free now (bound and released: the servers must know each other's addresses
/// before they start).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `quiver serve` on `port` with `extra`; returns once it says it is serving, and the
/// line that says so.
fn serve(db: &std::path::Path, port: u16, extra: &[&str]) -> (common::Served, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args([
            "serve",
            "--no-auth",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--db")
        .arg(db)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 && !line.contains("serving") {
        line.clear();
    }
    assert!(
        line.contains("serving"),
        "the server did not start: {line:?}"
    );
    (common::Served(child), line)
}

const SCRIPT: &str = r#"
import sys
import neo4j
from neo4j import GraphDatabase
from neo4j.exceptions import NotALeader, WriteServiceUnavailable

writer, r1, r2 = sys.argv[1:4]
with GraphDatabase.driver(f"neo4j://{writer}", auth=None) as d:
    seen = {}
    for _ in range(60):
        with d.session(default_access_mode=neo4j.READ_ACCESS) as s:
            res = s.run("MATCH (n:N) RETURN count(n) AS c")
            c = res.single()["c"]
            addr = str(res.consume().server.address)
            assert c == 100, c
            seen[addr] = seen.get(addr, 0) + 1
    assert set(seen) == {r1, r2}, seen
    assert min(seen.values()) >= 10, seen
    def create(tx):
        r = tx.run("CREATE (:N {id: 1000}) RETURN 1")
        r.consume()
        return str(r.consume().server.address)
    with d.session() as s:
        at = s.execute_write(create)
    assert at == writer, at
    with d.session(default_access_mode=neo4j.READ_ACCESS) as s:
        # Readers see the database as they opened it.
        assert s.run("MATCH (n:N) RETURN count(n) AS c").single()["c"] == 100
with GraphDatabase.driver(f"bolt://{writer}", auth=None) as d:
    assert d.execute_query("MATCH (n:N) RETURN count(n) AS c").records[0]["c"] == 101
with GraphDatabase.driver(f"bolt://{r1}", auth=None) as d:
    try:
        d.execute_query("CREATE (:N {id: 2000})")
        raise SystemExit("a reader took a write")
    except (NotALeader, WriteServiceUnavailable):
        # (The driver turns NotALeader into WriteServiceUnavailable on a direct
        # connection: there is no other server to send the write to.)
        pass
print("ok")
"#;

#[test]
fn a_neo4j_driver_spreads_reads_over_readers_and_writes_to_the_writer() {
    if !common::have_driver() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    common::ok(&[
        "query",
        "--db",
        common::s(&db),
        "--create",
        "UNWIND range(1, 100) AS i CREATE (:N {id: i})",
    ]);
    common::ok(&["query", "--db", common::s(&db), "CHECKPOINT"]);
    let ports = [free_port(), free_port(), free_port()];
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let route = [
        "--route-writers",
        &addrs[0],
        "--route-readers",
        &format!("{},{}", addrs[1], addrs[2]),
    ];
    let (_w, line) = serve(&db, ports[0], &route);
    assert!(!line.contains("read only"), "{line}");
    let mut readers = Vec::new();
    for &p in &ports[1..] {
        let mut extra = vec!["--read-only"];
        extra.extend_from_slice(&route);
        let (r, line) = serve(&db, p, &extra);
        assert!(line.contains("read only"), "{line}");
        readers.push(r);
    }
    common::python_ok(&["-c", SCRIPT, &addrs[0], &addrs[1], &addrs[2]]);
}

/// A reader needs a database to open: an empty folder is an error that says so, not a
/// new database.
#[test]
fn a_reader_does_not_create_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let err = common::fails(&[
        "serve",
        "--no-auth",
        "--read-only",
        "--listen",
        "127.0.0.1:0",
        "--db",
        common::s(&dir.path().join("none")),
    ]);
    assert!(err.contains("no quiver database here"), "{err}");
}
