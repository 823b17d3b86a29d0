//! Import -> export -> import -> export gives the same graph, as multisets of nodes and
//! relationships, on generated workloads and on a hand-written file full of CSV corner
//! cases (quoted newlines, doubled quotes, CRLF, BOM, arrays, extra labels, string ids,
//! several files with a header-only first file, gzip).

mod common;
use common::*;
use std::collections::BTreeMap;
use std::io::Write;

fn multiset(rows: Vec<Vec<String>>) -> BTreeMap<Vec<String>, usize> {
    let mut m = BTreeMap::new();
    for r in rows {
        *m.entry(r).or_insert(0) += 1;
    }
    m
}

/// Exports `db` into `out` and returns (node files, rel files) as header -> multiset.
fn export(
    db: &std::path::Path,
    out: &std::path::Path,
) -> Vec<(Vec<String>, BTreeMap<Vec<String>, usize>)> {
    ok(&["export", "--db", s(db), "--out", s(out)]);
    let mut all = Vec::new();
    for p in export_files(out, "nodes-")
        .into_iter()
        .chain(export_files(out, "rels-"))
    {
        let (h, rows) = read_csv(&p);
        all.push((h, multiset(rows)));
    }
    all
}

fn reimport_args(out: &std::path::Path, db2: &std::path::Path, id_type: &str) -> Vec<String> {
    let mut args = vec![
        "import".to_string(),
        "--db".into(),
        s(db2).into(),
        "--id-type".into(),
        id_type.into(),
    ];
    for p in export_files(out, "nodes-") {
        args.push("--nodes".into());
        args.push(s(&p).into());
    }
    for p in export_files(out, "rels-") {
        args.push("--relationships".into());
        args.push(s(&p).into());
    }
    args
}

#[test]
fn corner_cases_survive_a_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Header-only first file, then two data files (one gzip, one CRLF with a BOM).
    write(d, "h.csv", "pid:ID(P),name,age:int,score:double,tags:string[],ok:boolean,born:date,seen:datetime,:LABEL\n");
    write(
        d,
        "p1.csv",
        "a,\"Ann, \"\"the\"\" first\",31,1.5,x;y,true,1990-02-03,2020-01-01T10:00:00+02:00,Admin\n\
         b,\"multi\nline\nname\",,,,false,,,\n",
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all("c,Cé,44,-2e-3,solo,TRUE,2000-12-31,1999-12-31T23:59:59Z,Admin;Ops\n".as_bytes())
        .unwrap();
    std::fs::write(d.join("p2.csv.gz"), gz.finish().unwrap()).unwrap();
    write(
        d,
        "p3.csv",
        "\u{feff}d,Dee,7,0,,,,,\r\ne,\"\",8,3.25,a;b;c,false,1969-07-20,,\r\n",
    );
    write(d, "knows.csv", ":START_ID(P),:END_ID(P),since:int,note\na,b,2001,\"x,y\"\nb,c,,\nc,a,7,\"q\"\"q\"\na,b,2001,dup\n");
    let db = d.join("g.qdb");
    let nodes = format!(
        "Person={},{},{},{}",
        s(&d.join("h.csv")),
        s(&d.join("p1.csv")),
        s(&d.join("p2.csv.gz")),
        s(&d.join("p3.csv"))
    );
    let out = ok(&[
        "import",
        "--db",
        s(&db),
        "--nodes",
        &nodes,
        "--relationships",
        &format!("KNOWS={}", s(&d.join("knows.csv"))),
    ]);
    assert!(out.contains("5 nodes") || out.contains(" 5 nodes"), "{out}");
    let e1 = export(&db, &d.join("e1"));
    // Spot-check values as a user would read them.
    let (h, rows) = read_csv(&export_files(&d.join("e1"), "nodes-")[0]);
    assert_eq!(h[0], "pid:ID(P)");
    let ann = rows.iter().find(|r| r[0] == "a").unwrap();
    assert_eq!(ann[1], "Ann, \"the\" first");
    assert_eq!(ann[4], "x;y");
    assert_eq!(ann[7], "2020-01-01T08:00:00Z");
    assert_eq!(ann[8], "Person;Admin");
    let b = rows.iter().find(|r| r[0] == "b").unwrap();
    assert_eq!(b[1], "multi\nline\nname");
    let c = rows.iter().find(|r| r[0] == "c").unwrap();
    assert_eq!(
        (c[1].as_str(), c[3].as_str(), c[5].as_str(), c[8].as_str()),
        ("Cé", "-0.002", "true", "Person;Admin;Ops")
    );
    let (_, rels) = read_csv(&export_files(&d.join("e1"), "rels-")[0]);
    assert_eq!(rels.len(), 4);
    assert!(rels
        .iter()
        .any(|r| r[0] == "c" && r[1] == "a" && r[4] == "q\"q"));
    // Re-import the export and export again: the same multisets.
    let args = reimport_args(&d.join("e1"), &d.join("g2.qdb"), "string");
    ok_args(&args);
    let e2 = export(&d.join("g2.qdb"), &d.join("e2"));
    assert_eq!(e1, e2);
    // The same through Parquet: typed columns under the same header names, read back by
    // the import as the same graph.
    let pq = d.join("e3");
    ok(&[
        "export",
        "--db",
        s(&db),
        "--out",
        s(&pq),
        "--format",
        "parquet",
    ]);
    let files = export_files(&pq, "");
    assert!(
        files.len() == 2 && files.iter().all(|f| f.extension().unwrap() == "parquet"),
        "{files:?}"
    );
    ok_args(&reimport_args(&pq, &d.join("g3.qdb"), "string"));
    assert_eq!(export(&d.join("g3.qdb"), &d.join("e4")), e1);
}

#[test]
fn generated_workloads_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(&[
        "generate",
        "social",
        "--scale",
        "0.002",
        "--out",
        s(&d.join("social")),
    ]);
    ok(&[
        "generate",
        "dolt",
        "--rows",
        "3000",
        "--order",
        "random",
        "--out",
        s(&d.join("dolt")),
    ]);
    let db = d.join("s.qdb");
    ok(&[
        "import",
        "--db",
        s(&db),
        "--id-type",
        "integer",
        "--threads",
        "2",
        "--nodes",
        &format!("User={}", s(&d.join("social/nodes.csv"))),
        "--nodes",
        &format!("Dolt={}", s(&d.join("dolt/dolt-3k-random.csv"))),
        "--relationships",
        &format!("FOLLOWS={}", s(&d.join("social/edges.csv"))),
    ]);
    let e1 = export(&db, &d.join("e1"));
    // Every input row is in the export, value for value after typing.
    let (_, users) = read_csv(&d.join("social/nodes.csv"));
    assert_eq!(e1[0].1.values().sum::<usize>(), users.len());
    let (_, dolt) = read_csv(&d.join("dolt/dolt-3k-random.csv"));
    let exported: BTreeMap<String, Vec<String>> =
        e1[1].1.keys().map(|r| (r[0].clone(), r.clone())).collect();
    for row in &dolt {
        let e = &exported[&row[0]];
        assert_eq!(e[1], row[1], "c1 of pk {}", row[0]);
        assert_eq!(e[3].replace('T', " "), row[3], "c3 of pk {}", row[0]);
        if !row[4].is_empty() {
            assert_eq!(e[4].parse::<f64>().unwrap(), row[4].parse::<f64>().unwrap());
        }
        assert_eq!(e[6].parse::<f32>().ok(), row[6].parse::<f32>().ok());
        assert_eq!(&e[7..10], &row[7..10]);
    }
    let (_, edges) = read_csv(&d.join("social/edges.csv"));
    let mut want = multiset(
        edges
            .into_iter()
            .map(|mut r| {
                r.push("FOLLOWS".into());
                r
            })
            .collect(),
    );
    assert_eq!(&e1[2].1, &std::mem::take(&mut want));
    let args = reimport_args(&d.join("e1"), &d.join("s2.qdb"), "integer");
    ok_args(&args);
    assert_eq!(export(&d.join("s2.qdb"), &d.join("e2")), e1);
    // Loaded and offline opens agree with mapped.
    let (l, o) = (info(&db, "loaded"), info(&db, "offline"));
    assert_eq!(l["nodes"], o["nodes"]);
    assert_eq!(l["relationships"], o["relationships"]);
    ok(&["check", "--db", s(&db)]);
}

#[test]
fn inferred_types_are_typed_in_storage() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A plain header, as another tool would write it: types come from the data.
    let f = write(
        d,
        "plain.csv",
        "id:ID,n,x,flag,day,at,name,mixed\n1,10,1.5,true,2020-01-02,2020-01-02 03:04:05,ann,1\n2,,2,false,2021-12-31,2021-12-31T00:00:00,bob,x\n",
    );
    let db = d.join("i.qdb");
    ok(&[
        "import",
        "--db",
        s(&db),
        "--nodes",
        &format!("T={}", s(&f)),
        "--infer-types",
    ]);
    let v = info(&db, "mapped");
    let types: Vec<String> = v["node_tables"][0]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}:{}",
                c["name"].as_str().unwrap(),
                c["type"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        types,
        [
            "id:string",
            "n:long",
            "x:double",
            "flag:boolean",
            "day:date",
            "at:localdatetime",
            "name:string",
            "mixed:string"
        ]
    );
}

#[test]
fn mixed_types_in_one_file_split_by_type() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let n = write(d, "n.csv", "id:ID,name\n1,a\n2,b\n3,c\n");
    let r = write(
        d,
        "r.csv",
        ":START_ID,:END_ID,:TYPE,w:int\n1,2,A,10\n2,3,B,20\n3,1,A,30\n1,3,B,\n2,1,A,50\n",
    );
    let db = d.join("m.qdb");
    let out = ok(&[
        "import",
        "--db",
        s(&db),
        "--nodes",
        &format!("N={}", s(&n)),
        "--relationships",
        s(&r),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let by_type: BTreeMap<String, u64> = v["relationships_by_type"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["type"].as_str().unwrap().to_string(),
                t["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by_type,
        BTreeMap::from([("A".to_string(), 3), ("B".to_string(), 2)])
    );
    let e = export(&db, &d.join("e"));
    // Node file, then one file per type with its own rows and properties.
    let a: Vec<Vec<String>> = e[1].1.keys().cloned().collect();
    let b: Vec<Vec<String>> = e[2].1.keys().cloned().collect();
    let row = |x: &str, y: &str, t: &str, w: &str| {
        vec![x.to_string(), y.to_string(), t.to_string(), w.to_string()]
    };
    assert_eq!(
        a,
        vec![
            row("1", "2", "A", "10"),
            row("2", "1", "A", "50"),
            row("3", "1", "A", "30")
        ]
    );
    assert_eq!(b, vec![row("1", "3", "B", ""), row("2", "3", "B", "20")]);
}

#[test]
fn row_groups_encoded_in_the_background_keep_their_order() {
    // A budget with room for two row groups of the byte cap: groups are encoded on a
    // thread of their own while the next fills. 300k dolt rows make three groups.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(&[
        "generate",
        "dolt",
        "--rows",
        "300000",
        "--order",
        "random",
        "--out",
        s(d),
    ]);
    let csv = d.join("dolt-300k-random.csv");
    let db = d.join("d.qdb");
    let out = ok(&[
        "import",
        "--db",
        s(&db),
        "--id-type",
        "integer",
        "--memory-budget",
        "1GiB",
        "--nodes",
        &format!("Dolt={}", s(&csv)),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["row_groups"].as_u64().unwrap() >= 3, "{out}");
    // Nodes in file order, every value in place.
    let q = ok(&[
        "query",
        "--db",
        s(&db),
        "--format",
        "csv",
        "MATCH (n:Dolt) RETURN n.pk, n.c1, n.c9",
    ]);
    let mut got = csv::Reader::from_reader(q.as_bytes());
    let (_, rows) = read_csv(&csv);
    let mut n = 0;
    for (rec, row) in got.records().zip(&rows) {
        let rec = rec.unwrap();
        assert_eq!(
            (&rec[0], &rec[1], &rec[2]),
            (&row[0][..], &row[1][..], &row[9][..]),
            "row {n}"
        );
        n += 1;
    }
    assert_eq!(n, rows.len());
    ok(&["check", "--db", s(&db)]);
}
