//! Parquet files import as the same graph as the CSV that says the same thing: every
//! column type from the schema (lists, dates, timestamps with and without a zone,
//! dictionary strings, small ints, unsigned, floats), nulls, values that need quoting,
//! integer ids taken as integers, a folder of parts, and errors that name the file.

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, DictionaryArray, Float32Array, Float64Array, Int16Array,
    Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray, TimestampSecondArray,
    UInt32Array,
};
use parquet::arrow::ArrowWriter;
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::Value;
use quiver_storage::{Database, OpenMode};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn write(path: &Path, cols: Vec<(&str, ArrayRef)>) {
    let b = RecordBatch::try_from_iter(cols).unwrap();
    let f = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(f, b.schema(), None).unwrap();
    w.write(&b).unwrap();
    w.close().unwrap();
}

fn users(path: &Path, ids: Vec<i64>) {
    let n = ids.len();
    let mut tags = ListBuilder::new(StringBuilder::new());
    for i in 0..n {
        if i % 3 == 2 {
            tags.append_null();
        } else {
            tags.values().append_value(format!("t{i}"));
            tags.values().append_value("x");
            tags.append(true);
        }
    }
    let names: Vec<Option<String>> = (0..n)
        .map(|i| match i % 4 {
            0 => Some(format!("name {i}")),
            1 => Some(format!("a, \"quoted\"\nname {i}")),
            2 => None,
            _ => Some("ü ñ".to_string()),
        })
        .collect();
    let region: DictionaryArray<Int32Type> = (0..n).map(|i| ["north", "south"][i % 2]).collect();
    write(
        path,
        vec![
            ("id", Arc::new(Int64Array::from(ids.clone())) as ArrayRef),
            ("name", Arc::new(StringArray::from(names))),
            (
                "age",
                Arc::new(Int16Array::from(
                    (0..n)
                        .map(|i| (i % 5 != 0).then_some(i as i16))
                        .collect::<Vec<_>>(),
                )),
            ),
            (
                "visits",
                Arc::new(UInt32Array::from((0..n as u32).collect::<Vec<_>>())),
            ),
            (
                "score",
                Arc::new(Float64Array::from(
                    (0..n).map(|i| i as f64 / 3.0).collect::<Vec<_>>(),
                )),
            ),
            (
                "ratio",
                Arc::new(Float32Array::from(
                    (0..n).map(|i| i as f32 * 0.5).collect::<Vec<_>>(),
                )),
            ),
            (
                "ok",
                Arc::new(BooleanArray::from(
                    (0..n)
                        .map(|i| (i % 7 != 3).then_some(i % 2 == 0))
                        .collect::<Vec<_>>(),
                )),
            ),
            (
                "born",
                Arc::new(Date32Array::from(
                    (0..n).map(|i| 7000 + i as i32).collect::<Vec<_>>(),
                )),
            ),
            (
                "seen",
                Arc::new(TimestampSecondArray::from(
                    (0..n).map(|i| 1_600_000_000 + i as i64).collect::<Vec<_>>(),
                )),
            ),
            (
                "at",
                Arc::new(
                    TimestampMicrosecondArray::from(
                        (0..n)
                            .map(|i| 1_600_000_000_000_123 + i as i64)
                            .collect::<Vec<_>>(),
                    )
                    .with_timezone("UTC"),
                ),
            ),
            ("tags", Arc::new(tags.finish())),
            ("region", Arc::new(region)),
        ],
    );
}

fn import_pq(db: &Path, nodes: Vec<PathBuf>, rels: Vec<PathBuf>) -> Result<Database, String> {
    let mut cfg = ImportConfig::new(db);
    for (files, list) in [(nodes, 0), (rels, 1)] {
        if files.is_empty() {
            continue;
        }
        let g = InputGroup {
            spec: Some(if list == 0 { "User" } else { "KNOWS" }.into()),
            source: quiver_arrow::source::parquet_group(&files)?,
            files,
        };
        if list == 0 {
            cfg.nodes.push(g);
        } else {
            cfg.relationships.push(g);
        }
    }
    if quiver_import::sources_have_integer_ids(&cfg).map_err(|e| e.to_string())? {
        cfg.id_type = quiver_storage::manifest::IdType::Integer;
    }
    cfg.threads = 2;
    cfg.memory_budget_bytes = 64 << 20;
    import(&cfg, &NoProgress).map_err(|e| e.to_string())?;
    Ok(Database::open(db, OpenMode::Mapped).unwrap())
}

fn q(db: &Database, text: &str) -> Vec<Vec<Value>> {
    quiver_query::query(db, text, &Default::default())
        .unwrap()
        .1
}

#[test]
fn every_column_type_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let n = 200_000usize; // several batches of the reader
    let u = dir.path().join("users.parquet");
    users(&u, (0..n as i64).map(|i| i * 2 + 1).collect());
    let k = dir.path().join("knows.parquet");
    write(
        &k,
        vec![
            (
                "src",
                Arc::new(Int64Array::from(
                    (0..n as i64).map(|i| i * 2 + 1).collect::<Vec<_>>(),
                )) as ArrayRef,
            ),
            (
                "dst",
                Arc::new(Int64Array::from(
                    (0..n as i64)
                        .map(|i| ((i + 1) % n as i64) * 2 + 1)
                        .collect::<Vec<_>>(),
                )),
            ),
            (
                "w",
                Arc::new(Float64Array::from(
                    (0..n)
                        .map(|i| (i % 2 == 0).then_some(0.25))
                        .collect::<Vec<_>>(),
                )),
            ),
        ],
    );
    let db = import_pq(&dir.path().join("g.qdb"), vec![u], vec![k]).unwrap();
    // Integer ids: the frame's 1 is the node's id 1.
    let r = q(&db, "MATCH (u:User {id: 3})-[k:KNOWS]->(v) RETURN u.name, u.age, u.visits, u.score, u.ratio, u.ok, toString(u.born), toString(u.seen), toString(u.at), u.tags, u.region, k.w, v.id");
    assert_eq!(r.len(), 1, "{r:?}");
    let row = &r[0];
    assert_eq!(row[0], Value::Str("a, \"quoted\"\nname 1".into()));
    assert_eq!(row[1], Value::Int(1));
    assert_eq!(row[2], Value::Int(1));
    assert_eq!(row[3], Value::Float(1.0 / 3.0));
    assert_eq!(row[4], Value::Float(0.5));
    assert_eq!(row[5], Value::Bool(false));
    assert_eq!(row[6], Value::Str("1989-03-03".into()));
    assert_eq!(row[7], Value::Str("2020-09-13T12:26:41".into()));
    assert_eq!(row[8], Value::Str("2020-09-13T12:26:40.000124Z".into()));
    assert_eq!(
        row[9],
        Value::List(Arc::new(vec![
            Value::Str("t1".into()),
            Value::Str("x".into())
        ]))
    );
    assert_eq!(row[10], Value::Str("south".into()));
    assert_eq!(row[11], Value::Null);
    assert_eq!(row[12], Value::Int(5));
    // Nulls stay nulls; counts are whole.
    let r = q(&db, "MATCH (u:User) RETURN count(*), count(u.name), count(u.age), count(u.ok), count(u.tags), sum(u.visits)");
    let n = n as i64;
    assert_eq!(
        r[0],
        vec![
            Value::Int(n),
            Value::Int(n - n / 4),
            Value::Int(n - n / 5),
            Value::Int(n - (n + 3) / 7),
            Value::Int(n - n / 3),
            Value::Int(n * (n - 1) / 2),
        ]
    );
    let r = q(&db, "MATCH ()-[k:KNOWS]->() RETURN count(*), count(k.w)");
    assert_eq!(r[0], vec![Value::Int(n), Value::Int(n / 2)]);
}

#[test]
fn a_folder_of_parts_is_one_input() {
    let dir = tempfile::tempdir().unwrap();
    let parts = dir.path().join("users");
    std::fs::create_dir(&parts).unwrap();
    users(&parts.join("part-0.parquet"), vec![1, 2, 3]);
    users(&parts.join("part-1.parquet"), vec![4, 5]);
    std::fs::write(parts.join("_SUCCESS"), "").unwrap();
    let db = import_pq(&dir.path().join("g.qdb"), vec![parts], vec![]).unwrap();
    assert_eq!(
        q(&db, "MATCH (u:User) RETURN sum(u.id)")[0][0],
        Value::Int(15)
    );
}

#[test]
fn errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.parquet");
    users(&a, vec![1, 2]);
    let b = dir.path().join("b.parquet");
    write(
        &b,
        vec![("other", Arc::new(Int64Array::from(vec![1])) as ArrayRef)],
    );
    let e = import_pq(
        &dir.path().join("g.qdb"),
        vec![a.clone(), b.clone()],
        vec![],
    )
    .err()
    .unwrap();
    assert!(
        e.contains("b.parquet") && e.contains("share their columns"),
        "{e}"
    );
    let c = dir.path().join("c.csv");
    std::fs::write(&c, "id\n1\n").unwrap();
    let e = import_pq(&dir.path().join("g.qdb"), vec![a.clone(), c], vec![])
        .err()
        .unwrap();
    assert!(e.contains("all CSV or all Parquet"), "{e}");
    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, "id\n1\n").unwrap();
    let e = import_pq(&dir.path().join("g.qdb"), vec![bad], vec![])
        .err()
        .unwrap();
    assert!(
        e.contains("bad.parquet") && e.contains("not a Parquet file"),
        "{e}"
    );
    // A duplicate id is the CSV path's error, with the file's name.
    let d = dir.path().join("dup.parquet");
    users(&d, vec![1, 1]);
    let e = import_pq(&dir.path().join("g2.qdb"), vec![d], vec![])
        .err()
        .unwrap();
    assert!(
        e.contains("dup.parquet") && e.to_lowercase().contains("duplicate"),
        "{e}"
    );
}

/// Bad rows of typed input are rejected as CSV rows are: the rejects file holds each as
/// a CSV record (quoted where it must be) with the row's line, and the good rows import.
/// String ids (the endpoints looked up together), a column the header types otherwise
/// than the schema (read through its text), and ids that spill to disk (the sort-merge
/// join, which reads the input twice).
#[test]
fn bad_typed_rows_are_rejected_as_csv_records() {
    for spill in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let u = dir.path().join("users.parquet");
        write(
            &u,
            vec![
                (
                    "id:ID(User)",
                    Arc::new(StringArray::from(vec!["a", "b", "a", "c, \"d\""])) as ArrayRef,
                ),
                (
                    "age:int",
                    Arc::new(StringArray::from(vec![
                        Some("1"),
                        Some("2"),
                        Some("3"),
                        None,
                    ])),
                ),
            ],
        );
        let k = dir.path().join("knows.parquet");
        write(
            &k,
            vec![
                (
                    ":START_ID(User)",
                    Arc::new(StringArray::from(vec!["a", "b", "zz", "c, \"d\""])) as ArrayRef,
                ),
                (
                    ":END_ID(User)",
                    Arc::new(StringArray::from(vec!["b", "c, \"d\"", "a", "a"])),
                ),
                (
                    "since:int",
                    Arc::new(StringArray::from(vec!["2001", "x", "2003", "2004"])),
                ),
            ],
        );
        let db = dir.path().join("g.qdb");
        let rejects = dir.path().join("rejects.csv");
        let mut cfg = ImportConfig::new(&db);
        cfg.nodes.push(InputGroup {
            spec: Some("User".into()),
            source: quiver_arrow::source::parquet_group(std::slice::from_ref(&u)).unwrap(),
            files: vec![u.clone()],
        });
        cfg.relationships.push(InputGroup {
            spec: Some("KNOWS".into()),
            source: quiver_arrow::source::parquet_group(std::slice::from_ref(&k)).unwrap(),
            files: vec![k.clone()],
        });
        cfg.threads = 2;
        cfg.skip_bad_rows = true;
        cfg.rejects = Some(rejects.clone());
        cfg.spill_ids = spill;
        import(&cfg, &NoProgress).unwrap();
        let g = Database::open(&db, OpenMode::Mapped).unwrap();
        assert_eq!(
            q(&g, "MATCH (u:User) RETURN u.id, u.age ORDER BY u.id"),
            vec![
                vec![Value::Str("a".into()), Value::Int(1)],
                vec![Value::Str("b".into()), Value::Int(2)],
                vec![Value::Str("c, \"d\"".into()), Value::Null],
            ],
            "spill {spill}"
        );
        assert_eq!(
            q(
                &g,
                "MATCH (a)-[k:KNOWS]->(b) RETURN a.id, b.id, k.since ORDER BY a.id"
            ),
            vec![
                vec![
                    Value::Str("a".into()),
                    Value::Str("b".into()),
                    Value::Int(2001)
                ],
                vec![
                    Value::Str("c, \"d\"".into()),
                    Value::Str("a".into()),
                    Value::Int(2004)
                ],
            ],
            "spill {spill}"
        );
        let text = std::fs::read_to_string(&rejects).unwrap();
        // Each line: file, line (the header is line 1), field number, reason, message and
        // the row as a CSV record (quoted again as a field of the rejects file).
        for want in [
            "users.parquet,4,1,DuplicateId,",
            ",\"a,3\"",
            "knows.parquet,3,3,Cast,",
            ",\"b,\"\"c, \"\"\"\"d\"\"\"\"\"\",x\"",
            "knows.parquet,4,1,MissingNode,",
            ",\"zz,a,2003\"",
        ] {
            assert!(
                text.contains(want),
                "spill {spill}: {want:?} not in\n{text}"
            );
        }
    }
}

/// LOAD CSV of a Parquet file in the import directory: rows as maps of typed values
/// (integers, strings with what CSV would have to quote, dates, timestamps with and
/// without a zone, lists, nulls), or as lists without a header; the CSV paths unchanged.
#[test]
fn load_csv_reads_a_parquet_file_typed() {
    quiver_arrow::register();
    let dir = tempfile::tempdir().unwrap();
    let imports = dir.path().join("import");
    std::fs::create_dir(&imports).unwrap();
    users(&imports.join("users.parquet"), (1..=100_000).collect());
    let db = import_pq(
        &dir.path().join("g.qdb"),
        vec![imports.join("users.parquet")],
        vec![],
    )
    .unwrap();
    let opts = quiver_query::QueryOptions {
        import_dir: Some(imports.clone()),
        ..Default::default()
    };
    let ix = quiver_query::index::IndexSet::load(&db);
    let q = |text: &str| {
        let mut rows = Vec::new();
        quiver_query::run(&db, &ix, text, &Default::default(), &opts, &mut |_, b| {
            for r in 0..b.len {
                rows.push(b.row(r));
            }
            Ok(())
        })
        .unwrap();
        rows
    };
    let r = q("LOAD CSV WITH HEADERS FROM 'file:///users.parquet' AS row WITH row WHERE row.id = 2 \
               RETURN row.id, row.name, row.age, row.ok, row.born, row.seen, row.at, row.tags, row.region, row.visits");
    assert_eq!(r.len(), 1, "{r:?}");
    let row = &r[0];
    assert_eq!(row[0], Value::Int(2));
    assert_eq!(row[1], Value::Str("a, \"quoted\"\nname 1".into()));
    assert_eq!(row[2], Value::Int(1));
    assert_eq!(row[3], Value::Bool(false));
    assert_eq!(row[4], Value::Date(7001));
    assert_eq!(row[5], Value::local_datetime_us(1_600_000_001_000_000));
    assert_eq!(row[6], Value::datetime_us(1_600_000_000_000_124));
    assert_eq!(
        row[7],
        Value::List(Arc::new(vec![
            Value::Str("t1".into()),
            Value::Str("x".into())
        ]))
    );
    assert_eq!(row[8], Value::Str("south".into()));
    assert_eq!(row[9], Value::Int(1));
    // Every row, nulls as nulls; the same counts as the import of the file.
    let r = q("LOAD CSV WITH HEADERS FROM 'users.parquet' AS row \
               RETURN count(*), count(row.name), count(row.age), count(row.tags), sum(row.id)");
    assert_eq!(
        r[0],
        vec![
            Value::Int(100_000),
            Value::Int(75_000),
            Value::Int(80_000),
            Value::Int(66_667),
            Value::Int(5_000_050_000),
        ]
    );
    let imported = q("MATCH (u:User) RETURN count(u.name), count(u.age), count(u.tags)");
    assert_eq!(imported[0][..], r[0][1..4]);
    // Without a header, a row is a list of the values.
    let r = q("LOAD CSV FROM 'users.parquet' AS row RETURN row[0], size(row) LIMIT 1");
    assert_eq!(r[0], vec![Value::Int(1), Value::Int(12)]);
}
