//! Built-in functions (`call`), their argument checks, and temporal values.

use super::*;

/// `toString` of a value (also used by string concatenation).
pub fn to_string(v: &Value) -> String {
    let mut s = String::new();
    match v {
        Value::Str(x) => return x.to_string(),
        Value::Int(i) => return i.to_string(),
        Value::Float(f) => return format_float(*f),
        Value::Bool(b) => return b.to_string(),
        Value::Null => return "null".into(),
        // Bytes as hex, `0x` first (Cypher has no text form for them).
        Value::Bytes(b) => {
            s.push_str("0x");
            for x in b.iter() {
                s.push_str(&format!("{x:02x}"));
            }
        }
        v if temporal::format(v, &mut s).is_some() => {}
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

/// The names a `$(expr)` label or type gives: a string or a list of strings, none
/// empty (`what` names the kind in the error).
pub(crate) fn dyn_names(v: &Value, what: &str, out: &mut Vec<Arc<str>>) -> Result<(), QueryError> {
    let bad = |v: &Value| {
        QueryError::ty(format!(
            "a dynamic {what} $(...) must be a string or a list of strings, got {}",
            v.type_name()
        ))
    };
    match v {
        Value::Str(s) => out.push(s.clone()),
        Value::List(l) => {
            for v in l.iter() {
                match v {
                    Value::Str(s) => out.push(s.clone()),
                    other => return Err(bad(other)),
                }
            }
        }
        other => return Err(bad(other)),
    }
    if out.iter().any(|l| l.is_empty()) {
        return Err(QueryError::InvalidArgument(
            Detail::InvalidArgumentValue,
            format!("a {what} cannot be the empty string"),
        ));
    }
    Ok(())
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

/// The temporal type a temporal function builds.
pub(crate) fn temporal_kind(f: Func) -> temporal::Kind {
    use Func::*;
    match f {
        Date | DateClock | DateTrunc => temporal::Kind::Date,
        LocalTime | LocalTimeClock | LocalTimeTrunc => temporal::Kind::LocalTime,
        Time | TimeClock | TimeTrunc => temporal::Kind::Time,
        LocalDateTime | LocalDateTimeClock | LocalDateTimeTrunc => temporal::Kind::LocalDateTime,
        _ => temporal::Kind::DateTime,
    }
}

/// `toInteger` of a string: an integer, else a finite float truncated, else none
/// (also read by LOAD CSV's columnar path, straight from the file's bytes).
pub(crate) fn int_of_str(s: &str) -> Option<i64> {
    let t = s.trim();
    quiver_csv::value::parse_i64(t.as_bytes()).or_else(|| {
        t.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .map(|x| x.trunc() as i64)
    })
}

/// `toFloat` of a string.
pub(crate) fn float_of_str(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok()
}

/// `toBoolean` of a string.
pub(crate) fn bool_of_str(s: &str) -> Option<bool> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("true") {
        Some(true)
    } else if t.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
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
            | Exists
            | Log
            | Log10
            | Exp
            | Exists2
            | All
            | Any
            | NoneOf
            | Single
            | Acos
            | Asin
            | Atan
            | Cos
            | Cot
            | Degrees
            | Haversin
            | Radians
            | Sin
            | Tan
            | IsNaN
            | CharLength
            | ToBooleanOrNull
            | ToFloatOrNull
            | ToIntegerOrNull
            | ToStringOrNull
            | ToBooleanList
            | ToFloatList
            | ToIntegerList
            | ToStringList
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
        // GDS's: a node id (as its algorithms stream them) back to the node; null for
        // an id no live node has.
        GdsAsNode => match first {
            Value::Int(i) if i >= 0 && g.node_live(i as u64) => Value::Node(i as u64),
            Value::Int(_) | Value::Null => Value::Null,
            Value::Node(n) => Value::Node(n),
            v => return type_err("gds.util.asNode() needs a node id", &v),
        },
        GdsAsNodes => match first {
            Value::List(l) => Value::list(
                l.iter()
                    .filter_map(|x| match x {
                        Value::Int(i) if *i >= 0 && g.node_live(*i as u64) => {
                            Some(Value::Node(*i as u64))
                        }
                        Value::Node(n) => Some(Value::Node(*n)),
                        _ => None,
                    })
                    .collect(),
            ),
            Value::Null => Value::Null,
            v => return type_err("gds.util.asNodes() needs a list of node ids", &v),
        },
        GdsVersion => Value::str("2.13.9"),
        Id => match first {
            Value::Node(n) => Value::Int(n as i64),
            Value::Rel(r) => Value::Int(((r.ty as i64) << 40) | r.eid as i64),
            v => return type_err("id() needs a node or relationship", &v),
        },
        // The same text the Bolt server gives a node's and a relationship's element id
        // (`quiver_bolt::values`): drivers and the libraries on them (OGMs, the Browser)
        // send it back in `WHERE elementId(n) = $id`.
        ElementId => match first {
            Value::Node(n) => Value::str(&n.to_string()),
            Value::Rel(r) => Value::str(&format!("{}:{}", r.ty, r.eid)),
            v => return type_err("elementId() needs a node or relationship", &v),
        },
        Labels => match first {
            Value::Node(n) if g.node_deleted(n) => {
                return Err(QueryError::EntityNotFound(format!(
                    "node {n} was deleted earlier in this transaction; its labels cannot be read"
                )))
            }
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
            let Some((lo, step, n)) = range_bounds(a)? else {
                return Ok(Value::Null);
            };
            // The list is made whole: it must fit in the query's memory.
            let bytes = n
                .saturating_mul(std::mem::size_of::<Value>() as u128)
                .min(u64::MAX as u128) as u64;
            let _grant = match &env.budget {
                Some(b) => Some(b.try_grant(bytes, "range()").map_err(|e| {
                    QueryError::Memory {
                        operator: "range() (UNWIND streams a range instead)",
                        limit: quiver_common::size::human_bytes(e.limit_bytes),
                        asked: quiver_common::size::human_bytes(e.asked_bytes),
                        database: e.limit_bytes != b.limit_bytes(),
                        waited: String::new(),
                    }
                })?),
                None if n > RANGE_MAX => {
                    return Err(QueryError::Argument(format!(
                        "range() of {n} values is longer than the {RANGE_MAX} a constant may have; UNWIND streams a range of any length"
                    )))
                }
                None => None,
            };
            Value::list((0..n as i64).map(|i| Value::Int(lo + i * step)).collect())
        }
        Coalesce => a
            .iter()
            .find(|v| !v.is_null())
            .cloned()
            .unwrap_or(Value::Null),
        ToInteger | ToFloat | ToString | ToBoolean => match convert(f, &first) {
            Some(v) => v,
            None => {
                let what = match f {
                    ToInteger => "toInteger() needs a number, boolean or string",
                    ToFloat => "toFloat() needs a number or string",
                    ToString => "toString() needs a scalar",
                    _ => "toBoolean() needs a boolean, integer or string",
                };
                return type_err(what, &first);
            }
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
            argc(f, a, 1, 3)?;
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
            let Some(mode) = a.get(2) else {
                // Half away from zero... except Cypher rounds half up (towards +inf).
                return Ok(Value::Float((x * m + 0.5).floor() / m));
            };
            let Some(mode) = str_arg(mode, "round()")? else {
                return Ok(Value::Null);
            };
            let (y, sign) = ((x * m).abs(), x.signum());
            Value::Float(
                match mode.to_ascii_uppercase().as_str() {
                    "UP" => sign * y.ceil(),
                    "DOWN" => sign * y.floor(),
                    "CEILING" => (x * m).ceil(),
                    "FLOOR" => (x * m).floor(),
                    "HALF_UP" => sign * (y + 0.5).floor(),
                    "HALF_DOWN" => sign * (y - 0.5).ceil(),
                    "HALF_EVEN" => (x * m).round_ties_even(),
                    other => {
                        return Err(QueryError::Argument(format!(
                            "round(): unknown rounding mode '{other}' (UP, DOWN, CEILING, FLOOR, HALF_UP, HALF_DOWN or HALF_EVEN)"
                        )))
                    }
                } / m,
            )
        }
        Rand => {
            argc(f, a, 0, 0)?;
            Value::Float(rand::random::<f64>())
        }
        E => Value::Float(std::f64::consts::E),
        Pi => Value::Float(std::f64::consts::PI),
        Timestamp => Value::Int(g.now().as_millisecond()),
        ToUpper | ToLower | Trim => {
            let Some(s) = str_arg(&first, "string functions")? else {
                return Ok(Value::Null);
            };
            Value::str(&match f {
                ToUpper => s.to_uppercase(),
                ToLower => s.to_lowercase(),
                _ => s.trim().to_string(),
            })
        }
        // Neo4j 5: an optional string of characters to trim (whitespace without it).
        LTrim | RTrim | BTrim => {
            argc(f, a, 1, 2)?;
            let (Some(s), chars) = (
                str_arg(&a[0], "ltrim()/rtrim()/btrim()")?,
                match a.get(1) {
                    Some(c) => match str_arg(c, "ltrim()/rtrim()/btrim()")? {
                        Some(c) => Some(c),
                        None => return Ok(Value::Null),
                    },
                    None => None,
                },
            ) else {
                return Ok(Value::Null);
            };
            let trim = |c: char| chars.map_or(c.is_whitespace(), |set| set.contains(c));
            Value::str(match f {
                LTrim => s.trim_start_matches(trim),
                RTrim => s.trim_end_matches(trim),
                _ => s.trim_matches(trim),
            })
        }
        CharLength => match first {
            Value::Str(s) => Value::Int(s.chars().count() as i64),
            v => return type_err("char_length() needs a string", &v),
        },
        Normalize => {
            argc(f, a, 1, 2)?;
            use unicode_normalization::UnicodeNormalization;
            let Some(s) = str_arg(&a[0], "normalize()")? else {
                return Ok(Value::Null);
            };
            let form = match a.get(1) {
                None => "NFC".to_string(),
                Some(v) => match v {
                    Value::Str(x) => x.to_ascii_uppercase(),
                    v => return type_err("normalize() needs a form (NFC, NFD, NFKC, NFKD)", v),
                },
            };
            Value::str(&match form.as_str() {
                "NFC" => s.nfc().collect::<String>(),
                "NFD" => s.nfd().collect(),
                "NFKC" => s.nfkc().collect(),
                "NFKD" => s.nfkd().collect(),
                other => {
                    return Err(QueryError::Argument(format!(
                        "normalize(): unknown normal form '{other}' (NFC, NFD, NFKC or NFKD)"
                    )))
                }
            })
        }
        Acos | Asin | Atan | Cos | Cot | Degrees | Haversin | Radians | Sin | Tan => {
            let Some(x) = num(&first) else {
                return type_err(&format!("{f:?}() needs a number"), &first);
            };
            Value::Float(match f {
                Acos => x.acos(),
                Asin => x.asin(),
                Atan => x.atan(),
                Cos => x.cos(),
                Cot => 1.0 / x.tan(),
                Degrees => x.to_degrees(),
                Haversin => (1.0 - x.cos()) / 2.0,
                Radians => x.to_radians(),
                Sin => x.sin(),
                _ => x.tan(),
            })
        }
        Atan2 => {
            argc(f, a, 2, 2)?;
            match (&a[0], &a[1]) {
                (Value::Null, _) | (_, Value::Null) => Value::Null,
                (y, x) => match (num(y), num(x)) {
                    (Some(y), Some(x)) => Value::Float(y.atan2(x)),
                    _ => {
                        return type_err(
                            "atan2() needs numbers",
                            if num(y).is_none() { y } else { x },
                        )
                    }
                },
            }
        }
        IsNaN => match first {
            Value::Float(x) => Value::Bool(x.is_nan()),
            Value::Int(_) => Value::Bool(false),
            v => return type_err("isNaN() needs a number", &v),
        },
        NullIf => {
            argc(f, a, 2, 2)?;
            if a[0].eq3(&a[1]) == Some(true) {
                Value::Null
            } else {
                a[0].clone()
            }
        }
        RandomUuid => {
            argc(f, a, 0, 0)?;
            let mut b: [u8; 16] = rand::random();
            b[6] = (b[6] & 0x0f) | 0x40; // version 4
            b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
            let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
            Value::str(&format!(
                "{}-{}-{}-{}-{}",
                &h[0..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..32]
            ))
        }
        ValueType => {
            argc(f, a, 1, 1)?;
            Value::str(&value_type(&first))
        }
        ToBooleanOrNull | ToFloatOrNull | ToIntegerOrNull | ToStringOrNull => or_null(f, first),
        ToBooleanList | ToFloatList | ToIntegerList | ToStringList => match first {
            Value::List(l) => {
                let each = match f {
                    ToBooleanList => ToBooleanOrNull,
                    ToFloatList => ToFloatOrNull,
                    ToIntegerList => ToIntegerOrNull,
                    _ => ToStringOrNull,
                };
                Value::list(l.iter().map(|v| or_null(each, v.clone())).collect())
            }
            v => return type_err(&format!("{f:?}() needs a list"), &v),
        },
        // Neo4j's scores, in [0, 1]: (1 + cosine) / 2, and 1 / (1 + squared distance).
        VecCosine | VecEuclidean => {
            argc(f, a, 2, 2)?;
            let (Some(x), Some(y)) = (vector(&a[0])?, vector(&a[1])?) else {
                return Ok(Value::Null);
            };
            if x.len() != y.len() {
                return Err(QueryError::Argument(format!(
                    "{f:?}(): vectors of {} and {} dimensions",
                    x.len(),
                    y.len()
                )));
            }
            if f == VecCosine {
                let dot: f64 = x.iter().zip(&y).map(|(p, q)| p * q).sum();
                let nx = x.iter().map(|p| p * p).sum::<f64>().sqrt();
                let ny = y.iter().map(|q| q * q).sum::<f64>().sqrt();
                if nx == 0.0 || ny == 0.0 {
                    Value::Null
                } else {
                    Value::Float((1.0 + dot / (nx * ny)) / 2.0)
                }
            } else {
                let d2: f64 = x.iter().zip(&y).map(|(p, q)| (p - q) * (p - q)).sum();
                Value::Float(1.0 / (1.0 + d2))
            }
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
        // APOC's: the map without the keys of the second list, the entries whose value
        // (as a string) is in the third, and the null ones.
        MapClean => {
            argc(f, a, 3, 3)?;
            let Value::Map(m) = &a[0] else {
                return match &a[0] {
                    Value::Null => Ok(Value::Null),
                    v => type_err("apoc.map.clean() needs a map", v),
                };
            };
            let list = |v: &Value| match v {
                Value::Null => Ok(Vec::new()),
                Value::List(l) => Ok(l.iter().map(to_string).collect::<Vec<_>>()),
                v => type_err("apoc.map.clean() needs lists of keys and values", v),
            };
            let (keys, values) = (list(&a[1])?, list(&a[2])?);
            let kept: Vec<(Arc<str>, Value)> = m
                .iter()
                .filter(|(k, v)| {
                    !v.is_null()
                        && !keys.iter().any(|x| **x == **k)
                        && !values.contains(&to_string(v))
                })
                .cloned()
                .collect();
            Value::Map(Arc::new(kept))
        }
        // APOC's: the entries of both maps, the second's winning; null is no entries.
        MapMerge => {
            argc(f, a, 2, 2)?;
            let entries = |v: &Value| match v {
                Value::Null => Ok(Vec::new()),
                Value::Map(m) => Ok(m.to_vec()),
                v => type_err("apoc.map.merge() needs maps", v),
            };
            let mut out = entries(&a[0])?;
            for (k, v) in entries(&a[1])? {
                match out.iter_mut().find(|(x, _)| *x == k) {
                    Some(e) => e.1 = v,
                    None => out.push((k, v)),
                }
            }
            Value::Map(Arc::new(out))
        }
        // APOC's: the list's values without repeats (by equivalence, as DISTINCT), in
        // order of first occurrence.
        CollToSet => {
            argc(f, a, 1, 1)?;
            match first {
                Value::Null => Value::Null,
                Value::List(l) => {
                    let mut seen = std::collections::HashSet::new();
                    Value::list(
                        l.iter()
                            .filter(|v| seen.insert(quiver_engine::value::Key((*v).clone())))
                            .cloned()
                            .collect(),
                    )
                }
                v => return type_err("apoc.coll.toSet() needs a list", &v),
            }
        }
        // `(n:$(e))` in MATCH and MERGE: whether node n has every label e names.
        HasLabelsDyn => {
            argc(f, a, 2, 2)?;
            let mut named = Vec::new();
            dyn_names(&a[1], "label", &mut named)?;
            match first {
                Value::Null => Value::Null,
                Value::Node(n) => {
                    let mut all = true;
                    for l in &named {
                        all &= match g.label_id(l) {
                            Some(id) => g.has_label(n, id)?,
                            None => false,
                        };
                        if !all {
                            break;
                        }
                    }
                    Value::Bool(all)
                }
                v => return type_err("a label given by $(...) belongs to a node", &v),
            }
        }
        // `-[r:A|$(e)]-` in MATCH and MERGE: whether r's type is one of those named.
        HasTypeDyn => {
            argc(f, a, 2, usize::MAX)?;
            let mut named = Vec::new();
            for x in &a[1..] {
                dyn_names(x, "relationship type", &mut named)?;
            }
            match first {
                Value::Null => Value::Null,
                Value::Rel(r) => {
                    let t = g.rel_type_name(r.ty);
                    Value::Bool(named.iter().any(|n| *n == t))
                }
                v => return type_err("a type given by $(...) belongs to a relationship", &v),
            }
        }
        // APOC's: a property of a node, a relationship or a map (null for others).
        AnyProperty => {
            argc(f, a, 2, 2)?;
            match (&first, &a[1]) {
                (Value::Null, _) | (_, Value::Null) => Value::Null,
                (Value::Node(_) | Value::Rel(_) | Value::Map(_), Value::Str(k)) => {
                    prop(env, &first, k)?
                }
                (_, Value::Str(_)) => Value::Null,
                (_, k) => return type_err("apoc.any.property() needs a string key", k),
            }
        }
        // APOC's: a list's lists spliced in (one level), other values kept.
        CollFlatten => {
            argc(f, a, 1, 1)?;
            match first {
                Value::Null => Value::Null,
                Value::List(l) => {
                    let mut out = Vec::with_capacity(l.len());
                    for v in l.iter() {
                        match v {
                            Value::List(x) => out.extend(x.iter().cloned()),
                            v => out.push(v.clone()),
                        }
                    }
                    Value::list(out)
                }
                v => return type_err("apoc.coll.flatten() needs a list", &v),
            }
        }
        Split => {
            argc(f, a, 2, 2)?;
            match (str_arg(&a[0], "split()")?, str_arg(&a[1], "split()")?) {
                (Some(s), Some(d)) => Value::list(s.split(d).map(Value::str).collect()),
                _ => Value::Null,
            }
        }
        Date | DateTime | LocalDateTime | LocalTime | Time => {
            temporal::construct(temporal_kind(f), a, g.now())?
        }
        DateClock | LocalTimeClock | TimeClock | LocalDateTimeClock | DateTimeClock => {
            temporal::clock(temporal_kind(f), a, g.now())?
        }
        DateTrunc | LocalTimeTrunc | TimeTrunc | LocalDateTimeTrunc | DateTimeTrunc => {
            temporal::truncate(temporal_kind(f), a, g.now())?
        }
        Duration => temporal::duration(a)?,
        DurBetween | DurInMonths | DurInDays | DurInSeconds => {
            argc(f, a, 2, 2)?;
            let part = match f {
                DurBetween => temporal::Between::All,
                DurInMonths => temporal::Between::Months,
                DurInDays => temporal::Between::Days,
                _ => temporal::Between::Seconds,
            };
            temporal::between(&a[0], &a[1], part)?
        }
        FromEpoch => temporal::from_epoch(a, false)?,
        FromEpochMillis => temporal::from_epoch(a, true)?,
        Exists => match first {
            Value::Bool(b) => Value::Bool(b),
            _ => Value::Bool(true),
        },
    })
}

/// `toInteger`, `toFloat`, `toString` and `toBoolean` of a non-null value (`f` or its
/// `...OrNull` form): `None` for a type the conversion does not take (an error for the
/// plain form, null for `...OrNull`); text that does not read as the type is null.
fn convert(f: Func, v: &Value) -> Option<Value> {
    use Func::*;
    Some(match (f, v) {
        (ToInteger | ToIntegerOrNull, Value::Int(i)) => Value::Int(*i),
        (ToInteger | ToIntegerOrNull, Value::Float(x)) if x.is_finite() => {
            Value::Int(x.trunc() as i64)
        }
        (ToInteger | ToIntegerOrNull, Value::Float(_)) => Value::Null,
        (ToInteger | ToIntegerOrNull, Value::Bool(b)) => Value::Int(*b as i64),
        (ToInteger | ToIntegerOrNull, Value::Str(s)) => {
            int_of_str(s).map_or(Value::Null, Value::Int)
        }
        (ToFloat | ToFloatOrNull, Value::Int(i)) => Value::Float(*i as f64),
        (ToFloat | ToFloatOrNull, Value::Float(x)) => Value::Float(*x),
        (ToFloat | ToFloatOrNull, Value::Str(s)) => {
            float_of_str(s).map_or(Value::Null, Value::Float)
        }
        (ToBoolean | ToBooleanOrNull, Value::Bool(b)) => Value::Bool(*b),
        (ToBoolean | ToBooleanOrNull, Value::Int(i)) => Value::Bool(*i != 0),
        (ToBoolean | ToBooleanOrNull, Value::Str(s)) => {
            bool_of_str(s).map_or(Value::Null, Value::Bool)
        }
        (
            ToString | ToStringOrNull,
            Value::List(_) | Value::Map(_) | Value::Node(_) | Value::Rel(_) | Value::Path(_),
        ) => return None,
        (ToString | ToStringOrNull, v) => Value::str(&to_string(v)),
        _ => return None,
    })
}

/// `toXOrNull(v)`: the conversion, or null where `toX` would fail on the type.
fn or_null(f: Func, v: Value) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    convert(f, &v).unwrap_or(Value::Null)
}

/// A vector argument as floats (`None`: null).
fn vector(v: &Value) -> Result<Option<Vec<f64>>, QueryError> {
    match v {
        Value::Null => Ok(None),
        Value::List(l) => l
            .iter()
            .map(|x| num(x).ok_or(()))
            .collect::<Result<Vec<f64>, ()>>()
            .map(Some)
            .or_else(|_| type_err("a vector is a list of numbers", v)),
        v => type_err("a vector is a list of numbers", v),
    }
}

/// `valueType(v)`: Neo4j 5's name of the value's type, `NOT NULL` when it is not null;
/// a list's element types in Neo4j's order, joined by `|`.
pub(crate) fn value_type(v: &Value) -> String {
    fn base(v: &Value) -> (u8, String) {
        let (k, name) = match v {
            Value::Null => (0, "NULL".to_string()),
            Value::Bool(_) => (1, "BOOLEAN".into()),
            Value::Str(_) => (2, "STRING".into()),
            Value::Int(_) => (3, "INTEGER".into()),
            Value::Float(_) => (4, "FLOAT".into()),
            Value::Date(_) => (5, "DATE".into()),
            Value::LocalTime(_) => (6, "LOCAL TIME".into()),
            Value::Time(..) => (7, "ZONED TIME".into()),
            Value::LocalDateTime(_) => (8, "LOCAL DATETIME".into()),
            Value::DateTime(..) => (9, "ZONED DATETIME".into()),
            Value::Duration(_) => (10, "DURATION".into()),
            Value::Bytes(_) => (11, "BYTES".into()),
            Value::Node(_) => (12, "NODE".into()),
            Value::Rel(_) => (13, "RELATIONSHIP".into()),
            Value::Map(_) => (14, "MAP".into()),
            Value::List(l) => (15, list(l)),
            Value::Path(_) => (16, "PATH".into()),
        };
        (k, name)
    }
    fn list(l: &[Value]) -> String {
        let nulls = l.iter().any(Value::is_null);
        let mut inner: Vec<(u8, String)> = l.iter().filter(|v| !v.is_null()).map(base).collect();
        inner.sort();
        inner.dedup();
        let inner = if inner.is_empty() {
            if nulls { "NULL" } else { "NOTHING" }.to_string()
        } else {
            let tail = if nulls { "" } else { " NOT NULL" };
            inner
                .into_iter()
                .map(|(_, n)| format!("{n}{tail}"))
                .collect::<Vec<_>>()
                .join(" | ")
        };
        format!("LIST<{inner}>")
    }
    match v {
        Value::Null => "NULL".into(),
        v => format!("{} NOT NULL", base(v).1),
    }
}

/// `range(start, end[, step])`'s first value, step and length (`None`: a null
/// argument). Integers only (openCypher: an ArgumentError, not a coercion of 1.0).
pub(crate) fn range_bounds(a: &[Value]) -> Result<Option<(i64, i64, u128)>, QueryError> {
    argc(Func::Range, a, 2, 3)?;
    let int = |v: &Value, what: &str| match v {
        Value::Int(i) => Ok(Some(*i)),
        Value::Null => Ok(None),
        v => Err(QueryError::ArgumentValue(
            Detail::InvalidArgumentType,
            format!(
                "range() needs an integer {what}, got {} ({})",
                v.type_name(),
                show(v)
            ),
        )),
    };
    let (lo, hi) = (int(&a[0], "start")?, int(&a[1], "end")?);
    let step = match a.get(2) {
        Some(s) => int(s, "step")?,
        None => Some(1),
    };
    let (Some(lo), Some(hi), Some(step)) = (lo, hi, step) else {
        return Ok(None);
    };
    if step == 0 {
        return Err(QueryError::ArgumentValue(
            Detail::NumberOutOfRange,
            "range() step must not be 0".into(),
        ));
    }
    let n = if (step > 0 && hi >= lo) || (step < 0 && hi <= lo) {
        ((hi as i128 - lo as i128) / step as i128 + 1) as u128
    } else {
        0
    };
    Ok(Some((lo, step, n)))
}
