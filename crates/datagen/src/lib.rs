//! Seeded, deterministic generators for the three workloads of the brief (the same shapes
//! as `MISSION.md` describes), so that tests, benchmarks and demos need nothing but this
//! repository. Files use the Neo4j typed-header convention that `quiver import` reads;
//! to other tools (DuckDB, Kùzu) the header is just a header row.
//!
//! - [`dolt`]: seed 002's 10-column typed table, sorted or random primary keys.
//! - [`wide`]: seed 000's 100-column stress file, no header.
//! - [`social`]: a Pokec-shaped directed graph with heavy-tailed degrees (Chung-Lu).
//!
//! The same arguments and seed always give byte-identical files.

use quiver_csv::value::civil_from_days;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

pub type Rand = Pcg64Mcg;

pub fn rng(seed: u64, stream: u64) -> Rand {
    Pcg64Mcg::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ stream)
}

fn writer(path: &Path) -> io::Result<BufWriter<File>> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    Ok(BufWriter::with_capacity(1 << 20, File::create(path)?))
}

/// `YYYY-MM-DD HH:MM:SS` for seconds since the epoch.
pub fn write_datetime(out: &mut Vec<u8>, secs: i64) {
    let days = secs.div_euclid(86_400);
    let t = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        t / 3600,
        t / 60 % 60,
        t % 60
    );
}

/// A standard normal deviate (Box-Muller).
fn normal(r: &mut Rand) -> f64 {
    let u1: f64 = r.random::<f64>().max(1e-300);
    let u2: f64 = r.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

fn permutation(n: u64, r: &mut Rand) -> Vec<u32> {
    let mut v: Vec<u32> = (1..=n as u32).collect();
    for i in (1..v.len()).rev() {
        let j = r.random_range(0..=i);
        v.swap(i, j);
    }
    v
}

const WORDS: [&str; 32] = [
    "parse", "file", "graph", "from", "of", "sum", "batch", "it", "as", "in", "a", "map", "this",
    "data", "retry", "index", "node", "join", "chunk", "last", "page", "table", "to", "by", "at",
    "merge", "import", "was", "abort", "edge", "load", "base",
];

pub mod dolt {
    use super::*;

    pub const HEADER: &str =
        "pk:ID(Dolt),c1:long,c2:char,c3:localdatetime,c4:double,c5:byte,c6:float,c7:string,c8:string,c9:string\n";

    /// Writes `rows` rows of the dolt table; `random` shuffles the primary keys.
    pub fn generate(path: &Path, rows: u64, random: bool, seed: u64) -> io::Result<u64> {
        let mut w = writer(path)?;
        w.write_all(HEADER.as_bytes())?;
        let mut vals = rng(seed, rows);
        let pks = if random {
            Some(permutation(rows, &mut rng(seed, 7)))
        } else {
            None
        };
        let mut line = Vec::with_capacity(1024);
        let null = |r: &mut Rand| r.random::<f64>() < 0.05;
        for i in 0..rows {
            line.clear();
            let pk = pks.as_ref().map_or(i + 1, |p| p[i as usize] as u64);
            let _ = write!(line, "{pk},");
            if !null(&mut vals) {
                let mag = 10f64.powf(vals.random_range(0.0..18.9)).floor() as i64;
                let sign = if vals.random::<bool>() { -1 } else { 1 };
                let _ = write!(line, "{}", sign * mag);
            }
            line.push(b',');
            if !null(&mut vals) {
                let c = vals.random_range(0..52u8);
                line.push(if c < 26 { b'A' + c } else { b'a' + c - 26 });
            }
            line.push(b',');
            if !null(&mut vals) {
                write_datetime(&mut line, vals.random_range(0..=2_147_483_647i64));
            }
            line.push(b',');
            if !null(&mut vals) {
                let k = vals.random_range(-3..=6);
                let _ = write!(line, "{}", normal(&mut vals) * 10f64.powi(k));
            }
            line.push(b',');
            if !null(&mut vals) {
                let _ = write!(line, "{}", vals.random_range(-128..=127i32));
            }
            line.push(b',');
            if !null(&mut vals) {
                let _ = write!(line, "{}", vals.random_range(-1000.0..1000.0f64) as f32);
            }
            line.push(b',');
            if !null(&mut vals) {
                for _ in 0..vals.random_range(1..=255) {
                    let c = vals.random_range(0..52u8);
                    line.push(if c < 26 { b'A' + c } else { b'a' + c - 26 });
                }
            }
            line.push(b',');
            if !null(&mut vals) {
                for _ in 0..vals.random_range(1..=64) {
                    line.push(b"0123456789abcdef"[vals.random_range(0..16)]);
                }
            }
            line.push(b',');
            if !null(&mut vals) {
                let mut text = String::new();
                for phrase in 0..2 {
                    if phrase == 1 {
                        text.push(if vals.random::<f64>() < 0.3 { ',' } else { ' ' });
                        text.push(' ');
                    }
                    let n = vals.random_range(1..=12);
                    let quoted = vals.random::<f64>() < 0.08;
                    for k in 0..n {
                        if k > 0 {
                            text.push(' ');
                        }
                        let word = WORDS[vals.random_range(0..WORDS.len())];
                        if quoted && k == 0 {
                            text.push('"');
                            text.push_str(word);
                            text.push('"');
                        } else {
                            text.push_str(word);
                        }
                    }
                }
                let text = text.replace(",  ", ", ").replace("  ", " ");
                if text.contains([',', '"']) {
                    line.push(b'"');
                    line.extend_from_slice(text.replace('"', "\"\"").as_bytes());
                    line.push(b'"');
                } else {
                    line.extend_from_slice(text.as_bytes());
                }
            }
            line.push(b'\n');
            w.write_all(&line)?;
        }
        w.flush()?;
        Ok(rows)
    }
}

pub mod wide {
    use super::*;

    /// `rows` x `cols` values of `width` random alphanumerics, no header.
    pub fn generate(
        path: &Path,
        rows: u64,
        cols: usize,
        width: usize,
        seed: u64,
    ) -> io::Result<u64> {
        const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut w = writer(path)?;
        let mut r = rng(seed, 2);
        let mut line = Vec::with_capacity(cols * (width + 1));
        for _ in 0..rows {
            line.clear();
            for c in 0..cols {
                if c > 0 {
                    line.push(b',');
                }
                for _ in 0..width {
                    line.push(ALNUM[r.random_range(0..ALNUM.len())]);
                }
            }
            line.push(b'\n');
            w.write_all(&line)?;
        }
        w.flush()?;
        Ok(rows)
    }

    /// The header to import the wide file as nodes: `c0,...` as strings; the file has
    /// none, so it is written to a separate header-only file (Neo4j's convention).
    pub fn header(cols: usize) -> String {
        let mut h = String::from("row:ID(Wide)");
        for c in 0..cols {
            h.push_str(&format!(",c{c}"));
        }
        h.push('\n');
        h
    }
}

pub mod social {
    use super::*;

    pub const NODES_AT_SCALE_1: u64 = 1_632_803;
    pub const EDGES_AT_SCALE_1: u64 = 30_622_564;
    pub const NODES_HEADER: &str = "id:ID(User),age:int,gender:int,region:string,completion_percentage:int,public:int,last_login:localdatetime,registration:localdatetime\n";
    pub const EDGES_HEADER: &str = ":START_ID(User),:END_ID(User)\n";

    const KRAJ: [&str; 8] = [
        "bratislavsky",
        "trnavsky",
        "trenciansky",
        "nitriansky",
        "zilinsky",
        "banskobystricky",
        "presovsky",
        "kosicky",
    ];
    const DISTRICT: [&str; 8] = [
        "mesto",
        "okolie",
        "stare mesto",
        "sever",
        "juh",
        "vychod",
        "zapad",
        "stred",
    ];

    /// Walker's alias table for O(1) weighted sampling.
    struct Alias {
        prob: Vec<f64>,
        alias: Vec<u32>,
    }

    impl Alias {
        fn new(w: &[f64]) -> Alias {
            let n = w.len();
            let sum: f64 = w.iter().sum();
            let mut prob: Vec<f64> = w.iter().map(|x| x * n as f64 / sum).collect();
            let mut alias = vec![0u32; n];
            let (mut small, mut large): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
            for (i, &p) in prob.iter().enumerate() {
                if p < 1.0 {
                    small.push(i as u32)
                } else {
                    large.push(i as u32)
                }
            }
            while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
                alias[s as usize] = l;
                prob[l as usize] -= 1.0 - prob[s as usize];
                if prob[l as usize] < 1.0 {
                    large.pop();
                    small.push(l);
                }
            }
            for i in large.into_iter().chain(small) {
                prob[i as usize] = 1.0;
            }
            Alias { prob, alias }
        }

        fn sample(&self, r: &mut Rand) -> u32 {
            let i = r.random_range(0..self.prob.len());
            if r.random::<f64>() < self.prob[i] {
                i as u32
            } else {
                self.alias[i]
            }
        }
    }

    /// Heavy-tailed weights `(rank + r0)^-0.8`, ranks shuffled.
    fn weights(n: usize, r0: f64, r: &mut Rand) -> Vec<f64> {
        let mut w: Vec<f64> = (1..=n).map(|k| (k as f64 + r0).powf(-0.8)).collect();
        for i in (1..n).rev() {
            let j = r.random_range(0..=i);
            w.swap(i, j);
        }
        w
    }

    /// Writes `nodes.csv` and `edges.csv` into `dir`; returns (nodes, edges).
    pub fn generate(
        dir: &Path,
        scale: f64,
        random_edge_order: bool,
        seed: u64,
    ) -> io::Result<(u64, u64)> {
        let n = ((NODES_AT_SCALE_1 as f64 * scale).round() as u64).max(2);
        let m_target = (EDGES_AT_SCALE_1 as f64 * scale).round() as u64;
        write_nodes(&dir.join("nodes.csv"), n, seed)?;
        let m = write_edges(&dir.join("edges.csv"), n, m_target, random_edge_order, seed)?;
        Ok((n, m))
    }

    fn write_nodes(path: &Path, n: u64, seed: u64) -> io::Result<()> {
        let mut w = writer(path)?;
        w.write_all(NODES_HEADER.as_bytes())?;
        let mut r = rng(seed, 11);
        let regions: Vec<String> = KRAJ
            .iter()
            .flat_map(|k| DISTRICT.iter().map(move |d| format!("{k} kraj, {k} {d}")))
            .take(62)
            .collect();
        let region_w: Vec<f64> = (1..=regions.len()).map(|k| 1.0 / k as f64).collect();
        let region_alias = Alias::new(&region_w);
        let mut line = Vec::with_capacity(256);
        const Y1999: i64 = 915_148_800;
        const Y2013: i64 = 1_356_998_400;
        for id in 1..=n {
            line.clear();
            let _ = write!(line, "{id},");
            if r.random::<f64>() >= 0.25 {
                let g =
                    -(r.random::<f64>().max(1e-12).ln() + r.random::<f64>().max(1e-12).ln()) * 6.0;
                let _ = write!(line, "{}", (14.0 + g).round().min(99.0) as i64);
            }
            line.push(b',');
            if r.random::<f64>() >= 0.02 {
                let _ = write!(line, "{}", r.random_range(0..=1));
            }
            line.push(b',');
            if r.random::<f64>() >= 0.03 {
                let _ = write!(
                    line,
                    "\"{}\"",
                    regions[region_alias.sample(&mut r) as usize]
                );
            }
            let reg = r.random_range(Y1999..Y2013 - 86_400);
            let _ = write!(
                line,
                ",{},{},",
                r.random_range(0..=100),
                r.random_range(0..=1)
            );
            if r.random::<f64>() >= 0.05 {
                write_datetime(&mut line, r.random_range(reg..Y2013));
            }
            line.push(b',');
            write_datetime(&mut line, reg);
            line.push(b'\n');
            w.write_all(&line)?;
        }
        w.flush()
    }

    fn write_edges(
        path: &Path,
        n: u64,
        m_target: u64,
        random_order: bool,
        seed: u64,
    ) -> io::Result<u64> {
        let mut r = rng(seed, 13);
        let out_w = weights(n as usize, 110.0, &mut r);
        let in_w = weights(n as usize, 70.0, &mut r);
        let in_alias = Alias::new(&in_w);
        // Out-degrees: expected m * w / W, rounded so that they sum to m exactly, capped
        // at n - 1 (no self loops, no duplicates).
        let wsum: f64 = out_w.iter().sum();
        let mut deg: Vec<u32> = Vec::with_capacity(n as usize);
        let mut carry = 0.0;
        for &w in &out_w {
            let x = m_target as f64 * w / wsum + carry;
            let d = x.floor();
            carry = x - d;
            deg.push((d as u64).min(n - 1) as u32);
        }
        let mut edges: Vec<u64> = Vec::new();
        let mut w = writer(path)?;
        w.write_all(EDGES_HEADER.as_bytes())?;
        let mut targets: Vec<u32> = Vec::new();
        let mut line = Vec::with_capacity(1 << 16);
        let mut m = 0u64;
        for src in 0..n as u32 {
            let d = deg[src as usize] as usize;
            targets.clear();
            let mut tries = 0;
            while targets.len() < d && tries < 8 {
                while targets.len() < d {
                    let t = in_alias.sample(&mut r);
                    if t != src {
                        targets.push(t);
                    }
                }
                targets.sort_unstable();
                targets.dedup();
                tries += 1;
            }
            m += targets.len() as u64;
            if random_order {
                edges.extend(targets.iter().map(|&t| (src as u64) << 32 | t as u64));
            } else {
                line.clear();
                for &t in &targets {
                    let _ = writeln!(line, "{},{}", src + 1, t + 1);
                }
                w.write_all(&line)?;
            }
        }
        if random_order {
            for i in (1..edges.len()).rev() {
                let j = r.random_range(0..=i);
                edges.swap(i, j);
            }
            for e in edges {
                let _ = writeln!(w, "{},{}", (e >> 32) + 1, (e & 0xffff_ffff) + 1);
            }
        }
        w.flush()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_shaped() {
        let d = std::env::temp_dir().join(format!("quiver-datagen-{}", std::process::id()));
        dolt::generate(&d.join("a.csv"), 500, true, 42).unwrap();
        dolt::generate(&d.join("b.csv"), 500, true, 42).unwrap();
        let a = std::fs::read(d.join("a.csv")).unwrap();
        assert_eq!(a, std::fs::read(d.join("b.csv")).unwrap());
        let mut rd = csv::ReaderBuilder::new().from_reader(&a[..]);
        let mut pks: Vec<i64> = rd
            .records()
            .map(|r| r.unwrap()[0].parse().unwrap())
            .collect();
        pks.sort();
        assert_eq!(pks, (1..=500).collect::<Vec<_>>());
        let (n, m) = social::generate(&d.join("s"), 0.001, false, 42).unwrap();
        assert_eq!(n, 1633);
        let edges = std::fs::read_to_string(d.join("s/edges.csv")).unwrap();
        assert_eq!(edges.lines().count() as u64, m + 1);
        assert!(m > 25_000 && m <= 30_623, "{m}");
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A graph keyed by long string ids (content hashes, as in Software Heritage, seed 001):
/// the case where the id map, not the data, outgrows the memory budget.
pub mod hashids {
    use super::*;

    pub const NODES_HEADER: &str = "hash:ID,n:long\n";
    pub const EDGES_HEADER: &str = ":START_ID,:END_ID\n";

    fn mix(mut x: u64) -> u64 {
        // splitmix64's finaliser: a bijection, so distinct inputs give distinct ids.
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    /// The 40-character id of node `i` (hex, like a SHA-1).
    pub fn id(i: u64, out: &mut Vec<u8>) {
        let _ = write!(out, "{:016x}{:016x}{:08x}", mix(i), mix(!i), i as u32);
    }

    /// Writes `nodes.csv` (`nodes` ids) and `edges.csv` (`edges` uniform random pairs)
    /// into `dir`.
    pub fn generate(dir: &Path, nodes: u64, edges: u64, seed: u64) -> io::Result<()> {
        let mut w = writer(&dir.join("nodes.csv"))?;
        w.write_all(NODES_HEADER.as_bytes())?;
        // One line at a time into the writer's buffer.
        let mut line = Vec::with_capacity(128);
        for i in 0..nodes {
            line.clear();
            id(i, &mut line);
            let _ = writeln!(line, ",{i}");
            w.write_all(&line)?;
        }
        w.flush()?;
        let mut w = writer(&dir.join("edges.csv"))?;
        w.write_all(EDGES_HEADER.as_bytes())?;
        let mut r = rng(seed, 17);
        for _ in 0..edges {
            line.clear();
            id(r.random_range(0..nodes), &mut line);
            line.push(b',');
            id(r.random_range(0..nodes), &mut line);
            line.push(b'\n');
            w.write_all(&line)?;
        }
        w.flush()
    }
}
