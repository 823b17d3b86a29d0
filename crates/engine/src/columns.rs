//! Values into typed column builders and back: the type a value takes as a column
//! ([`dtype_of`]), the columns a set of property maps gets ([`columns_of`]), a value
//! pushed onto a builder ([`push_value`]) and read back from one ([`value_at`]). A
//! checkpoint, a fold and a direct write all build columns this one way.

use crate::value::Value;
use quiver_common::types::{DataType, ScalarType};
use quiver_format::column::ColumnBuilder;
use quiver_storage::manifest::PropertyMeta;
use std::sync::Arc;

pub(crate) fn dtype_of(v: &Value) -> Option<DataType> {
    let s = |v: &Value| {
        Some(match v {
            Value::Int(_) => ScalarType::Long,
            Value::Float(_) => ScalarType::Double,
            Value::Str(_) => ScalarType::String,
            Value::Bool(_) => ScalarType::Boolean,
            // Temporal values a column cannot hold whole (nanoseconds, a zone, times,
            // durations) go to the op file with the rest of the misfits.
            Value::Date(_) => ScalarType::Date,
            Value::LocalDateTime(_) if v.column_i64().is_some() => ScalarType::LocalDateTime,
            Value::DateTime(..) if v.column_i64().is_some() => ScalarType::DateTime,
            _ => return None,
        })
    };
    match v {
        Value::List(l) => {
            let first = s(l.first()?)?;
            l.iter()
                .all(|x| s(x) == Some(first))
                .then_some(DataType::Array(first))
        }
        v => s(v).map(DataType::Scalar),
    }
}

fn push_scalar(b: &mut ColumnBuilder, v: &Value) {
    match v {
        Value::Int(i) => b.push_i64(*i),
        Value::Date(_) | Value::LocalDateTime(_) | Value::DateTime(..) => match v.column_i64() {
            Some(i) => b.push_i64(i),
            None => b.push_null(),
        },
        Value::Float(f) => b.push_f64(*f),
        Value::Bool(x) => b.push_bool(*x),
        Value::Str(s) => b.push_bytes(s.as_bytes()),
        _ => b.push_null(),
    }
}

/// Appends `v` (of type `dtype`, or null).
pub(crate) fn push_value(b: &mut ColumnBuilder, v: Option<&Value>) {
    match v {
        None => b.push_null(),
        Some(Value::List(l)) => {
            if let Some(child) = b.list_child() {
                for x in l.iter() {
                    push_scalar(child, x);
                }
            }
            b.end_list();
        }
        Some(v) => push_scalar(b, v),
    }
}

/// Columns for a set of property maps: each key, in first-seen order, gets the type
/// most of its values have.
pub(crate) fn choose_columns<'p>(
    maps: impl Iterator<Item = &'p [(Arc<str>, Value)]>,
) -> Vec<PropertyMeta> {
    columns_of(maps.flat_map(|p| p.iter().map(|(k, v)| (k, v))))
}

/// Columns for (key, value) pairs: each key, in first-seen order, gets the type most of
/// its values have (keys with no typed value get none).
pub(crate) fn columns_of<'p>(
    pairs: impl Iterator<Item = (&'p Arc<str>, &'p Value)>,
) -> Vec<PropertyMeta> {
    let mut tally: Vec<(Arc<str>, Vec<(DataType, u64)>)> = Vec::new();
    let mut at: hashbrown::HashMap<Arc<str>, usize> = hashbrown::HashMap::new();
    for (k, v) in pairs {
        let Some(t) = dtype_of(v) else { continue };
        let i = *at.entry(k.clone()).or_insert_with(|| {
            tally.push((k.clone(), Vec::new()));
            tally.len() - 1
        });
        let types = &mut tally[i].1;
        match types.iter_mut().find(|(x, _)| *x == t) {
            Some(e) => e.1 += 1,
            None => types.push((t, 1)),
        }
    }
    tally
        .into_iter()
        .filter_map(|(k, types)| {
            let (dtype, _) = types.into_iter().max_by_key(|(_, n)| *n)?;
            Some(PropertyMeta {
                name: k.to_string(),
                dtype,
            })
        })
        .collect()
}

fn scalar_at(b: &ColumnBuilder, s: ScalarType, i: usize) -> Value {
    if !b.is_valid(i) {
        return Value::Null;
    }
    match s {
        ScalarType::Double | ScalarType::Float => Value::Float(b.f64_values()[i]),
        ScalarType::Boolean => Value::Bool(b.bool_values()[i]),
        ScalarType::String | ScalarType::Char => {
            Value::str(std::str::from_utf8(b.bytes_at(i)).unwrap_or_default())
        }
        ScalarType::Date => Value::Date(b.i64_values()[i]),
        ScalarType::LocalDateTime => Value::local_datetime_us(b.i64_values()[i]),
        ScalarType::DateTime => Value::datetime_us(b.i64_values()[i]),
        ScalarType::Byte | ScalarType::Short | ScalarType::Int | ScalarType::Long => {
            Value::Int(b.i64_values()[i])
        }
    }
}

/// Row `i` of a builder as a value (what was pushed).
pub(crate) fn value_at(b: &ColumnBuilder, i: usize) -> Value {
    match b.dtype {
        DataType::Scalar(s) => scalar_at(b, s, i),
        DataType::Array(s) => {
            if !b.is_valid(i) {
                return Value::Null;
            }
            let (lo, hi) = b.list_range(i);
            match b.list_child_ref() {
                Some(c) => Value::list((lo..hi).map(|j| scalar_at(c, s, j)).collect()),
                None => Value::Null,
            }
        }
    }
}

/// Whether `v` can be stored in a column of type `dtype` and read back equal.
pub(crate) fn fits(v: &Value, dtype: DataType) -> bool {
    use ScalarType::*;
    let scalar = |v: &Value, s: ScalarType| match (v, s) {
        (Value::Int(i), Byte) => i8::try_from(*i).is_ok(),
        (Value::Int(i), Short) => i16::try_from(*i).is_ok(),
        (Value::Int(i), Int) => i32::try_from(*i).is_ok(),
        (Value::Int(_), Long) => true,
        (Value::Float(f), Float) => (*f as f32) as f64 == *f || f.is_nan(),
        (Value::Float(_), Double) => true,
        (Value::Bool(_), Boolean) => true,
        (Value::Str(_), String) => true,
        (Value::Str(s), Char) => s.chars().count() == 1,
        (v, s) => dtype_of(v) == Some(DataType::Scalar(s)),
    };
    match (v, dtype) {
        (Value::List(l), DataType::Array(s)) => l.iter().all(|x| scalar(x, s)),
        (Value::List(_), _) | (_, DataType::Array(_)) => false,
        (v, DataType::Scalar(s)) => scalar(v, s),
    }
}
