//! LOAD CSV's columnar path: `LOAD CSV ... AS row CREATE (:L {k: f(row.x), ...})` as a
//! whole statement loads at the import's speed.
//!
//! The row path makes a map value per record (a string allocated per field), hands it
//! to the CREATE, which evaluates each property's expression on it and pushes the values
//! into the direct path's builders one by one, all on the statement's thread. Here the
//! file is read by the import's reader (windows split into chunks at record boundaries)
//! and every chunk is parsed on its own pool thread straight into typed column builders:
//! a field used as it is (`row.x`) is copied as bytes, `toInteger`, `toFloat` and
//! `toBoolean` of a field are parsed from its bytes (by the functions' own rules), and
//! any other expression of fields (`localdatetime(replace(row.c3, ' ', 'T'))`) is
//! evaluated row by row on values of only the fields it reads, still on the pool
//! thread. The statement's thread then appends each chunk's columns to the shape's
//! builders ([`quiver_engine::bulk::Bulk::push_chunk`]) in file order.
//!
//! What a row would give, this gives: the same values (nulls for `NULLIF` fields and for
//! fields a record lacks), the same bad records (a field count other than the header's,
//! bytes that are not UTF-8, a broken quote; failing the statement with file:line:column
//! or, with IGNORE BAD, written to the rejects file) and the same counters. The planner
//! takes it only where that holds: LOAD CSV first in the statement from a constant
//! source, a CREATE of lone nodes with literal property maps last, and properties that
//! read the row only through fields named by constants (see [`plan`]). Inside an
//! explicit transaction, where the direct path is not taken, the row path runs instead.

use crate::batch::Batch;
use crate::error::QueryError;
use crate::expr::func::{bool_of_str, float_of_str, int_of_str, temporal_kind};
use crate::expr::temporal;
use crate::expr::{eval, CExpr, Env, Func};
use crate::ops::load::{
    field_count_message, header_keys, pool, read_error, resolve, token_message, Spec,
};
use crate::ops::write::{CreateStep, PropsExpr};
use crate::ops::{BoxOp, Cx, Op};
use crate::value::Value;
use quiver_common::limits::{CSV_CHUNK_BYTES, CSV_WINDOW_BYTES};
use quiver_common::types::{DataType, ScalarType};
use quiver_csv::reader::{spawn_reader, Msg};
use quiver_csv::tokenize::{Fields, Tokenizer};
use quiver_engine::bulk::Chunk;
use quiver_format::column::ColumnBuilder;
use rayon::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// A field of the record, as the statement names it.
#[derive(Debug, Clone, PartialEq)]
enum FieldRef {
    /// `row.x` or `row['x']` (a file with a header).
    Name(Arc<str>),
    /// `row[i]` (a file without one).
    Index(usize),
}

/// `replace(.., from, to)` calls with constant strings, innermost first.
type Replacements = Vec<(Arc<str>, Arc<str>)>;

/// What a field's text becomes.
#[derive(Debug, Clone, Copy)]
enum Conv {
    /// The text itself.
    Str,
    /// `toInteger`, `toFloat`, `toBoolean`.
    Int,
    Float,
    Bool,
    /// `date`, `localdatetime`, `datetime`, `localtime`, `time` of a string.
    Temporal(temporal::Kind),
}

/// How one property's value is made.
#[derive(Debug, Clone)]
enum Prop<F> {
    /// A field's text, through `replace(.., 'a', 'b')` calls with constant strings
    /// (innermost first), converted: computed from the bytes with the functions' own
    /// code, no value made per row.
    Text {
        field: F,
        replace: Replacements,
        conv: Conv,
    },
    /// Any other expression: the row's fields it reads are slots of the generic
    /// fields (see [`ColumnarPlan::generic`]).
    Expr(CExpr),
}

impl<F> Prop<F> {
    fn map<G>(&self, f: impl Fn(&F) -> G) -> Prop<G> {
        match self {
            Prop::Text {
                field,
                replace,
                conv,
            } => Prop::Text {
                field: f(field),
                replace: replace.clone(),
                conv: *conv,
            },
            Prop::Expr(e) => Prop::Expr(e.clone()),
        }
    }
}

/// The nodes of one pattern of the CREATE.
struct ShapeSpec {
    labels: Vec<Arc<str>>,
    keys: Vec<Arc<str>>,
    props: Vec<Prop<FieldRef>>,
}

/// What the planner found: the file, and the nodes each record makes.
pub struct ColumnarPlan {
    source: String,
    spec: Spec,
    shapes: Vec<ShapeSpec>,
    /// Fields the generic expressions read (their slot `j` is `generic[j]`).
    generic: Vec<FieldRef>,
    /// `CALL { } IN TRANSACTIONS [OF n ROWS]`: commit every n rows (`None` inside: the
    /// default 1,000).
    batches: Option<Option<CExpr>>,
}

impl ColumnarPlan {
    /// The plan of the same CREATE as the body of `CALL { WITH row ... } IN
    /// TRANSACTIONS OF rows ROWS`.
    pub fn in_transactions(self, rows: Option<CExpr>) -> ColumnarPlan {
        ColumnarPlan {
            batches: Some(rows),
            ..self
        }
    }
}

/// The columnar plan of `LOAD CSV FROM source ... AS row` (the row in `row_slot`)
/// followed by a CREATE of `steps`, when every property reads the row only through
/// fields named by constants; `None` sends the statement the row path.
pub fn plan(
    source: &CExpr,
    spec: &Spec,
    row_slot: usize,
    steps: &[CreateStep],
) -> Option<ColumnarPlan> {
    let CExpr::Const(Value::Str(source)) = source else {
        return None;
    };
    let mut shapes = Vec::new();
    let mut generic = Vec::new();
    for s in steps {
        let CreateStep::Node { labels, props, .. } = s else {
            return None;
        };
        let items: &[(Arc<str>, CExpr)] = match props {
            None => &[],
            Some(PropsExpr::Literal(items)) => items,
            Some(PropsExpr::Any(_)) => return None,
        };
        let mut keys = Vec::new();
        let mut ps = Vec::new();
        for (k, e) in items {
            keys.push(k.clone());
            ps.push(classify(e, spec.header, row_slot, &mut generic)?);
        }
        shapes.push(ShapeSpec {
            labels: labels.clone(),
            keys,
            props: ps,
        });
    }
    Some(ColumnarPlan {
        source: source.to_string(),
        spec: spec.clone(),
        shapes,
        generic,
        batches: None,
    })
}

/// `e` as a field of the row, when it is one.
fn field_of(e: &CExpr, header: bool, row: usize) -> Option<FieldRef> {
    match e {
        CExpr::Prop(x, k) if header && matches!(**x, CExpr::Slot(r) if r == row) => {
            Some(FieldRef::Name(k.clone()))
        }
        CExpr::Index(x, i) if matches!(**x, CExpr::Slot(r) if r == row) => match &**i {
            CExpr::Const(Value::Str(k)) if header => Some(FieldRef::Name(k.clone())),
            CExpr::Const(Value::Int(i)) if !header && *i >= 0 => Some(FieldRef::Index(*i as usize)),
            _ => None,
        },
        _ => None,
    }
}

fn classify(
    e: &CExpr,
    header: bool,
    row: usize,
    generic: &mut Vec<FieldRef>,
) -> Option<Prop<FieldRef>> {
    let conv = match e {
        CExpr::Func(f, args) if args.len() == 1 => match f {
            Func::ToInteger => Some((Conv::Int, &args[0])),
            Func::ToFloat => Some((Conv::Float, &args[0])),
            Func::ToBoolean => Some((Conv::Bool, &args[0])),
            Func::Date | Func::LocalDateTime | Func::DateTime | Func::LocalTime | Func::Time => {
                Some((Conv::Temporal(temporal_kind(*f)), &args[0]))
            }
            _ => None,
        },
        _ => None,
    };
    let (conv, inner) = conv.unwrap_or((Conv::Str, e));
    if let Some((field, replace)) = text_of(inner, header, row) {
        return Some(Prop::Text {
            field,
            replace,
            conv,
        });
    }
    rewrite(e, header, row, generic).map(Prop::Expr)
}

/// `e` as a field through `replace` calls with constant strings: the field and the
/// replacements, innermost first.
fn text_of(e: &CExpr, header: bool, row: usize) -> Option<(FieldRef, Replacements)> {
    if let Some(f) = field_of(e, header, row) {
        return Some((f, Vec::new()));
    }
    match e {
        CExpr::Func(Func::Replace, args) => match &args[..] {
            [x, CExpr::Const(Value::Str(a)), CExpr::Const(Value::Str(b))] => {
                let (f, mut reps) = text_of(x, header, row)?;
                reps.push((a.clone(), b.clone()));
                Some((f, reps))
            }
            _ => None,
        },
        _ => None,
    }
}

/// `s.replace(from, to)` into `out`, as `str::replace` (and so Cypher's `replace()`)
/// does it, without allocating per call.
fn replace_into(s: &str, from: &str, to: &str, out: &mut String) {
    out.clear();
    let mut last = 0;
    for (start, part) in s.match_indices(from) {
        out.push_str(&s[last..start]);
        out.push_str(to);
        last = start + part.len();
    }
    out.push_str(&s[last..]);
}

/// `e` with each field of the row replaced by its generic slot; `None` when `e` reads
/// the row otherwise (whole, by a computed key) or any other variable of the statement.
fn rewrite(e: &CExpr, header: bool, row: usize, generic: &mut Vec<FieldRef>) -> Option<CExpr> {
    if let Some(f) = field_of(e, header, row) {
        let j = generic.iter().position(|g| *g == f).unwrap_or_else(|| {
            generic.push(f);
            generic.len() - 1
        });
        return Some(CExpr::Slot(j));
    }
    let mut rw = |x: &CExpr| rewrite(x, header, row, generic);
    Some(match e {
        CExpr::Const(_) | CExpr::Local(_) => e.clone(),
        CExpr::Prop(x, k) => CExpr::Prop(Box::new(rw(x)?), k.clone()),
        CExpr::List(xs) => CExpr::List(xs.iter().map(&mut rw).collect::<Option<_>>()?),
        CExpr::Map(xs) => CExpr::Map(
            xs.iter()
                .map(|(k, x)| Some((k.clone(), rw(x)?)))
                .collect::<Option<_>>()?,
        ),
        CExpr::Index(a, b) => CExpr::Index(Box::new(rw(a)?), Box::new(rw(b)?)),
        CExpr::Slice(a, b, c) => CExpr::Slice(
            Box::new(rw(a)?),
            match b {
                Some(b) => Some(Box::new(rw(b)?)),
                None => None,
            },
            match c {
                Some(c) => Some(Box::new(rw(c)?)),
                None => None,
            },
        ),
        CExpr::Not(x) => CExpr::Not(Box::new(rw(x)?)),
        CExpr::Neg(x) => CExpr::Neg(Box::new(rw(x)?)),
        CExpr::Bin(op, a, b) => CExpr::Bin(*op, Box::new(rw(a)?), Box::new(rw(b)?)),
        CExpr::RegexConst(x, r) => CExpr::RegexConst(Box::new(rw(x)?), r.clone()),
        CExpr::IsNull(x, not) => CExpr::IsNull(Box::new(rw(x)?), *not),
        CExpr::Func(f, xs) => CExpr::Func(*f, xs.iter().map(&mut rw).collect::<Option<_>>()?),
        CExpr::Case {
            subject,
            arms,
            default,
        } => CExpr::Case {
            subject: match subject {
                Some(s) => Some(Box::new(rw(s)?)),
                None => None,
            },
            arms: arms
                .iter()
                .map(|(a, b)| Some((rw(a)?, rw(b)?)))
                .collect::<Option<_>>()?,
            default: match default {
                Some(d) => Some(Box::new(rw(d)?)),
                None => None,
            },
        },
        // The row whole, other variables, graph patterns and paths: the row path.
        _ => return None,
    })
}

/// The plan with its fields found in the file's header: `None` for a field the
/// header lacks (null in every row, as `row.missing` is).
struct Resolved {
    props: Vec<Vec<Prop<Option<usize>>>>,
    /// Per shape and key, the string bytes per row of the last chunk parsed (in
    /// 1/256ths): a chunk's builders are sized once from it and the chunk's line count,
    /// instead of doubling their way up (a copy each time).
    text_per_row: Vec<Vec<AtomicUsize>>,
    generic: Vec<Option<usize>>,
    /// The header's field count, which every record must have.
    width: Option<usize>,
}

impl Resolved {
    fn new(p: &ColumnarPlan, header: Option<&[Arc<str>]>) -> Resolved {
        let find = |f: &FieldRef| match (f, header) {
            (FieldRef::Name(n), Some(h)) => h.iter().position(|k| k == n),
            (FieldRef::Index(i), None) => Some(*i),
            _ => None,
        };
        Resolved {
            props: p
                .shapes
                .iter()
                .map(|s| s.props.iter().map(|x| x.map(find)).collect())
                .collect(),
            text_per_row: p
                .shapes
                .iter()
                .map(|s| s.props.iter().map(|_| AtomicUsize::new(0)).collect())
                .collect(),
            generic: p.generic.iter().map(find).collect(),
            width: header.map(|h| h.len()),
        }
    }
}

/// A bad record of a chunk: line (in the chunk), column, reason, message, raw bytes.
type Bad = (u64, u64, &'static str, String, Vec<u8>);

/// One parsed chunk: its good records as columns, per shape and key.
struct Parsed {
    rows: usize,
    cols: Vec<Vec<Chunk>>,
    bad: Vec<Bad>,
    /// Lines the chunk spans.
    lines: u64,
}

fn builder(p: &Prop<Option<usize>>) -> Option<ColumnBuilder> {
    let t = match p {
        Prop::Text { conv, .. } => match conv {
            Conv::Str => ScalarType::String,
            Conv::Int => ScalarType::Long,
            Conv::Float => ScalarType::Double,
            Conv::Bool => ScalarType::Boolean,
            Conv::Temporal(_) => return None,
        },
        Prop::Expr(_) => return None,
    };
    Some(ColumnBuilder::new(DataType::Scalar(t)))
}

/// Parses one chunk of records into columns (on a pool thread).
fn parse_chunk(data: &[u8], r: &Resolved, spec: &Spec, env: &Env) -> Result<Parsed, QueryError> {
    // At most one record per line.
    let lines = memchr::memchr_iter(b'\n', data).count() + 1;
    let mut builders: Vec<Vec<Option<ColumnBuilder>>> = r
        .props
        .iter()
        .zip(&r.text_per_row)
        .map(|(ps, per_row)| {
            ps.iter()
                .zip(per_row)
                .map(|(p, t)| {
                    let mut b = builder(p)?;
                    let text = (t.load(Ordering::Relaxed) * lines / 256).min(data.len());
                    b.reserve_exact(lines, text);
                    Some(b)
                })
                .collect()
        })
        .collect();
    let mut generic: Vec<Vec<Value>> = r.generic.iter().map(|_| Vec::new()).collect();
    // Values of the temporal conversions, per shape and key.
    let mut values: Vec<Vec<Vec<Value>>> = r
        .props
        .iter()
        .map(|ps| ps.iter().map(|_| Vec::new()).collect())
        .collect();
    let mut scratch = (String::new(), String::new());
    let mut bad = Vec::new();
    let mut rows = 0usize;
    let mut tok = Tokenizer::new(data, &spec.dialect);
    let mut fields = Fields::default();
    loop {
        let span = match tok.next_record(&mut fields) {
            Ok(None) => break,
            Ok(Some(s)) => s,
            Err(f) => {
                bad.push((
                    f.position.line,
                    f.position.column,
                    "csv",
                    token_message(f.error),
                    data[f.record_start..f.resume_at].to_vec(),
                ));
                continue;
            }
        };
        let n = fields.len();
        if let Some(w) = r.width.filter(|&w| w != n) {
            bad.push((
                span.line,
                if n.min(w) < n {
                    fields.column(n.min(w))
                } else {
                    0
                },
                "field-count",
                field_count_message(w, n),
                data[span.start..span.end].to_vec(),
            ));
            continue;
        }
        // Every field is checked, read or not, as the row path's map holds them all.
        if simdutf8::basic::from_utf8(&data[span.start..span.end]).is_err() {
            if let Some(i) =
                (0..n).find(|&i| simdutf8::basic::from_utf8(fields.get(data, i)).is_err())
            {
                bad.push((
                    span.line,
                    fields.column(i),
                    "utf8",
                    "invalid UTF-8".into(),
                    data[span.start..span.end].to_vec(),
                ));
                continue;
            }
        }
        let get = |i: Option<usize>| -> Option<&str> {
            let i = i.filter(|&i| i < n)?;
            let f = fields.get(data, i);
            if spec.null_if.as_deref() == Some(f) {
                return None;
            }
            // SAFETY: the record's fields were checked to be UTF-8 above.
            Some(unsafe { std::str::from_utf8_unchecked(f) })
        };
        for ((ps, bs), vs) in r.props.iter().zip(&mut builders).zip(&mut values) {
            for ((p, b), v) in ps.iter().zip(bs.iter_mut()).zip(vs.iter_mut()) {
                let Prop::Text {
                    field,
                    replace,
                    conv,
                } = p
                else {
                    continue;
                };
                let mut text = get(*field);
                if let Some(t) = text {
                    // Through the replacements, in the two scratch buffers by turns.
                    for (k, (from, to)) in replace.iter().enumerate() {
                        let (src, dst) = if k % 2 == 0 {
                            (&mut scratch.0, &mut scratch.1)
                        } else {
                            (&mut scratch.1, &mut scratch.0)
                        };
                        let from_text = if k == 0 { t } else { src.as_str() };
                        replace_into(from_text, from, to, dst);
                    }
                    if !replace.is_empty() {
                        let last = if replace.len() % 2 == 1 {
                            &scratch.1
                        } else {
                            &scratch.0
                        };
                        text = Some(last.as_str());
                    }
                }
                match (conv, b) {
                    (Conv::Str, Some(b)) => match text {
                        Some(s) => b.push_bytes(s.as_bytes()),
                        None => b.push_null(),
                    },
                    (Conv::Int, Some(b)) => match text.and_then(int_of_str) {
                        Some(x) => b.push_i64(x),
                        None => b.push_null(),
                    },
                    (Conv::Float, Some(b)) => match text.and_then(float_of_str) {
                        Some(x) => b.push_f64(x),
                        None => b.push_null(),
                    },
                    (Conv::Bool, Some(b)) => match text.and_then(bool_of_str) {
                        Some(x) => b.push_bool(x),
                        None => b.push_null(),
                    },
                    (Conv::Temporal(kind), _) => v.push(match text {
                        Some(s) => temporal::from_string(*kind, s)?,
                        None => Value::Null,
                    }),
                    (_, None) => {}
                }
            }
        }
        for (g, &i) in generic.iter_mut().zip(&r.generic) {
            g.push(get(i).map_or(Value::Null, Value::str));
        }
        rows += 1;
    }
    for (bs, per_row) in builders.iter().zip(&r.text_per_row) {
        for (b, t) in bs.iter().zip(per_row) {
            // A little over, so that the next chunk rarely grows past it.
            if let Some(x) = b
                .as_ref()
                .and_then(|b| (b.string_bytes() * 264).checked_div(rows))
            {
                t.store(x, Ordering::Relaxed);
            }
        }
    }
    let fieldvals = Batch {
        cols: generic,
        len: rows,
    };
    let mut locals = Vec::new();
    let mut cols = Vec::with_capacity(r.props.len());
    for ((ps, bs), vs) in r.props.iter().zip(builders).zip(values) {
        let mut out = Vec::with_capacity(ps.len());
        for ((p, b), v) in ps.iter().zip(bs).zip(vs) {
            out.push(match (p, b) {
                (Prop::Expr(e), _) => {
                    let mut vs = Vec::with_capacity(rows);
                    for row in 0..rows {
                        vs.push(eval(env, e, &fieldvals, row, &mut locals)?);
                    }
                    Chunk::of_values(vs)
                }
                (_, Some(b)) => Chunk::Typed(b),
                (_, None) => Chunk::of_values(v),
            });
        }
        cols.push(out);
    }
    Ok(Parsed {
        rows,
        cols,
        bad,
        lines: tok.line(),
    })
}

/// The file being read.
struct Reading {
    path: PathBuf,
    rx: Option<crossbeam_channel::Receiver<Msg>>,
    recycle: crossbeam_channel::Sender<Vec<u8>>,
    handle: Option<std::thread::JoinHandle<()>>,
    cancel: Arc<AtomicBool>,
}

impl Drop for Reading {
    fn drop(&mut self) {
        crate::ops::load::stop_thread(&self.cancel, &mut self.rx, &mut self.handle);
    }
}

/// What the parse thread sends, in file order.
enum Piece {
    Chunks(Vec<Result<Parsed, QueryError>>),
    Error(QueryError),
}

/// Parsed windows in flight between the parse thread and the statement's thread.
const WINDOWS_IN_FLIGHT: usize = 0;

/// `LOAD CSV ... CREATE` as one operator (see the module docs).
pub struct ColumnarLoad {
    plan: ColumnarPlan,
    /// The statement as the row path plans it, for where the direct path is not taken.
    fallback: BoxOp,
    use_fallback: Option<bool>,
    done: bool,
}

impl ColumnarLoad {
    pub fn new(plan: ColumnarPlan, fallback: BoxOp) -> ColumnarLoad {
        ColumnarLoad {
            plan,
            fallback,
            use_fallback: None,
            done: false,
        }
    }

    /// Loads the whole file; the records loaded.
    fn run(&mut self, cx: &mut Cx) -> Result<usize, QueryError> {
        let path = resolve(cx.load.import_dir.as_deref(), &self.plan.source)?;
        let t = crate::ops::write::tx(cx)?;
        let shapes: Vec<usize> = self
            .plan
            .shapes
            .iter()
            .map(|s| t.bulk_shape(&s.labels, &s.keys))
            .collect();
        // In transactions: the rows of each (as `CallInTx` reads them).
        let batch = match &self.plan.batches {
            None => None,
            Some(rows) => {
                t.batched();
                Some(crate::ops::write::batch_rows(&cx.env, rows.as_ref())? as usize)
            }
        };
        let spec = &self.plan.spec;
        let empty = std::fs::metadata(&path)
            .map(|m| m.len() == 0)
            .unwrap_or(false);
        if spec.header && empty {
            return Ok(0);
        }
        let threads = rayon::current_num_threads().max(1);
        let chunk = (CSV_WINDOW_BYTES / (threads * 2)).clamp(64 << 10, CSV_CHUNK_BYTES);
        let cancel = Arc::new(AtomicBool::new(false));
        let (rx, recycle, handle) = spawn_reader(
            vec![path.clone()],
            None,
            spec.dialect,
            CSV_WINDOW_BYTES,
            chunk,
            spec.header,
            cancel.clone(),
            pool(),
        );
        let rd = Reading {
            path,
            rx: Some(rx),
            recycle,
            handle: Some(handle),
            cancel,
        };
        let Some(rx) = rd.rx.as_ref() else {
            return Ok(0);
        };
        // The header, then the first window.
        let (resolved, mut line, first) = match rx.recv() {
            Err(_) => return Ok(0),
            Ok(Msg::Error(e)) => return Err(read_error(e)),
            Ok(Msg::Header { fields, lines }) => {
                let keys = header_keys(&rd.path, fields)?;
                let r = Resolved::new(&self.plan, Some(&keys));
                // The first window follows.
                match rx.recv() {
                    Ok(Msg::Window(w)) => (r, lines, w),
                    Ok(Msg::Error(e)) => return Err(read_error(e)),
                    _ => return Ok(0),
                }
            }
            // A header was asked for and the reader found none: an empty file.
            Ok(Msg::Window(_)) if spec.header => return Ok(0),
            Ok(Msg::Window(w)) => (Resolved::new(&self.plan, None), 0, w),
        };
        let env = &cx.env;
        let stop = cx.cancel;
        let load = &mut cx.load;
        let mut tx = cx.tx.as_deref_mut();
        let resolved = &resolved;
        let recycle = &rd.recycle;
        std::thread::scope(|scope| -> Result<usize, QueryError> {
            // Parsing runs on a thread of its own (its chunks in parallel on the pool),
            // so that the appends of one window overlap the parsing of the next.
            let (ptx, prx) = crossbeam_channel::bounded::<Piece>(WINDOWS_IN_FLIGHT);
            std::thread::Builder::new()
                .name("quiver-load-parse".into())
                .spawn_scoped(scope, move || {
                    let windows = std::iter::once(Msg::Window(first)).chain(rx.iter());
                    for msg in windows {
                        let piece = match msg {
                            Msg::Window(w) => {
                                let mut ranges = Vec::with_capacity(w.chunk_ends.len());
                                let mut s = 0;
                                for &e in &w.chunk_ends {
                                    ranges.push((s, e));
                                    s = e;
                                }
                                let parsed = ranges
                                    .par_iter()
                                    .map(|&(s, e)| parse_chunk(&w.data[s..e], resolved, spec, env))
                                    .collect();
                                let _ = recycle.try_send(w.data);
                                Piece::Chunks(parsed)
                            }
                            Msg::Error(e) => Piece::Error(read_error(e)),
                            Msg::Header { .. } => continue,
                        };
                        if ptx.send(piece).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| {
                    QueryError::Csv(format!("cannot start the LOAD CSV parse thread: {e}"))
                })?;
            let mut rows = 0;
            // Rows of the transaction not committed yet (in transactions).
            let mut since = 0usize;
            let mut each = || -> Result<(), QueryError> {
                for piece in prx.iter() {
                    if stop.is_some_and(|c| c.load(Ordering::Relaxed)) {
                        return Err(QueryError::Cancelled);
                    }
                    let chunks = match piece {
                        Piece::Chunks(c) => c,
                        Piece::Error(e) => return Err(e),
                    };
                    for p in chunks {
                        let p = p?;
                        for (l, column, reason, msg, raw) in p.bad {
                            if !spec.ignore_bad {
                                return Err(QueryError::Csv(format!(
                                "{}:{}:{}: {msg} (IGNORE BAD skips bad rows and writes them to a rejects file)",
                                rd.path.display(),
                                line + l + 1,
                                column + 1
                            )));
                            }
                            load.reject(&rd.path, line + l, column, reason, &msg, &raw)?;
                        }
                        line += p.lines;
                        rows += p.rows;
                        let t = tx.as_deref_mut().ok_or_else(|| {
                            QueryError::Unsupported(
                                "this statement cannot write here (a read-only context)".into(),
                            )
                        })?;
                        let (mut n, mut cols) = (p.rows, p.cols);
                        // A batch that ends inside the chunk commits there; the rest
                        // begins the next.
                        while let Some(room) = batch.map(|b| b - since).filter(|&r| r < n) {
                            let rest: Vec<Vec<Chunk>> = cols
                                .iter_mut()
                                .map(|cs| cs.iter_mut().map(|c| c.split_off(room)).collect())
                                .collect();
                            for (&shape, cs) in shapes.iter().zip(cols) {
                                t.bulk_nodes(shape, room, cs)?;
                            }
                            t.commit_continue()?;
                            since = 0;
                            (n, cols) = (n - room, rest);
                        }
                        for (&shape, cs) in shapes.iter().zip(cols) {
                            t.bulk_nodes(shape, n, cs)?;
                        }
                        since += n;
                        if batch == Some(since) {
                            t.commit_continue()?;
                            since = 0;
                        }
                    }
                }
                // The last batch commits now, as `CallInTx`'s does.
                if since > 0 {
                    if let Some(t) = tx.as_deref_mut() {
                        t.commit_continue()?;
                    }
                }
                Ok(())
            };
            // A failure stops the reader, and with it the parse thread, before the
            // scope waits for them.
            each().inspect_err(|_| rd.cancel.store(true, Ordering::Relaxed))?;
            Ok(rows)
        })
    }
}

impl Op for ColumnarLoad {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        // Typed input (a Parquet file) is read by the row path, which takes its values
        // as they are typed rather than parsing text.
        let source = &self.plan.source;
        let fallback = *self.use_fallback.get_or_insert_with(|| {
            cx.explicit_tx
                || resolve(cx.load.import_dir.as_deref(), source)
                    .is_ok_and(|p| quiver_csv::reader::typed_source(&p).is_some())
        });
        if fallback {
            return self.fallback.next(cx);
        }
        if std::mem::replace(&mut self.done, true) {
            return Ok(None);
        }
        let rows = self.run(cx)?;
        // Nothing reads the rows of a CREATE that ends the statement: the batch only
        // carries their count.
        Ok((rows > 0).then(|| Batch {
            cols: Vec::new(),
            len: rows,
        }))
    }
}
