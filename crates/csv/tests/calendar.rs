//! The import's hand-written, allocation-free temporal parser (kept because it parses a
//! field without allocating, at import speed) checked against `jiff`, a well-kept
//! calendar crate: the same strings accepted, the same instants produced.

use jiff::civil::Date;
use proptest::prelude::*;
use quiver_csv::value::{
    civil_from_days, days_from_civil, format_date, parse_date, parse_datetime, parse_local_datetime,
};

fn epoch() -> Date {
    Date::new(1970, 1, 1).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// `YYYY-MM-DD` with any month and day numbers: accepted exactly when jiff accepts
    /// the date, and then the same day.
    #[test]
    fn dates_agree_with_jiff(y in -9999i16..=9999, m in 0i8..=14, d in 0i8..=33) {
        let mut text = String::new();
        if y < 0 { text.push('-'); }
        text += &format!("{:04}-{m:02}-{d:02}", y.unsigned_abs());
        let ours = parse_date(text.as_bytes());
        match Date::new(y, m, d) {
            Ok(date) => {
                let days = ours.unwrap_or_else(|| panic!("{text} refused"));
                prop_assert_eq!(days, date.since(epoch()).unwrap().get_days() as i64);
                prop_assert_eq!(civil_from_days(days), (y as i64, m as u32, d as u32));
                prop_assert_eq!(days_from_civil(y as i64, m as u32, d as u32), days);
                // What we write reads back.
                let mut out = String::new();
                format_date(days, &mut out);
                prop_assert_eq!(parse_date(out.as_bytes()), Some(days));
            }
            Err(_) => prop_assert!(ours.is_none(), "{} accepted", text),
        }
    }

    /// RFC 3339 date-times with offsets: the same UTC instant as jiff's `Timestamp`.
    #[test]
    fn datetimes_agree_with_jiff(
        y in 1i16..=9998, m in 1i8..=12, d in 1i8..=28,
        h in 0u32..=23, mi in 0u32..=59, s in 0u32..=59, us in 0u32..1_000_000,
        off_h in -14i32..=14, off_m in 0i32..=59, frac in any::<bool>(),
    ) {
        let sign = if off_h < 0 { '-' } else { '+' };
        let mut text = format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
        if frac { text += &format!(".{us:06}"); }
        text += &format!("{sign}{:02}:{off_m:02}", off_h.abs());
        let want: jiff::Timestamp = text.parse().unwrap();
        prop_assert_eq!(parse_datetime(text.as_bytes()), Some(want.as_microsecond()), "{}", text);
        let local = &text[..text.len() - 6];
        let want_local: jiff::civil::DateTime = local.parse().unwrap();
        let want_local = want_local.to_zoned(jiff::tz::TimeZone::UTC).unwrap();
        prop_assert_eq!(
            parse_local_datetime(local.as_bytes()),
            Some(want_local.timestamp().as_microsecond())
        );
    }
}

#[test]
fn out_of_range_times_are_refused() {
    for bad in [
        "2021-01-01T24:00",
        "2021-01-01T23:60",
        "2021-01-01T23:59:60",
        "2021-02-29",
        "2021-00-10",
        "+12000-01-01",
        "2021-01-01T10:00+2",
    ] {
        assert!(
            parse_datetime(bad.as_bytes()).is_none(),
            "{bad} was accepted"
        );
    }
}
