//! Labels on nodes that are found elsewhere (bound by an earlier clause, or by an
//! earlier occurrence in the same MATCH) are tested, in every place a node pattern
//! stands; and the label expressions of Neo4j 5 / GQL (`|`, `&`, `!`, `%`, parentheses,
//! `IS`) in node and relationship patterns and in WHERE. Each answer is checked by hand,
//! on the delta, on segments (after a checkpoint), and on a database where the second
//! label never existed.

mod common;

use common::{rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;

fn open(dir: &std::path::Path) -> Session {
    Session::open_with(&dir.join("g.qdb"), OpenMode::Mapped, true).unwrap()
}

/// `a:Person`, `b:Person:Employee`, `c:Employee`, `(a)-[:KNOWS]->(b)-[:WORKS]->(c)`.
const GRAPH: &str = "CREATE (a:Person {name: 'a'}), (b:Person:Employee {name: 'b'}), \
     (c:Employee {name: 'c'}), (a)-[:KNOWS]->(b), (b)-[:WORKS]->(c)";

/// The rows of `q` as text, each row's values joined by `,` (strings bare, lists in
/// brackets), in the order given.
fn text(s: &mut Session, q: &str) -> Vec<String> {
    fn one(v: &Value) -> String {
        match v {
            Value::Str(s) => s.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => "null".into(),
            Value::List(l) => format!("[{}]", l.iter().map(one).collect::<Vec<_>>().join(",")),
            v => format!("{v:?}"),
        }
    }
    rows(s, q)
        .iter()
        .map(|r| r.iter().map(one).collect::<Vec<_>>().join(","))
        .collect()
}

fn sorted(s: &mut Session, q: &str) -> Vec<String> {
    let mut v = text(s, q);
    v.sort();
    v
}

/// The table: each query and its answer (Neo4j 5.26's), sorted.
const REBOUND: &[(&str, &[&str])] = &[
    ("MATCH (n:Person) MATCH (n:Employee) RETURN n.name", &["b"]),
    ("MATCH (n:Person), (n:Employee) RETURN n.name", &["b"]),
    ("MATCH (n:Employee), (n:Person) RETURN n.name", &["b"]),
    ("MATCH (n) WITH n MATCH (n:Person:Employee) RETURN n.name", &["b"]),
    (
        "MATCH (n:Person) WITH n MATCH (n:Employee)-[r]->(m) RETURN n.name, m.name",
        &["b,c"],
    ),
    (
        "MATCH (n:Person) WHERE EXISTS { MATCH (n:Employee) } RETURN n.name",
        &["b"],
    ),
    (
        "MATCH (n:Person) RETURN n.name, COUNT { MATCH (n:Employee) } AS c",
        &["a,0", "b,1"],
    ),
    (
        "MATCH (n:Person) RETURN n.name, [(n:Employee)-->(m) | m.name]",
        &["a,[]", "b,[c]"],
    ),
    (
        "MATCH (n:Person) CALL (n) { MATCH (n:Employee) RETURN n.name AS nm } RETURN nm",
        &["b"],
    ),
    (
        "MATCH (n:Person) WITH collect(n) AS ns UNWIND ns AS n MATCH (n:Employee) RETURN n.name",
        &["b"],
    ),
    // The same in other places a node pattern stands.
    (
        "MATCH (n:Person) OPTIONAL MATCH (n:Employee)-[:WORKS]->(m) RETURN n.name, m.name",
        &["a,null", "b,c"],
    ),
    (
        "MATCH (n:Person) MATCH (n:Employee)-[*1..2]->(m) RETURN n.name, m.name",
        &["b,c"],
    ),
    ("MATCH (n:Person) MATCH (m)-->(n:Employee) RETURN m.name", &["a"]),
    ("MATCH (n:Person) WHERE (n:Employee)-->() RETURN n.name", &["b"]),
    (
        "MATCH (a:Person {name: 'a'}), (c {name: 'c'}) MATCH p = shortestPath((a:Employee)-[*]->(c)) RETURN length(p)",
        &[],
    ),
    (
        "MATCH (a {name: 'b'}), (c {name: 'c'}) MATCH p = shortestPath((a:Employee)-[*]->(c)) RETURN length(p)",
        &["1"],
    ),
    (
        "MATCH (n:Person) MATCH (n)-->(m:Employee), (n:Employee) RETURN n.name, m.name",
        &["b,c"],
    ),
    ("MATCH (n:Person)-->(n:Employee) RETURN n.name", &[]),
    (
        "MATCH (n:Person) WITH n MATCH (n:Employee {name: 'b'}) RETURN n.name",
        &["b"],
    ),
    (
        "MATCH (n:Person) WITH n MATCH (n:Employee|Manager) RETURN n.name",
        &["b"],
    ),
];

/// Label expressions: each form and its answer, sorted.
const EXPRESSIONS: &[(&str, &[&str])] = &[
    ("MATCH (n:Person|Employee) RETURN n.name", &["a", "b", "c"]),
    ("MATCH (n:Person&Employee) RETURN n.name", &["b"]),
    ("MATCH (n:!Person) RETURN n.name", &["c"]),
    ("MATCH (n:!Employee) RETURN n.name", &["a"]),
    ("MATCH (n:%) RETURN n.name", &["a", "b", "c"]),
    ("MATCH (n:!%) RETURN n.name", &[]),
    (
        "MATCH (n:(Person|Employee)&!Employee) RETURN n.name",
        &["a"],
    ),
    (
        "MATCH (n:(Person|Employee)&!(Person&Employee)) RETURN n.name",
        &["a", "c"],
    ),
    ("MATCH (n:Person|Manager) RETURN n.name", &["a", "b"]),
    ("MATCH (n:Manager|Nobody) RETURN n.name", &[]),
    ("MATCH (n:!Manager) RETURN n.name", &["a", "b", "c"]),
    ("MATCH (n IS Person) RETURN n.name", &["a", "b"]),
    ("MATCH (n IS Person&Employee) RETURN n.name", &["b"]),
    (
        "MATCH (n) WHERE n:Person|Employee RETURN n.name",
        &["a", "b", "c"],
    ),
    ("MATCH (n) WHERE n:Person&!Employee RETURN n.name", &["a"]),
    ("MATCH (n) WHERE n:% RETURN n.name", &["a", "b", "c"]),
    ("MATCH (n) WHERE n IS Employee RETURN n.name", &["b", "c"]),
    ("MATCH (n) WHERE NOT n:Person|Employee RETURN n.name", &[]),
    (
        "MATCH (n) RETURN n.name, n:Person|Employee AS x",
        &["a,true", "b,true", "c,true"],
    ),
    ("MATCH (n:Person|Employee) RETURN count(n)", &["3"]),
    (
        "MATCH (n:Person|Employee) WHERE n.name > 'a' RETURN count(*)",
        &["2"],
    ),
    (
        "MATCH (a:Person)-->(b:Employee&!Person) RETURN a.name, b.name",
        &["b,c"],
    ),
    (
        "MATCH (a:Person) WHERE (a)-->(:Employee&!Person) RETURN a.name",
        &["b"],
    ),
    ("MATCH ()-[r:!KNOWS]->() RETURN type(r)", &["WORKS"]),
    ("MATCH ()-[r:%]->() RETURN type(r)", &["KNOWS", "WORKS"]),
    (
        "MATCH ()-[r:KNOWS|WORKS]->() RETURN type(r)",
        &["KNOWS", "WORKS"],
    ),
    ("MATCH ()-[r:KNOWS&WORKS]->() RETURN type(r)", &[]),
    ("MATCH ()-[r:!%]->() RETURN type(r)", &[]),
    ("MATCH ()-[r IS WORKS]->() RETURN type(r)", &["WORKS"]),
    (
        "MATCH ()-[r:(KNOWS|WORKS)&!WORKS]->() RETURN type(r)",
        &["KNOWS"],
    ),
    (
        "MATCH ()-[r]->() WHERE r:KNOWS|WORKS RETURN type(r)",
        &["KNOWS", "WORKS"],
    ),
    ("MATCH ()-[r]->() WHERE r:!KNOWS RETURN type(r)", &["WORKS"]),
    (
        "MATCH (a)-[:KNOWS|WORKS*2]->(b) RETURN a.name, b.name",
        &["a,c"],
    ),
    (
        "MATCH (a:Person) WHERE (a)-[:!KNOWS]->() RETURN a.name",
        &["b"],
    ),
    // The last `|` in a comprehension's WHERE ends the predicate; the ones before it,
    // and any in parentheses, join labels (as Neo4j 5.26 reads them).
    (
        "MATCH (n) WITH collect(n) AS ns RETURN [x IN ns WHERE x:Employee | x.name] AS l",
        &["[b,c]"],
    ),
    (
        "MATCH (n) WITH collect(n) AS ns RETURN [x IN ns WHERE x:Person|Manager | x.name] AS l",
        &["[a,b]"],
    ),
    (
        "MATCH (n:Person) RETURN n.name, [(n)-->(m) WHERE m:Employee|Manager | m.name] AS l",
        &["a,[b]", "b,[c]"],
    ),
    (
        "MATCH (n) WITH collect(n) AS ns RETURN [x IN ns WHERE x:(Person|Manager) | x.name] AS l",
        &["[a,b]"],
    ),
];

fn check(s: &mut Session, cases: &[(&str, &[&str])], state: &str) {
    for (q, want) in cases {
        let mut want: Vec<String> = want.iter().map(|w| w.to_string()).collect();
        want.sort();
        assert_eq!(sorted(s, q), want, "{state}: {q}");
    }
}

/// What a database held before the graph was made in it: nodes and relationships of
/// other labels and of the same ones, checkpointed into segments, then deleted (dead
/// rows in the segments, deletions in the delta, labels known with no node left).
const HISTORY: &[&str] = &[
    "CREATE (:Person:Manager {name: 'x'})-[:KNOWS]->(:Employee {name: 'y'}), (:Other {name: 'z'})-[:WORKS]->(:Manager)",
    "CHECKPOINT",
    "MATCH (n) DETACH DELETE n",
];

/// Checks `cases` on the graph in four states: made in a fresh database (the delta),
/// checkpointed (segments), and both again in a database that held [`HISTORY`] first.
/// Returns the last session, for plans.
fn check_everywhere(cases: &[(&str, &[&str])]) -> (tempfile::TempDir, Session) {
    let mut last = None;
    for history in [&[][..], HISTORY] {
        let d = tempfile::tempdir().unwrap();
        let mut s = open(d.path());
        for q in history {
            run(&mut s, q).unwrap();
        }
        let was = if history.is_empty() {
            "fresh"
        } else {
            "after history"
        };
        run(&mut s, GRAPH).unwrap();
        check(&mut s, cases, &format!("{was}, in the delta"));
        run(&mut s, "CHECKPOINT").unwrap();
        check(&mut s, cases, &format!("{was}, in segments"));
        last = Some((d, s));
    }
    last.expect("two states ran")
}

/// The plan of `q`, as EXPLAIN describes it.
fn plan(s: &mut Session, q: &str) -> String {
    run(s, &format!("EXPLAIN {q}")).unwrap().plan.unwrap()
}

#[test]
fn a_bound_node_is_tested_for_the_labels_a_later_pattern_names() {
    let (_d, mut s) = check_everywhere(REBOUND);
    // EXPLAIN shows the test.
    let plan = plan(&mut s, "MATCH (n:Person) MATCH (n:Employee) RETURN n.name");
    assert!(plan.contains("n:Employee"), "{plan}");
}

#[test]
fn label_expressions_match_as_neo4j_defines_them() {
    let (_d, mut s) = check_everywhere(EXPRESSIONS);
    // A disjunction is a union of label scans, not a filter over every node.
    let plan = plan(&mut s, "MATCH (n:Person|Employee) RETURN n.name");
    assert!(plan.contains("UnionNodeByLabelsScan"), "{plan}");
    assert!(!plan.contains("AllNodesScan"), "{plan}");
}

#[test]
fn where_the_second_label_never_existed_nothing_matches() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(
        &mut s,
        "CREATE (:Person {name: 'a'}), (:Person {name: 'b'})",
    )
    .unwrap();
    for state in ["in the delta", "in segments"] {
        for q in [
            "MATCH (n:Person) MATCH (n:Employee) RETURN n.name",
            "MATCH (n:Person), (n:Employee) RETURN n.name",
            "MATCH (n) WITH n MATCH (n:Person:Employee) RETURN n.name",
            "MATCH (n:Person) WHERE EXISTS { MATCH (n:Employee) } RETURN n.name",
            "MATCH (n:Person&Employee) RETURN n.name",
            "MATCH (n:Employee|Manager) RETURN n.name",
        ] {
            assert_eq!(text(&mut s, q), Vec::<String>::new(), "{state}: {q}");
        }
        assert_eq!(
            sorted(&mut s, "MATCH (n:Person|Employee) RETURN n.name"),
            ["a", "b"],
            "{state}"
        );
        assert_eq!(
            sorted(&mut s, "MATCH (n:!Employee) RETURN n.name"),
            ["a", "b"],
            "{state}"
        );
        run(&mut s, "CHECKPOINT").unwrap();
    }
}

#[test]
fn a_delete_through_a_rebound_node_deletes_only_what_matches() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    run(&mut s, GRAPH).unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let sum = run(
        &mut s,
        "MATCH (p:Person) MATCH (p:Employee) DETACH DELETE p",
    )
    .unwrap();
    assert_eq!(sum.counters.nodes_deleted, 1);
    assert_eq!(sorted(&mut s, "MATCH (n) RETURN n.name"), ["a", "c"]);
    // SET through one likewise.
    run(
        &mut s,
        "MATCH (p:Person) MATCH (p:Employee|Nobody) SET p.x = 1",
    )
    .unwrap();
    assert_eq!(
        text(&mut s, "MATCH (n) WHERE n.x = 1 RETURN n.name"),
        Vec::<String>::new()
    );
}

#[test]
fn write_patterns_refuse_what_is_not_a_set_of_labels() {
    let d = tempfile::tempdir().unwrap();
    let mut s = open(d.path());
    for q in [
        "CREATE (n:A|B)",
        "CREATE (n:!A)",
        "MERGE (n:%)",
        "CREATE ()-[:!T]->()",
        "CREATE ()-[:A|B]->()",
        "MATCH (n:A:B|C) RETURN n",
        // Neo4j's rules: `:A:B` does not mix with the symbols in one statement, and a
        // variable-length relationship takes a list of types, not an expression.
        "MATCH (n:A:B), (m:A|B) RETURN n",
        "MATCH (a)-[:!WORKS*1..2]->(b) RETURN a",
        "MATCH (a)-[:%*2]->(b) RETURN a",
        // The one `|` is the projection's: `Manager` is an unknown variable.
        "MATCH (n) WITH collect(n) AS ns RETURN [x IN ns WHERE x:Person|Manager] AS l",
    ] {
        assert!(run(&mut s, q).is_err(), "{q} should fail");
    }
    // `&` and `IS` name labels to give.
    run(&mut s, "CREATE (n:A&B), (m IS C)").unwrap();
    assert_eq!(
        sorted(&mut s, "MATCH (n) RETURN size(labels(n))"),
        ["1", "2"]
    );
    // Labels a writing statement names are known when it is planned: the MATCH
    // after the CREATE sees the new node.
    assert_eq!(
        text(
            &mut s,
            "CREATE (:D {k: 1}) WITH 1 AS x MATCH (n:D|Z) RETURN n.k"
        ),
        ["1"]
    );
}
