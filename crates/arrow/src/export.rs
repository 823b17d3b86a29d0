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
use quiver_common::types::{DataType, ScalarType};
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

/// Column `c` as an Arrow array of [`arrow_type`]`(c.dtype)`, its buffers moved
/// rather than copied where the layouts agree (integers, timestamps, floats, UTF-8
/// string bytes, list ends).
pub fn into_array(c: ColumnBuilder) -> ArrayRef {
    let valid = nulls(&c);
    let offsets = |ends: &[u64]| {
        let mut o = Vec::with_capacity(ends.len() + 1);
        o.push(0i32);
        o.extend(ends.iter().map(|&e| e as i32));
        OffsetBuffer::new(ScalarBuffer::from(o))
    };
    let t = match c.dtype {
        DataType::Scalar(t) | DataType::Array(t) => t,
    };
    match c.data {
        ColumnData::List { ends, child } => {
            let child = into_array(*child);
            let field = Arc::new(Field::new("item", child.data_type().clone(), true));
            Arc::new(ListArray::new(field, offsets(&ends), child, valid))
        }
        ColumnData::I64(v) => match t {
            ScalarType::Date => Arc::new(Date32Array::new(
                v.iter().map(|&d| d as i32).collect(),
                valid,
            )),
            ScalarType::LocalDateTime => Arc::new(TimestampMicrosecondArray::new(v.into(), valid)),
            ScalarType::DateTime => {
                Arc::new(TimestampMicrosecondArray::new(v.into(), valid).with_timezone("UTC"))
            }
            _ => Arc::new(Int64Array::new(v.into(), valid)),
        },
        ColumnData::F64(v) => Arc::new(Float64Array::new(v.into(), valid)),
        ColumnData::Bool(v) => Arc::new(BooleanArray::new(v.into_iter().collect(), valid)),
        ColumnData::Bytes { ends, data } => {
            let fits = data.len() <= i32::MAX as usize
                && std::str::from_utf8(&data)
                    .is_ok_and(|s| ends.iter().all(|&e| s.is_char_boundary(e as usize)));
            if fits {
                // Checked: UTF-8, split at character boundaries, offsets that fit.
                return Arc::new(StringArray::new(
                    offsets(&ends),
                    Buffer::from_vec(data),
                    valid,
                ));
            }
            // Bytes that are not UTF-8 (which the import never stores): replaced.
            let mut start = 0;
            Arc::new(StringArray::from_iter(ends.iter().enumerate().map(
                |(i, &e)| {
                    let s = std::mem::replace(&mut start, e as usize);
                    valid
                        .as_ref()
                        .is_none_or(|v| v.is_valid(i))
                        .then(|| String::from_utf8_lossy(&data[s..e as usize]).into_owned())
                },
            )))
        }
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
    pub fn write(&mut self, cols: Vec<ColumnBuilder>) -> Result<(), String> {
        let arrays = cols.into_iter().map(into_array).collect();
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
