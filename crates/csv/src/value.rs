//! Typed values from bytes, without allocation: integers (our own: the hottest
//! conversion, eight digits checked and combined at once in a `u64`), floats (`fast-float2`), booleans, dates and
//! timestamps (a hand fast path for ISO-8601, the only form CSV exports use in practice).
//! Dates become days since 1970-01-01 and timestamps microseconds since the epoch, once,
//! at import (seed 002: string-to-datetime parsing was Dolt's bottleneck).

/// Parses a decimal integer with optional sign and surrounding spaces.
#[inline]
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    // Spaces are rare: trim only when an end is not a digit.
    let b = match (b.first(), b.last()) {
        (Some(f), Some(l)) if *f != b' ' && *l != b' ' => b,
        _ => trim(b),
    };
    let (neg, digits) = match b.first()? {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    // Eight digits at a time from the right (a loop over the chunks cost social's import
    // 6% in instructions: the short case must stay one call). 19 digits, at most
    // 999 * 10^16 + ..., fit a u64: nothing here overflows; the range is checked below.
    const E8: u64 = 100_000_000;
    let n = digits.len();
    let v = match n {
        1..=8 => swar8(digits)?,
        9..=16 => swar8(&digits[..n - 8])? * E8 + swar8(&digits[n - 8..])?,
        17..=19 => {
            let (hi, mid, lo) = (&digits[..n - 16], &digits[n - 16..n - 8], &digits[n - 8..]);
            (swar8(hi)? * E8 + swar8(mid)?) * E8 + swar8(lo)?
        }
        _ => return None,
    };
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

/// Up to eight ASCII digits as their value, all eight lanes of a `u64` at once (SWAR):
/// checked to be digits with two adds, combined with three multiplies. A relationship
/// file is mostly integers; the loop a digit at a time took 87 instructions for a
/// 7-digit id (social's endpoints). (`atoi_simd` was no faster here: its SIMD paths need
/// target features the baseline build does not assume.)
#[inline]
fn swar8(d: &[u8]) -> Option<u64> {
    debug_assert!((1..=8).contains(&d.len()));
    let x = load_padded(d);
    let v = x.wrapping_sub(0x3030_3030_3030_3030);
    // A lane below '0' borrows into its top bit; one above '9' carries into it.
    if (v | x.wrapping_add(0x4646_4646_4646_4646)) & 0x8080_8080_8080_8080 != 0 {
        return None;
    }
    // Lane i holds the digit of weight 10^(7-i): pairs, then quads, then all eight.
    let v = (v.wrapping_mul(10) + (v >> 8)) & 0x00ff_00ff_00ff_00ff;
    let v = (v.wrapping_mul(100) + (v >> 16)) & 0x0000_ffff_0000_ffff;
    Some((v.wrapping_mul(10_000) + (v >> 32)) & 0xffff_ffff)
}

/// `d` (1-8 bytes) in the top `d.len()` lanes of a `u64`, first byte lowest, the lanes
/// below it `'0'`: as if left-padded with zeros, read by two overlapping loads (a copy
/// into a padded buffer cost a `memcpy` call, more than the digits' own work).
#[inline]
fn load_padded(d: &[u8]) -> u64 {
    let n = d.len();
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
    let half = |b: &[u8]| u16::from_le_bytes([b[0], b[1]]) as u64;
    let x = if n >= 4 {
        word(d) | word(&d[n - 4..]) << ((n - 4) * 8)
    } else if n >= 2 {
        half(d) | half(&d[n - 2..]) << ((n - 2) * 8)
    } else {
        d[0] as u64
    };
    let shift = (8 - n) * 8;
    if shift == 0 {
        x
    } else {
        x << shift | 0x3030_3030_3030_3030u64 >> (64 - shift)
    }
}

#[inline]
fn trim(b: &[u8]) -> &[u8] {
    let mut s = 0;
    let mut e = b.len();
    while s < e && b[s] == b' ' {
        s += 1;
    }
    while e > s && b[e - 1] == b' ' {
        e -= 1;
    }
    &b[s..e]
}

#[inline]
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let b = trim(b);
    if b.is_empty() {
        return None;
    }
    fast_float2::parse(b).ok()
}

#[inline]
pub fn parse_f32(b: &[u8]) -> Option<f32> {
    let b = trim(b);
    if b.is_empty() {
        return None;
    }
    fast_float2::parse::<f32, _>(b).ok()
}

pub fn parse_bool(b: &[u8]) -> Option<bool> {
    let b = trim(b);
    if b.eq_ignore_ascii_case(b"true") {
        Some(true)
    } else if b.eq_ignore_ascii_case(b"false") {
        Some(false)
    } else {
        None
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// The inverse of [`days_from_civil`].
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn digits(b: &[u8], n: usize) -> Option<u32> {
    if b.len() < n {
        return None;
    }
    let mut v = 0u32;
    for &c in &b[..n] {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + d as u32;
    }
    Some(v)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// `YYYY-MM-DD` (with an optional leading `-` for years before 0) -> days; returns the
/// rest of the input after the date.
fn parse_date_prefix(b: &[u8]) -> Option<(i64, &[u8])> {
    let (neg, b) = match b.first()? {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let y = digits(b, 4)? as i64;
    let y = if neg { -y } else { y };
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let m = digits(&b[5..], 2)?;
    let d = digits(&b[8..], 2)?;
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    Some((days_from_civil(y, m, d), &b[10..]))
}

/// How a column spells its dates: ISO 8601 (`YYYY-MM-DD`), or year, month and day in
/// another order around another separator, as the import's sniffer finds them in files
/// with plain headers (as DuckDB's does: `2022/01/05`, `17/03/2021`, `03-17-2021`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DateOrder {
    #[default]
    Iso,
    Ymd(u8),
    Dmy(u8),
    Mdy(u8),
}

impl DateOrder {
    /// The orders a sniffer tries, in its order of preference (month first before day
    /// first when both read every value, as DuckDB prefers).
    pub const SNIFFED: [DateOrder; 10] = [
        DateOrder::Iso,
        DateOrder::Ymd(b'/'),
        DateOrder::Ymd(b'.'),
        DateOrder::Mdy(b'/'),
        DateOrder::Dmy(b'/'),
        DateOrder::Mdy(b'-'),
        DateOrder::Dmy(b'-'),
        DateOrder::Dmy(b'.'),
        DateOrder::Mdy(b'.'),
        DateOrder::Ymd(b'-'),
    ];

    /// The order as a pattern, e.g. `DD/MM/YYYY`.
    pub fn pattern(self) -> String {
        let (parts, sep) = match self {
            DateOrder::Iso => return "YYYY-MM-DD".into(),
            DateOrder::Ymd(s) => (["YYYY", "MM", "DD"], s),
            DateOrder::Dmy(s) => (["DD", "MM", "YYYY"], s),
            DateOrder::Mdy(s) => (["MM", "DD", "YYYY"], s),
        };
        parts.join(&(sep as char).to_string())
    }
}

/// A date spelled in `order` -> days since 1970-01-01. Day and month take one or two
/// digits, the year four.
pub fn parse_date_as(order: DateOrder, b: &[u8]) -> Option<i64> {
    let (sep, y_at, m_at, d_at) = match order {
        DateOrder::Iso => return parse_date(b),
        DateOrder::Ymd(s) => (s, 0, 1, 2),
        DateOrder::Dmy(s) => (s, 2, 1, 0),
        DateOrder::Mdy(s) => (s, 2, 0, 1),
    };
    let b = trim(b);
    let mut parts = b.split(|&c| c == sep);
    let p: [&[u8]; 3] = [parts.next()?, parts.next()?, parts.next()?];
    if parts.next().is_some() {
        return None;
    }
    let num = |f: &[u8], lo: usize, hi: usize| {
        (lo..=hi)
            .contains(&f.len())
            .then(|| digits(f, f.len()))
            .flatten()
    };
    let y = num(p[y_at], 4, 4)? as i64;
    let m = num(p[m_at], 1, 2)?;
    let d = num(p[d_at], 1, 2)?;
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

pub fn parse_date(b: &[u8]) -> Option<i64> {
    match parse_date_prefix(trim(b))? {
        (days, []) => Some(days),
        _ => None,
    }
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// `HH:MM[:SS[.ffffff]]` -> (microseconds of the day, rest).
fn parse_time_prefix(b: &[u8]) -> Option<(i64, &[u8])> {
    let h = digits(b, 2)?;
    if b.get(2) != Some(&b':') {
        return None;
    }
    let mi = digits(&b[3..], 2)?;
    let mut rest = &b[5..];
    let mut s = 0;
    let mut frac_us = 0i64;
    if rest.first() == Some(&b':') {
        s = digits(&rest[1..], 2)?;
        rest = &rest[3..];
        if rest.first() == Some(&b'.') || rest.first() == Some(&b',') {
            let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            let mut f = 0i64;
            for (k, &c) in rest[1..1 + n].iter().enumerate() {
                if k < 6 {
                    f = f * 10 + (c - b'0') as i64;
                }
            }
            for _ in n..6 {
                f *= 10;
            }
            frac_us = f;
            rest = &rest[1 + n..];
        }
    }
    if h > 23 || mi > 59 || s > 59 {
        return None;
    }
    Some((
        ((h as i64 * 60 + mi as i64) * 60 + s as i64) * 1_000_000 + frac_us,
        rest,
    ))
}

/// `YYYY-MM-DD[T ]HH:MM[:SS[.f]]` or a bare date -> microseconds since the epoch.
pub fn parse_local_datetime(b: &[u8]) -> Option<i64> {
    let (us, rest) = parse_local_datetime_prefix(trim(b))?;
    rest.is_empty().then_some(us)
}

fn parse_local_datetime_prefix(b: &[u8]) -> Option<(i64, &[u8])> {
    let (days, rest) = parse_date_prefix(b)?;
    let day_us = days.checked_mul(MICROS_PER_DAY)?;
    match rest.first() {
        None => Some((day_us, rest)),
        Some(b'T') | Some(b't') | Some(b' ') => {
            let (t, rest) = parse_time_prefix(&rest[1..])?;
            Some((day_us.checked_add(t)?, rest))
        }
        _ => Some((day_us, rest)),
    }
}

/// A local date-time with an optional `Z` or `+HH:MM` / `+HHMM` / `+HH` offset, converted
/// to UTC microseconds. Without an offset the time is taken as UTC.
pub fn parse_datetime(b: &[u8]) -> Option<i64> {
    let (us, rest) = parse_local_datetime_prefix(trim(b))?;
    let offset_s: i64 = match rest {
        [] | [b'Z'] | [b'z'] => 0,
        [sign @ (b'+' | b'-'), tail @ ..] => {
            let h = digits(tail, 2)? as i64;
            let m = match &tail[2..] {
                [] => 0,
                [b':', mm @ ..] if mm.len() == 2 => digits(mm, 2)? as i64,
                mm if mm.len() == 2 => digits(mm, 2)? as i64,
                _ => return None,
            };
            let o = h * 3600 + m * 60;
            if *sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    us.checked_sub(offset_s * 1_000_000)
}

/// Two decimal digits of `v` (`0..100`).
#[inline]
fn push2(out: &mut String, v: u32) {
    out.push((b'0' + (v / 10) as u8) as char);
    out.push((b'0' + (v % 10) as u8) as char);
}

/// `YYYY-MM-DD` (a sign and at least four digits for years outside 0..=9999). By hand:
/// exports and Parquet input write one per value, and `write!` costs several times
/// more.
pub fn format_date(days: i64, out: &mut String) {
    use std::fmt::Write;
    let (y, m, d) = civil_from_days(days);
    if (0..=9999).contains(&y) {
        push2(out, (y / 100) as u32);
        push2(out, (y % 100) as u32);
    } else {
        let _ = write!(out, "{y:+05}");
    }
    out.push('-');
    push2(out, m);
    out.push('-');
    push2(out, d);
}

/// `YYYY-MM-DDTHH:MM:SS[.ffffff]`.
pub fn format_local_datetime(us: i64, out: &mut String) {
    let days = us.div_euclid(MICROS_PER_DAY);
    let t = us.rem_euclid(MICROS_PER_DAY);
    format_date(days, out);
    let secs = t / 1_000_000;
    let frac = (t % 1_000_000) as u32;
    out.push('T');
    push2(out, (secs / 3600) as u32);
    out.push(':');
    push2(out, (secs / 60 % 60) as u32);
    out.push(':');
    push2(out, (secs % 60) as u32);
    if frac != 0 {
        out.push('.');
        push2(out, frac / 10_000);
        push2(out, frac / 100 % 100);
        push2(out, frac % 100);
    }
}

pub fn format_datetime(us: i64, out: &mut String) {
    format_local_datetime(us, out);
    out.push('Z');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_in_other_orders() {
        let d = |y, m, dd| Some(days_from_civil(y, m, dd));
        assert_eq!(
            parse_date_as(DateOrder::Dmy(b'/'), b"17/03/2021"),
            d(2021, 3, 17)
        );
        assert_eq!(
            parse_date_as(DateOrder::Mdy(b'/'), b"3/17/2021"),
            d(2021, 3, 17)
        );
        assert_eq!(
            parse_date_as(DateOrder::Ymd(b'/'), b"2022/01/05"),
            d(2022, 1, 5)
        );
        assert_eq!(
            parse_date_as(DateOrder::Dmy(b'.'), b" 29.02.2024 "),
            d(2024, 2, 29)
        );
        assert_eq!(parse_date_as(DateOrder::Iso, b"2021-03-04"), d(2021, 3, 4));
        for (o, bad) in [
            (DateOrder::Mdy(b'/'), &b"17/03/2021"[..]),
            (DateOrder::Dmy(b'.'), b"29.02.2023"),
            (DateOrder::Dmy(b'/'), b"1/2/21"),
            (DateOrder::Dmy(b'/'), b"01/02/2021/3"),
            (DateOrder::Ymd(b'/'), b"2022-01-05"),
            (DateOrder::Dmy(b'/'), b"001/02/2021"),
        ] {
            assert_eq!(parse_date_as(o, bad), None, "{o:?} {bad:?}");
        }
        assert_eq!(DateOrder::Dmy(b'/').pattern(), "DD/MM/YYYY");
    }

    #[test]
    fn ints() {
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b" -7 "), Some(-7));
        assert_eq!(parse_i64(b"+3"), Some(3));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"99999999999999999999"), None);
        assert_eq!(parse_i64(b"1.5"), None);
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"abc"), None);
        assert_eq!(parse_i64(b"12a"), None);
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"-9223372036854775809"), None);
        // More than 19 digits is no i64, leading zeros or not (as the loop had it).
        assert_eq!(parse_i64(b"00000000000000000001"), None);
        assert_eq!(parse_i64(b"0000000000000000001"), Some(1));
        assert_eq!(parse_i64(b"+"), None);
        assert_eq!(parse_i64(b"--1"), None);
    }

    /// The digit-at-a-time loop `parse_i64` had before it read eight digits at once: the
    /// behaviour to keep.
    fn parse_i64_loop(b: &[u8]) -> Option<i64> {
        let b = trim(b);
        let (neg, digits) = match b.first()? {
            b'-' => (true, &b[1..]),
            b'+' => (false, &b[1..]),
            _ => (false, b),
        };
        if digits.is_empty() || digits.len() > 19 {
            return None;
        }
        let mut v: u64 = 0;
        for &c in digits {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + d as u64;
        }
        if neg {
            (v <= i64::MAX as u64 + 1).then(|| (v as i64).wrapping_neg())
        } else {
            (v <= i64::MAX as u64).then_some(v as i64)
        }
    }

    proptest::proptest! {
        #[test]
        fn integers_parse_as_the_loop_did(s in "[ +-]{0,2}[0-9]{0,21}[ 0-9a+-]{0,2}") {
            proptest::prop_assert_eq!(parse_i64(s.as_bytes()), parse_i64_loop(s.as_bytes()), "{:?}", s);
        }

        #[test]
        fn any_bytes_parse_as_the_loop_did(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24)) {
            proptest::prop_assert_eq!(parse_i64(&b), parse_i64_loop(&b), "{:?}", b);
        }

        #[test]
        fn digits_with_one_byte_changed_parse_as_the_loop_did(
            v in 0u64..100_000_000_000_000_000, at in 0usize..20, byte in proptest::prelude::any::<u8>()
        ) {
            let mut b = v.to_string().into_bytes();
            let i = at % b.len();
            b[i] = byte;
            proptest::prop_assert_eq!(parse_i64(&b), parse_i64_loop(&b), "{:?}", b);
        }

        #[test]
        fn every_i64_round_trips(v in proptest::num::i64::ANY) {
            proptest::prop_assert_eq!(parse_i64(v.to_string().as_bytes()), Some(v));
        }
    }

    #[test]
    fn floats_and_bools() {
        assert_eq!(parse_f64(b"1.27e-5"), Some(1.27e-5));
        assert_eq!(parse_f64(b"-0.0431"), Some(-0.0431));
        assert_eq!(parse_f64(b"x"), None);
        assert_eq!(parse_f32(b"474.77017"), Some(474.77017f32));
        assert_eq!(parse_bool(b"TRUE"), Some(true));
        assert_eq!(parse_bool(b"no"), None);
    }

    #[test]
    fn dates_round_trip() {
        for days in [-719468i64, -1, 0, 1, 11_016, 24_855, 2_932_896] {
            let mut s = String::new();
            format_date(days, &mut s);
            assert_eq!(parse_date(s.as_bytes()), Some(days), "{s}");
        }
        assert_eq!(parse_date(b"2024-02-29"), Some(19_782));
        assert_eq!(parse_date(b"2023-02-29"), None);
        assert_eq!(parse_date(b"2023-13-01"), None);
        assert_eq!(parse_date(b"2023-1-01"), None);
    }

    #[test]
    fn datetimes() {
        let t = parse_local_datetime(b"2003-08-02 04:27:59").unwrap();
        let mut s = String::new();
        format_local_datetime(t, &mut s);
        assert_eq!(s, "2003-08-02T04:27:59");
        assert_eq!(parse_local_datetime(s.as_bytes()), Some(t));
        assert_eq!(
            parse_local_datetime(b"1970-01-01T00:00:00.5"),
            Some(500_000)
        );
        assert_eq!(parse_datetime(b"1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_datetime(b"1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_datetime(b"1969-12-31T23:00:00-0100"), Some(0));
        assert_eq!(parse_local_datetime(b"2003-08-02 25:00:00"), None);
        assert_eq!(parse_local_datetime(b"2003-08-02x"), None);
    }
}
