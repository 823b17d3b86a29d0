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

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Float64Array, Int64Array, NullArray,
    RecordBatch, StringArray, Time64NanosecondArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType as A, Field, Schema, SchemaRef, TimeUnit};
use quiver_engine::value::{zone_name, RelRef, Value};
use quiver_query::batch::Batch;
use quiver_query::{Graph, QueryError};
use serde_json::{Map as JMap, Value as J};
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
    /// The rows as record batches already (a projection read from the column chunks,
    /// [`crate::scan`]): `cols` is then empty until [`Rows::with_values`].
    pub arrow: Option<(SchemaRef, Vec<RecordBatch>)>,
}

/// The values of an array of a type [`crate::scan`] gives, appended to `out`.
fn values_of(a: &ArrayRef, out: &mut Vec<Value>) {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Date32Type, Float64Type, Int64Type, TimestampMicrosecondType};
    // Value `i` by `f`, or null.
    let mut each = |f: &dyn Fn(usize) -> Value| {
        out.extend((0..a.len()).map(|i| if a.is_valid(i) { f(i) } else { Value::Null }))
    };
    // Each array downcast once, not once a value.
    match a.data_type() {
        A::Int64 => {
            let v = a.as_primitive::<Int64Type>();
            each(&|i| Value::Int(v.value(i)))
        }
        A::Float64 => {
            let v = a.as_primitive::<Float64Type>();
            each(&|i| Value::Float(v.value(i)))
        }
        A::Boolean => {
            let v = a.as_boolean();
            each(&|i| Value::Bool(v.value(i)))
        }
        A::Utf8 => {
            let v = a.as_string::<i32>();
            each(&|i| Value::str(v.value(i)))
        }
        A::Date32 => {
            let v = a.as_primitive::<Date32Type>();
            each(&|i| Value::Date(v.value(i) as i64))
        }
        A::Timestamp(_, None) => {
            let v = a.as_primitive::<TimestampMicrosecondType>();
            each(&|i| Value::local_datetime_us(v.value(i)))
        }
        _ => each(&|_| Value::Null),
    }
}

fn schema_of(columns: &[String], kinds: &[Kind]) -> SchemaRef {
    let fields: Vec<Field> = columns
        .iter()
        .zip(kinds)
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
    Arc::new(Schema::new(fields))
}

/// The column types of a result that arrives in parts (a streamed query): its first
/// part fixes them, as an Arrow stream's schema comes before its batches. A later part
/// whose values do not fit them (an integer where the first part had strings, any value
/// in a column the first part left all null) is an error that says so, never values
/// dropped.
pub struct StreamTypes {
    schema: SchemaRef,
    kinds: Vec<Kind>,
    first_rows: usize,
}

impl StreamTypes {
    pub fn new(first: &Rows) -> StreamTypes {
        let kinds: Vec<Kind> = first.cols.iter().map(|c| Kind::of(c)).collect();
        StreamTypes {
            schema: schema_of(&first.columns, &kinds),
            kinds,
            first_rows: first.len,
        }
    }

    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// A part of the result as one record batch of the schema.
    pub fn batch(&self, rows: &Rows) -> Result<RecordBatch, String> {
        for (i, (c, k)) in rows.cols.iter().zip(&self.kinds).enumerate() {
            let here = Kind::of(c);
            if here != Kind::Null && k.clone().join(here.clone()) != *k {
                return Err(format!(
                    "column '{}' holds {:?} values after its first {} rows typed it {:?}; a streamed result keeps its first batch's types: read it with execute(...).arrow(), which types a column from all its values",
                    self.schema.field(i).name(),
                    here,
                    self.first_rows,
                    k
                ));
            }
        }
        rows.batch(&self.schema, &self.kinds, 0, rows.len)
    }
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

    /// The rows from `from` on (the entities they mention kept whole).
    pub fn slice(mut self, from: usize) -> Rows {
        let from = from.min(self.len);
        for c in &mut self.cols {
            c.drain(..from.min(c.len()));
        }
        self.len -= from;
        self
    }

    /// Rows read as record batches ([`crate::scan`]).
    pub fn of_arrow(columns: Vec<String>, schema: SchemaRef, batches: Vec<RecordBatch>) -> Rows {
        Rows {
            len: batches.iter().map(|b| b.num_rows()).sum(),
            cols: Vec::new(),
            columns,
            arrow: Some((schema, batches)),
            ..Rows::default()
        }
    }

    /// Whether the values are still to be made from record batches.
    pub fn needs_values(&self) -> bool {
        self.arrow.is_some() && self.cols.len() < self.columns.len()
    }

    /// These rows with their values made from their record batches (of the scalar
    /// types [`crate::scan`] gives), for a caller that reads them row by row.
    pub fn with_values(&self) -> Rows {
        let Some((schema, batches)) = &self.arrow else {
            return Rows::default();
        };
        let mut cols: Vec<Vec<Value>> = vec![Vec::with_capacity(self.len); schema.fields().len()];
        for b in batches {
            for (c, a) in b.columns().iter().enumerate() {
                values_of(a, &mut cols[c]);
            }
        }
        Rows {
            columns: self.columns.clone(),
            cols,
            len: self.len,
            arrow: self.arrow.clone(),
            ..Rows::default()
        }
    }

    /// The rows as record batches of at most `batch_rows` rows.
    pub fn to_arrow(&self, batch_rows: usize) -> Result<(SchemaRef, Vec<RecordBatch>), String> {
        if let Some((schema, batches)) = &self.arrow {
            return Ok((schema.clone(), batches.clone()));
        }
        let kinds: Vec<Kind> = self.cols.iter().map(|c| Kind::of(c)).collect();
        let schema = schema_of(&self.columns, &kinds);
        let mut out = Vec::new();
        let mut from = 0;
        let batch_rows = batch_rows.max(1);
        loop {
            let to = (from + batch_rows).min(self.len);
            out.push(self.batch(&schema, &kinds, from, to)?);
            from = to;
            if from >= self.len {
                break;
            }
        }
        Ok((schema, out))
    }

    /// Rows `from..to` as a record batch of `schema` (whose types are `kinds`).
    fn batch(
        &self,
        schema: &SchemaRef,
        kinds: &[Kind],
        from: usize,
        to: usize,
    ) -> Result<RecordBatch, String> {
        let arrays: Vec<ArrayRef> = self
            .cols
            .iter()
            .zip(kinds)
            .map(|(c, k)| self.array(k, &c[from..to]))
            .collect();
        RecordBatch::try_new_with_options(
            schema.clone(),
            arrays,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(to - from)),
        )
        .map_err(|e| e.to_string())
    }

    fn array(&self, k: &Kind, vals: &[Value]) -> ArrayRef {
        // Values of other kinds in a column are nulls of it (`Kind::of` chose the kind
        // every value fits: an integer among floats is read as a float).
        let vs = vals.iter();
        match k {
            Kind::Null => Arc::new(NullArray::new(vals.len())),
            Kind::Int => Arc::new(Int64Array::from_iter(vs.map(|v| match v {
                Value::Int(i) => Some(*i),
                _ => None,
            }))),
            Kind::Float => Arc::new(Float64Array::from_iter(vs.map(|v| match v {
                Value::Float(f) => Some(*f),
                Value::Int(i) => Some(*i as f64),
                _ => None,
            }))),
            Kind::Bool => Arc::new(BooleanArray::from_iter(vs.map(|v| match v {
                Value::Bool(b) => Some(*b),
                _ => None,
            }))),
            Kind::Str => Arc::new(StringArray::from_iter(vs.map(|v| match v {
                Value::Str(s) => Some(s.as_ref()),
                _ => None,
            }))),
            Kind::Bytes => Arc::new(BinaryArray::from_iter(vs.map(|v| match v {
                Value::Bytes(b) => Some(b.as_ref()),
                _ => None,
            }))),
            Kind::Date => Arc::new(Date32Array::from_iter(vs.map(|v| match v {
                Value::Date(d) => i32::try_from(*d).ok(),
                _ => None,
            }))),
            Kind::LocalDateTime | Kind::DateTime(_) => {
                let a = TimestampMicrosecondArray::from_iter(vs.map(|v| match v {
                    Value::LocalDateTime(s) | Value::DateTime(s, _, _) => arrow_micros(s),
                    _ => None,
                }));
                match k {
                    Kind::DateTime(tz) => Arc::new(a.with_timezone(tz.as_str())),
                    _ => Arc::new(a),
                }
            }
            Kind::LocalTime => Arc::new(Time64NanosecondArray::from_iter(vs.map(|v| match v {
                Value::LocalTime(t) => Some(*t),
                _ => None,
            }))),
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
            Kind::Text => Arc::new(StringArray::from_iter(vs.map(|v| match v {
                Value::Null => None,
                v => Some(quiver_query::expr::to_string(v)),
            }))),
            Kind::Json => Arc::new(StringArray::from_iter(vs.map(|v| match v {
                Value::Null => None,
                v => Some(self.json(v).to_string()),
            }))),
        }
    }

    /// A value as JSON: nodes as `{"_id", "_labels", properties...}`, relationships as
    /// `{"_id", "_type", "_src", "_dst", properties...}`, paths as
    /// `{"nodes": [...], "relationships": [...]}`, byte arrays as hex, floats that JSON
    /// cannot hold and temporal values as their text.
    pub fn json(&self, v: &Value) -> J {
        let props = |o: &mut JMap<String, J>, p: &[(Arc<str>, Value)]| {
            for (k, x) in p {
                o.insert(k.to_string(), self.json(x));
            }
        };
        match v {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => {
                serde_json::Number::from_f64(*f).map_or_else(|| J::String(f.to_string()), J::Number)
            }
            Value::Str(s) => J::String(s.to_string()),
            Value::List(l) => J::Array(l.iter().map(|x| self.json(x)).collect()),
            Value::Map(m) => {
                let mut o = JMap::new();
                props(&mut o, m);
                J::Object(o)
            }
            Value::Node(n) => {
                let mut o = JMap::new();
                o.insert("_id".into(), J::from(*n));
                let d = self.nodes.get(n);
                let labels = d.map_or(Vec::new(), |d| {
                    d.labels.iter().map(|l| J::String(l.to_string())).collect()
                });
                o.insert("_labels".into(), J::Array(labels));
                if let Some(d) = d {
                    props(&mut o, &d.props);
                }
                J::Object(o)
            }
            Value::Rel(r) => {
                let mut o = JMap::new();
                let d = self.rels.get(&rel_key(r));
                o.insert("_id".into(), J::String(format!("{}:{}", r.ty, r.eid)));
                o.insert(
                    "_type".into(),
                    d.map_or(J::Null, |d| J::String(d.ty.to_string())),
                );
                o.insert("_src".into(), J::from(r.src));
                o.insert("_dst".into(), J::from(r.dst));
                if let Some(d) = d {
                    props(&mut o, &d.props);
                }
                J::Object(o)
            }
            Value::Path(p) => serde_json::json!({
                "nodes": p.nodes.iter().map(|&n| self.json(&Value::Node(n))).collect::<Vec<_>>(),
                "relationships": p.rels.iter().map(|r| self.json(&Value::Rel(r.clone()))).collect::<Vec<_>>(),
            }),
            Value::Bytes(b) => J::String(b.iter().map(|x| format!("{x:02x}")).collect()),
            other => J::String(quiver_query::expr::to_string(other)),
        }
    }
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
            // Past what Arrow's columns hold (days as i32, microseconds as i64: some
            // 5.8 million and 292,000 years), the value's text rather than a null.
            v if beyond_arrow(v) => Kind::Text,
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
            (
                Kind::Text,
                Kind::Date | Kind::LocalDateTime | Kind::DateTime(_) | Kind::LocalTime,
            )
            | (
                Kind::Date | Kind::LocalDateTime | Kind::DateTime(_) | Kind::LocalTime,
                Kind::Text,
            ) => Kind::Text,
            _ => Kind::Json,
        }
    }

    fn of(vals: &[Value]) -> Kind {
        let mut k = Kind::Null;
        // Values of the kind of the first non-null one (a scalar) need no join: one
        // discriminant test each, as a column of a million values mostly is.
        let mut same: Option<std::mem::Discriminant<Value>> = None;
        for v in vals {
            if matches!(v, Value::Null)
                || (same == Some(std::mem::discriminant(v)) && !beyond_arrow(v))
            {
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

/// A date or datetime that Arrow's temporal columns cannot hold (Cypher's run to years
/// ±999,999,999).
fn beyond_arrow(v: &Value) -> bool {
    match v {
        Value::Date(d) => i32::try_from(*d).is_err(),
        Value::LocalDateTime(s) | Value::DateTime(s, ..) => arrow_micros(s).is_none(),
        _ => false,
    }
}

/// A datetime as an Arrow microsecond timestamp (finer nanoseconds dropped), when it fits.
fn arrow_micros(s: &quiver_query::value::Stamp) -> Option<i64> {
    s.secs
        .checked_mul(1_000_000)
        .and_then(|us| us.checked_add(s.nanos as i64 / 1000))
}
