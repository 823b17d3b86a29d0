//! Helpers for the CLI integration tests: run the built `quiver` binary, write files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn quiver(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(args)
        .output()
        .expect("running quiver")
}

pub fn ok(args: &[&str]) -> String {
    let o = quiver(args);
    assert!(
        o.status.success(),
        "quiver {args:?} failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Runs quiver expecting failure; returns stderr.
pub fn fails(args: &[&str]) -> String {
    let o = quiver(args);
    assert!(
        !o.status.success(),
        "quiver {args:?} unexpectedly succeeded: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stderr).to_string()
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Reads every CSV file of an export dir into (header, rows) per file name prefix kind.
pub fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_path(path)
        .unwrap();
    let header = r.headers().unwrap().iter().map(|s| s.to_string()).collect();
    let rows = r
        .records()
        .map(|rec| rec.unwrap().iter().map(|s| s.to_string()).collect())
        .collect();
    (header, rows)
}

pub fn export_files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// `quiver info --json` of `db` opened in `mode` (mapped, loaded, offline).
pub fn info(db: &Path, mode: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&["info", "--db", s(db), "--open", mode, "--json"])).unwrap()
}

/// The `quiver import` arguments for a social graph generated into `data`: integer ids,
/// two threads, the nodes and the FOLLOWS relationships.
pub fn social_import(db: &Path, data: &Path) -> Vec<String> {
    [
        "import".to_string(),
        "--db".into(),
        s(db).into(),
        "--nodes".into(),
        format!("User={}", s(&data.join("nodes.csv"))),
        "--relationships".into(),
        format!("FOLLOWS={}", s(&data.join("edges.csv"))),
        "--id-type".into(),
        "integer".into(),
        "--threads".into(),
        "2".into(),
    ]
    .to_vec()
}

/// `ok` for owned arguments.
pub fn ok_args(args: &[String]) -> String {
    let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    ok(&refs)
}

/// The generation folders (`g000001`, ...) inside a database directory, sorted.
pub fn generation_dirs(db: &Path) -> Vec<String> {
    let mut gens: Vec<String> = std::fs::read_dir(db)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with('g'))
        .collect();
    gens.sort();
    gens
}

/// `quiver serve`, killed when dropped.
pub struct Served(pub std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Adds user alice (password `pa55word`) to the database `db` (which must exist) and
/// serves it on an ephemeral port with `extra` flags; the server and its address.
pub fn serve_as_alice(db: &Path, extra: &[&str]) -> (Served, String) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let quiver = env!("CARGO_BIN_EXE_quiver");
    let mut add = Command::new(quiver)
        .args(["user", "add", "alice", "--db"])
        .arg(db)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    add.stdin.take().unwrap().write_all(b"pa55word\n").unwrap();
    assert!(add.wait().unwrap().success());
    let mut server = Command::new(quiver)
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(db)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // "quiver: serving ... over Bolt on 127.0.0.1:PORT (...)"
    let mut err = BufReader::new(server.stderr.take().unwrap());
    // (A warning, such as --no-auth's, may come first.)
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 && !line.contains("serving") {
        line.clear();
    }
    let addr = line
        .split(" on ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (Served(server), addr)
}

/// Whether the neo4j Python driver is installed (a missing one fails the test when
/// QUIVER_REQUIRE_BOLT_DRIVER is set, as in CI; elsewhere it is reported and skipped).
#[allow(dead_code)]
pub fn have_driver() -> bool {
    let have = std::process::Command::new("python3")
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
    }
    have
}

#[allow(dead_code)]
/// Runs python3 with `args`; it must succeed and print `ok`.
pub fn python_ok(args: &[&str]) {
    let out = std::process::Command::new("python3")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "python3 failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
