//! Bad input gets a clear answer naming file, line and column; nothing is published; with
//! --skip-bad-rows every skipped row is in the rejects file and imported + rejected = read.

mod common;
use common::*;

fn import_err(d: &std::path::Path, nodes: &str, rels: Option<&str>, extra: &[&str]) -> String {
    let db = d.join("x.qdb");
    let mut args = vec!["import", "--db", s(&db), "--nodes", nodes];
    if let Some(r) = rels {
        args.push("--relationships");
        args.push(r);
    }
    args.extend_from_slice(extra);
    let err = fails(&args);
    assert!(!db.exists(), "a failed import must leave no database");
    let leftovers: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("staging"))
        .collect();
    assert!(leftovers.is_empty(), "staging left behind: {leftovers:?}");
    err
}

#[test]
fn every_error_names_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: &[(&str, &str, &str)] = &[
        (
            "quote.csv",
            "id:ID,name\n1,a\n2,\"open\n3,c\n",
            "quote.csv:3:3: unterminated quoted field",
        ),
        (
            "count.csv",
            "id:ID,name\n1,a\n2,b,extra\n",
            "count.csv:3:5: expected 2 fields (as in the header), found 3",
        ),
        (
            "int.csv",
            "id:ID,age:int\n1,5\n2,abc\n",
            "int.csv:3:3: 'abc' is not an int (32-bit) (column age)",
        ),
        (
            "range.csv",
            "id:ID,b:byte\n1,300\n",
            "range.csv:2:3: '300' is not a byte (-128..127) (column b)",
        ),
        (
            "type.csv",
            "id:ID,age:integr\n1,5\n",
            "type.csv: header column 2: unknown type 'integr'",
        ),
        (
            "dup.csv",
            "id:ID,name\n1,a\n2,b\n1,c\n",
            "dup.csv:4:1: duplicate node id '1'",
        ),
        (
            "stray.csv",
            "id:ID,name\n1,ab\"c\n",
            "stray.csv:2:5: quote character inside an unquoted field",
        ),
        (
            "date.csv",
            "id:ID,d:date\n1,2023-02-30\n",
            "date.csv:2:3: '2023-02-30' is not a date (YYYY-MM-DD) (column d)",
        ),
    ];
    for (name, text, want) in cases {
        let p = write(d, name, text);
        let err = import_err(d, &format!("N={}", s(&p)), None, &[]);
        assert!(err.contains(want), "{name}: expected '{want}' in:\n{err}");
    }
    let n = write(d, "n.csv", "id:ID,name\n1,a\n2,b\n");
    let r = write(d, "r.csv", ":START_ID,:END_ID\n1,2\n2,9\n");
    let err = import_err(
        d,
        &format!("N={}", s(&n)),
        Some(&format!("R={}", s(&r))),
        &[],
    );
    assert!(
        err.contains("r.csv:3:3: end node '9' does not exist"),
        "{err}"
    );
    let err = import_err(d, &format!("N={}", s(&d.join("missing.csv"))), None, &[]);
    assert!(err.contains("missing.csv: no such file"), "{err}");
    let r2 = write(d, "r2.csv", ":START_ID,:END_ID\n1,2\n");
    let err = import_err(d, &format!("N={}", s(&n)), Some(s(&r2)), &[]);
    assert!(err.contains("relationships need a type"), "{err}");
    let e = write(d, "empty.csv", "");
    let err = import_err(d, s(&e), None, &[]);
    assert!(err.contains("empty.csv:1:1: the file is empty"), "{err}");
}

#[test]
fn existing_database_is_refused_then_overwritten_and_kept_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = write(d, "good.csv", "id:ID,name\n1,a\n");
    let bad = write(d, "bad.csv", "id:ID,age:int\n1,x\n");
    let db = d.join("db.qdb");
    ok(&["import", "--db", s(&db), "--nodes", s(&good)]);
    let err = fails(&["import", "--db", s(&db), "--nodes", s(&good)]);
    assert!(
        err.contains("already holds a database; pass --overwrite"),
        "{err}"
    );
    // A failed overwrite leaves the old database as it was.
    fails(&["import", "--db", s(&db), "--nodes", s(&bad), "--overwrite"]);
    let v = info(&db, "mapped");
    assert_eq!(v["nodes"], 1);
    assert_eq!(v["generation"], 1);
    assert_eq!(generation_dirs(&db), vec!["g000001"]);
    ok(&["import", "--db", s(&db), "--nodes", s(&good), "--overwrite"]);
    let v = info(&db, "mapped");
    assert_eq!(v["generation"], 2);
    ok(&["check", "--db", s(&db)]);
}

#[test]
fn skipped_rows_are_all_accounted_for() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let n = write(
        d,
        "n.csv",
        "id:ID,age:int,name\n1,5,a\n2,x,b\n3,7\n1,9,dup\n4,8,\"ok\nmulti\"\n5,,e\n6,1,\"open\n",
    );
    let r = write(d, "r.csv", ":START_ID,:END_ID\n1,2\n2,3\n3,99\n4,5\n");
    let db = d.join("db.qdb");
    let rej = d.join("rejects.csv");
    let out = ok(&[
        "import",
        "--db",
        s(&db),
        "--nodes",
        &format!("N={}", s(&n)),
        "--relationships",
        &format!("R={}", s(&r)),
        "--skip-bad-rows",
        "--rejects",
        s(&rej),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Nodes: 1, 4, 5 good; 2 (cast), 3 (field count), dup 1, 6 (unterminated) rejected.
    // Relationships: 1-2 dropped? No: node 2 was rejected, so 1->2 and 2->3 miss a node.
    let (_, rows) = read_csv(&rej);
    let reasons: Vec<&str> = rows.iter().map(|r| r[3].as_str()).collect();
    assert_eq!(v["nodes"], 3, "{out}");
    assert_eq!(v["relationships"], 1, "{out}");
    assert_eq!(v["rows_rejected"].as_u64().unwrap() as usize, rows.len());
    assert_eq!(v["rows_read"].as_u64().unwrap(), 3 + 1 + rows.len() as u64);
    assert_eq!(
        reasons.iter().filter(|r| **r == "MissingNode").count(),
        3,
        "{rows:?}"
    );
    for want in ["Cast", "FieldCount", "DuplicateId", "UnterminatedQuote"] {
        assert!(reasons.contains(&want), "{want} missing from {rows:?}");
    }
    let dup = rows.iter().find(|r| r[3] == "DuplicateId").unwrap();
    assert_eq!((dup[1].as_str(), dup[5].as_str()), ("5", "1,9,dup"));
    // Over the tolerance: nothing is imported.
    let db2 = d.join("db2.qdb");
    let err = fails(&[
        "import",
        "--db",
        s(&db2),
        "--nodes",
        s(&n),
        "--bad-tolerance",
        "2",
        "--rejects",
        s(&d.join("r2.csv")),
    ]);
    assert!(
        err.contains("exceed the tolerance of 2; nothing was imported"),
        "{err}"
    );
    assert!(!db2.exists());
}

#[test]
fn null_markers_read_as_missing_values() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = "id:ID,delay:int,origin\n1,12,SFO\n2,NA,\\N\n3,NULL,JFK\n";
    let p = write(d, "flights.csv", text);
    let nodes = format!("Flight={}", s(&p));
    // Without markers, NA is a bad integer.
    let err = import_err(d, &nodes, None, &[]);
    assert!(err.contains("flights.csv:3:3: 'NA' is not an int"), "{err}");
    let db = d.join("f.qdb");
    ok(&[
        "import",
        "--db",
        s(&db),
        "--nodes",
        &nodes,
        "--null-marker",
        "NA",
        "--null-marker",
        "\\N",
        "--null-marker",
        "NULL",
        "--quiet",
    ]);
    let out = ok(&[
        "query",
        "--db",
        s(&db),
        "--format",
        "csv",
        "MATCH (f:Flight) RETURN f.id, f.delay IS NULL, f.origin ORDER BY f.id",
    ]);
    assert_eq!(
        out, "f.id,f.delay IS NULL,f.origin\n1,false,SFO\n2,true,\n3,true,JFK\n",
        "{out}"
    );
}

/// A file delimited by another character than the one given reads as one column: the
/// error says which delimiter it looks like and how to pass it. Given none, the import
/// takes the one every header is split by.
#[test]
fn another_delimiter_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let semi = write(d, "semi.csv", "id:ID;name;age:int\n1;Alice;30\n2;Bob;41\n");
    let comma = ["--delimiter", ","];
    let e = import_err(d, &format!("P={}", s(&semi)), None, &comma);
    assert!(
        e.contains("semi.csv") && e.contains("pass --delimiter ';'"),
        "{e}"
    );
    let tab = write(d, "tab.csv", "id:ID\tname\n1\tAlice\n");
    let e = import_err(d, &format!("P={}", s(&tab)), None, &comma);
    assert!(e.contains("--delimiter '\\t'"), "{e}");
    // With the delimiter given, or with none (sniffed), the same file imports.
    for (name, extra) in [
        ("given.qdb", vec!["--delimiter", ";"]),
        ("sniffed.qdb", vec![]),
    ] {
        let db = d.join(name);
        let mut args = vec!["import", "--db", s(&db)];
        args.extend(extra);
        let nodes = format!("P={}", s(&semi));
        args.extend(["--nodes", nodes.as_str()]);
        ok(&args);
        let out = ok(&[
            "query",
            "--db",
            s(&db),
            "--format",
            "csv",
            "MATCH (p:P) RETURN sum(p.age)",
        ]);
        assert_eq!(out, "sum(p.age)\n71\n", "{name}");
    }
    // Files that disagree keep the comma: the error then names the right one.
    let both = write(d, "both.csv", "id:ID,name\n1,Ann\n");
    let q = format!("Q={}", s(&semi));
    let e = import_err(
        d,
        &format!("P={}", s(&both)),
        None,
        &["--nodes", q.as_str()],
    );
    assert!(e.contains("pass --delimiter ';'"), "{e}");
}

/// `;`-delimited fields (given or sniffed) take `|` between array elements unless told
/// otherwise; the same byte for both is refused.
#[test]
fn arrays_of_semicolon_files_split_on_bars() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let f = write(d, "arr.csv", "id:ID;tags:string[]\n1;a|b\n");
    for (name, extra) in [
        ("sniffed.qdb", vec![]),
        ("given.qdb", vec!["--delimiter", ";"]),
    ] {
        let db = d.join(name);
        let nodes = format!("P={}", s(&f));
        let mut args = vec!["import", "--db", s(&db), "--nodes", nodes.as_str()];
        args.extend(extra);
        ok(&args);
        let out = ok(&[
            "query",
            "--db",
            s(&db),
            "--format",
            "csv",
            "MATCH (p:P) RETURN size(p.tags)",
        ]);
        assert_eq!(out, "size(p.tags)\n2\n", "{name}");
    }
    let e = import_err(
        d,
        &format!("P={}", s(&f)),
        None,
        &["--delimiter", ";", "--array-delimiter", ";"],
    );
    assert!(e.contains("both `;`"), "{e}");
}

#[test]
fn invalid_utf8_is_rejected_where_it_is() {
    // A chunk with one bad byte is checked field by field: the bad fields are rejected
    // at their place, the rest of the chunk (here the whole file) imports.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut text = b"id:ID,name,c:char,:LABEL\n1,ok,a,A\n".to_vec();
    text.extend_from_slice(b"2,bad\xff,b,A\n3,\xc3\xa9t\xc3\xa9,\xc3\xa9,B\n4,x,\xfe,A\n5,y,c,C\xff\n6,\"q\"\"\xc3\xa9\",d,A\n");
    let n = d.join("n.csv");
    std::fs::write(&n, &text).unwrap();
    let db = d.join("db.qdb");
    let rej = d.join("rejects.csv");
    let out = ok(&[
        "import",
        "--db",
        s(&db),
        "--nodes",
        &format!("N={}", s(&n)),
        "--skip-bad-rows",
        "--rejects",
        s(&rej),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"], 3, "{out}");
    // The rejects file keeps each row's bytes as they were: read it as bytes.
    let mut r = csv::ReaderBuilder::new().from_path(&rej).unwrap();
    let rows: Vec<csv::ByteRecord> = r.byte_records().map(|x| x.unwrap()).collect();
    let text = |r: &csv::ByteRecord, i: usize| String::from_utf8_lossy(&r[i]).to_string();
    let mut got: Vec<(String, String)> = rows.iter().map(|r| (text(r, 1), text(r, 3))).collect();
    got.sort();
    assert_eq!(&rows[0][5], b"2,bad\xff,b,A", "{rows:?}");
    let want: Vec<(String, String)> = [
        ("3", "InvalidUtf8"),
        ("5", "InvalidUtf8"),
        ("6", "InvalidUtf8"),
    ]
    .iter()
    .map(|(l, r)| (l.to_string(), r.to_string()))
    .collect();
    assert_eq!(got, want, "{rows:?}");
    let q = ok(&[
        "query",
        "--db",
        s(&db),
        "--format",
        "csv",
        "MATCH (n) RETURN n.id, n.name, n.c ORDER BY n.id",
    ]);
    assert!(q.contains("3,été,é"), "{q}");
    assert!(q.contains("6,\"q\"\"é\",d"), "{q}");
    // Without --skip-bad-rows the first bad field is named.
    let db2 = d.join("db2.qdb");
    let err = fails(&[
        "import",
        "--db",
        s(&db2),
        "--nodes",
        &format!("N={}", s(&n)),
    ]);
    assert!(err.contains("n.csv:3:3: invalid UTF-8"), "{err}");
}

#[test]
fn integer_endpoint_pairs_read_alike_on_either_path() {
    // Plain `<id>,<id>` records take the parse stage's short path until the first record
    // of another form (a space, a CRLF, a quote, a missing node, another field count),
    // from which the general path reads the rest of the chunk: edges, rejected rows and
    // their lines must be as the general path alone gives them. Integer ids, and the
    // default path's string ids (canonical integers).
    for integer in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let n = write(d, "n.csv", "id:ID\n1\n2\n3\n4\n5\n6\n");
        // (A string id keeps its spaces: " 3" is an integer id only.)
        let third = if integer { " 3,4" } else { "3,4" };
        let r1 = write(
            d,
            "r1.csv",
            &format!(":START_ID,:END_ID\n1,2\n2,3\n{third}\n4,5\r\n5,99\n-1,2\n\n\"6\",1\n1,3,x\n2,4\n6,6"),
        );
        let mut text = String::from(":START_ID,:END_ID\n");
        for _ in 0..50 {
            text.push_str("1,2\n");
        }
        text.push_str("5,99\n");
        for _ in 0..10 {
            text.push_str("2,1\n");
        }
        let r2 = write(d, "r2.csv", &text);
        let db = d.join("db.qdb");
        let rej = d.join("rejects.csv");
        let (na, ra, rb) = (
            format!("N={}", s(&n)),
            format!("A={}", s(&r1)),
            format!("B={}", s(&r2)),
        );
        let mut args = vec![
            "import",
            "--db",
            s(&db),
            "--nodes",
            &na,
            "--relationships",
            &ra,
            "--relationships",
            &rb,
            "--skip-bad-rows",
            "--rejects",
            s(&rej),
            "--json",
        ];
        if integer {
            args.extend(["--id-type", "integer"]);
        }
        let out = ok(&args);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["relationships"], 7 + 60, "{out}");
        let (_, rows) = read_csv(&rej);
        let mut got: Vec<(String, String, String)> = rows
            .iter()
            .map(|r| (r[0].clone(), r[1].clone(), r[3].clone()))
            .collect();
        got.sort();
        let file = |p: &std::path::Path| p.to_string_lossy().to_string();
        let mut want = vec![
            (file(&r1), "6".to_string(), "MissingNode".to_string()),
            (file(&r1), "7".to_string(), "MissingNode".to_string()),
            (file(&r1), "10".to_string(), "FieldCount".to_string()),
            (file(&r2), "52".to_string(), "MissingNode".to_string()),
        ];
        want.sort();
        assert_eq!(got, want, "integer {integer}: {rows:?}");
        let q = ok(&[
            "query",
            "--db",
            s(&db),
            "--format",
            "csv",
            "MATCH (a)-[r:A]->(b) RETURN a.id AS a, b.id AS b ORDER BY a, b",
        ]);
        assert_eq!(
            q, "a,b\n1,2\n2,3\n2,4\n3,4\n4,5\n6,1\n6,6\n",
            "integer {integer}: {q}"
        );
        let q = ok(&[
            "query",
            "--db",
            s(&db),
            "--format",
            "csv",
            "MATCH (a)-[r:B]->(b) RETURN a.id AS a, b.id AS b, count(*) AS n ORDER BY a",
        ]);
        assert_eq!(q, "a,b,n\n1,2,50\n2,1,10\n", "integer {integer}: {q}");
    }
}
