//! Map projections (`n {.name, .*, key: expr, var}`) on nodes, relationships and maps:
//! chosen properties, every property, computed entries and variables, later entries
//! winning, null for a null subject; and `apoc.map.merge`, which `.*` is read through.

mod common;

use common::{rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;

fn one(s: &mut Session, q: &str) -> String {
    let r = rows(s, q);
    assert_eq!(r.len(), 1, "{q}");
    format!("{:?}", r[0][0])
}

#[test]
fn map_projections_pick_and_compute() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    run(
        &mut s,
        "CREATE (:P {name: 'Ann', age: 30})-[:KNOWS {since: 2020}]->(:P {name: 'Bob'})",
    )
    .unwrap();
    let cases = [
        (
            "MATCH (p:P {name: 'Ann'}) RETURN p {.name, .age} AS m",
            "RETURN {name: 'Ann', age: 30} AS m",
        ),
        // Missing properties are null; computed entries and variables join them.
        (
            "MATCH (p:P {name: 'Bob'}) WITH p, 7 AS n RETURN p {.name, .age, twice: 2 * n, n} AS m",
            "RETURN {name: 'Bob', age: null, twice: 14, n: 7} AS m",
        ),
        // `.*` is every property; a later entry wins.
        (
            "MATCH (p:P {name: 'Ann'}) RETURN p {.*, age: 31} AS m",
            "RETURN {name: 'Ann', age: 31} AS m",
        ),
        (
            "MATCH ()-[r:KNOWS]->() RETURN r {.since, kind: type(r)} AS m",
            "RETURN {since: 2020, kind: 'KNOWS'} AS m",
        ),
        (
            "WITH {a: 1, b: 2} AS x RETURN x {.a, .*, c: 3} AS m",
            "RETURN {a: 1, b: 2, c: 3} AS m",
        ),
        (
            "OPTIONAL MATCH (z:Nobody) RETURN z {.name} AS m",
            "RETURN null AS m",
        ),
        (
            "RETURN apoc.map.merge({a: 1, b: 2}, {b: 3, c: 4}) AS m",
            "RETURN {a: 1, b: 3, c: 4} AS m",
        ),
    ];
    for (q, want) in cases {
        // Maps compare by entries: render each sorted by key.
        let norm = |s: &mut Session, q: &str| {
            rows(s, q)
                .into_iter()
                .map(|r| match &r[0] {
                    Value::Map(m) => {
                        let mut e = m.to_vec();
                        e.sort_by(|a, b| a.0.cmp(&b.0));
                        format!("{e:?}")
                    }
                    v => format!("{v:?}"),
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(norm(&mut s, q), norm(&mut s, want), "{q}");
    }
    assert!(one(&mut s, "MATCH (p:P {name: 'Ann'}) RETURN p {} AS m").contains("Map"));
}
