//! The bodies of the fuzz targets (issue "Hardening"). Each takes arbitrary bytes and
//! must return without panicking, without unbounded allocation, whatever they are.
//! `fuzz/` wraps each in a cargo-fuzz (libFuzzer) target; `tests/replay.rs` runs every
//! file of `fuzz/corpus/<target>/` through the same function in CI, so an input that
//! once crashed stays fixed.
//!
//! **Invariant:** a target checks properties, not only "no panic", where it can (an
//! import that succeeds must verify; a tokenizer must not read past its input).

use quiver_csv::split::split_records;
use quiver_csv::tokenize::{Fields, Tokenizer};
use quiver_csv::Dialect;
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_storage::manifest::IdType;
use quiver_storage::{Database, OpenMode};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The targets by name, as in `fuzz/fuzz_targets/` and `fuzz/corpus/`.
pub const TARGETS: [(&str, fn(&[u8])); 5] = [
    ("bolt_messages", bolt_messages),
    ("csv_split_tokenize", csv_split_tokenize),
    ("cypher_parse", cypher_parse),
    ("import_bytes", import_bytes),
    ("query_exec", query_exec),
];

/// The CSV splitter (parallel quote parity) and the tokenizer over each chunk: the
/// chunks tile the window, and every field lies inside its chunk.
pub fn csv_split_tokenize(data: &[u8]) {
    let (quote, chunk) = match data.first() {
        Some(b) => (
            if b & 1 == 0 { Some(b'"') } else { None },
            1 + (*b as usize >> 1),
        ),
        None => (Some(b'"'), 1),
    };
    let body = data.get(1..).unwrap_or(&[]);
    let (ends, _) = split_records(body, chunk, quote, true);
    let dialect = Dialect {
        quote,
        ..Dialect::default()
    };
    let mut start = 0;
    for &end in &ends {
        assert!(start <= end && end <= body.len(), "chunks do not tile");
        let piece = &body[start..end];
        let mut t = Tokenizer::new(piece, &dialect);
        let mut fields = Fields::default();
        let mut records = 0usize;
        while let Ok(Some(_)) = t.next_record(&mut fields) {
            for i in 0..fields.len() {
                let _ = fields.get(piece, i);
            }
            records += 1;
            assert!(records <= piece.len() + 1, "more records than bytes");
        }
        start = end;
    }
}

/// Bolt's input path on any bytes: chunked messages taken out of what arrived under
/// a size cap (`take_message`, as the server does), each decoded from PackStream. A
/// value that decodes encodes back to bytes that decode to it, and nothing is
/// allocated beyond what the input could hold.
pub fn bolt_messages(data: &[u8]) {
    use quiver_bolt::packstream::{decode, encode};
    use quiver_bolt::server::take_message;
    let mut at = 0;
    while let Ok(Some((msg, used))) = take_message(&data[at..], 1 << 16) {
        assert!(
            used > 0 && at + used <= data.len(),
            "a message takes its bytes"
        );
        at += used;
        assert!(msg.len() <= 1 << 16);
        if let Ok(v) = decode(&msg) {
            let mut again = Vec::new();
            encode(&v, &mut again);
            // Floats with NaN payloads compare unequal; compare the encodings instead.
            let back = decode(&again).expect("an encoding decodes");
            let mut twice = Vec::new();
            encode(&back, &mut twice);
            assert_eq!(again, twice);
        }
    }
    // The whole input as one value, too.
    let _ = decode(data);
}

/// The Cypher parser on any text: a tree or a positioned error.
pub fn cypher_parse(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = quiver_cypher::parse(&text) {
        assert!(!e.message.is_empty());
    }
}

/// A whole import of the bytes as a nodes file (the first byte picks the header and
/// options) under the smallest budget: a clean error, or a database that verifies.
pub fn import_bytes(data: &[u8]) {
    let Some((&opts, body)) = data.split_first() else {
        return;
    };
    let headers: [&[u8]; 4] = [
        b"id:ID,v:int,t:string[]\n",
        b"id:ID,d:date,f:float\n",
        b"id:ID(A),:LABEL,x:datetime,b:boolean\n",
        b"",
    ];
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut file = headers[opts as usize % 4].to_vec();
    file.extend_from_slice(body);
    let path = dir.path().join("n.csv");
    std::fs::write(&path, &file).expect("writing the input");
    let mut cfg = ImportConfig::new(dir.path().join("g.qdb"));
    cfg.nodes
        .push(InputGroup::parse(&format!("N={}", path.display())).expect("group"));
    cfg.memory_budget_bytes = quiver_common::limits::IMPORT_BUDGET_BYTES_MIN;
    cfg.threads = 1;
    cfg.skip_bad_rows = opts & 4 != 0;
    cfg.id_type = if opts & 8 != 0 {
        IdType::Integer
    } else {
        IdType::String
    };
    match import(&cfg, &NoProgress) {
        Ok(s) => {
            assert_eq!(s.rows_read, s.n_nodes + s.rows_rejected);
            let db = Database::open(&cfg.db, OpenMode::Loaded).expect("a published import opens");
            db.verify().expect("a published import verifies");
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            assert!(!cfg.db.exists(), "a failed import left a database");
        }
    }
}

/// A small database the query target runs against (built once per process).
fn query_db() -> &'static Database {
    static DB: OnceLock<(tempfile::TempDir, Database)> = OnceLock::new();
    &DB.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut nodes = String::from("id:ID,:LABEL,v:int,s\n");
        for i in 0..40 {
            nodes += &format!("{i},{},{},s{}\n", ["A", "B"][i % 2], i % 7, i % 3);
        }
        let mut edges = String::from(":START_ID,:END_ID,:TYPE,w:int\n");
        for i in 0..120 {
            edges += &format!(
                "{},{},{},{i}\n",
                i % 40,
                (i * 7 + 3) % 40,
                ["R", "S"][i % 2]
            );
        }
        std::fs::write(dir.path().join("n.csv"), nodes).expect("nodes");
        std::fs::write(dir.path().join("e.csv"), edges).expect("edges");
        let mut cfg = ImportConfig::new(dir.path().join("g.qdb"));
        cfg.nodes.push(
            InputGroup::parse(&dir.path().join("n.csv").display().to_string()).expect("group"),
        );
        cfg.relationships.push(
            InputGroup::parse(&dir.path().join("e.csv").display().to_string()).expect("group"),
        );
        cfg.id_type = IdType::Integer;
        cfg.threads = 1;
        import(&cfg, &NoProgress).expect("the query target's database");
        let db = Database::open(&cfg.db, OpenMode::Mapped).expect("open");
        (dir, db)
    })
    .1
}

/// A read query of any text against a small graph, under a small per-query memory
/// limit: rows or an error, never a panic or a runaway.
pub fn query_exec(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let opts = quiver_query::QueryOptions {
        memory_limit: 16 << 20,
        ..Default::default()
    };
    static INDEXES: OnceLock<quiver_query::index::IndexSet> = OnceLock::new();
    let db = query_db();
    let indexes = INDEXES.get_or_init(|| quiver_query::index::IndexSet::load(db));
    let _ = quiver_query::run(db, indexes, &text, &BTreeMap::new(), &opts, &mut |_, _| {
        Ok(())
    });
}
