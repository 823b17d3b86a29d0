//! Full-text indexes in Neo4j's syntax: `CREATE FULLTEXT INDEX ... ON EACH [...]`,
//! SHOW INDEXES, `db.index.fulltext.queryNodes` with Lucene's query syntax and BM25
//! scores, following writes and a checkpoint, DROP.

mod common;

use common::{ints, rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;

fn open(dir: &std::path::Path) -> Session {
    Session::open_with(dir, OpenMode::Mapped, true).unwrap()
}

fn hits(s: &mut Session, q: &str) -> Vec<i64> {
    ints(
        s,
        &format!(
            "CALL db.index.fulltext.queryNodes('texts', '{q}') YIELD node, score RETURN node.i"
        ),
    )
}

#[test]
fn fulltext_indexes_search_as_lucene_does() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("g.qdb");
    let mut s = open(&db);
    run(
        &mut s,
        "CREATE (:Doc {i: 1, title: 'Graph databases', body: 'A graph database stores nodes and relationships.'}),
                (:Doc {i: 2, title: 'Relational databases', body: 'Tables, rows and SQL.'}),
                (:Doc {i: 3, title: 'Vector search', body: 'An index of embeddings for graph retrieval.'}),
                (:Note {i: 4, title: 'graph graph graph', body: 'notes'}),
                (:Doc {i: 5, title: 'Cooking', body: 'Database of recipes: the graph of flavours'}),
                (:Other {i: 6, title: 'graph'})",
    )
    .unwrap();
    run(
        &mut s,
        "CREATE FULLTEXT INDEX texts IF NOT EXISTS FOR (n:Doc|Note) ON EACH [n.title, n.body]",
    )
    .unwrap();
    assert_eq!(
        rows(
            &mut s,
            "SHOW INDEXES YIELD name, type, labelsOrTypes, properties, options WHERE type = 'FULLTEXT' RETURN name, labelsOrTypes, properties, options.indexConfig.`fulltext.analyzer`"
        ),
        vec![vec![
            Value::str("texts"),
            Value::list(vec![Value::str("Doc"), Value::str("Note")]),
            Value::list(vec![Value::str("title"), Value::str("body")]),
            Value::str("standard-no-stop-words"),
        ]]
    );
    // Any term (OR), nodes of either label, not of others. Each property is a field
    // whose scores add up: in a title and a body (0.612) beats three times in a short
    // title alone (0.565), as in Lucene's multi-field query.
    let g = hits(&mut s, "graph");
    assert_eq!(g, vec![1, 4, 3, 5]);
    assert!(!g.contains(&6) && !g.contains(&2));
    // Both terms beat one.
    assert_eq!(hits(&mut s, "graph database")[0], 1);
    // Required, excluded, AND, NOT.
    assert_eq!(hits(&mut s, "+database +graph"), vec![1, 5]);
    assert_eq!(hits(&mut s, "graph -recipes -notes"), vec![1, 3]);
    assert_eq!(hits(&mut s, "graph AND retrieval"), vec![3]);
    assert_eq!(hits(&mut s, "graph NOT database NOT notes"), vec![3]);
    // A phrase only where its words are adjacent; a prefix; a field.
    assert_eq!(hits(&mut s, "\"graph database\""), vec![1]);
    assert_eq!(hits(&mut s, "embed*"), vec![3]);
    assert_eq!(hits(&mut s, "title:databases"), vec![1, 2]);
    assert!(hits(&mut s, "nothing here").is_empty());
    // Options: skip and limit.
    let all = hits(&mut s, "graph");
    let page = ints(
        &mut s,
        "CALL db.index.fulltext.queryNodes('texts', 'graph', {skip: 1, limit: 2}) YIELD node RETURN node.i",
    );
    assert_eq!(page, all[1..3].to_vec());
    // Lucene's BM25 on a one-document field: idf ln(1 + 0.5 / 1.5), tf 1 / (1 + 1.2).
    run(
        &mut s,
        "CREATE FULLTEXT INDEX solo FOR (n:Solo) ON EACH [n.t]",
    )
    .unwrap();
    run(&mut s, "CREATE (:Solo {t: 'graph'})").unwrap();
    let r = rows(
        &mut s,
        "CALL db.index.fulltext.queryNodes('solo', 'graph') YIELD score RETURN score",
    );
    let Value::Float(score) = r[0][0] else {
        panic!("{r:?}")
    };
    let want = (1.0f64 + 0.5 / 1.5).ln() / 2.2;
    assert!((score - want).abs() < 1e-9, "{score} against {want}");

    // Writes are found at once, and after a checkpoint and a reopen.
    run(
        &mut s,
        "MATCH (n:Doc {i: 2}) SET n.body = 'now about graph theory'",
    )
    .unwrap();
    run(&mut s, "MATCH (n:Doc {i: 5}) DELETE n").unwrap();
    run(&mut s, "CREATE (:Note {i: 7, body: 'graph theory again'})").unwrap();
    for round in 0..3 {
        if round == 1 {
            run(&mut s, "CHECKPOINT").unwrap();
        }
        if round == 2 {
            drop(s);
            s = open(&db);
        }
        let mut t = hits(&mut s, "\"graph theory\"");
        t.sort();
        assert_eq!(t, vec![2, 7], "round {round}");
        assert!(!hits(&mut s, "recipes").contains(&5), "round {round}");
    }
    // Errors that say what to do; DROP.
    let e = run(&mut s, "CALL db.index.fulltext.queryNodes('nope', 'x')")
        .unwrap_err()
        .to_string();
    assert!(e.contains("SHOW INDEXES"), "{e}");
    let e = run(
        &mut s,
        "CREATE FULLTEXT INDEX x FOR (n:A) ON EACH [n.t] OPTIONS {indexConfig: {`fulltext.analyzer`: 'klingon'}}",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("standard-no-stop-words"), "{e}");
    run(&mut s, "DROP INDEX texts").unwrap();
    assert!(run(
        &mut s,
        "CALL db.index.fulltext.queryNodes('texts', 'graph')"
    )
    .is_err());
}
