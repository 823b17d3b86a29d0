//! The proleptic Gregorian calendar over Neo4j's whole range (years -999,999,999 to
//! +999,999,999, Java's `LocalDate`), and named time zones read over all of it.
//!
//! jiff's civil dates stop at years ±9999, so the calendar is ours: day counts are
//! Hinnant's (`quiver_csv::value`), the rest (ISO weeks, ordinal days, month lengths) is
//! a few lines over them. A zone's rules stay jiff's (its bundled tz database), read at
//! the same moment shifted by whole 400-year cycles into jiff's range. That shift
//! changes nothing a zone can see: the Gregorian calendar repeats every 146,097 days
//! (a whole number of weeks), before a zone's first transition its offset is its local
//! mean time, and after its last one the zone's POSIX rule repeats every year.

use super::{bad, jerr, NS};
use crate::error::QueryError;
use jiff::civil;
use jiff::tz::TimeZone;
use quiver_csv::value::{civil_from_days, days_from_civil};

pub const MIN_YEAR: i64 = -999_999_999;
pub const MAX_YEAR: i64 = 999_999_999;
/// Days in a 400-year Gregorian cycle.
const CYCLE_DAYS: i64 = 146_097;

/// A date of the proleptic Gregorian calendar. Fields in this order, so the derived
/// order is the calendar's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    year: i64,
    month: u8,
    day: u8,
}

pub fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

pub fn days_in_month(y: i64, m: u8) -> u8 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn year_in_range(y: i64) -> Result<i64, QueryError> {
    if (MIN_YEAR..=MAX_YEAR).contains(&y) {
        Ok(y)
    } else {
        Err(bad(format!(
            "year {y} is out of range {MIN_YEAR} to {MAX_YEAR}"
        )))
    }
}

impl Date {
    /// The date `y-m-d`, when the calendar has it.
    pub fn new(y: i64, m: i64, d: i64) -> Result<Date, QueryError> {
        year_in_range(y)?;
        if !(1..=12).contains(&m) {
            return Err(bad(format!("month {m} is out of range 1 to 12")));
        }
        let last = days_in_month(y, m as u8) as i64;
        if !(1..=last).contains(&d) {
            return Err(bad(format!(
                "day {d} is out of range 1 to {last} for {y}-{m:02}"
            )));
        }
        Ok(Date {
            year: y,
            month: m as u8,
            day: d as u8,
        })
    }

    /// The date `days` days after 1970-01-01.
    pub fn from_days(days: i64) -> Result<Date, QueryError> {
        // Past about ±2.5e16 days Hinnant's arithmetic would overflow; far sooner the
        // year is out of range.
        if days.unsigned_abs() > 400_000_000_000 {
            return Err(bad("date out of range"));
        }
        let (y, m, d) = civil_from_days(days);
        year_in_range(y)?;
        Ok(Date {
            year: y,
            month: m as u8,
            day: d as u8,
        })
    }

    pub fn days(self) -> i64 {
        days_from_civil(self.year, self.month as u32, self.day as u32)
    }

    pub fn year(self) -> i64 {
        self.year
    }

    pub fn month(self) -> i64 {
        self.month as i64
    }

    pub fn day(self) -> i64 {
        self.day as i64
    }

    pub fn days_in_month(self) -> i64 {
        days_in_month(self.year, self.month) as i64
    }

    pub fn first_of_month(self) -> Date {
        Date { day: 1, ..self }
    }

    /// 1 for January 1st.
    pub fn day_of_year(self) -> i64 {
        self.days() - days_from_civil(self.year, 1, 1) + 1
    }

    /// Day `ordinal` (1-based) of year `y`.
    pub fn from_day_of_year(y: i64, ordinal: i64) -> Result<Date, QueryError> {
        year_in_range(y)?;
        let len = if is_leap(y) { 366 } else { 365 };
        if !(1..=len).contains(&ordinal) {
            return Err(bad(format!(
                "ordinal day {ordinal} is out of range 1 to {len} for {y}"
            )));
        }
        Date::from_days(days_from_civil(y, 1, 1) + ordinal - 1)
    }

    /// 1 for Monday to 7 for Sunday (ISO 8601).
    pub fn weekday(self) -> i64 {
        // 1970-01-01 was a Thursday.
        (self.days() + 3).rem_euclid(7) + 1
    }

    /// The ISO week date: week-based year, week (1 to 53), weekday.
    pub fn iso_week(self) -> (i64, i64, i64) {
        let wd = self.weekday();
        // A week belongs to the year its Thursday is in.
        let thursday = self.days() - (wd - 1) + 3;
        let (wy, _, _) = civil_from_days(thursday);
        let week = (thursday - days_from_civil(wy, 1, 1)) / 7 + 1;
        (wy, week, wd)
    }

    /// The date of ISO week date `wy-Wweek-wd`.
    pub fn from_iso_week(wy: i64, week: i64, wd: i64) -> Result<Date, QueryError> {
        year_in_range(wy)?;
        if !(1..=7).contains(&wd) {
            return Err(bad(format!("day of week {wd} is out of range 1 to 7")));
        }
        let weeks = weeks_in_year(wy);
        if !(1..=weeks).contains(&week) {
            return Err(bad(format!(
                "week {week} is out of range 1 to {weeks} for {wy}"
            )));
        }
        Date::from_days(week_one_monday(wy) + (week - 1) * 7 + wd - 1)
    }

    /// The date of week `week` (1 to 53) of `wy`, week 53 of a 52-week year being the
    /// next year's first.
    pub fn from_iso_week_lenient(wy: i64, week: i64, wd: i64) -> Result<Date, QueryError> {
        year_in_range(wy)?;
        if !(1..=53).contains(&week) || !(1..=7).contains(&wd) {
            return Err(bad(format!(
                "week {week}, day of week {wd} is out of range 1 to 53, 1 to 7"
            )));
        }
        Date::from_days(week_one_monday(wy) + (week - 1) * 7 + wd - 1)
    }

    /// jiff's date for this one, shifted by `cycles` 400-year cycles (which must
    /// bring it into jiff's range).
    fn to_jiff(self, cycles: i64) -> Result<civil::Date, QueryError> {
        let y = i16::try_from(self.year - cycles * 400).map_err(|_| bad("date out of range"))?;
        civil::Date::new(y, self.month as i8, self.day as i8).map_err(jerr)
    }

    pub fn from_jiff(d: civil::Date, cycles: i64) -> Result<Date, QueryError> {
        Date::new(
            d.year() as i64 + cycles * 400,
            d.month() as i64,
            d.day() as i64,
        )
    }
}

/// The day count of the Monday of week 1 of `wy` (the week with January 4th).
fn week_one_monday(wy: i64) -> i64 {
    let jan4 = days_from_civil(wy, 1, 4);
    jan4 - (jan4 + 3).rem_euclid(7)
}

fn weeks_in_year(wy: i64) -> i64 {
    (week_one_monday(wy + 1) - week_one_monday(wy)) / 7
}

/// How many 400-year cycles to take from a year to bring it well inside jiff's range
/// (years ±9999, with room for a day's offset either way).
fn cycles(year: i64) -> i64 {
    if year.abs() <= 9_000 {
        0
    } else {
        let anchor = if year > 0 { 8_800 } else { -8_800 };
        (year - anchor).div_euclid(400)
    }
}

fn civil_time(ns: i64) -> Result<civil::Time, QueryError> {
    let ns = ns.rem_euclid(86_400 * NS);
    let s = ns / NS;
    civil::Time::new(
        (s / 3600) as i8,
        (s / 60 % 60) as i8,
        (s % 60) as i8,
        (ns % NS) as i32,
    )
    .map_err(jerr)
}

fn time_ns(t: civil::Time) -> i64 {
    (t.hour() as i64 * 3600 + t.minute() as i64 * 60 + t.second() as i64) * NS
        + t.subsec_nanosecond() as i64
}

/// A local date and time of day in zone `tz`, resolved as Neo4j (and Java's
/// `ZonedDateTime.of`) resolves it: a time in a gap moves forward by the gap, a time
/// in an overlap takes the earlier offset. Returns the local date and time as
/// resolved and the offset in seconds.
pub fn resolve_local(tz: &TimeZone, date: Date, ns: i64) -> Result<(Date, i64, i32), QueryError> {
    let k = cycles(date.year);
    let dt = civil::DateTime::from_parts(date.to_jiff(k)?, civil_time(ns)?);
    let z = dt.to_zoned(tz.clone()).map_err(jerr)?;
    Ok((
        Date::from_jiff(z.date(), k)?,
        time_ns(z.time()),
        z.offset().seconds(),
    ))
}

/// The local date, time of day and offset in zone `tz` at instant `secs`/`nanos`
/// (since 1970-01-01T00:00Z).
pub fn at_instant(tz: &TimeZone, secs: i64, nanos: u32) -> Result<(Date, i64, i32), QueryError> {
    let (y, _, _) = civil_from_days(secs.div_euclid(86_400));
    let k = cycles(y);
    let shift = k * CYCLE_DAYS * 86_400;
    let z = jiff::Timestamp::new(secs - shift, nanos as i32)
        .map_err(jerr)?
        .to_zoned(tz.clone());
    Ok((
        Date::from_jiff(z.date(), k)?,
        time_ns(z.time()),
        z.offset().seconds(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Our calendar against jiff's over the range both have.
    #[test]
    fn agrees_with_jiff() {
        let mut d = civil::Date::new(-9999, 1, 1).unwrap();
        let end = civil::Date::new(9999, 12, 31).unwrap();
        let step = jiff::Span::new().days(13);
        while d < end {
            let ours = Date::from_days(quiver_csv::value::days_from_civil(
                d.year() as i64,
                d.month() as u32,
                d.day() as u32,
            ))
            .unwrap();
            assert_eq!(
                (ours.year(), ours.month(), ours.day()),
                (d.year() as i64, d.month() as i64, d.day() as i64)
            );
            let w = d.iso_week_date();
            assert_eq!(
                ours.iso_week(),
                (
                    w.year() as i64,
                    w.week() as i64,
                    w.weekday().to_monday_one_offset() as i64
                ),
                "{d}"
            );
            assert_eq!(ours.day_of_year(), d.day_of_year() as i64);
            assert_eq!(
                Date::from_iso_week(
                    w.year() as i64,
                    w.week() as i64,
                    w.weekday().to_monday_one_offset() as i64
                )
                .unwrap(),
                ours
            );
            match d.checked_add(step) {
                Ok(next) => d = next,
                Err(_) => break,
            }
        }
    }

    #[test]
    fn the_ends_of_the_range() {
        let lo = Date::new(MIN_YEAR, 1, 1).unwrap();
        let hi = Date::new(MAX_YEAR, 12, 31).unwrap();
        assert_eq!(Date::from_days(lo.days()).unwrap(), lo);
        assert_eq!(Date::from_days(hi.days()).unwrap(), hi);
        assert!(Date::from_days(lo.days() - 1).is_err());
        assert!(Date::from_days(hi.days() + 1).is_err());
        assert!(Date::new(MAX_YEAR + 1, 1, 1).is_err());
        assert!(Date::new(2023, 2, 29).is_err());
        assert!(Date::from_iso_week(2015, 53, 1).is_ok());
        assert!(Date::from_iso_week(2016, 53, 1).is_err());
    }

    /// Far from jiff's range, a zone answers as it does in the same place of a cycle
    /// inside it.
    #[test]
    fn zones_far_out() {
        let tz = super::super::time_zone("Europe/Stockholm").unwrap();
        // Summer time in the far future, as in 2026.
        let (_, _, summer) = resolve_local(&tz, Date::new(999_999_826, 7, 1).unwrap(), 0).unwrap();
        assert_eq!(summer, 7200);
        let (_, _, winter) = resolve_local(&tz, Date::new(999_999_826, 1, 1).unwrap(), 0).unwrap();
        assert_eq!(winter, 3600);
        // Local mean time in the far past.
        let (_, _, lmt) = resolve_local(&tz, Date::new(-999_999_999, 1, 1).unwrap(), 0).unwrap();
        let (_, _, lmt1800) = resolve_local(&tz, Date::new(1800, 1, 1).unwrap(), 0).unwrap();
        assert_eq!(lmt, lmt1800);
        // And the instant goes back to the same local time.
        let d = Date::new(999_999_826, 7, 1).unwrap();
        let secs = d.days() * 86_400 + 3600 - summer as i64;
        let (d2, t2, o2) = at_instant(&tz, secs, 0).unwrap();
        assert_eq!((d2, t2, o2), (d, 3600 * NS, 7200));
    }
}
