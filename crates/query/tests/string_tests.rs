//! `STARTS WITH`, `ENDS WITH`, `CONTAINS`, `=` and `<>` against a string constant are
//! tested on a string column's stored bytes (plain, dictionary or FSST chunks) without
//! making a value per row. The answers must be the ones the string values give: here
//! against a model, on imported nodes (with nulls and multi-byte characters) and on
//! nodes created in the write layer on top of them (with the empty string), row by row
//! and under an aggregation (whose direct path reads tests and presence as columns).

mod common;

use common::{ints, run};
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::Session;
use quiver_storage::manifest::IdType;
use quiver_storage::OpenMode;
use rand::{Rng, SeedableRng};
use std::fmt::Write;

const PIECES: [&str; 8] = ["ab", "é", "graph", "x", "ré", "node", "日本", "b"];

fn random_text(r: &mut impl Rng, max_pieces: usize) -> String {
    (0..r.random_range(0..=max_pieces))
        .map(|_| PIECES[r.random_range(0..PIECES.len())])
        .collect()
}

/// Values by id: a fifth null, the rest varied enough for FSST. (An empty CSV field,
/// quoted or not, imports as null, so the empty string comes from the write layer.)
fn model(seed: u64, n: usize) -> Vec<Option<String>> {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| match i % 5 {
            0 => None,
            _ => Some(random_text(&mut r, 12)).filter(|s| !s.is_empty()),
        })
        .collect()
}

fn expected(values: &[Option<String>], op: &str, pat: &str) -> Vec<i64> {
    let mut out: Vec<i64> = values
        .iter()
        .enumerate()
        .filter(|(_, v)| {
            v.as_deref().is_some_and(|s| match op {
                "STARTS WITH" => s.starts_with(pat),
                "ENDS WITH" => s.ends_with(pat),
                "CONTAINS" => s.contains(pat),
                "=" => s == pat,
                _ => s != pat,
            })
        })
        .map(|(i, _)| i as i64)
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn string_tests_on_stored_bytes_match_the_values() {
    let dir = tempfile::tempdir().unwrap();
    let n = 6000;
    let mut values = model(7, n);
    let mut csv = String::from("id:ID,s:string,k:int\n");
    for (i, v) in values.iter().enumerate() {
        match v {
            Some(s) => writeln!(csv, "{i},\"{s}\",{i}").unwrap(),
            None => writeln!(csv, "{i},,{i}").unwrap(),
        }
    }
    std::fs::write(dir.path().join("n.csv"), csv).unwrap();
    let db = dir.path().join("g.qdb");
    let mut cfg = ImportConfig::new(&db);
    cfg.nodes
        .push(InputGroup::parse(&format!("N={}", dir.path().join("n.csv").display())).unwrap());
    cfg.id_type = IdType::Integer;
    cfg.threads = 2;
    import(&cfg, &NoProgress).unwrap();
    let mut s = Session::open_with(&db, OpenMode::Mapped, true).unwrap();

    let mut r = rand::rngs::StdRng::seed_from_u64(11);
    let check = |s: &mut Session, values: &[Option<String>], r: &mut rand::rngs::StdRng| {
        for _ in 0..40 {
            let pat = random_text(r, 2);
            for op in ["STARTS WITH", "ENDS WITH", "CONTAINS", "=", "<>"] {
                let q = format!("MATCH (n:N) WHERE n.s {op} '{pat}' RETURN n.k");
                let mut got = ints(s, &q);
                got.sort_unstable();
                let want = expected(values, op, &pat);
                let first = got.iter().zip(&want).position(|(a, b)| a != b);
                assert!(
                    got == want,
                    "{q}: {} rows, expected {}; first difference at {first:?}",
                    got.len(),
                    want.len()
                );
                // The same test under an aggregation (the direct column path).
                let q = format!("MATCH (n:N) WHERE n.s {op} '{pat}' RETURN count(*)");
                assert_eq!(ints(s, &q), vec![want.len() as i64], "{q}");
            }
        }
        // Presence without string values: count(property) and IS NULL.
        let present = values.iter().filter(|v| v.is_some()).count() as i64;
        let all = values.len() as i64;
        assert_eq!(ints(s, "MATCH (n:N) RETURN count(n.s)"), vec![present]);
        assert_eq!(
            ints(s, "MATCH (n:N) WHERE n.s IS NULL RETURN count(*)"),
            vec![all - present]
        );
        assert_eq!(
            ints(s, "MATCH (n:N) WHERE n.s IS NOT NULL RETURN count(n.k)"),
            vec![present]
        );
        // A constant of another type, and a property that is not a string, take the
        // value path.
        assert!(ints(s, "MATCH (n:N) WHERE n.k = '3' RETURN n.k").is_empty());
        assert_eq!(ints(s, "MATCH (n:N) WHERE n.k = 3 RETURN n.k"), vec![3]);
    };
    check(&mut s, &values, &mut r);

    // Nodes in the write layer: created, and an imported one changed.
    run(
        &mut s,
        "CREATE (:N {k: 6000, s: 'abé'}), (:N {k: 6001, s: ''}), (:N {k: 6002})",
    )
    .unwrap();
    run(&mut s, "MATCH (n:N {k: 1}) SET n.s = 'graphx'").unwrap();
    values.extend([Some("abé".into()), Some(String::new()), None]);
    values[1] = Some("graphx".into());
    check(&mut s, &values, &mut r);
}
