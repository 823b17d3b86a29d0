//! Checkpoint: the delta into a new generation of segments, published with the atomic
//! switch, and a fresh log.
//!
//! What goes where:
//! - nodes created since the segments: one new node table over their id range
//!   (`delta-<generation>`), in row groups of up to 1,048,576 rows; labels every node
//!   has are table labels, the others go in a `:LABEL` column; a property whose values
//!   all share a type is a typed column;
//! - relationships created since: per type, one new relationship segment (CSR out and
//!   in, with explicit edge ids) and its property rows;
//! - what is left — changes to entities of earlier segments (property and label
//!   changes, deletions), ids of created nodes that were never committed or were
//!   deleted, values whose type differs from their column's — is written as a small op
//!   file (`base.ops`, the log's encoding) that the manifest names and every open
//!   replays before the log.
//!
//! Created relationships are renumbered to close the gaps left by rolled-back or
//! deleted ones, so a checkpoint runs only when no other transaction has written.

use crate::append::Prebuilt;
use crate::bulk::{value_at, BulkRels, BulkTable};
use crate::delta::{Delta, NodeRec, Op, RelRec};
use crate::segments;
use crate::store::{indexed_names, lock, CommitState, Current, EngineError, Store};
use crate::value::Value;
use quiver_common::limits::ROW_GROUP_ROWS_MAX;
use quiver_common::types::{DataType, ScalarType};
use quiver_format::column::ColumnBuilder;
use quiver_storage::manifest::{
    DeletedMeta, Manifest, NodeTableMeta, PropertyMeta, RelSegmentMeta, RelTypeMeta, SegmentMeta,
};
use quiver_storage::read::Bits;
use quiver_storage::write::{CsrWriter, Staging, TableWriter};
use quiver_storage::{Database, Direction, IdKey, WriteError};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

/// What a checkpoint did.
#[derive(Debug, Clone, Default)]
pub struct CheckpointReport {
    pub generation: u64,
    pub nodes_written: u64,
    pub relationships_written: u64,
    /// Ops carried in the op file (changes to earlier segments that did not fold).
    pub carried_ops: u64,
    /// Property values of earlier segments' entities folded into their columns.
    pub values_folded: u64,
    /// Nodes and relationships of earlier segments marked deleted in their bitmaps.
    pub entities_deleted: u64,
    /// Created nodes given entries in an id space's index (their `:ID` property).
    pub ids_indexed: u64,
    /// Relationship segments merged into fewer (see `merge_rel_segments`).
    pub rel_segments_merged: u64,
    pub log_bytes_freed: u64,
    pub elapsed: Duration,
}

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
fn choose_columns<'p>(maps: impl Iterator<Item = &'p [(Arc<str>, Value)]>) -> Vec<PropertyMeta> {
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

/// Writes rows of property maps as a table (with a trailing `:LABEL` column when
/// `label_column`); returns the segment and the columns written. Values that do not fit
/// their column go to `misfits` as `(row, key, value)` for the op file.
fn write_rows(
    staging: &Staging,
    name: &str,
    columns: &[PropertyMeta],
    label_column: bool,
    rows: &mut dyn Iterator<Item = (Option<&[(Arc<str>, Value)]>, Option<Vec<Arc<str>>>)>,
    misfits: &mut Vec<(u64, Arc<str>, Value)>,
) -> Result<(SegmentMeta, Vec<PropertyMeta>), EngineError> {
    use rayon::prelude::*;
    let mut metas = columns.to_vec();
    if label_column {
        metas.push(PropertyMeta {
            name: ":LABEL".into(),
            dtype: DataType::Array(ScalarType::String),
        });
    }
    let mut w = TableWriter::create(staging, name, metas.clone())?;
    let at: hashbrown::HashMap<&str, usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();
    let mut first_row = 0u64;
    let mut group: Vec<(Option<&[(Arc<str>, Value)]>, Option<Vec<Arc<str>>>)> = Vec::new();
    loop {
        group.clear();
        group.extend((&mut *rows).take(ROW_GROUP_ROWS_MAX));
        if group.is_empty() {
            break;
        }
        // Each column is built from the whole row group on its own thread; the rows'
        // property lists are short, so a scan per row finds the column's value.
        let group_ref = &group;
        let b: Vec<ColumnBuilder> = metas
            .par_iter()
            .enumerate()
            .map(|(c, meta)| {
                let mut cb = ColumnBuilder::new(meta.dtype);
                if c == columns.len() {
                    for (_, labels) in group_ref {
                        let l = labels
                            .as_ref()
                            .map(|l| Value::list(l.iter().cloned().map(Value::Str).collect()));
                        push_value(&mut cb, l.as_ref());
                    }
                    return cb;
                }
                let key = meta.name.as_str();
                for (props, _) in group_ref {
                    let v = props
                        .and_then(|p| p.iter().find(|(k, _)| &**k == key))
                        .map(|(_, v)| v)
                        .filter(|v| dtype_of(v) == Some(meta.dtype));
                    push_value(&mut cb, v);
                }
                cb
            })
            .collect();
        // Values whose key has no column or whose type is not the column's.
        for (i, (props, _)) in group.iter().enumerate() {
            for (k, v) in props.iter().flat_map(|p| p.iter()) {
                match at.get(&**k) {
                    Some(&c) if dtype_of(v) == Some(columns[c].dtype) => {}
                    _ => misfits.push((first_row + i as u64, k.clone(), v.clone())),
                }
            }
        }
        // A table without columns has its rows in the manifest only.
        if !b.is_empty() {
            w.write_row_group(&b)?;
        }
        first_row += group.len() as u64;
    }
    Ok((w.finish()?, metas))
}

/// What a checkpoint takes in besides the delta: a bulk write's tables and
/// relationships, or a live append's parts.
#[derive(Default)]
pub(crate) struct Incoming {
    pub(crate) tables: Vec<BulkTable>,
    pub(crate) rels: Vec<BulkRels>,
    pub(crate) append: Option<Prebuilt>,
}

impl Store {
    /// Merges the delta into a new generation of segments. Readers go on meanwhile, and
    /// so do writers (their commits go to a new log file and are replayed onto the new
    /// generation when it is published); in analytical mode, whose writes the log does
    /// not hold, it is refused while another transaction has uncommitted writes.
    pub fn checkpoint(&self) -> Result<CheckpointReport, EngineError> {
        let publisher = self.publishing();
        self.checkpoint_with(&publisher)
    }

    /// [`Store::checkpoint`] by the holder of [`Store::publishing`] (a live append,
    /// which keeps other checkpoints out from its snapshot to its publish).
    pub fn checkpoint_with(
        &self,
        publisher: &MutexGuard<'_, ()>,
    ) -> Result<CheckpointReport, EngineError> {
        let t0 = Instant::now();
        if !self.is_writable() {
            return Err(EngineError::Refused(format!(
                "{} is open for writing by another process; this one cannot checkpoint",
                self.dir().display()
            )));
        }
        let held = if self.mode() == crate::store::StorageMode::InMemoryAnalytical
            || self.unlogged.load(Ordering::SeqCst)
        {
            let commit = self.commit_lock();
            if self.has_uncommitted_writers(false) {
                return Err(EngineError::Refused(
                    "cannot checkpoint in analytical mode while another transaction has uncommitted writes; commit or roll it back first".into(),
                ));
            }
            Some(commit)
        } else {
            None
        };
        self.run_checkpoint(publisher, held, Incoming::default(), false, t0)
    }

    /// The checkpoint proper (the caller holds [`Store::publishing`]): the delta and the
    /// `bulk` tables (a bulk write's commit, which `tick`s the clock) into a new
    /// generation. With `held`, the commit lock throughout (no commit runs beside it);
    /// otherwise in three steps:
    ///
    /// 1. under the commit lock: sync the log, take the newest state, note where its
    ///    created entities end (reserving ids for `bulk` past every id handed out), and
    ///    start a new log file for the commits that follow;
    /// 2. without it: write and publish the generation (its manifest names the new log
    ///    file), and bring the declared indexes up to date;
    /// 3. under the commit lock again: the new generation's delta is its op file plus
    ///    the new log file replayed; it becomes the newest state.
    pub(crate) fn run_checkpoint(
        &self,
        _publisher: &MutexGuard<'_, ()>,
        held: Option<MutexGuard<'_, CommitState>>,
        incoming: Incoming,
        tick: bool,
        t0: Instant,
    ) -> Result<CheckpointReport, EngineError> {
        let hold = held.is_some();
        let mut c = held.unwrap_or_else(|| self.commit_lock());
        if let Some(why) = &c.failed {
            return Err(EngineError::Refused(format!(
                "the write-ahead log could not be synced earlier ({why}); reopen the database"
            )));
        }
        self.sync_locked(&mut c)?;
        let cur = self.head();
        let ts0 = c.clock;
        let log_before = c.wal.as_ref().map_or(0, |w| w.bytes);
        // Where the created entities end: past the newest committed ones, or for bulk
        // tables past every id handed out (those after it are the tables').
        let delta = &*cur.delta;
        let bulk_rows: u64 = incoming.tables.iter().map(|t| t.n_rows).sum();
        let nodes = if bulk_rows > 0 {
            self.next_node
                .fetch_add(bulk_rows, Ordering::SeqCst)
                .max(delta.next_node)
        } else {
            delta.next_node
        };
        // An append's range was handed out before: the created nodes are written around it.
        let nodes = match &incoming.append {
            Some(p) => nodes.max(p.first_node + p.n_nodes),
            None => nodes,
        };
        let mut edges = hashbrown::HashMap::new();
        for (t, name) in delta.types.iter().enumerate() {
            let t32 = t as u32;
            let base = delta.base_edges[t];
            let end = delta
                .rels
                .range((t32, base)..(t32 + 1, 0))
                .next_back()
                .map_or(base, |(&(_, e), _)| e + 1);
            edges.insert(name.clone(), end);
        }
        // Types a bulk write or an append adds relationships to: the created range runs
        // past every id handed out (those of transactions still open are holes that
        // their commits bring back), and ids handed out from now on start past the
        // bulk's, which follow it.
        let mut bulk_edges: hashbrown::HashMap<Arc<str>, u64> = hashbrown::HashMap::new();
        for r in &incoming.rels {
            *bulk_edges.entry(r.ty.clone()).or_default() += r.ends.len() as u64;
        }
        for r in incoming.append.iter().flat_map(|p| &p.rel_types) {
            *bulk_edges.entry(Arc::from(r.name.as_str())).or_default() += r.n_edges;
        }
        if !bulk_edges.is_empty() {
            let mut next = crate::store::lock(&self.next_edge);
            for (ty, k) in bulk_edges {
                if let Some(end) = edges.get_mut(&ty) {
                    *end = (*end).max(next.get(&ty).copied().unwrap_or(0));
                    next.insert(ty, *end + k);
                }
            }
        }
        let floor = crate::store::Floor {
            first_tx: self.next_tx_id(),
            edges,
        };
        let log = match c.wal.as_ref() {
            Some(w) => {
                let next = w.rotate(self.dir())?;
                let n = next.number();
                c.wal = Some(next);
                n
            }
            None => {
                return Err(EngineError::Refused(
                    "the database is open read-only".into(),
                ))
            }
        };
        // Transactions open now whose snapshots are older than this state: they claim
        // against the versions of what changed since the oldest of them.
        let oldest = self.oldest_snapshot().unwrap_or(u64::MAX);
        let ends = (nodes, floor.edges.clone());
        let held = if hold {
            Some(c)
        } else {
            c.floor = Some(floor);
            drop(c);
            None
        };

        let written = self.write_generation(&cur, &ends, incoming, log);
        let folded_versions = if oldest < ts0 {
            // (With what earlier checkpoints folded that those transactions may claim.)
            let mut v = delta.versions_after(oldest);
            for (e, &ts) in cur.folded_versions.iter() {
                if ts > oldest {
                    v.entry(*e).or_insert(ts);
                }
            }
            Arc::new(v)
        } else {
            Arc::default()
        };
        let mut c = held.unwrap_or_else(|| self.commit_lock());
        c.floor = None;
        let (mut report, new_db, hook_error) = written?;
        self.sync_locked(&mut c)?;
        let new_delta = self.replayed(&new_db)?;
        if tick {
            c.clock += 1;
        }
        report.generation = new_db.manifest().generation;
        self.adopt(&mut c, new_db, new_delta, ts0, folded_versions);
        crate::wal::remove_logs_before(self.dir(), log);
        if hold {
            self.unlogged.store(false, Ordering::SeqCst);
        }
        report.log_bytes_freed = log_before;
        report.elapsed = t0.elapsed();
        if let Some(e) = hook_error {
            return Err(EngineError::Refused(format!(
                "the checkpoint was published, but its declared indexes could not be rebuilt ({e}); seeks on them scan until the next checkpoint"
            )));
        }
        // Freeing a big delta (millions of records) takes a while: a thread of its own
        // does it when this was the last reference, so the checkpoint returns now.
        drop(c);
        if let Ok(cur) = Arc::try_unwrap(cur) {
            let old = cur.delta;
            if Arc::strong_count(&old) == 1 {
                let _ = std::thread::Builder::new()
                    .name("quiver-free-delta".into())
                    .spawn(move || {
                        drop(old);
                        quiver_common::memory::release_free_memory();
                    });
            }
        }
        Ok(report)
    }

    /// Step 2 of [`Store::run_checkpoint`]: the generation of `cur` with its created
    /// entities up to `ends`, the bulk tables after them, published with its log
    /// starting at file `log`, and its declared indexes brought up to date.
    fn write_generation(
        &self,
        cur: &Current,
        ends: &(u64, hashbrown::HashMap<Arc<str>, u64>),
        incoming: Incoming,
        log: u64,
    ) -> Result<(CheckpointReport, Arc<Database>, Option<String>), EngineError> {
        let Incoming {
            tables: bulk,
            rels: bulk_rels,
            append,
        } = incoming;
        let (db, delta) = (&*cur.db, &*cur.delta);
        let staging = Staging::begin_held(self.dir())?;
        let mut m: Manifest = db.manifest().clone();
        m.generation = staging.generation();
        m.log = Some(log);
        m.written_by = format!("quiver {}", env!("CARGO_PKG_VERSION"));
        // Patch and deletion files need a reader that knows them.
        m.format_version = m.format_version.max(quiver_format::FORMAT_VERSION);
        for l in delta.labels.iter().skip(m.labels.len()) {
            m.labels.push(l.to_string());
        }
        let mut carried: Vec<Op> = Vec::new();
        let mut report = CheckpointReport {
            generation: m.generation,
            ..Default::default()
        };

        // Created nodes: one table over their id range (ids handed out to transactions
        // still open are deleted rows: those transactions cannot commit them); around a
        // live append's range, a table before it and one after it.
        let node_end = ends.0;
        let lo = delta.base_nodes;
        // (The append's relationship segments go after the delta's, below.)
        let mut appended_rels = Vec::new();
        match &append {
            None => {
                let c = Created {
                    lo,
                    hi: node_end,
                    tag: "",
                    index: true,
                };
                write_created(db, delta, &staging, &mut m, c, &mut carried, &mut report)?;
            }
            Some(p) => {
                let hi = p.first_node.max(lo);
                let c = Created {
                    lo,
                    hi,
                    tag: "",
                    index: false,
                };
                write_created(db, delta, &staging, &mut m, c, &mut carried, &mut report)?;
                let mut p = p.clone();
                p.take_files(self.dir(), &staging)?;
                appended_rels = take_appended_nodes(&mut m, p, &mut report)?;
                let c = Created {
                    lo: m.n_nodes,
                    hi: node_end,
                    tag: "-after",
                    index: false,
                };
                write_created(db, delta, &staging, &mut m, c, &mut carried, &mut report)?;
            }
        }

        // Changes to segment nodes and relationships: property changes fold into their
        // columns (below), the rest is carried.
        let mut changes: Vec<Op> = Vec::new();
        let mut label_sets: Vec<(u64, Value, Vec<Op>)> = Vec::new();
        let mut changed_labels: Vec<Arc<str>> = Vec::new();
        let mut node_dels: Vec<u64> = Vec::new();
        let mut rel_dels: Vec<(usize, u64, u64, u64)> = Vec::new();
        for (&id, r) in delta.nodes.range(..delta.base_nodes) {
            if r.created {
                // An id an earlier checkpoint left as a deleted row, committed since by
                // the transaction it was handed to: the row stays deleted and the node
                // is carried whole (rare: a transaction open across a checkpoint).
                if !r.deleted {
                    carried.push(Op::CreateNode {
                        id,
                        labels: r.labels.to_vec(),
                        props: r.props.to_vec(),
                    });
                }
                continue;
            }
            if r.deleted {
                node_dels.push(id);
                continue;
            }
            let mut label_ops = Vec::new();
            diff_node(db, id, r, &mut label_ops, &mut changes)?;
            if !label_ops.is_empty() {
                // Labels fold into the table's `:LABEL` column when the node keeps every
                // label its table gives all rows; otherwise they are carried.
                for op in &label_ops {
                    if let Op::AddLabel { label, .. } | Op::RemoveLabel { label, .. } = op {
                        changed_labels.push(label.clone());
                    }
                }
                match extra_labels(db, id, &r.labels)? {
                    Some(v) => label_sets.push((id, v, label_ops)),
                    None => carried.extend(label_ops),
                }
            }
        }
        for (t, name) in delta.types.iter().enumerate() {
            let t32 = t as u32;
            let base = delta.base_edges[t];
            for (&(_, eid), r) in delta.rels.range((t32, 0)..(t32, base)) {
                if r.created {
                    // An id an earlier checkpoint left as a hole, committed since by the
                    // transaction it was handed to: the entry stays deleted and the
                    // relationship is carried whole (as such a node is).
                    if !r.deleted {
                        carried.push(Op::CreateRel {
                            ty: name.clone(),
                            eid,
                            src: r.src,
                            dst: r.dst,
                            props: r.props.to_vec(),
                        });
                    }
                    continue;
                }
                if r.deleted {
                    rel_dels.push((t, eid, r.src, r.dst));
                } else {
                    diff_rel(db, t, name, eid, r, &mut changes)?;
                }
            }
        }
        let folded = fold_changes(db, &staging, &mut m, changes, label_sets, &mut carried)?;
        report.entities_deleted = fold_deletions(
            db,
            &staging,
            &mut m,
            &node_dels,
            &rel_dels,
            delta,
            &mut carried,
        )?;
        report.values_folded = folded.0;
        // A declared index over a rewritten column is rebuilt by the index hook.
        for ix in m.indexes.iter_mut() {
            if folded.1.iter().any(|k| **k == *ix.property)
                || changed_labels.iter().any(|l| **l == *ix.label)
            {
                ix.covers_nodes = 0;
            }
        }
        for ix in m.vector_indexes.iter_mut() {
            if folded.1.iter().any(|k| **k == *ix.property)
                || changed_labels.iter().any(|l| **l == *ix.label)
            {
                ix.covers_nodes = 0;
            }
        }

        // Created relationships, per type: a new segment each, over their id range
        // (ids keep their relationships across the checkpoint, so commits beside it
        // replay onto the new generation as they are): deleted ones, and ids handed
        // out to transactions that rolled back or are still open, are deleted entries.
        let n_nodes = m.n_nodes;
        for (t, name) in delta.types.iter().enumerate() {
            let t32 = t as u32;
            let base = delta.base_edges[t];
            let end = ends.1.get(name).copied().unwrap_or(base);
            if end <= base {
                continue;
            }
            let mut slots: Vec<Option<Arc<RelRec>>> = vec![None; (end - base) as usize];
            let mut pairs: Vec<(u64, u64)> = vec![(0, 0); slots.len()];
            let mut dead = Bits::new(slots.len() as u64);
            for i in 0..slots.len() as u64 {
                dead.set(i);
            }
            for (&(_, eid), r) in delta.rels.range((t32, base)..(t32, end)) {
                let i = (eid - base) as usize;
                pairs[i] = (r.src, r.dst);
                if r.created && !r.deleted {
                    slots[i] = Some(r.clone());
                    dead.clear(i as u64);
                }
            }
            let existing = m.rel_types.iter().position(|r| *r.name == **name);
            let first_edge = existing.map_or(0, |i| m.rel_types[i].n_edges);
            debug_assert_eq!(first_edge, base);
            let columns = match existing {
                Some(i) => m.rel_types[i].columns.clone(),
                None => choose_columns(slots.iter().flatten().map(|r| &r.props[..])),
            };
            let k = slots.len() as u64;
            let props = if columns.is_empty() {
                for (i, r) in slots.iter().enumerate() {
                    let Some(r) = r else { continue };
                    for (key, value) in &r.props {
                        carried.push(Op::SetRelProp {
                            ty: name.clone(),
                            eid: first_edge + i as u64,
                            src: r.src,
                            dst: r.dst,
                            key: key.clone(),
                            value: value.clone(),
                        });
                    }
                }
                None
            } else {
                let mut misfits = Vec::new();
                let (seg, _) = write_rows(
                    &staging,
                    &format!("rels-{t:04}-delta-props.seg"),
                    &columns,
                    false,
                    &mut slots
                        .iter()
                        .map(|r| (r.as_ref().map(|r| &r.props[..]), None)),
                    &mut misfits,
                )?;
                for (row, key, value) in misfits {
                    let (src, dst) = pairs[row as usize];
                    carried.push(Op::SetRelProp {
                        ty: name.clone(),
                        eid: first_edge + row,
                        src,
                        dst,
                        key,
                        value,
                    });
                }
                Some(seg)
            };
            let rs = write_rel_segment(
                &staging,
                &format!("rels-{t:04}-delta"),
                n_nodes,
                &pairs,
                (dead.count() > 0).then_some(&dead),
                props,
            )?;
            debug_assert_eq!(rs.n_edges, k);
            add_rel_segment(&mut m, existing, name, columns, rs);
            report.relationships_written += k - dead.count();
        }

        // Bulk-written tables: moved into the generation, after everything else.
        for (k, t) in bulk.iter().enumerate() {
            let name = format!("nodes-bulk-{k:04}.seg");
            let (path, rel) = staging.file(&name);
            quiver_storage::fsio::rename(&t.path, &path).map_err(|e| WriteError::Io {
                path: path.clone(),
                source: e,
            })?;
            let mut labels = Vec::new();
            for l in &t.labels {
                let i = match m.labels.iter().position(|x| **x == **l) {
                    Some(i) => i,
                    None => {
                        m.labels.push(l.to_string());
                        m.labels.len() - 1
                    }
                };
                labels.push(i as u32);
            }
            let first = m.n_nodes;
            for (row, key, value) in &t.misfits {
                carried.push(Op::SetNodeProp {
                    id: first + row,
                    key: key.clone(),
                    value: value.clone(),
                });
            }
            m.node_tables.push(NodeTableMeta {
                name: format!("bulk-{}-{k}", m.generation),
                first_node: first,
                n_rows: t.n_rows,
                labels,
                label_column: None,
                id_column: None,
                id_space: None,
                columns: t.columns.clone(),
                segments: vec![SegmentMeta {
                    file: rel,
                    bytes: t.segment.bytes,
                }],
                patches: Vec::new(),
                deleted: None,
            });
            m.n_nodes += t.n_rows;
            report.nodes_written += t.n_rows;
        }

        // Bulk-written relationships: a segment per shape, after the delta's own; an
        // append's segments likewise.
        for (k, r) in bulk_rels.into_iter().enumerate() {
            report.relationships_written += write_bulk_rels(&staging, &mut m, k, r, &mut carried)?;
        }
        take_appended_rels(&mut m, appended_rels, &mut report)?;

        report.rel_segments_merged = merge_rel_segments(db, &staging, &mut m, &self.memory)?;

        // Ops carried from the previous generation's op file are in the delta as
        // changes to segment entities: they were re-derived above.
        m.base_ops = if carried.is_empty() {
            None
        } else {
            let (path, rel) = staging.file("base.ops");
            let bytes = crate::wal::write_ops_file(&path, &carried)?;
            Some(SegmentMeta { file: rel, bytes })
        };
        report.carried_ops = carried.len() as u64;
        staging.publish(&m)?;

        // Reopen on the new generation: from here on it is the database on disk, so it
        // becomes the newest state whatever follows.
        let mut new_db = Arc::new(Database::open(self.dir(), self.opts.open_mode)?);
        // The new node tables go into the declared indexes (a newer generation, before
        // anyone reads this one). If that fails, the stale indexes are not used (seeks
        // scan) until a later checkpoint rebuilds them.
        let mut hook_error = None;
        if let Some(hook) = lock(&self.index_hook).as_ref() {
            match hook(self.dir(), &new_db) {
                Ok(true) => {
                    new_db = Arc::new(Database::open(self.dir(), self.opts.open_mode)?);
                }
                Ok(false) => {}
                Err(e) => hook_error = Some(e),
            }
        }
        Ok((report, new_db, hook_error))
    }
}

/// Created nodes `lo..hi` of the delta, as one table (see [`Store::write_generation`]):
/// `tag` names its files apart from another's of the same checkpoint; with `index`,
/// their ids join an id space's index when they can.
struct Created {
    lo: u64,
    hi: u64,
    tag: &'static str,
    index: bool,
}

fn write_created(
    db: &Database,
    delta: &Delta,
    staging: &Staging,
    m: &mut Manifest,
    Created {
        lo,
        hi: node_end,
        tag,
        index,
    }: Created,
    carried: &mut Vec<Op>,
    report: &mut CheckpointReport,
) -> Result<(), EngineError> {
    if node_end <= lo {
        return Ok(());
    }
    let live = |id: u64| delta.nodes.get(&id).filter(|r| r.created && !r.deleted);
    let recs: Vec<_> = (lo..node_end).map(live).collect();
    let mut tables = Vec::new();
    for (k, (a, b)) in label_pieces(&recs).into_iter().enumerate() {
        let piece = match k {
            0 => tag.to_string(),
            k => format!("{tag}-{k}"),
        };
        let t = write_created_table(
            staging,
            m,
            lo + a as u64,
            &recs[a..b],
            &piece,
            carried,
            report,
        )?;
        tables.push((t, &recs[a..b]));
    }
    m.n_nodes = node_end;
    if index {
        report.ids_indexed += index_created_ids(db, staging, m, &tables)?;
    }
    Ok(())
}

/// Runs of created nodes with one label set at least this long get a table of their
/// own (shorter runs share one, with a `:LABEL` column).
const LABEL_RUN_MIN: usize = 1024;

/// How the created nodes `recs` (in id order; `None`: a hole) split into tables, as
/// ranges of `recs`: each run of one label set of at least [`LABEL_RUN_MIN`] nodes alone
/// (its table carries the labels, so a scan of another label skips it whole and one of
/// its label reads no label column), and what lies between such runs together. Holes
/// join the run they are in. Tables cover consecutive ids, so a run cannot gather the
/// nodes of its label set from elsewhere; there are at most twice as many tables as
/// long runs, plus one.
fn label_pieces(recs: &[Option<&NodeRec>]) -> Vec<(usize, usize)> {
    // Runs: (start, end, label set).
    let mut runs: Vec<(usize, usize, Vec<&str>)> = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let Some(r) = r else {
            continue;
        };
        let mut set: Vec<&str> = r.labels.iter().map(|l| &**l).collect();
        set.sort_unstable();
        set.dedup();
        match runs.last_mut() {
            Some(run) if run.2 == set => run.1 = i + 1,
            _ => {
                if let Some(run) = runs.last_mut() {
                    run.1 = i;
                }
                let start = if runs.is_empty() { 0 } else { i };
                runs.push((start, i + 1, set));
            }
        }
    }
    let Some(last) = runs.last_mut() else {
        return vec![(0, recs.len())];
    };
    last.1 = recs.len();
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    let mut mixed: Option<(usize, usize)> = None;
    for (a, b, _) in runs {
        if b - a >= LABEL_RUN_MIN {
            pieces.extend(mixed.take());
            pieces.push((a, b));
        } else {
            mixed = Some(match mixed {
                Some((x, _)) => (x, b),
                None => (a, b),
            });
        }
    }
    pieces.extend(mixed);
    pieces
}

/// A table of created nodes `recs` from node id `first` (holes are deleted rows);
/// returns its index in the manifest.
fn write_created_table(
    staging: &Staging,
    m: &mut Manifest,
    first: u64,
    recs: &[Option<&NodeRec>],
    tag: &str,
    carried: &mut Vec<Op>,
    report: &mut CheckpointReport,
) -> Result<usize, EngineError> {
    let columns = choose_columns(recs.iter().flatten().map(|r| &r.props[..]));
    let mut common: Option<Vec<Arc<str>>> = None;
    for r in recs.iter().flatten() {
        common = Some(match common {
            None => r.labels.to_vec(),
            Some(c) => c.into_iter().filter(|l| r.labels.contains(l)).collect(),
        });
    }
    let common = common.unwrap_or_default();
    let extra = recs
        .iter()
        .flatten()
        .any(|r| r.labels.iter().any(|l| !common.contains(l)));
    let mut misfits = Vec::new();
    let (seg, metas) = write_rows(
        staging,
        &format!("nodes-delta{tag}.seg"),
        &columns,
        extra,
        &mut recs.iter().map(|r| match r {
            Some(r) => (
                Some(&r.props[..]),
                Some(
                    r.labels
                        .iter()
                        .filter(|l| !common.contains(l))
                        .cloned()
                        .collect(),
                ),
            ),
            None => (None, None),
        }),
        &mut misfits,
    )?;
    for (row, key, value) in misfits {
        carried.push(Op::SetNodeProp {
            id: first + row,
            key,
            value,
        });
    }
    // Ids never committed or deleted since: deleted rows of the new table.
    let mut holes = Bits::new(recs.len() as u64);
    for (i, r) in recs.iter().enumerate() {
        if r.is_none() {
            holes.set(i as u64);
        } else {
            report.nodes_written += 1;
        }
    }
    let n_cols = columns.len();
    m.node_tables.push(NodeTableMeta {
        name: format!("delta-{}{tag}", m.generation),
        first_node: first,
        n_rows: recs.len() as u64,
        labels: common
            .iter()
            .filter_map(|l| m.labels.iter().position(|x| **x == **l))
            .map(|i| i as u32)
            .collect(),
        label_column: extra.then_some(n_cols),
        id_column: None,
        id_space: None,
        columns: metas,
        segments: vec![seg],
        patches: Vec::new(),
        deleted: None,
    });
    let t = m.node_tables.len() - 1;
    if holes.count() > 0 {
        m.node_tables[t].deleted = Some(write_deleted(
            staging,
            &format!("nodes-{t:04}-deleted.seg"),
            &[&holes],
        )?);
    }
    Ok(t)
}

/// A live append's nodes (files already in the generation) into `m`, after its nodes
/// so far: the node tables at their reserved range (labels by name) and the id indexes
/// it rewrote. Returns its relationship types, for [`take_appended_rels`].
fn take_appended_nodes(
    m: &mut Manifest,
    p: Prebuilt,
    report: &mut CheckpointReport,
) -> Result<Vec<RelTypeMeta>, EngineError> {
    if m.n_nodes != p.first_node {
        return Err(EngineError::Refused(format!(
            "the append's nodes start at id {}, the database's next table at {}",
            p.first_node, m.n_nodes
        )));
    }
    for mut t in p.node_tables {
        let mut labels = Vec::new();
        for &l in &t.labels {
            let Some(name) = p.labels.get(l as usize) else {
                continue;
            };
            let i = match m.labels.iter().position(|x| x == name) {
                Some(i) => i,
                None => {
                    m.labels.push(name.clone());
                    m.labels.len() - 1
                }
            };
            labels.push(i as u32);
        }
        t.labels = labels;
        m.n_nodes = t.first_node + t.n_rows;
        report.nodes_written += t.n_rows;
        m.node_tables.push(t);
    }
    m.n_nodes = m.n_nodes.max(p.first_node + p.n_nodes);
    for (i, s) in p.id_spaces {
        let n = m.id_spaces.len();
        match m.id_spaces.get_mut(i) {
            Some(x) => *x = s,
            None if i == n => m.id_spaces.push(s),
            None => {
                return Err(EngineError::Refused(
                    "the append's id spaces do not follow the database's".into(),
                ))
            }
        }
    }
    Ok(p.rel_types)
}

/// A live append's relationship segments into `m`, after each type's others.
fn take_appended_rels(
    m: &mut Manifest,
    rel_types: Vec<RelTypeMeta>,
    report: &mut CheckpointReport,
) -> Result<(), EngineError> {
    for r in rel_types {
        report.relationships_written += r.n_edges;
        m.add_rel_segments(r).map_err(EngineError::Refused)?;
    }
    Ok(())
}

/// The `:LABEL` value of segment node `id` with `labels`: those its table does not give
/// every row (null when none), or `None` when it lost one of those (a column cannot
/// take a table label away from one row).
fn extra_labels(db: &Database, id: u64, labels: &[Arc<str>]) -> Result<Option<Value>, EngineError> {
    let (t, _) = db.node_location(id)?;
    let fixed: Vec<&str> = db.node_tables()[t]
        .meta
        .labels
        .iter()
        .map(|&l| db.labels()[l as usize].as_str())
        .collect();
    if !fixed.iter().all(|f| labels.iter().any(|l| **l == **f)) {
        return Ok(None);
    }
    let extra: Vec<Value> = labels
        .iter()
        .filter(|l| !fixed.contains(&&***l))
        .map(|l| Value::Str(l.clone()))
        .collect();
    Ok(Some(if extra.is_empty() {
        Value::Null
    } else {
        Value::list(extra)
    }))
}

/// Folds property changes to entities of `db`'s segments, and label changes of nodes
/// (`labels`: node, its new `:LABEL` value, the ops to carry if it does not fold), into
/// patch files of their tables (see [`crate::fold`]); what does not fold is carried.
/// Returns how many values folded and the names of the columns rewritten.
fn fold_changes(
    db: &Database,
    staging: &Staging,
    m: &mut Manifest,
    changes: Vec<Op>,
    labels: Vec<(u64, Value, Vec<Op>)>,
    carried: &mut Vec<Op>,
) -> Result<(u64, Vec<Arc<str>>), EngineError> {
    use crate::fold::{fold_table, split_ops, RowSet, Target, LABEL_KEY};
    use quiver_storage::TableRef;
    let mut split = split_ops(db, changes, carried);
    let mut label_ops: HashMap<u64, Vec<Op>> = HashMap::new();
    for (id, value, ops) in labels {
        let (t, row) = db.node_location(id)?;
        split.nodes.entry(t).or_default().push(RowSet {
            row,
            key: Arc::from(LABEL_KEY),
            value,
        });
        label_ops.insert(id, ops);
    }
    let mut n = 0u64;
    let mut names: Vec<Arc<str>> = Vec::new();
    let mut tables: Vec<_> = split.nodes.into_iter().collect();
    tables.sort_by_key(|(t, _)| *t);
    for (t, sets) in tables {
        let table = &db.node_tables()[t];
        let meta = &mut m.node_tables[t];
        let first = meta.first_node;
        let total = sets.len() as u64;
        let frozen = meta.id_column.into_iter().collect();
        let (left, keys) = fold_table(
            db,
            staging,
            Target {
                tref: TableRef::Node(t),
                tag: format!("nodes-{t:04}"),
                footer: &table.footer,
                columns: &mut meta.columns,
                patches: &mut meta.patches,
                frozen,
            },
            sets,
        )?;
        n += total - left.len() as u64;
        if meta.label_column.is_none() {
            meta.label_column = meta.columns.iter().position(|c| c.name == LABEL_KEY);
        }
        for s in left {
            if &*s.key == LABEL_KEY {
                carried.extend(label_ops.remove(&(first + s.row)).unwrap_or_default());
                continue;
            }
            carried.push(Op::SetNodeProp {
                id: first + s.row,
                key: s.key,
                value: s.value,
            });
        }
        names.extend(keys);
    }
    let mut rels: Vec<_> = split.rels.into_iter().collect();
    rels.sort_by_key(|(t, _)| *t);
    for (t, sets) in rels {
        let r = &db.rel_types()[t];
        let Some(footer) = r.props_footer() else {
            continue;
        };
        let ends: HashMap<u64, (u64, u64)> =
            sets.iter().map(|(s, a, z)| (s.row, (*a, *z))).collect();
        let sets: Vec<_> = sets.into_iter().map(|(s, _, _)| s).collect();
        let total = sets.len() as u64;
        let meta = &mut m.rel_types[t];
        let (left, keys) = fold_table(
            db,
            staging,
            Target {
                tref: TableRef::Rel(t),
                tag: format!("rels-{t:04}"),
                footer,
                columns: &mut meta.columns,
                patches: &mut meta.patches,
                frozen: Vec::new(),
            },
            sets,
        )?;
        n += total - left.len() as u64;
        for s in left {
            let (src, dst) = ends[&s.row];
            carried.push(Op::SetRelProp {
                ty: Arc::from(meta.name.as_str()),
                eid: s.row,
                src,
                dst,
                key: s.key,
                value: s.value,
            });
        }
        names.extend(keys);
    }
    Ok((n, names))
}

/// An id key owned (created nodes' ids, sorted before they are merged into an index).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum IdOwned {
    Int(i64),
    Str(Arc<str>),
}

impl IdOwned {
    fn key(&self) -> IdKey<'_> {
        match self {
            IdOwned::Int(i) => IdKey::Int(*i),
            IdOwned::Str(s) => IdKey::Str(s.as_bytes()),
        }
    }
}

/// Gives the created nodes of new tables (`tables`: each table's index and its `recs`,
/// one per row) entries in an id space's index. A table's space is the one whose
/// imported tables' labels some of its created nodes carry (all of them) and whose id
/// property the table has; every row with that property must hold a value of the
/// space's type, and all go in (rows without it have nothing to be found by). The ids
/// of all the tables of one space must be unique among them and not in the index
/// already; then each such table's id column is that property, `MATCH (n:L {id: ..})`
/// stays an index seek and `import --append` finds them; a table of several labels (users
/// and the events a LOAD CSV made beside them) included. Otherwise (no one space, a
/// value of another type, a repeated id) the tables have no id column, as before, and
/// seeks scan them beside the index. One index write a space. Returns how many ids it
/// indexed.
fn index_created_ids(
    db: &Database,
    staging: &Staging,
    m: &mut Manifest,
    tables: &[(usize, &[Option<&NodeRec>])],
) -> Result<u64, EngineError> {
    use quiver_storage::manifest::IdType;
    // Per space: its tables (with their id column) and their (id, node) pairs.
    type Space = (Vec<(usize, usize)>, Vec<(IdOwned, u32)>);
    let mut spaces: std::collections::BTreeMap<usize, Option<Space>> = Default::default();
    let Some(first_new) = tables.iter().map(|(t, _)| *t).min() else {
        return Ok(0);
    };
    'tables: for &(t, recs) in tables {
        let table = &m.node_tables[t];
        // The one id space whose imported tables' labels some created node carries.
        let mut found: Option<(usize, String)> = None;
        for it in &m.node_tables[..first_new] {
            let (Some(s), Some(c)) = (it.id_space, it.id_column) else {
                continue;
            };
            let labels: Vec<&str> = it
                .labels
                .iter()
                .map(|&l| m.labels[l as usize].as_str())
                .collect();
            let carried = !labels.is_empty()
                && recs
                    .iter()
                    .flatten()
                    .any(|r| labels.iter().all(|l| r.labels.iter().any(|x| **x == **l)));
            if !carried {
                continue;
            }
            let name = it.columns[c].name.clone();
            match &found {
                Some((fs, fname)) if *fs != s || *fname != name => continue 'tables,
                _ => found = Some((s, name)),
            }
        }
        let Some((space, name)) = found else {
            continue;
        };
        let Some(col) = table.columns.iter().position(|c| c.name == name) else {
            continue;
        };
        let entry = spaces
            .entry(space)
            .or_insert_with(|| Some((Vec::new(), Vec::new())));
        let Some((owners, new)) = entry else {
            continue;
        };
        let id_type = m.id_spaces[space].id_type;
        let first = table.first_node;
        for (i, r) in recs.iter().enumerate() {
            let Some(r) = r else { continue };
            let key = match (id_type, crate::delta::prop_get(&r.props, &name)) {
                (_, None) => continue,
                (IdType::Integer, Some(Value::Int(k))) => IdOwned::Int(*k),
                (IdType::String, Some(Value::Str(k))) => IdOwned::Str(k.clone()),
                _ => {
                    // The space's ids are not all of its type: none of its tables go in.
                    *entry = None;
                    continue 'tables;
                }
            };
            new.push((key, (first + i as u64) as u32));
        }
        owners.push((t, col));
    }
    let mut indexed = 0;
    for (space, found) in spaces {
        let Some((owners, mut new)) = found else {
            continue;
        };
        new.sort_unstable();
        if new.is_empty() || new.windows(2).any(|w| w[0].0 == w[1].0) {
            continue;
        }
        let mut known = false;
        for (k, _) in &new {
            if db.lookup_id(space, k.key())?.is_some() {
                known = true;
                break;
            }
        }
        if known {
            continue;
        }
        let end = owners
            .iter()
            .map(|&(t, _)| m.node_tables[t].first_node + m.node_tables[t].n_rows)
            .max()
            .unwrap_or(0);
        let (seg, n) = quiver_storage::write::write_id_index_merged(
            staging,
            &format!("ids-{space:04}.seg"),
            db,
            space,
            new.len(),
            &|j| (new[j].0.key(), new[j].1),
            m.n_nodes.max(end),
        )?;
        m.id_spaces[space].index = seg;
        m.id_spaces[space].n_ids = n;
        for (t, col) in owners {
            let table = &mut m.node_tables[t];
            table.id_column = Some(col);
            table.id_space = Some(space);
        }
        indexed += new.len() as u64;
    }
    Ok(indexed)
}

/// Writes a deletion file of `maps` (bitmaps of one length).
fn write_deleted(
    staging: &Staging,
    name: &str,
    maps: &[&Bits],
) -> Result<DeletedMeta, EngineError> {
    let len = maps.first().map_or(0, |b| b.len());
    let held: Vec<_> = maps.iter().map(|b| b.words()).collect();
    let words: Vec<&[u64]> = held.iter().map(|w| &w[..]).collect();
    let file = quiver_storage::write::write_bitmaps(staging, name, len, &words)?;
    Ok(DeletedMeta {
        count: maps.first().map_or(0, |b| b.count()),
        file,
    })
}

/// Deletions of entities of `db`'s segments into the deletion bitmaps of their tables
/// and relationship segments (each rewritten whole: the old bits and the new). A
/// relationship whose entries cannot be found is carried as an op. Returns how many
/// entities were marked.
fn fold_deletions(
    db: &Database,
    staging: &Staging,
    m: &mut Manifest,
    nodes: &[u64],
    rels: &[(usize, u64, u64, u64)],
    delta: &Delta,
    carried: &mut Vec<Op>,
) -> Result<u64, EngineError> {
    let mut marked = 0u64;
    let mut tables: std::collections::BTreeMap<usize, Vec<u64>> = Default::default();
    for &id in nodes {
        let (t, row) = db.node_location(id)?;
        tables.entry(t).or_default().push(row);
    }
    for (t, rows) in tables {
        let table = &db.node_tables()[t];
        let mut bits = table
            .deleted
            .clone()
            .unwrap_or_else(|| Bits::new(table.meta.n_rows));
        for row in rows {
            bits.set(row);
            marked += 1;
        }
        m.node_tables[t].deleted = Some(write_deleted(
            staging,
            &format!("nodes-{t:04}-deleted.seg"),
            &[&bits],
        )?);
    }
    // Positions to mark per (type, segment): in the out CSR, in the in CSR.
    type Marks = (Vec<u64>, Vec<u64>);
    let mut segs: std::collections::BTreeMap<(usize, usize), Marks> = Default::default();
    // A deleted node's segment relationships die with it (the delta holds no record
    // of them): every entry at the node and towards it. Many nodes: one pass over
    // each segment; a few: searched from each node.
    if !nodes.is_empty() && nodes.len() as u64 * 256 >= db.n_nodes() {
        let mut dead = Bits::new(db.n_nodes());
        for &id in nodes {
            dead.set(id);
        }
        for t in 0..db.rel_types().len() {
            for seg in 0..db.manifest().rel_types[t].segments.len() {
                let e = segs.entry((t, seg)).or_default();
                db.entries_of_nodes(t, seg, Direction::Out, &dead, |p| e.0.push(p))?;
                db.entries_of_nodes(t, seg, Direction::In, &dead, |p| e.1.push(p))?;
            }
        }
    } else {
        for &id in nodes {
            for t in 0..db.rel_types().len() {
                db.node_edge_positions(t, id as u32, |seg, o, i| {
                    let e = segs.entry((t, seg)).or_default();
                    e.0.push(o);
                    e.1.push(i);
                })?;
            }
        }
    }
    for &(t, eid, src, dst) in rels {
        match db.edge_positions(t, src, dst, eid)? {
            Some((seg, o, i)) => {
                let e = segs.entry((t, seg)).or_default();
                e.0.push(o);
                e.1.push(i);
            }
            None => carried.push(Op::DeleteRel {
                ty: delta.types[t].clone(),
                eid,
                src,
                dst,
            }),
        }
    }
    for ((t, seg), (outs, ins)) in segs {
        if outs.is_empty() && ins.is_empty() {
            continue;
        }
        let meta = &m.rel_types[t].segments[seg];
        let n = meta.n_edges;
        let [mut out, mut inc] = db
            .edge_deletions(t, seg)
            .cloned()
            .unwrap_or_else(|| [Bits::new(n), Bits::new(n)]);
        for o in outs {
            if !out.get(o) {
                marked += 1;
            }
            out.set(o);
        }
        for i in ins {
            inc.set(i);
        }
        m.rel_types[t].segments[seg].deleted = Some(write_deleted(
            staging,
            &format!("rels-{t:04}-{seg:04}-deleted.seg"),
            &[&out, &inc],
        )?);
    }
    Ok(marked)
}

/// The delta a generation starts with: its op file replayed.
pub(crate) fn base_delta(db: &Database) -> Result<Delta, EngineError> {
    let mut d = Delta::new(db, indexed_names(db.manifest()));
    if let Some(seg) = &db.manifest().base_ops {
        for op in crate::wal::read_ops_file(&db.dir().join(&seg.file))? {
            d.apply(db, &op, 0)?;
        }
        d.changes = 0;
    }
    Ok(d)
}

/// The ops that turn segment node `id` into record `r` (an overlay of its changed
/// properties): label changes to `label_ops` (the segment's labels are read only when
/// the record's differ), properties to `out`.
fn diff_node(
    db: &Database,
    id: u64,
    r: &NodeRec,
    label_ops: &mut Vec<Op>,
    out: &mut Vec<Op>,
) -> Result<(), EngineError> {
    let old_labels = if r.seg_labels {
        Vec::new()
    } else {
        segments::node_labels(db, id)?
    };
    let new_labels = &r.labels;
    for l in new_labels {
        if !old_labels.contains(l) {
            label_ops.push(Op::AddLabel {
                id,
                label: l.clone(),
            });
        }
    }
    for l in &old_labels {
        if !new_labels.contains(l) {
            label_ops.push(Op::RemoveLabel {
                id,
                label: l.clone(),
            });
        }
    }
    for (k, v) in &r.props {
        // Removing a property the segment never had changes nothing.
        if v.is_null() && segments::node_prop(db, id, k)?.is_null() {
            continue;
        }
        out.push(Op::SetNodeProp {
            id,
            key: k.clone(),
            value: v.clone(),
        });
    }
    Ok(())
}

/// The ops that give segment relationship `eid` of type `t` (`ty`) record `r`'s changed
/// properties.
fn diff_rel(
    db: &Database,
    t: usize,
    ty: &Arc<str>,
    eid: u64,
    r: &RelRec,
    out: &mut Vec<Op>,
) -> Result<(), EngineError> {
    for (k, v) in &r.props {
        if v.is_null() && segments::rel_prop(db, t, eid, k)?.is_null() {
            continue;
        }
        out.push(Op::SetRelProp {
            ty: ty.clone(),
            eid,
            src: r.src,
            dst: r.dst,
            key: k.clone(),
            value: v.clone(),
        });
    }
    Ok(())
}

/// The CSR both ways of `rels` (renumbered `0..`, relative to the segment).
/// Writes relationships `bulk` (shape `k` of a bulk write) as a new segment of its
/// type: CSR out and in, and property rows in the type's columns (a new type takes the
/// shape's). Values that fit no column are carried as ops. Returns the count.
fn write_bulk_rels(
    staging: &Staging,
    m: &mut Manifest,
    k: usize,
    mut bulk: BulkRels,
    carried: &mut Vec<Op>,
) -> Result<u64, EngineError> {
    let n = bulk.ends.len() as u64;
    if let Some(&(a, z)) = bulk
        .ends
        .iter()
        .find(|&&(a, z)| a >= m.n_nodes || z >= m.n_nodes)
    {
        return Err(EngineError::Refused(format!(
            "a relationship from node {a} to node {z} names a node past the last one ({})",
            m.n_nodes
        )));
    }
    let existing = m.rel_types.iter().position(|r| *r.name == *bulk.ty);
    let first_edge = existing.map_or(0, |i| m.rel_types[i].n_edges);
    let columns: Vec<PropertyMeta> = match existing {
        Some(i) => m.rel_types[i].columns.clone(),
        None => bulk
            .keys
            .iter()
            .enumerate()
            .map(|(c, key)| PropertyMeta {
                name: key.to_string(),
                dtype: bulk
                    .groups
                    .iter()
                    .find_map(|(g, _)| g[c].as_ref().map(|b| b.dtype))
                    .unwrap_or(DataType::Scalar(ScalarType::String)),
            })
            .collect(),
    };
    let carry = |carried: &mut Vec<Op>, row: u64, key: &Arc<str>, value: Value| {
        let (src, dst) = bulk.ends[row as usize];
        carried.push(Op::SetRelProp {
            ty: bulk.ty.clone(),
            eid: first_edge + row,
            src,
            dst,
            key: key.clone(),
            value,
        });
    };
    // Values outside the columns: a key without one, or a group of another type.
    let mut first = 0u64;
    for (group, len) in &bulk.groups {
        for (c, key) in bulk.keys.iter().enumerate() {
            let Some(b) = &group[c] else { continue };
            let fits = columns
                .iter()
                .any(|col| *col.name == **key && col.dtype == b.dtype);
            if !fits {
                for i in 0..*len {
                    let v = value_at(b, i);
                    if !v.is_null() {
                        carry(carried, first + i as u64, key, v);
                    }
                }
            }
        }
        first += *len as u64;
    }
    let props = if columns.is_empty() {
        None
    } else {
        let name = format!("rels-bulk-{k:04}-props.seg");
        let mut w = TableWriter::create(staging, &name, columns.clone())?;
        let mut first = 0u64;
        let no_groups = bulk.groups.is_empty();
        for (mut group, len) in std::mem::take(&mut bulk.groups) {
            let mut out = Vec::with_capacity(columns.len());
            for col in &columns {
                let at = bulk.keys.iter().position(|k| **k == *col.name);
                match at.and_then(|c| group[c].take()) {
                    Some(b) if b.dtype == col.dtype => out.push(b),
                    _ => out.push(ColumnBuilder::nulls(col.dtype, len)),
                }
            }
            w.write_row_group(&out)?;
            first += len as u64;
        }
        if no_groups {
            // A shape without keys under a type with columns: rows of nulls.
            let mut left = n;
            while left > 0 {
                let len = left.min(ROW_GROUP_ROWS_MAX as u64) as usize;
                let out: Vec<ColumnBuilder> = columns
                    .iter()
                    .map(|col| ColumnBuilder::nulls(col.dtype, len))
                    .collect();
                w.write_row_group(&out)?;
                left -= len as u64;
            }
        }
        debug_assert!(no_groups || first == n);
        Some(w.finish()?)
    };
    for (row, key, value) in bulk.misfits {
        carry(carried, row, &key, value);
    }
    let seg = write_rel_segment(
        staging,
        &format!("rels-bulk-{k:04}"),
        m.n_nodes,
        &bulk.ends,
        None,
        props,
    )?;
    add_rel_segment(m, existing, &bulk.ty, columns, seg);
    Ok(n)
}

/// A type's segments are merged only once it has more than this many: expansions
/// read up to this many segments a node, and each merge rewrites what it merges
/// (measured on 1M relationships loaded in 100k batches: merging at every second
/// batch cost a fifth of the load).
const MERGE_SEGMENTS_MIN: usize = 4;

/// Bytes a merge holds per relationship: its ends in edge-id order (16) and one
/// direction's sorted entries at a time (24).
const MERGE_BYTES_PER_EDGE: u64 = 40;

/// Merges the newest segments of each relationship type into one, as an LSM merges
/// its runs: every direct write of relationships (a batch of `CALL { } IN
/// TRANSACTIONS`, a LOAD CSV, `import --append`) adds a segment, and each segment has
/// CSR offsets over every node, so many small ones cost disk and a lookup each per
/// expansion. Walking back from the newest segment that `db` holds unchanged, a
/// segment joins the run while it has no more than twice the edges of the segments
/// after it: sizes then grow geometrically, a type keeps a logarithmic number of
/// segments, and each edge is rewritten a bounded number of times.
///
/// Merged: segments with explicit edge ids (written by a write or a checkpoint; an
/// imported property-less segment numbers edges by position, which a merge would make
/// explicit and bigger) that all have a property file (holding a prefix of the type's
/// columns) or, for a type without columns, none. Edge ids stay the same (the merged segment lists its edges in edge-id
/// order), deletions carry over by edge id, property row groups are copied as stored
/// (the type's patches apply to them by row group as before). A merge that would not
/// fit the memory limit is left to a later checkpoint. Returns how many segments went
/// into merged ones.
fn merge_rel_segments(
    db: &Database,
    staging: &Staging,
    m: &mut Manifest,
    memory: &quiver_common::memory::MemoryBudget,
) -> Result<u64, EngineError> {
    let mut merged = 0;
    let n_nodes = m.n_nodes;
    for (t, rt) in m.rel_types.iter_mut().enumerate() {
        let (Some(old), Some(open)) = (db.manifest().rel_types.get(t), db.rel_types().get(t))
        else {
            continue;
        };
        if old.name != rt.name {
            continue;
        }
        let footers: Vec<bool> = open
            .csr_footers()
            .map(|(o, i)| o.edge_ids.is_some() && i.edge_ids.is_some())
            .collect();
        let props_ok = |s: usize| match &rt.segments[s].props {
            None => rt.columns.is_empty(),
            Some(_) => db
                .rel_segment_prop_columns(t, s)
                .is_some_and(|n| n <= rt.columns.len()),
        };
        let held = rt
            .segments
            .iter()
            .zip(&old.segments)
            .take_while(|(a, b)| a == b)
            .count();
        let ok = |i: usize| footers.get(i) == Some(&true) && props_ok(i);
        if rt.segments.len() <= MERGE_SEGMENTS_MIN || held < 2 || !ok(held - 1) {
            continue;
        }
        let mut i = held - 1;
        let mut acc = rt.segments[i].n_edges;
        while i > 0 && ok(i - 1) && rt.segments[i - 1].n_edges <= 2 * acc {
            i -= 1;
            acc += rt.segments[i].n_edges;
        }
        if held - i < 2 {
            continue;
        }
        let Ok(_grant) =
            memory.try_grant(acc * MERGE_BYTES_PER_EDGE, "merging relationship segments")
        else {
            continue;
        };
        let mut ends = Vec::with_capacity(acc as usize);
        let mut dead = Bits::new(acc);
        for s in i..held {
            let (e, d) = db.rel_segment_ends(t, s)?;
            let base = ends.len() as u64;
            for k in 0..e.len() as u64 {
                if d.get(k) {
                    dead.set(base + k);
                }
            }
            ends.extend(e);
        }
        let tag = format!("rels-{t:04}-merged-{i:04}");
        let props = if rt.columns.is_empty() {
            None
        } else {
            let mut w =
                TableWriter::create(staging, &format!("{tag}-props.seg"), rt.columns.clone())?;
            for s in i..held {
                let Some(groups) = db.rel_segment_prop_chunks(t, s)? else {
                    return Err(EngineError::Refused(format!(
                        "relationship type {} segment {s} has no property file to merge",
                        rt.name
                    )));
                };
                for (n, mut chunks) in groups {
                    // Columns added after the segment was written: the type's patch
                    // files hold their chunks for every row group; null ones stand here.
                    for col in &rt.columns[chunks.len().min(rt.columns.len())..] {
                        let mut b = Vec::new();
                        ColumnBuilder::nulls(col.dtype, n as usize).encode(&mut b);
                        chunks.push(b);
                    }
                    w.copy_row_group(n, &chunks)?;
                }
            }
            Some(w.finish()?)
        };
        let seg = write_rel_segment(
            staging,
            &tag,
            n_nodes,
            &ends,
            (dead.count() > 0).then_some(&dead),
            props,
        )?;
        drop(ends);
        merged += (held - i) as u64;
        rt.segments.splice(i..held, [seg]);
    }
    Ok(merged)
}

/// A relationship segment over `ends` (edge ids: their positions) in files named after
/// `tag`: CSR both ways, the deletion bitmaps of `dead` (by edge id), `props` as given.
fn write_rel_segment(
    staging: &Staging,
    tag: &str,
    n_nodes: u64,
    ends: &[(u64, u64)],
    dead: Option<&Bits>,
    props: Option<SegmentMeta>,
) -> Result<RelSegmentMeta, EngineError> {
    let (out, inc, dead_at) = write_csr(staging, tag, n_nodes, ends, dead)?;
    let deleted = match dead_at {
        Some([o, i]) => Some(write_deleted(
            staging,
            &format!("{tag}-deleted.seg"),
            &[&o, &i],
        )?),
        None => None,
    };
    Ok(RelSegmentMeta::new(
        ends.len() as u64,
        out,
        inc,
        props,
        deleted,
    ))
}

/// Adds `seg` to relationship type `existing` (its position in the manifest), or as the
/// first segment of a new type `name` with `columns`.
fn add_rel_segment(
    m: &mut Manifest,
    existing: Option<usize>,
    name: &str,
    columns: Vec<PropertyMeta>,
    seg: RelSegmentMeta,
) {
    match existing {
        Some(i) => {
            m.rel_types[i].n_edges += seg.n_edges;
            m.rel_types[i].segments.push(seg);
        }
        None => m.rel_types.push(RelTypeMeta {
            name: name.to_string(),
            n_edges: seg.n_edges,
            columns,
            segments: vec![seg],
            start_space: None,
            end_space: None,
            patches: Vec::new(),
        }),
    }
}

/// A CSR segment per direction over relationships `ends` (edge ids: their positions),
/// in files named after `tag`; with `dead` (by edge id), the deletion bitmaps of both
/// directions (by entry position).
#[allow(clippy::type_complexity)]
fn write_csr(
    staging: &Staging,
    tag: &str,
    n_nodes: u64,
    ends: &[(u64, u64)],
    dead: Option<&Bits>,
) -> Result<(SegmentMeta, SegmentMeta, Option<[Bits; 2]>), EngineError> {
    let mut metas = Vec::new();
    let mut maps = Vec::new();
    for dir in [Direction::Out, Direction::In] {
        let mut entries: Vec<(u64, u64, u64)> = ends
            .iter()
            .enumerate()
            .map(|(i, &(src, dst))| match dir {
                Direction::Out => (src, dst, i as u64),
                Direction::In => (dst, src, i as u64),
            })
            .collect();
        entries.sort_unstable();
        if let Some(dead) = dead {
            let mut bits = Bits::new(entries.len() as u64);
            for (pos, e) in entries.iter().enumerate() {
                if dead.get(e.2) {
                    bits.set(pos as u64);
                }
            }
            maps.push(bits);
        }
        let mut degrees = vec![0u32; n_nodes as usize];
        for e in &entries {
            degrees[e.0 as usize] += 1;
        }
        let name = match dir {
            Direction::Out => format!("{tag}-out.seg"),
            Direction::In => format!("{tag}-in.seg"),
        };
        let mut w = CsrWriter::create(staging, &name, &degrees, entries.len() as u64, true)?;
        for (_, nb, eid) in entries {
            w.push(nb as u32, eid)?;
        }
        metas.push(w.finish()?);
    }
    let inc = metas.pop().expect("two directions");
    let out = metas.pop().expect("two directions");
    let dead = match (maps.pop(), maps.pop()) {
        (Some(i), Some(o)) => Some([o, i]),
        _ => None,
    };
    Ok((out, inc, dead))
}
