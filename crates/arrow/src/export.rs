//! Columns of the graph written as Parquet: what `quiver export --format parquet` does
//! with the [`ColumnBuilder`]s it reads, a file per table, its columns named by the
//! import's header convention (`name:string`, `id:ID(User)`, `:START_ID(User)`) and
//! typed from the column's type, so that an import of the files gives the same graph.

use arrow_array::builder::BooleanBufferBuilder;
use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Float64Array, Int64Array, ListArray, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use arrow_buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType as A, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use quiver_common::types::{DataType, Physical, ScalarType};
use quiver_format::column::{ColumnBuilder, ColumnData};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The Arrow type a column of `t` is written as.
pub fn arrow_type(t: DataType) -> A {
    let scalar = |s: ScalarType| match s {
        ScalarType::Byte | ScalarType::Short | ScalarType::Int | ScalarType::Long => A::Int64,
        ScalarType::Float | ScalarType::Double => A::Float64,
        ScalarType::Boolean => A::Boolean,
        ScalarType::String | ScalarType::Char => A::Utf8,
        ScalarType::Date => A::Date32,
        ScalarType::LocalDateTime => A::Timestamp(TimeUnit::Microsecond, None),
        ScalarType::DateTime => A::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
    };
    match t {
        DataType::Scalar(s) => scalar(s),
        DataType::Array(s) => A::List(Arc::new(Field::new("item", scalar(s), true))),
    }
}

fn nulls(c: &ColumnBuilder) -> Option<NullBuffer> {
    if c.null_count() == 0 {
        return None;
    }
    let mut b = BooleanBufferBuilder::new(c.len());
    for i in 0..c.len() {
        b.append(c.is_valid(i));
    }
    Some(NullBuffer::new(b.finish()))
}

/// Column `c` as an Arrow array of [`arrow_type`]`(c.dtype)`.
pub fn to_array(c: &ColumnBuilder) -> ArrayRef {
    let valid = nulls(c);
    match c.dtype {
        DataType::Array(_) => {
            let child = c
                .list_child_ref()
                .map(to_array)
                .unwrap_or_else(|| arrow_array::new_empty_array(&A::Null));
            let mut offsets = Vec::with_capacity(c.len() + 1);
            offsets.push(0i32);
            for i in 0..c.len() {
                offsets.push(c.list_range(i).1 as i32);
            }
            let field = Arc::new(Field::new("item", child.data_type().clone(), true));
            Arc::new(ListArray::new(
                field,
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                child,
                valid,
            ))
        }
        DataType::Scalar(t) => match t.physical() {
            Physical::I64 => {
                let v = c.i64_values();
                match t {
                    ScalarType::Date => Arc::new(Date32Array::new(
                        v.iter().map(|&d| d as i32).collect(),
                        valid,
                    )),
                    ScalarType::LocalDateTime => {
                        Arc::new(TimestampMicrosecondArray::new(v.to_vec().into(), valid))
                    }
                    ScalarType::DateTime => Arc::new(
                        TimestampMicrosecondArray::new(v.to_vec().into(), valid)
                            .with_timezone("UTC"),
                    ),
                    _ => Arc::new(Int64Array::new(v.to_vec().into(), valid)),
                }
            }
            Physical::F64 => Arc::new(Float64Array::new(c.f64_values().to_vec().into(), valid)),
            Physical::Bool => Arc::new(BooleanArray::new(
                c.bool_values().iter().copied().collect(),
                valid,
            )),
            Physical::Bytes => strings(c, valid),
        },
    }
}

/// A string column as offsets over its bytes (no copy a value); bytes that are not
/// UTF-8 (which the import never stores) are replaced, value by value.
fn strings(c: &ColumnBuilder, valid: Option<NullBuffer>) -> ArrayRef {
    if let ColumnData::Bytes { ends, data } = &c.data {
        if data.len() <= i32::MAX as usize {
            let mut offsets = Vec::with_capacity(ends.len() + 1);
            offsets.push(0i32);
            offsets.extend(ends.iter().map(|&e| e as i32));
            if let Ok(a) = StringArray::try_new(
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                Buffer::from_slice_ref(data),
                valid.clone(),
            ) {
                return Arc::new(a);
            }
        }
    }
    Arc::new(StringArray::from_iter((0..c.len()).map(|i| {
        c.is_valid(i)
            .then(|| String::from_utf8_lossy(c.bytes_at(i)).into_owned())
    })))
}

/// Column `c` as an Arrow array, its buffers moved rather than copied where the layouts
/// agree (integers, local datetimes, floats, UTF-8 string bytes); else [`to_array`].
pub fn into_array(c: ColumnBuilder) -> ArrayRef {
    let DataType::Scalar(t) = c.dtype else {
        return to_array(&c);
    };
    let movable = match (&c.data, t) {
        (
            ColumnData::I64(_),
            ScalarType::Byte
            | ScalarType::Short
            | ScalarType::Int
            | ScalarType::Long
            | ScalarType::LocalDateTime,
        ) => true,
        (ColumnData::F64(_), _) => true,
        (ColumnData::Bytes { ends, data }, ScalarType::String | ScalarType::Char) => {
            data.len() <= i32::MAX as usize
                && std::str::from_utf8(data)
                    .is_ok_and(|s| ends.iter().all(|&e| s.is_char_boundary(e as usize)))
        }
        _ => false,
    };
    if !movable {
        return to_array(&c);
    }
    let valid = nulls(&c);
    let n = c.len();
    match c.data {
        ColumnData::I64(v) if t == ScalarType::LocalDateTime => {
            Arc::new(TimestampMicrosecondArray::new(v.into(), valid))
        }
        ColumnData::I64(v) => Arc::new(Int64Array::new(v.into(), valid)),
        ColumnData::F64(v) => Arc::new(Float64Array::new(v.into(), valid)),
        ColumnData::Bytes { ends, data } => {
            let mut offsets = Vec::with_capacity(ends.len() + 1);
            offsets.push(0i32);
            offsets.extend(ends.iter().map(|&e| e as i32));
            // Checked above: UTF-8, split at character boundaries, offsets that fit.
            Arc::new(StringArray::new(
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                Buffer::from_vec(data),
                valid,
            ))
        }
        // Not reached: `movable` admits only the layouts above.
        ColumnData::Bool(_) | ColumnData::List { .. } => Arc::new(arrow_array::NullArray::new(n)),
    }
}

/// One Parquet file being written: a record batch per call of [`ParquetTable::write`].
pub struct ParquetTable {
    w: ArrowWriter<File>,
    schema: SchemaRef,
    path: PathBuf,
}

impl ParquetTable {
    /// A new file at `path` with these columns (header names and types).
    pub fn create(path: &Path, columns: &[(String, DataType)]) -> Result<ParquetTable, String> {
        let schema = Arc::new(Schema::new(
            columns
                .iter()
                .map(|(n, t)| Field::new(n, arrow_type(*t), true))
                .collect::<Vec<_>>(),
        ));
        let f = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let w = ArrowWriter::try_new(f, schema.clone(), Some(props))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(ParquetTable {
            w,
            schema,
            path: path.to_path_buf(),
        })
    }

    /// Writes the rows of `cols` (one per column, in the order given at create).
    pub fn write(&mut self, cols: &[ColumnBuilder]) -> Result<(), String> {
        let arrays = cols.iter().map(to_array).collect();
        let b = RecordBatch::try_new(self.schema.clone(), arrays)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.w
            .write(&b)
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }

    /// Writes the footer.
    pub fn finish(self) -> Result<(), String> {
        self.w
            .close()
            .map(|_| ())
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }
}
