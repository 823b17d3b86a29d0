//! Query results held column by column, and as Arrow record batches.
//!
//! [`Rows`] is what a query's sink fills: the values of each column, and the labels,
//! type and properties of every node and relationship they mention (read while the
//! query's snapshot is at hand, so that the result outlives it). [`Rows::to_arrow`]
//! gives record batches whose column types follow the values: integers `int64`, floats
//! `double` (integers among floats become floats), strings, booleans, dates
//! `date32`, local datetimes `timestamp[us]`, datetimes `timestamp[us, tz]` (the zone
//! of the column's values when they share one, else UTC), local times `time64[ns]`,
//! byte arrays `binary`, lists of one such type `list<...>`. Nodes, relationships,
//! paths, maps and columns of mixed types are JSON text, their field marked with the
//! metadata `quiver.json` so that a caller can turn them back into objects.

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Float64Builder, Int64Builder, StringBuilder,
    Time64NanosecondBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType as A, Field, Schema, SchemaRef, TimeUnit};
use quiver_engine::value::{zone_name, RelRef, Value};
use quiver_query::batch::Batch;
use quiver_query::{Graph, QueryError};
use std::collections::HashMap;
use std::sync::Arc;

/// A node as the result saw it.
#[derive(Debug, Clone)]
pub struct NodeData {
    pub labels: Vec<Arc<str>>,
    pub props: Vec<(Arc<str>, Value)>,
}

/// A relationship as the result saw it.
#[derive(Debug, Clone)]
pub struct RelData {
    pub ty: Arc<str>,
    pub props: Vec<(Arc<str>, Value)>,
}

/// A result: its columns' values and the entities they mention.
#[derive(Debug, Default)]
pub struct Rows {
    pub columns: Vec<String>,
    pub cols: Vec<Vec<Value>>,
    pub len: usize,
    pub nodes: HashMap<u64, NodeData>,
    pub rels: HashMap<(u32, u64), RelData>,
}

/// A relationship's key in [`Rows::rels`].
pub fn rel_key(r: &RelRef) -> (u32, u64) {
    (r.ty, r.eid)
}

impl Rows {
    /// Appends a batch the query produced, reading the entities it mentions from `g`.
    pub fn push(&mut self, g: &Graph, b: &Batch) -> Result<(), QueryError> {
        if self.cols.len() < b.cols.len() {
            self.cols.resize_with(b.cols.len(), Vec::new);
        }
        for (c, vals) in b.cols.iter().enumerate() {
            let vals = &vals[..b.len.min(vals.len())];
            for v in vals {
                self.resolve(g, v)?;
            }
            self.cols[c].extend_from_slice(vals);
        }
        self.len += b.len;
        Ok(())
    }

    fn node(&mut self, g: &Graph, n: u64) -> Result<(), QueryError> {
        if !self.nodes.contains_key(&n) {
            let d = NodeData {
                labels: g.labels(n)?,
                props: g.node_props(n)?,
            };
            for (_, v) in &d.props {
                self.resolve(g, v)?;
            }
            self.nodes.insert(n, d);
        }
        Ok(())
    }

    fn rel(&mut self, g: &Graph, r: &RelRef) -> Result<(), QueryError> {
        if !self.rels.contains_key(&rel_key(r)) {
            let d = RelData {
                ty: g.rel_type_name(r.ty),
                props: g.rel_props(r)?,
            };
            self.rels.insert(rel_key(r), d);
        }
        Ok(())
    }

    fn resolve(&mut self, g: &Graph, v: &Value) -> Result<(), QueryError> {
        match v {
            Value::Node(n) => self.node(g, *n)?,
            Value::Rel(r) => self.rel(g, r)?,
            Value::Path(p) => {
                for &n in &p.nodes {
                    self.node(g, n)?;
                }
                for r in &p.rels {
                    self.rel(g, r)?;
                }
            }
            Value::List(l) => {
                for x in l.iter() {
                    self.resolve(g, x)?;
                }
            }
            Value::Map(m) => {
                for (_, x) in m.iter() {
                    self.resolve(g, x)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The rows `from..to` as record batches of at most `batch_rows` rows.
    pub fn to_arrow(&self, batch_rows: usize) -> Result<(SchemaRef, Vec<RecordBatch>), String> {
        let kinds: Vec<Kind> = self.cols.iter().map(|c| Kind::of(c)).collect();
        let fields: Vec<Field> = self
            .columns
            .iter()
            .zip(&kinds)
            .map(|(name, k)| {
                let f = Field::new(name, k.arrow(), true);
                if matches!(k, Kind::Json) {
                    f.with_metadata(HashMap::from([(
                        "quiver.json".to_string(),
                        "1".to_string(),
                    )]))
                } else {
                    f
                }
            })
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let mut out = Vec::new();
        let mut from = 0;
        let batch_rows = batch_rows.max(1);
        loop {
            let to = (from + batch_rows).min(self.len);
            let arrays: Vec<ArrayRef> = self
                .cols
                .iter()
                .zip(&kinds)
                .map(|(c, k)| self.array(k, &c[from..to]))
                .collect();
            let b = RecordBatch::try_new_with_options(
                schema.clone(),
                arrays,
                &arrow_array::RecordBatchOptions::new().with_row_count(Some(to - from)),
            )
            .map_err(|e| e.to_string())?;
            out.push(b);
            from = to;
            if from >= self.len {
                break;
            }
        }
        Ok((schema, out))
    }

    fn array(&self, k: &Kind, vals: &[Value]) -> ArrayRef {
        match k {
            Kind::Null => Arc::new(arrow_array::NullArray::new(vals.len())),
            Kind::Int => {
                let mut b = Int64Builder::with_capacity(vals.len());
                for v in vals {
                    b.append_option(match v {
                        Value::Int(i) => Some(*i),
                        _ => None,
                    });
                }
                Arc::new(b.finish())
            }
            Kind::Float => {
                let mut b = Float64Builder::with_capacity(vals.len());
                for v in vals {
                    b.append_option(match v {
                        Value::Float(f) => Some(*f),
                        Value::Int(i) => Some(*i as f64),
                        _ => None,
                    });
                }
                Arc::new(b.finish())
            }
            Kind::Bool => {
                let mut b = BooleanBuilder::with_capacity(vals.len());
                for v in vals {
                    b.append_option(match v {
                        Value::Bool(x) => Some(*x),
                        _ => None,
                    });
                }
                Arc::new(b.finish())
            }
            Kind::Str => {
                let mut b = StringBuilder::with_capacity(vals.len(), vals.len() * 8);
                for v in vals {
                    match v {
                        Value::Str(s) => b.append_value(s),
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            Kind::Bytes => {
                let mut b = BinaryBuilder::new();
                for v in vals {
                    match v {
                        Value::Bytes(s) => b.append_value(s),
                        _ => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            Kind::Date => {
                let mut b = Date32Builder::with_capacity(vals.len());
                for v in vals {
                    b.append_option(match v {
                        Value::Date(d) => i32::try_from(*d).ok(),
                        _ => None,
                    });
                }
                Arc::new(b.finish())
            }
            Kind::LocalDateTime | Kind::DateTime(_) => {
                let mut b = TimestampMicrosecondBuilder::with_capacity(vals.len());
                for v in vals {
                    b.append_option(match v {
                        Value::LocalDateTime(s) | Value::DateTime(s, _, _) => s
                            .secs
                            .checked_mul(1_000_000)
                            .and_then(|us| us.checked_add(s.nanos as i64 / 1000)),
                        _ => None,
                    });
                }
                let a = b.finish();
                match k {
                    Kind::DateTime(tz) => Arc::new(a.with_timezone(tz.as_str())),
                    _ => Arc::new(a),
                }
            }
            Kind::LocalTime => {
                let mut b = Time64NanosecondBuilder::with_capacity(vals.len());
                for v in vals {
                    b.append_option(match v {
                        Value::LocalTime(t) => Some(*t),
                        _ => None,
                    });
                }
                Arc::new(b.finish())
            }
            Kind::List(inner) => {
                // Elements of one scalar kind: build the child from the flattened values.
                let mut offsets = vec![0i32];
                let mut valid = Vec::with_capacity(vals.len());
                let mut flat: Vec<Value> = Vec::new();
                for v in vals {
                    match v {
                        Value::List(l) => {
                            flat.extend(l.iter().cloned());
                            valid.push(true);
                        }
                        _ => valid.push(false),
                    }
                    offsets.push(flat.len() as i32);
                }
                let child = self.array(inner, &flat);
                let field = Arc::new(Field::new("item", inner.arrow(), true));
                Arc::new(arrow_array::ListArray::new(
                    field,
                    arrow_buffer::OffsetBuffer::new(offsets.into()),
                    child,
                    Some(arrow_buffer::NullBuffer::from(valid)),
                ))
            }
            Kind::Text => {
                let mut b = StringBuilder::with_capacity(vals.len(), vals.len() * 16);
                for v in vals {
                    match v {
                        Value::Null => b.append_null(),
                        v => b.append_value(text(v)),
                    }
                }
                Arc::new(b.finish())
            }
            Kind::Json => {
                let mut b = StringBuilder::with_capacity(vals.len(), vals.len() * 32);
                let mut s = String::new();
                for v in vals {
                    match v {
                        Value::Null => b.append_null(),
                        v => {
                            s.clear();
                            self.json(v, &mut s);
                            b.append_value(&s);
                        }
                    }
                }
                Arc::new(b.finish())
            }
        }
    }

    /// A value as JSON: nodes as `{"_id", "_labels", properties...}`, relationships as
    /// `{"_id", "_type", "_src", "_dst", properties...}`, paths as
    /// `{"nodes": [...], "relationships": [...]}`, temporal values as their ISO text.
    pub fn json(&self, v: &Value, out: &mut String) {
        use std::fmt::Write;
        let props = |rows: &Rows, p: &[(Arc<str>, Value)], out: &mut String| {
            for (k, x) in p {
                out.push(',');
                json_str(k, out);
                out.push(':');
                rows.json(x, out);
            }
        };
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Value::Float(f) if f.is_finite() => {
                let _ = write!(out, "{f:?}");
            }
            Value::Float(f) => json_str(&f.to_string(), out),
            Value::Str(s) => json_str(s, out),
            Value::List(l) => {
                out.push('[');
                for (i, x) in l.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.json(x, out);
                }
                out.push(']');
            }
            Value::Map(m) => {
                out.push('{');
                for (i, (k, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    json_str(k, out);
                    out.push(':');
                    self.json(x, out);
                }
                out.push('}');
            }
            Value::Node(n) => {
                let _ = write!(out, "{{\"_id\":{n},\"_labels\":[");
                if let Some(d) = self.nodes.get(n) {
                    for (i, l) in d.labels.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        json_str(l, out);
                    }
                    out.push(']');
                    props(self, &d.props, out);
                } else {
                    out.push(']');
                }
                out.push('}');
            }
            Value::Rel(r) => {
                let _ = write!(out, "{{\"_id\":\"{}:{}\",\"_type\":", r.ty, r.eid);
                match self.rels.get(&rel_key(r)) {
                    Some(d) => json_str(&d.ty, out),
                    None => out.push_str("null"),
                }
                let _ = write!(out, ",\"_src\":{},\"_dst\":{}", r.src, r.dst);
                if let Some(d) = self.rels.get(&rel_key(r)) {
                    props(self, &d.props, out);
                }
                out.push('}');
            }
            Value::Path(p) => {
                out.push_str("{\"nodes\":[");
                for (i, n) in p.nodes.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.json(&Value::Node(*n), out);
                }
                out.push_str("],\"relationships\":[");
                for (i, r) in p.rels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.json(&Value::Rel(r.clone()), out);
                }
                out.push_str("]}");
            }
            Value::Bytes(b) => {
                out.push('"');
                for x in b.iter() {
                    let _ = write!(out, "{x:02x}");
                }
                out.push('"');
            }
            other => json_str(&text(other), out),
        }
    }
}

/// A JSON string literal.
fn json_str(s: &str, out: &mut String) {
    use std::fmt::Write;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A value as Cypher's `toString` writes it (temporal values in ISO 8601).
pub fn text(v: &Value) -> String {
    quiver_query::expr::to_string(v)
}

/// What a column holds, for its Arrow type.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Null,
    Int,
    Float,
    Bool,
    Str,
    Bytes,
    Date,
    LocalDateTime,
    DateTime(String),
    LocalTime,
    List(Box<Kind>),
    /// Temporal values with no Arrow type of their own (times with an offset,
    /// durations): their ISO text.
    Text,
    Json,
}

impl Kind {
    fn arrow(&self) -> A {
        match self {
            Kind::Null => A::Null,
            Kind::Int => A::Int64,
            Kind::Float => A::Float64,
            Kind::Bool => A::Boolean,
            Kind::Str | Kind::Text | Kind::Json => A::Utf8,
            Kind::Bytes => A::Binary,
            Kind::Date => A::Date32,
            Kind::LocalDateTime => A::Timestamp(TimeUnit::Microsecond, None),
            Kind::DateTime(tz) => A::Timestamp(TimeUnit::Microsecond, Some(tz.as_str().into())),
            Kind::LocalTime => A::Time64(TimeUnit::Nanosecond),
            Kind::List(inner) => A::List(Arc::new(Field::new("item", inner.arrow(), true))),
        }
    }

    fn one(v: &Value) -> Kind {
        match v {
            Value::Null => Kind::Null,
            Value::Int(_) => Kind::Int,
            Value::Float(_) => Kind::Float,
            Value::Bool(_) => Kind::Bool,
            Value::Str(_) => Kind::Str,
            Value::Bytes(_) => Kind::Bytes,
            Value::Date(_) => Kind::Date,
            Value::LocalDateTime(_) => Kind::LocalDateTime,
            Value::DateTime(_, off, z) => Kind::DateTime(match zone_name(*z) {
                Some(name) => name.to_string(),
                None => {
                    let (sign, o) = if *off < 0 { ('-', -off) } else { ('+', *off) };
                    format!("{sign}{:02}:{:02}", o / 3600, o / 60 % 60)
                }
            }),
            Value::LocalTime(_) => Kind::LocalTime,
            Value::Time(..) | Value::Duration(_) => Kind::Text,
            Value::List(l) => {
                let mut k = Kind::Null;
                for x in l.iter() {
                    k = k.join(Kind::one(x));
                }
                match k {
                    Kind::Json | Kind::List(_) => Kind::Json,
                    k => Kind::List(Box::new(k)),
                }
            }
            Value::Map(_) | Value::Node(_) | Value::Rel(_) | Value::Path(_) => Kind::Json,
        }
    }

    fn join(self, other: Kind) -> Kind {
        match (self, other) {
            (Kind::Null, k) | (k, Kind::Null) => k,
            (a, b) if a == b => a,
            (Kind::Int, Kind::Float) | (Kind::Float, Kind::Int) => Kind::Float,
            (Kind::DateTime(_), Kind::DateTime(_)) => Kind::DateTime("UTC".into()),
            (Kind::List(a), Kind::List(b)) => match a.join(*b) {
                Kind::Json => Kind::Json,
                k => Kind::List(Box::new(k)),
            },
            (Kind::Text, Kind::Text) => Kind::Text,
            _ => Kind::Json,
        }
    }

    fn of(vals: &[Value]) -> Kind {
        let mut k = Kind::Null;
        // Values of the kind of the first non-null one (a scalar) need no join: one
        // discriminant test each, as a column of a million values mostly is.
        let mut same: Option<std::mem::Discriminant<Value>> = None;
        for v in vals {
            if matches!(v, Value::Null) || same == Some(std::mem::discriminant(v)) {
                continue;
            }
            k = k.join(Kind::one(v));
            if k == Kind::Json {
                break;
            }
            same = match v {
                Value::Int(_)
                | Value::Float(_)
                | Value::Bool(_)
                | Value::Str(_)
                | Value::Bytes(_)
                | Value::Date(_)
                | Value::LocalDateTime(_)
                | Value::LocalTime(_)
                    if same.is_none() =>
                {
                    Some(std::mem::discriminant(v))
                }
                _ => None,
            };
        }
        k
    }
}
