//! A newcomer's files: headers with no annotation at all import as they are. The node
//! id column is `id`, `<label>_id`/`<label>Id`, else the first column when relationships
//! need ids; relationship endpoints are a `src`/`dst`-like pair, else the first two
//! columns; other columns get sniffed types (codes with leading zeros stay strings).
//! Annotated headers keep Neo4j's rules exactly (an untyped column is a string).

use quiver_common::types::{DataType, ScalarType};
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_storage::read::IdKey;
use quiver_storage::{Database, Direction, OpenMode};
use std::path::Path;

fn run(
    dir: &Path,
    name: &str,
    nodes: &[(&str, &str)],
    rels: &[(&str, &str)],
) -> (Database, quiver_import::ImportSummary) {
    let mut cfg = ImportConfig::new(dir.join(format!("{name}.qdb")));
    for (spec, text) in nodes.iter().chain(rels) {
        let f = dir.join(format!("{name}-{}.csv", spec.replace(':', "_")));
        std::fs::write(&f, text).unwrap();
        let g = InputGroup::parse(&format!("{spec}={}", f.display())).unwrap();
        if nodes.iter().any(|(s, _)| s == spec) {
            cfg.nodes.push(g);
        } else {
            cfg.relationships.push(g);
        }
    }
    cfg.threads = 2;
    cfg.memory_budget_bytes = 64 << 20;
    let s = import(&cfg, &NoProgress).unwrap_or_else(|e| panic!("{name}: {e}"));
    (Database::open(&cfg.db, OpenMode::Mapped).unwrap(), s)
}

fn column_types(db: &Database) -> Vec<(String, DataType)> {
    db.node_tables()
        .iter()
        .flat_map(|t| t.footer.columns.iter().map(|c| (c.name.clone(), c.dtype)))
        .collect()
}

const LONG: DataType = DataType::Scalar(ScalarType::Long);
const STRING: DataType = DataType::Scalar(ScalarType::String);

#[test]
fn plain_headers_import_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let (db, s) = run(
        dir.path(),
        "first",
        &[("Person", "id,name,age,zip,score\n1,\"Smith, Alice\",30,00123,1.5\n2,Bob,25,10001,2\n3,Carol,,02139,\n")],
        &[("KNOWS", "src,dst,since\n1,2,2019\n2,3,2020\n3,1,2021\n")],
    );
    assert_eq!((s.n_nodes, s.n_rels), (3, 3));
    let types = column_types(&db);
    let of = |n: &str| types.iter().find(|(c, _)| c == n).map(|(_, t)| *t);
    assert_eq!(of("age"), Some(LONG));
    assert_eq!(of("zip"), Some(STRING), "leading zeros stay a string");
    assert_eq!(of("score"), Some(DataType::Scalar(ScalarType::Double)));
    let rel = &db.rel_types()[0];
    let since = rel
        .props_footer()
        .unwrap()
        .columns
        .iter()
        .find(|c| c.name == "since")
        .unwrap();
    assert_eq!(since.dtype, LONG);
    // Ids are strings of the global space, as in Neo4j's convention.
    let space = db.id_space(None).unwrap();
    let one = db.lookup_id(space, IdKey::Str(b"1")).unwrap().unwrap();
    let mut out = Vec::new();
    db.scan_edges(0, Direction::Out, |a, b, _| out.push((a, b)))
        .unwrap();
    assert!(out.contains(&(one, db.lookup_id(space, IdKey::Str(b"2")).unwrap().unwrap())));
    let (_, h) = &s.inferred_headers[0];
    assert_eq!(h, "id:ID,name,age:long,zip,score:double");
    assert_eq!(
        s.inferred_headers[1].1,
        "src:START_ID,dst:END_ID,since:long"
    );
}

#[test]
fn id_and_endpoint_rules() {
    let dir = tempfile::tempdir().unwrap();
    // `<label>Id`, a `source`/`target` pair not in front.
    let (db, s) = run(
        dir.path(),
        "named",
        &[("City", "name,cityId\nParis,7\nLyon,8\n")],
        &[("ROAD", "km,source,target\n465,7,8\n")],
    );
    assert_eq!((s.n_nodes, s.n_rels), (2, 1));
    assert_eq!(s.inferred_headers[0].1, "name,cityId:ID");
    assert_eq!(
        s.inferred_headers[1].1,
        "km:long,source:START_ID,target:END_ID"
    );
    assert!(db
        .lookup_id(db.id_space(None).unwrap(), IdKey::Str(b"8"))
        .unwrap()
        .is_some());
    // No id-like name: the first column, since relationships refer to it; endpoints the
    // first two columns.
    let (_, s) = run(
        dir.path(),
        "first-cols",
        &[("P", "code,label\na,x\nb,y\n")],
        &[("R", "left,right,w\na,b,1\n")],
    );
    assert_eq!((s.n_nodes, s.n_rels), (2, 1));
    assert_eq!(s.inferred_headers[0].1, "code:ID,label");
    // A table with no relationships keeps every row: its first column is no id.
    let (_, s) = run(dir.path(), "table", &[("T", "a,b\nx,1\nx,2\n")], &[]);
    assert_eq!(s.n_nodes, 2);
    assert_eq!(s.inferred_headers[0].1, "a,b:long");
}

#[test]
fn annotated_headers_keep_neo4js_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (db, s) = run(dir.path(), "annotated", &[("P", "id:ID,age\n1,30\n")], &[]);
    assert!(s.inferred_headers.is_empty());
    let types = column_types(&db);
    assert_eq!(
        types.iter().find(|(c, _)| c == "age").map(|(_, t)| *t),
        Some(STRING)
    );
}

#[test]
fn named_columns_and_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("p.csv"), "person_no,name,id\n1,A,x\n2,B,y\n").unwrap();
    std::fs::write(d.join("r.csv"), "a,b,c\n1,2,3\n").unwrap();
    let mut cfg = ImportConfig::new(d.join("g.qdb"));
    cfg.nodes
        .push(InputGroup::parse(&format!("Person={}", d.join("p.csv").display())).unwrap());
    cfg.relationships
        .push(InputGroup::parse(&format!("R={}", d.join("r.csv").display())).unwrap());
    cfg.threads = 2;
    // Named columns win over the rules (`id` here is not the id).
    cfg.id_columns = vec![("Person".into(), "person_no".into())];
    cfg.start_columns = vec![("R".into(), "b".into())];
    cfg.end_columns = vec![("R".into(), "a".into())];
    let seen = quiver_import::describe(&cfg).unwrap();
    assert_eq!(seen[0].1, "person_no:ID,name,id");
    assert_eq!(seen[1].1, "a:END_ID,b:START_ID,c:long");
    assert!(seen.iter().all(|(_, _, plain)| *plain));
    assert!(!cfg.db.exists(), "a dry run writes nothing");
    let s = import(&cfg, &NoProgress).unwrap();
    assert_eq!((s.n_nodes, s.n_rels), (2, 1));
    let db = Database::open(&cfg.db, OpenMode::Mapped).unwrap();
    let space = db.id_space(None).unwrap();
    let (one, two) = (
        db.lookup_id(space, IdKey::Str(b"1")).unwrap().unwrap(),
        db.lookup_id(space, IdKey::Str(b"2")).unwrap().unwrap(),
    );
    let mut out = Vec::new();
    db.scan_edges(0, Direction::Out, |a, b, _| out.push((a, b)))
        .unwrap();
    assert_eq!(out, vec![(two, one)]);
    // A column the header lacks, and a named column on an annotated header, are errors.
    cfg.db = d.join("bad.qdb");
    cfg.id_columns = vec![("Person".into(), "nope".into())];
    let e = import(&cfg, &NoProgress).unwrap_err().to_string();
    assert!(e.contains("--id-column names column `nope`"), "{e}");
    std::fs::write(d.join("p.csv"), "person_no:ID,name\n1,A\n").unwrap();
    cfg.id_columns = vec![("Person".into(), "person_no".into())];
    let e = import(&cfg, &NoProgress).unwrap_err().to_string();
    assert!(e.contains("this header is annotated"), "{e}");
}
