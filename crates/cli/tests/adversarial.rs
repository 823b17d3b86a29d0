//! Adversarial imports at CI size (the full-size runs, 1 GiB fields and 10 million bad
//! rows, are `bench/adversarial_bench.py`): each is a clear error or a correct result,
//! within the budget plus the fixed overhead.

mod common;
use common::*;
use std::io::Write;

const FIXED_OVERHEAD: u64 = 64 << 20;

#[test]
fn nul_and_escape_bytes_are_data_and_print_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let n = d.join("n.csv");
    std::fs::write(&n, b"id:ID,name\n1,a\x00b\n2,\x1b[31mred\n3,plain\n").unwrap();
    let db = d.join("db.qdb");
    ok(&["import", "--db", s(&db), "--nodes", &format!("N={}", s(&n))]);
    let json = ok(&[
        "query",
        "--db",
        s(&db),
        "--format",
        "json",
        "MATCH (n:N) RETURN n.id AS id, n.name AS name, size(n.name) AS len ORDER BY id",
    ]);
    assert!(json.contains(r#""a\u0000b""#), "{json}");
    assert!(json.contains(r#""\u001b[31mred""#), "{json}");
    assert!(json.contains(r#""len":3"#), "{json}");
    // The table never sends the raw bytes to a terminal.
    let table = ok(&[
        "query",
        "--db",
        s(&db),
        "MATCH (n:N) RETURN n.name ORDER BY n.id",
    ]);
    assert!(
        !table.contains('\0') && !table.contains('\x1b'),
        "{table:?}"
    );
    assert!(table.contains(r"a\u0000b"), "{table}");
}

#[test]
fn columns_past_the_limit_are_refused_by_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cols = 100_000;
    let mut text = String::from("id:ID");
    for i in 0..cols {
        text.push_str(&format!(",c{i}"));
    }
    text.push_str("\n1");
    for i in 0..cols {
        text.push_str(&format!(",{i}"));
    }
    text.push('\n');
    let n = write(d, "wide.csv", &text);
    let err = fails(&[
        "import",
        "--db",
        s(&d.join("w.qdb")),
        "--nodes",
        &format!("N={}", s(&n)),
    ]);
    assert!(
        err.contains("header column 16385: 100001 columns; at most 16384 are supported"),
        "{err}"
    );
    assert!(!d.join("w.qdb").exists());
}

/// Bad rows by the hundred thousand, rejected to the file one by one, under the smallest
/// budget: the errors of a chunk are bounded by the chunk, not by the input.
#[test]
fn floods_of_bad_rows_are_all_rejected_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rows = 400_000u64;
    let distinct = 1_000u64;
    let n = d.join("dup.csv");
    let r = d.join("missing.csv");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&n).unwrap());
        writeln!(f, "id:ID,v:int").unwrap();
        for i in 0..rows {
            writeln!(f, "{},{i}", i % distinct).unwrap();
        }
        let mut f = std::io::BufWriter::new(std::fs::File::create(&r).unwrap());
        writeln!(f, ":START_ID,:END_ID").unwrap();
        for i in 0..rows {
            writeln!(f, "x{i},y{i}").unwrap();
        }
    }
    let db = d.join("db.qdb");
    let rej = d.join("rejects.csv");
    let budget: u64 = 24 << 20;
    let out = ok(&[
        "import",
        "--db",
        s(&db),
        "--nodes",
        &format!("N={}", s(&n)),
        "--relationships",
        &format!("R={}", s(&r)),
        "--skip-bad-rows",
        "--bad-tolerance",
        "100000000",
        "--rejects",
        s(&rej),
        "--memory-budget",
        "24MiB",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"], distinct, "{out}");
    assert_eq!(v["relationships"], 0, "{out}");
    let rejected = (rows - distinct) + rows;
    assert_eq!(v["rows_rejected"], rejected, "{out}");
    let (_, lines) = read_csv(&rej);
    assert_eq!(lines.len() as u64, rejected);
    let reasons = |w: &str| lines.iter().filter(|l| l[3] == w).count() as u64;
    assert_eq!(reasons("DuplicateId"), rows - distinct);
    assert_eq!(reasons("MissingNode"), rows);
    // The last duplicate names its line (header is line 1).
    assert!(lines
        .iter()
        .any(|l| l[1] == (rows + 1).to_string() && l[3] == "DuplicateId"));
    let rss = v["peak_rss_bytes"].as_u64().unwrap();
    assert!(rss <= budget + FIXED_OVERHEAD, "peak RSS {rss}: {out}");
    // Without --skip-bad-rows the first one stops the import, naming its place.
    let err = fails(&[
        "import",
        "--db",
        s(&d.join("stop.qdb")),
        "--nodes",
        &format!("N={}", s(&n)),
    ]);
    assert!(
        err.contains(&format!(
            "dup.csv:{}:1: duplicate node id '0'",
            distinct + 2
        )),
        "{err}"
    );
}

/// A pipe imports like a file (each input is read once, front to back); a folder is a
/// clear error.
#[test]
fn pipes_import_and_folders_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fifo = d.join("pipe.csv");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            f.write_all(b"id:ID,name\n1,a\n2,b\n3,c\n").unwrap();
        })
    };
    let db = d.join("p.qdb");
    let out = ok(&[
        "import",
        "--db",
        s(&db),
        "--nodes",
        &format!("N={}", s(&fifo)),
        "--json",
    ]);
    writer.join().unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"], 3, "{out}");
    let err = fails(&[
        "import",
        "--db",
        s(&d.join("f.qdb")),
        "--nodes",
        &format!("N={}", s(d)),
    ]);
    assert!(err.contains("is a folder"), "{err}");
}
