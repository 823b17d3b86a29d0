//! `UNWIND range(...)` makes its values as it goes, in constant memory, with `range()`'s
//! own rules; a `range()` made whole must fit in the query's memory.

mod common;

use common::{ints, rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;

#[test]
fn unwind_range_is_lazy_and_keeps_the_rules() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    // Past the materialized limit, at a query memory limit of 1 MiB.
    s.opts.memory_limit = 1 << 20;
    assert_eq!(
        rows(
            &mut s,
            "UNWIND range(1, 20000000) AS x RETURN count(x), sum(x)"
        )[0],
        vec![Value::Int(20_000_000), Value::Int(200_000_010_000_000)]
    );
    assert_eq!(
        ints(&mut s, "UNWIND range(1, 2000000000) AS x RETURN x LIMIT 3"),
        [1, 2, 3]
    );
    assert_eq!(
        ints(&mut s, "UNWIND range(10, 1, -3) AS x RETURN x"),
        [10, 7, 4, 1]
    );
    assert_eq!(ints(&mut s, "UNWIND range(1, 0) AS x RETURN x").len(), 0);
    assert_eq!(ints(&mut s, "UNWIND range(1, null) AS x RETURN x").len(), 0);
    assert_eq!(
        ints(
            &mut s,
            "UNWIND [1, 3] AS a UNWIND range(a, a + 1) AS x RETURN a * 10 + x"
        ),
        [11, 12, 33, 34]
    );
    let e = run(&mut s, "UNWIND range(1, 5, 0) AS x RETURN x").unwrap_err();
    assert!(e.to_string().contains("step must not be 0"), "{e}");
    let e = run(&mut s, "UNWIND range(1, 2.5) AS x RETURN x").unwrap_err();
    assert!(e.to_string().contains("integer"), "{e}");
    // Elsewhere range() is a list made whole: it must fit in the query's memory
    // (1 MiB here: 20,000,000 values do not, 10,000 do), with no count cap of its own.
    let e = run(&mut s, "RETURN size(range(1, 20000000))").unwrap_err();
    assert!(
        matches!(e, quiver_query::QueryError::Memory { .. }) && e.to_string().contains("range()"),
        "{e}"
    );
    assert_eq!(ints(&mut s, "RETURN size(range(1, 10000)) AS n"), [10_000]);
    s.opts.memory_limit = 2 << 30;
    assert_eq!(
        ints(&mut s, "WITH range(1, 12000000) AS r RETURN size(r) AS n"),
        [12_000_000]
    );
}
