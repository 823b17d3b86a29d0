//! Neo4j 5's functions that Quiver added after the TCK's (which has none of them):
//! each against the value Neo4j's manual gives, written as a literal (`RETURN <call>`
//! equals `RETURN <literal>`), nulls through, and errors where Neo4j raises them.

mod common;

use common::{rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;

fn one(s: &mut Session, q: &str) -> Value {
    let r = rows(s, q);
    assert_eq!(r.len(), 1, "{q}");
    r[0][0].clone()
}

#[test]
fn neo4j_5_functions_give_the_manuals_values() {
    let d = tempfile::tempdir().unwrap();
    let mut s = Session::open_with(&d.path().join("g.qdb"), OpenMode::Mapped, true).unwrap();
    let cases = [
        // Trigonometry.
        ("acos(1)", "0.0"),
        ("asin(0)", "0.0"),
        ("atan(0)", "0.0"),
        ("atan2(0, 1)", "0.0"),
        ("cos(0)", "1.0"),
        ("round(cot(pi() / 4), 10)", "1.0"),
        ("degrees(pi())", "180.0"),
        ("radians(180) = pi()", "true"),
        ("haversin(pi())", "1.0"),
        ("sin(0)", "0.0"),
        ("tan(0)", "0.0"),
        ("cos(null)", "null"),
        // Numbers.
        ("isNaN(0.0 / 0.0)", "true"),
        ("isNaN(1)", "false"),
        ("round(1.25, 1, 'HALF_EVEN')", "1.2"),
        ("round(-1.25, 1, 'HALF_UP')", "-1.3"),
        ("round(-1.25, 1, 'HALF_DOWN')", "-1.2"),
        ("round(1.21, 1, 'UP')", "1.3"),
        ("round(-1.29, 1, 'DOWN')", "-1.2"),
        ("round(-1.21, 1, 'CEILING')", "-1.2"),
        ("round(-1.21, 1, 'FLOOR')", "-1.3"),
        // Strings.
        ("lower('ABC')", "'abc'"),
        ("upper('abc')", "'ABC'"),
        ("char_length('héllo')", "5"),
        ("character_length('abc')", "3"),
        ("btrim('  a  ')", "'a'"),
        ("btrim('xxaxx', 'x')", "'a'"),
        ("ltrim('xxaxx', 'x')", "'axx'"),
        ("rtrim('xxaxx', 'x')", "'xxa'"),
        ("ltrim(null)", "null"),
        ("normalize('\\u0041\\u030A') = '\\u00C5'", "true"),
        ("normalize('\\u00C5', NFD) = '\\u0041\\u030A'", "true"),
        ("normalize('\\uFB01', 'NFKC')", "'fi'"),
        // Scalars.
        ("nullIf(4, 4)", "null"),
        ("nullIf('a', 'b')", "'a'"),
        ("size(randomUUID())", "36"),
        ("valueType(1)", "'INTEGER NOT NULL'"),
        ("valueType(null)", "'NULL'"),
        ("valueType('a')", "'STRING NOT NULL'"),
        ("valueType([1, 2])", "'LIST<INTEGER NOT NULL> NOT NULL'"),
        (
            "valueType([1, 'a'])",
            "'LIST<STRING NOT NULL | INTEGER NOT NULL> NOT NULL'",
        ),
        ("valueType([1, null])", "'LIST<INTEGER> NOT NULL'"),
        ("valueType([])", "'LIST<NOTHING> NOT NULL'"),
        ("valueType(date('2020-01-01'))", "'DATE NOT NULL'"),
        (
            "valueType(datetime('2020-01-01T00:00Z'))",
            "'ZONED DATETIME NOT NULL'",
        ),
        ("valueType({a: 1})", "'MAP NOT NULL'"),
        ("toBooleanOrNull('x')", "null"),
        ("toBooleanOrNull('true')", "true"),
        ("toFloatOrNull([1])", "null"),
        ("toIntegerOrNull('42')", "42"),
        ("toIntegerOrNull({a: 1})", "null"),
        ("toStringOrNull([1])", "null"),
        ("toStringOrNull(1.5)", "'1.5'"),
        // Lists.
        (
            "toBooleanList(['true', 'x', null, 0])",
            "[true, null, null, false]",
        ),
        ("toFloatList(['1.5', 2, 'x'])", "[1.5, 2.0, null]"),
        ("toIntegerList(['1', 2.7, 'x'])", "[1, 2, null]"),
        (
            "toStringList([1, 2.5, true, [1]])",
            "['1', '2.5', 'true', null]",
        ),
        ("toIntegerList(null)", "null"),
        // Vectors: Neo4j's scores in [0, 1].
        ("vector.similarity.cosine([1.0, 0.0], [0.0, 1.0])", "0.5"),
        ("vector.similarity.cosine([1, 1], [2, 2])", "1.0"),
        ("vector.similarity.euclidean([0, 0], [1, 1])", "1.0 / 3"),
        ("vector.similarity.cosine(null, [1])", "null"),
    ];
    for (call, want) in cases {
        let got = one(&mut s, &format!("RETURN {call} AS v"));
        let want_v = one(&mut s, &format!("RETURN {want} AS v"));
        match (&got, &want_v) {
            (Value::Float(a), Value::Float(b)) => {
                assert!((a - b).abs() < 1e-12, "{call}: {a} against {b}")
            }
            _ => assert_eq!(got, want_v, "{call}"),
        }
    }
    // stDevP: the population's deviation, beside stDev (the sample's).
    assert_eq!(
        one(
            &mut s,
            "UNWIND [2, 4, 4, 4, 5, 5, 7, 9] AS x RETURN stDevP(x)"
        ),
        Value::Float(2.0)
    );
    // Errors where Neo4j raises them.
    for bad in [
        "RETURN round(1.5, 0, 'SIDEWAYS')",
        "RETURN normalize('a', 'NFX')",
        "RETURN toIntegerList(1)",
        "RETURN vector.similarity.cosine([1, 2], [1])",
        "RETURN char_length(1)",
        "RETURN cos('a')",
    ] {
        assert!(run(&mut s, bad).is_err(), "{bad} should fail");
    }
}
