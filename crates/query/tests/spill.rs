//! A full ORDER BY past its memory limit spills sorted runs to the temporary directory
//! and merges them: the same rows, in the same order (ties in input order), as without
//! a limit.

mod common;

use common::{rows, run};
use quiver_query::Session;
use quiver_storage::OpenMode;

#[test]
fn a_sort_past_its_limit_spills_and_answers_the_same() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    // Keys with many ties, nulls, strings and lists; rows carrying nodes and maps.
    run(
        &mut s,
        "UNWIND range(1, 60000) AS i CREATE (:T {k: CASE WHEN i % 11 = 0 THEN null ELSE (i * 7919) % 1000 END, s: toString(i % 37), i: i, l: [i % 3, 'x']})",
    )
    .unwrap();
    run(&mut s, "CHECKPOINT").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    s.opts.temp_dir = Some(tmp.path().to_path_buf());
    for q in [
        "MATCH (t:T) RETURN t.k, t.s, t.i, t ORDER BY t.k DESC, t.s",
        "MATCH (t:T) RETURN t.i, {k: t.k, l: t.l} AS m ORDER BY t.l, t.s DESC SKIP 17 LIMIT 70000",
        "MATCH (t:T) WITH t ORDER BY t.s, t.k RETURN t.i, id(t)",
    ] {
        s.opts.memory_limit = 1 << 40;
        let want = rows(&mut s, q);
        s.opts.memory_limit = 1 << 20;
        let got = rows(&mut s, q);
        assert_eq!(got.len(), want.len(), "{q}");
        assert!(got == want, "{q}: the spilled sort differs");
    }
    // Without a temporary directory the limit is an error, as before.
    s.opts.temp_dir = None;
    s.opts.memory_limit = 1 << 20;
    let e = run(&mut s, "MATCH (t:T) RETURN t.i ORDER BY t.s").unwrap_err();
    assert!(e.to_string().contains("Sort"), "{e}");
    // The runs were unnamed temporary files: nothing is left behind.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}
