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

pub(super) fn temporal_from_map(m: &[(Arc<str>, Value)]) -> Result<(i64, i64), QueryError> {
    let get = |k: &str, d: i64| -> Result<i64, QueryError> {
        match m.iter().find(|(n, _)| n.eq_ignore_ascii_case(k)) {
            Some((_, v)) => Ok(int_arg(v, k)?.unwrap_or(d)),
            None => Ok(d),
        }
    };
    let (y, mo, d) = (get("year", 1970)?, get("month", 1)?, get("day", 1)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return Err(QueryError::Argument(format!("invalid date {y}-{mo}-{d}")));
    }
    let days = quiver_csv::value::days_from_civil(y, mo as u32, d as u32);
    let tod = get("hour", 0)? * 3_600_000_000
        + get("minute", 0)? * 60_000_000
        + get("second", 0)? * 1_000_000
        + get("millisecond", 0)? * 1000
        + get("microsecond", 0)?;
    Ok((days, tod))
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
            let (Some(lo), Some(hi)) = (int_arg(&a[0], "range()")?, int_arg(&a[1], "range()")?)
            else {
                return Ok(Value::Null);
            };
            let step = match a.get(2) {
                Some(s) => int_arg(s, "range()")?.unwrap_or(1),
                None => 1,
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
                        DateTime => quiver_csv::value::parse_datetime(b).map(Value::DateTime),
                        _ => quiver_csv::value::parse_local_datetime(b).map(Value::LocalDateTime),
                    };
                    parsed.ok_or_else(|| {
                        QueryError::Argument(format!("{f:?}(): cannot parse '{s}'"))
                    })?
                }
                Some(Value::Map(m)) => {
                    let (days, tod) = temporal_from_map(m)?;
                    match f {
                        Date => Value::Date(days),
                        DateTime => Value::DateTime(days * 86_400_000_000 + tod),
                        _ => Value::LocalDateTime(days * 86_400_000_000 + tod),
                    }
                }
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
