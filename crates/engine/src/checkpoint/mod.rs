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
use crate::bulk::{BulkRels, BulkTable};
use crate::columns::{choose_columns, dtype_of, push_value, value_at};
use crate::delta::{Delta, NodeRec, Op, RelRec};
use crate::error::{lock, EngineError};
use crate::segments;
use crate::store::{CommitState, Current, Store};
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

mod changes;
mod created;
mod rels;

use changes::*;
use created::*;
use rels::*;

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
    /// Node tables rewritten without their dead rows' data (or emptied).
    pub tables_compacted: u64,
    pub log_bytes_freed: u64,
    pub elapsed: Duration,
}

/// What a checkpoint takes in besides the delta: a bulk write's tables and
/// relationships, or a live append's parts.
#[derive(Default)]
pub(crate) struct Incoming {
    pub(crate) tables: Vec<BulkTable>,
    pub(crate) rels: Vec<BulkRels>,
    pub(crate) append: Option<Prebuilt>,
    /// `CHECKPOINT COMPACT`: every node table with a dead row is rewritten without
    /// their data, whatever its dead share.
    pub(crate) compact: bool,
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
        self.checkpoint_as(publisher, false)
    }

    /// A checkpoint that also rewrites every node table holding a dead row without
    /// their data (`CHECKPOINT COMPACT`), not only those past the dead share an
    /// ordinary checkpoint waits for (see `changes::REWRITE_DEAD_SHARE`).
    pub fn checkpoint_compacting(&self) -> Result<CheckpointReport, EngineError> {
        let publisher = self.publishing();
        self.checkpoint_as(&publisher, true)
    }

    fn checkpoint_as(
        &self,
        publisher: &MutexGuard<'_, ()>,
        compact: bool,
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
        let incoming = Incoming {
            compact,
            ..Incoming::default()
        };
        self.run_checkpoint(publisher, held, incoming, false, t0)
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
        // Created ids past the last live one that were all collected (none handed to an
        // open transaction, none rolled back) end the created range there: the table
        // holds no holes for them, and ids go on from its end.
        let trimmed = (incoming.tables.is_empty() && incoming.append.is_none())
            .then(|| self.trim_collected_ids(&cur.delta));
        if incoming.rels.is_empty() && incoming.append.is_none() {
            self.trim_collected_edges(&cur.delta);
        }
        // Collected ids below the tables' end are never handed out again (one a
        // creation took just now is a hole of the table, as an open transaction's is).
        self.clear_free_ids();
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
            trimmed.map_or(delta.next_node, |t| t.min(delta.next_node))
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
            let mut next = lock(&self.next_edge);
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
            compact,
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
        let min_share = if compact {
            0.0
        } else {
            changes::REWRITE_DEAD_SHARE
        };
        report.entities_deleted = fold_deletions(
            db,
            &staging,
            &mut m,
            &node_dels,
            &rel_dels,
            delta,
            &mut carried,
            min_share,
            &mut report.tables_compacted,
        )?;
        // The tables this checkpoint marked no deletion in: rewritten too when asked.
        if compact {
            for t in 0..db.node_tables().len().min(m.node_tables.len()) {
                let Some(old) = db.manifest().node_tables.get(t) else {
                    continue;
                };
                if m.node_tables[t].deleted != old.deleted {
                    continue; // (fold_deletions had it)
                }
                if let Some(bits) = db.node_tables()[t].deleted.as_ref() {
                    if changes::compact_table(db, &staging, &mut m, t, bits, 0.0)? {
                        report.tables_compacted += 1;
                    }
                }
            }
        }
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

    /// Runs a checkpoint on a thread of its own and returns at once; nothing happens
    /// when one is running already. A failure is reported on stderr and leaves the
    /// delta to the next one.
    pub fn checkpoint_in_background(self: &Arc<Store>) {
        if self.checkpointing.swap(true, Ordering::SeqCst) {
            return;
        }
        let st = self.clone();
        let spawned = std::thread::Builder::new()
            .name("quiver-checkpoint".into())
            .spawn(move || {
                if let Err(e) = st.checkpoint() {
                    eprintln!("quiver: automatic checkpoint failed (retried later): {e}");
                }
                st.checkpointing.store(false, Ordering::SeqCst);
            });
        if spawned.is_err() {
            self.checkpointing.store(false, Ordering::SeqCst);
        }
    }

    /// Checkpoints when the log or the delta has grown past its threshold (on a thread
    /// of its own when the options say so). A refusal (analytical mode with another
    /// writer) or a failure defers it to a later commit.
    /// `delta_max` lowers the delta's threshold (a batched statement's, see
    /// [`BATCH_CHECKPOINT_DELTA_BYTES`]).
    pub fn checkpoint_if_due(self: &Arc<Store>, delta_max: u64) {
        let delta = self.snapshot().delta.weight();
        if self.log_bytes() < self.opts.checkpoint_log_bytes
            && delta < self.opts.checkpoint_delta_bytes.min(delta_max)
        {
            return;
        }
        if self.opts.background_checkpoints {
            self.checkpoint_in_background();
        } else {
            let _ = self.checkpoint();
        }
    }

    /// Waits for a background checkpoint to finish, if one runs.
    pub fn wait_for_checkpoint(&self) {
        while self.checkpointing.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Publishes an append staged against `base` (the generation current since the
    /// caller took [`Store::publishing`]): a checkpoint that takes the delta and the
    /// append's parts into a new generation. Under the commit lock throughout, as a
    /// direct write of relationships is: a node the append connects that a transaction
    /// deleted since `base` fails the append (a conflict; nothing is published), and a
    /// transaction still open that deletes one fails at its commit.
    pub fn publish_append(
        &self,
        publisher: &MutexGuard<'_, ()>,
        base: &Database,
        appended: &Database,
        prebuilt: Prebuilt,
    ) -> Result<CheckpointReport, EngineError> {
        let t0 = Instant::now();
        let c = self.commit_lock();
        let head = self.snapshot();
        if head.db.manifest().generation != base.manifest().generation {
            return Err(EngineError::Refused(
                "the database moved to a new generation while the append ran; append again".into(),
            ));
        }
        if head.db.manifest().id_spaces.len() != base.manifest().id_spaces.len() {
            return Err(EngineError::Refused(
                "the database's id spaces changed while the append ran; append again".into(),
            ));
        }
        // Nodes of the base that transactions deleted since: the append must not have
        // connected any of them.
        if !prebuilt.rel_types.is_empty() {
            for (&n, r) in head.delta.nodes.range(..base.n_nodes()) {
                if !r.deleted || base.node_deleted(n) {
                    continue;
                }
                for rt in &prebuilt.rel_types {
                    let Some(a) = appended.rel_type_index(&rt.name) else {
                        continue;
                    };
                    let b = base.rel_type_index(&rt.name);
                    for dir in [Direction::Out, Direction::In] {
                        let now = appended.degree(a, n as u32, dir)?;
                        let before = match b {
                            Some(b) => base.degree(b, n as u32, dir)?,
                            None => 0,
                        };
                        if now > before {
                            return Err(EngineError::Conflict(format!(
                                "node {n} was deleted by another transaction while the append added relationships to it; append again"
                            )));
                        }
                    }
                }
            }
        }
        self.run_checkpoint(
            publisher,
            Some(c),
            crate::checkpoint::Incoming {
                append: Some(prebuilt),
                ..Default::default()
            },
            true,
            t0,
        )
    }
}
