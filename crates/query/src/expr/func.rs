//! Built-in functions (`call`), their argument checks, and temporal values.

use super::*;

pub(super) fn temporal_field(us: i64, name: &str, v: &Value) -> Result<Value, QueryError> {
    let days = us.div_euclid(86_400_000_000);
    let tod = us.rem_euclid(86_400_000_000);
    let (y, m, d) = quiver_csv::value::civil_from_days(days);
    let is_date = matches!(v, Value::Date(_));
    Ok(Value::Int(match name.to_ascii_lowercase().as_str() {
        "year" => y,
        "month" => m as i64,
        "day" => d as i64,
        "quarter" => (m as i64 - 1) / 3 + 1,
        "dayofweek" | "weekday" => (days + 3).rem_euclid(7) + 1,
        "ordinalday" => days - quiver_csv::value::days_from_civil(y, 1, 1) + 1,
        "hour" if !is_date => tod / 3_600_000_000,
        "minute" if !is_date => tod / 60_000_000 % 60,
        "second" if !is_date => tod / 1_000_000 % 60,
        "millisecond" if !is_date => tod / 1000 % 1000,
        "microsecond" if !is_date => tod % 1_000_000,
        "epochmillis" if !is_date => us.div_euclid(1000),
        "epochseconds" if !is_date => us.div_euclid(1_000_000),
        "epochdays" if is_date => days,
        _ => return type_err(&format!("no temporal field `{name}`"), v),
    }))
}

/// `toString` of a value (also used by string concatenation).
pub fn to_string(v: &Value) -> String {
    let mut s = String::new();
    match v {
        Value::Str(x) => return x.to_string(),
        Value::Int(i) => return i.to_string(),
        Value::Float(f) => return format_float(*f),
        Value::Bool(b) => return b.to_string(),
        Value::Date(d) => quiver_csv::value::format_date(*d, &mut s),
        Value::LocalDateTime(t) => quiver_csv::value::format_local_datetime(*t, &mut s),
        Value::DateTime(t) => quiver_csv::value::format_datetime(*t, &mut s),
        Value::Null => return "null".into(),
        _ => return v.type_name().to_lowercase(),
    }
    s
}

pub fn format_float(f: f64) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 {
        format!("{f:.1}")
    } else {
        f.to_string()
    }
}

pub(super) fn int_arg(v: &Value, what: &str) -> Result<Option<i64>, QueryError> {
    match v {
        Value::Int(i) => Ok(Some(*i)),
        Value::Float(f) if f.fract() == 0.0 => Ok(Some(*f as i64)),
        Value::Null => Ok(None),
        _ => type_err(&format!("{what} needs an integer"), v),
    }
}

pub(super) fn str_arg<'v>(v: &'v Value, what: &str) -> Result<Option<&'v str>, QueryError> {
    match v {
        Value::Str(s) => Ok(Some(s)),
        Value::Null => Ok(None),
        _ => type_err(&format!("{what} needs a string"), v),
    }
}

pub(super) fn argc(f: Func, args: &[Value], lo: usize, hi: usize) -> Result<(), QueryError> {
    if args.len() < lo || args.len() > hi {
        return Err(QueryError::Argument(format!(
            "{f:?}() takes {} argument(s), got {}",
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo} to {hi}")
            },
            args.len()
        )));
    }
    Ok(())
}

pub(super) fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// A temporal value from a map (`date({year: 2021, month: 2, day: 28})`), validated on
/// `jiff`'s proleptic Gregorian calendar: every field in its range (months 1-12, days
/// of that month, hours 0-23, years -9999 to 9999), no silent wrapping, unknown keys
/// refused. Dates are `year/month/day`, `year/week/dayOfWeek` (ISO weeks) or
/// `year/ordinalDay`; `datetime` also takes `timezone` (an IANA name or `+01:00`) and
/// converts the local time there to the UTC instant it stores.
pub(super) fn temporal_from_map(f: Func, m: &[(Arc<str>, Value)]) -> Result<Value, QueryError> {
    use jiff::civil;
    let what = match f {
        Func::Date => "date",
        Func::DateTime => "datetime",
        _ => "localdatetime",
    };
    let bad = |msg: String| QueryError::Argument(format!("{what}(): {msg}"));
    const DATE_KEYS: [&str; 6] = ["year", "month", "day", "week", "dayofweek", "ordinalday"];
    const TIME_KEYS: [&str; 6] = [
        "hour",
        "minute",
        "second",
        "millisecond",
        "microsecond",
        "nanosecond",
    ];
    for (k, _) in m {
        let k = k.to_ascii_lowercase();
        let known = DATE_KEYS.contains(&k.as_str())
            || (f != Func::Date && TIME_KEYS.contains(&k.as_str()))
            || (f == Func::DateTime && k == "timezone");
        if !known {
            return Err(bad(format!("unknown or unsupported key `{k}`")));
        }
    }
    let get = |k: &str| -> Result<Option<i64>, QueryError> {
        match m.iter().find(|(n, _)| n.eq_ignore_ascii_case(k)) {
            Some((_, v)) => int_arg(v, k),
            None => Ok(None),
        }
    };
    // A field in its range, as the small integer type jiff takes.
    fn field<T: TryFrom<i64>>(
        k: &str,
        v: i64,
        lo: i64,
        hi: i64,
        bad: &dyn Fn(String) -> QueryError,
    ) -> Result<T, QueryError> {
        if !(lo..=hi).contains(&v) {
            return Err(bad(format!("{k} {v} is out of range {lo} to {hi}")));
        }
        T::try_from(v).map_err(|_| bad(format!("{k} {v} is out of range")))
    }
    let year: i16 = match get("year")? {
        Some(y) => field("year", y, -9999, 9999, &bad)?,
        None => return Err(bad("`year` is required".into())),
    };
    let jiff_err = |e: jiff::Error| bad(e.to_string());
    let (month, day, week, dow, ordinal) = (
        get("month")?,
        get("day")?,
        get("week")?,
        get("dayOfWeek")?,
        get("ordinalDay")?,
    );
    let date = match (month, day, week, dow, ordinal) {
        (m, d, None, None, None) => civil::Date::new(
            year,
            field("month", m.unwrap_or(1), 1, 12, &bad)?,
            field("day", d.unwrap_or(1), 1, 31, &bad)?,
        )
        .map_err(jiff_err)?,
        (None, None, Some(w), dw, None) => {
            let wd = civil::Weekday::from_monday_one_offset(field(
                "dayOfWeek",
                dw.unwrap_or(1),
                1,
                7,
                &bad,
            )?)
            .map_err(jiff_err)?;
            civil::ISOWeekDate::new(year, field("week", w, 1, 53, &bad)?, wd)
                .map_err(jiff_err)?
                .date()
        }
        (None, None, None, None, Some(o)) => civil::Date::new(year, 1, 1)
            .map_err(jiff_err)?
            .with()
            .day_of_year(field("ordinalDay", o, 1, 366, &bad)?)
            .build()
            .map_err(jiff_err)?,
        _ => {
            return Err(bad(
                "give month and day, week and dayOfWeek, or ordinalDay; not a mix".into(),
            ))
        }
    };
    let days = quiver_csv::value::days_from_civil(
        date.year() as i64,
        date.month() as u32,
        date.day() as u32,
    );
    if f == Func::Date {
        return Ok(Value::Date(days));
    }
    let ms = get("millisecond")?;
    let us = get("microsecond")?;
    let ns = get("nanosecond")?;
    let mut sub_ns: i64 = field::<i64>("millisecond", ms.unwrap_or(0), 0, 999, &bad)? * 1_000_000;
    sub_ns += match ms {
        Some(_) => field::<i64>("microsecond", us.unwrap_or(0), 0, 999, &bad)? * 1000,
        None => field::<i64>("microsecond", us.unwrap_or(0), 0, 999_999, &bad)? * 1000,
    };
    sub_ns += match (ms, us) {
        (None, None) => field::<i64>("nanosecond", ns.unwrap_or(0), 0, 999_999_999, &bad)?,
        _ => field::<i64>("nanosecond", ns.unwrap_or(0), 0, 999, &bad)?,
    };
    if sub_ns % 1000 != 0 {
        return Err(bad(
            "Quiver keeps temporal values to the microsecond; nanoseconds must be a multiple of 1000".into(),
        ));
    }
    let time = civil::Time::new(
        field("hour", get("hour")?.unwrap_or(0), 0, 23, &bad)?,
        field("minute", get("minute")?.unwrap_or(0), 0, 59, &bad)?,
        field("second", get("second")?.unwrap_or(0), 0, 59, &bad)?,
        sub_ns as i32,
    )
    .map_err(jiff_err)?;
    let tod = (time.hour() as i64 * 3600 + time.minute() as i64 * 60 + time.second() as i64)
        * 1_000_000
        + sub_ns / 1000;
    let local = days * 86_400_000_000 + tod;
    let zone = m.iter().find(|(n, _)| n.eq_ignore_ascii_case("timezone"));
    Ok(match (f, zone) {
        (Func::DateTime, Some((_, Value::Str(z)))) => {
            let tz = time_zone(z).map_err(|e| bad(format!("time zone '{z}': {e}")))?;
            let zoned = date.to_datetime(time).to_zoned(tz).map_err(jiff_err)?;
            Value::DateTime(zoned.timestamp().as_microsecond())
        }
        (Func::DateTime, Some((_, Value::Null)) | None) => Value::DateTime(local),
        (Func::DateTime, Some((_, v))) => return type_err("timezone needs a string", v),
        _ => Value::LocalDateTime(local),
    })
}

/// A time zone by IANA name (`Europe/Berlin`, from the tz database bundled in the
/// binary) or as a fixed offset (`+01:00`, `-0530`, `Z`).
fn time_zone(z: &str) -> Result<jiff::tz::TimeZone, jiff::Error> {
    if let Some(us) = quiver_csv::value::parse_datetime(format!("1970-01-01T00:00{z}").as_bytes()) {
        let offset = jiff::tz::Offset::from_seconds((-us / 1_000_000) as i32)?;
        return Ok(jiff::tz::TimeZone::fixed(offset));
    }
    jiff::tz::TimeZone::get(z)
}

/// `datetime(text)` for what the import's parser does not read: an RFC 9557 zone
/// annotation (`2024-03-10T02:30-05:00[America/New_York]`), converted to UTC.
pub(super) fn parse_zoned(s: &str) -> Option<i64> {
    s.trim()
        .parse::<jiff::Zoned>()
        .ok()
        .map(|z| z.timestamp().as_microsecond())
}

/// A scalar function.
pub fn call(env: &Env, f: Func, a: &[Value]) -> Result<Value, QueryError> {
    use Func::*;
    let g = env.g;
    let first = a.first().cloned().unwrap_or(Value::Null);
    let unary = matches!(
        f,
        Id | ElementId
            | Labels
            | Type
            | Properties
            | Keys
            | StartNode
            | EndNode
            | Nodes
            | Relationships
            | Length
            | Size
            | Head
            | Last
            | Tail
            | Reverse
            | ToInteger
            | ToFloat
            | ToString
            | ToBoolean
            | Abs
            | Ceil
            | Floor
            | Sqrt
            | Sign
            | ToUpper
            | ToLower
            | Trim
            | LTrim
            | RTrim
            | Exists
            | Log
            | Log10
            | Exp
            | Exists2
            | All
            | Any
            | NoneOf
            | Single
    );
    if unary {
        argc(f, a, 1, 1)?;
        if first.is_null() {
            return Ok(if matches!(f, Exists) {
                Value::Bool(false)
            } else {
                Value::Null
            });
        }
    }
    Ok(match f {
        Id => match first {
            Value::Node(n) => Value::Int(n as i64),
            Value::Rel(r) => Value::Int(((r.ty as i64) << 40) | r.eid as i64),
            v => return type_err("id() needs a node or relationship", &v),
        },
        ElementId => match first {
            Value::Node(n) => Value::str(&format!("n:{n}")),
            Value::Rel(r) => Value::str(&format!("r:{}:{}", r.ty, r.eid)),
            v => return type_err("elementId() needs a node or relationship", &v),
        },
        Labels => match first {
            Value::Node(n) => Value::list(g.labels(n)?.into_iter().map(Value::Str).collect()),
            v => return type_err("labels() needs a node", &v),
        },
        Type => match first {
            Value::Rel(r) => Value::Str(g.rel_type_name(r.ty)),
            v => return type_err("type() needs a relationship", &v),
        },
        Properties => match first {
            Value::Node(n) => Value::Map(Arc::new(g.node_props(n)?)),
            Value::Rel(r) => Value::Map(Arc::new(g.rel_props(&r)?)),
            m @ Value::Map(_) => m,
            v => return type_err("properties() needs a node, relationship or map", &v),
        },
        Keys => {
            let props = match first {
                Value::Node(n) => g.node_props(n)?,
                Value::Rel(r) => g.rel_props(&r)?,
                Value::Map(m) => m.to_vec(),
                v => return type_err("keys() needs a node, relationship or map", &v),
            };
            Value::list(props.into_iter().map(|(k, _)| Value::Str(k)).collect())
        }
        StartNode | EndNode => match first {
            Value::Rel(r) => Value::Node(if f == StartNode { r.src } else { r.dst } as u64),
            v => return type_err("startNode()/endNode() need a relationship", &v),
        },
        Nodes => match first {
            Value::Path(p) => Value::list(p.nodes.iter().map(|&n| Value::Node(n)).collect()),
            v => return type_err("nodes() needs a path", &v),
        },
        Relationships => match first {
            Value::Path(p) => Value::list(p.rels.iter().map(|&r| Value::Rel(r)).collect()),
            v => return type_err("relationships() needs a path", &v),
        },
        Length => match first {
            Value::Path(p) => Value::Int(p.rels.len() as i64),
            Value::List(l) => Value::Int(l.len() as i64),
            Value::Str(s) => Value::Int(s.chars().count() as i64),
            v => return type_err("length() needs a path", &v),
        },
        Size => match first {
            Value::List(l) => Value::Int(l.len() as i64),
            Value::Str(s) => Value::Int(s.chars().count() as i64),
            Value::Map(m) => Value::Int(m.len() as i64),
            v => return type_err("size() needs a list or string", &v),
        },
        // Quantifiers, over the predicate's values (see the parser): three-valued.
        All | Any | NoneOf | Single => match first {
            Value::List(l) => {
                let (mut t, mut n) = (0usize, 0usize);
                for v in l.iter() {
                    match v {
                        Value::Bool(true) => t += 1,
                        Value::Bool(false) => {}
                        Value::Null => n += 1,
                        v => return type_err("a quantifier's predicate must be a boolean", v),
                    }
                }
                let f_ = l.len() - t - n;
                match f {
                    All if f_ > 0 => Value::Bool(false),
                    Any if t > 0 => Value::Bool(true),
                    NoneOf if t > 0 => Value::Bool(false),
                    Single if t > 1 => Value::Bool(false),
                    _ if n > 0 => Value::Null,
                    All => Value::Bool(true),
                    Any => Value::Bool(false),
                    NoneOf => Value::Bool(true),
                    _ => Value::Bool(t == 1),
                }
            }
            v => return type_err("a quantifier needs a list", &v),
        },
        Exists2 => match first {
            Value::List(l) => Value::Bool(l.is_empty()),
            Value::Str(s) => Value::Bool(s.is_empty()),
            Value::Map(m) => Value::Bool(m.is_empty()),
            v => return type_err("isEmpty() needs a list, string or map", &v),
        },
        Head | Last => match first {
            Value::List(l) => {
                let x = if f == Head { l.first() } else { l.last() };
                x.cloned().unwrap_or(Value::Null)
            }
            v => return type_err("head()/last() need a list", &v),
        },
        Tail => match first {
            Value::List(l) => Value::list(l.iter().skip(1).cloned().collect()),
            v => return type_err("tail() needs a list", &v),
        },
        Reverse => match first {
            Value::List(l) => Value::list(l.iter().rev().cloned().collect()),
            Value::Str(s) => Value::str(&s.chars().rev().collect::<String>()),
            v => return type_err("reverse() needs a list or string", &v),
        },
        Range => {
            argc(f, a, 2, 3)?;
            // Integers only (openCypher: an ArgumentError, not a coercion of 1.0).
            let int = |v: &Value, what: &str| match v {
                Value::Int(i) => Ok(Some(*i)),
                Value::Null => Ok(None),
                v => Err(QueryError::Argument(format!(
                    "range() needs an integer {what}, got {} ({})",
                    v.type_name(),
                    show(v)
                ))),
            };
            let (lo, hi) = (int(&a[0], "start")?, int(&a[1], "end")?);
            let step = match a.get(2) {
                Some(s) => int(s, "step")?,
                None => Some(1),
            };
            let (Some(lo), Some(hi), Some(step)) = (lo, hi, step) else {
                return Ok(Value::Null);
            };
            if step == 0 {
                return Err(QueryError::Argument("range() step must not be 0".into()));
            }
            let n = if (step > 0 && hi >= lo) || (step < 0 && hi <= lo) {
                ((hi as i128 - lo as i128) / step as i128 + 1) as u128
            } else {
                0
            };
            if n > RANGE_MAX {
                return Err(QueryError::Argument(format!(
                    "range() of {n} values is longer than the {RANGE_MAX} allowed; UNWIND smaller ranges"
                )));
            }
            Value::list((0..n as i64).map(|i| Value::Int(lo + i * step)).collect())
        }
        Coalesce => a
            .iter()
            .find(|v| !v.is_null())
            .cloned()
            .unwrap_or(Value::Null),
        ToInteger => match first {
            Value::Int(i) => Value::Int(i),
            Value::Float(x) if x.is_finite() => Value::Int(x.trunc() as i64),
            Value::Bool(b) => Value::Int(b as i64),
            Value::Str(s) => quiver_csv::value::parse_i64(s.trim().as_bytes())
                .map(Value::Int)
                .or_else(|| {
                    s.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite())
                        .map(|x| Value::Int(x.trunc() as i64))
                })
                .unwrap_or(Value::Null),
            Value::Float(_) => Value::Null,
            v => return type_err("toInteger() needs a number, boolean or string", &v),
        },
        ToFloat => match first {
            Value::Int(i) => Value::Float(i as f64),
            Value::Float(x) => Value::Float(x),
            Value::Str(s) => s
                .trim()
                .parse::<f64>()
                .map(Value::Float)
                .unwrap_or(Value::Null),
            v => return type_err("toFloat() needs a number or string", &v),
        },
        ToString => match first {
            v @ (Value::List(_)
            | Value::Map(_)
            | Value::Node(_)
            | Value::Rel(_)
            | Value::Path(_)) => return type_err("toString() needs a scalar", &v),
            v => Value::str(&to_string(&v)),
        },
        ToBoolean => match first {
            Value::Bool(b) => Value::Bool(b),
            Value::Int(i) => Value::Bool(i != 0),
            Value::Str(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => Value::Null,
            },
            v => return type_err("toBoolean() needs a boolean, integer or string", &v),
        },
        Abs => match first {
            Value::Int(i) => Value::Int(i.checked_abs().ok_or_else(|| overflow("abs"))?),
            Value::Float(x) => Value::Float(x.abs()),
            v => return type_err("abs() needs a number", &v),
        },
        Sign => match first {
            Value::Int(i) => Value::Int(i.signum()),
            Value::Float(x) => Value::Int(if x > 0.0 {
                1
            } else if x < 0.0 {
                -1
            } else {
                0
            }),
            v => return type_err("sign() needs a number", &v),
        },
        Ceil | Floor | Sqrt | Log | Log10 | Exp => {
            let Some(x) = num(&first) else {
                return type_err(&format!("{f:?}() needs a number"), &first);
            };
            Value::Float(match f {
                Ceil => x.ceil(),
                Floor => x.floor(),
                Sqrt => x.sqrt(),
                Log => x.ln(),
                Log10 => x.log10(),
                _ => x.exp(),
            })
        }
        Round => {
            argc(f, a, 1, 2)?;
            if first.is_null() {
                return Ok(Value::Null);
            }
            let Some(x) = num(&first) else {
                return type_err("round() needs a number", &first);
            };
            let p = match a.get(1) {
                Some(p) => int_arg(p, "round()")?.unwrap_or(0),
                None => 0,
            };
            let m = 10f64.powi(p as i32);
            // Half away from zero... except Cypher rounds half up (towards +inf).
            Value::Float((x * m + 0.5).floor() / m)
        }
        Rand => {
            argc(f, a, 0, 0)?;
            Value::Float(rand::random::<f64>())
        }
        E => Value::Float(std::f64::consts::E),
        Pi => Value::Float(std::f64::consts::PI),
        Timestamp => Value::Int(now_us() / 1000),
        ToUpper | ToLower | Trim | LTrim | RTrim => {
            let Some(s) = str_arg(&first, "string functions")? else {
                return Ok(Value::Null);
            };
            Value::str(&match f {
                ToUpper => s.to_uppercase(),
                ToLower => s.to_lowercase(),
                Trim => s.trim().to_string(),
                LTrim => s.trim_start().to_string(),
                _ => s.trim_end().to_string(),
            })
        }
        Substring => {
            argc(f, a, 2, 3)?;
            let Some(s) = str_arg(&a[0], "substring()")? else {
                return Ok(Value::Null);
            };
            let start = int_arg(&a[1], "substring()")?.unwrap_or(0).max(0) as usize;
            let len = match a.get(2) {
                Some(l) => int_arg(l, "substring()")?.unwrap_or(i64::MAX).max(0) as usize,
                None => usize::MAX,
            };
            Value::str(&s.chars().skip(start).take(len).collect::<String>())
        }
        Left | Right => {
            argc(f, a, 2, 2)?;
            let Some(s) = str_arg(&a[0], "left()/right()")? else {
                return Ok(Value::Null);
            };
            let n = int_arg(&a[1], "left()/right()")?.unwrap_or(0).max(0) as usize;
            let count = s.chars().count();
            Value::str(&if f == Left {
                s.chars().take(n).collect::<String>()
            } else {
                s.chars().skip(count.saturating_sub(n)).collect::<String>()
            })
        }
        Replace => {
            argc(f, a, 3, 3)?;
            match (
                str_arg(&a[0], "replace()")?,
                str_arg(&a[1], "replace()")?,
                str_arg(&a[2], "replace()")?,
            ) {
                (Some(s), Some(x), Some(y)) => Value::str(&s.replace(x, y)),
                _ => Value::Null,
            }
        }
        Split => {
            argc(f, a, 2, 2)?;
            match (str_arg(&a[0], "split()")?, str_arg(&a[1], "split()")?) {
                (Some(s), Some(d)) => Value::list(s.split(d).map(Value::str).collect()),
                _ => Value::Null,
            }
        }
        Date | DateTime | LocalDateTime => {
            argc(f, a, 0, 1)?;
            let now = now_us();
            match a.first() {
                None => match f {
                    Date => Value::Date(now.div_euclid(86_400_000_000)),
                    DateTime => Value::DateTime(now),
                    _ => Value::LocalDateTime(now),
                },
                Some(Value::Null) => Value::Null,
                Some(Value::Str(s)) => {
                    let b = s.as_bytes();
                    let parsed = match f {
                        Date => quiver_csv::value::parse_date(b).map(Value::Date),
                        DateTime => quiver_csv::value::parse_datetime(b)
                            .or_else(|| parse_zoned(s))
                            .map(Value::DateTime),
                        _ => quiver_csv::value::parse_local_datetime(b).map(Value::LocalDateTime),
                    };
                    parsed.ok_or_else(|| {
                        QueryError::Argument(format!("{f:?}(): cannot parse '{s}'"))
                    })?
                }
                Some(Value::Map(m)) => temporal_from_map(f, m)?,
                Some(v) => match (f, v) {
                    (Date, Value::Date(d)) => Value::Date(*d),
                    (Date, Value::LocalDateTime(t) | Value::DateTime(t)) => {
                        Value::Date(t.div_euclid(86_400_000_000))
                    }
                    (DateTime, Value::LocalDateTime(t) | Value::DateTime(t)) => Value::DateTime(*t),
                    (LocalDateTime, Value::LocalDateTime(t) | Value::DateTime(t)) => {
                        Value::LocalDateTime(*t)
                    }
                    _ => return type_err(&format!("{f:?}() needs a string or map"), v),
                },
            }
        }
        Exists => match first {
            Value::Bool(b) => Value::Bool(b),
            _ => Value::Bool(true),
        },
    })
}
