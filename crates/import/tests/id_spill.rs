//! Ids sorted on disk (`spill`) against ids in memory: on random graphs with duplicate
//! ids, missing endpoints and bad rows, both paths publish the same database (nodes in
//! the same order with the same properties, the same relationships, the same id index)
//! and write the same rejects, whether the spill is forced from the start or the budget
//! forces it midway.

use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_storage::manifest::IdType;
use quiver_storage::read::IdKey;
use quiver_storage::{Database, Direction, OpenMode};
use rand::{Rng, SeedableRng};
use std::fmt::Write;
use std::path::Path;

struct Files {
    /// Node files of space P (two groups), of space C, and relationship files.
    p1: String,
    p2: String,
    c: String,
    rels: String,
    typed: String,
    /// Every P id written (duplicates included), for lookups.
    p_ids: Vec<String>,
}

fn id(r: &mut impl Rng, i: u64) -> String {
    // Long ids (hashes and URLs are the users of this path), not in key order.
    format!("https://example.org/u/{:016x}-{i}", r.random::<u64>())
}

/// Ids in canonical integer form, the most common string ids: sparse, some negative.
fn canonical_id(n: u64, i: u64, spread: i64) -> String {
    ((i as i64 - (n / 10) as i64) * spread).to_string()
}

/// The same number as `k`, spelled otherwise: no node has it.
fn other_spelling(r: &mut impl Rng, k: &str) -> String {
    let (sign, digits) = k.strip_prefix('-').map_or(("", k), |d| ("-", d));
    match r.random_range(0..4) {
        0 => format!("{sign}00{digits}"),
        1 if sign.is_empty() => format!("+{digits}"),
        2 => format!("{k}.0"),
        _ => format!("\" {k}\""),
    }
}

fn graph(seed: u64, n: u64, m: u64) -> Files {
    graph_of(seed, n, m, None)
}

/// `canonical`: ids are canonical integers this far apart (else long strings).
fn graph_of(seed: u64, n: u64, m: u64, canonical: Option<i64>) -> Files {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    let mut ids: Vec<String> = (0..n)
        .map(|i| {
            if let Some(spread) = canonical {
                canonical_id(n, i, spread)
            } else {
                id(&mut r, i)
            }
        })
        .collect();
    if canonical.is_some() {
        // Not in key order.
        use rand::seq::SliceRandom;
        ids.shuffle(&mut r);
    }
    let mut p_ids = Vec::new();
    let mut good = Vec::new();
    let mut p1 = String::from("uid:ID(P),name,age:long\n");
    let mut p2 = String::from("uid:ID(P),name,age:long\n");
    for (i, k) in ids.iter().enumerate() {
        let f = if i % 3 == 0 { &mut p2 } else { &mut p1 };
        let age = if r.random_ratio(1, 200) {
            "old".to_string() // a bad row
        } else {
            r.random_range(0..100).to_string()
        };
        writeln!(f, "{k},n{i},{age}").unwrap();
        if age != "old" {
            good.push(k.clone());
        }
        p_ids.push(k.clone());
        if r.random_ratio(1, 50) {
            // A duplicate, in the same group or the other one.
            let d = &ids[r.random_range(0..=i)];
            let f = if r.random_bool(0.5) { &mut p1 } else { &mut p2 };
            writeln!(f, "{d},dup{i},1").unwrap();
        }
    }
    let mut c = String::from("cid:ID(C),title\n");
    let n_c = n / 10 + 1;
    for i in 0..n_c {
        writeln!(c, "c{i},t{i}").unwrap();
    }
    let mut rels = String::from(":START_ID(P),:END_ID(P),w:long\n");
    let mut typed = String::from(":START_ID(P),:END_ID(C),:TYPE\n");
    for k in 0..m {
        let a = &good[r.random_range(0..good.len())];
        let missing = r.random_ratio(1, 100);
        let b = if missing && canonical.is_some() {
            let k = good[r.random_range(0..good.len())].clone();
            other_spelling(&mut r, &k)
        } else if missing {
            "https://example.org/u/nobody".to_string() // a missing endpoint
        } else {
            good[r.random_range(0..good.len())].clone()
        };
        // A row with a missing endpoint and another bad field is rejected for the
        // field the in-memory path meets first and the other one when sorting: each
        // row here has one fault.
        let w = if !missing && r.random_ratio(1, 300) {
            "x".to_string()
        } else {
            k.to_string()
        };
        writeln!(rels, "{a},{b},{w}").unwrap();
        if k % 4 == 0 {
            let cc = if r.random_ratio(1, 100) {
                n_c + 5 // no such company: a missing endpoint
            } else {
                r.random_range(0..n_c)
            };
            let t = if k % 8 == 0 { "LIKES" } else { "OWNS" };
            writeln!(typed, "{a},c{cc},{t}").unwrap();
        }
    }
    Files {
        p1,
        p2,
        c,
        rels,
        typed,
        p_ids,
    }
}

fn config(dir: &Path, f: &Files, name: &str, budget: u64, spill: bool) -> ImportConfig {
    for (file, text) in [
        ("p1.csv", &f.p1),
        ("p2.csv", &f.p2),
        ("c.csv", &f.c),
        ("r.csv", &f.rels),
        ("t.csv", &f.typed),
    ] {
        if !dir.join(file).exists() {
            std::fs::write(dir.join(file), text).unwrap();
        }
    }
    let d = |f: &str| dir.join(f).display().to_string();
    let mut cfg = ImportConfig::new(dir.join(format!("{name}.qdb")));
    cfg.nodes
        .push(InputGroup::parse(&format!("Person={}", d("p1.csv"))).unwrap());
    cfg.nodes
        .push(InputGroup::parse(&format!("Company={}", d("c.csv"))).unwrap());
    cfg.nodes
        .push(InputGroup::parse(&format!("Person:Late={}", d("p2.csv"))).unwrap());
    cfg.relationships
        .push(InputGroup::parse(&format!("KNOWS={}", d("r.csv"))).unwrap());
    cfg.relationships
        .push(InputGroup::parse(&d("t.csv")).unwrap());
    cfg.id_type = IdType::String;
    cfg.memory_budget_bytes = budget;
    cfg.threads = 2;
    cfg.skip_bad_rows = true;
    cfg.rejects = Some(dir.join(format!("{name}.rejects.csv")));
    cfg.spill_ids = spill;
    cfg
}

fn chunk_text(
    db: &Database,
    rel: Option<usize>,
    t: usize,
    rg: usize,
    col: usize,
    n: usize,
) -> Vec<String> {
    let f = |c: &quiver_format::column::ColumnChunk<'_>| {
        (0..n)
            .map(|i| match (c.get_i64(i), c.get_bytes(i)) {
                (Some(v), _) => v.to_string(),
                (_, Some(b)) => String::from_utf8_lossy(&b).to_string(),
                _ => "null".to_string(),
            })
            .collect::<Vec<_>>()
    };
    match rel {
        None => db.with_node_chunk(t, rg, col, f).unwrap(),
        Some(r) => db.with_rel_chunk(r, rg, col, f).unwrap(),
    }
}

/// Everything a query could see, as text.
fn dump(db: &Database) -> Vec<String> {
    let mut out = Vec::new();
    for (ti, t) in db.node_tables().iter().enumerate() {
        out.push(format!(
            "table {} first {} rows {} labels {:?}",
            t.meta.name, t.meta.first_node, t.meta.n_rows, t.meta.labels
        ));
        // Column by column across row groups (their sizes follow the budget).
        for c in 0..t.footer.columns.len() {
            let mut vals = Vec::new();
            for (gi, g) in t.footer.row_groups.iter().enumerate() {
                vals.extend(chunk_text(db, None, ti, gi, c, g.n_rows as usize));
            }
            out.push(format!("  {} {}", t.footer.columns[c].name, vals.join("|")));
        }
    }
    for (ri, r) in db.rel_types().iter().enumerate() {
        out.push(format!("rel {} edges {}", r.meta.name, r.meta.n_edges));
        let mut edges = Vec::new();
        db.scan_edges(ri, Direction::Out, |s, d, e| edges.push((s, d, e)))
            .unwrap();
        out.push(format!("  {edges:?}"));
        if let Some(f) = r.props_footer() {
            for c in 0..f.columns.len() {
                let mut vals = Vec::new();
                for (gi, g) in f.row_groups.iter().enumerate() {
                    vals.extend(chunk_text(db, Some(ri), 0, gi, c, g.n_rows as usize));
                }
                out.push(format!("  {} {}", f.columns[c].name, vals.join("|")));
            }
        }
    }
    out
}

fn check_same(dir: &Path, f: &Files, a: &ImportConfig, b: &ImportConfig) {
    let (da, db_) = (
        Database::open(&a.db, OpenMode::Mapped).unwrap(),
        Database::open(&b.db, OpenMode::Mapped).unwrap(),
    );
    db_.verify().unwrap();
    let (x, y) = (dump(&da), dump(&db_));
    assert_eq!(x.len(), y.len());
    for (l, r) in x.iter().zip(&y) {
        assert_eq!(l, r);
    }
    let p = da.id_space(Some("P")).unwrap();
    let mut found = 0;
    for k in f.p_ids.iter().step_by(37) {
        let key = IdKey::Str(k.as_bytes());
        let got = db_.lookup_id(p, key).unwrap();
        assert_eq!(da.lookup_id(p, key).unwrap(), got, "{k}");
        found += got.is_some() as usize;
    }
    assert!(found * 10 > f.p_ids.len() / 37 * 9, "most ids are nodes");
    assert_eq!(db_.lookup_id(p, IdKey::Str(b"nope")).unwrap(), None);
    let ra = std::fs::read_to_string(a.rejects.as_ref().unwrap()).unwrap();
    let rb = std::fs::read_to_string(b.rejects.as_ref().unwrap()).unwrap();
    assert!(ra.contains("DuplicateId") && ra.contains("MissingNode") && ra.contains("Cast"));
    // The same rejects; within a chunk, the sorting path reports its missing
    // endpoints after the chunk's other bad rows, so compare them in (file, line) order.
    let sorted = |t: &str| {
        let mut v: Vec<String> = t.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    let (ra, rb) = (sorted(&ra), sorted(&rb));
    assert_eq!(ra.len(), rb.len(), "{}", dir.display());
    for (l, r) in ra.iter().zip(&rb) {
        assert_eq!(l, r);
    }
}

#[test]
fn forced_spill_matches_memory() {
    for seed in [1u64, 2] {
        let dir = tempfile::tempdir().unwrap();
        let f = graph(seed, 3000, 12_000);
        let mem = config(dir.path(), &f, "mem", 64 << 20, false);
        let sm = import(&mem, &NoProgress).unwrap();
        assert_eq!(sm.spilled_ids, 0);
        let spill = config(dir.path(), &f, "spill", 64 << 20, true);
        let ss = import(&spill, &NoProgress).unwrap();
        assert!(ss.spilled_ids > 0);
        assert_eq!(
            (sm.n_nodes, sm.n_rels, sm.rows_rejected),
            (ss.n_nodes, ss.n_rels, ss.rows_rejected)
        );
        assert_eq!(sm.rows_read, ss.rows_read);
        check_same(dir.path(), &f, &mem, &spill);
    }
}

#[test]
fn a_small_budget_spills_midway_and_matches_memory() {
    let dir = tempfile::tempdir().unwrap();
    // ~400k ids of ~45 bytes: the string map outgrows what a 24 MiB budget leaves it.
    let f = graph(7, 400_000, 400_000);
    let mem = config(dir.path(), &f, "mem", 1 << 30, false);
    let sm = import(&mem, &NoProgress).unwrap();
    assert_eq!(sm.spilled_ids, 0);
    let small = config(dir.path(), &f, "small", 24 << 20, false);
    let ss = import(&small, &NoProgress).unwrap();
    assert!(ss.spilled_ids > 0, "{ss:?}");
    assert!(ss.budget_peak_bytes <= 24 << 20, "{ss:?}");
    assert_eq!(
        (sm.n_nodes, sm.n_rels, sm.rows_rejected),
        (ss.n_nodes, ss.n_rels, ss.rows_rejected)
    );
    assert_eq!(sm.rows_read, ss.rows_read);
    check_same(dir.path(), &f, &mem, &small);
}

#[test]
fn canonical_integer_strings_match_strings() {
    // String ids that are all canonical integers are resolved as integers; other spellings
    // of the same numbers ('007', '+7', '7.0', ' 7') are missing endpoints, as strings.
    let dir = tempfile::tempdir().unwrap();
    let f = graph_of(5, 20_000, 60_000, Some(3));
    let canon = config(dir.path(), &f, "canon", 64 << 20, false);
    let sc = import(&canon, &NoProgress).unwrap();
    let mut strings = config(dir.path(), &f, "strings", 64 << 20, false);
    strings.string_ids_as_strings = true;
    let ss = import(&strings, &NoProgress).unwrap();
    assert_eq!(
        (sc.n_nodes, sc.n_rels, sc.rows_rejected, sc.rows_read),
        (ss.n_nodes, ss.n_rels, ss.rows_rejected, ss.rows_read)
    );
    check_same(dir.path(), &f, &strings, &canon);
    // Sorted on disk from the start, and spilled midway from a map held as integers.
    let spill = config(dir.path(), &f, "spill", 64 << 20, true);
    import(&spill, &NoProgress).unwrap();
    check_same(dir.path(), &f, &strings, &spill);
    // Sparse ids (a hash table of integers) past a small budget.
    let big = graph_of(6, 1_000_000, 200_000, Some(1_000_003));
    let dir = tempfile::tempdir().unwrap();
    let mem = config(dir.path(), &big, "mem", 1 << 30, false);
    import(&mem, &NoProgress).unwrap();
    let small = config(dir.path(), &big, "small", 24 << 20, false);
    let s = import(&small, &NoProgress).unwrap();
    assert!(s.spilled_ids > 0, "{s:?}");
    check_same(dir.path(), &big, &mem, &small);
}

#[test]
fn integer_ids_spill_alike() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = rand::rngs::StdRng::seed_from_u64(11);
    // Sparse and negative ids, a duplicate, a missing endpoint, a non-integer endpoint.
    let mut nodes = String::from("id:ID,v:long\n");
    let ids: Vec<i64> = (0..5000i64).map(|i| (i - 2500) * 1_000_003).collect();
    for (i, k) in ids.iter().enumerate() {
        writeln!(nodes, "{k},{i}").unwrap();
    }
    writeln!(nodes, "{},-1", ids[17]).unwrap();
    let mut edges = String::from(":START_ID,:END_ID\n");
    for _ in 0..20_000 {
        let a = ids[r.random_range(0..ids.len())];
        let b = ids[r.random_range(0..ids.len())];
        writeln!(edges, "{a},{b}").unwrap();
    }
    writeln!(edges, "{},7", ids[3]).unwrap();
    writeln!(edges, "x,{}", ids[3]).unwrap();
    std::fs::write(dir.path().join("n.csv"), nodes).unwrap();
    std::fs::write(dir.path().join("e.csv"), edges).unwrap();
    let cfg = |name: &str, spill: bool| {
        let mut c = ImportConfig::new(dir.path().join(format!("{name}.qdb")));
        c.nodes
            .push(InputGroup::parse(&format!("N={}", dir.path().join("n.csv").display())).unwrap());
        c.relationships
            .push(InputGroup::parse(&format!("E={}", dir.path().join("e.csv").display())).unwrap());
        c.id_type = IdType::Integer;
        c.threads = 2;
        c.memory_budget_bytes = 64 << 20;
        c.skip_bad_rows = true;
        c.rejects = Some(dir.path().join(format!("{name}.rejects.csv")));
        c.spill_ids = spill;
        c
    };
    let (a, b) = (cfg("mem", false), cfg("spill", true));
    let sa = import(&a, &NoProgress).unwrap();
    let sb = import(&b, &NoProgress).unwrap();
    assert_eq!(sb.spilled_ids, 5000);
    assert_eq!((sa.n_nodes, sa.n_rels, sa.rows_rejected), (5000, 20_000, 3));
    assert_eq!((sb.n_nodes, sb.n_rels, sb.rows_rejected), (5000, 20_000, 3));
    let (da, db_) = (
        Database::open(&a.db, OpenMode::Mapped).unwrap(),
        Database::open(&b.db, OpenMode::Mapped).unwrap(),
    );
    assert_eq!(dump(&da), dump(&db_));
    for k in [ids[0], ids[17], ids[4999], 5, i64::MIN] {
        assert_eq!(
            da.lookup_id(0, IdKey::Int(k)).unwrap(),
            db_.lookup_id(0, IdKey::Int(k)).unwrap()
        );
    }
    let mut ra: Vec<String> = std::fs::read_to_string(a.rejects.unwrap())
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let mut rb: Vec<String> = std::fs::read_to_string(b.rejects.unwrap())
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    ra.sort();
    rb.sort();
    assert_eq!(ra, rb);
}
