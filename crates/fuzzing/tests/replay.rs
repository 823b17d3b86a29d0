//! Replays every file of `fuzz/corpus/<target>/` through its target's body, plus a
//! seeded batch of mutations of each file, as an ordinary test in CI (no nightly, no
//! libFuzzer). A crash that a fuzzing run finds is fixed by adding its input here.

use quiver_fuzzing::TARGETS;
use std::path::PathBuf;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

/// A cheap deterministic mutator (xorshift): flips, inserts, deletes and duplicates
/// bytes, as libFuzzer's simplest mutations do.
fn mutate(input: &[u8], seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = input.to_vec();
    for _ in 0..1 + next() % 4 {
        let at = if out.is_empty() {
            0
        } else {
            (next() as usize) % out.len()
        };
        match next() % 4 {
            0 if !out.is_empty() => out[at] ^= 1 << (next() % 8),
            1 => out.insert(at, b"\",\n\r:()[]{}'0a-"[(next() % 16) as usize]),
            2 if !out.is_empty() => {
                out.remove(at);
            }
            _ => {
                let end = (at + 1 + (next() as usize) % 16).min(out.len());
                let piece = out[at..end].to_vec();
                out.splice(at..at, piece);
            }
        }
    }
    out
}

#[test]
fn corpus_replays_without_a_crash() {
    for (name, body) in TARGETS {
        let files = corpus(name);
        assert!(!files.is_empty(), "fuzz/corpus/{name} is empty");
        // Imports are the slow target: fewer mutations each.
        let mutations = if name == "import_bytes" { 3 } else { 20 };
        let mut runs = 0;
        for (path, bytes) in &files {
            eprintln!("{name}: {}", path.display());
            body(bytes);
            for k in 0..mutations {
                body(&mutate(bytes, k + 1));
                runs += 1;
            }
        }
        eprintln!("{name}: {} corpus files, {runs} mutations", files.len());
    }
}
