//! Arrow record batches as the import's typed rows.
//!
//! The import is a pipeline over windows of records (parsed in parallel, with its
//! budget, rejects and progress). An Arrow or Parquet input joins it as typed rows: a
//! [`TypedBatch`] per record batch, whose integers, floats, booleans, strings, dates and
//! timestamps the parse stage copies into its columns as they are; other values (lists,
//! unsigned 64-bit integers, times of day) and values whose column the header types
//! otherwise are read through their text, as a CSV field would be, and a rejected row
//! is written to the rejects file as a CSV record in the import's dialect. The columns'
//! types come from the schema ([`quiver_type`]), not from sniffing.
//!
//! Before, batches were written as CSV text on the reader thread and parsed again:
//! 1.6x the time of the same import from CSV on dolt 1m, where typed rows take less
//! (figures in `bench/python_bench.py`'s results in the README).

use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, BooleanArray, Date32Array, Float64Array, Int64Array, LargeStringArray,
    ListArray, NullArray, RecordBatch, StringArray, StringViewArray, TimestampMicrosecondArray,
    UInt64Array,
};
use arrow_buffer::NullBuffer;
use arrow_schema::{ArrowError, DataType as A, Field, TimeUnit};
use quiver_common::types::{DataType, ScalarType};
use quiver_csv::reader::{Bits, TypedColumn, TypedRows};
use quiver_csv::Dialect;
use std::io;
use std::sync::Arc;

/// A column's property type, from its Arrow type; `Err` for a type no property can
/// hold (binary, structs, maps, unions).
pub fn quiver_type(t: &A) -> Result<DataType, String> {
    let scalar = |t: &A| -> Result<ScalarType, String> {
        Ok(match t {
            A::Int8
            | A::Int16
            | A::Int32
            | A::Int64
            | A::UInt8
            | A::UInt16
            | A::UInt32
            | A::UInt64 => ScalarType::Long,
            A::Float16
            | A::Float32
            | A::Float64
            | A::Decimal32(..)
            | A::Decimal64(..)
            | A::Decimal128(..)
            | A::Decimal256(..) => ScalarType::Double,
            A::Boolean => ScalarType::Boolean,
            A::Utf8 | A::LargeUtf8 | A::Utf8View | A::Null => ScalarType::String,
            A::Dictionary(_, v) if matches!(**v, A::Utf8 | A::LargeUtf8 | A::Utf8View) => {
                ScalarType::String
            }
            A::Date32 | A::Date64 => ScalarType::Date,
            A::Timestamp(_, None) => ScalarType::LocalDateTime,
            A::Timestamp(_, Some(_)) => ScalarType::DateTime,
            // Times of day and durations have no column type: their ISO text.
            A::Time32(_) | A::Time64(_) | A::Duration(_) => ScalarType::String,
            other => return Err(format!("{other} values have no property type")),
        })
    };
    match t {
        A::List(f)
        | A::LargeList(f)
        | A::FixedSizeList(f, _)
        | A::ListView(f)
        | A::LargeListView(f) => Ok(DataType::Array(scalar(f.data_type())?)),
        t => Ok(DataType::Scalar(scalar(t)?)),
    }
}

/// A column cast to one of the few layouts the writer knows, held as its typed array
/// (the downcast is paid once a batch, not once a value).
pub(crate) enum Col {
    Null(NullArray),
    I64(Int64Array),
    U64(UInt64Array),
    F64(Float64Array),
    Bool(BooleanArray),
    Str(StringArray),
    LargeStr(LargeStringArray),
    View(StringViewArray),
    Date(Date32Array),
    /// Microseconds; with a zone (an instant, written with `Z`) or without.
    Ts(TimestampMicrosecondArray, bool),
    List(ListArray, Box<Col>),
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

fn cast(a: &ArrayRef, to: &A) -> Result<ArrayRef, ArrowError> {
    arrow_cast::cast(a, to)
}

impl Col {
    pub(crate) fn of(a: &ArrayRef) -> Result<Col, ArrowError> {
        Ok(match a.data_type() {
            A::Null => Col::Null(NullArray::new(a.len())),
            A::Int64 => Col::I64(a.as_primitive().clone()),
            A::Int8 | A::Int16 | A::Int32 | A::UInt8 | A::UInt16 | A::UInt32 => {
                Col::I64(cast(a, &A::Int64)?.as_primitive().clone())
            }
            A::UInt64 => Col::U64(a.as_primitive().clone()),
            A::Float64 => Col::F64(a.as_primitive().clone()),
            A::Float16
            | A::Float32
            | A::Decimal32(..)
            | A::Decimal64(..)
            | A::Decimal128(..)
            | A::Decimal256(..) => Col::F64(cast(a, &A::Float64)?.as_primitive().clone()),
            A::Boolean => Col::Bool(a.as_boolean().clone()),
            A::Utf8 => Col::Str(a.as_string().clone()),
            A::LargeUtf8 => Col::LargeStr(a.as_string().clone()),
            A::Utf8View => Col::View(a.as_string_view().clone()),
            A::Date32 => Col::Date(a.as_primitive().clone()),
            A::Date64 => Col::Date(cast(a, &A::Date32)?.as_primitive().clone()),
            A::Timestamp(unit, tz) => {
                let us = match unit {
                    TimeUnit::Microsecond => a.clone(),
                    _ => cast(a, &A::Timestamp(TimeUnit::Microsecond, tz.clone()))?,
                };
                Col::Ts(us.as_primitive().clone(), tz.is_some())
            }
            A::List(_) => {
                let l = a.as_list::<i32>().clone();
                let inner = Col::of(l.values())?;
                Col::List(l, Box::new(inner))
            }
            A::LargeList(f) | A::FixedSizeList(f, _) | A::ListView(f) | A::LargeListView(f) => {
                let to = A::List(Arc::new(Field::new("item", f.data_type().clone(), true)));
                let l = cast(a, &to)?.as_list::<i32>().clone();
                let inner = Col::of(l.values())?;
                Col::List(l, Box::new(inner))
            }
            _ => Col::Str(cast(a, &A::Utf8)?.as_string().clone()),
        })
    }

    pub(crate) fn array(&self) -> &dyn Array {
        match self {
            Col::Null(a) => a,
            Col::I64(a) => a,
            Col::U64(a) => a,
            Col::F64(a) => a,
            Col::Bool(a) => a,
            Col::Str(a) => a,
            Col::LargeStr(a) => a,
            Col::View(a) => a,
            Col::Date(a) => a,
            Col::Ts(a, _) => a,
            Col::List(a, _) => a,
        }
    }

    /// The column's validity (`None`: every value is there; a null column's is all
    /// unset).
    pub(crate) fn validity(&self) -> Option<NullBuffer> {
        self.array().logical_nulls()
    }
}

/// Writes CSV fields in a dialect.
struct Writer {
    dialect: Dialect,
    scratch: String,
}

impl Writer {
    /// Whether a field must be quoted: it holds the delimiter, the quote or a line break.
    fn needs_quotes(&self, s: &[u8]) -> bool {
        memchr::memchr3(self.dialect.delimiter, b'\n', b'\r', s).is_some()
            || self
                .dialect
                .quote
                .is_some_and(|q| memchr::memchr(q, s).is_some())
    }

    /// A string field, quoted when it needs to be.
    fn text(&self, s: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        if !self.needs_quotes(s) {
            out.extend_from_slice(s);
            return Ok(());
        }
        let Some(q) = self.dialect.quote else {
            return Err(io_err(format!(
                "a value holds the delimiter or a line break and quoting is off: {:?}",
                String::from_utf8_lossy(&s[..s.len().min(40)])
            )));
        };
        out.push(q);
        for &b in s {
            if b == q {
                out.push(q);
            }
            out.push(b);
        }
        out.push(q);
        Ok(())
    }

    /// Value `i` of `c` (not null).
    fn value(&mut self, c: &Col, i: usize, in_list: bool, out: &mut Vec<u8>) -> io::Result<()> {
        match c {
            Col::Null(_) => {}
            Col::I64(a) => out.extend_from_slice(itoa::Buffer::new().format(a.value(i)).as_bytes()),
            Col::U64(a) => out.extend_from_slice(itoa::Buffer::new().format(a.value(i)).as_bytes()),
            Col::F64(a) => out.extend_from_slice(ryu::Buffer::new().format(a.value(i)).as_bytes()),
            Col::Bool(a) => out.extend_from_slice(if a.value(i) { b"true" } else { b"false" }),
            Col::Str(a) => self.string(a.value(i).as_bytes(), in_list, out)?,
            Col::LargeStr(a) => self.string(a.value(i).as_bytes(), in_list, out)?,
            Col::View(a) => self.string(a.value(i).as_bytes(), in_list, out)?,
            Col::Date(a) => {
                self.scratch.clear();
                quiver_csv::value::format_date(a.value(i) as i64, &mut self.scratch);
                out.extend_from_slice(self.scratch.as_bytes());
            }
            Col::Ts(a, zoned) => {
                self.scratch.clear();
                if *zoned {
                    quiver_csv::value::format_datetime(a.value(i), &mut self.scratch);
                } else {
                    quiver_csv::value::format_local_datetime(a.value(i), &mut self.scratch);
                }
                out.extend_from_slice(self.scratch.as_bytes());
            }
            Col::List(l, inner) => {
                if in_list {
                    return Err(io_err("a list of lists has no property type"));
                }
                let offs = l.value_offsets();
                let (s, e) = (offs[i] as usize, offs[i + 1] as usize);
                // The whole list is one field: quoted when an element needs it.
                let start = out.len();
                for j in s..e {
                    if j > s {
                        out.push(self.dialect.array_delimiter);
                    }
                    if inner.array().is_valid(j) {
                        self.value(inner, j, true, out)?;
                    }
                }
                if self.needs_quotes(&out[start..]) {
                    let body = out.split_off(start);
                    self.text(&body, out)?;
                }
            }
        }
        Ok(())
    }

    fn string(&self, s: &[u8], in_list: bool, out: &mut Vec<u8>) -> io::Result<()> {
        if in_list {
            if s.contains(&self.dialect.array_delimiter) {
                return Err(io_err(format!(
                    "a list element holds the array delimiter '{}': {:?}; choose another array delimiter",
                    self.dialect.array_delimiter as char,
                    String::from_utf8_lossy(&s[..s.len().min(40)])
                )));
            }
            out.extend_from_slice(s);
            return Ok(());
        }
        self.text(s, out)
    }
}

/// One record batch as the import's typed rows: its columns cast to the layouts of
/// [`TypedColumn`] where one fits (once a batch), the others written as text value by
/// value when the parse stage asks.
pub struct TypedBatch {
    cols: Vec<Col>,
    valid: Vec<Option<NullBuffer>>,
    rows: usize,
    bytes: usize,
    dialect: Dialect,
}

impl TypedBatch {
    /// `bytes`: what the rows hold in memory (to size the parse stage's chunks).
    pub fn new(
        batch: &RecordBatch,
        bytes: usize,
        dialect: Dialect,
    ) -> Result<TypedBatch, ArrowError> {
        let cols: Vec<Col> = batch
            .columns()
            .iter()
            .map(|a| {
                Ok(match a.data_type() {
                    // Read in place as offsets and bytes: one copy a batch, not one a value.
                    A::LargeUtf8 | A::Utf8View | A::Dictionary(..) => {
                        Col::Str(cast(a, &A::Utf8)?.as_string().clone())
                    }
                    _ => Col::of(a)?,
                })
            })
            .collect::<Result<_, ArrowError>>()?;
        let valid = cols.iter().map(Col::validity).collect();
        Ok(TypedBatch {
            cols,
            valid,
            rows: batch.num_rows(),
            bytes,
            dialect,
        })
    }

    fn writer(&self) -> Writer {
        Writer {
            dialect: self.dialect,
            scratch: String::new(),
        }
    }
}

fn bits(v: &Option<NullBuffer>) -> Option<Bits<'_>> {
    bits_of(v.as_ref())
}

fn bits_of(v: Option<&NullBuffer>) -> Option<Bits<'_>> {
    v.map(|n| Bits {
        bytes: n.buffer().as_slice(),
        offset: n.offset(),
    })
}

/// A column in the layout the import reads; `valid` its validity.
fn typed<'a>(c: &'a Col, valid: Option<Bits<'a>>) -> TypedColumn<'a> {
    match c {
        Col::I64(a) => TypedColumn::Int {
            values: a.values(),
            valid,
        },
        Col::F64(a) => TypedColumn::Float {
            values: a.values(),
            valid,
        },
        Col::Bool(a) => TypedColumn::Bool {
            values: Bits {
                bytes: a.values().inner().as_slice(),
                offset: a.values().offset(),
            },
            valid,
        },
        Col::Str(a) => TypedColumn::Str {
            offsets: a.value_offsets(),
            data: a.value_data(),
            valid,
        },
        Col::Date(a) => TypedColumn::Days {
            values: a.values(),
            valid,
        },
        Col::Ts(a, zoned) => TypedColumn::Micros {
            values: a.values(),
            zoned: *zoned,
            valid,
        },
        Col::List(l, inner) => TypedColumn::List {
            offsets: l.value_offsets(),
            values: Box::new(typed(inner, bits_of(inner.array().nulls()))),
            valid,
        },
        _ => TypedColumn::Other,
    }
}

impl TypedRows for TypedBatch {
    fn rows(&self) -> usize {
        self.rows
    }

    fn width(&self) -> usize {
        self.cols.len()
    }

    fn bytes(&self) -> usize {
        self.bytes
    }

    fn column(&self, col: usize) -> TypedColumn<'_> {
        typed(&self.cols[col], bits(&self.valid[col]))
    }

    fn text(&self, col: usize, row: usize, out: &mut Vec<u8>) -> io::Result<bool> {
        if self.valid[col].as_ref().is_some_and(|v| v.is_null(row)) {
            return Ok(false);
        }
        let mut w = self.writer();
        match &self.cols[col] {
            Col::Str(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Col::LargeStr(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Col::View(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Col::List(l, inner) => {
                let offs = l.value_offsets();
                let (s, e) = (offs[row] as usize, offs[row + 1] as usize);
                for j in s..e {
                    if j > s {
                        out.push(self.dialect.array_delimiter);
                    }
                    if inner.array().is_valid(j) {
                        w.value(inner, j, true, out)?;
                    }
                }
            }
            c => w.value(c, row, false, out)?,
        }
        Ok(true)
    }

    fn records(&self, from: usize, to: usize, out: &mut Vec<u8>) {
        let mut w = self.writer();
        for i in from..to {
            for (k, (c, v)) in self.cols.iter().zip(&self.valid).enumerate() {
                if k > 0 {
                    out.push(self.dialect.delimiter);
                }
                if v.as_ref().is_none_or(|v| v.is_valid(i)) {
                    // A value with no text form (a list element holding the array
                    // delimiter) is left out of the record: the row's message says why.
                    let at = out.len();
                    if w.value(c, i, false, out).is_err() {
                        out.truncate(at);
                    }
                }
            }
            out.push(b'\n');
        }
    }
}
