//! Temporal values built by Cypher are validated on `jiff`'s calendar (issue
//! "Hardening"): no silent wrapping, invalid dates refused, time zones kept. Durations,
//! arithmetic, `duration.between` and truncation follow Cypher's rules (issue
//! "Conformance"), and every temporal type survives the log, a checkpoint and a reopen.

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
    let e = error(
        &mut s,
        "datetime({year: 2020, month: 1, day: 1, hour: 4611686018427387904})",
    );
    assert!(e.contains("hour") && e.contains("out of range"), "{e}");
    // February 31st used to roll over into March.
    let e = error(&mut s, "date({year: 2021, month: 2, day: 31})");
    assert!(e.contains("day"), "{e}");
    for bad in [
        "date({year: 2021, month: 13})",
        "date({year: 2021, month: 0})",
        "date({year: 1000000000})",
        "date({year: -1000000000})",
        "date({month: 3})",
        "date({year: 2021, hour: 3})",
        // Fields without the ones before them (Neo4j refuses these too).
        "localdatetime({year: 2021, nanosecond: 1})",
        "localtime({hour: 1, second: 3})",
        "date({year: 2000, day: 3})",
        "localdatetime({year: 2000, month: 3, hour: 1})",
        // Past Neo4j's range, and a date where a time is needed.
        "date('+1000000000-01-01')",
        "date({year: -1000000000, month: 1, day: 1})",
        "date('+999999999-12-31') + duration({days: 1})",
        "localdatetime(date('2015-07-21'))",
        "date.truncate('hour', datetime('2015-07-21T10:00Z'))",
        "date({year: 2021, week: 54})",
        "date({year: 2021, ordinalDay: 366})",
        "date({year: 2021, month: 2, week: 3})",
        "date({year: 2021, weeks: 3})",
        "localdatetime({year: 2021, minute: 60})",
        "localdatetime({year: 2021, second: -1})",
        "localdatetime({year: 2021, millisecond: 5, microsecond: 1000})",
        "localdatetime({year: 2021, nanosecond: 1000000000})",
        "localdatetime({year: 2021, millisecond: 1, nanosecond: 1000})",
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
            "localdatetime({year: 2020, month: 1, day: 1, hour: 23, minute: 59, second: 59, microsecond: 999999})",
            "2020-01-01T23:59:59.999999",
        ),
        (
            "localdatetime({year: 2020, month: 1, day: 1, hour: 0, minute: 0, second: 0, millisecond: 5, microsecond: 7, nanosecond: 0})",
            "2020-01-01T00:00:00.005007",
        ),
        (
            "localdatetime({year: 2021, ordinalDay: 1, hour: 0, minute: 0, second: 0, nanosecond: 1})",
            "2021-01-01T00:00:00.000000001",
        ),
        // Years past jiff's ±9999, to Neo4j's ends.
        ("date({year: -999999999, month: 1, day: 1})", "-999999999-01-01"),
        ("date('+999999999-12-31')", "+999999999-12-31"),
        ("date({year: 10000, week: 1, dayOfWeek: 1})", "+10000-01-03"),
        // A map's week 53 of a 52-week year is the next year's first week, as Neo4j reads it.
        ("date({year: 2016, week: 53, dayOfWeek: 1})", "2017-01-02"),
        (
            "datetime('+999999999-06-30T12:00[Europe/Stockholm]')",
            "+999999999-06-30T12:00:00+02:00[Europe/Stockholm]",
        ),
        ("date.truncate('decade', date('-0005-06-07'))", "0000-01-01"),
        (
            "datetime({year: 2020, month: 7, day: 1, hour: 12, timezone: 'Europe/Berlin'})",
            "2020-07-01T12:00:00+02:00[Europe/Berlin]",
        ),
        (
            "datetime({year: 2020, month: 1, day: 1, hour: 12, timezone: 'Europe/Berlin'})",
            "2020-01-01T12:00:00+01:00[Europe/Berlin]",
        ),
        (
            "datetime({year: 2020, month: 7, day: 1, hour: 12, timezone: '+05:30'})",
            "2020-07-01T12:00:00+05:30",
        ),
        (
            "datetime('2024-07-01T12:00-04:00[America/New_York]')",
            "2024-07-01T12:00:00-04:00[America/New_York]",
        ),
        ("datetime('2024-07-01T12:00:00+02:00')", "2024-07-01T12:00:00+02:00"),
        (
            "datetime({datetime: datetime('2024-07-01T12:00+02:00'), timezone: 'Z'})",
            "2024-07-01T10:00:00Z",
        ),
        ("time('21:40:32.142+0100')", "21:40:32.142+01:00"),
        ("localtime({hour: 7, minute: 5})", "07:05:00"),
        ("date({year: 1984, quarter: 3, dayOfQuarter: 45})", "1984-08-14"),
        // Spring forward: 02:30 does not exist in Berlin on 2024-03-31 and moves on.
        (
            "datetime({year: 2024, month: 3, day: 31, hour: 2, minute: 30, timezone: 'Europe/Berlin'})",
            "2024-03-31T03:30:00+02:00[Europe/Berlin]",
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

#[test]
fn durations_arithmetic_and_between() {
    let (_d, mut s) = session();
    let cases = [
        ("duration({days: 1.5})", "P1DT12H"),
        ("duration({months: 0.75})", "P22DT19H51M49.5S"),
        ("duration('P1Y2M3W4DT5H6M7.25S')", "P1Y2M25DT5H6M7.25S"),
        ("duration('PT-1.5S')", "PT-1.5S"),
        ("duration({seconds: -1, nanoseconds: 1})", "PT-0.999999999S"),
        ("duration({hours: 30}) * 2", "PT60H"),
        ("duration({months: 3}) / 2", "P1M15DT5H14M33S"),
        ("duration({days: 1}) - duration({hours: 1})", "P1DT-1H"),
        ("date('2024-01-31') + duration({months: 1})", "2024-02-29"),
        ("date('2024-03-01') - duration({days: 1, hours: 25})", "2024-02-28"),
        ("localtime('23:00') + duration({hours: 2})", "01:00:00"),
        (
            "datetime('2024-03-30T12:00+01:00[Europe/Berlin]') + duration({days: 1})",
            "2024-03-31T12:00:00+02:00[Europe/Berlin]",
        ),
        (
            "datetime('2024-03-30T12:00+01:00[Europe/Berlin]') + duration({hours: 24})",
            "2024-03-31T13:00:00+02:00[Europe/Berlin]",
        ),
        ("duration.between(date('1984-10-11'), date('2015-06-24'))", "P30Y8M13D"),
        (
            "duration.between(localdatetime('2015-07-21T21:40:32.142'), date('2015-06-24'))",
            "P-27DT-21H-40M-32.142S",
        ),
        (
            "duration.inSeconds(datetime('2024-03-31T00:00[Europe/Berlin]'), datetime('2024-04-01T00:00[Europe/Berlin]'))",
            "PT23H",
        ),
        ("duration.inDays(date('2020-01-01'), date('2021-01-01'))", "P366D"),
        ("duration.between(time('14:30'), time('16:30+01:00'))", "PT1H"),
        (
            "datetime.truncate('week', datetime('2024-07-04T12:34:56.789+02:00'))",
            "2024-07-01T00:00:00+02:00",
        ),
        (
            "localtime.truncate('millisecond', localtime('12:31:14.645876123'), {nanosecond: 2})",
            "12:31:14.645000002",
        ),
        ("date.truncate('weekYear', date('2021-01-01'))", "2019-12-30"),
        ("datetime.fromepoch(416779, 999999999)", "1970-01-05T19:46:19.999999999Z"),
        ("datetime.fromepochmillis(237821673987)", "1977-07-15T13:34:33.987Z"),
    ];
    for (expr, want) in cases {
        assert_eq!(text(&mut s, expr), want, "{expr}");
    }
    let field = |s: &mut Session, e: &str| rows(s, &format!("RETURN {e} AS x"))[0][0].clone();
    assert_eq!(
        field(
            &mut s,
            "duration({hours: 1, minutes: 1, seconds: 1}).minutes"
        ),
        Value::Int(61)
    );
    assert_eq!(
        field(
            &mut s,
            "datetime('2024-07-01T12:00+02:00[Europe/Berlin]').timezone"
        ),
        Value::str("Europe/Berlin")
    );
    assert_eq!(
        field(&mut s, "date('2021-01-03').weekYear"),
        Value::Int(2020)
    );
    // Durations do not order; times compare by instant.
    assert_eq!(
        field(&mut s, "duration('P1D') < duration('P2D')"),
        Value::Null
    );
    assert_eq!(
        field(&mut s, "time('10:00+01:00') = time('09:00Z')"),
        Value::Bool(true)
    );
    // One statement reads one clock.
    assert_eq!(
        text(&mut s, "duration.inSeconds(datetime(), datetime())"),
        "PT0S"
    );
}

/// Each temporal type written by a transaction reads back the same from the log
/// (reopen before a checkpoint) and from the segments and op file (after one):
/// nanoseconds, offsets and zone names included.
#[test]
fn every_temporal_type_survives_the_log_and_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let values = [
        "date('2024-02-29')",
        "localtime('12:31:14.645876123')",
        "time('12:31:14.000000001+05:45')",
        "localdatetime('1984-10-11T12:31:14.645876123')",
        "localdatetime('1984-10-11T12:31:14.645876')",
        "datetime('2015-07-21T21:40:32.142+01:00[Europe/London]')",
        "datetime('2015-07-21T21:40:32.142-04:00')",
        "datetime('2015-07-21T21:40:32.142Z')",
        "duration('P1Y2M3DT4H5M6.000000007S')",
        "[date('2024-01-01'), date('2024-01-02')]",
    ];
    // Text of a value; the list (the last value) element by element.
    let last = values.len() - 1;
    let show = |i: usize, v: &str| {
        if i == last {
            format!("reduce(t = '', x IN {v} | t + toString(x) + ' ')")
        } else {
            v.to_string()
        }
    };
    let want: Vec<String> = {
        let (_d, mut s) = session();
        values
            .iter()
            .enumerate()
            .map(|(i, v)| text(&mut s, &show(i, v)))
            .collect()
    };
    let read = |s: &mut Session| -> Vec<String> {
        (0..values.len())
            .map(|i| {
                let q = format!(
                    "MATCH (n:T {{i: {i}}}) RETURN toString({}) AS x",
                    show(i, "n.v")
                );
                match &rows(s, &q)[0][0] {
                    Value::Str(t) => t.to_string(),
                    v => panic!("{q}: {v:?}"),
                }
            })
            .collect()
    };
    {
        let mut s = Session::open_with(&path, OpenMode::Mapped, true).unwrap();
        for (i, v) in values.iter().enumerate() {
            run(&mut s, &format!("CREATE (:T {{i: {i}, v: {v}}})")).unwrap();
        }
        assert_eq!(read(&mut s), want);
    }
    {
        let mut s = Session::open_with(&path, OpenMode::Mapped, true).unwrap();
        assert_eq!(read(&mut s), want, "from the log");
        run(&mut s, "CHECKPOINT").unwrap();
    }
    let mut s = Session::open_with(&path, OpenMode::Mapped, true).unwrap();
    assert_eq!(read(&mut s), want, "after a checkpoint");
}

/// A byte array (from a driver's parameter) is stored as a property and read back the
/// same from the log and after a checkpoint (from the op file).
#[test]
fn bytes_survive_the_log_and_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let bytes: std::sync::Arc<[u8]> = (0..=255u8).collect::<Vec<_>>().into();
    let read = |s: &mut Session| {
        let mut out = Vec::new();
        s.run(
            "MATCH (n:B) RETURN n.b AS b",
            &Default::default(),
            &mut |_, b| {
                out.push(b.cols[0][0].clone());
                Ok(())
            },
        )
        .unwrap();
        out
    };
    {
        let mut s = Session::open_with(&path, OpenMode::Mapped, true).unwrap();
        let mut p = quiver_query::Params::new();
        p.insert("b".into(), Value::Bytes(bytes.clone()));
        s.run("CREATE (:B {b: $b})", &p, &mut |_, _| Ok(()))
            .unwrap();
        assert_eq!(read(&mut s), [Value::Bytes(bytes.clone())]);
    }
    {
        let mut s = Session::open_with(&path, OpenMode::Mapped, true).unwrap();
        assert_eq!(read(&mut s), [Value::Bytes(bytes.clone())], "from the log");
        run(&mut s, "CHECKPOINT").unwrap();
    }
    let mut s = Session::open_with(&path, OpenMode::Mapped, true).unwrap();
    assert_eq!(read(&mut s), [Value::Bytes(bytes)], "after a checkpoint");
    assert_eq!(
        rows(&mut s, "MATCH (n:B) RETURN toString(n.b) AS t")[0][0],
        Value::str(&format!(
            "0x{}",
            (0..=255u8).map(|x| format!("{x:02x}")).collect::<String>()
        ))
    );
}
