//! Arrow record batches as CSV records, for the import's reader thread.
//!
//! The import is a pipeline over windows of CSV records (split in parallel, parsed in
//! parallel, with its budget, rejects and progress). An Arrow or Parquet input joins it
//! at its start: [`CsvStream`] writes the batches as CSV in the import's dialect as the
//! reader thread reads, a buffer of about a megabyte at a time, so an input larger than
//! memory streams. The columns' types come from the schema ([`quiver_type`]), not from
//! sniffing the text.
//!
//! Why text and not typed columns straight into the import's batches: the import's
//! parse stage is where every guarantee lives (ids, rejects with their place, the
//! budget); writing numbers as text costs the reader thread about what reading the CSV
//! file costs, and the parse stage runs on every core beside it (figures in
//! `bench/python_bench.py`).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float64Type, Int64Type, TimestampMicrosecondType, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType as A, Field, TimeUnit};
use quiver_common::types::{DataType, ScalarType};
use quiver_csv::Dialect;
use std::io::{self, Read};
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

/// A column cast to one of the few layouts the writer knows.
enum Col {
    Null,
    I64(ArrayRef),
    U64(ArrayRef),
    F64(ArrayRef),
    Bool(ArrayRef),
    Str(ArrayRef),
    LargeStr(ArrayRef),
    View(ArrayRef),
    Date(ArrayRef),
    /// Microseconds; with a zone (an instant, written with `Z`) or without.
    Ts(ArrayRef, bool),
    List(ArrayRef, Box<Col>),
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

fn cast(a: &ArrayRef, to: &A) -> Result<ArrayRef, ArrowError> {
    arrow_cast::cast(a, to)
}

impl Col {
    fn of(a: &ArrayRef) -> Result<Col, ArrowError> {
        Ok(match a.data_type() {
            A::Null => Col::Null,
            A::Int64 => Col::I64(a.clone()),
            A::Int8 | A::Int16 | A::Int32 | A::UInt8 | A::UInt16 | A::UInt32 => {
                Col::I64(cast(a, &A::Int64)?)
            }
            A::UInt64 => Col::U64(a.clone()),
            A::Float64 => Col::F64(a.clone()),
            A::Float16
            | A::Float32
            | A::Decimal32(..)
            | A::Decimal64(..)
            | A::Decimal128(..)
            | A::Decimal256(..) => Col::F64(cast(a, &A::Float64)?),
            A::Boolean => Col::Bool(a.clone()),
            A::Utf8 => Col::Str(a.clone()),
            A::LargeUtf8 => Col::LargeStr(a.clone()),
            A::Utf8View => Col::View(a.clone()),
            A::Date32 => Col::Date(a.clone()),
            A::Date64 => Col::Date(cast(a, &A::Date32)?),
            A::Timestamp(TimeUnit::Microsecond, tz) => Col::Ts(a.clone(), tz.is_some()),
            A::Timestamp(_, tz) => Col::Ts(
                cast(a, &A::Timestamp(TimeUnit::Microsecond, tz.clone()))?,
                tz.is_some(),
            ),
            A::List(_) => {
                let l = a.as_list::<i32>();
                Col::List(a.clone(), Box::new(Col::of(l.values())?))
            }
            A::LargeList(f) | A::FixedSizeList(f, _) | A::ListView(f) | A::LargeListView(f) => {
                let to = A::List(Arc::new(Field::new("item", f.data_type().clone(), true)));
                let c = cast(a, &to)?;
                let inner = Col::of(c.as_list::<i32>().values())?;
                Col::List(c, Box::new(inner))
            }
            _ => Col::Str(cast(a, &A::Utf8)?),
        })
    }

    fn array(&self) -> Option<&ArrayRef> {
        match self {
            Col::Null => None,
            Col::I64(a)
            | Col::U64(a)
            | Col::F64(a)
            | Col::Bool(a)
            | Col::Str(a)
            | Col::LargeStr(a)
            | Col::View(a)
            | Col::Date(a)
            | Col::Ts(a, _)
            | Col::List(a, _) => Some(a),
        }
    }

    fn is_null(&self, i: usize) -> bool {
        self.array().is_none_or(|a| a.is_null(i))
    }

    /// The column's validity (`None`: every value is there; a null column has a
    /// buffer of its own, all unset).
    fn validity(&self) -> Option<arrow_buffer::NullBuffer> {
        match self.array() {
            None => Some(arrow_buffer::NullBuffer::new_null(0)),
            Some(a) => a.logical_nulls(),
        }
    }
}

/// Writes CSV fields in a dialect.
struct Writer {
    dialect: Dialect,
    scratch: String,
}

impl Writer {
    /// A string field, quoted when it holds the delimiter, the quote or a line break.
    fn text(&self, s: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let d = self.dialect.delimiter;
        let needs = s
            .iter()
            .any(|&b| b == d || b == b'\n' || b == b'\r' || Some(b) == self.dialect.quote);
        if !needs {
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
            Col::Null => {}
            Col::I64(a) => {
                let v = a.as_primitive::<Int64Type>().value(i);
                out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
            }
            Col::U64(a) => {
                let v = a.as_primitive::<UInt64Type>().value(i);
                out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
            }
            Col::F64(a) => {
                let v = a.as_primitive::<Float64Type>().value(i);
                out.extend_from_slice(ryu::Buffer::new().format(v).as_bytes());
            }
            Col::Bool(a) => {
                let v = a.as_boolean().value(i);
                out.extend_from_slice(if v { b"true" } else { b"false" });
            }
            Col::Str(a) => self.string(a.as_string::<i32>().value(i).as_bytes(), in_list, out)?,
            Col::LargeStr(a) => {
                self.string(a.as_string::<i64>().value(i).as_bytes(), in_list, out)?
            }
            Col::View(a) => self.string(a.as_string_view().value(i).as_bytes(), in_list, out)?,
            Col::Date(a) => {
                let v = a.as_primitive::<Date32Type>().value(i);
                self.scratch.clear();
                quiver_csv::value::format_date(v as i64, &mut self.scratch);
                out.extend_from_slice(self.scratch.as_bytes());
            }
            Col::Ts(a, zoned) => {
                let v = a.as_primitive::<TimestampMicrosecondType>().value(i);
                self.scratch.clear();
                if *zoned {
                    quiver_csv::value::format_datetime(v, &mut self.scratch);
                } else {
                    quiver_csv::value::format_local_datetime(v, &mut self.scratch);
                }
                out.extend_from_slice(self.scratch.as_bytes());
            }
            Col::List(a, inner) => {
                if in_list {
                    return Err(io_err("a list of lists has no property type"));
                }
                let l = a.as_list::<i32>();
                let offs = l.value_offsets();
                let (s, e) = (offs[i] as usize, offs[i + 1] as usize);
                // The whole list is one field: quoted when an element needs it.
                let start = out.len();
                let mut quote = false;
                for j in s..e {
                    if j > s {
                        out.push(self.dialect.array_delimiter);
                    }
                    if inner.is_null(j) {
                        continue;
                    }
                    let at = out.len();
                    self.value(inner, j, true, out)?;
                    let d = self.dialect.delimiter;
                    quote |= out[at..].iter().any(|&b| {
                        b == d || b == b'\n' || b == b'\r' || Some(b) == self.dialect.quote
                    });
                }
                if quote {
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

/// Batches in, CSV bytes out (the header first): what [`quiver_csv::reader`] reads from
/// a [`quiver_csv::reader::RecordSource`].
pub struct CsvStream {
    batches: Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>> + Send>,
    /// The batch being written and the next row of it.
    cols: Vec<Col>,
    valid: Vec<Option<arrow_buffer::NullBuffer>>,
    rows: usize,
    row: usize,
    buf: Vec<u8>,
    pos: usize,
    w: Writer,
    done: bool,
}

/// Bytes written ahead of the reader (then handed over as it reads).
const BUF_BYTES: usize = 1 << 20;

impl CsvStream {
    /// `names`: the header (the schema's field names); `batches`: the data.
    pub fn new(
        names: &[String],
        batches: Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>> + Send>,
        dialect: Dialect,
    ) -> io::Result<CsvStream> {
        let w = Writer {
            dialect,
            scratch: String::new(),
        };
        let mut buf = Vec::with_capacity(BUF_BYTES + 4096);
        for (i, n) in names.iter().enumerate() {
            if i > 0 {
                buf.push(dialect.delimiter);
            }
            w.text(n.as_bytes(), &mut buf)?;
        }
        buf.push(b'\n');
        Ok(CsvStream {
            batches,
            cols: Vec::new(),
            valid: Vec::new(),
            rows: 0,
            row: 0,
            buf,
            pos: 0,
            w,
            done: false,
        })
    }

    /// Writes rows into `buf` until it holds about [`BUF_BYTES`] or the input ends.
    fn refill(&mut self) -> io::Result<()> {
        self.buf.clear();
        self.pos = 0;
        while self.buf.len() < BUF_BYTES {
            if self.row == self.rows {
                match self.batches.next() {
                    None => {
                        self.done = true;
                        return Ok(());
                    }
                    Some(b) => {
                        let b = b.map_err(io_err)?;
                        self.cols = b
                            .columns()
                            .iter()
                            .map(Col::of)
                            .collect::<Result<_, _>>()
                            .map_err(io_err)?;
                        self.valid = self.cols.iter().map(Col::validity).collect();
                        self.rows = b.num_rows();
                        self.row = 0;
                    }
                }
                continue;
            }
            let i = self.row;
            for (k, (c, v)) in self.cols.iter().zip(&self.valid).enumerate() {
                if k > 0 {
                    self.buf.push(self.w.dialect.delimiter);
                }
                let present = match v {
                    None => true,
                    Some(v) => v.len() > i && v.is_valid(i),
                };
                if present {
                    self.w.value(c, i, false, &mut self.buf)?;
                }
            }
            self.buf.push(b'\n');
            self.row += 1;
        }
        Ok(())
    }
}

impl Read for CsvStream {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.buf.len() {
            if self.done {
                return Ok(0);
            }
            self.refill()?;
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
