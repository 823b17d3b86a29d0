//! Neo4j's cypher-shell 5.26 against `quiver serve` (issue "Neo4j's own tools"): login
//! with a password, `--format plain` and `verbose`, a script with `:param`, `:begin`,
//! `:rollback` and `:commit`, statements piped on standard input, every value type
//! printed as Neo4j prints it, a syntax error with its position, a wrong password.
//!
//! cypher-shell is Java: `scripts/neo4j-tools.sh` fetches it into
//! `data/neo4j-tools/lib` (or `QUIVER_NEO4J_TOOLS` names the folder). `.ci/run` installs
//! it and sets QUIVER_REQUIRE_CYPHER_SHELL, so in CI a missing tool fails the test;
//! elsewhere it is reported and skipped.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The folder of cypher-shell's jars, when it and Java are here.
fn tools() -> Option<PathBuf> {
    let lib = std::env::var_os("QUIVER_NEO4J_TOOLS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/neo4j-tools/lib"),
        PathBuf::from,
    );
    let java = Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    let have = java && lib.join("cypher-shell-5.26.0.jar").exists();
    if !have {
        let why = "cypher-shell is not here: run scripts/neo4j-tools.sh --install (Java 17, Maven, the jars)";
        assert!(
            std::env::var_os("QUIVER_REQUIRE_CYPHER_SHELL").is_none(),
            "{why}"
        );
        eprintln!("skipped: {why}");
        return None;
    }
    Some(lib)
}

/// A database with a small graph and user alice (`pa55word`), served; its address.
fn start(db: &Path) -> (common::Served, String) {
    common::ok(&[
        "query",
        "--db",
        common::s(db),
        "--create",
        "CREATE (:P {name: 'a', n: 1, f: 1.5, l: [1, 2], d: date('2024-01-02'), b: true})-[:K {w: 2}]->(:P {name: 'b'})",
    ]);
    common::serve_as_alice(db, &[])
}

/// cypher-shell with `args` (after the address and alice's login), `stdin` piped in.
fn shell(lib: &Path, addr: &str, password: &str, args: &[&str], stdin: &str) -> Output {
    let mut c = Command::new("java")
        .arg("-cp")
        .arg(format!("{}/*", lib.display()))
        .arg("org.neo4j.shell.Main")
        .args([
            "-a",
            &format!("bolt://{addr}"),
            "-u",
            "alice",
            "-p",
            password,
        ])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running java");
    c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    c.wait_with_output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

#[test]
fn cypher_shell_reads_writes_and_reports_as_with_neo4j() {
    let Some(lib) = tools() else { return };
    let d = tempfile::tempdir().unwrap();
    let (_server, addr) = start(&d.path().join("g.qdb"));

    // Every value type, printed by cypher-shell as it prints Neo4j's.
    let q =
        "MATCH (n:P {name: 'a'})-[r]->(m) RETURN n, r, m, n.l AS l, n.d AS d, n.f AS f, n.b AS b, \
             null AS z, {k: [1, 'x']} AS map, duration('P1DT2H') AS dur, \
             localdatetime('2024-01-01T01:02:03') AS ldt, datetime('2024-01-02T03:04:05Z') AS dt";
    let o = shell(&lib, &addr, "pa55word", &["--format", "plain", q], "");
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0], "n, r, m, l, d, f, b, z, map, dur, ldt, dt",
        "{out}"
    );
    let row = lines[1];
    for part in [
        "(:P {",
        "name: \"a\"",
        "l: [1, 2]",
        "[:K {w: 2}]",
        "(:P {name: \"b\"})",
        "[1, 2], 2024-01-02, 1.5, TRUE, NULL, {k: [1, \"x\"]}, P1DT2H, 2024-01-01T01:02:03, 2024-01-02T03:04:05Z",
    ] {
        assert!(row.contains(part), "{part} not in {row}");
    }

    // A script: a parameter, a rolled-back and a committed transaction.
    let script = d.path().join("s.cypher");
    std::fs::write(
        &script,
        ":param x => 5\n:begin\nCREATE (t:T {v: $x}) RETURN t.v;\n:rollback\n:begin\nCREATE (t:T {v: $x + 1}) RETURN t.v;\n:commit\nMATCH (t:T) RETURN count(t) AS n, sum(t.v) AS s;\n",
    )
    .unwrap();
    let o = shell(
        &lib,
        &addr,
        "pa55word",
        &["--format", "plain", "-f", common::s(&script)],
        "",
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.ends_with("n, s\n1, 6\n"), "{out}");

    // Statements on standard input, the verbose table.
    let o = shell(
        &lib,
        &addr,
        "pa55word",
        &["--format", "verbose"],
        "MATCH (p:P) RETURN p.name AS name ORDER BY name;\n",
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("| name |") && out.contains("| \"a\"  |") && out.contains("2 rows"),
        "{out}"
    );

    // A syntax error: its position; the shell exits non-zero.
    let o = shell(&lib, &addr, "pa55word", &["MATCH (n RETURN n"], "");
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(err.contains("line 1, column 10"), "{err}");

    // A wrong password: refused with Neo4j's words.
    let o = shell(&lib, &addr, "wrong", &["RETURN 1"], "");
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        err.contains("unauthorized due to authentication failure"),
        "{err}"
    );
}
