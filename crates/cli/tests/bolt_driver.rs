//! `quiver serve` against the official neo4j Python driver (issue "Server"): connect,
//! authenticate, transactions, every value type both ways, errors as the driver's
//! exception classes, a large streamed result, neo4j:// routing. `.ci/run` installs
//! the driver and sets QUIVER_REQUIRE_BOLT_DRIVER, so in CI a missing driver fails the
//! test; elsewhere it is reported and skipped.

mod common;

use std::io::Write;

/// A database with user alice (password `pa55word`) and a server on it; the server's
/// address. The server is killed when the returned guard drops.
fn start(db: &std::path::Path, extra: &[&str]) -> (common::Served, String) {
    common::ok(&["query", "--db", common::s(db), "--create", "RETURN 1"]);
    common::serve_as_alice(db, extra)
}

#[test]
fn the_python_driver_works_against_quiver_serve() {
    if !common::have_driver() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&dir.path().join("db"), &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bolt_driver.py");
    common::python_ok(&[script, &format!("bolt://{addr}"), "alice", "pa55word"]);
}

/// `--tls-cert` / `--tls-key`: the driver connects with `bolt+ssc://` (TLS, the
/// self-signed certificate accepted); a plain `bolt://` client does not get in.
#[test]
fn tls_with_a_self_signed_certificate() {
    if !common::have_driver() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let (c, k) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&c, cert.cert.pem()).unwrap();
    std::fs::write(&k, cert.key_pair.serialize_pem()).unwrap();
    let (_server, addr) = start(
        &dir.path().join("db"),
        &[
            "--tls-cert",
            c.to_str().unwrap(),
            "--tls-key",
            k.to_str().unwrap(),
        ],
    );
    let code = format!(
        r#"
import sys
from neo4j import GraphDatabase
with GraphDatabase.driver("bolt+ssc://{addr}", auth=("alice", "pa55word")) as d:
    assert d.execute_query("RETURN 41 + 1 AS x").records[0]["x"] == 42
try:
    with GraphDatabase.driver("bolt://{addr}", auth=("alice", "pa55word"), connection_timeout=5) as d:
        d.verify_connectivity()
    sys.exit("a plaintext client got in")
except Exception as e:
    if "plaintext" in str(e):
        raise
print("ok")
"#
    );
    common::python_ok(&["-c", &code]);
}

/// `--query-timeout-secs`: a statement past the limit is stopped and reported as a
/// timeout; the server and the session stay usable.
#[test]
fn a_statement_past_the_query_timeout_is_stopped() {
    if !common::have_driver() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&dir.path().join("db"), &["--query-timeout-secs", "1"]);
    let code = format!(
        r#"
import time
from neo4j import GraphDatabase, exceptions
with GraphDatabase.driver("bolt://{addr}", auth=("alice", "pa55word")) as d:
    d.execute_query("UNWIND range(1, 3000) AS i CREATE (:N {{i: i}})")
    t = time.time()
    try:
        # 2.7e10 rows of a cartesian product: minutes of work, little memory.
        d.execute_query("MATCH (a:N), (b:N), (c:N) WHERE a.i + b.i + c.i < 0 RETURN count(*)")
        raise SystemExit("the statement was not stopped")
    except exceptions.ClientError as e:
        assert "timeout" in e.message, e.message
    assert time.time() - t < 30, time.time() - t
    assert d.execute_query("RETURN 1 AS one").records[0]["one"] == 1
print("ok")
"#
    );
    common::python_ok(&["-c", &code]);
}

/// The driver's own timeout (Bolt's `tx_timeout`, on an auto-commit RUN and on BEGIN)
/// ends the statement with Neo4j's code, whatever operator is running: a cartesian
/// product, a long UNWIND, a MERGE loop, a sort, and a statement in an explicit
/// transaction (which is then rolled back). The server and the session stay usable.
#[test]
fn the_drivers_transaction_timeout_ends_each_kind_of_statement() {
    if !common::have_driver() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&dir.path().join("db"), &[]);
    let code = format!(
        r#"
import time
from neo4j import GraphDatabase, Query, exceptions
CODE = "Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration"
slow = {{
    "cartesian product": "MATCH (a:N), (b:N), (c:N) WHERE a.i + b.i + c.i < 0 RETURN count(*)",
    "long UNWIND": "UNWIND range(1, 4000000000) AS x WITH x WHERE x < 0 RETURN count(*)",
    "MERGE loop": "UNWIND range(1, 100000000) AS x MERGE (m:M {{v: x % 5000}}) RETURN count(*)",
    "sort": "MATCH (a:N), (b:N), (c:N) WITH a.i * b.i - c.i AS k ORDER BY k RETURN k SKIP 5 LIMIT 1",
}}
with GraphDatabase.driver("bolt://{addr}", auth=("alice", "pa55word")) as d:
    d.execute_query("UNWIND range(1, 2000) AS i CREATE (:N {{i: i}})")
    with d.session() as s:
        for kind, q in slow.items():
            t = time.time()
            try:
                s.run(Query(q, timeout=0.5)).consume()
                raise SystemExit(kind + ": ran to its end")
            except exceptions.ClientError as e:
                assert e.code == CODE, (kind, e.code, e.message)
            late = time.time() - t - 0.5
            print(f"{{kind}}: stopped {{late * 1000:.0f}} ms after the timeout")
            # Stopped, not run to its end (minutes): the bound is loose for a loaded machine.
            assert late < 10, (kind, late)
        # An explicit transaction: its statement is ended, its writes rolled back.
        t = time.time()
        tx = s.begin_transaction(timeout=0.5)
        tx.run("CREATE (:Written)").consume()
        try:
            tx.run(slow["cartesian product"]).consume()
            raise SystemExit("the transaction's statement ran to its end")
        except exceptions.ClientError as e:
            assert e.code == CODE, e.code
        finally:
            tx.close()
        assert time.time() - t < 10.5
        assert s.run("MATCH (w:Written) RETURN count(w) AS n").single()["n"] == 0
        # A transaction left idle past its timeout cannot commit.
        tx = s.begin_transaction(timeout=0.2)
        tx.run("CREATE (:Late)").consume()
        time.sleep(0.4)
        try:
            tx.commit()
            raise SystemExit("a transaction past its timeout committed")
        except exceptions.ClientError as e:
            assert e.code == CODE, e.code
        assert s.run("MATCH (w:Late) RETURN count(w) AS n").single()["n"] == 0
        # A timeout the statement stays within changes nothing.
        assert s.run(Query("MATCH (n:N) RETURN count(n) AS n", timeout=30)).single()["n"] == 2000
print("ok")
"#
    );
    common::python_ok(&["-c", &code]);
}

/// `--max-connections`: a client past the limit gets a transient error (which drivers
/// retry), not a dropped socket; once a connection frees, it gets in.
#[test]
fn a_client_past_max_connections_gets_a_transient_error() {
    if !common::have_driver() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&dir.path().join("db"), &["--max-connections", "1"]);
    let code = format!(
        r#"
from neo4j import GraphDatabase, exceptions
auth = ("alice", "pa55word")
d1 = GraphDatabase.driver("bolt://{addr}", auth=auth)
s1 = d1.session()
s1.run("RETURN 1").consume()
d2 = GraphDatabase.driver("bolt://{addr}", auth=auth, max_transaction_retry_time=0.5)
try:
    d2.execute_query("RETURN 2")
    raise SystemExit("a second client got in past --max-connections 1")
except exceptions.TransientError as e:
    assert "max-connections" in e.message, e.message
s1.close()
d1.close()
import time
time.sleep(0.5)
assert d2.execute_query("RETURN 3 AS x").records[0]["x"] == 3
d2.close()
print("ok")
"#
    );
    common::python_ok(&["-c", &code]);
}

/// Silent sockets cannot lock clients out: unauthenticated connections have their own
/// limit and a deadline, so a driver gets in while they are open, and a peer that sends
/// a byte at a time is closed at the deadline.
#[test]
fn silent_and_slow_sockets_do_not_lock_clients_out() {
    use std::io::Read;
    use std::net::TcpStream;
    use std::time::{Duration, Instant};
    if !common::have_driver() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(
        &dir.path().join("db"),
        &[
            "--max-connections",
            "2",
            "--max-pending-connections",
            "8",
            "--auth-timeout-secs",
            "1",
        ],
    );
    // Twenty sockets that connect and never send a byte (past both limits).
    let silent: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    // A slowloris: the handshake's preamble a byte at a time.
    let mut slow = TcpStream::connect(&addr).unwrap();
    let t = Instant::now();
    let code = format!(
        r#"
from neo4j import GraphDatabase
d = GraphDatabase.driver("bolt://{addr}", auth=("alice", "pa55word"), max_transaction_retry_time=15)
assert d.execute_query("RETURN 7 AS x").records[0]["x"] == 7
d.close()
print("ok")
"#
    );
    common::python_ok(&["-c", &code]);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let closed_at = Instant::now();
    let mut closed = false;
    for b in [0x60u8, 0x60, 0xB0, 0x17].iter().cycle().take(40) {
        if slow.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        slow.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 8];
        let r = slow.read(&mut buf);
        slow.set_nonblocking(false).unwrap();
        if matches!(r, Ok(0)) || matches!(&r, Err(e) if e.kind() != std::io::ErrorKind::WouldBlock)
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "the slow socket was not closed");
    assert!(
        closed_at.elapsed() < Duration::from_secs(5),
        "{:?}",
        closed_at.elapsed()
    );
    drop(silent);
}

/// Bolt over WebSocket on the Bolt port (what the Neo4j Browser and the JavaScript
/// driver in a web page speak): the upgrade, the handshake, LOGON with the password (a
/// wrong one refused), a query and its record, each inside binary WebSocket messages.
/// Needs no driver.
#[test]
fn bolt_over_websocket_on_the_bolt_port() {
    use quiver_bolt::packstream::{decode, Pack};
    use quiver_bolt::server::{read_message, write_message};
    use std::io::Read;
    use std::net::TcpStream;
    use tungstenite::{Message, WebSocket};

    /// The payloads of the server's binary messages as one stream.
    struct Ws {
        ws: WebSocket<TcpStream>,
        buf: Vec<u8>,
        pos: usize,
    }
    impl Read for Ws {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            while self.pos == self.buf.len() {
                match self.ws.read().unwrap() {
                    Message::Binary(d) => {
                        self.buf = d.to_vec();
                        self.pos = 0;
                    }
                    Message::Close(_) => return Ok(0),
                    _ => {}
                }
            }
            let n = b.len().min(self.buf.len() - self.pos);
            b[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }
    impl Ws {
        fn send(&mut self, tag: u8, fields: Vec<Pack>) {
            let mut out = Vec::new();
            write_message(&mut out, &Pack::Struct(tag, fields));
            self.ws.send(Message::binary(out)).unwrap();
        }
        fn reply(&mut self) -> (u8, Vec<Pack>) {
            let m = read_message(self, 1 << 20).unwrap().expect("a reply");
            match decode(&m).unwrap() {
                Pack::Struct(t, f) => (t, f),
                p => panic!("not a message: {p:?}"),
            }
        }
    }
    let connect = |addr: &str| {
        let tcp = TcpStream::connect(addr).unwrap();
        let (mut ws, _) = tungstenite::client(format!("ws://{addr}/"), tcp).unwrap();
        // Bolt 5.4 down to 5.0, then nothing.
        ws.send(Message::binary(vec![
            0x60, 0x60, 0xB0, 0x17, 0, 4, 4, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ]))
        .unwrap();
        let mut w = Ws {
            ws,
            buf: Vec::new(),
            pos: 0,
        };
        let mut version = [0u8; 4];
        w.read_exact(&mut version).unwrap();
        assert_eq!(version[3], 5, "{version:?}");
        w.send(
            0x01,
            vec![Pack::map(vec![("user_agent", Pack::str("ws-test/1"))])],
        );
        assert_eq!(w.reply().0, 0x70, "HELLO");
        w
    };
    let logon = |w: &mut Ws, password: &str| {
        w.send(
            0x6A,
            vec![Pack::map(vec![
                ("scheme", Pack::str("basic")),
                ("principal", Pack::str("alice")),
                ("credentials", Pack::str(password)),
            ])],
        );
        w.reply()
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&dir.path().join("db"), &[]);

    let mut bad = connect(&addr);
    let (tag, f) = logon(&mut bad, "wrong");
    assert_eq!(tag, 0x7F, "a wrong password fails: {f:?}");

    let mut w = connect(&addr);
    let (tag, f) = logon(&mut w, "pa55word");
    assert_eq!(tag, 0x70, "LOGON: {f:?}");
    w.send(
        0x10,
        vec![
            Pack::str("UNWIND range(1, 3) AS x RETURN x * 7 AS y"),
            Pack::Map(vec![]),
            Pack::Map(vec![]),
        ],
    );
    w.send(0x3F, vec![Pack::map(vec![("n", Pack::Int(-1))])]);
    assert_eq!(w.reply().0, 0x70, "RUN");
    let mut got = Vec::new();
    loop {
        match w.reply() {
            (0x71, f) => got.push(f[0].clone()),
            (0x70, _) => break,
            r => panic!("{r:?}"),
        }
    }
    assert_eq!(
        got,
        [7, 14, 21].map(|y| Pack::List(vec![Pack::Int(y)])).to_vec()
    );
}

/// `quiver serve --browser DIR`: the folder's files over plain HTTP on the Bolt port
/// (the Neo4j Browser's static site), the discovery document the Browser asks its
/// origin for, nothing outside the folder; Bolt and WebSocket go on on the same port.
/// Needs no driver.
#[test]
fn the_bolt_port_serves_a_web_app_folder() {
    use std::io::Read;
    use std::net::TcpStream;
    let d = tempfile::tempdir().unwrap();
    let site = d.path().join("site");
    std::fs::create_dir_all(site.join("assets")).unwrap();
    std::fs::write(site.join("index.html"), "<html>browser</html>").unwrap();
    std::fs::write(site.join("assets/app.js"), "console.log(1)").unwrap();
    std::fs::write(d.path().join("secret.txt"), "no").unwrap();
    let (_server, addr) = start(&d.path().join("g.qdb"), &["--browser", common::s(&site)]);
    let get = |path: &str, accept: &str| -> String {
        let mut s = TcpStream::connect(&addr).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let r = get("/", "text/html");
    assert!(
        r.starts_with("HTTP/1.1 200 OK") && r.ends_with("<html>browser</html>"),
        "{r}"
    );
    assert!(r.contains("Content-Type: text/html"), "{r}");
    let r = get("/assets/app.js?v=3", "*/*");
    assert!(
        r.contains("text/javascript") && r.ends_with("console.log(1)"),
        "{r}"
    );
    let r = get("/", "application/json");
    assert!(
        r.contains(&format!("\"bolt_direct\":\"bolt://{addr}\"")),
        "{r}"
    );
    for bad in ["/../secret.txt", "/%2e%2e/secret.txt", "/missing.js"] {
        assert!(get(bad, "*/*").starts_with("HTTP/1.1 404"), "{bad}");
    }
    // Bolt still answers on the same port.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(&[
        0x60, 0x60, 0xB0, 0x17, 0, 0, 4, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ])
    .unwrap();
    let mut v = [0u8; 4];
    s.read_exact(&mut v).unwrap();
    assert_eq!(v, [0, 0, 4, 5]);
    // A folder without the app is refused at start, saying what to give.
    let o = common::quiver(&[
        "serve",
        "--db",
        common::s(&d.path().join("g.qdb")),
        "--browser",
        common::s(d.path()),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no index.html"));
}

/// What the Neo4j Browser and cypher-shell send on connect (found in the Browser's
/// bundle, `data/neo4j-tools/browser/*.js`) answers through the driver, with the
/// columns they read; `SHOW ... YIELD ... WHERE ... RETURN` filters and projects.
#[test]
fn what_the_browser_sends_on_connect_answers() {
    if !common::have_driver() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&dir.path().join("db"), &[]);
    let script = r#"
import sys
from neo4j import GraphDatabase
d = GraphDatabase.driver(sys.argv[1], auth=("alice", "pa55word"))
with d.session(database="neo4j") as s:
    s.run("CREATE (:Person {name: 'a'})-[:KNOWS]->(:Person {name: 'b'})").consume()
    s.run("CREATE INDEX ON :Person(name)").consume()
    def one(q, **kw):
        return s.run(q, **kw).data()
    meta = one("CALL db.labels() YIELD label\nRETURN {name:'labels', data:COLLECT(label)[..1000]} AS result\nUNION ALL\nCALL db.relationshipTypes() YIELD relationshipType\nRETURN {name:'relationshipTypes', data:COLLECT(relationshipType)[..1000]} AS result\nUNION ALL\nCALL db.propertyKeys() YIELD propertyKey\nRETURN {name:'propertyKeys', data:COLLECT(propertyKey)[..1000]} AS result")
    assert [m["result"]["data"] for m in meta] == [["Person"], ["KNOWS"], ["name"]], meta
    assert one("CALL dbms.components() YIELD name, versions, edition")[0]["edition"] == "community"
    me = one("CALL dbms.showCurrentUser()")
    assert me == [{"username": "alice", "roles": ["admin"], "flags": []}], me
    assert one("CALL dbms.security.showCurrentUser()")[0]["username"] == "alice"
    assert one("CALL dbms.cluster.role() YIELD role") == [{"role": "PRIMARY"}]
    cfg = {r["name"]: r["value"] for r in one("CALL dbms.clientConfig()")}
    assert cfg["browser.allow_outgoing_connections"] == "false", cfg
    assert len(one("CALL dbms.listConfig()")) == len(cfg)
    assert one("SHOW DATABASES YIELD role, name WHERE name = 'neo4j'") == [{"role": "primary", "name": "neo4j"}]
    assert one("SHOW DATABASES YIELD name WHERE name = 'nope'") == []
    fns = one("SHOW FUNCTIONS yield name, description, signature")
    assert {"toUpper", "date.truncate", "coalesce"} <= {f["name"] for f in fns}, fns[:5]
    procs = one("SHOW PROCEDURES yield name, description, signature WHERE name = 'db.labels'")
    assert procs == [{"name": "db.labels", "description": "", "signature": "db.labels() :: (label :: STRING)"}], procs
    tx = one("SHOW TRANSACTIONS YIELD currentQuery, username, metaData, parameters, status, elapsedTime, database, transactionId")
    assert tx[0]["username"] == "alice" and tx[0]["currentQuery"].startswith("SHOW TRANSACTIONS"), tx
    ix = one("SHOW INDEXES YIELD name, type, labelsOrTypes, properties, owningConstraint WHERE 'name' IN properties")
    assert ix == [{"name": ix[0]["name"], "type": "RANGE", "labelsOrTypes": ["Person"], "properties": ["name"], "owningConstraint": None}], ix
    assert one("SHOW INDEXES YIELD * RETURN count(*) AS n") == [{"n": 1}]
    assert one("SHOW CONSTRAINTS") == []
    assert len(one("MATCH p=()-->() RETURN p LIMIT 25")) == 1
    # Plans in the summary, as the Browser draws them.
    plan = s.run("EXPLAIN MATCH (p:Person)-->(q) RETURN q.name").consume().plan
    assert plan["operatorType"].endswith("@neo4j") and plan["children"], plan
    r = s.run("PROFILE MATCH (p:Person)-->(q) RETURN q.name")
    assert [x["q.name"] for x in r] == ["b"]
    prof = r.consume().profile
    assert prof["rows"] == 1 and "time" in prof and prof["children"], prof
print("ok")
"#;
    let path = dir.path().join("browser_connect.py");
    std::fs::write(&path, script).unwrap();
    common::python_ok(&[common::s(&path), &format!("bolt://{addr}")]);
}

/// A raw Bolt 5.4 client over TCP (no driver), for the server's limits.
mod raw {
    use quiver_bolt::packstream::{decode, Pack};
    use quiver_bolt::server::{read_message, write_message};
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    pub struct Bolt(pub TcpStream);

    impl Bolt {
        /// Connected, through the handshake (5.4 down to 5.0).
        pub fn handshake(addr: &str) -> Bolt {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            s.write_all(&[0x60, 0x60, 0xB0, 0x17, 0, 4, 4, 5]).unwrap();
            s.write_all(&[0; 12]).unwrap();
            let mut v = [0u8; 4];
            s.read_exact(&mut v).unwrap();
            assert_eq!(v, [0, 0, 4, 5]);
            Bolt(s)
        }

        pub fn send(&mut self, tag: u8, fields: Vec<Pack>) {
            let mut out = Vec::new();
            write_message(&mut out, &Pack::Struct(tag, fields));
            self.0.write_all(&out).unwrap();
        }

        pub fn reply(&mut self) -> (u8, Vec<Pack>) {
            let m = read_message(&mut self.0, 1 << 24)
                .unwrap()
                .expect("a reply");
            match decode(&m).unwrap() {
                Pack::Struct(t, f) => (t, f),
                p => panic!("not a message: {p:?}"),
            }
        }

        pub fn hello(&mut self) {
            self.send(
                0x01,
                vec![Pack::map(vec![("user_agent", Pack::str("raw/1"))])],
            );
            assert_eq!(self.reply().0, 0x70, "HELLO");
        }

        /// HELLO and LOGON (any credentials: the server runs with --no-auth).
        pub fn login(addr: &str) -> Bolt {
            let mut b = Bolt::handshake(addr);
            b.hello();
            b.send(0x6A, vec![Pack::map(vec![("scheme", Pack::str("none"))])]);
            assert_eq!(b.reply().0, 0x70, "LOGON");
            b
        }

        /// RUN and PULL everything: the records' fields.
        pub fn query(&mut self, q: &str) -> Vec<Vec<Pack>> {
            self.send(
                0x10,
                vec![Pack::str(q), Pack::Map(vec![]), Pack::Map(vec![])],
            );
            self.send(0x3F, vec![Pack::map(vec![("n", Pack::Int(-1))])]);
            let (tag, f) = self.reply();
            assert_eq!(tag, 0x70, "RUN {q}: {f:?}");
            let mut rows = Vec::new();
            loop {
                match self.reply() {
                    (0x71, f) => match f.into_iter().next() {
                        Some(Pack::List(r)) => rows.push(r),
                        r => panic!("{r:?}"),
                    },
                    (0x70, _) => return rows,
                    r => panic!("{q}: {r:?}"),
                }
            }
        }

        /// Whether the server closed the connection within `within`.
        pub fn closed_within(&mut self, within: Duration) -> bool {
            self.0.set_read_timeout(Some(within)).unwrap();
            let mut b = [0u8; 64];
            loop {
                match self.0.read(&mut b) {
                    Ok(0) => return true,
                    Ok(_) => continue,
                    Err(e) => {
                        return !matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        )
                    }
                }
            }
        }
    }
}

/// With more than two connections open, an inline write hands its sync to the server's
/// sync thread. A server whose one worker (`--workers 1`) runs a long statement still
/// answers writes at once: a sync on the worker pool would wait behind the statement.
/// Needs no driver.
#[test]
fn writes_are_synced_while_a_long_statement_holds_the_only_worker() {
    use quiver_bolt::packstream::Pack;
    use raw::Bolt;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&dir.path().join("db"), &["--no-auth", "--workers", "1"]);
    let mut long = Bolt::login(&addr);
    let mut w = Bolt::login(&addr);
    let _third = Bolt::login(&addr);
    let write = "CREATE (n:W) RETURN 1 AS one";
    // Its first run (on the worker) makes it a quick statement: later ones run inline.
    assert_eq!(w.query(write), [vec![Pack::Int(1)]]);
    long.send(
        0x10,
        vec![
            Pack::str("UNWIND range(1, 100000000000) AS x RETURN count(x) AS n"),
            Pack::Map(vec![]),
            Pack::Map(vec![]),
        ],
    );
    long.send(0x3F, vec![Pack::map(vec![("n", Pack::Int(-1))])]);
    std::thread::sleep(Duration::from_millis(500));
    // (A reply that does not come within the timeout fails the read.)
    w.0.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    for _ in 0..20 {
        assert_eq!(w.query(write), [vec![Pack::Int(1)]]);
    }
    drop(long);
    assert_eq!(
        w.query("MATCH (n:W) RETURN count(n) AS n"),
        [vec![Pack::Int(21)]]
    );
}

/// A logged-in session silent past `--idle-timeout-secs` is closed; one that keeps
/// sending, for longer than the limit in all, is not: each wait for the client has the
/// whole limit (the server keeps one timer a connection and moves it on). Needs no
/// driver.
#[test]
fn a_silent_session_is_closed_at_the_idle_limit_and_a_busy_one_is_not() {
    use quiver_bolt::packstream::Pack;
    use raw::Bolt;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(
        &dir.path().join("db"),
        &["--no-auth", "--idle-timeout-secs", "1"],
    );
    let mut busy = Bolt::login(&addr);
    let mut silent = Bolt::login(&addr);
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(2600) {
        assert_eq!(busy.query("RETURN 1 AS x"), [vec![Pack::Int(1)]]);
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        silent.closed_within(Duration::from_secs(3)),
        "a session silent for {:?} stayed open",
        t.elapsed()
    );
    assert_eq!(busy.query("RETURN 2 AS x"), [vec![Pack::Int(2)]]);
    // Silent from here on: closed within the limit and a little.
    let quiet = Instant::now();
    assert!(busy.closed_within(Duration::from_secs(4)));
    assert!(
        quiet.elapsed() >= Duration::from_millis(900),
        "{:?}",
        quiet.elapsed()
    );
}

/// Connections cost no thread while they wait: hundreds of logged-in sessions stay
/// open beside a server of a few threads. A handshake that stops halfway and a login
/// that never comes are closed at the deadline; a client that goes away mid-statement
/// stops it; the server serves on at the end. Needs no driver.
#[test]
fn idle_sessions_hold_no_thread_and_gone_clients_stop_their_statements() {
    use quiver_bolt::packstream::Pack;
    use raw::Bolt;
    use std::io::Write;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = start(
        &dir.path().join("db"),
        &["--no-auth", "--auth-timeout-secs", "1"],
    );
    let threads = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", server.0.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse::<usize>().ok())
            .unwrap()
    };
    let mut idle: Vec<Bolt> = (0..300).map(|_| Bolt::login(&addr)).collect();
    let running = threads();
    // (A thread a connection, as before, would be 300 and more.)
    assert!(running < 40, "{running} threads for 300 idle sessions");
    assert_eq!(idle[7].query("RETURN 6 * 7 AS x"), [vec![Pack::Int(42)]]);

    // Half a handshake, and a HELLO with no LOGON: closed at the 1 s deadline.
    let mut half = Bolt(std::net::TcpStream::connect(&addr).unwrap());
    half.0.write_all(&[0x60, 0x60, 0xB0, 0x17, 0, 4]).unwrap();
    let mut no_login = Bolt::handshake(&addr);
    no_login.hello();
    let t = Instant::now();
    assert!(
        half.closed_within(Duration::from_secs(5)),
        "half a handshake stayed open"
    );
    assert!(
        no_login.closed_within(Duration::from_secs(5)),
        "a login that never came stayed open"
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // A statement that would run for hours; its client goes away.
    let mut gone = idle.pop().unwrap();
    gone.send(
        0x10,
        vec![
            Pack::str("UNWIND range(1, 100000000000) AS x RETURN count(x) AS n"),
            Pack::Map(vec![]),
            Pack::Map(vec![]),
        ],
    );
    gone.send(0x3F, vec![Pack::map(vec![("n", Pack::Int(-1))])]);
    let mut watcher = idle.pop().unwrap();
    let listed = |w: &mut Bolt| {
        w.query("SHOW TRANSACTIONS YIELD currentQuery RETURN currentQuery")
            .iter()
            .any(|r| matches!(&r[0], Pack::Str(q) if q.contains("100000000000")))
    };
    let t = Instant::now();
    while !listed(&mut watcher) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the statement never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(gone);
    let t = Instant::now();
    while listed(&mut watcher) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the statement ran on after its client went away"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Everyone is still served.
    for b in idle.iter_mut().step_by(50) {
        assert_eq!(b.query("RETURN 1 AS x"), [vec![Pack::Int(1)]]);
    }
}

/// Messages that arrive while the server waits on a statement are answered in turn:
/// a PULL sent apart from its RUN while the statement computes (the server must not
/// wait for more input with a whole message in hand), and a RUN past the 64 KiB
/// pre-login cap sent in one write with its LOGON. Needs no driver.
#[test]
fn messages_that_arrive_while_a_statement_runs_are_answered() {
    use quiver_bolt::packstream::Pack;
    use raw::Bolt;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&dir.path().join("db"), &["--no-auth"]);
    let mut b = Bolt::login(&addr);
    for _ in 0..3 {
        b.send(
            0x10,
            vec![
                Pack::str("UNWIND range(1, 3000000) AS x WITH count(x) AS c RETURN c"),
                Pack::Map(vec![]),
                Pack::Map(vec![]),
            ],
        );
        std::thread::sleep(Duration::from_millis(20));
        b.send(0x3F, vec![Pack::map(vec![("n", Pack::Int(-1))])]);
        b.0.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        assert_eq!(b.reply().0, 0x70, "RUN");
        assert_eq!(b.reply().1, [Pack::List(vec![Pack::Int(3_000_000)])]);
        assert_eq!(b.reply().0, 0x70, "PULL");
    }
    // LOGON and a 100 KiB RUN in one write.
    let mut b = Bolt::handshake(&addr);
    b.hello();
    let mut out = Vec::new();
    let big = format!("RETURN size('{}') AS n", "x".repeat(100 << 10));
    for (tag, fields) in [
        (0x6A, vec![Pack::map(vec![("scheme", Pack::str("none"))])]),
        (
            0x10,
            vec![Pack::str(big), Pack::Map(vec![]), Pack::Map(vec![])],
        ),
        (0x3F, vec![Pack::map(vec![("n", Pack::Int(-1))])]),
    ] {
        quiver_bolt::server::write_message(&mut out, &Pack::Struct(tag, fields));
    }
    std::io::Write::write_all(&mut b.0, &out).unwrap();
    assert_eq!(b.reply().0, 0x70, "LOGON");
    assert_eq!(b.reply().0, 0x70, "RUN");
    assert_eq!(b.reply().1, [Pack::List(vec![Pack::Int(100 << 10)])]);
}

/// Auto-commit statements that write the same node from several clients at once (a
/// write conflict under snapshot isolation) all succeed: the server runs the one that
/// lost again, as Neo4j's clients see a lock wait. `session.run` is not retried by the
/// driver, so any conflict that reached the client would fail the script.
#[test]
fn conflicting_auto_commit_writes_wait_rather_than_fail() {
    if !common::have_driver() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&dir.path().join("db"), &[]);
    let code = format!(
        r#"
import threading
from neo4j import GraphDatabase
errors = []
with GraphDatabase.driver("bolt://{addr}", auth=("alice", "pa55word")) as d:
    d.execute_query("CREATE (:Hub {{n: 0}})")
    def client():
        with d.session() as s:
            for i in range(60):
                try:
                    s.run("MATCH (h:Hub) SET h.n = h.n + 1 CREATE (h)-[:R]->(:Leaf)").consume()
                except Exception as e:
                    errors.append(repr(e))
    ts = [threading.Thread(target=client) for _ in range(6)]
    for t in ts: t.start()
    for t in ts: t.join()
    assert not errors, errors[:3]
    r = d.execute_query("MATCH (h:Hub)-[:R]->(l:Leaf) RETURN h.n AS n, count(l) AS c").records[0]
    assert (r["n"], r["c"]) == (360, 360), (r["n"], r["c"])
print("ok")
"#
    );
    common::python_ok(&["-c", &code]);
}
