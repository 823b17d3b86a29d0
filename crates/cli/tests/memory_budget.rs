//! An import of a file several times larger than a small budget keeps its peak resident
//! memory (measured by the child process itself, VmHWM) under the budget plus the fixed
//! overhead of 64 MiB that the import promises.

mod common;
use common::*;

const FIXED_OVERHEAD: u64 = 64 << 20;

fn peak(args: &[&str]) -> (u64, u64, serde_json::Value) {
    let out = ok(args);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    (
        v["peak_rss_bytes"].as_u64().unwrap(),
        v["budget_peak_bytes"].as_u64().unwrap(),
        v,
    )
}

#[test]
fn nodes_and_relationships_stay_under_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // dolt: 300k rows is about 85 MB of CSV, three and a half times a 24 MiB budget.
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
    let file = d.join("dolt-300k-random.csv");
    let size = std::fs::metadata(&file).unwrap().len();
    let budget: u64 = 24 << 20;
    assert!(size > 3 * budget, "{size}");
    let (rss, granted, v) = peak(&[
        "import",
        "--db",
        s(&d.join("dolt.qdb")),
        "--nodes",
        &format!("Dolt={}", s(&file)),
        "--id-type",
        "integer",
        "--memory-budget",
        "24MiB",
        "--threads",
        "2",
        "--json",
    ]);
    eprintln!("dolt: peak rss {rss}, granted {granted}, file {size}");
    assert!(granted <= budget);
    assert!(
        rss <= budget + FIXED_OVERHEAD,
        "peak RSS {rss} over {budget} + {FIXED_OVERHEAD}: {v}"
    );
    assert!(
        v["row_groups"].as_u64().unwrap() > 1,
        "the budget should force several row groups"
    );

    // The same rows from Parquet (the export of that import, typed): batches are cut to
    // the budget's windows, so the decoded rows in flight stay within it too.
    let pq = d.join("pq");
    ok(&[
        "export",
        "--db",
        s(&d.join("dolt.qdb")),
        "--out",
        s(&pq),
        "--format",
        "parquet",
    ]);
    let file = export_files(&pq, "nodes-").remove(0);
    let (rss, granted, v) = peak(&[
        "import",
        "--db",
        s(&d.join("dolt-pq.qdb")),
        "--nodes",
        s(&file),
        "--id-type",
        "integer",
        "--memory-budget",
        "24MiB",
        "--threads",
        "2",
        "--json",
    ]);
    eprintln!("dolt from Parquet: peak rss {rss}, granted {granted}");
    assert_eq!(v["nodes"].as_u64(), Some(300_000), "{v}");
    assert!(granted <= budget);
    assert!(
        rss <= budget + FIXED_OVERHEAD,
        "peak RSS {rss} over {budget} + {FIXED_OVERHEAD}: {v}"
    );

    // social: 7.7M edges (~115 MB of CSV) under 24 MiB spills the edge store (sealed,
    // sorted by source, they take about 3.3 bytes each: 25 MB).
    ok(&[
        "generate",
        "social",
        "--scale",
        "0.25",
        "--out",
        s(&d.join("social")),
    ]);
    let mut args = social_import(&d.join("social.qdb"), &d.join("social"));
    args.extend(["--memory-budget", "24MiB", "--json"].map(String::from));
    let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    let (rss, granted, v) = peak(&refs);
    eprintln!("social: peak rss {rss}, granted {granted}");
    assert!(granted <= budget);
    assert!(
        rss <= budget + FIXED_OVERHEAD,
        "peak RSS {rss} over {budget} + {FIXED_OVERHEAD}: {v}"
    );
    assert!(v["spilled_edges"].as_u64().unwrap() > 0, "{v}");
    ok(&["check", "--db", s(&d.join("social.qdb"))]);
}
