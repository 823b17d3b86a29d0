//! `MATCH (n:Label) RETURN n.a, n.b AS x` straight from the column chunks to Arrow.
//!
//! The query engine makes a value per cell (a string allocated for each), and a held
//! result clones them before they become Arrow arrays: for a frame of a million rows
//! that is most of the time. This shape, the one a DataFrame is read with, needs none of
//! it: each row group's chunks of the projected properties decode into column builders
//! and become arrays ([`crate::export::into_array`]), rows that are not the label's (a
//! per-row `:LABEL` that lacks it) or were deleted by a checkpoint filtered out.
//!
//! Taken only where it gives what the engine would: one node pattern with one label and
//! no property map, no WHERE, a RETURN of that node's properties only (aliases allowed;
//! no DISTINCT, ORDER BY, SKIP or LIMIT), a database whose delta is empty (no write
//! since the last checkpoint, none carried as ops), outside a transaction, and columns
//! of scalar types other than zoned datetimes, typed alike in every table. Anything
//! else returns `None` and runs as a query.

use crate::export::{arrow_type, into_array};
use arrow_array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType as A, Field, Schema, SchemaRef};
use quiver_common::types::{DataType, ScalarType};
use quiver_cypher::ast::{Clause, Expr, Parsed, PathKind};
use quiver_format::column::ColumnBuilder;
use quiver_storage::Database;
use std::sync::Arc;

/// A query of this shape: the label and the (property, column name) pairs.
pub struct Projection {
    label: String,
    props: Vec<(String, String)>,
}

/// `text` as a [`Projection`], when it has the shape; parsed only when it starts with
/// MATCH, so that other statements pay a few byte compares.
pub fn projection(text: &str) -> Option<Projection> {
    let head = text.trim_start().get(..5)?;
    if !head.eq_ignore_ascii_case("MATCH") {
        return None;
    }
    let (label, props) = shape(text)?;
    Some(Projection { label, props })
}

/// The label and the (property, column name) pairs of a query of this shape.
fn shape(text: &str) -> Option<(String, Vec<(String, String)>)> {
    let Ok(Parsed::Query(stmt)) = quiver_cypher::parse(text) else {
        return None;
    };
    if stmt.explain.is_some() || stmt.query.parts.len() != 1 {
        return None;
    }
    let [Clause::Match {
        optional: false,
        patterns,
        where_: None,
    }, Clause::Return(p)] = &stmt.query.parts[0].clauses[..]
    else {
        return None;
    };
    let [pat] = &patterns[..] else { return None };
    let n = &pat.start;
    if pat.var.is_some()
        || pat.kind != PathKind::Plain
        || !pat.steps.is_empty()
        || n.props.is_some()
        || n.labels.len() != 1
        || n.label_expr.is_some()
        || !n.dyn_labels.is_empty()
    {
        return None;
    }
    let var = n.var.as_ref()?;
    if p.distinct
        || p.star
        || !p.order.is_empty()
        || p.skip.is_some()
        || p.limit.is_some()
        || p.where_.is_some()
        || p.items.is_empty()
    {
        return None;
    }
    let mut cols = Vec::new();
    for (i, (e, alias)) in p.items.iter().enumerate() {
        let Expr::Prop(base, key) = e else {
            return None;
        };
        let Expr::Var(v, _) = &**base else {
            return None;
        };
        if v != var {
            return None;
        }
        let name = alias.clone().or_else(|| p.texts.get(i).cloned())?;
        cols.push((key.clone(), name));
    }
    Some((n.labels[0].clone(), cols))
}

/// Whether a stored column type is read here (as the engine would give it to Arrow).
fn plain(t: DataType) -> bool {
    matches!(t, DataType::Scalar(s) if s != ScalarType::DateTime)
}

/// The projection's rows in `db` as record batches (one per row group), when `db`
/// (whose delta is empty: the caller's check) can answer it so.
pub fn label_projection(
    db: &Database,
    p: &Projection,
) -> Option<Result<(SchemaRef, Vec<RecordBatch>), String>> {
    let (label, props) = (&p.label, &p.props);
    let label_id = db.labels().iter().position(|l| l == label);
    // Tables whose nodes may carry the label: all of them, or some by their :LABEL.
    let tables: Vec<(usize, bool)> = db
        .node_tables()
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            if label_id.is_some_and(|l| t.meta.labels.contains(&(l as u32))) {
                Some((i, true))
            } else {
                t.meta.label_column.map(|_| (i, false))
            }
        })
        .collect();
    // Each property's column in each table, and its one type.
    let mut types: Vec<Option<DataType>> = vec![None; props.len()];
    let mut at: Vec<Vec<Option<usize>>> = Vec::new();
    for &(ti, _) in &tables {
        let t = &db.node_tables()[ti];
        let mut row = Vec::new();
        for (k, (key, _)) in props.iter().enumerate() {
            let ci = t
                .footer
                .columns
                .iter()
                .enumerate()
                .position(|(c, col)| col.name == *key && Some(c) != t.meta.label_column);
            if let Some(ci) = ci {
                let dt = t.footer.columns[ci].dtype;
                if !plain(dt) || types[k].is_some_and(|t0| t0 != dt) {
                    return None;
                }
                types[k] = Some(dt);
            }
            row.push(ci);
        }
        at.push(row);
    }
    let schema: SchemaRef = Arc::new(Schema::new(
        props
            .iter()
            .zip(&types)
            .map(|((_, name), t)| Field::new(name, t.map_or(A::Null, arrow_type), true))
            .collect::<Vec<_>>(),
    ));
    let read = || -> Result<Vec<RecordBatch>, String> {
        let err = |e: quiver_storage::ReadError| e.to_string();
        let mut out = Vec::new();
        for (&(ti, fixed), cols) in tables.iter().zip(&at) {
            let t = &db.node_tables()[ti];
            for (rgi, rg) in t.footer.row_groups.iter().enumerate() {
                let n = rg.n_rows as usize;
                let mut keep: Vec<bool> = match &t.deleted {
                    Some(d) => (0..rg.n_rows).map(|r| !d.get(rg.first_row + r)).collect(),
                    None => vec![true; n],
                };
                if !fixed {
                    let Some(lc) = t.meta.label_column else {
                        continue;
                    };
                    let labels = db
                        .with_node_chunk(ti, rgi, lc, |c| c.to_builder())
                        .map_err(err)?;
                    let child = labels.list_child_ref();
                    for (r, k) in keep.iter_mut().enumerate() {
                        let (s, e) = labels.list_range(r);
                        *k &= labels.is_valid(r)
                            && child
                                .is_some_and(|c| (s..e).any(|j| c.bytes_at(j) == label.as_bytes()));
                    }
                }
                let rows = keep.iter().filter(|k| **k).count();
                if rows == 0 {
                    continue;
                }
                let mut arrays: Vec<ArrayRef> = Vec::with_capacity(props.len());
                for (k, ci) in cols.iter().enumerate() {
                    let field_type = schema.field(k).data_type();
                    let a = match ci {
                        None => new_null_array(field_type, rows),
                        Some(ci) => {
                            let b = db
                                .with_node_chunk(ti, rgi, *ci, |c| c.to_builder())
                                .map_err(err)?;
                            let b: ColumnBuilder = if rows < n { b.filter(&keep) } else { b };
                            into_array(b)
                        }
                    };
                    arrays.push(a);
                }
                let b = RecordBatch::try_new_with_options(
                    schema.clone(),
                    arrays,
                    &RecordBatchOptions::new().with_row_count(Some(rows)),
                )
                .map_err(|e| e.to_string())?;
                out.push(b);
            }
        }
        Ok(out)
    };
    Some(read().map(|b| (schema.clone(), b)))
}
