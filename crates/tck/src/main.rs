//! `cargo run --release -p quiver-tck -- [ID-PREFIX ...] [--fails] [--history] [--threads N]`:
//! runs the vendored TCK (or the scenarios whose ids start with a prefix, e.g.
//! `clauses/match`), prints counts per area and, with `--fails`, every failure with its
//! reason; with `--history`, on databases that have held every label and type the kit
//! names (`quiver_tck::History`).

use quiver_tck::{kit_names, load, run_all_after, History, Outcome, SkipList};
use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/tck");
    let mut prefixes = Vec::new();
    let mut fails = false;
    let mut history = false;
    let mut threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--fails" => fails = true,
            "--history" => history = true,
            "--threads" => threads = args.next().and_then(|n| n.parse().ok()).unwrap_or(threads),
            _ => prefixes.push(a),
        }
    }
    let all = load(&root.join("features")).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    let chosen: Vec<_> = all
        .iter()
        .cloned()
        .filter(|s| prefixes.is_empty() || prefixes.iter().any(|p| s.id.starts_with(p.as_str())))
        .collect();
    let skips = std::fs::read_to_string(root.join("skip.txt")).unwrap_or_default();
    let skips = SkipList::parse(&skips).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    let t = std::time::Instant::now();
    let history = if history {
        History::Held(kit_names(&all))
    } else {
        History::Fresh
    };
    let report = run_all_after(chosen, &skips, &root.join("graphs"), threads, &history);
    if fails {
        for (s, o) in &report.results {
            if let Outcome::Fail(why) = o {
                println!("FAIL {}\n     {}", s.id, why.replace('\n', "\n     "));
            }
        }
    }
    for (area, c) in report.by(|s| s.area.clone()) {
        println!("{area:<40} {c}");
    }
    println!("{}  ({:.1} s)", report.line(), t.elapsed().as_secs_f64());
}
