//! Deep expressions: no query text reaches unbounded recursion (issue "Hardening").
//! Left-associative chains past the parser's tree-depth limit are a parse error with a
//! line and column; chains just under it go through binding, planning, evaluation and
//! `Drop` on a thread with Rust's default 2 MiB stack.

mod common;

use common::{rows, run};
use quiver_cypher::parse::TREE_DEPTH_MAX;
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;

/// Runs `f` on a thread with a 2 MiB stack, the default for threads Rust spawns (a
/// server's worker threads, the shell's query thread).
fn small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .expect("the query thread died (stack overflow aborts the process instead)")
}

fn session() -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().unwrap();
    let s = Session::open_with(&dir.path().join("db"), OpenMode::Mapped, true).unwrap();
    (dir, s)
}

fn chain(term: &str, op: &str, n: usize) -> String {
    vec![term; n].join(op)
}

#[test]
fn chains_past_the_limit_are_parse_errors_with_a_position() {
    let n = 200_000;
    let cases = [
        format!("RETURN {}", chain("1", "+", n)),
        format!("RETURN {}", chain("true", " OR ", n)),
        format!("RETURN {}", chain("true", " AND ", n)),
        format!("RETURN {}", chain("2", "*", n)),
        format!("RETURN {}", chain("1", " = ", n)),
        format!("RETURN {{a: 1}}{}", ".a".repeat(n)),
        format!("RETURN [1]{}", "[0]".repeat(n)),
        format!("RETURN 1{}", " IS NULL".repeat(n)),
        format!("RETURN 'a'{}", " STARTS WITH 'a'".repeat(n)),
        format!("RETURN {}", chain("1", "+\n", n)),
    ];
    for q in cases {
        let text = q.clone();
        let e = small_stack(move || quiver_cypher::parse(&text).map(|_| ()))
            .expect_err("a 200,000-link chain must be refused");
        let msg = e.to_string();
        assert!(msg.contains("deeper than"), "{msg}");
        assert!(msg.contains("line") && msg.contains("column"), "{msg}");
    }
}

#[test]
fn chains_under_the_limit_run_on_a_small_stack() {
    // Each case is under TREE_DEPTH_MAX with room for the RETURN's own nesting.
    let n = TREE_DEPTH_MAX - 50;
    let (_d, s) = session();
    let out = small_stack(move || {
        let mut s = s;
        let mut got = Vec::new();
        let qs = [
            format!("RETURN {} AS x", chain("1", "+", n)),
            format!("RETURN {} AS x", chain("false", " OR ", n - 1) + " OR true"),
            format!("WITH [1] AS l RETURN l{}[0] AS x", "[0..1]".repeat(n / 2)),
            format!(
                "WITH {{a: 5}} AS m RETURN m{} AS x",
                ".a".repeat(1) + &" + m.a".repeat(n / 2)
            ),
            // Deep chains inside nested parentheses.
            format!(
                "RETURN {}{}{} AS x",
                "(".repeat(100),
                chain("1", "-", n - 400),
                ")".repeat(100)
            ),
            // A deep predicate pushed into a scan's filter.
            format!(
                "UNWIND range(1, 3) AS i WITH i WHERE {} RETURN count(*) AS x",
                chain("i > 0", " AND ", n / 4)
            ),
        ];
        for q in &qs {
            got.push(rows(&mut s, q));
        }
        // EXPLAIN prints the tree: that recursion is bounded too.
        run(
            &mut s,
            &format!("EXPLAIN RETURN {} AS x", chain("1", "+", n)),
        )
        .unwrap();
        got
    });
    let n = (TREE_DEPTH_MAX - 50) as i64;
    assert_eq!(out[0], vec![vec![Value::Int(n)]]);
    assert_eq!(out[1], vec![vec![Value::Bool(true)]]);
    assert_eq!(out[2], vec![vec![Value::Int(1)]]);
    assert_eq!(out[3], vec![vec![Value::Int(5 + 5 * (n / 2))]]);
    assert_eq!(out[4], vec![vec![Value::Int(1 - (n - 401))]]);
    assert_eq!(out[5], vec![vec![Value::Int(3)]]);
}
