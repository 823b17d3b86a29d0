//! A query's deadline (`QueryOptions::deadline`: the Bolt server gives one to a
//! statement it runs on an I/O thread) stops every kind of read the way cancellation
//! does, and a statement's summary says whether it only read the graph (so that it can
//! be stopped and run again elsewhere).

mod common;

use common::run;
use quiver_query::{QueryError, Session};
use quiver_storage::OpenMode;
use std::time::Instant;

/// 3,000 users: a hub that follows all of them, and a chain through them; checkpointed,
/// so that scans and aggregations read segments (the typed paths).
fn graph() -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&dir.path().join("db"), OpenMode::Mapped, true).unwrap();
    for q in [
        "UNWIND range(1, 3000) AS i CREATE (:User {id: i, age: i % 90})",
        "MATCH (h:User {id: 1}), (u:User) WHERE u.id > 1 CREATE (h)-[:F]->(u)",
        "UNWIND range(2, 2999) AS i MATCH (a:User {id: i}), (b:User {id: i + 1}) CREATE (a)-[:F]->(b)",
        "CHECKPOINT",
    ] {
        run(&mut s, q).unwrap_or_else(|e| panic!("{q}: {e}"));
    }
    (dir, s)
}

#[test]
fn a_passed_deadline_stops_every_kind_of_read() {
    let (_dir, mut s) = graph();
    for q in [
        "MATCH (n:User) RETURN n.id",
        "MATCH (n) RETURN n.id",
        "MATCH (n:User) RETURN n.age, count(*)",
        "MATCH (n:User) WHERE n.age > 10 RETURN count(DISTINCT n.age)",
        "MATCH (n:User) RETURN n.id ORDER BY n.age DESC LIMIT 3",
        "MATCH (:User {id: 1})-->(m) RETURN m.id",
        "MATCH (:User {id: 1})-[*1..2]->(m) RETURN count(*)",
        "MATCH p = shortestPath((a:User {id: 2})-[*..3000]->(b:User {id: 3000})) RETURN length(p)",
        "MATCH (a:User), (b:User) WHERE a.id = b.age RETURN count(*)",
        "UNWIND range(1, 100000) AS x RETURN count(x)",
    ] {
        s.opts.deadline = None;
        run(&mut s, q).unwrap_or_else(|e| panic!("{q}: {e}"));
        s.opts.deadline = Some(Instant::now());
        match run(&mut s, q) {
            Err(QueryError::Cancelled) => {}
            other => panic!("{q} ran past its deadline: {other:?}"),
        }
    }
}

#[test]
fn summaries_say_which_statements_only_read() {
    let (_dir, mut s) = graph();
    for (q, read) in [
        ("MATCH (n:User {id: 1}) RETURN n", true),
        (
            "MATCH (n) WITH n LIMIT 1 UNWIND [1, 2] AS x RETURN n, x",
            true,
        ),
        (
            "MATCH (n:User {id: 1}) CALL { WITH n MATCH (n)-->(m) RETURN count(m) AS c } RETURN c",
            true,
        ),
        ("CREATE (n:T) RETURN n", false),
        ("MATCH (n:T) SET n.x = 1", false),
        (
            "MATCH (n:User {id: 1}) CALL { WITH n CREATE (:T) } RETURN n",
            false,
        ),
        ("CALL db.labels() YIELD label RETURN label", false),
    ] {
        let sum = run(&mut s, q).unwrap_or_else(|e| panic!("{q}: {e}"));
        assert_eq!(sum.graph_read, read, "{q}");
    }
}
