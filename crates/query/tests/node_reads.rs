//! `Graph::nodes_props` (a result of whole nodes read a row group at a time) gives
//! what `Graph::node_props` gives node by node: over the segments of several tables,
//! with the delta's changed, created and deleted nodes laid over them.

mod common;

use common::run;
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;
use std::collections::BTreeMap;

#[test]
fn nodes_read_together_equal_nodes_read_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&dir.path().join("db"), OpenMode::Mapped, true).unwrap();
    for q in [
        // Two tables, with nulls and several types.
        "UNWIND range(1, 70000) AS i CREATE (:A {id: i, name: 'a' + toString(i % 97), \
         odd: CASE WHEN i % 2 = 1 THEN true END, score: i / 7.0})",
        "CHECKPOINT",
        "UNWIND range(1, 3000) AS i CREATE (:B {id: i, tags: [i, i + 1], born: date('2000-01-01') + duration({days: i})})",
        "CHECKPOINT",
        // The delta: changed, emptied, created and deleted nodes.
        "MATCH (n:A) WHERE n.id % 1000 = 0 SET n.name = 'changed', n.extra = n.id",
        "MATCH (n:A) WHERE n.id % 1500 = 7 REMOVE n.name, n.score",
        "MATCH (n:B) WHERE n.id % 500 = 1 DETACH DELETE n",
        "UNWIND range(1, 40) AS i CREATE (:A:New {id: -i, note: 'new'})",
    ] {
        run(&mut s, q).unwrap_or_else(|e| panic!("{q}: {e}"));
    }
    let mut checked = 0;
    let q = "MATCH (n) WHERE n.id % 97 = 3 OR n.id % 1000 = 0 OR n.id % 1500 = 7 OR n.id < 0 \
             RETURN n ORDER BY n.score DESC, n.id";
    s.run(q, &BTreeMap::new(), &mut |g, b| {
        let ids: Vec<u64> = b.cols[0]
            .iter()
            .map(|v| match v {
                Value::Node(n) => *n,
                v => panic!("not a node: {v:?}"),
            })
            .collect();
        let together = g.nodes_props(&ids)?;
        for (n, props) in ids.iter().zip(&together) {
            assert_eq!(*props, g.node_props(*n)?, "node {n}");
            assert!(!props.is_empty());
        }
        checked += ids.len();
        Ok(())
    })
    .unwrap();
    assert!(checked > 800, "{checked}");
}
