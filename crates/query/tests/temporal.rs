//! Temporal values built by Cypher are validated on `jiff`'s calendar (issue
//! "Hardening"): no silent wrapping, invalid dates refused, time zones converted.

mod common;

use common::{rows, run};
use quiver_query::{Session, Value};
use quiver_storage::OpenMode;

fn session() -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().unwrap();
    let s = Session::open_with(&dir.path().join("db"), OpenMode::Mapped, true).unwrap();
    (dir, s)
}

fn text(s: &mut Session, expr: &str) -> String {
    match &rows(s, &format!("RETURN toString({expr}) AS x"))[0][0] {
        Value::Str(t) => t.to_string(),
        v => panic!("{expr}: {v:?}"),
    }
}

fn error(s: &mut Session, expr: &str) -> String {
    match run(s, &format!("RETURN {expr} AS x")) {
        Ok(_) => panic!("{expr} should fail"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn out_of_range_fields_are_errors_not_wrapped() {
    let (_d, mut s) = session();
    // The reproduction: this returned 2020-01-01T00:00:00Z.
    let e = error(&mut s, "datetime({year: 2020, hour: 4611686018427387904})");
    assert!(e.contains("hour") && e.contains("out of range"), "{e}");
    // February 31st used to roll over into March.
    let e = error(&mut s, "date({year: 2021, month: 2, day: 31})");
    assert!(e.contains("day"), "{e}");
    for bad in [
        "date({year: 2021, month: 13})",
        "date({year: 2021, month: 0})",
        "date({year: 10000})",
        "date({year: -10000})",
        "date({month: 3})",
        "date({year: 2021, hour: 3})",
        "date({year: 2021, week: 54})",
        "date({year: 2021, ordinalDay: 366})",
        "date({year: 2021, month: 2, week: 3})",
        "date({year: 2021, weeks: 3})",
        "localdatetime({year: 2021, minute: 60})",
        "localdatetime({year: 2021, second: -1})",
        "localdatetime({year: 2021, millisecond: 5, microsecond: 1000})",
        "localdatetime({year: 2021, nanosecond: 1})",
        "localdatetime({year: 2021, timezone: 'UTC'})",
        "datetime({year: 2021, timezone: 'Nowhere/Atlantis'})",
        "datetime({year: 2021, timezone: 5})",
        "date('2021-02-29')",
        "date('2021-13-01')",
        "datetime('2021-01-01T24:00')",
    ] {
        error(&mut s, bad);
    }
}

#[test]
fn valid_maps_build_the_right_values() {
    let (_d, mut s) = session();
    let cases = [
        ("date({year: 2020, month: 2, day: 29})", "2020-02-29"),
        ("date({year: 2021})", "2021-01-01"),
        ("date({year: 2015, week: 30, dayOfWeek: 2})", "2015-07-21"),
        ("date({year: 2015, ordinalDay: 202})", "2015-07-21"),
        ("date({year: 2020, ordinalDay: 366})", "2020-12-31"),
        ("date({year: -44, month: 3, day: 15})", "-0044-03-15"),
        ("date({year: 9999, month: 12, day: 31})", "9999-12-31"),
        (
            "localdatetime({year: 2020, hour: 23, minute: 59, second: 59, microsecond: 999999})",
            "2020-01-01T23:59:59.999999",
        ),
        (
            "localdatetime({year: 2020, millisecond: 5, microsecond: 7, nanosecond: 0})",
            "2020-01-01T00:00:00.005007",
        ),
        (
            "datetime({year: 2020, month: 7, day: 1, hour: 12, timezone: 'Europe/Berlin'})",
            "2020-07-01T10:00:00Z",
        ),
        (
            "datetime({year: 2020, month: 1, day: 1, hour: 12, timezone: 'Europe/Berlin'})",
            "2020-01-01T11:00:00Z",
        ),
        (
            "datetime({year: 2020, month: 7, day: 1, hour: 12, timezone: '+05:30'})",
            "2020-07-01T06:30:00Z",
        ),
        (
            "datetime('2024-07-01T12:00-04:00[America/New_York]')",
            "2024-07-01T16:00:00Z",
        ),
        (
            "datetime('2024-07-01T12:00:00+02:00')",
            "2024-07-01T10:00:00Z",
        ),
    ];
    for (expr, want) in cases {
        assert_eq!(text(&mut s, expr), want, "{expr}");
    }
}

/// Every date the calendar allows is written in a form `date()` reads back, including
/// years before 1000 and before year 0.
#[test]
fn written_dates_read_back() {
    let (_d, mut s) = session();
    for (y, m, d) in [
        (-9999, 1, 1),
        (-1, 12, 31),
        (0, 2, 29),
        (999, 5, 6),
        (9999, 12, 31),
    ] {
        let built = text(
            &mut s,
            &format!("date({{year: {y}, month: {m}, day: {d}}})"),
        );
        let back = text(&mut s, &format!("date('{built}')"));
        assert_eq!(built, back);
        let dt = text(
            &mut s,
            &format!("localdatetime({{year: {y}, month: {m}, day: {d}, hour: 7}})"),
        );
        assert_eq!(text(&mut s, &format!("localdatetime('{dt}')")), dt);
    }
}
