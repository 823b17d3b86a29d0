//! LOAD CSV's columnar path (`ops::colload`) against the row path on the same files:
//! the same nodes, properties, counters and bad rows. The row path is the same statement
//! with `WITH row` after the LOAD, which the planner never takes column by column.

mod common;

use common::{rows, run, sorted};
use proptest::prelude::*;
use quiver_query::{Session, Summary, Value};
use quiver_storage::OpenMode;
use std::path::Path;

fn open(dir: &Path) -> Session {
    std::fs::create_dir_all(dir.join("import")).unwrap();
    Session::open_with(&dir.join("g.qdb"), OpenMode::Mapped, true).unwrap()
}

fn plan(s: &mut Session, q: &str) -> String {
    run(s, &format!("EXPLAIN {q}")).unwrap().plan.unwrap()
}

/// Everything the database holds, as sorted text.
fn contents(s: &mut Session) -> Vec<String> {
    sorted(s, "MATCH (n) RETURN labels(n), properties(n)")
}

/// The same row path statement: `WITH row` after `AS row`.
fn row_path(q: &str) -> String {
    q.replacen(" AS row ", " AS row WITH row ", 1)
}

/// Runs `q` column by column in one database and by rows in another, on the file
/// `name` holding `text`; both must agree (also on failing, with the same message).
fn same(text: impl AsRef<[u8]>, name: &str, q: &str) -> (Summary, Vec<String>) {
    let text = text.as_ref();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut a, mut b) = (open(da.path()), open(db.path()));
    for d in [&da, &db] {
        std::fs::write(d.path().join("import").join(name), text).unwrap();
    }
    let slow = row_path(q);
    assert!(plan(&mut a, q).contains("ColumnarLoadCreate"), "{q}");
    assert!(
        !plan(&mut b, &slow).contains("ColumnarLoadCreate"),
        "{slow}"
    );
    match (run(&mut a, q), run(&mut b, &slow)) {
        (Ok(x), Ok(y)) => {
            assert_eq!(x.counters.nodes_created, y.counters.nodes_created, "{q}");
            assert_eq!(x.counters.properties_set, y.counters.properties_set, "{q}");
            assert_eq!(x.counters.labels_added, y.counters.labels_added, "{q}");
            assert_eq!(x.bad_rows, y.bad_rows, "{q}");
            let (ca, cb) = (contents(&mut a), contents(&mut b));
            assert_eq!(ca, cb, "{q}\n{}", String::from_utf8_lossy(text));
            if let (Some(p), Some(r)) = (&x.rejects_path, &y.rejects_path) {
                let strip = |p: &Path| {
                    String::from_utf8_lossy(&std::fs::read(p).unwrap())
                        .lines()
                        .map(|l| l.split_once(',').map_or(l, |x| x.1).to_string())
                        .collect::<Vec<_>>()
                };
                assert_eq!(strip(p), strip(r));
            }
            (x, ca)
        }
        (Err(x), Err(y)) => {
            // The messages name the file by its path in each database's directory.
            let clean = |e: String, d: &Path| e.replace(&d.display().to_string(), "");
            assert_eq!(
                clean(x.to_string(), da.path()),
                clean(y.to_string(), db.path())
            );
            (Summary::default(), Vec::new())
        }
        (x, y) => panic!("{q}: one path failed: {:?} / {:?}", x.err(), y.err()),
    }
}

const INTS: &[&str] = &[
    "7",
    "007",
    "+7",
    " 7",
    "7.0",
    "-12",
    "1e3",
    "abc",
    "",
    "NA",
    "9223372036854775808",
    "-0",
];
const FLOATS: &[&str] = &[
    "1.5", " 2.25 ", "1e-3", "NaN", "inf", "x", "", "NA", "-0.0", "3",
];
const BOOLS: &[&str] = &["true", "FALSE", " True ", "yes", "", "NA", "1"];
const STAMPS: &[&str] = &[
    "2024-01-02 03:04:05",
    "1999-12-31 23:59:59.5",
    "NA",
    "2000-02-29 00:00:00",
];
const TEXTS: &[&str] = &[
    "plain",
    "\"with,comma\"",
    "\"a \"\"quote\"\"\"",
    "\"two\nlines\"",
    "é ü",
    "",
    "NA",
    "1.5",
];

fn field(set: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    prop::sample::select(set)
}

fn record() -> impl Strategy<Value = Vec<&'static str>> {
    (
        field(INTS),
        field(FLOATS),
        field(BOOLS),
        field(STAMPS),
        field(TEXTS),
        field(INTS),
    )
        .prop_map(|(a, b, c, d, e, f)| vec![a, b, c, d, e, f])
}

const PROPS: &str = "a: toInteger(row.a), b: toFloat(row.b), c: toBoolean(row.c), \
    d: localdatetime(replace(row.d, ' ', 'T')), e: row.e, s: row.a, z: row.missing, \
    g: row.a + '|' + row.e, m: CASE WHEN row.c = 'true' THEN 1 ELSE row.e END";

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Files with a header (a repeated name: the first is the field), with and without
    /// NULLIF, every property form (fields, conversions, replace, generic expressions of
    /// mixed types), one and two node patterns.
    #[test]
    fn with_a_header_both_paths_agree(
        recs in prop::collection::vec(record(), 0..300),
        nullif in any::<bool>(),
        two in any::<bool>(),
        batch in prop::option::of(1usize..60),
    ) {
        let mut text = String::from("a,b,c,d,e,a\n");
        for r in &recs {
            text += &r.join(",");
            text.push('\n');
        }
        let opts = if nullif { "WITH HEADER NULLIF 'NA'" } else { "WITH HEADER" };
        let mut create = format!("CREATE (:A {{{PROPS}}})");
        if two {
            create += ", (:B:C {x: toInteger(replace(replace(row.b, '.', ''), ' ', '')), y: size(row.e)})";
        }
        // In transactions of a few rows, the batches end inside chunks.
        let q = match batch {
            None => format!("LOAD CSV FROM 'f.csv' {opts} AS row {create}"),
            Some(n) => format!(
                "LOAD CSV FROM 'f.csv' {opts} AS row CALL {{ WITH row {create} }} IN TRANSACTIONS OF {n} ROWS"
            ),
        };
        same(&text, "f.csv", &q);
    }

    /// Files without a header: records of any length (a field past the end is null).
    #[test]
    fn without_a_header_both_paths_agree(recs in prop::collection::vec((record(), 1usize..7), 0..200)) {
        let mut text = String::new();
        for (r, n) in &recs {
            text += &r[..*n].join(",");
            text.push('\n');
        }
        let q = "LOAD CSV FROM 'f.csv' NO HEADER AS row CREATE (:L {i: toInteger(row[0]), f: toFloat(row[1]), \
                 t: row[4], far: row[9], n: size(row[5])})";
        same(&text, "f.csv", q);
    }
}

#[test]
fn bad_rows_fail_or_are_rejected_alike() {
    let text: &[u8] = b"a,b\n1,2\n3\n4,x\"y\n5,\xff\n6,7\n";
    let (_, c) = same(
        text,
        "bad.csv",
        "LOAD CSV FROM 'bad.csv' WITH HEADER IGNORE BAD AS row CREATE (:R {a: toInteger(row.a), b: row.b})",
    );
    assert_eq!(c.len(), 2);
    same(
        text,
        "bad.csv",
        "LOAD CSV FROM 'bad.csv' WITH HEADER AS row CREATE (:R {a: toInteger(row.a), b: row.b})",
    );
    // A conversion that fails fails the statement the same way.
    same(
        "d\n2024-01-02\nnot a date\n",
        "d.csv",
        "LOAD CSV FROM 'd.csv' WITH HEADER AS row CREATE (:R {d: date(row.d)})",
    );
}

#[test]
fn invalid_utf8_is_a_bad_row_with_its_column() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    std::fs::write(d.path().join("import/u.csv"), b"a,b\n1,2\n3,\xff\n").unwrap();
    let e = run(
        &mut s,
        "LOAD CSV FROM 'u.csv' WITH HEADER AS row CREATE (:U {a: row.a})",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("u.csv:3:3: invalid UTF-8"), "{e}");
}

/// Past the direct path's threshold (a table written in row groups), with a column
/// whose type changes between chunks (integers, then strings: misfits).
#[test]
fn a_direct_load_agrees_with_the_row_path() {
    let mut text = String::from("k,v,w\n");
    for i in 0..120_000 {
        text += &format!("{i},{},{}\n", i % 7, if i % 1000 == 0 { "" } else { "x" });
    }
    let q = "LOAD CSV FROM 'big.csv' WITH HEADER AS row CREATE (:Big {k: toInteger(row.k), \
             m: CASE WHEN toInteger(row.k) < 60000 THEN toInteger(row.v) ELSE row.v END, w: row.w})";
    let (sum, c) = same(&text, "big.csv", q);
    assert_eq!(sum.counters.nodes_created, 120_000);
    assert_eq!(c.len(), 120_000);
}

/// In transactions of 50,000 rows: two direct batches (tables of their own) and one
/// through the delta; the default batch of 1,000 rows through the delta.
#[test]
fn batches_in_transactions_agree_with_the_row_path() {
    let mut text = String::from("k,v\n");
    for i in 0..120_000 {
        text += &format!("{i},v{}\n", i % 13);
    }
    let q = "LOAD CSV FROM 'big.csv' WITH HEADER AS row CALL { WITH row CREATE (:Big {k: toInteger(row.k), v: row.v}) } IN TRANSACTIONS OF 50000 ROWS";
    let (sum, c) = same(&text, "big.csv", q);
    assert_eq!(sum.counters.nodes_created, 120_000);
    assert_eq!(c.len(), 120_000);
    let q = "LOAD CSV FROM 'big.csv' WITH HEADER AS row CALL { WITH row CREATE (:Big {k: toInteger(row.k)}) } IN TRANSACTIONS";
    let cut = text[..200_000].rfind('\n').unwrap() + 1;
    let (sum, _) = same(&text[..cut], "big.csv", q);
    assert!(sum.counters.nodes_created > 1000);
}

#[test]
fn inside_a_transaction_the_row_path_runs() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    std::fs::write(d.path().join("import/t.csv"), "k\n1\n2\n3\n").unwrap();
    run(&mut s, "BEGIN").unwrap();
    let sum = run(
        &mut s,
        "LOAD CSV FROM 't.csv' WITH HEADER AS row CREATE (:T {k: toInteger(row.k)})",
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_created, 3);
    // The transaction sees its own nodes before it commits.
    assert_eq!(
        rows(&mut s, "MATCH (t:T) RETURN sum(t.k)"),
        vec![vec![Value::Int(6)]]
    );
    run(&mut s, "COMMIT").unwrap();
    assert_eq!(
        rows(&mut s, "MATCH (t:T) RETURN count(*)"),
        vec![vec![Value::Int(3)]]
    );
}

#[test]
fn only_whole_statements_of_fields_take_it() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    std::fs::write(d.path().join("import/t.csv"), "k\n1\n").unwrap();
    for q in [
        // The row whole, a computed key, a RETURN after, a MATCH before.
        "LOAD CSV FROM 't.csv' WITH HEADER AS row CREATE (:T {k: keys(row)})",
        "LOAD CSV FROM 't.csv' WITH HEADER AS row CREATE (:T {k: row[toString(1)]})",
        "LOAD CSV FROM 't.csv' WITH HEADER AS row CREATE (t:T {k: row.k}) RETURN t",
        "MATCH (x) WITH count(x) AS c LOAD CSV FROM 't.csv' WITH HEADER AS row CREATE (:T {k: row.k})",
        "LOAD CSV FROM 't.csv' WITH HEADER AS row CREATE (:T)-[:R]->(:U)",
        // Batches that go on after an error, a body that filters or returns.
        "LOAD CSV FROM 't.csv' WITH HEADER AS row CALL { WITH row CREATE (:T {k: row.k}) } IN TRANSACTIONS ON ERROR CONTINUE",
        "LOAD CSV FROM 't.csv' WITH HEADER AS row CALL { WITH row WHERE row.k > '0' CREATE (:T {k: row.k}) } IN TRANSACTIONS",
        "LOAD CSV FROM 't.csv' WITH HEADER AS row CALL { WITH row CREATE (t:T {k: row.k}) RETURN t } IN TRANSACTIONS RETURN count(t)",
    ] {
        assert!(!plan(&mut s, q).contains("ColumnarLoadCreate"), "{q}");
    }
    assert!(plan(
        &mut s,
        "LOAD CSV FROM 't.csv' WITH HEADER AS row CREATE (:T {k: row.k, n: 1})"
    )
    .contains("ColumnarLoadCreate"));
}
