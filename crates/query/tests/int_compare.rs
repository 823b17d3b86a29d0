//! `n.v >= 3` (a node property compared with an integer constant) is tested on a
//! column's stored integers, without a value per row (`expr::int_compare_col`). The
//! answers must be the values' own: here against a model, over nodes read as a run and
//! scattered, with nulls, and beside the write layer's values of other types (a float
//! compares by number; a string is unequal and does not order; null does not compare).

mod common;

use common::{ints, run};
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_query::Session;
use quiver_storage::manifest::IdType;
use quiver_storage::OpenMode;
use rand::{Rng, SeedableRng};
use std::fmt::Write;

#[derive(Clone, Debug)]
enum V {
    Null,
    Int(i64),
    Float(f64),
    Str,
}

fn holds(v: &V, op: &str, k: i64) -> bool {
    let o = match v {
        V::Int(a) => a.cmp(&k),
        V::Float(f) => match f.partial_cmp(&(k as f64)) {
            Some(o) => o,
            None => return false,
        },
        // (Values of different types are unequal; they do not order.)
        V::Str => return op == "<>",
        V::Null => return false,
    };
    use std::cmp::Ordering::*;
    match op {
        "=" => o == Equal,
        "<>" => o != Equal,
        "<" => o == Less,
        "<=" => o != Greater,
        ">" => o == Greater,
        _ => o != Less,
    }
}

#[test]
fn integer_comparisons_on_stored_columns_match_the_values() {
    let dir = tempfile::tempdir().unwrap();
    let n = 5000usize;
    let mut r = rand::rngs::StdRng::seed_from_u64(5);
    let mut vals: Vec<V> = (0..n)
        .map(|i| {
            if i % 6 == 0 {
                V::Null
            } else {
                V::Int(r.random_range(-5..12))
            }
        })
        .collect();
    let mut nodes = String::from("id:ID,v:int,b:byte\n");
    for (i, v) in vals.iter().enumerate() {
        match v {
            V::Int(x) => writeln!(nodes, "{i},{x},{x}").unwrap(),
            _ => writeln!(nodes, "{i},,").unwrap(),
        }
    }
    // Node 0 reaches every node (its neighbours come as a run of ids); node 1 a random
    // third of them (scattered).
    let mut edges = String::from(":START_ID,:END_ID\n");
    let mut some = Vec::new();
    for i in 0..n {
        writeln!(edges, "0,{i}").unwrap();
        if r.random_range(0..3) == 0 {
            writeln!(edges, "1,{i}").unwrap();
            some.push(i);
        }
    }
    std::fs::write(dir.path().join("n.csv"), nodes).unwrap();
    std::fs::write(dir.path().join("e.csv"), edges).unwrap();
    let db = dir.path().join("g.qdb");
    let mut cfg = ImportConfig::new(&db);
    cfg.nodes
        .push(InputGroup::parse(&format!("N={}", dir.path().join("n.csv").display())).unwrap());
    cfg.relationships
        .push(InputGroup::parse(&format!("R={}", dir.path().join("e.csv").display())).unwrap());
    cfg.id_type = IdType::Integer;
    cfg.threads = 2;
    import(&cfg, &NoProgress).unwrap();
    let mut s = Session::open_with(&db, OpenMode::Mapped, true).unwrap();

    let check = |s: &mut Session, vals: &[V], some: &[usize], when: &str| {
        for op in ["=", "<>", "<", "<=", ">", ">="] {
            for k in [-1i64, 3, 11] {
                for (hub, of) in [(0, None), (1, Some(some))] {
                    let mut want: Vec<i64> = (0..vals.len())
                        .filter(|i| of.is_none_or(|o| o.binary_search(i).is_ok()))
                        .filter(|&i| holds(&vals[i], op, k))
                        .map(|i| i as i64)
                        .collect();
                    want.sort_unstable();
                    let q =
                        format!("MATCH (h:N {{id: {hub}}})-->(m) WHERE m.v {op} {k} RETURN m.id");
                    let mut got = ints(s, &q);
                    got.sort_unstable();
                    assert!(
                        got == want,
                        "{when}: {q}: {} rows, not {}",
                        got.len(),
                        want.len()
                    );
                }
            }
        }
        // A byte column reads the same way.
        let mut want: Vec<i64> = (0..vals.len())
            .filter(|&i| matches!(vals[i], V::Int(x) if x >= 3))
            .map(|i| i as i64)
            .collect();
        want.sort_unstable();
        let mut got = ints(s, "MATCH (h:N {id: 0})-->(m) WHERE m.b >= 3 RETURN m.id");
        got.sort_unstable();
        if when == "imported" {
            assert_eq!(got, want, "{when}: byte column");
        }
    };
    check(&mut s, &vals, &some, "imported");

    // The write layer: other types, nulls, and new integers over imported nodes.
    for i in (2..n).step_by(7) {
        let (text, v) = match i % 4 {
            0 => ("2.5".to_string(), V::Float(2.5)),
            1 => ("'x'".to_string(), V::Str),
            2 => ("null".to_string(), V::Null),
            _ => ("3".to_string(), V::Int(3)),
        };
        run(&mut s, &format!("MATCH (m:N {{id: {i}}}) SET m.v = {text}")).unwrap();
        vals[i] = v;
    }
    check(&mut s, &vals, &some, "after writes");
}
