//! Seed 004's direct path: nodes a big write creates go straight into column builders
//! and row groups of a new node table, not record by record into the delta.
//!
//! A statement whose write is a CREATE of lone nodes that nothing after it reads (LOAD
//! CSV or UNWIND feeding `CREATE (:L {k: ...})`, also as the body of `CALL { }
//! IN TRANSACTIONS`) hands each node to [`Bulk`] as one row of values in its *shape*
//! (labels and property keys, fixed at plan time). Each shape has one typed column
//! builder per key; a column's type is its first non-null value's, and a value of
//! another type is kept aside (a *misfit*, carried as a property op, as a checkpoint
//! does).
//!
//! When the statement has created [`BULK_ROWS_MIN`] nodes (a batch of `CALL { } IN
//! TRANSACTIONS`, [`BATCH_DIRECT_MIN`]), or a shape's builders hold
//! [`BULK_GROUP_BYTES`], the write is *direct*: full builders are encoded as row groups
//! into a table file under `<db>/bulk/`, so memory is one row group per shape whatever
//! the input's size. Its commit is a checkpoint that takes these files into the new
//! generation as node tables (logged as the manifest's reference to them, not row by
//! row). A write that stays below the threshold commits as ordinary creations through
//! the delta: its rows are read back from the builders.
//!
//! Relationships take the same path when a statement's last clause is a CREATE of
//! relationships between nodes it matched (`LOAD CSV ... MATCH (a {id: ..}), (b {id:
//! ..}) CREATE (a)-[:T {..}]->(b)`) and it runs on its own (not inside BEGIN or as the
//! body of `CALL { } IN TRANSACTIONS`, whose later batches would read the generation
//! an earlier batch's commit replaced): each *relationship shape* (type and property
//! keys) keeps its endpoints as pairs of node ids (16 bytes a relationship) and its
//! properties in typed builders, one per row group, accounted against the memory
//! limit. The commit's checkpoint writes them as a new relationship segment of the
//! type (CSR out and in, property rows in the type's columns) instead of records in
//! the delta and the log.

use crate::columns::{dtype_of, push_value, value_at};
use crate::delta::Props;
use crate::error::EngineError;
use crate::value::Value;
use quiver_common::limits::{
    BATCH_DIRECT_MIN, BULK_GRANT_WAIT_SECS, BULK_GROUP_BYTES, BULK_GROUP_BYTES_MIN, BULK_ROWS_MIN,
    ROW_GROUP_ROWS_MAX,
};
use quiver_common::memory::{Grant, MemoryBudget, WaitPolicy};
use quiver_common::types::{DataType, ScalarType};
use quiver_format::column::ColumnBuilder;
use quiver_storage::manifest::{PropertyMeta, SegmentMeta};
use quiver_storage::write::TableWriter;
use std::path::PathBuf;
use std::sync::Arc;

/// Where bulk writes keep their table files until their commit moves them into a
/// generation (removed at open: files a killed process left).
pub const BULK_DIR: &str = "bulk";

/// A column of a shape: nulls only so far (no type yet), or a typed builder.
enum Col {
    Nulls(usize),
    Built(ColumnBuilder),
}

impl Col {
    /// Appends `v`; false when its type is not the column's (a null is pushed instead).
    fn push(&mut self, v: &Value) -> bool {
        match self {
            Col::Nulls(n) => {
                if v.is_null() {
                    *n += 1;
                    return true;
                }
                let Some(t) = dtype_of(v) else {
                    *n += 1;
                    return false;
                };
                let mut b = ColumnBuilder::nulls(t, *n);
                push_value(&mut b, Some(v));
                *self = Col::Built(b);
                true
            }
            Col::Built(b) => {
                if v.is_null() {
                    b.push_null();
                    true
                } else if dtype_of(v) == Some(b.dtype) {
                    push_value(b, Some(v));
                    true
                } else {
                    b.push_null();
                    false
                }
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Col::Nulls(_) => 0,
            Col::Built(b) => b.heap_bytes(),
        }
    }

    /// Bytes of values held (what makes a row group full; the capacity may be
    /// reserved ahead).
    fn data_bytes(&self) -> usize {
        match self {
            Col::Nulls(_) => 0,
            Col::Built(b) => b.data_bytes(),
        }
    }

    /// The builder (a column of nulls only becomes a string column).
    fn into_builder(self) -> ColumnBuilder {
        match self {
            Col::Built(b) => b,
            Col::Nulls(n) => ColumnBuilder::nulls(DataType::Scalar(ScalarType::String), n),
        }
    }

    fn value(&self, i: usize) -> Value {
        match self {
            Col::Nulls(_) => Value::Null,
            Col::Built(b) => value_at(b, i),
        }
    }
}

/// Row `i` of `cols` as properties (nulls left out), with the misfits of `row`
/// (`misfits` in row order) added.
fn props_at(
    keys: &[Arc<str>],
    cols: &[Col],
    i: usize,
    row: u64,
    misfits: &mut std::iter::Peekable<std::vec::Drain<'_, (u64, u32, Value)>>,
) -> Props {
    let mut props: Props = Vec::with_capacity(keys.len());
    for (k, c) in cols.iter().enumerate() {
        let v = c.value(i);
        if !v.is_null() {
            props.push((keys[k].clone(), v));
        }
    }
    while let Some((_, k, v)) = misfits.next_if(|m| m.0 == row) {
        props.push((keys[k as usize].clone(), v));
    }
    props
}

/// A shape's table file, written by a thread of its own: the statement fills the next
/// row group's builders while the last one is encoded and written (at most one waits
/// in between, so two row groups per shape are the most in memory).
struct Writer {
    tx: Option<std::sync::mpsc::SyncSender<Vec<ColumnBuilder>>>,
    handle: Option<std::thread::JoinHandle<Result<TableWriter, EngineError>>>,
    path: PathBuf,
    metas: Vec<PropertyMeta>,
}

impl Writer {
    fn start(
        mut w: TableWriter,
        path: PathBuf,
        metas: Vec<PropertyMeta>,
    ) -> Result<Writer, EngineError> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<ColumnBuilder>>(0);
        let handle = std::thread::Builder::new()
            .name("quiver-bulk-write".into())
            .spawn(move || {
                while let Ok(group) = rx.recv() {
                    w.write_row_group(&group)?;
                }
                Ok(w)
            })
            .map_err(|e| EngineError::Refused(format!("cannot start a bulk writer thread: {e}")))?;
        Ok(Writer {
            tx: Some(tx),
            handle: Some(handle),
            path,
            metas,
        })
    }

    /// Queues a row group; a failed write shows here or at [`Writer::finish`].
    fn write(&mut self, group: Vec<ColumnBuilder>) -> Result<(), EngineError> {
        let sent = self.tx.as_ref().map(|tx| tx.send(group));
        match sent {
            Some(Ok(())) => Ok(()),
            // The thread stopped: its error says why.
            _ => self.finish().map(|_| ()),
        }
    }

    /// Waits for the queued row groups and closes the file.
    fn finish(&mut self) -> Result<SegmentMeta, EngineError> {
        self.tx = None;
        let w = match self.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r?,
            Some(Err(_)) => {
                return Err(EngineError::Refused(
                    "the bulk writer thread panicked".into(),
                ))
            }
            None => return Err(EngineError::Refused("the bulk writer is closed".into())),
        };
        Ok(w.finish()?)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The nodes of one shape that the current batch created.
struct Shape {
    labels: Vec<Arc<str>>,
    keys: Vec<Arc<str>>,
    cols: Vec<Col>,
    /// Rows in the builders.
    group_rows: usize,
    /// Rows already written as row groups.
    written: u64,
    writer: Option<Writer>,
    /// Values whose type is not their column's: (row in this batch, key, value).
    misfits: Vec<(u64, u32, Value)>,
}

impl Shape {
    fn new(labels: Vec<Arc<str>>, keys: Vec<Arc<str>>) -> Shape {
        let cols = keys.iter().map(|_| Col::Nulls(0)).collect();
        Shape {
            labels,
            keys,
            cols,
            group_rows: 0,
            written: 0,
            writer: None,
            misfits: Vec::new(),
        }
    }

    fn rows(&self) -> u64 {
        self.written + self.group_rows as u64
    }

    fn heap_bytes(&self) -> usize {
        self.cols.iter().map(Col::heap_bytes).sum()
    }

    fn data_bytes(&self) -> usize {
        self.cols.iter().map(Col::data_bytes).sum()
    }

    /// Forgets the batch, and removes the table file of a writer still open (one
    /// [`Bulk::take_tables`] took is the new table's).
    fn reset(&mut self) {
        self.cols = self.keys.iter().map(|_| Col::Nulls(0)).collect();
        self.group_rows = 0;
        self.written = 0;
        self.misfits.clear();
        if let Some(w) = self.writer.take() {
            let path = w.path.clone();
            drop(w); // joins its thread, which may still be writing the file
            let _ = std::fs::remove_file(path);
        }
    }
}

/// One column of a chunk of nodes given to [`Bulk::push_chunk`].
pub enum Chunk {
    /// Values of one type (or nulls), already in a builder.
    Typed(ColumnBuilder),
    /// Values of any type, one per row.
    Values(Vec<Value>),
}

impl Chunk {
    /// The values as a typed builder when every one is null or of one type a column
    /// holds (the usual case; done where the values were made, off the writing thread).
    pub fn of_values(values: Vec<Value>) -> Chunk {
        let mut t = None;
        for v in values.iter().filter(|v| !v.is_null()) {
            match (dtype_of(v), t) {
                (None, _) => return Chunk::Values(values),
                (Some(d), None) => t = Some(d),
                (Some(d), Some(u)) if d != u => return Chunk::Values(values),
                _ => {}
            }
        }
        let mut b = ColumnBuilder::new(t.unwrap_or(DataType::Scalar(ScalarType::String)));
        for v in &values {
            push_value(&mut b, (!v.is_null()).then_some(v));
        }
        Chunk::Typed(b)
    }

    /// Splits the chunk at row `at`: `self` keeps the rows before it, the rest is
    /// returned (a batch of `CALL { } IN TRANSACTIONS` ending inside a chunk).
    pub fn split_off(&mut self, at: usize) -> Chunk {
        match self {
            Chunk::Values(v) => Chunk::Values(v.split_off(at)),
            Chunk::Typed(b) => {
                let head: Vec<bool> = (0..b.len()).map(|i| i < at).collect();
                let tail: Vec<bool> = head.iter().map(|h| !h).collect();
                let rest = b.filter(&tail);
                *b = b.filter(&head);
                Chunk::Typed(rest)
            }
        }
    }

    /// Non-null values, for the statement's counters.
    pub fn non_null(&self) -> u64 {
        match self {
            Chunk::Typed(b) => (b.len() - b.null_count()) as u64,
            Chunk::Values(v) => v.iter().filter(|v| !v.is_null()).count() as u64,
        }
    }
}

/// A node table a bulk write produced, ready for a checkpoint to take in.
pub struct BulkTable {
    pub labels: Vec<Arc<str>>,
    pub columns: Vec<PropertyMeta>,
    pub n_rows: u64,
    /// The table file (under `<db>/bulk/`), moved into the new generation.
    pub path: PathBuf,
    pub segment: SegmentMeta,
    /// (row, key, value) of values kept out of their column.
    pub misfits: Vec<(u64, Arc<str>, Value)>,
}

/// The relationships of one type and set of property keys a statement created.
struct RelShape {
    ty: Arc<str>,
    keys: Vec<Arc<str>>,
    /// (start, end) node ids, in creation order (the order of the edge ids to come).
    ends: Vec<(u64, u64)>,
    /// Full row groups of property values, then the one being filled.
    groups: Vec<Vec<Col>>,
    cols: Vec<Col>,
    group_rows: usize,
    /// Values whose type is not their column's: (row, key, value).
    misfits: Vec<(u64, u32, Value)>,
}

impl RelShape {
    fn heap_bytes(&self) -> usize {
        self.ends.capacity() * 16
            + self
                .groups
                .iter()
                .chain(std::iter::once(&self.cols))
                .flatten()
                .map(Col::heap_bytes)
                .sum::<usize>()
            + self.misfits.capacity() * 48
    }

    /// Rows of a group of columns (`rest`: the rows left, for a shape without keys).
    fn group_len(g: &[Col], rest: usize) -> usize {
        match g.first() {
            Some(Col::Nulls(n)) => *n,
            Some(Col::Built(b)) => b.len(),
            None => rest,
        }
    }

    fn reset(&mut self) {
        self.ends = Vec::new();
        self.groups.clear();
        self.cols = self.keys.iter().map(|_| Col::Nulls(0)).collect();
        self.group_rows = 0;
        self.misfits.clear();
    }
}

/// Relationships a bulk write produced, ready for a checkpoint to write as a segment.
pub struct BulkRels {
    pub ty: Arc<str>,
    pub keys: Vec<Arc<str>>,
    pub ends: Vec<(u64, u64)>,
    /// Row groups of property values: per key, its builder (`None`: nulls only), and
    /// the group's row count (no groups for a shape without keys).
    pub groups: Vec<(Vec<Option<ColumnBuilder>>, usize)>,
    /// (row, key, value) of values kept out of their column.
    pub misfits: Vec<(u64, Arc<str>, Value)>,
}

/// The nodes a statement creates through the direct path (see the module docs).
pub struct Bulk {
    dir: PathBuf,
    tag: u64,
    shapes: Vec<Shape>,
    rels: Vec<RelShape>,
    /// Nodes and relationships pushed since the transaction (the batch, under `CALL {
    /// } IN TRANSACTIONS`) began: what the row threshold counts.
    pushed: u64,
    /// The rows that make a batch direct: [`BULK_ROWS_MIN`], or [`BATCH_DIRECT_MIN`]
    /// once the statement commits in batches ([`Bulk::batched`]).
    min_rows: u64,
    /// The batch writes row groups (it passed the row or byte threshold).
    pub direct: bool,
    files: u64,
    /// What the builders hold, against the database's memory limit.
    mem: Grant,
}

impl Bulk {
    /// A bulk write whose files go in `dir`, named after `tag` (the transaction).
    pub fn new(dir: PathBuf, tag: u64, memory: &MemoryBudget) -> Bulk {
        Bulk {
            dir,
            tag,
            shapes: Vec::new(),
            rels: Vec::new(),
            pushed: 0,
            min_rows: BULK_ROWS_MIN,
            direct: false,
            files: 0,
            // A child that waits: short of the database's memory, the write waits
            // for others to give theirs back (up to BULK_GRANT_WAIT_SECS).
            mem: memory
                .child_waiting(
                    memory.limit_bytes(),
                    WaitPolicy {
                        timeout: std::time::Duration::from_secs(BULK_GRANT_WAIT_SECS),
                        cancel: None,
                        idle: None,
                    },
                )
                .empty_grant("LOAD CSV's direct path"),
        }
    }

    /// Accounts what the builders hold (every 1,024 rows). Short of memory, the shape's
    /// rows go to a row group early (the direct path, whatever the row count); when that
    /// does not free enough, the write waits for the memory other work holds, and fails
    /// cleanly when none comes back in time.
    /// (`s`: the node shape that grew; relationships cannot go to a file early, as
    /// their segment needs all of them, sorted by node.)
    fn account(&mut self, s: Option<usize>) -> Result<(), EngineError> {
        let held = |b: &Bulk| {
            b.shapes.iter().map(|x| x.heap_bytes() as u64).sum::<u64>()
                + b.rels.iter().map(|x| x.heap_bytes() as u64).sum::<u64>()
        };
        if self.mem.try_resize(held(self)).is_ok() {
            return Ok(());
        }
        if let Some(s) = s {
            self.direct = true;
            self.flush(s)?;
        }
        let need = held(self);
        if need <= self.mem.bytes() {
            self.mem.force_resize(need);
            return Ok(());
        }
        let limit = self.mem.budget().limit_bytes();
        self.mem.grow_waiting(need).map_err(|e| {
            EngineError::Memory(format!(
                "the database's memory limit ({}) cannot hold the rows LOAD CSV is writing ({}): {e}; raise --memory-limit, or load when fewer queries run",
                quiver_common::size::human_bytes(limit),
                quiver_common::size::human_bytes(need)
            ))
        })
    }

    /// The shape of nodes with `labels` and property `keys` (registered once).
    pub fn shape(&mut self, labels: &[Arc<str>], keys: &[Arc<str>]) -> usize {
        if let Some(i) = self
            .shapes
            .iter()
            .position(|s| s.labels == labels && s.keys == keys)
        {
            return i;
        }
        self.shapes.push(Shape::new(labels.to_vec(), keys.to_vec()));
        self.shapes.len() - 1
    }

    /// Key `k` of shape `s`.
    pub fn key(&self, s: usize, k: usize) -> &str {
        &self.shapes[s].keys[k]
    }

    /// The labels of shape `s`.
    pub fn labels(&self, s: usize) -> &[Arc<str>] {
        &self.shapes[s].labels
    }

    /// Nodes and relationships created in the current batch.
    pub fn batch_rows(&self) -> u64 {
        self.shapes.iter().map(Shape::rows).sum::<u64>()
            + self.rels.iter().map(|r| r.ends.len() as u64).sum::<u64>()
    }

    /// The shape of relationships of type `ty` with property `keys` (registered once).
    pub fn rel_shape(&mut self, ty: &Arc<str>, keys: &[Arc<str>]) -> usize {
        if let Some(i) = self.rels.iter().position(|s| s.ty == *ty && s.keys == keys) {
            return i;
        }
        self.rels.push(RelShape {
            ty: ty.clone(),
            keys: keys.to_vec(),
            ends: Vec::new(),
            groups: Vec::new(),
            cols: keys.iter().map(|_| Col::Nulls(0)).collect(),
            group_rows: 0,
            misfits: Vec::new(),
        });
        self.rels.len() - 1
    }

    /// Key `k` of relationship shape `s`.
    pub fn rel_key(&self, s: usize, k: usize) -> &str {
        &self.rels[s].keys[k]
    }

    /// Appends one relationship of shape `s` from `src` to `dst` (`values` in the
    /// shape's key order).
    pub fn push_rel(
        &mut self,
        s: usize,
        src: u64,
        dst: u64,
        values: &[Value],
    ) -> Result<(), EngineError> {
        let shape = &mut self.rels[s];
        let row = shape.ends.len() as u64;
        shape.ends.push((src, dst));
        for (k, v) in values.iter().enumerate() {
            if !shape.cols[k].push(v) {
                shape.misfits.push((row, k as u32, v.clone()));
            }
        }
        shape.group_rows += 1;
        if shape.group_rows >= ROW_GROUP_ROWS_MAX {
            let fresh = shape.keys.iter().map(|_| Col::Nulls(0)).collect();
            let full = std::mem::replace(&mut shape.cols, fresh);
            shape.groups.push(full);
            shape.group_rows = 0;
        }
        self.pushed += 1;
        if self.pushed >= self.min_rows {
            self.direct = true;
        }
        if row % 1024 == 1023 {
            self.account(None)?;
        }
        Ok(())
    }

    /// The batch's relationships as (type, start, end, properties), for a write below
    /// the threshold.
    pub fn take_rel_rows(&mut self) -> Vec<(Arc<str>, u64, u64, Props)> {
        let mut out = Vec::new();
        for shape in &mut self.rels {
            let mut misfits = shape.misfits.drain(..).peekable();
            let mut row = 0usize;
            for g in shape.groups.iter().chain(std::iter::once(&shape.cols)) {
                for i in 0..RelShape::group_len(g, shape.ends.len() - row) {
                    let props = props_at(&shape.keys, g, i, row as u64, &mut misfits);
                    let (a, z) = shape.ends[row];
                    out.push((shape.ty.clone(), a, z, props));
                    row += 1;
                }
            }
            drop(misfits);
            shape.reset();
        }
        out
    }

    /// The batch's relationships for the commit's checkpoint (direct writes).
    pub fn take_rel_tables(&mut self) -> Vec<BulkRels> {
        let mut out = Vec::new();
        for shape in &mut self.rels {
            if shape.ends.is_empty() {
                continue;
            }
            let mut groups = Vec::new();
            if !shape.keys.is_empty() {
                let last = std::mem::take(&mut shape.cols);
                for g in shape.groups.drain(..).chain(std::iter::once(last)) {
                    let n = RelShape::group_len(&g, 0);
                    let cols = g
                        .into_iter()
                        .map(|c| match c {
                            Col::Nulls(_) => None,
                            Col::Built(b) => Some(b),
                        })
                        .collect();
                    groups.push((cols, n));
                }
            }
            out.push(BulkRels {
                ty: shape.ty.clone(),
                keys: shape.keys.clone(),
                ends: std::mem::take(&mut shape.ends),
                groups,
                misfits: shape
                    .misfits
                    .drain(..)
                    .map(|(row, k, v)| (row, shape.keys[k as usize].clone(), v))
                    .collect(),
            });
            shape.reset();
        }
        out
    }

    /// Appends one node of shape `s` (`values` in the shape's key order, nulls for
    /// absent properties).
    pub fn push(&mut self, s: usize, values: &[Value]) -> Result<(), EngineError> {
        let group_bytes = self.group_bytes();
        let shape = &mut self.shapes[s];
        let row = shape.rows();
        for (k, v) in values.iter().enumerate() {
            if !shape.cols[k].push(v) {
                shape.misfits.push((row, k as u32, v.clone()));
            }
        }
        shape.group_rows += 1;
        self.pushed += 1;
        if self.pushed >= self.min_rows {
            self.direct = true;
        }
        let check = shape.group_rows % 1024 == 0;
        let full =
            shape.group_rows >= ROW_GROUP_ROWS_MAX || check && shape.heap_bytes() >= group_bytes;
        if full {
            self.direct = true;
        }
        if self.direct && full {
            self.flush(s)?;
        }
        if check {
            self.account(Some(s))?;
        }
        Ok(())
    }

    /// Appends `n` nodes of shape `s` given column by column (`cols` in the shape's key
    /// order), as [`Bulk::push`] would one row at a time: a typed chunk is appended to
    /// its column's builder whole when their types agree; a chunk of nulls only leaves a
    /// column without a type as it is; other values go one by one (misfits as ever).
    pub fn push_chunk(&mut self, s: usize, n: usize, cols: Vec<Chunk>) -> Result<(), EngineError> {
        if n == 0 {
            return Ok(());
        }
        // A row group holds at most ROW_GROUP_ROWS_MAX rows: a chunk that would pass it
        // starts the next one (a statement of that many rows is direct anyway).
        let group_bytes = self.group_bytes();
        if self.shapes[s].group_rows + n > ROW_GROUP_ROWS_MAX {
            self.direct = true;
            self.flush(s)?;
        }
        let shape = &mut self.shapes[s];
        let row = shape.rows();
        let misfits_before = shape.misfits.len();
        for (k, c) in cols.into_iter().enumerate() {
            let col = &mut shape.cols[k];
            match c {
                Chunk::Typed(b) if b.null_count() == b.len() => match col {
                    Col::Nulls(m) => *m += n,
                    Col::Built(x) => (0..n).for_each(|_| x.push_null()),
                },
                Chunk::Typed(b) => match col {
                    Col::Nulls(m) => {
                        let mut x = ColumnBuilder::nulls(b.dtype, *m);
                        x.append(&b);
                        *col = Col::Built(x);
                    }
                    Col::Built(x) if x.dtype == b.dtype => x.append(&b),
                    Col::Built(_) => {
                        for i in 0..n {
                            let v = value_at(&b, i);
                            if !col.push(&v) {
                                shape.misfits.push((row + i as u64, k as u32, v));
                            }
                        }
                    }
                },
                Chunk::Values(vs) => {
                    for (i, v) in vs.into_iter().enumerate() {
                        if !col.push(&v) {
                            shape.misfits.push((row + i as u64, k as u32, v));
                        }
                    }
                }
            }
        }
        // Misfits are kept in row order (the read-back and the table take them so);
        // stable, so a row's keep their key order.
        shape.misfits[misfits_before..].sort_by_key(|m| m.0);
        shape.group_rows += n;
        self.pushed += n as u64;
        if self.pushed >= self.min_rows {
            self.direct = true;
        }
        let full = shape.data_bytes() >= group_bytes || shape.group_rows >= ROW_GROUP_ROWS_MAX;
        if full {
            self.direct = true;
            self.flush(s)?;
        }
        self.account(Some(s))
    }

    /// The bytes a shape's builders fill before they become a row group: the shapes of
    /// one write share [`BULK_GROUP_BYTES`] (a CREATE of two wide nodes per row holds
    /// no more than one of them).
    fn group_bytes(&self) -> usize {
        (BULK_GROUP_BYTES / self.shapes.len().max(1)).max(BULK_GROUP_BYTES_MIN)
    }

    /// Encodes shape `s`'s builders as a row group of its table file.
    fn flush(&mut self, s: usize) -> Result<(), EngineError> {
        let shape = &mut self.shapes[s];
        if shape.group_rows == 0 {
            return Ok(());
        }
        let cols = std::mem::take(&mut shape.cols);
        let builders: Vec<ColumnBuilder> = cols.into_iter().map(Col::into_builder).collect();
        // The next group is as big as this one, most likely: room for it now, rather
        // than doubling (and copying) its way there.
        let sizes: Vec<(usize, usize)> = builders
            .iter()
            .map(|b| (b.len(), b.string_bytes()))
            .collect();
        if shape.writer.is_none() {
            std::fs::create_dir_all(&self.dir).map_err(|e| quiver_storage::WriteError::Io {
                path: self.dir.clone(),
                source: e,
            })?;
            self.files += 1;
            let name = format!("bulk-{}-{}.seg", self.tag, self.files);
            let path = self.dir.join(&name);
            let metas: Vec<PropertyMeta> = shape
                .keys
                .iter()
                .zip(&builders)
                .map(|(k, b)| PropertyMeta {
                    name: k.to_string(),
                    dtype: b.dtype,
                })
                .collect();
            let w = TableWriter::create_at(path.clone(), name, metas.clone())?;
            shape.writer = Some(Writer::start(w, path, metas)?);
        }
        let wr = shape.writer.as_mut().expect("created above");
        // A table without columns has its rows in the manifest only.
        if !builders.is_empty() {
            wr.write(builders)?;
        }
        shape.written += shape.group_rows as u64;
        shape.group_rows = 0;
        shape.cols = wr
            .metas
            .iter()
            .zip(sizes)
            .map(|(m, (rows, bytes))| {
                let mut b = ColumnBuilder::new(m.dtype);
                b.reserve_exact(rows, bytes);
                Col::Built(b)
            })
            .collect();
        Ok(())
    }

    /// The batch's tables, their last row groups written (direct writes).
    pub fn take_tables(&mut self) -> Result<Vec<BulkTable>, EngineError> {
        let mut out = Vec::new();
        let r = self.finish_tables(&mut out);
        if r.is_err() {
            for t in &out {
                let _ = std::fs::remove_file(&t.path);
            }
        }
        r.map(|()| out)
    }

    fn finish_tables(&mut self, out: &mut Vec<BulkTable>) -> Result<(), EngineError> {
        for s in 0..self.shapes.len() {
            if self.shapes[s].rows() == 0 {
                continue;
            }
            self.flush(s)?;
            let shape = &mut self.shapes[s];
            let Some(mut wr) = shape.writer.take() else {
                continue;
            };
            let n_rows = shape.written;
            let misfits = shape
                .misfits
                .drain(..)
                .map(|(row, k, v)| (row, shape.keys[k as usize].clone(), v))
                .collect();
            let segment = wr.finish()?;
            out.push(BulkTable {
                labels: shape.labels.clone(),
                columns: std::mem::take(&mut wr.metas),
                n_rows,
                path: wr.path.clone(),
                segment,
                misfits,
            });
            shape.reset();
        }
        Ok(())
    }

    /// The batch's nodes as (labels, properties), for a write below the threshold
    /// (nothing was written to files).
    pub fn take_rows(&mut self) -> Vec<(Vec<Arc<str>>, Props)> {
        let mut out = Vec::new();
        for shape in &mut self.shapes {
            let n = shape.group_rows;
            let mut misfits = shape.misfits.drain(..).peekable();
            for i in 0..n {
                let props = props_at(&shape.keys, &shape.cols, i, i as u64, &mut misfits);
                out.push((shape.labels.clone(), props));
            }
            drop(misfits);
            shape.reset();
        }
        out
    }

    /// The statement commits every few rows (`CALL { } IN TRANSACTIONS`): each batch
    /// goes direct on its own rows, from [`BATCH_DIRECT_MIN`].
    pub fn batched(&mut self) {
        self.min_rows = BATCH_DIRECT_MIN;
    }

    /// A batch committed: the next decides for itself whether it goes direct (a default
    /// 1,000-row batch must not become a table and a generation of its own because the
    /// statement wrote many before it).
    pub fn next_batch(&mut self) {
        self.pushed = 0;
        self.direct = false;
    }

    /// Discards the batch (a rolled-back batch of `CALL { } IN TRANSACTIONS`).
    pub fn clear_batch(&mut self) {
        self.next_batch();
        for shape in &mut self.shapes {
            shape.reset();
        }
        for shape in &mut self.rels {
            shape.reset();
        }
    }
}

impl Drop for Bulk {
    fn drop(&mut self) {
        for shape in &mut self.shapes {
            shape.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<Arc<str>> {
        k.iter().map(|s| Arc::from(*s)).collect()
    }

    #[test]
    fn rows_read_back_below_the_threshold_with_misfits_and_nulls() {
        let d = tempfile::tempdir().unwrap();
        let mut b = Bulk::new(d.path().join("bulk"), 1, &MemoryBudget::new(u64::MAX));
        let s = b.shape(&keys(&["A"]), &keys(&["x", "y", "z"]));
        b.push(s, &[Value::Null, Value::Int(1), Value::Null])
            .unwrap();
        b.push(s, &[Value::str("a"), Value::str("two"), Value::Null])
            .unwrap();
        b.push(
            s,
            &[
                Value::str("b"),
                Value::Int(3),
                Value::list(vec![Value::Int(1), Value::Int(2)]),
            ],
        )
        .unwrap();
        assert!(!b.direct);
        assert_eq!(b.batch_rows(), 3);
        let rows = b.take_rows();
        let p = |r: &Props| {
            r.iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(p(&rows[0].1), vec![("y".into(), Value::Int(1))]);
        assert_eq!(
            p(&rows[1].1),
            vec![
                ("x".into(), Value::str("a")),
                ("y".into(), Value::str("two"))
            ]
        );
        assert_eq!(
            p(&rows[2].1),
            vec![
                ("x".into(), Value::str("b")),
                ("y".into(), Value::Int(3)),
                ("z".into(), Value::list(vec![Value::Int(1), Value::Int(2)]))
            ]
        );
        assert_eq!(b.batch_rows(), 0);
        assert!(!d.path().join("bulk").exists());
    }

    #[test]
    fn a_direct_write_gives_a_table_and_drop_removes_untaken_files() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("bulk");
        let mut b = Bulk::new(dir.clone(), 7, &MemoryBudget::new(u64::MAX));
        let s = b.shape(&keys(&["A"]), &keys(&["n"]));
        for i in 0..BULK_ROWS_MIN + 5 {
            let v = if i == 3 {
                Value::str("x")
            } else {
                Value::Int(i as i64)
            };
            b.push(s, &[v]).unwrap();
        }
        assert!(b.direct);
        let t = b.take_tables().unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].n_rows, BULK_ROWS_MIN + 5);
        assert_eq!(t[0].misfits, vec![(3, Arc::from("n"), Value::str("x"))]);
        assert!(t[0].path.exists());
        // A second batch that is dropped leaves no file behind.
        for i in 0..10 {
            b.push(s, &[Value::Int(i)]).unwrap();
        }
        b.flush(s).unwrap();
        let second: Vec<PathBuf> = b
            .shapes
            .iter()
            .filter_map(|s| s.writer.as_ref().map(|w| w.path.clone()))
            .collect();
        assert_eq!(second.len(), 1);
        drop(b);
        assert!(!second[0].exists());
        assert!(t[0].path.exists());
    }
}
