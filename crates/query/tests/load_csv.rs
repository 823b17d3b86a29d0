//! LOAD CSV (both syntaxes, gzip, NULLIF, bad rows, path confinement) and
//! `CALL { } IN TRANSACTIONS`, through `Session` as the CLI uses it.

mod common;

use common::{rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;
use std::io::Write;
use std::path::Path;

/// A database `g.qdb` in `dir` whose import directory is `dir/import`.
fn open(dir: &Path) -> Session {
    std::fs::create_dir_all(dir.join("import")).unwrap();
    Session::open_with(&dir.join("g.qdb"), OpenMode::Mapped, true).unwrap()
}

fn put(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join("import").join(name), text).unwrap();
}

fn err(s: &mut Session, q: &str) -> String {
    match run(s, q) {
        Ok(_) => panic!("{q}: expected an error"),
        Err(e) => e.to_string(),
    }
}

fn int(s: &mut Session, q: &str) -> i64 {
    match rows(s, q)[0][0] {
        Value::Int(i) => i,
        ref v => panic!("{q}: not an int: {v:?}"),
    }
}

fn strs(v: &[&str]) -> Value {
    Value::list(v.iter().map(|s| Value::str(s)).collect())
}

#[test]
fn rows_are_maps_with_a_header_and_lists_without() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    put(
        d.path(),
        "u.csv",
        "id,name,age\n1,Ada,36\n2,Bob,NA\n3,\"Cy, Jr\",\n",
    );
    // Neo4j's spelling: file:/// is the import directory.
    let r = rows(
        &mut s,
        "LOAD CSV WITH HEADERS FROM 'file:///u.csv' AS row RETURN row.id, row.name, row.age",
    );
    assert_eq!(r.len(), 3);
    assert_eq!(
        r[2],
        vec![Value::str("3"), Value::str("Cy, Jr"), Value::str("")]
    );
    assert_eq!(r[1][2], Value::str("NA"));
    // Memgraph's spelling with NULLIF.
    let r = rows(
        &mut s,
        "LOAD CSV FROM 'u.csv' WITH HEADER NULLIF 'NA' AS row RETURN row.age",
    );
    assert_eq!(r[1][0], Value::Null);
    // A WITH after the row variable is the next clause, not a header option.
    let r = rows(
        &mut s,
        "LOAD CSV FROM 'u.csv' WITH HEADER AS row WITH toInteger(row.id) AS id WHERE id > 1 RETURN sum(id)",
    );
    assert_eq!(r, vec![vec![Value::Int(5)]]);
    // No header: lists, the header line is a row like any other.
    let r = rows(
        &mut s,
        "LOAD CSV FROM 'u.csv' NO HEADER AS row RETURN row, row[1]",
    );
    assert_eq!(r[0][0], strs(&["id", "name", "age"]));
    assert_eq!(r[3][1], Value::str("Cy, Jr"));
    let r = rows(
        &mut s,
        "LOAD CSV FROM 'file:///u.csv' AS row RETURN count(*)",
    );
    assert_eq!(r[0][0], Value::Int(4));
    // Delimiter and quote, both spellings.
    put(d.path(), "t.tsv", "a\tb\n'x\ty'\t2\n");
    put(d.path(), "n.tsv", "a\tb\n\"x\ty\"\t2\n");
    let r = rows(
        &mut s,
        "LOAD CSV FROM 't.tsv' WITH HEADER DELIMITER '\\t' QUOTE '\\'' AS row RETURN row.a, row.b",
    );
    assert_eq!(r, vec![vec![Value::str("x\ty"), Value::str("2")]]);
    let r = rows(
        &mut s,
        "LOAD CSV WITH HEADERS FROM 'file:///n.tsv' AS row FIELDTERMINATOR '\\t' RETURN row.b",
    );
    assert_eq!(r, vec![vec![Value::str("2")]]);
    // Gzip.
    let f = std::fs::File::create(d.path().join("import/z.csv.gz")).unwrap();
    let mut z = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    z.write_all(b"k,v\n").unwrap();
    for i in 0..5000 {
        writeln!(z, "{i},v{i}").unwrap();
    }
    z.finish().unwrap();
    let n = int(
        &mut s,
        "LOAD CSV WITH HEADERS FROM 'z.csv.gz' AS row RETURN sum(toInteger(row.k))",
    );
    assert_eq!(n, (0..5000).sum::<i64>());
    // An empty file with a header gives no rows.
    put(d.path(), "empty.csv", "");
    assert_eq!(
        int(
            &mut s,
            "LOAD CSV WITH HEADERS FROM 'empty.csv' AS row RETURN count(*)"
        ),
        0
    );
}

#[test]
fn loads_create_nodes_and_relationships_found_by_key() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    let mut users = String::from("id,name\n");
    let mut follows = String::from("src,dst\n");
    for i in 0..3000 {
        users += &format!("{i},u{i}\n");
        follows += &format!("{i},{}\n", (i * 7 + 1) % 3000);
    }
    put(d.path(), "users.csv", &users);
    put(d.path(), "follows.csv", &follows);
    let sum = run(
        &mut s,
        "LOAD CSV WITH HEADERS FROM 'file:///users.csv' AS row CREATE (:User {id: toInteger(row.id), name: row.name})",
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, 3000);
    run(&mut s, "CREATE INDEX ON :User(id)").unwrap();
    let sum = run(
        &mut s,
        "LOAD CSV FROM 'follows.csv' WITH HEADER AS row MATCH (a:User {id: toInteger(row.src)}), (b:User {id: toInteger(row.dst)}) CREATE (a)-[:FOLLOWS]->(b)",
    )
    .unwrap();
    assert_eq!(sum.counters.relationships_created, 3000);
    assert_eq!(
        int(&mut s, "MATCH (a:User {id: 5})-[:FOLLOWS]->(b) RETURN b.id"),
        36
    );
    // MERGE streams over LOAD CSV: the second occurrence of a key finds the first.
    put(d.path(), "dups.csv", "k\n1\n2\n1\n3\n2\n");
    let sum = run(
        &mut s,
        "LOAD CSV WITH HEADERS FROM 'dups.csv' AS row MERGE (:K {k: row.k})",
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, 3);
}

#[test]
fn bad_rows_fail_with_their_place_or_go_to_the_rejects_file() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    put(d.path(), "bad.csv", "a,b\n1,2\n3\n4,x\"y\n5,6\n");
    let e = err(
        &mut s,
        "LOAD CSV WITH HEADERS FROM 'bad.csv' AS row CREATE (:R {a: row.a})",
    );
    assert!(
        e.contains("bad.csv:3:1: expected 2 fields (as in the header), found 1"),
        "{e}"
    );
    // Transactional: the failed statement left nothing.
    assert_eq!(int(&mut s, "MATCH (r:R) RETURN count(r)"), 0);
    let sum = run(
        &mut s,
        "LOAD CSV FROM 'bad.csv' WITH HEADER IGNORE BAD AS row CREATE (:R {a: row.a})",
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, 2);
    assert_eq!(sum.bad_rows, 2);
    let p = sum.rejects_path.expect("a rejects file");
    assert!(
        p.starts_with(d.path().join("g.qdb.rejects")),
        "{}",
        p.display()
    );
    let text = std::fs::read_to_string(&p).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "file,line,column,reason,message,raw");
    assert!(
        lines[1].ends_with(",3,1,field-count,\"expected 2 fields (as in the header), found 1\",3"),
        "{text}"
    );
    assert!(
        lines[2].contains(",4,4,csv,quote character inside an unquoted field"),
        "{text}"
    );
    assert!(lines[2].ends_with("\"4,x\"\"y\""), "{text}");
    // Bytes that are not UTF-8 name their column.
    std::fs::write(d.path().join("import/latin.csv"), b"a,b\n1,caf\xe9\n").unwrap();
    let e = err(
        &mut s,
        "LOAD CSV WITH HEADERS FROM 'latin.csv' AS row RETURN row",
    );
    assert!(e.contains("latin.csv:2:3: invalid UTF-8"), "{e}");
}

#[test]
fn paths_are_confined_to_the_import_directory() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    std::fs::write(d.path().join("secret.csv"), "x\n1\n").unwrap();
    put(d.path(), "ok.csv", "x\n1\n");
    for (src, want) in [
        ("../secret.csv", "'..' is not allowed"),
        ("file:///../secret.csv", "'..' is not allowed"),
        ("https://example.org/x.csv", "remote URL"),
        ("s3://bucket/x.csv", "remote URL"),
        ("missing.csv", "No such file"),
    ] {
        let e = err(
            &mut s,
            &format!("LOAD CSV FROM '{src}' NO HEADER AS r RETURN r"),
        );
        assert!(e.contains(want), "{src}: {e}");
    }
    let outside = d.path().join("secret.csv");
    let e = err(
        &mut s,
        &format!(
            "LOAD CSV FROM '{}' NO HEADER AS r RETURN r",
            outside.display()
        ),
    );
    assert!(e.contains("outside the import directory"), "{e}");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&outside, d.path().join("import/link.csv")).unwrap();
        let e = err(&mut s, "LOAD CSV FROM 'link.csv' NO HEADER AS r RETURN r");
        assert!(e.contains("symbolic link"), "{e}");
    }
    // An absolute path inside the directory is fine.
    let inside = d.path().join("import/ok.csv");
    let q = format!(
        "LOAD CSV FROM '{}' NO HEADER AS r RETURN count(r)",
        inside.display()
    );
    assert_eq!(int(&mut s, &q), 2);
    // No import directory: refused, saying what to pass.
    s.opts.import_dir = None;
    let e = err(&mut s, "LOAD CSV FROM 'ok.csv' NO HEADER AS r RETURN r");
    assert!(e.contains("--import-dir"), "{e}");
}

#[test]
fn call_in_transactions_commits_batch_by_batch() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    let mut text = String::from("id\n");
    for i in 0..2500 {
        text += &format!("{i}\n");
    }
    put(d.path(), "ids.csv", &text);
    let log0 = s.store().log_bytes();
    let sum = run(
        &mut s,
        "LOAD CSV WITH HEADERS FROM 'ids.csv' AS row CALL { WITH row CREATE (:N {id: toInteger(row.id)}) } IN TRANSACTIONS OF 1000 ROWS",
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, 2500);
    assert!(s.store().log_bytes() > log0);
    assert_eq!(int(&mut s, "MATCH (n:N) RETURN count(n)"), 2500);
    // A batch that fails: FAIL keeps the batches before it.
    let e = err(
        &mut s,
        "UNWIND range(1, 10) AS x CALL { WITH x CREATE (:F {v: 100 / (x - 6)}) } IN TRANSACTIONS OF 2 ROWS",
    );
    assert!(e.contains("zero") || e.contains("divi"), "{e}");
    assert_eq!(int(&mut s, "MATCH (f:F) RETURN count(f)"), 4);
    // CONTINUE rolls back the failed batch (rows 5 and 6) and goes on.
    let sum = run(
        &mut s,
        "UNWIND range(1, 10) AS x CALL { WITH x CREATE (:C {v: 100 / (x - 6)}) } IN TRANSACTIONS OF 2 ROWS ON ERROR CONTINUE",
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, 8);
    assert_eq!(int(&mut s, "MATCH (c:C) RETURN count(c)"), 8);
    // BREAK stops at the failed batch.
    run(
        &mut s,
        "UNWIND range(1, 10) AS x CALL { WITH x CREATE (:B {v: 100 / (x - 6)}) } IN TRANSACTIONS OF 2 ROWS ON ERROR BREAK",
    )
    .unwrap();
    assert_eq!(int(&mut s, "MATCH (b:B) RETURN count(b)"), 4);
    // A body that returns adds its columns to each row.
    let r = rows(
        &mut s,
        "UNWIND [1, 2, 3] AS x CALL { WITH x CREATE (r:Ret {v: x}) RETURN r.v * 10 AS t } IN TRANSACTIONS OF 2 ROWS RETURN x, t",
    );
    assert_eq!(
        r,
        vec![
            vec![Value::Int(1), Value::Int(10)],
            vec![Value::Int(2), Value::Int(20)],
            vec![Value::Int(3), Value::Int(30)]
        ]
    );
    // A body that reads the graph before it writes (its writes are eager) runs on
    // every batch, not only the first.
    let sum = run(
        &mut s,
        "UNWIND range(0, 4) AS x CALL { WITH x MATCH (n:N {id: x}) CREATE (:M)-[:TO]->(n) } IN TRANSACTIONS OF 2 ROWS",
    )
    .unwrap();
    assert_eq!(sum.counters.relationships_created, 5);
    let sum = run(
        &mut s,
        "UNWIND range(0, 4) AS x CALL { WITH x MERGE (k:K2 {id: x}) SET k.seen = true } IN TRANSACTIONS OF 2 ROWS",
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, 5);
    assert_eq!(sum.counters.properties_set, 10);
    // Not inside an explicit transaction.
    run(&mut s, "BEGIN").unwrap();
    let e = err(
        &mut s,
        "UNWIND [1] AS x CALL { WITH x CREATE (:Z) } IN TRANSACTIONS",
    );
    assert!(
        e.contains("can only be executed in an implicit transaction"),
        "{e}"
    );
    assert!(!s.in_transaction());
    // What was committed survives a reopen.
    drop(s);
    let mut s = open(d.path());
    assert_eq!(int(&mut s, "MATCH (n:N) RETURN count(n)"), 2500);
    assert_eq!(int(&mut s, "MATCH (n:N {id: 2499}) RETURN n.id"), 2499);
}
