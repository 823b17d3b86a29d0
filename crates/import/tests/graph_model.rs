//! CSR neighbours, id lookups and edge scans agree with a naive adjacency model of the
//! imported files, in every open mode; offline mode refuses random access with an error.

use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_storage::manifest::IdType;
use quiver_storage::read::IdKey;
use quiver_storage::{Database, Direction, OpenMode, ReadError};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::fmt::Write;

fn random_graph(seed: u64, n: u32, m: usize) -> (String, String, Vec<(u32, u32)>) {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    // Node ids are sparse and shuffled so that the id map is a hash, not an array.
    let mut ids: Vec<u64> = (0..n as u64).map(|i| i * 7919 + 13).collect();
    for i in (1..ids.len()).rev() {
        ids.swap(i, r.random_range(0..=i));
    }
    let mut nodes = String::from("uid:ID(P),name\n");
    for (i, id) in ids.iter().enumerate() {
        writeln!(nodes, "{id},n{i}").unwrap();
    }
    let mut edges = String::from(":START_ID(P),:END_ID(P),w:int\n");
    let mut list = Vec::new();
    for k in 0..m {
        let (a, b) = (r.random_range(0..n), r.random_range(0..n));
        writeln!(edges, "{},{},{k}", ids[a as usize], ids[b as usize]).unwrap();
        list.push((a, b));
    }
    (nodes, edges, list)
}

/// Writes the two files into `dir` and an import config for them (integer ids, 2 threads).
fn config(dir: &std::path::Path, nodes: &str, edges: &str, budget_bytes: u64) -> ImportConfig {
    std::fs::write(dir.join("n.csv"), nodes).unwrap();
    std::fs::write(dir.join("e.csv"), edges).unwrap();
    let mut cfg = ImportConfig::new(dir.join("g.qdb"));
    cfg.nodes
        .push(InputGroup::parse(&format!("P={}", dir.join("n.csv").display())).unwrap());
    cfg.relationships
        .push(InputGroup::parse(&format!("E={}", dir.join("e.csv").display())).unwrap());
    cfg.id_type = IdType::Integer;
    cfg.memory_budget_bytes = budget_bytes;
    cfg.threads = 2;
    cfg
}

#[test]
fn csr_matches_naive_adjacency_in_every_mode() {
    for seed in [1u64, 2, 3] {
        eprintln!("seed {seed}");
        let dir = tempfile::tempdir().unwrap();
        let (nodes, edges, list) = random_graph(seed, 300, 2000);
        let cfg = config(dir.path(), &nodes, &edges, 64 << 20);
        let s = import(&cfg, &NoProgress).unwrap();
        assert_eq!(s.n_nodes, 300);
        assert_eq!(s.n_rels, 2000);
        // Rows are internal ids in file order.
        let mut out: BTreeMap<u32, Vec<(u32, u64)>> = BTreeMap::new();
        let mut inc: BTreeMap<u32, Vec<(u32, u64)>> = BTreeMap::new();
        for (k, &(a, b)) in list.iter().enumerate() {
            out.entry(a).or_default().push((b, k as u64));
            inc.entry(b).or_default().push((a, k as u64));
        }
        for v in out.values_mut().chain(inc.values_mut()) {
            v.sort();
        }
        for mode in [OpenMode::Mapped, OpenMode::Loaded] {
            let db = Database::open(&cfg.db, mode).unwrap();
            db.verify().unwrap();
            for node in 0..300u32 {
                let got: Vec<(u32, u64)> =
                    db.neighbours(0, node, Direction::Out).unwrap().collect();
                assert_eq!(
                    got,
                    out.get(&node).cloned().unwrap_or_default(),
                    "out of {node}"
                );
                let got: Vec<(u32, u64)> = db.neighbours(0, node, Direction::In).unwrap().collect();
                assert_eq!(
                    got,
                    inc.get(&node).cloned().unwrap_or_default(),
                    "in of {node}"
                );
            }
            let space = db.id_space(Some("P")).unwrap();
            assert_eq!(db.lookup_id(space, IdKey::Int(13)).unwrap().is_some(), true);
            assert_eq!(db.lookup_id(space, IdKey::Int(14)).unwrap(), None);
            // Edge property w is the input line number: it follows the edge id.
            for node in [0u32, 17, 299] {
                for (_, eid) in db.neighbours(0, node, Direction::In).unwrap() {
                    let w = db
                        .with_rel_chunk(0, 0, 0, |c| c.get_i64(eid as usize))
                        .unwrap();
                    assert_eq!(w, Some(eid as i64));
                }
            }
        }
        let off = Database::open(&cfg.db, OpenMode::Offline).unwrap();
        assert!(matches!(
            off.neighbours(0, 0, Direction::Out),
            Err(ReadError::OfflineRandomAccess { .. })
        ));
        assert!(matches!(
            off.lookup_id(0, IdKey::Int(13)),
            Err(ReadError::OfflineRandomAccess { .. })
        ));
        let mut scanned = Vec::new();
        off.scan_edges(0, Direction::Out, |s, d, e| scanned.push((s, d, e)))
            .unwrap();
        let mut expect: Vec<(u32, u32, u64)> = out
            .iter()
            .flat_map(|(&s, v)| v.iter().map(move |&(d, e)| (s, d, e)))
            .collect();
        expect.sort();
        assert_eq!(scanned, expect);
        off.verify().unwrap();
    }
}

#[test]
fn edges_spill_under_a_small_budget_and_stay_correct() {
    let dir = tempfile::tempdir().unwrap();
    // Random endpoints among 2,000 nodes take 22 bits an edge in the edge store's
    // sealed blocks: 8M edges are 22 MB there.
    let (nodes, edges, list) = random_graph(9, 2000, 8_000_000);
    let mut cfg = config(dir.path(), &nodes, &edges, 24 << 20);
    cfg.no_edge_properties = true;
    let s = import(&cfg, &NoProgress).unwrap();
    assert!(
        s.spilled_edges > 0,
        "22 MB of sealed edges under a 24 MiB budget must spill: {s:?}"
    );
    assert!(s.budget_peak_bytes <= 24 << 20);
    let db = Database::open(&cfg.db, OpenMode::Mapped).unwrap();
    let mut deg = vec![0u64; 2000];
    for &(a, _) in &list {
        deg[a as usize] += 1;
    }
    for node in (0..2000u32).step_by(97) {
        assert_eq!(
            db.degree(0, node, Direction::Out).unwrap(),
            deg[node as usize]
        );
        let ns: Vec<u32> = db
            .neighbours(0, node, Direction::Out)
            .unwrap()
            .map(|x| x.0)
            .collect();
        assert!(ns.windows(2).all(|w| w[0] <= w[1]), "neighbours sorted");
    }
}

/// Id indexes in their three forms answer every lookup and list every entry in key
/// order: ids `1..=n` in row order (no arrays), `1..=n` shuffled (implied keys, a node
/// array), sparse ids (keys and nodes).
#[test]
fn id_index_forms_answer_lookups_and_scans() {
    let mut r = rand::rngs::StdRng::seed_from_u64(9);
    for form in ["dense", "shuffled", "sparse"] {
        let n = 1000u64;
        let mut ids: Vec<i64> = (1..=n as i64).collect();
        if form != "dense" {
            for i in (1..ids.len()).rev() {
                ids.swap(i, r.random_range(0..=i));
            }
        }
        if form == "sparse" {
            ids.iter_mut().for_each(|x| *x = *x * 31 - 500);
        }
        let mut nodes = String::from("uid:ID(P)\n");
        for id in &ids {
            writeln!(nodes, "{id}").unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), &nodes, ":START_ID(P),:END_ID(P)\n", 64 << 20);
        import(&cfg, &NoProgress).unwrap();
        let db = Database::open(&cfg.db, OpenMode::Mapped).unwrap();
        let space = db.id_space(Some("P")).unwrap();
        // Row i (node i) has id ids[i].
        for (row, &id) in ids.iter().enumerate() {
            assert_eq!(
                db.lookup_id(space, IdKey::Int(id)).unwrap(),
                Some(row as u32),
                "{form} id {id}"
            );
        }
        let (lo, hi) = (*ids.iter().min().unwrap(), *ids.iter().max().unwrap());
        for missing in [lo - 1, hi + 1, i64::MIN, i64::MAX] {
            assert_eq!(
                db.lookup_id(space, IdKey::Int(missing)).unwrap(),
                None,
                "{form} {missing}"
            );
        }
        let mut entries = Vec::new();
        db.id_entries(space, &mut |k, node| match k {
            IdKey::Int(k) => entries.push((k, node)),
            IdKey::Str(_) => panic!("string key"),
        })
        .unwrap();
        let mut want: Vec<(i64, u32)> = ids
            .iter()
            .enumerate()
            .map(|(i, &k)| (k, i as u32))
            .collect();
        want.sort();
        assert_eq!(entries, want, "{form}");
    }
}
