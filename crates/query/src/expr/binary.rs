//! Binary operators: arithmetic with overflow checks, comparison, string and list
//! operators, regular expressions.

use super::*;

pub(super) fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// [`binary`] with integer comparisons and arithmetic inline (the common case in
/// filters over integer properties).
#[inline]
pub(super) fn binary_fast(op: BinOp, l: &Value, r: &Value) -> Result<Value, QueryError> {
    use BinOp::*;
    if let (Value::Int(a), Value::Int(b)) = (l, r) {
        let v = match op {
            Eq => a == b,
            Ne => a != b,
            Lt => a < b,
            Le => a <= b,
            Gt => a > b,
            Ge => a >= b,
            _ => return binary(op, l, r),
        };
        return Ok(Value::Bool(v));
    }
    binary(op, l, r)
}

/// A binary operator other than AND / OR / XOR.
pub fn binary(op: BinOp, l: &Value, r: &Value) -> Result<Value, QueryError> {
    use BinOp::*;
    if matches!(op, Eq | Ne) {
        return Ok(match l.eq3(r) {
            Some(e) => Value::Bool(e == (op == Eq)),
            None => Value::Null,
        });
    }
    if op == In {
        return Ok(match r {
            Value::Null => Value::Null,
            Value::List(items) => {
                let mut unknown = false;
                for x in items.iter() {
                    match l.eq3(x) {
                        Some(true) => return Ok(Value::Bool(true)),
                        None => unknown = true,
                        Some(false) => {}
                    }
                }
                if unknown {
                    Value::Null
                } else {
                    Value::Bool(false)
                }
            }
            _ => return type_err("IN needs a list on its right", r),
        });
    }
    if l.is_null() || r.is_null() {
        return Ok(Value::Null);
    }
    Ok(match op {
        Lt | Le | Gt | Ge => match l.cmp3(r) {
            // NaN is a number no number orders against: false, not null.
            None if is_nan(l) && is_number(r) || is_nan(r) && is_number(l) => Value::Bool(false),
            None => Value::Null,
            Some(o) => Value::Bool(match op {
                Lt => o == Ordering::Less,
                Le => o != Ordering::Greater,
                Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            }),
        },
        StartsWith | EndsWith | Contains => match (l, r) {
            (Value::Str(a), Value::Str(b)) => Value::Bool(match op {
                StartsWith => a.starts_with(&**b),
                EndsWith => a.ends_with(&**b),
                _ => a.contains(&**b),
            }),
            _ => Value::Null,
        },
        Regex => match (l, r) {
            (Value::Str(a), Value::Str(p)) => {
                let re = compile_regex(p)?;
                Value::Bool(re.is_match(a))
            }
            _ => Value::Null,
        },
        Add => match (l, r) {
            (Value::Int(a), Value::Int(b)) => {
                Value::Int(a.checked_add(*b).ok_or_else(|| overflow("+"))?)
            }
            (Value::Str(a), Value::Str(b)) => Value::str(&format!("{a}{b}")),
            (Value::Str(a), b) if !matches!(b, Value::List(_)) => {
                Value::str(&format!("{a}{}", to_string(b)))
            }
            (a, Value::Str(b)) if !matches!(a, Value::List(_)) => {
                Value::str(&format!("{}{b}", to_string(a)))
            }
            (Value::List(a), Value::List(b)) => {
                Value::list(a.iter().chain(b.iter()).cloned().collect())
            }
            (Value::List(a), b) => Value::list(a.iter().cloned().chain([b.clone()]).collect()),
            (a, Value::List(b)) => {
                Value::list([a.clone()].into_iter().chain(b.iter().cloned()).collect())
            }
            _ => arith(op, l, r)?,
        },
        _ => arith(op, l, r)?,
    })
}

pub fn compile_regex(p: &str) -> Result<regex::Regex, QueryError> {
    // Cypher's =~ matches the whole string.
    regex::Regex::new(&format!("^(?:{p})$"))
        .map_err(|e| QueryError::Argument(format!("invalid regular expression '{p}': {e}")))
}

pub(super) fn arith(op: BinOp, l: &Value, r: &Value) -> Result<Value, QueryError> {
    use BinOp::*;
    if let Some(v) = temporal::arith(op, l, r) {
        return v;
    }
    if let (Value::Int(a), Value::Int(b)) = (l, r) {
        let (a, b) = (*a, *b);
        return Ok(Value::Int(match op {
            Sub => a.checked_sub(b).ok_or_else(|| overflow("-"))?,
            Mul => a.checked_mul(b).ok_or_else(|| overflow("*"))?,
            Div => {
                if b == 0 {
                    return Err(QueryError::Argument("division by zero".into()));
                }
                a.wrapping_div(b)
            }
            Mod => {
                if b == 0 {
                    return Err(QueryError::Argument("modulo by zero".into()));
                }
                a.wrapping_rem(b)
            }
            Pow => return Ok(Value::Float((a as f64).powf(b as f64))),
            _ => return type_err("unexpected operator", l),
        }));
    }
    let (Some(a), Some(b)) = (num(l), num(r)) else {
        let bad = if num(l).is_none() { l } else { r };
        return type_err(&format!("arithmetic ({op:?}) needs numbers"), bad);
    };
    Ok(Value::Float(match op {
        Add => a + b,
        Sub => a - b,
        Mul => a * b,
        Div => a / b,
        Mod => a % b,
        Pow => a.powf(b),
        _ => return type_err("unexpected operator", l),
    }))
}

fn is_number(v: &Value) -> bool {
    matches!(v, Value::Int(_) | Value::Float(_))
}

fn is_nan(v: &Value) -> bool {
    matches!(v, Value::Float(f) if f.is_nan())
}
