//! `quiver serve` against the official neo4j Python driver (issue "Server"): connect,
//! authenticate, transactions, every value type both ways, errors as the driver's
//! exception classes, a large streamed result, neo4j:// routing. `.ci/run` installs
//! the driver and sets QUIVER_REQUIRE_BOLT_DRIVER, so in CI a missing driver fails the
//! test; elsewhere it is reported and skipped.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn the_python_driver_works_against_quiver_serve() {
    let have = Command::new("python3")
        .args(["-c", "import neo4j, pytz"])
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        assert!(
            std::env::var_os("QUIVER_REQUIRE_BOLT_DRIVER").is_none(),
            "the neo4j Python driver is not installed (python3 -m pip install neo4j)"
        );
        eprintln!(
            "skipped: the neo4j Python driver is not installed (python3 -m pip install neo4j)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let quiver = env!("CARGO_BIN_EXE_quiver");
    let st = Command::new(quiver)
        .args(["query", "--db"])
        .arg(&db)
        .arg("RETURN 1")
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    let mut add = Command::new(quiver)
        .args(["user", "add", "alice", "--db"])
        .arg(&db)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    add.stdin.take().unwrap().write_all(b"pa55word\n").unwrap();
    assert!(add.wait().unwrap().success());
    let mut server = Command::new(quiver)
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // "quiver: serving ... over Bolt on 127.0.0.1:PORT (...)"
    let mut err = BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .split(" on ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bolt_driver.py");
    let out = Command::new("python3")
        .args([script, &format!("bolt://{addr}"), "alice", "pa55word"])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "driver script failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
