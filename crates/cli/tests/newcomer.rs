//! A newcomer's files (`tests/newcomer/`, see its README) import as they are, with the
//! types DuckDB's sniffer reads from them: the expected types are written here, and
//! checked against DuckDB itself where Python has it (`QUIVER_REQUIRE_DUCKDB=1`, as CI
//! sets, makes its absence a failure). Then what a newcomer asks first: `{id: 1}` finds
//! the node a plain `1` made, dates in another order read as dates, quoted fields keep
//! their commas, quotes and line breaks.

mod common;

use common::{info, ok, s};
use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/newcomer")
        .join(name)
}

/// (file, its columns with the types DuckDB 2.0 reads them as, in Quiver's names).
const FILES: &[(&str, &[(&str, &str)])] = &[
    (
        "people.csv",
        &[
            ("id", "long"),
            ("name", "string"),
            ("zip", "string"),
            ("age", "long"),
            ("joined", "date"),
            ("score", "double"),
            ("active", "boolean"),
            ("note", "string"),
        ],
    ),
    (
        "orders.csv",
        &[
            ("order_id", "long"),
            ("customer", "long"),
            ("amount", "double"),
            ("placed_at", "localdatetime"),
            ("shipped_on", "date"),
        ],
    ),
    (
        "cities.tsv",
        &[
            ("id", "long"),
            ("city", "string"),
            ("population", "long"),
            ("founded", "date"),
            ("code", "string"),
        ],
    ),
    (
        "products.psv",
        &[
            ("sku", "string"),
            ("label", "string"),
            ("price", "double"),
            ("added", "date"),
        ],
    ),
    (
        "single_quoted.csv",
        &[("id", "long"), ("name", "string"), ("city", "string")],
    ),
    ("obrien.csv", &[("id", "long"), ("name", "string")]),
];

/// The columns of the one node table of `db`, as `name:type`.
fn columns(db: &Path) -> Vec<(String, String)> {
    info(db, "mapped")["node_tables"][0]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// What DuckDB's sniffer reads `file`'s columns as, in Quiver's type names; `None`
/// when Python has no DuckDB.
fn duckdb_types(file: &Path) -> Option<Vec<(String, String)>> {
    let script = r#"
import sys
try:
    import duckdb
except ImportError:
    sys.exit(3)
names = {"BIGINT": "long", "DOUBLE": "double", "BOOLEAN": "boolean", "DATE": "date",
         "TIMESTAMP": "localdatetime", "VARCHAR": "string"}
for name, ty, *_ in duckdb.sql("DESCRIBE SELECT * FROM read_csv(?)", params=[sys.argv[1]]).fetchall():
    print(f"{name}\t{names.get(ty, ty)}")
"#;
    let out = Command::new("python3")
        .args(["-c", script, s(file)])
        .output()
        .ok()?;
    if out.status.code() == Some(3) || !out.status.success() {
        assert!(
            std::env::var_os("QUIVER_REQUIRE_DUCKDB").is_none(),
            "DuckDB is required here (QUIVER_REQUIRE_DUCKDB): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (n, t) = l.split_once('\t').unwrap();
                (n.to_string(), t.to_string())
            })
            .collect(),
    )
}

#[test]
fn each_file_imports_with_duckdbs_types() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (file, want)) in FILES.iter().enumerate() {
        let f = corpus(file);
        let db = dir.path().join(format!("{i}.qdb"));
        ok(&["import", "--db", s(&db), "--nodes", &format!("T={}", s(&f))]);
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        assert_eq!(columns(&db), want, "{file}");
        if let Some(duck) = duckdb_types(&f) {
            assert_eq!(duck, want, "{file}: DuckDB's sniffer reads it otherwise");
        }
    }
}

fn query(db: &Path, q: &str) -> Vec<serde_json::Value> {
    ok(&["query", "--db", s(db), "--format", "json", q])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_newcomers_graph_answers_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("g.qdb");
    let out = common::quiver(&[
        "import",
        "--db",
        s(&db),
        "--nodes",
        &format!("Person={}", s(&corpus("people.csv"))),
        "--relationships",
        &format!("KNOWS={}", s(&corpus("knows.csv"))),
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ids: integers"), "{err}");
    assert!(
        err.contains("people.csv: no annotations in the header; read as: id:ID,name,zip,age:long,joined:date,score:double,active:boolean,note"),
        "{err}"
    );
    // `{id: 1}` finds the node `1` made; the quoted comma, doubled quote and CRLF stay.
    let rows = query(
        &db,
        "MATCH (p:Person {id: 1})-[k:KNOWS]->(q) RETURN p.name AS name, p.zip AS zip, p.age + 1 AS next, k.since AS since, k.weight AS w, q.id AS q",
    );
    assert_eq!(
        rows,
        [
            serde_json::json!({"name": "Smith, Alice", "zip": "01234", "next": 31, "since": 2020, "w": 0.5, "q": 2})
        ]
    );
    let rows = query(
        &db,
        "MATCH (p:Person) WHERE p.id IN [3, 4] RETURN p.name AS n ORDER BY p.id",
    );
    assert_eq!(
        rows,
        [
            serde_json::json!({"n": "Carol \"CJ\" Jones"}),
            serde_json::json!({"n": "Dan\r\nNewline"})
        ]
    );
    let rows = query(
        &db,
        "MATCH (p:Person {id: 4}) RETURN p.joined.year AS y, p.note AS note",
    );
    assert_eq!(rows, [serde_json::json!({"y": 2018, "note": null})]);

    // Dates day first: 17/03/2021 is March 17th, and so 04/03/2021 is March 4th.
    let db = dir.path().join("o.qdb");
    ok(&[
        "import",
        "--db",
        s(&db),
        "--nodes",
        &format!("Order={}", s(&corpus("orders.csv"))),
    ]);
    let rows = query(
        &db,
        "MATCH (o:Order) RETURN toString(o.shipped_on) AS d ORDER BY o.order_id",
    );
    let days: Vec<&str> = rows.iter().map(|r| r["d"].as_str().unwrap()).collect();
    assert_eq!(days, ["2021-03-04", "2021-03-05", "2021-03-17"]);

    // Annotated headers keep Neo4j's rule: ids are strings unless --id-type says so.
    let n = common::write(dir.path(), "n.csv", "id:ID,name\n1,a\n2,b\n");
    let db = dir.path().join("a.qdb");
    ok(&["import", "--db", s(&db), "--nodes", &format!("T={}", s(&n))]);
    assert_eq!(
        query(&db, "MATCH (t:T {id: '1'}) RETURN t.name AS n").len(),
        1
    );
    // A plain id column with one id that is not an integer keeps them all text.
    let n = common::write(dir.path(), "m.csv", "id,name\n1,a\nx2,b\n");
    let db = dir.path().join("m.qdb");
    ok(&["import", "--db", s(&db), "--nodes", &format!("T={}", s(&n))]);
    assert_eq!(
        query(&db, "MATCH (t:T {id: '1'}) RETURN t.name AS n").len(),
        1
    );
}
