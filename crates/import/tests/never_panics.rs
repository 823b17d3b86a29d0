//! No input reaches a panic: random byte soup (quotes, delimiters, newlines, digits,
//! letters, invalid UTF-8) as node and relationship files, with and without
//! --skip-bad-rows, always ends in `Ok` or a typed error, and a failed import leaves no
//! database behind.

use proptest::prelude::*;
use quiver_import::{import, ImportConfig, InputGroup, NoProgress};
use quiver_storage::manifest::IdType;

fn soup() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            Just(b'"'),
            Just(b','),
            Just(b'\n'),
            Just(b'\r'),
            Just(b';'),
            Just(b'1'),
            Just(b'7'),
            Just(b'a'),
            Just(b'-'),
            Just(0xffu8),
        ],
        0..300,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]
    #[test]
    fn imports_of_garbage_end_cleanly(
        nodes in soup(),
        rels in soup(),
        header in prop_oneof![Just("id:ID,v:int,t:string[]\n"), Just("id:ID,d:date,f:float\n"), Just("")],
        skip in any::<bool>(),
        integer in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut n = header.as_bytes().to_vec();
        n.extend_from_slice(&nodes);
        let mut r = b":START_ID,:END_ID,w:int\n".to_vec();
        r.extend_from_slice(&rels);
        std::fs::write(dir.path().join("n.csv"), &n).unwrap();
        std::fs::write(dir.path().join("r.csv"), &r).unwrap();
        let mut cfg = ImportConfig::new(dir.path().join("g.qdb"));
        cfg.nodes.push(InputGroup::parse(&format!("N={}", dir.path().join("n.csv").display())).unwrap());
        cfg.relationships.push(InputGroup::parse(&format!("R={}", dir.path().join("r.csv").display())).unwrap());
        cfg.memory_budget_bytes = 32 << 20;
        cfg.threads = 2;
        cfg.skip_bad_rows = skip;
        cfg.id_type = if integer { IdType::Integer } else { IdType::String };
        match import(&cfg, &NoProgress) {
            Ok(s) => {
                prop_assert!(dir.path().join("g.qdb/CURRENT").exists());
                prop_assert_eq!(s.rows_read, s.n_nodes + s.n_rels + s.rows_rejected);
                let db = quiver_storage::Database::open(&cfg.db, quiver_storage::OpenMode::Loaded).unwrap();
                db.verify().unwrap();
            }
            Err(e) => {
                prop_assert!(!e.to_string().is_empty());
                prop_assert!(!cfg.db.exists(), "failed import left {}", cfg.db.display());
            }
        }
    }
}
