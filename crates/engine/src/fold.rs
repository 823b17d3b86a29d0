//! Folding changes into columns (seed 004's tuple mover, for updates): at a checkpoint,
//! property changes to entities of earlier segments become rewritten column chunks in a
//! patch file, so that nothing is replayed at open and scans stay on the segment fast
//! path.
//!
//! Copy-on-write per chunk: only the (row group, column) chunks that hold a changed value
//! are decoded, patched and encoded again; a property the table has no column for becomes
//! a new column (a chunk per row group, nulls where nothing was set). A table keeps at
//! most [`PATCH_FILES_MAX`] patch files: past that, the checkpoint copies the chunks of
//! the older ones that are still live into its new file and the table keeps that one
//! alone (an LSM's merge, on raw encoded bytes).
//!
//! Label changes fold as the node's new `:LABEL` value (the labels its table does not
//! give every row; the column is added when the table had none).
//!
//! What does not fold is returned to be carried as ops: values of another type than
//! their column (a string set where the column holds integers), the `:ID` column (its
//! index is not rewritten here), a table label removed from one row, and tables without
//! row groups.

use crate::columns::{columns_of, fits, push_value};
use crate::delta::Op;
use crate::error::EngineError;
use crate::value::Value;
use quiver_common::types::DataType;
use quiver_format::column::ColumnBuilder;
use quiver_storage::manifest::{PropertyMeta, SegmentMeta, TableFooter};
use quiver_storage::write::{PatchWriter, Staging};
use quiver_storage::{Database, TableRef};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The name of a node table's column of per-row labels (and the key label changes fold
/// under; a property of that name is never folded).
pub const LABEL_KEY: &str = ":LABEL";

/// Patch files a table keeps before a checkpoint merges them into one.
pub const PATCH_FILES_MAX: usize = 4;

/// One changed property of one row: `Value::Null` removes it.
pub(crate) struct RowSet {
    pub row: u64,
    pub key: Arc<str>,
    pub value: Value,
}

/// A table to fold into: where it is, its merged footer and its manifest entry's
/// columns and patch files.
pub(crate) struct Target<'a> {
    pub tref: TableRef,
    /// File name stem of the patch (`nodes-3`, `rels-0002`).
    pub tag: String,
    pub footer: &'a TableFooter,
    pub columns: &'a mut Vec<PropertyMeta>,
    pub patches: &'a mut Vec<SegmentMeta>,
    /// Columns never folded into (`:ID`, `:LABEL`).
    pub frozen: Vec<usize>,
}

/// Folds `sets` (rows of the target table) into a patch file of the target; returns the
/// sets that did not fold (to be carried as ops) and the names of the columns rewritten.
pub(crate) fn fold_table(
    db: &Database,
    staging: &Staging,
    t: Target<'_>,
    sets: Vec<RowSet>,
) -> Result<(Vec<RowSet>, Vec<Arc<str>>), EngineError> {
    let footer = t.footer;
    if footer.row_groups.is_empty() || sets.is_empty() {
        return Ok((sets, Vec::new()));
    }
    let old_cols = t.columns.len();
    // New columns: a key the table lacks takes the type most of its values have.
    let mut columns = t.columns.clone();
    columns.extend(columns_of(
        sets.iter()
            .filter(|s| !t.columns.iter().any(|c| *c.name == *s.key))
            .map(|s| (&s.key, &s.value)),
    ));
    let at: HashMap<&str, usize> = columns
        .iter()
        .enumerate()
        .filter(|(i, _)| !t.frozen.contains(i))
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();
    let starts: Vec<u64> = footer.row_groups.iter().map(|g| g.first_row).collect();
    // (row group, column) -> (index in the chunk, value), later sets of a row win.
    let mut groups: BTreeMap<(usize, usize), Vec<(usize, Value)>> = BTreeMap::new();
    let mut left = Vec::new();
    for s in sets {
        let col = at.get(&*s.key).copied();
        let ok = col.is_some_and(|c| s.value.is_null() || fits(&s.value, columns[c].dtype));
        let rg = starts.partition_point(|&f| f <= s.row).saturating_sub(1);
        let in_table = s.row < footer.n_rows;
        match col {
            Some(c) if ok && in_table => groups
                .entry((rg, c))
                .or_default()
                .push(((s.row - starts[rg]) as usize, s.value)),
            _ => left.push(s),
        }
    }
    // An added column needs a chunk in every row group (nulls where nothing was set).
    // Each got a value: its type is one of its values' own (which fits it).
    for c in old_cols..columns.len() {
        for rg in 0..footer.row_groups.len() {
            groups.entry((rg, c)).or_default();
        }
    }
    if groups.is_empty() {
        return Ok((left, Vec::new()));
    }
    let mut folded: Vec<Arc<str>> = Vec::new();
    for &(_, c) in groups.keys() {
        if !folded.iter().any(|k| **k == *columns[c].name) {
            folded.push(Arc::from(columns[c].name.as_str()));
        }
    }

    let mut w = PatchWriter::create(staging, &format!("{}-patch.seg", t.tag))?;
    let merge_old = t.patches.len() >= PATCH_FILES_MAX;
    if merge_old {
        // Chunks of the older patches that this one does not replace, carried as stored.
        for (rg, c) in db.patched_chunks(t.tref) {
            if groups.contains_key(&(rg, c)) {
                continue;
            }
            let bytes = db.raw_chunk(t.tref, rg, c)?;
            w.write_chunk(rg as u64, c as u32, footer.row_groups[rg].n_rows, &bytes)?;
        }
    }
    // Chunks are rebuilt on all threads, a few at a time (each holds a decoded chunk and
    // its encoding), and written in order.
    let work: Vec<((usize, usize), Vec<(usize, Value)>)> = groups.into_iter().collect();
    let width = rayon::current_num_threads().max(1) * 2;
    for batch in work.chunks(width) {
        use rayon::prelude::*;
        let encoded: Vec<Result<Vec<u8>, EngineError>> = batch
            .par_iter()
            .map(|((rg, c), items)| {
                let n = footer.row_groups[*rg].n_rows as usize;
                let dtype = columns[*c].dtype;
                let old = if *c < old_cols {
                    db.with_chunk(t.tref, *rg, *c, |ch| ch.to_builder())?
                } else {
                    ColumnBuilder::nulls(dtype, n)
                };
                let b = patched(&old, dtype, n, items);
                let mut out = Vec::with_capacity(b.encoded_len_bound());
                b.encode(&mut out);
                Ok(out)
            })
            .collect();
        for (((rg, c), _), bytes) in batch.iter().zip(encoded) {
            w.write_chunk(
                *rg as u64,
                *c as u32,
                footer.row_groups[*rg].n_rows,
                &bytes?,
            )?;
        }
    }
    let seg = w.finish(columns.clone())?;
    if merge_old {
        t.patches.clear();
    }
    t.patches.push(seg);
    *t.columns = columns;
    Ok((left, folded))
}

/// `old` (`n` rows of `dtype`) with the rows of `items` replaced.
fn patched(
    old: &ColumnBuilder,
    dtype: DataType,
    n: usize,
    items: &[(usize, Value)],
) -> ColumnBuilder {
    let mut set: Vec<Option<&Value>> = vec![None; n];
    for (i, v) in items {
        if let Some(slot) = set.get_mut(*i) {
            *slot = Some(v);
        }
    }
    let mut b = ColumnBuilder::new(dtype);
    for (i, s) in set.into_iter().enumerate() {
        match s {
            Some(v) if v.is_null() => b.push_null(),
            Some(v) => push_value(&mut b, Some(v)),
            None => b.push_row_from(old, i),
        }
    }
    b
}

/// The sets of ops on segment entities, split by table: node sets by node table, rel
/// sets by relationship type; everything else goes to `carried`.
pub(crate) struct Split {
    pub nodes: HashMap<usize, Vec<RowSet>>,
    /// Per type: (sets, (src, dst) per edge id, for carrying back).
    pub rels: HashMap<usize, Vec<(RowSet, u64, u64)>>,
}

/// Sorts `ops` (changes to entities of `db`'s segments) into foldable sets and the rest.
pub(crate) fn split_ops(db: &Database, ops: Vec<Op>, carried: &mut Vec<Op>) -> Split {
    let mut s = Split {
        nodes: HashMap::new(),
        rels: HashMap::new(),
    };
    for op in ops {
        // Where the op folds: (table or type, row), or nowhere.
        let node_at = match &op {
            Op::SetNodeProp { id, key, .. } if !key.starts_with(':') => db.node_location(*id).ok(),
            _ => None,
        };
        let rel_at = match &op {
            Op::SetRelProp { ty, eid, .. } => db
                .rel_type_index(ty)
                .filter(|&t| db.rel_types()[t].props_footer().is_some())
                .map(|t| (t, *eid)),
            _ => None,
        };
        match (op, node_at, rel_at) {
            (Op::SetNodeProp { key, value, .. }, Some((t, row)), _) => s
                .nodes
                .entry(t)
                .or_default()
                .push(RowSet { row, key, value }),
            (
                Op::SetRelProp {
                    src,
                    dst,
                    key,
                    value,
                    ..
                },
                _,
                Some((t, row)),
            ) => s
                .rels
                .entry(t)
                .or_default()
                .push((RowSet { row, key, value }, src, dst)),
            (op, ..) => carried.push(op),
        }
    }
    s
}
