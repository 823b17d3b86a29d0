//! What the machine allows an import: the floor of each phase, measured on the files.
//!
//!     cargo run --release -p quiver-import --example floor -- \
//!         --nodes nodes.csv [--edges edges.csv] [--write-bytes N] [--dir DIR] [--threads N]
//!
//! Prints one JSON line (`FLOOR {...}`) of seconds, each the best of three:
//! - `read_nodes`, `read_edges`: the file read from the page cache into memory (after a
//!   first read that warms it), `--threads` readers on disjoint ranges;
//! - `tokenise_nodes`, `tokenise_edges`: the fastest tokenising of the same bytes in
//!   memory, on `--threads` threads over chunks cut at line ends: the csv crate's raw
//!   reader (`csv_core` under `ByteRecord`) and `simd-csv`'s zero-copy reader, both
//!   reported, the floor the faster;
//! - `index_ids`: the node ids (first column, as integers) sorted in parallel, what an id
//!   index needs at least;
//! - `sort_edges`: the edge pairs sorted by source and, a second copy, by target
//!   (rayon's parallel unstable sort of packed `u64`s): the two CSRs' ordering;
//! - `memcpy_gbps`: the memory bandwidth of one large copy, for reading `sort_edges`;
//! - `write`: `--write-bytes` (the database's size) written to a file in `--dir` and
//!   synced (`fdatasync`): what the import writes, during its phases and at publish.
//!
//! bench/floor_bench.py runs this beside the import and reports each phase as a multiple
//! of its floor.

use rayon::prelude::*;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn best<T>(mut f: impl FnMut() -> T) -> (f64, T) {
    let mut out = None;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    (best, out.expect("three runs"))
}

/// The file read with `threads` readers on disjoint ranges (page cache warm).
fn read(path: &Path, threads: usize) -> std::io::Result<Vec<u8>> {
    let len = std::fs::metadata(path)?.len() as usize;
    let mut buf = vec![0u8; len];
    let per = len.div_ceil(threads.max(1)).max(1);
    buf.par_chunks_mut(per)
        .enumerate()
        .try_for_each(|(i, part)| {
            let mut f = std::fs::File::open(path)?;
            f.seek(SeekFrom::Start((i * per) as u64))?;
            f.read_exact(part)
        })?;
    Ok(buf)
}

/// Chunks of `bytes` after its header line, each ending at a line end.
fn chunks(bytes: &[u8], n: usize) -> Vec<&[u8]> {
    let start = memchr::memchr(b'\n', bytes).map_or(bytes.len(), |i| i + 1);
    let body = &bytes[start..];
    let per = body.len().div_ceil(n.max(1)).max(1);
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let end = (at + per).min(body.len());
        let end = memchr::memchr(b'\n', &body[end..]).map_or(body.len(), |i| end + i + 1);
        out.push(&body[at..end]);
        at = end;
    }
    out
}

fn tokenise_csv(parts: &[&[u8]]) -> u64 {
    parts
        .par_iter()
        .map(|p| {
            let mut r = csv::ReaderBuilder::new().has_headers(false).from_reader(*p);
            let mut rec = csv::ByteRecord::new();
            let mut fields = 0u64;
            while r.read_byte_record(&mut rec).unwrap_or(false) {
                fields += rec.len() as u64;
            }
            fields
        })
        .sum()
}

fn tokenise_simd(parts: &[&[u8]]) -> u64 {
    parts
        .par_iter()
        .map(|p| {
            let mut r = simd_csv::ZeroCopyReaderBuilder::new()
                .has_headers(false)
                .from_reader(*p);
            let mut fields = 0u64;
            while let Ok(Some(rec)) = r.read_byte_record() {
                fields += rec.len() as u64;
            }
            fields
        })
        .sum()
}

/// The integers of the first two columns of each line (the first alone for nodes).
fn ints(parts: &[&[u8]], two: bool) -> Vec<u64> {
    parts
        .par_iter()
        .flat_map_iter(|p| {
            p.split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(move |l| {
                    // The import's own integer parse; a field that is not one sorts as 0.
                    let mut it = l
                        .split(|&b| b == b',')
                        .map(|f| quiver_csv::value::parse_i64(f).map_or(0, |v| v as u64));
                    let a = it.next().unwrap_or(0);
                    if two {
                        (a << 32) | (it.next().unwrap_or(0) & 0xffff_ffff)
                    } else {
                        a
                    }
                })
        })
        .collect()
}

fn main() {
    let mut nodes = None;
    let mut edges = None;
    let mut write_bytes = 0u64;
    let mut dir = std::env::temp_dir();
    let mut threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} takes a value"));
        match a.as_str() {
            "--nodes" => nodes = Some(PathBuf::from(val())),
            "--edges" => edges = Some(PathBuf::from(val())),
            "--write-bytes" => write_bytes = val().parse().expect("--write-bytes: a number"),
            "--dir" => dir = PathBuf::from(val()),
            "--threads" => threads = val().parse().expect("--threads: a number"),
            _ => panic!("unknown argument {a}; see the module docs"),
        }
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .expect("rayon pool");
    let mut out = serde_json::Map::new();
    let mut put = |k: &str, v: f64| {
        out.insert(k.into(), serde_json::json!((v * 1e4).round() / 1e4));
    };
    for (name, path, two) in [("nodes", nodes, false), ("edges", edges, true)] {
        let Some(path) = path else { continue };
        read(&path, threads).expect("read the file"); // warms the page cache
        let (t, bytes) = best(|| read(&path, threads).expect("read the file"));
        put(&format!("read_{name}"), t);
        let parts = chunks(&bytes, threads * 8);
        let (tc, f1) = best(|| tokenise_csv(&parts));
        let (ts, f2) = best(|| tokenise_simd(&parts));
        assert_eq!(f1, f2, "the two tokenisers disagree on {}", path.display());
        put(&format!("tokenise_{name}_csv"), tc);
        put(&format!("tokenise_{name}_simd"), ts);
        put(&format!("tokenise_{name}"), tc.min(ts));
        let keys = ints(&parts, two);
        if two {
            let (t, _) = best(|| {
                let mut by_src = keys.clone();
                let mut by_dst: Vec<u64> = keys.par_iter().map(|k| k.rotate_left(32)).collect();
                by_src.par_sort_unstable();
                by_dst.par_sort_unstable();
                (by_src.len(), by_dst.len())
            });
            put("sort_edges", t);
        } else {
            let (t, _) = best(|| {
                let mut k = keys.clone();
                k.par_sort_unstable();
                k.len()
            });
            put("index_ids", t);
        }
    }
    let big = vec![1u8; 512 << 20];
    let mut dst = vec![0u8; big.len()];
    let (t, _) = best(|| {
        dst.copy_from_slice(std::hint::black_box(&big));
        std::hint::black_box(&mut dst);
    });
    put("memcpy_gbps", big.len() as f64 / t / 1e9);
    drop((big, dst));
    if write_bytes > 0 {
        let path = dir.join(format!("quiver-floor-{}", std::process::id()));
        let block = vec![7u8; 4 << 20];
        let (t, _) = best(|| {
            let mut f = std::fs::File::create(&path).expect("create the write test's file");
            let mut left = write_bytes;
            while left > 0 {
                let n = left.min(block.len() as u64) as usize;
                f.write_all(&block[..n]).expect("write");
                left -= n as u64;
            }
            f.sync_data().expect("sync");
        });
        let _ = std::fs::remove_file(&path);
        put("write", t);
    }
    println!("FLOOR {}", serde_json::Value::Object(out));
}
