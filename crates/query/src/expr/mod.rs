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
use quiver_cypher::Detail;
use std::cmp::Ordering;
use std::sync::Arc;

mod binary;
pub(crate) mod func;
pub mod temporal;

pub use binary::*;
pub use func::*;

/// A step of a pattern predicate (`WHERE (a)-[:T]->(:L)`).
#[derive(Debug, Clone)]
pub struct PredStep {
    pub types: Vec<u32>,
    pub dir: Dir,
    pub min: u32,
    pub max: u32,
    pub labels: Vec<u32>,
    /// A label expression the end node must match too (`(a)-->(:B|C)`).
    pub label: Option<Arc<CLabel>>,
    /// The node at the end of the step, when it is a bound variable.
    pub bound: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct PatternPred {
    pub start: usize,
    pub start_labels: Vec<u32>,
    pub start_label: Option<Arc<CLabel>>,
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
    /// `x:A:B`: label ids (`None`: no node has it), and the names, which a
    /// relationship's type is tested against (`r:KNOWS`, as Neo4j 5 reads it).
    HasLabels(Box<CExpr>, Vec<Option<u32>>, Arc<[Arc<str>]>),
    /// `x:A|B`, `x:!A`, `x:%`: a label expression on a node's labels or a
    /// relationship's type.
    LabelTest(Box<CExpr>, Arc<CLabel>),
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
    /// `[(x)-->(:L) | e]` inside a list comprehension or reduce() that binds `x`: the
    /// pattern (no variable but its start, no WHERE) is matched from the node `start`
    /// gives, every match counted, and the list is `e` once per match (`e` cannot read
    /// the pattern).
    PatternList {
        start: Box<CExpr>,
        pattern: Arc<PatternPred>,
        map: Box<CExpr>,
    },
    /// `reduce(acc = init, x IN list | expr)`: the accumulator in local `local`, the
    /// element in `local + 1`.
    Reduce {
        local: usize,
        init: Box<CExpr>,
        list: Box<CExpr>,
        expr: Box<CExpr>,
    },
    /// Builds a path from node slots, relationship slots and relationship-list slots, in
    /// pattern order.
    MakePath(Vec<PathPart>),
}

/// A compiled label expression: each name as its label id (`None`: no node has it)
/// and as text, which a relationship's type is compared with.
pub type CLabel = quiver_cypher::ast::LabelExpr<(Option<u32>, Arc<str>)>;

/// Whether node `n`'s labels match `l`.
pub fn node_matches(l: &CLabel, g: &Graph, n: u64) -> Result<bool, QueryError> {
    l.try_matches(
        &mut |(id, _)| match id {
            Some(id) => g.has_label(n, *id),
            None => Ok(false),
        },
        &mut || Ok(!g.labels(n)?.is_empty()),
    )
}

/// Whether a relationship of type `ty` matches `l`.
pub fn rel_matches(l: &CLabel, ty: &str) -> bool {
    l.matches(&|(_, name)| **name == *ty, true)
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
                // `date.transaction()`, `date.statement()` and `date.realtime()` all
                // read the clock (a statement is its own transaction's instant).
                let n = match n.rsplit_once('.') {
                    Some((k, "transaction" | "statement" | "realtime")) => {
                        return Func::from_name(&format!("{k}.clock"))
                    }
                    _ => n,
                };
                // Neo4j 5's other names of the same functions.
                let n = match n {
                    "lower" => "tolower",
                    "upper" => "toupper",
                    "character_length" => "char_length",
                    n => n,
                };
                match n { $($s => Some(Func::$v),)* _ => None }
            }

            /// Every function's name as users write it (`toUpper`, `date.truncate`):
            /// the variant's name with a lower-case first letter where it spells the
            /// lookup name, else the lookup name itself.
            pub fn names() -> Vec<String> {
                [$((stringify!($v), $s)),*]
                    .iter()
                    .map(|(v, s)| {
                        let mut c = v.chars();
                        let camel: String = c
                            .next()
                            .map(|f| f.to_lowercase().chain(c).collect())
                            .unwrap_or_default();
                        if camel.to_lowercase() == *s { camel } else { s.to_string() }
                    })
                    .collect()
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
    LocalTime = "localtime", Time = "time", Duration = "duration",
    DateTrunc = "date.truncate", LocalTimeTrunc = "localtime.truncate",
    TimeTrunc = "time.truncate", LocalDateTimeTrunc = "localdatetime.truncate",
    DateTimeTrunc = "datetime.truncate", DurBetween = "duration.between",
    DurInMonths = "duration.inmonths", DurInDays = "duration.indays",
    DurInSeconds = "duration.inseconds", FromEpoch = "datetime.fromepoch",
    FromEpochMillis = "datetime.fromepochmillis",
    DateClock = "date.clock", LocalTimeClock = "localtime.clock", TimeClock = "time.clock",
    LocalDateTimeClock = "localdatetime.clock", DateTimeClock = "datetime.clock",
    All = "all", Any = "any", NoneOf = "none", Single = "single",
    MapMerge = "apoc.map.merge", MapClean = "apoc.map.clean", CollToSet = "apoc.coll.toset",
    CollFlatten = "apoc.coll.flatten",
    Acos = "acos", Asin = "asin", Atan = "atan", Atan2 = "atan2", Cos = "cos", Cot = "cot",
    Degrees = "degrees", Haversin = "haversin", Radians = "radians", Sin = "sin", Tan = "tan",
    IsNaN = "isnan", CharLength = "char_length", BTrim = "btrim", Normalize = "normalize",
    NullIf = "nullif", RandomUuid = "randomuuid", ValueType = "valuetype",
    ToBooleanOrNull = "tobooleanornull", ToFloatOrNull = "tofloatornull",
    ToIntegerOrNull = "tointegerornull", ToStringOrNull = "tostringornull",
    ToBooleanList = "tobooleanlist", ToFloatList = "tofloatlist",
    ToIntegerList = "tointegerlist", ToStringList = "tostringlist",
    VecCosine = "vector.similarity.cosine", VecEuclidean = "vector.similarity.euclidean",
    HasLabelsDyn = "quiver.haslabels", HasTypeDyn = "quiver.hastype",
    AnyProperty = "apoc.any.property",
    GdsAsNode = "gds.util.asnode", GdsAsNodes = "gds.util.asnodes", GdsVersion = "gds.version",
}

/// Longest list `range()` builds where no query memory is at hand (a constant the
/// planner evaluates): 320 MiB of values.
const RANGE_MAX: u128 = 10_000_000;

/// What evaluation needs besides the row.
pub struct Env<'g, 'db> {
    pub g: &'g Graph<'db>,
    /// The query's memory: a list an expression builds whole (`range()` outside
    /// UNWIND, which streams it) must fit in it, and holds a grant while it is made.
    /// `None` where the planner evaluates a constant: [`RANGE_MAX`] bounds it there.
    pub budget: Option<quiver_common::memory::MemoryBudget>,
}

impl<'g, 'db> Env<'g, 'db> {
    /// An environment without the query's memory (constants at plan time).
    pub fn new(g: &'g Graph<'db>) -> Self {
        Env { g, budget: None }
    }
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

/// Whether every value is a node or null (a column whose properties the graph reads in
/// one batch).
fn only_nodes(col: &[Value]) -> bool {
    col.iter()
        .all(|v| matches!(v, Value::Node(_) | Value::Null))
}

/// Evaluates `e` over every row of `b`.
pub fn eval_col(env: &Env, e: &CExpr, b: &Batch) -> Result<Vec<Value>, QueryError> {
    let n = b.len;
    match e {
        CExpr::Slot(i) => Ok(b.cols[*i].clone()),
        CExpr::Const(c) => Ok(vec![c.clone(); n]),
        CExpr::Prop(x, name) => {
            // A slot is read in place, not copied.
            let base = col(env, x, b)?;
            if only_nodes(&base) {
                let mut out = Vec::with_capacity(n);
                env.g.node_prop_batch(&base, name, &mut out)?;
                return Ok(out);
            }
            let mut out = Vec::with_capacity(n);
            for v in base.iter() {
                out.push(prop(env, v, name)?);
            }
            Ok(out)
        }
        CExpr::Bin(op @ (BinOp::And | BinOp::Or | BinOp::Xor), x, y) => {
            let (l, r) = (col(env, x, b)?, col(env, y, b)?);
            let mut out = Vec::with_capacity(n);
            for (p, q) in l.iter().zip(r.iter()) {
                out.push(logic(*op, p, q)?);
            }
            Ok(out)
        }
        CExpr::Bin(op, x, y) => {
            if let Some(out) = string_test_col(env, *op, x, y, b)? {
                return Ok(out);
            }
            if let Some(out) = int_compare_col(env, *op, x, y, b)? {
                return Ok(out);
            }
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

/// Operators [`StringTest`] runs on stored bytes.
pub fn is_string_test(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::StartsWith | BinOp::EndsWith | BinOp::Contains | BinOp::Eq | BinOp::Ne
    )
}

/// `value op 'pattern'` for a string test ([`is_string_test`]), run on the stored bytes of
/// each value of a column chunk: no string value is made per row (their allocation was
/// 40% of such a scan's profile).
pub struct StringTest {
    op: BinOp,
    pat: Value,
}

impl StringTest {
    pub fn new(op: BinOp, pat: Arc<str>) -> StringTest {
        debug_assert!(is_string_test(op));
        StringTest {
            op,
            pat: Value::Str(pat),
        }
    }

    /// The test on entry `i` of a segment's column chunk of type `t`.
    pub fn on_chunk(
        &self,
        chunk: &quiver_format::column::ColumnChunk<'_>,
        i: usize,
        t: quiver_common::types::DataType,
    ) -> Result<Value, QueryError> {
        use quiver_common::types::{DataType, ScalarType};
        if let (DataType::Scalar(ScalarType::String | ScalarType::Char), Value::Str(_)) =
            (t, &self.pat)
        {
            let tested = chunk.with_bytes(i, |s| self.on_bytes(s).map(Value::Bool));
            match tested {
                None => return Ok(Value::Null),
                Some(Some(v)) => return Ok(v),
                Some(None) => {}
            }
        }
        self.on_value(crate::graph::chunk_value(chunk, i, t))
    }

    /// The test on a stored string's bytes; `None` when they are not valid UTF-8 (a
    /// damaged file: the value path replaces them). Valid UTF-8 bytes stand for their
    /// string exactly, and these tests on a string are the same tests on its bytes
    /// (UTF-8 is self-synchronizing).
    pub fn on_bytes(&self, s: &[u8]) -> Option<bool> {
        let Value::Str(pat) = &self.pat else {
            return None;
        };
        let pat = pat.as_bytes();
        simdutf8::basic::from_utf8(s)
            .is_ok()
            .then(|| match self.op {
                BinOp::StartsWith => s.starts_with(pat),
                BinOp::EndsWith => s.ends_with(pat),
                BinOp::Contains => memchr::memmem::find(s, pat).is_some(),
                BinOp::Eq => s == pat,
                _ => s != pat,
            })
    }

    /// The test on a value (from the write layer, or of another type).
    pub fn on_value(&self, v: Value) -> Result<Value, QueryError> {
        binary_fast(self.op, &v, &self.pat)
    }
}

/// `n.name STARTS WITH 'x'` (or another [`StringTest`]) over a batch of nodes, on the
/// stored bytes. `None` when `x op y` is not a node property against a string constant.
fn string_test_col(
    env: &Env,
    op: BinOp,
    x: &CExpr,
    y: &CExpr,
    b: &Batch,
) -> Result<Option<Vec<Value>>, QueryError> {
    let (CExpr::Prop(x, name), CExpr::Const(Value::Str(pat))) = (x, y) else {
        return Ok(None);
    };
    if !is_string_test(op) {
        return Ok(None);
    }
    let test = StringTest::new(op, pat.clone());
    node_prop_mapped(env, x, name, b, &|c, i, t| test.on_chunk(c, i, t), &|v| {
        test.on_value(v)
    })
}

/// `n.age >= 18` (a node property compared with an integer) over a batch of nodes, on
/// the stored integers: no value is made per row. A shortest path's `all(x IN nodes(p)
/// WHERE x.age >= 18)` judges every node its search meets so. `None` when `x op y` is
/// not a node property against an integer constant.
fn int_compare_col(
    env: &Env,
    op: BinOp,
    x: &CExpr,
    y: &CExpr,
    b: &Batch,
) -> Result<Option<Vec<Value>>, QueryError> {
    use quiver_common::types::{DataType, ScalarType};
    let (CExpr::Prop(x, name), CExpr::Const(Value::Int(k))) = (x, y) else {
        return Ok(None);
    };
    let test: fn(i64, i64) -> bool = match op {
        BinOp::Eq => |a, k| a == k,
        BinOp::Ne => |a, k| a != k,
        BinOp::Lt => |a, k| a < k,
        BinOp::Le => |a, k| a <= k,
        BinOp::Gt => |a, k| a > k,
        BinOp::Ge => |a, k| a >= k,
        _ => return Ok(None),
    };
    let (k, kv) = (*k, Value::Int(*k));
    node_prop_mapped(
        env,
        x,
        name,
        b,
        &|c, i, t| match t {
            DataType::Scalar(
                ScalarType::Byte | ScalarType::Short | ScalarType::Int | ScalarType::Long,
            ) => Ok(c
                .get_i64(i)
                .map_or(Value::Null, |a| Value::Bool(test(a, k)))),
            _ => binary_fast(op, &crate::graph::chunk_value(c, i, t), &kv),
        },
        &|v| binary_fast(op, &v, &kv),
    )
}

/// Property `name` of `x` over `b`, each value mapped on its way out (as
/// [`Graph::node_prop_batch_map`] does): `None` when `x` is not a column of nodes.
fn node_prop_mapped(
    env: &Env,
    x: &CExpr,
    name: &str,
    b: &Batch,
    seg: &crate::graph::SegRead<'_>,
    val: &crate::graph::ValMap<'_>,
) -> Result<Option<Vec<Value>>, QueryError> {
    let base = col(env, x, b)?;
    if !only_nodes(&base) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(b.len);
    env.g.node_prop_batch_map(&base, name, &mut out, seg, val)?;
    Ok(Some(out))
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
        CExpr::HasLabels(x, labels, names) => match eval(env, x, b, row, locals)? {
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
            Value::Rel(r) if !names.is_empty() => {
                let ty = env.g.rel_type_name(r.ty);
                Value::Bool(names.iter().all(|n| **n == *ty))
            }
            v => return type_err("labels can only be tested on a node", &v),
        },
        CExpr::LabelTest(x, l) => match eval(env, x, b, row, locals)? {
            Value::Null => Value::Null,
            Value::Node(n) => Value::Bool(node_matches(l, env.g, n)?),
            Value::Rel(r) => Value::Bool(rel_matches(l, &env.g.rel_type_name(r.ty))),
            v => return type_err("labels can only be tested on a node or a relationship", &v),
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
            if args.len() <= 4 {
                // Nor do a few (`replace(s, ' ', 'T')`, once per row of a load).
                let mut vals: [Value; 4] = std::array::from_fn(|_| Value::Null);
                for (v, a) in vals.iter_mut().zip(args) {
                    *v = eval(env, a, b, row, locals)?;
                }
                return call(env, *f, &vals[..args.len()]);
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
        CExpr::PatternList {
            start,
            pattern,
            map,
        } => {
            let at = match eval(env, start, b, row, locals)? {
                Value::Node(n) => n,
                Value::Null => return Ok(Value::Null),
                v => return type_err("a pattern must start at a node", &v),
            };
            let mut n = 0;
            if !pattern.impossible && start_labels_ok(env, pattern, at)? {
                n = walk(env, pattern, b, row, 0, at, 0, &mut Vec::new(), false)?;
            }
            let v = if n > 0 {
                eval(env, map, b, row, locals)?
            } else {
                Value::Null
            };
            Value::list(vec![v; n as usize])
        }
        CExpr::Reduce {
            local,
            init,
            list,
            expr,
        } => {
            let mut acc = eval(env, init, b, row, locals)?;
            let l = match eval(env, list, b, row, locals)? {
                Value::List(l) => l,
                Value::Null => return Ok(Value::Null),
                v => return type_err("reduce() needs a list", &v),
            };
            if locals.len() <= *local + 1 {
                locals.resize(*local + 2, Value::Null);
            }
            for x in l.iter() {
                locals[*local] = acc;
                locals[*local + 1] = x.clone();
                acc = eval(env, expr, b, row, locals)?;
            }
            acc
        }
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
    if !start_labels_ok(env, p, start)? {
        return Ok(Value::Bool(false));
    }
    // One hop to a bound node, `(a)-[:T]->(b)`: a probe of the adjacency, not a walk.
    if let [s @ PredStep {
        min: 1,
        max: 1,
        bound: Some(slot),
        ..
    }] = p.steps.as_slice()
    {
        let end = match &b.cols[*slot][row] {
            Value::Node(n) => *n,
            _ => return Ok(Value::Bool(false)),
        };
        for &l in &s.labels {
            if !env.g.has_label(end, l)? {
                return Ok(Value::Bool(false));
            }
        }
        if let Some(l) = &s.label {
            if !node_matches(l, env.g, end)? {
                return Ok(Value::Bool(false));
            }
        }
        return Ok(Value::Bool(env.g.has_rel_to(&s.types, s.dir, start, end)?));
    }
    let mut used = Vec::new();
    Ok(Value::Bool(
        walk(env, p, b, row, 0, start, 0, &mut used, true)? > 0,
    ))
}

fn start_labels_ok(env: &Env, p: &PatternPred, start: u64) -> Result<bool, QueryError> {
    for &l in &p.start_labels {
        if !env.g.has_label(start, l)? {
            return Ok(false);
        }
    }
    match &p.start_label {
        Some(l) => node_matches(l, env.g, start),
        None => Ok(true),
    }
}

/// The matches of the pattern from node `at`, `depth` hops into step `step`, without
/// reusing a relationship in `used` (depth-first; with `first`, stops at the first).
#[allow(clippy::too_many_arguments)]
fn walk(
    env: &Env,
    p: &PatternPred,
    b: &Batch,
    row: usize,
    step: usize,
    at: u64,
    depth: u32,
    used: &mut Vec<RelRef>,
    first: bool,
) -> Result<u64, QueryError> {
    let Some(s) = p.steps.get(step) else {
        return Ok(1);
    };
    let mut found = 0;
    if depth >= s.min {
        let mut ok_end = match s.bound {
            Some(slot) => matches!(b.cols[slot][row], Value::Node(n) if n == at),
            None => true,
        };
        // A bound end is tested against the pattern's labels too: `(a)-->(b:X)`.
        for l in &s.labels {
            if !ok_end {
                break;
            }
            ok_end &= env.g.has_label(at, *l)?;
        }
        if let (true, Some(l)) = (ok_end, &s.label) {
            ok_end = node_matches(l, env.g, at)?;
        }
        if ok_end {
            found += walk(env, p, b, row, step + 1, at, 0, used, first)?;
            if first && found > 0 {
                return Ok(found);
            }
        }
    }
    if depth >= s.max {
        return Ok(found);
    }
    let mut next = Vec::new();
    env.g.step_rels(&s.types, s.dir, at, &mut next)?;
    for (nb, r) in next {
        if used.contains(&r) {
            continue;
        }
        used.push(r);
        found += walk(env, p, b, row, step, nb, depth + 1, used, first)?;
        used.pop();
        if first && found > 0 {
            return Ok(found);
        }
    }
    Ok(found)
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
        v if v.is_temporal() || matches!(v, Value::Duration(_)) => temporal::field(v, name),
        _ => type_err(&format!("cannot read property `{name}`"), v),
    }
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
        (Value::Map(_) | Value::Node(_) | Value::Rel(_), k) => Err(QueryError::Type(
            Detail::MapElementAccessByNonString,
            format!(
                "a map, node or relationship is indexed by a string key, got {} ({})",
                k.type_name(),
                show(k)
            ),
        )),
        (Value::List(_), k) => Err(QueryError::Type(
            Detail::InvalidArgumentType,
            format!(
                "a list is indexed by an integer, got {} ({})",
                k.type_name(),
                show(k)
            ),
        )),
        _ => Err(QueryError::Type(
            Detail::InvalidArgumentType,
            format!(
                "only a list, a map, a node or a relationship can be indexed, got {} ({})",
                v.type_name(),
                show(v)
            ),
        )),
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
