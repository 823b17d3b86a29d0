//! Compiled expressions and their evaluation.
//!
//! The planner compiles each AST expression once into a [`CExpr`]: variables become
//! column slots, parameters become constants, labels and relationship types are resolved,
//! constant regular expressions are compiled. [`eval_col`] evaluates an expression over a
//! whole batch, one dispatch per expression node per batch for the common shapes (slots,
//! constants, property reads, arithmetic, comparisons, boolean logic), reading a property
//! for a run of nodes from one column chunk; other shapes fall back to [`eval`] per row.

use crate::batch::Batch;
use crate::error::QueryError;
use crate::graph::Graph;
use crate::value::{PathVal, RelRef, Value};
use quiver_cypher::ast::{BinOp, Dir};
use std::cmp::Ordering;
use std::sync::Arc;

/// A step of a pattern predicate (`WHERE (a)-[:T]->(:L)`).
#[derive(Debug, Clone)]
pub struct PredStep {
    pub types: Vec<u32>,
    pub dir: Dir,
    pub min: u32,
    pub max: u32,
    pub labels: Vec<u32>,
    /// The node at the end of the step, when it is a bound variable.
    pub bound: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct PatternPred {
    pub start: usize,
    pub start_labels: Vec<u32>,
    pub steps: Vec<PredStep>,
    /// A label on a pattern that can never match (unknown label or type).
    pub impossible: bool,
}

#[derive(Debug, Clone)]
pub enum CExpr {
    Const(Value),
    Slot(usize),
    /// A list-comprehension variable (index into the local stack).
    Local(usize),
    Prop(Box<CExpr>, Arc<str>),
    List(Vec<CExpr>),
    Map(Vec<(Arc<str>, CExpr)>),
    Index(Box<CExpr>, Box<CExpr>),
    Slice(Box<CExpr>, Option<Box<CExpr>>, Option<Box<CExpr>>),
    /// `n:A:B`; `None` is a label the database does not have.
    HasLabels(Box<CExpr>, Vec<Option<u32>>),
    Not(Box<CExpr>),
    Neg(Box<CExpr>),
    Bin(BinOp, Box<CExpr>, Box<CExpr>),
    /// `=~` against a constant pattern, compiled once.
    RegexConst(Box<CExpr>, Arc<regex::Regex>),
    IsNull(Box<CExpr>, bool),
    Func(Func, Vec<CExpr>),
    Case {
        subject: Option<Box<CExpr>>,
        arms: Vec<(CExpr, CExpr)>,
        default: Option<Box<CExpr>>,
    },
    ListComp {
        local: usize,
        list: Box<CExpr>,
        pred: Option<Box<CExpr>>,
        map: Option<Box<CExpr>>,
    },
    Pattern(Arc<PatternPred>),
    /// Builds a path from node slots, relationship slots and relationship-list slots, in
    /// pattern order.
    MakePath(Vec<PathPart>),
}

#[derive(Debug, Clone, Copy)]
pub enum PathPart {
    Node(usize),
    Rel(usize),
    Rels(usize),
}

macro_rules! funcs {
    ($($v:ident = $s:literal),* $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Func { $($v),* }
        impl Func {
            pub fn from_name(n: &str) -> Option<Func> {
                match n { $($s => Some(Func::$v),)* _ => None }
            }
        }
    };
}

funcs! {
    Id = "id", ElementId = "elementid", Labels = "labels", Type = "type",
    Properties = "properties", Keys = "keys", StartNode = "startnode", EndNode = "endnode",
    Nodes = "nodes", Relationships = "relationships", Length = "length", Size = "size",
    Head = "head", Last = "last", Tail = "tail", Range = "range", Reverse = "reverse",
    Coalesce = "coalesce", ToInteger = "tointeger", ToFloat = "tofloat",
    ToString = "tostring", ToBoolean = "toboolean", Abs = "abs", Ceil = "ceil",
    Floor = "floor", Round = "round", Sqrt = "sqrt", Sign = "sign", Rand = "rand",
    ToUpper = "toupper", ToLower = "tolower", Trim = "trim", LTrim = "ltrim",
    RTrim = "rtrim", Substring = "substring", Left = "left", Right = "right",
    Replace = "replace", Split = "split", Date = "date", DateTime = "datetime",
    LocalDateTime = "localdatetime", Exists = "exists", Log = "log", Log10 = "log10",
    Exp = "exp", E = "e", Pi = "pi", Timestamp = "timestamp", Exists2 = "isempty",
}

/// Longest list `range()` builds (320 MiB of values): lists made by expressions are not
/// accounted against the query memory limit one by one, so they are capped instead.
const RANGE_MAX: u128 = 10_000_000;

/// What evaluation needs besides the row.
pub struct Env<'g, 'db> {
    pub g: &'g Graph<'db>,
}

fn type_err<T>(what: &str, v: &Value) -> Result<T, QueryError> {
    Err(QueryError::ty(format!(
        "{what}, got {} ({})",
        v.type_name(),
        show(v)
    )))
}

fn show(v: &Value) -> String {
    match v {
        Value::Str(s) => format!("'{s}'"),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        _ => v.type_name().to_lowercase(),
    }
}

/// A column of `e` over `b`, borrowed when `e` is a slot.
pub fn col<'b>(
    env: &Env,
    e: &CExpr,
    b: &'b Batch,
) -> Result<std::borrow::Cow<'b, [Value]>, QueryError> {
    Ok(match e {
        CExpr::Slot(i) => std::borrow::Cow::Borrowed(&b.cols[*i][..]),
        e => std::borrow::Cow::Owned(eval_col(env, e, b)?),
    })
}

/// Evaluates `e` over every row of `b`.
pub fn eval_col(env: &Env, e: &CExpr, b: &Batch) -> Result<Vec<Value>, QueryError> {
    let n = b.len;
    match e {
        CExpr::Slot(i) => Ok(b.cols[*i].clone()),
        CExpr::Const(c) => Ok(vec![c.clone(); n]),
        CExpr::Prop(x, name) => {
            // A slot is read in place, not copied.
            let owned;
            let base: &[Value] = match &**x {
                CExpr::Slot(i) => &b.cols[*i],
                x => {
                    owned = eval_col(env, x, b)?;
                    &owned
                }
            };
            if base
                .iter()
                .all(|v| matches!(v, Value::Node(_) | Value::Null))
            {
                let mut out = Vec::with_capacity(n);
                env.g.node_prop_batch(base, name, &mut out)?;
                return Ok(out);
            }
            let mut out = Vec::with_capacity(n);
            for v in base {
                out.push(prop(env, v, name)?);
            }
            Ok(out)
        }
        CExpr::Bin(op @ (BinOp::And | BinOp::Or), x, y) => {
            let (l, r) = (col(env, x, b)?, col(env, y, b)?);
            let mut out = Vec::with_capacity(n);
            for (p, q) in l.iter().zip(r.iter()) {
                out.push(logic(*op, p, q)?);
            }
            Ok(out)
        }
        CExpr::Bin(op, x, y) => {
            let l = col(env, x, b)?;
            let mut out = Vec::with_capacity(n);
            // A constant right side is not repeated into a column.
            if let CExpr::Const(c) = &**y {
                for p in l.iter() {
                    out.push(binary_fast(*op, p, c)?);
                }
                return Ok(out);
            }
            let r = col(env, y, b)?;
            for (p, q) in l.iter().zip(r.iter()) {
                out.push(binary_fast(*op, p, q)?);
            }
            Ok(out)
        }
        _ => {
            // (Loops rather than `collect::<Result<_>>`, which measured 3x slower here.)
            let mut locals = Vec::new();
            let mut out = Vec::with_capacity(n);
            for r in 0..n {
                out.push(eval(env, e, b, r, &mut locals)?);
            }
            Ok(out)
        }
    }
}

fn logic(op: BinOp, p: &Value, q: &Value) -> Result<Value, QueryError> {
    let (a, c) = (tri(p)?, tri(q)?);
    Ok(match op {
        BinOp::And => match (a, c) {
            (Some(false), _) | (_, Some(false)) => Value::Bool(false),
            (Some(true), Some(true)) => Value::Bool(true),
            _ => Value::Null,
        },
        BinOp::Or => match (a, c) {
            (Some(true), _) | (_, Some(true)) => Value::Bool(true),
            (Some(false), Some(false)) => Value::Bool(false),
            _ => Value::Null,
        },
        _ => match (a, c) {
            (Some(x), Some(y)) => Value::Bool(x ^ y),
            _ => Value::Null,
        },
    })
}

fn tri(v: &Value) -> Result<Option<bool>, QueryError> {
    match v {
        Value::Bool(b) => Ok(Some(*b)),
        Value::Null => Ok(None),
        _ => type_err("expected a boolean", v),
    }
}

/// Evaluates `e` on row `row` of `b`.
pub fn eval(
    env: &Env,
    e: &CExpr,
    b: &Batch,
    row: usize,
    locals: &mut Vec<Value>,
) -> Result<Value, QueryError> {
    Ok(match e {
        CExpr::Const(c) => c.clone(),
        CExpr::Slot(i) => b.cols[*i][row].clone(),
        CExpr::Local(i) => locals.get(*i).cloned().unwrap_or(Value::Null),
        CExpr::Prop(x, name) => match &**x {
            // A slot is read in place: a LOAD CSV row is not cloned per field.
            CExpr::Slot(i) => prop(env, &b.cols[*i][row], name)?,
            x => prop(env, &eval(env, x, b, row, locals)?, name)?,
        },
        CExpr::List(items) => Value::list(
            items
                .iter()
                .map(|x| eval(env, x, b, row, locals))
                .collect::<Result<_, _>>()?,
        ),
        CExpr::Map(items) => Value::Map(Arc::new(
            items
                .iter()
                .map(|(k, x)| Ok((k.clone(), eval(env, x, b, row, locals)?)))
                .collect::<Result<_, QueryError>>()?,
        )),
        CExpr::Index(x, i) => {
            let (v, i) = (eval(env, x, b, row, locals)?, eval(env, i, b, row, locals)?);
            index(env, &v, &i)?
        }
        CExpr::Slice(x, from, to) => {
            let v = eval(env, x, b, row, locals)?;
            let f = match from {
                Some(f) => eval(env, f, b, row, locals)?,
                None => Value::Int(0),
            };
            let t = match to {
                Some(t) => eval(env, t, b, row, locals)?,
                None => Value::Int(i64::MAX),
            };
            slice(&v, &f, &t)?
        }
        CExpr::HasLabels(x, labels) => match eval(env, x, b, row, locals)? {
            Value::Null => Value::Null,
            Value::Node(n) => {
                let mut all = true;
                for l in labels {
                    all &= match l {
                        Some(l) => env.g.has_label(n, *l)?,
                        None => false,
                    };
                }
                Value::Bool(all)
            }
            v => return type_err("labels can only be tested on a node", &v),
        },
        CExpr::Not(x) => match tri(&eval(env, x, b, row, locals)?)? {
            Some(v) => Value::Bool(!v),
            None => Value::Null,
        },
        CExpr::Neg(x) => match eval(env, x, b, row, locals)? {
            Value::Int(i) => Value::Int(i.checked_neg().ok_or_else(|| overflow("-"))?),
            Value::Float(f) => Value::Float(-f),
            Value::Null => Value::Null,
            v => return type_err("cannot negate", &v),
        },
        CExpr::Bin(op @ (BinOp::And | BinOp::Or | BinOp::Xor), x, y) => {
            // Short-circuit where the left side decides.
            let l = eval(env, x, b, row, locals)?;
            match (op, tri(&l)?) {
                (BinOp::And, Some(false)) => Value::Bool(false),
                (BinOp::Or, Some(true)) => Value::Bool(true),
                _ => logic(*op, &l, &eval(env, y, b, row, locals)?)?,
            }
        }
        CExpr::Bin(op, x, y) => {
            let (l, r) = (eval(env, x, b, row, locals)?, eval(env, y, b, row, locals)?);
            binary(*op, &l, &r)?
        }
        CExpr::RegexConst(x, re) => match eval(env, x, b, row, locals)? {
            Value::Str(s) => Value::Bool(re.is_match(&s)),
            _ => Value::Null,
        },
        // `true`: IS NULL; `false`: IS NOT NULL.
        CExpr::IsNull(x, is_null) => {
            Value::Bool(eval(env, x, b, row, locals)?.is_null() == *is_null)
        }
        CExpr::Func(f, args) => {
            if *f == Func::Coalesce {
                for a in args {
                    let v = eval(env, a, b, row, locals)?;
                    if !v.is_null() {
                        return Ok(v);
                    }
                }
                return Ok(Value::Null);
            }
            if let [a] = args.as_slice() {
                // One argument needs no argument vector (a LOAD CSV conversion per field).
                let v = eval(env, a, b, row, locals)?;
                return call(env, *f, std::slice::from_ref(&v));
            }
            let vals = args
                .iter()
                .map(|a| eval(env, a, b, row, locals))
                .collect::<Result<Vec<_>, _>>()?;
            call(env, *f, &vals)?
        }
        CExpr::Case {
            subject,
            arms,
            default,
        } => {
            let s = match subject {
                Some(s) => Some(eval(env, s, b, row, locals)?),
                None => None,
            };
            for (w, t) in arms {
                let wv = eval(env, w, b, row, locals)?;
                let hit = match &s {
                    Some(s) => s.eq3(&wv) == Some(true),
                    None => wv.truth() == Some(true),
                };
                if hit {
                    return eval(env, t, b, row, locals);
                }
            }
            match default {
                Some(d) => eval(env, d, b, row, locals)?,
                None => Value::Null,
            }
        }
        CExpr::ListComp {
            local,
            list,
            pred,
            map,
        } => {
            let l = match eval(env, list, b, row, locals)? {
                Value::List(l) => l,
                Value::Null => return Ok(Value::Null),
                v => return type_err("a list comprehension needs a list", &v),
            };
            if locals.len() <= *local {
                locals.resize(*local + 1, Value::Null);
            }
            let mut out = Vec::with_capacity(l.len());
            for x in l.iter() {
                locals[*local] = x.clone();
                if let Some(p) = pred {
                    if eval(env, p, b, row, locals)?.truth() != Some(true) {
                        continue;
                    }
                }
                out.push(match map {
                    Some(m) => eval(env, m, b, row, locals)?,
                    None => x.clone(),
                });
            }
            Value::list(out)
        }
        CExpr::Pattern(p) => pattern_exists(env, p, b, row)?,
        CExpr::MakePath(parts) => make_path(b, row, parts)?,
    })
}

fn overflow(op: &str) -> QueryError {
    QueryError::Argument(format!("integer overflow in {op}"))
}

fn make_path(b: &Batch, row: usize, parts: &[PathPart]) -> Result<Value, QueryError> {
    let mut nodes = Vec::new();
    let mut rels = Vec::new();
    let add_rel = |r: &RelRef, nodes: &mut Vec<u64>, rels: &mut Vec<RelRef>| {
        let cur = nodes.last().copied().unwrap_or(r.src as u64);
        let next = if cur == r.src as u64 { r.dst } else { r.src };
        rels.push(*r);
        nodes.push(next as u64);
    };
    for p in parts {
        match *p {
            PathPart::Node(s) => match &b.cols[s][row] {
                Value::Node(n) if nodes.is_empty() => nodes.push(*n),
                Value::Node(_) => {}
                _ => return Ok(Value::Null),
            },
            PathPart::Rel(s) => match &b.cols[s][row] {
                Value::Rel(r) => add_rel(r, &mut nodes, &mut rels),
                _ => return Ok(Value::Null),
            },
            PathPart::Rels(s) => match &b.cols[s][row] {
                Value::List(l) => {
                    for v in l.iter() {
                        if let Value::Rel(r) = v {
                            add_rel(r, &mut nodes, &mut rels)
                        }
                    }
                }
                Value::Path(p) => {
                    for r in &p.rels {
                        add_rel(r, &mut nodes, &mut rels)
                    }
                }
                _ => return Ok(Value::Null),
            },
        }
    }
    Ok(Value::Path(Arc::new(PathVal { nodes, rels })))
}

/// Does the pattern predicate match from this row?
fn pattern_exists(env: &Env, p: &PatternPred, b: &Batch, row: usize) -> Result<Value, QueryError> {
    if p.impossible {
        return Ok(Value::Bool(false));
    }
    let start = match &b.cols[p.start][row] {
        Value::Node(n) => *n,
        Value::Null => return Ok(Value::Null),
        v => return type_err("a pattern must start at a node", v),
    };
    for &l in &p.start_labels {
        if !env.g.has_label(start, l)? {
            return Ok(Value::Bool(false));
        }
    }
    let mut used = Vec::new();
    Ok(Value::Bool(matches_from(
        env, p, b, row, 0, start, 0, &mut used,
    )?))
}

/// Whether the pattern matches from node `at`, `depth` hops into step `step`, without
/// reusing a relationship in `used` (depth-first, stops at the first match).
#[allow(clippy::too_many_arguments)]
fn matches_from(
    env: &Env,
    p: &PatternPred,
    b: &Batch,
    row: usize,
    step: usize,
    at: u64,
    depth: u32,
    used: &mut Vec<RelRef>,
) -> Result<bool, QueryError> {
    let Some(s) = p.steps.get(step) else {
        return Ok(true);
    };
    if depth >= s.min {
        let ok_end = match s.bound {
            Some(slot) => matches!(b.cols[slot][row], Value::Node(n) if n == at),
            None => {
                let mut ok = true;
                for l in &s.labels {
                    ok &= env.g.has_label(at, *l)?;
                }
                ok
            }
        };
        if ok_end && matches_from(env, p, b, row, step + 1, at, 0, used)? {
            return Ok(true);
        }
    }
    if depth >= s.max {
        return Ok(false);
    }
    let mut next = Vec::new();
    env.g.step_rels(&s.types, s.dir, at, &mut next)?;
    for (nb, r) in next {
        if used.contains(&r) {
            continue;
        }
        used.push(r);
        let found = matches_from(env, p, b, row, step, nb, depth + 1, used)?;
        used.pop();
        if found {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `v.name`: node and relationship properties, map entries, temporal fields.
pub fn prop(env: &Env, v: &Value, name: &str) -> Result<Value, QueryError> {
    match v {
        Value::Null => Ok(Value::Null),
        Value::Node(n) => env.g.node_prop(*n, name),
        Value::Rel(r) => env.g.rel_prop(r, name),
        Value::Map(m) => {
            // Keys are short: compare lengths and bytes inline rather than call memcmp
            // per key (a LOAD CSV row is looked up once per field it feeds).
            let name = name.as_bytes();
            Ok(m.iter()
                .find(|(k, _)| {
                    let k = k.as_bytes();
                    k.len() == name.len() && k.iter().zip(name).all(|(a, b)| a == b)
                })
                .map(|(_, v)| v.clone())
                .unwrap_or(Value::Null))
        }
        Value::Date(d) => temporal_field(*d * 86_400_000_000, name, v),
        Value::LocalDateTime(t) | Value::DateTime(t) => temporal_field(*t, name, v),
        _ => type_err(&format!("cannot read property `{name}`"), v),
    }
}

fn temporal_field(us: i64, name: &str, v: &Value) -> Result<Value, QueryError> {
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

fn index(env: &Env, v: &Value, i: &Value) -> Result<Value, QueryError> {
    match (v, i) {
        (Value::Null, _) | (_, Value::Null) => Ok(Value::Null),
        (Value::List(l), Value::Int(i)) => {
            let n = l.len() as i64;
            let k = if *i < 0 { n + i } else { *i };
            Ok(if k >= 0 && k < n {
                l[k as usize].clone()
            } else {
                Value::Null
            })
        }
        (Value::Map(_) | Value::Node(_) | Value::Rel(_), Value::Str(k)) => prop(env, v, k),
        _ => type_err("cannot index this value", v),
    }
}

fn slice(v: &Value, f: &Value, t: &Value) -> Result<Value, QueryError> {
    let (Value::List(l), Value::Int(f), Value::Int(t)) = (v, f, t) else {
        if v.is_null() || f.is_null() || t.is_null() {
            return Ok(Value::Null);
        }
        return type_err("slices need a list and integer bounds", v);
    };
    let n = l.len() as i64;
    let norm = |x: i64| if x < 0 { (n + x).max(0) } else { x.min(n) };
    let (a, b) = (norm(*f), norm(*t));
    Ok(Value::list(if a < b {
        l[a as usize..b as usize].to_vec()
    } else {
        Vec::new()
    }))
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// [`binary`] with integer comparisons and arithmetic inline (the common case in
/// filters over integer properties).
#[inline]
fn binary_fast(op: BinOp, l: &Value, r: &Value) -> Result<Value, QueryError> {
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

fn arith(op: BinOp, l: &Value, r: &Value) -> Result<Value, QueryError> {
    use BinOp::*;
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

fn int_arg(v: &Value, what: &str) -> Result<Option<i64>, QueryError> {
    match v {
        Value::Int(i) => Ok(Some(*i)),
        Value::Float(f) if f.fract() == 0.0 => Ok(Some(*f as i64)),
        Value::Null => Ok(None),
        _ => type_err(&format!("{what} needs an integer"), v),
    }
}

fn str_arg<'v>(v: &'v Value, what: &str) -> Result<Option<&'v str>, QueryError> {
    match v {
        Value::Str(s) => Ok(Some(s)),
        Value::Null => Ok(None),
        _ => type_err(&format!("{what} needs a string"), v),
    }
}

fn argc(f: Func, args: &[Value], lo: usize, hi: usize) -> Result<(), QueryError> {
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

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

fn temporal_from_map(m: &[(Arc<str>, Value)]) -> Result<(i64, i64), QueryError> {
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
