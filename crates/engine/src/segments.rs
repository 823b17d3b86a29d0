//! Reading one segment entity's labels or one property from the immutable segments
//! (what the delta's overlay records leave to them), and how query values are decoded
//! from column chunks.

use crate::value::Value;
use quiver_common::types::{DataType, ScalarType};
use quiver_format::column::ColumnChunk;
use quiver_storage::manifest::TableFooter;
use quiver_storage::{Database, Direction, ReadError};
use std::sync::Arc;

/// Decodes row `i` of a chunk as a query value.
pub fn chunk_value(c: &ColumnChunk<'_>, i: usize, dtype: DataType) -> Value {
    match dtype {
        DataType::Scalar(s) => scalar_value(c, i, s),
        DataType::Array(s) => match (c.get_list(i), c.list_child()) {
            (Some((a, b)), Some(child)) => {
                Value::list((a..b).map(|j| scalar_value(child, j, s)).collect())
            }
            _ => Value::Null,
        },
    }
}

fn scalar_value(c: &ColumnChunk<'_>, i: usize, s: ScalarType) -> Value {
    use ScalarType::*;
    let v = match s {
        Byte | Short | Int | Long => c.get_i64(i).map(Value::Int),
        Date => c.get_i64(i).map(Value::Date),
        LocalDateTime => c.get_i64(i).map(Value::local_datetime_us),
        DateTime => c.get_i64(i).map(Value::datetime_us),
        Float | Double => c.get_f64(i).map(Value::Float),
        Boolean => c.get_bool(i).map(Value::Bool),
        // The import validated these bytes; a vectorized check (std's lossy conversion
        // validates byte by byte, and was a fifth of a scan's profile) keeps corrupted
        // bytes from becoming a `str`, and replaces them as before.
        String | Char => c.with_bytes(i, |b| {
            Value::Str(match simdutf8::basic::from_utf8(b) {
                Ok(s) => Arc::from(s),
                Err(_) => Arc::from(std::string::String::from_utf8_lossy(b)),
            })
        }),
    };
    v.unwrap_or(Value::Null)
}

/// The row group holding `row` and the row's index inside it.
pub fn row_group_of(footer: &TableFooter, row: u64) -> (usize, usize) {
    let rg = footer
        .row_groups
        .partition_point(|g| g.first_row <= row)
        .saturating_sub(1);
    let first = footer.row_groups.get(rg).map_or(0, |g| g.first_row);
    (rg, (row - first) as usize)
}

/// The edge id both directions agree on for a segment edge read from `dir`'s CSR:
/// property-less types number edges by out-CSR position, so an edge met from its target
/// is renumbered (see `Database::canonical_edge_id`).
pub fn canonical_edge_id(
    db: &Database,
    ty: u32,
    node: u64,
    nb: u32,
    eid: u64,
    dir: Direction,
) -> Result<u64, ReadError> {
    let t = ty as usize;
    match db.rel_types().get(t) {
        Some(r) if dir == Direction::In && r.meta.columns.is_empty() => {
            db.canonical_edge_id(t, node as u32, nb, eid)
        }
        _ => Ok(eid),
    }
}

/// A segment node's labels: its table's, then its `:LABEL` values.
pub fn node_labels(db: &Database, node: u64) -> Result<Vec<Arc<str>>, ReadError> {
    let (t, row) = db.node_location(node)?;
    let table = &db.node_tables()[t];
    let meta = &table.meta;
    let mut labels: Vec<Arc<str>> = meta
        .labels
        .iter()
        .map(|&l| Arc::from(db.labels()[l as usize].as_str()))
        .collect();
    if let Some(c) = meta.label_column {
        let (rg, i) = row_group_of(&table.footer, row);
        let dtype = meta.columns[c].dtype;
        if let Value::List(l) = db.with_node_chunk(t, rg, c, |ch| chunk_value(ch, i, dtype))? {
            for x in l.iter() {
                if let Value::Str(s) = x {
                    if !labels.contains(s) {
                        labels.push(s.clone());
                    }
                }
            }
        }
    }
    Ok(labels)
}

/// Property `key` of a segment node (null when its table has no such column).
pub fn node_prop(db: &Database, node: u64, key: &str) -> Result<Value, ReadError> {
    let (t, row) = db.node_location(node)?;
    let table = &db.node_tables()[t];
    let meta = &table.meta;
    let Some(c) = meta
        .columns
        .iter()
        .enumerate()
        .position(|(c, col)| col.name == key && Some(c) != meta.label_column)
    else {
        return Ok(Value::Null);
    };
    let (rg, i) = row_group_of(&table.footer, row);
    let dtype = meta.columns[c].dtype;
    db.with_node_chunk(t, rg, c, |ch| chunk_value(ch, i, dtype))
}

/// Property `key` of segment relationship `eid` of type `ty`.
pub fn rel_prop(db: &Database, ty: usize, eid: u64, key: &str) -> Result<Value, ReadError> {
    let Some(r) = db.rel_types().get(ty) else {
        return Ok(Value::Null);
    };
    let (Some(footer), Some(c)) = (
        r.props_footer(),
        r.meta.columns.iter().position(|c| c.name == key),
    ) else {
        return Ok(Value::Null);
    };
    if eid >= footer.n_rows {
        return Ok(Value::Null);
    }
    let (rg, i) = row_group_of(footer, eid);
    let dtype = r.meta.columns[c].dtype;
    db.with_rel_chunk(ty, rg, c, |ch| chunk_value(ch, i, dtype))
}
