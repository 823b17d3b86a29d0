//! Values a query computes with.
//!
//! Nodes and relationships are references into storage (a node id; a relationship's type,
//! endpoints and edge id), never copies of their properties: properties are read from
//! the mapped segments when an expression asks for them (seed 000: copying whole rows on
//! every access was Memgraph's LOAD CSV memory bug). Strings and lists are reference
//! counted, so moving a value between batches never deep-copies it.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A relationship: its type, endpoints and its edge id within the type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RelRef {
    pub ty: u32,
    pub src: u32,
    pub dst: u32,
    pub eid: u64,
}

/// A path: `nodes.len() == rels.len() + 1`.
#[derive(Debug, Clone, PartialEq)]
pub struct PathVal {
    pub nodes: Vec<u64>,
    pub rels: Vec<RelRef>,
}

#[derive(Debug, Clone, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Arc<str>),
    List(Arc<Vec<Value>>),
    /// Keys are shared `Arc<str>`: the rows of LOAD CSV share their header's.
    Map(Arc<Vec<(Arc<str>, Value)>>),
    Node(u64),
    Rel(RelRef),
    Path(Arc<PathVal>),
    /// Days since 1970-01-01.
    Date(i64),
    /// Nanoseconds since midnight, no zone.
    LocalTime(i64),
    /// Nanoseconds since midnight in local time, and the offset from UTC in seconds.
    Time(i64, i32),
    /// A wall-clock date and time, no zone (seconds since 1970-01-01T00:00).
    LocalDateTime(Stamp),
    /// An instant (UTC), its offset from UTC in seconds, and the named time zone it was
    /// given in ([`zone_name`]; 0 when only the offset is known).
    DateTime(Stamp, i32, u32),
    /// Months, days, seconds and nanoseconds, kept apart: a month is not a fixed number
    /// of days, nor a day of seconds.
    Duration(Arc<Dur>),
    /// A byte array (from a driver's parameter; Cypher has no literal for one).
    Bytes(Arc<[u8]>),
}

// Values travel in batches of thousands: keep them at four words.
const _: () = assert!(std::mem::size_of::<Value>() == 32);

/// A point on a time line to the nanosecond: seconds since 1970-01-01T00:00 and the
/// nanoseconds past that second (`0..1_000_000_000`). Ordered as the time line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Stamp {
    pub secs: i64,
    pub nanos: u32,
}

impl Stamp {
    pub fn from_micros(us: i64) -> Stamp {
        Stamp {
            secs: us.div_euclid(1_000_000),
            nanos: us.rem_euclid(1_000_000) as u32 * 1000,
        }
    }

    /// Microseconds since the epoch, when the stamp holds no finer part (the storage
    /// columns keep microseconds).
    pub fn micros(self) -> Option<i64> {
        (self.nanos % 1000 == 0)
            .then(|| {
                self.secs
                    .checked_mul(1_000_000)?
                    .checked_add(self.nanos as i64 / 1000)
            })
            .flatten()
    }

    pub fn from_nanos(ns: i128) -> Stamp {
        Stamp {
            secs: ns.div_euclid(1_000_000_000) as i64,
            nanos: ns.rem_euclid(1_000_000_000) as u32,
        }
    }

    pub fn nanos_total(self) -> i128 {
        self.secs as i128 * 1_000_000_000 + self.nanos as i128
    }
}

/// A Cypher duration. `nanos` is in `0..1_000_000_000` (a negative part of a second is
/// carried by `secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dur {
    pub months: i64,
    pub days: i64,
    pub secs: i64,
    pub nanos: i32,
}

impl Dur {
    /// Seconds and nanoseconds as one count (the duration's time part).
    pub fn time_nanos(&self) -> i128 {
        self.secs as i128 * 1_000_000_000 + self.nanos as i128
    }
}

/// Names of the time zones datetimes were given in, interned so that a datetime stays
/// four words: id `i` names `ZONES[i - 1]`. A program meets a few hundred zones at most.
static ZONES: std::sync::RwLock<Vec<Arc<str>>> = std::sync::RwLock::new(Vec::new());

/// The id of a time zone name (interning it on first use).
pub fn zone_id(name: &str) -> u32 {
    if let Some(i) = ZONES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .position(|z| &**z == name)
    {
        return i as u32 + 1;
    }
    let mut w = ZONES.write().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = w.iter().position(|z| &**z == name) {
        return i as u32 + 1;
    }
    w.push(Arc::from(name));
    w.len() as u32
}

/// The name behind a zone id; `None` for 0 (offset only).
pub fn zone_name(id: u32) -> Option<Arc<str>> {
    let i = id.checked_sub(1)? as usize;
    ZONES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(i)
        .cloned()
}

impl Value {
    pub fn str(s: &str) -> Value {
        Value::Str(Arc::from(s))
    }

    pub fn list(v: Vec<Value>) -> Value {
        Value::List(Arc::new(v))
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Bool(_) => "BOOLEAN",
            Value::Int(_) => "INTEGER",
            Value::Float(_) => "FLOAT",
            Value::Str(_) => "STRING",
            Value::List(_) => "LIST",
            Value::Map(_) => "MAP",
            Value::Node(_) => "NODE",
            Value::Rel(_) => "RELATIONSHIP",
            Value::Path(_) => "PATH",
            Value::Date(_) => "DATE",
            Value::LocalTime(_) => "LOCAL TIME",
            Value::Time(..) => "TIME",
            Value::LocalDateTime(_) => "LOCAL DATETIME",
            Value::DateTime(..) => "DATETIME",
            Value::Duration(_) => "DURATION",
            Value::Bytes(_) => "BYTES",
        }
    }

    /// A local datetime from the microseconds a storage column keeps.
    pub fn local_datetime_us(us: i64) -> Value {
        Value::LocalDateTime(Stamp::from_micros(us))
    }

    /// A UTC datetime from the microseconds a storage column keeps.
    pub fn datetime_us(us: i64) -> Value {
        Value::DateTime(Stamp::from_micros(us), 0, 0)
    }

    /// The value as a storage column's integer (days for dates, microseconds for
    /// datetimes), when a column can hold it whole: a datetime with a zone or offset, or
    /// with nanoseconds, cannot.
    pub fn column_i64(&self) -> Option<i64> {
        match self {
            Value::Date(d) => Some(*d),
            Value::LocalDateTime(s) | Value::DateTime(s, 0, 0) => s.micros(),
            _ => None,
        }
    }

    /// A date, time or datetime (durations are not points in time).
    pub fn is_temporal(&self) -> bool {
        matches!(
            self,
            Value::Date(_)
                | Value::LocalTime(_)
                | Value::Time(..)
                | Value::LocalDateTime(_)
                | Value::DateTime(..)
        )
    }

    /// A time of day as nanoseconds since midnight UTC (for comparing times).
    fn time_utc(ns: i64, offset: i32) -> i64 {
        ns - offset as i64 * 1_000_000_000
    }

    /// Three-valued truth: `Some(b)` for booleans, `None` for null (and other types).
    pub fn truth(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// Equality with Cypher's null semantics: `None` when either side is null (or a list
    /// holding a null decides it).
    pub fn eq3(&self, other: &Value) -> Option<bool> {
        match (self, other) {
            (Value::Null, _) | (_, Value::Null) => None,
            (Value::Int(a), Value::Int(b)) => Some(a == b),
            (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
                Some(self.as_f64() == other.as_f64())
            }
            (Value::List(a), Value::List(b)) => {
                if a.len() != b.len() {
                    return Some(false);
                }
                all3(a.iter().zip(b.iter()).map(|(x, y)| x.eq3(y)))
            }
            (Value::Map(a), Value::Map(b)) => {
                if a.len() != b.len() {
                    return Some(false);
                }
                all3(
                    a.iter()
                        .map(|(k, x)| match b.iter().find(|(kb, _)| kb == k) {
                            None => Some(false),
                            Some((_, y)) => x.eq3(y),
                        }),
                )
            }
            // Times and datetimes are equal when they are the same instant.
            (Value::Time(..), Value::Time(..)) | (Value::DateTime(..), Value::DateTime(..)) => {
                Some(self.cmp3(other) == Some(Ordering::Equal))
            }
            _ => Some(self.kind() == other.kind() && order(self, other) == Ordering::Equal),
        }
    }

    /// Comparison for `<`, `<=`, `>`, `>=`: `None` when the types are not comparable or
    /// either side is null.
    pub fn cmp3(&self, other: &Value) -> Option<Ordering> {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
            (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
                self.as_f64()?.partial_cmp(&other.as_f64()?)
            }
            (Value::Str(a), Value::Str(b)) => Some(a.cmp(b)),
            (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
            (Value::Date(a), Value::Date(b)) | (Value::LocalTime(a), Value::LocalTime(b)) => {
                Some(a.cmp(b))
            }
            (Value::Time(a, x), Value::Time(b, y)) => {
                Some(Value::time_utc(*a, *x).cmp(&Value::time_utc(*b, *y)))
            }
            (Value::LocalDateTime(a), Value::LocalDateTime(b))
            | (Value::DateTime(a, ..), Value::DateTime(b, ..)) => Some(a.cmp(b)),
            (Value::List(a), Value::List(b)) => {
                for (x, y) in a.iter().zip(b.iter()) {
                    match x.cmp3(y)? {
                        Ordering::Equal => {}
                        o => return Some(o),
                    }
                }
                Some(a.len().cmp(&b.len()))
            }
            _ => None,
        }
    }

    /// Rank of the type in Cypher's global sort order (ascending; null sorts last).
    pub fn kind(&self) -> u8 {
        match self {
            Value::Map(_) => 0,
            Value::Node(_) => 1,
            Value::Rel(_) => 2,
            Value::List(_) => 3,
            Value::Path(_) => 4,
            Value::DateTime(..) => 5,
            Value::LocalDateTime(_) => 6,
            Value::Date(_) => 7,
            Value::Time(..) => 8,
            Value::LocalTime(_) => 9,
            Value::Duration(_) => 10,
            Value::Bytes(_) => 11,
            Value::Str(_) => 12,
            Value::Bool(_) => 13,
            Value::Int(_) | Value::Float(_) => 14,
            Value::Null => 15,
        }
    }
}

/// Three-valued AND of element comparisons: false if any is false, else null if any is
/// null, else true.
fn all3(items: impl Iterator<Item = Option<bool>>) -> Option<bool> {
    let mut unknown = false;
    for x in items {
        match x {
            Some(false) => return Some(false),
            None => unknown = true,
            Some(true) => {}
        }
    }
    (!unknown).then_some(true)
}

/// A 128-bit key whose order agrees with [`order`]: where two keys differ, the values
/// compare the same way; where they are equal, the values may still differ (compare
/// them). The type's rank in the top byte, then the value's order-preserving leading
/// bits (numbers as `f64`, strings' first 15 bytes, a timestamp's seconds and
/// nanoseconds; nothing for lists, maps and the like). A sort orders these integers
/// and compares values only on ties (DuckDB's normalized keys, in spirit).
pub fn order_prefix(v: &Value) -> u128 {
    const SIGN: u64 = 1 << 63;
    let top = |x: u64| (x as u128) << 56;
    let signed = |x: i64| top(x as u64 ^ SIGN);
    let payload: u128 = match v {
        Value::Int(_) | Value::Float(_) => {
            let x = v.as_f64().unwrap_or(0.0);
            // One NaN (after every number) and one zero, as `order` has them.
            let x = if x.is_nan() {
                f64::NAN
            } else if x == 0.0 {
                0.0
            } else {
                x
            };
            let b = x.to_bits();
            top(if b & SIGN != 0 { !b } else { b | SIGN })
        }
        Value::Str(s) => {
            let mut k = [0u8; 16];
            let n = s.len().min(15);
            k[..n].copy_from_slice(&s.as_bytes()[..n]);
            u128::from_be_bytes(k) >> 8
        }
        Value::Bool(b) => top(*b as u64),
        Value::Date(x) | Value::LocalTime(x) => signed(*x),
        Value::LocalDateTime(s) | Value::DateTime(s, ..) => {
            signed(s.secs) | ((s.nanos as u128) << 24)
        }
        Value::Node(n) => top(*n),
        _ => 0,
    };
    ((v.kind() as u128) << 120) | payload
}

/// Whether [`order_prefix`] holds all of `v` as [`order`] sees it, so that equal prefixes
/// mean equal values and [`from_order_prefix`] gives back a value that orders as `v`
/// does: null, booleans, dates, local times and date-times, nodes, floats, integers
/// below 2^53 (exact as `f64`), and strings of at most 15 bytes with no NUL byte.
pub fn order_prefix_exact(v: &Value) -> bool {
    match v {
        Value::Null
        | Value::Bool(_)
        | Value::Float(_)
        | Value::Date(_)
        | Value::LocalTime(_)
        | Value::LocalDateTime(_)
        | Value::Node(_) => true,
        Value::Int(x) => x.unsigned_abs() < 1 << 53,
        Value::Str(s) => s.len() <= 15 && !s.as_bytes().contains(&0),
        _ => false,
    }
}

/// A value that orders as the one an exact prefix ([`order_prefix_exact`]) was made of:
/// the same value, except that whole numbers below 2^53 come back as integers and
/// others as floats ([`order`] compares integers and floats by value). `None` for a prefix no exact value gives.
pub fn from_order_prefix(p: u128) -> Option<Value> {
    const SIGN: u64 = 1 << 63;
    let kind = (p >> 120) as u8;
    let word = (p >> 56) as u64;
    let signed = (word ^ SIGN) as i64;
    Some(match kind {
        15 => Value::Null,
        14 => {
            let x = f64::from_bits(if word & SIGN != 0 {
                word & !SIGN
            } else {
                !word
            });
            // A whole number as an integer: against a large integer `order` compares
            // integers exactly and a float only as `f64`.
            if x.fract() == 0.0 && x.abs() < (1u64 << 53) as f64 {
                Value::Int(x as i64)
            } else {
                Value::Float(x)
            }
        }
        13 => Value::Bool(word != 0),
        12 => {
            let b = (p << 8).to_be_bytes();
            let n = b.iter().position(|&x| x == 0).unwrap_or(16).min(15);
            Value::Str(Arc::from(std::str::from_utf8(&b[..n]).ok()?))
        }
        9 => Value::LocalTime(signed),
        7 => Value::Date(signed),
        6 => Value::LocalDateTime(Stamp {
            secs: signed,
            nanos: ((p >> 24) & 0xffff_ffff) as u32,
        }),
        1 => Value::Node(word),
        _ => return None,
    })
}

/// Cypher's total order for ORDER BY: types by rank, values within a type; numbers compare
/// numerically with NaN after every other number; null last.
pub fn order(a: &Value, b: &Value) -> Ordering {
    let (ka, kb) = (a.kind(), b.kind());
    if ka != kb {
        return ka.cmp(&kb);
    }
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Int(_) | Value::Float(_), _) => {
            let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y)
                .unwrap_or_else(|| x.is_nan().cmp(&y.is_nan()))
        }
        (Value::Str(x), Value::Str(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Date(x), Value::Date(y)) | (Value::LocalTime(x), Value::LocalTime(y)) => x.cmp(y),
        (Value::Time(x, a), Value::Time(y, b)) => Value::time_utc(*x, *a)
            .cmp(&Value::time_utc(*y, *b))
            .then(a.cmp(b)),
        (Value::LocalDateTime(x), Value::LocalDateTime(y)) => x.cmp(y),
        (Value::DateTime(x, a, z), Value::DateTime(y, b, w)) => {
            x.cmp(y).then(a.cmp(b)).then(z.cmp(w))
        }
        (Value::Duration(x), Value::Duration(y)) => {
            (x.months, x.days, x.time_nanos()).cmp(&(y.months, y.days, y.time_nanos()))
        }
        (Value::Bytes(x), Value::Bytes(y)) => x.cmp(y),
        (Value::Node(x), Value::Node(y)) => x.cmp(y),
        (Value::Rel(x), Value::Rel(y)) => (x.ty, x.eid).cmp(&(y.ty, y.eid)),
        (Value::List(x), Value::List(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                match order(p, q) {
                    Ordering::Equal => {}
                    o => return o,
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Path(x), Value::Path(y)) => x
            .nodes
            .cmp(&y.nodes)
            .then_with(|| x.rels.len().cmp(&y.rels.len())),
        (Value::Map(x), Value::Map(y)) => x.len().cmp(&y.len()).then_with(|| {
            for ((ka, va), (kb, vb)) in x.iter().zip(y.iter()) {
                let o = ka.cmp(kb).then_with(|| order(va, vb));
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        }),
        _ => Ordering::Equal,
    }
}

/// A value as a grouping or DISTINCT key: equivalence, not equality (null equals null,
/// `1` equals `1.0`).
#[derive(Debug, Clone)]
pub struct Key(pub Value);

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        equivalent(&self.0, &other.0)
    }
}
impl Eq for Key {}

/// Whether two values are the same grouping key ([`Key`]'s equality).
pub fn equivalent(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Null, Value::Null) => true,
        (Value::Float(x), Value::Float(y)) if x.is_nan() && y.is_nan() => true,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| equivalent(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter().all(|(k, v)| {
                    y.iter()
                        .find(|(kb, _)| kb == k)
                        .is_some_and(|(_, w)| equivalent(v, w))
                })
        }
        _ => a.eq3(b) == Some(true),
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_value(&self.0, h)
    }
}

/// Hashes `v` as [`Key`] does (equivalent values hash alike), without owning it.
pub fn hash_value<H: Hasher>(v: &Value, h: &mut H) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => b.hash(h),
        Value::Int(i) => i.hash(h),
        Value::Float(f) => {
            if f.fract() == 0.0 && f.abs() < 9.0e18 {
                (*f as i64).hash(h)
            } else {
                f.to_bits().hash(h)
            }
        }
        Value::Str(s) => s.hash(h),
        Value::List(l) => {
            l.len().hash(h);
            for x in l.iter() {
                hash_value(x, h)
            }
        }
        Value::Map(m) => m.len().hash(h),
        Value::Node(n) => n.hash(h),
        Value::Rel(r) => (r.ty, r.eid).hash(h),
        Value::Path(p) => p.nodes.hash(h),
        Value::Date(d) | Value::LocalTime(d) => d.hash(h),
        Value::Time(t, o) => Value::time_utc(*t, *o).hash(h),
        Value::LocalDateTime(s) | Value::DateTime(s, ..) => s.hash(h),
        Value::Duration(d) => d.hash(h),
        Value::Bytes(b) => b.hash(h),
    }
}

/// Bytes an allocation of `n` bytes takes from glibc's malloc: an 8-byte header, rounded
/// up to 16, at least 32.
pub(crate) const fn alloc_bytes(n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let c = (n + 8 + 15) & !15;
    if c < 32 {
        32
    } else {
        c
    }
}

/// Approximate heap bytes a value holds (for the per-query memory limit).
pub fn heap_bytes(v: &Value) -> usize {
    match v {
        Value::Str(s) => s.len() + 16,
        Value::List(l) => 16 + l.iter().map(|x| 32 + heap_bytes(x)).sum::<usize>(),
        Value::Map(m) => {
            16 + m
                .iter()
                .map(|(k, x)| 56 + k.len() + heap_bytes(x))
                .sum::<usize>()
        }
        Value::Path(p) => 48 + p.nodes.len() * 8 + p.rels.len() * 24,
        Value::Bytes(b) => 16 + b.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arb_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            prop_oneof![any::<i64>(), -5i64..5, Just(i64::MAX), Just((1 << 53) + 1)]
                .prop_map(Value::Int),
            prop_oneof![
                any::<f64>(),
                -5.0f64..5.0,
                Just(-0.0),
                Just(f64::NAN),
                Just(-f64::NAN),
                Just(9007199254740992.0)
            ]
            .prop_map(Value::Float),
            "[a-c\\x00é]{0,20}".prop_map(|s| Value::str(&s)),
            (-3i64..3).prop_map(Value::Date),
            (any::<i64>(), 0u32..3).prop_map(|(secs, nanos)| Value::LocalDateTime(Stamp {
                secs: secs >> 1,
                nanos
            })),
            (0u64..4).prop_map(Value::Node),
            proptest::collection::vec(-2i64..2, 0..3)
                .prop_map(|l| Value::list(l.into_iter().map(Value::Int).collect())),
        ]
    }

    proptest::proptest! {
        /// Where two prefixes differ, the values order the same way.
        #[test]
        fn order_prefix_agrees_with_order(a in arb_value(), b in arb_value()) {
            let (pa, pb) = (order_prefix(&a), order_prefix(&b));
            if pa != pb {
                proptest::prop_assert_eq!(pa.cmp(&pb), order(&a, &b), "{:?} {:?}", a, b);
            }
        }
    }

    proptest::proptest! {
        /// An exact prefix is the whole value: equal prefixes mean equal values, and the
        /// value made back from it orders as the original against any other value.
        #[test]
        fn exact_prefixes_give_their_value_back(a in arb_value(), b in arb_value()) {
            let (pa, pb) = (order_prefix(&a), order_prefix(&b));
            if order_prefix_exact(&a) {
                let back = from_order_prefix(pa).expect("an exact prefix decodes");
                proptest::prop_assert_eq!(order_prefix(&back), pa);
                proptest::prop_assert_eq!(order(&back, &b), order(&a, &b), "{:?} {:?}", a, b);
                if order_prefix_exact(&b) && pa == pb {
                    proptest::prop_assert_eq!(order(&a, &b), Ordering::Equal);
                }
            }
        }
    }

    #[test]
    fn null_semantics_and_order() {
        assert_eq!(Value::Null.eq3(&Value::Int(1)), None);
        assert_eq!(Value::Int(1).eq3(&Value::Float(1.0)), Some(true));
        assert_eq!(Value::str("a").eq3(&Value::Int(1)), Some(false));
        let l1 = Value::list(vec![Value::Int(1), Value::Null]);
        let l2 = Value::list(vec![Value::Int(2), Value::Null]);
        assert_eq!(l1.eq3(&l2), Some(false));
        assert_eq!(l1.eq3(&l1.clone()), None);
        assert_eq!(Value::Int(1).cmp3(&Value::str("a")), None);
        let mut v = vec![
            Value::Null,
            Value::Int(3),
            Value::str("x"),
            Value::Float(1.5),
        ];
        v.sort_by(order);
        assert!(matches!(v[0], Value::Str(_)));
        assert!(matches!(v[3], Value::Null));
        assert!(Key(Value::Int(1)) == Key(Value::Float(1.0)));
        assert!(Key(Value::Null) == Key(Value::Null));
    }
}

/// Structural identity (same type, same contents; floats by their bits): what a stored
/// property "is", as opposed to Cypher's three-valued `=` ([`Value::eq3`]).
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        use Value::*;
        match (self, other) {
            (Null, Null) => true,
            (Bool(a), Bool(b)) => a == b,
            (Int(a), Int(b)) => a == b,
            (Float(a), Float(b)) => a.to_bits() == b.to_bits(),
            (Str(a), Str(b)) => a == b,
            (List(a), List(b)) => a == b,
            (Map(a), Map(b)) => a == b,
            (Node(a), Node(b)) => a == b,
            (Rel(a), Rel(b)) => a == b,
            (Path(a), Path(b)) => a == b,
            (Date(a), Date(b)) => a == b,
            (LocalTime(a), LocalTime(b)) => a == b,
            (Time(a, x), Time(b, y)) => (a, x) == (b, y),
            (LocalDateTime(a), LocalDateTime(b)) => a == b,
            (DateTime(a, x, z), DateTime(b, y, w)) => (a, x, z) == (b, y, w),
            (Duration(a), Duration(b)) => a == b,
            (Bytes(a), Bytes(b)) => a == b,
            _ => false,
        }
    }
}
