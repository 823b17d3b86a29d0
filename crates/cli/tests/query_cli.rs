//! `quiver query` from the command line: formats, parameters, EXPLAIN / PROFILE, index
//! commands, bench mode, and errors that say what to do.

mod common;
use common::*;

fn small_db(dir: &std::path::Path) -> String {
    let n = write(
        dir,
        "n.csv",
        "id:ID(User),name,age:int\n1,ann,30\n2,bob,\n3,cy,41\n",
    );
    let e = write(
        dir,
        "e.csv",
        ":START_ID(User),:END_ID(User),since:int\n1,2,2020\n2,3,2021\n1,3,2022\n",
    );
    let db = dir.join("q.qdb");
    ok(&[
        "import",
        "--db",
        db.to_str().unwrap(),
        "--id-type",
        "integer",
        "--quiet",
        "--nodes",
        &format!("User={}", n.display()),
        "--relationships",
        &format!("KNOWS={}", e.display()),
    ]);
    db.to_str().unwrap().to_string()
}

#[test]
fn formats_params_and_plans() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_db(dir.path());
    let csv = ok(&[
        "query",
        "--db",
        &db,
        "--format",
        "csv",
        "--param",
        "id=1",
        "MATCH (a:User {id: $id})-[k:KNOWS]->(b) RETURN b.name AS name, k.since ORDER BY name",
    ]);
    assert_eq!(csv, "name,k.since\nbob,2020\ncy,2022\n");
    let json = ok(&[
        "query",
        "--db",
        &db,
        "--format",
        "json",
        "MATCH (a:User {id: 2}) RETURN a",
    ]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["a"]["labels"][0], "User");
    assert_eq!(v["a"]["properties"]["name"], "bob");
    assert!(
        v["a"]["properties"].get("age").is_none(),
        "null properties are absent"
    );
    let table = ok(&[
        "query",
        "--db",
        &db,
        "MATCH (n:User) RETURN count(*) AS users, avg(n.age) AS age",
    ]);
    assert!(table.contains("users") && table.contains("35.5"), "{table}");
    let plan = ok(&[
        "query",
        "--db",
        &db,
        "EXPLAIN MATCH (a:User {id: 1})-->(b) RETURN b",
    ]);
    assert!(
        plan.contains("NodeSeek") && plan.contains("Expand"),
        "{plan}"
    );
    // A WITH that only passes variables on lets its WHERE pick the anchor (mgbench's
    // vertex_on_label_property): the same seek, the same row.
    let plan = ok(&[
        "query",
        "--db",
        &db,
        "PROFILE MATCH (a:User) WITH a WHERE a.id = 2 RETURN a.name",
    ]);
    assert!(
        plan.contains("NodeSeek") && !plan.contains("NodeByLabelScan") && plan.contains("bob"),
        "{plan}"
    );
    // A node's element id (what drivers send back) seeks like id(n); only the exact
    // text matches.
    let plan = ok(&[
        "query",
        "--db",
        &db,
        "PROFILE MATCH (a) WHERE elementId(a) = '0' RETURN a.name",
    ]);
    assert!(
        plan.contains("NodeByElementIdSeek") && plan.contains("rows 1"),
        "{plan}"
    );
    let none = ok(&[
        "query",
        "--db",
        &db,
        "--format",
        "csv",
        "MATCH (a) WHERE elementId(a) = '00' RETURN count(a)",
    ]);
    assert_eq!(none.lines().nth(1), Some("0"), "{none}");
    // Not through a WITH that changes the rows (DISTINCT, LIMIT): the filter stays after.
    let plan = ok(&[
        "query",
        "--db",
        &db,
        "EXPLAIN MATCH (a:User) WITH a LIMIT 1 WHERE a.id = 2 RETURN a.name",
    ]);
    assert!(!plan.contains("NodeSeek"), "{plan}");
    let prof = ok(&[
        "query",
        "--db",
        &db,
        "PROFILE MATCH (a:User)-->(b) RETURN count(*)",
    ]);
    assert!(prof.contains("rows 3") && prof.contains("time"), "{prof}");
    let stdin_q = std::process::Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["query", "--db", &db, "--format", "csv", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b"RETURN 1 + 1 AS two")?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&stdin_q.stdout), "two\n2\n");
}

#[test]
fn indexes_and_bench_mode() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_db(dir.path());
    let out = ok(&["query", "--db", &db, "CREATE INDEX ON :User(name)"]);
    assert!(out.contains("created, 3 entries"), "{out}");
    let plan = ok(&[
        "query",
        "--db",
        &db,
        "EXPLAIN MATCH (n:User {name: 'cy'}) RETURN n.id",
    ]);
    assert!(plan.contains("NodeIndexSeek"), "{plan}");
    let got = ok(&[
        "query",
        "--db",
        &db,
        "--format",
        "csv",
        "MATCH (n:User) WHERE n.name = 'cy' RETURN n.id",
    ]);
    assert_eq!(got, "n.id\n3\n");
    let shown = ok(&["query", "--db", &db, "--format", "csv", "SHOW INDEXES"]);
    assert!(
        shown.contains(r#""[""User""]","[""name""]",range-1.0,,,,"{""indexConfig"":{},""indexProvider"":""range-1.0""}",property,3"#)
            && shown.contains(r#""[""User""]","[""id""]",range-1.0,,,,"{""indexConfig"":{},""indexProvider"":""range-1.0""}",id (automatic),3"#),
        "{shown}"
    );
    ok(&["check", "--db", &db]);
    let info = ok(&["info", "--db", &db]);
    assert!(info.contains("index :User(name)  3 entries"), "{info}");
    let p = write(dir.path(), "p.csv", "id\n1\n2\n3\n");
    let out = ok(&[
        "query",
        "--db",
        &db,
        "--bench-params",
        p.to_str().unwrap(),
        "--warmup",
        "1",
        "MATCH (a:User {id: $id})-->(b) RETURN b.id",
    ]);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["rows"], 2);
    assert_eq!(lines[3]["runs"], 3);
}

#[test]
fn errors_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_db(dir.path());
    let e = fails(&["query", "--db", &db, "MATCH (n:User RETURN n"]);
    assert!(e.contains("line 1") || e.contains("1:"), "{e}");
    assert!(e.contains("expected"), "{e}");
    let e = fails(&["query", "--db", &db, "MATCH (n {id: $id}) RETURN n"]);
    assert!(e.contains("--param id="), "{e}");
    // A mistyped path is an error for a read (not an empty graph answering 0), and no
    // database is made there; a statement that writes, or --create, makes one and says
    // so. A directory holding other files is refused.
    let fresh = dir.path().join("fresh");
    let f = fresh.to_str().unwrap();
    let e = fails(&["query", "--db", f, "MATCH (n) RETURN count(n)"]);
    assert!(
        e.contains("no quiver database here") && e.contains("--create"),
        "{e}"
    );
    assert!(!fresh.exists());
    let e = fails(&["shell", "--db", f]);
    assert!(e.contains("no quiver database here"), "{e}");
    let out = common::quiver(&["query", "--db", f, "CREATE (:N {v: 1})"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("created an empty database"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(fresh.join("CURRENT").exists());
    let empty = dir.path().join("empty");
    ok_args(&[
        "query".to_string(),
        "--db".into(),
        empty.to_string_lossy().into(),
        "--create".into(),
        "RETURN 1".into(),
    ]);
    assert!(empty.join("CURRENT").exists());
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    let e = fails(&["query", "--db", other.to_str().unwrap(), "RETURN 1"]);
    assert!(e.contains("quiver import"), "{e}");
    assert!(!other.join("LOCK").exists());
    let e = fails(&[
        "query",
        "--db",
        &db,
        "--query-memory-limit",
        "1KiB",
        "UNWIND range(1, 100000) AS x RETURN x % 5000 AS k, count(*) AS n",
    ]);
    assert!(e.contains("memory limit") && e.contains("Aggregate"), "{e}");
    // A sort past the limit spills to the temporary directory instead.
    let tmp = tempfile::tempdir().unwrap();
    let out = ok(&[
        "query",
        "--db",
        &db,
        "--query-memory-limit",
        "64KiB",
        "--temp-dir",
        tmp.path().to_str().unwrap(),
        "--format",
        "csv",
        "UNWIND range(1, 100000) AS x RETURN x ORDER BY x DESC SKIP 99998",
    ]);
    assert_eq!(out.lines().skip(1).collect::<Vec<_>>(), ["2", "1"], "{out}");
    let e = fails(&["query", "--db", &db, "DROP INDEX ON :User(age)"]);
    assert!(e.contains("SHOW INDEXES"), "{e}");
}

#[test]
fn shell_runs_multi_line_queries_and_commands() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let db = small_db(dir.path());
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["shell", "--db", &db])
        .env("HOME", dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(b"MATCH (n:User)\nRETURN count(*) AS users;\n:param id=3\n:format csv\nMATCH (n:User {id: $id}) RETURN n.name;\nRETURN nosuch(1);\n:quit\n")
        .unwrap();
    let o = c.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("│ 3     │"), "{out}");
    assert!(out.contains("n.name\ncy\n"), "{out}");
    assert!(err.contains("unknown function nosuch()"), "{err}");
}

/// The issue's reproduction: a 200,000-term sum used to overflow the stack and abort the
/// process. It is a syntax error now, with a position and a short snippet.
#[test]
fn a_very_long_expression_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_db(dir.path());
    let terms = vec!["1"; 200_000].join("+");
    let q = write(dir.path(), "q.cql", &format!("RETURN {terms}\n"));
    let e = fails(&["query", "--db", &db, "--file", s(&q)]);
    assert!(
        e.contains("line 1, column") && e.contains("deeper than"),
        "{e}"
    );
    assert!(
        e.len() < 1_000,
        "the snippet is a window, not the whole line: {e}"
    );
}

/// `import --vector-index` builds the index once the nodes are in; a malformed spec is
/// refused before anything is imported.
#[test]
fn import_builds_vector_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("id:ID,emb:float[]\n");
    for i in 0..500 {
        let v: Vec<String> = (0..8)
            .map(|j| format!("{:.4}", (i as f64 * 0.37 + j as f64 * 1.3).sin()))
            .collect();
        csv.push_str(&format!("{i},{}\n", v.join(";")));
    }
    let f = write(dir.path(), "docs.csv", &csv);
    let db = dir.path().join("v.qdb");
    let bad = fails(&[
        "import",
        "--db",
        s(&db),
        "--nodes",
        &format!("Doc={}", f.display()),
        "--vector-index",
        "docs=Doc:8",
    ]);
    assert!(bad.contains("NAME=LABEL.PROPERTY:DIMENSIONS"), "{bad}");
    assert!(!db.exists(), "nothing imported on a bad spec");
    ok(&[
        "import",
        "--db",
        s(&db),
        "--quiet",
        "--id-type",
        "integer",
        "--nodes",
        &format!("Doc={}", f.display()),
        "--vector-index",
        "docs=Doc.emb:8:euclidean",
    ]);
    let shown = ok(&[
        "query",
        "--db",
        s(&db),
        "--format",
        "csv",
        "SHOW INDEXES YIELD name, type, options WHERE type = 'VECTOR' RETURN name, options.indexConfig.`vector.similarity_function` AS sim",
    ]);
    assert!(shown.contains("docs,euclidean"), "{shown}");
    // The vector of node 3 is found first for itself.
    let v: Vec<String> = (0..8)
        .map(|j| format!("{:.4}", (3.0 * 0.37 + j as f64 * 1.3).sin()))
        .collect();
    let top = ok(&[
        "query",
        "--db",
        s(&db),
        "--format",
        "csv",
        &format!(
            "CALL db.index.vector.queryNodes('docs', 1, [{}]) YIELD node, score RETURN node.id AS id, score",
            v.join(", ")
        ),
    ]);
    assert!(top.contains("\n3,1.0"), "{top}");
}
