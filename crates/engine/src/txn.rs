//! A transaction: its snapshot, its working delta and the ops it logs, the locks it
//! holds on what it writes, a memory grant for its uncommitted writes, the direct path
//! of a large write ([`crate::bulk`]), and its commit: replayed onto the newest state
//! under the commit lock, written to the log, durable when [`Unsynced`] is (group
//! commit, [`crate::store`]).

use crate::delta::{Delta, Entity, KeyVal, Op, Props, UNCOMMITTED};
use crate::error::{lock, EngineError};
use crate::store::Lead;
use crate::store::{Counters, Snapshot, StorageMode, Store};
use crate::value::{RelRef, Value};
use crate::view::View;
use quiver_common::memory::Grant;
use quiver_storage::Database;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;

/// How long a direct write's commit waits for other writers to finish.
pub const BULK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Between two batches of `CALL { } IN TRANSACTIONS`, a delta past this many bytes is
/// checkpointed (the database-wide threshold is higher: 512 MiB by default). A batched
/// load through the delta then holds about this much: 1M rows of five properties in
/// 1,000-row batches peaked at 877 MiB with the database-wide threshold alone, at 209
/// MiB with this one (in 9-15 s either way on this noisy machine).
pub const BATCH_CHECKPOINT_DELTA_BYTES: u64 = 64 << 20;

/// A transaction: its snapshot, its working copy of the delta (what it reads, its own
/// writes included), and the ops it will log. Dropping it rolls it back.
pub struct Txn {
    store: Arc<Store>,
    pub id: u64,
    pub snap: Snapshot,
    pub work: Delta,
    /// The ops written, encoded as the log record they become.
    ops: crate::wal::OpLog,
    /// The entities this transaction holds locks on (each once: a lock is taken once).
    locked: Vec<Entity>,
    /// The generation and writability checks passed (for lock-free creations).
    checked: bool,
    pub counters: Counters,
    /// The counters at the last `commit_continue` (what a `rollback_continue` returns to).
    mark: Counters,
    /// Holds the analytical writer token.
    writer: bool,
    /// Counted in the store's writers.
    registered: bool,
    /// Nodes of the statement's direct path (seed 004), if it takes it.
    bulk: Option<crate::bulk::Bulk>,
    /// The statement commits in batches (see [`Txn::batched`]).
    batched: bool,
    /// The uncommitted writes' bytes (the working copy past the snapshot), against the
    /// database's memory limit.
    mem: Option<Grant>,
    done: bool,
}

fn check_value(key: &str, v: &Value) -> Result<(), EngineError> {
    let ok = match v {
        Value::Map(_) | Value::Node(_) | Value::Rel(_) | Value::Path(_) => false,
        Value::List(l) => l.iter().all(|x| {
            !matches!(
                x,
                Value::Map(_) | Value::Node(_) | Value::Rel(_) | Value::Path(_) | Value::List(_)
            )
        }),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(EngineError::PropertyType(format!(
            "property '{key}': a property value is a boolean, number, string, temporal or a list of those, not a {}",
            v.type_name().to_lowercase()
        )))
    }
}

impl Txn {
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Whether the transaction has written anything (an op logged, a bulk write begun).
    pub fn has_written(&self) -> bool {
        !self.ops.is_empty() || self.bulk.is_some() || !self.counters.is_empty()
    }

    /// The database this transaction reads: its snapshot's segments and its own delta.
    pub fn view(&self) -> View<'_> {
        View::new(&self.snap.db, &self.work)
    }

    fn analytical(&self) -> bool {
        self.store.mode() == StorageMode::InMemoryAnalytical
    }

    /// Takes the write right on `e`: a conflict if another open transaction holds it or
    /// a commit changed `e` after this transaction's snapshot.
    fn claim(&mut self, e: Entity) -> Result<(), EngineError> {
        if self.take_writer() {
            return Ok(());
        }
        self.register();
        self.check_writable()?;
        {
            // One probe of the lock table: held by this transaction already (done), by
            // another (a conflict), or free (taken).
            let mut locks = lock(&self.store.locks);
            match locks.entry(e) {
                hashbrown::hash_map::Entry::Occupied(o) if *o.get() == self.id => return Ok(()),
                hashbrown::hash_map::Entry::Occupied(_) => {
                    return Err(EngineError::Conflict(format!(
                        "{} is being changed by another open transaction",
                        describe(e)
                    )))
                }
                hashbrown::hash_map::Entry::Vacant(v) => {
                    v.insert(self.id);
                }
            }
        }
        self.locked.push(e);
        let head = self.store.current.load();
        if head.version(e, self.snap.ts) > self.snap.ts {
            return Err(EngineError::Conflict(format!(
                "{} was changed by a transaction that committed after this one started",
                describe(e)
            )));
        }
        Ok(())
    }

    /// In analytical mode, waits for the one writer's token (once) and says so: the
    /// write then needs no lock, as there is no isolation.
    fn take_writer(&mut self) -> bool {
        if !self.analytical() {
            return false;
        }
        if !self.writer {
            self.register();
            let w = &self.store.analytical_writer;
            while w
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            self.writer = true;
            // Analytical mode has no isolation: write on the newest state.
            let snap = self.store.snapshot();
            self.work = (*snap.delta).clone();
            self.snap = snap;
        }
        true
    }

    /// The write right on a key of a uniqueness constraint (`label`, `prop`, value): two
    /// open transactions writing one key conflict, so a check against the newest
    /// committed state after taking it cannot race another writer.
    pub fn claim_key(&mut self, label: &str, prop: &str, key: &KeyVal) -> Result<(), EngineError> {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = foldhash::fast::FixedState::with_seed(0x5157).build_hasher();
        (label, prop, key).hash(&mut h);
        self.claim(Entity::Rel(u32::MAX, h.finish()))
    }

    /// The write right for an entity this transaction creates: no one else can see it
    /// before the commit, so it takes no lock; only the checks of [`Txn::claim`].
    fn claim_new(&mut self) -> Result<(), EngineError> {
        if self.take_writer() {
            return Ok(());
        }
        if !self.checked {
            self.register();
            self.check_writable()?;
            self.checked = true;
        }
        Ok(())
    }

    /// Counts this transaction among the writers (before its first write is checked
    /// against the generation, so a checkpoint either sees it or makes it fail).
    fn register(&mut self) {
        if !self.registered {
            self.store.writers.fetch_add(1, Ordering::SeqCst);
            self.registered = true;
        }
    }

    fn unregister(&mut self) {
        if self.registered {
            self.store.writers.fetch_sub(1, Ordering::SeqCst);
            self.registered = false;
        }
    }

    /// The transaction's bulk write, begun on first use.
    fn bulk(&mut self) -> &mut crate::bulk::Bulk {
        let (id, memory, batched) = (self.id, &self.store.memory, self.batched);
        let dir = &self.store.dir;
        self.bulk.get_or_insert_with(|| {
            let mut b = crate::bulk::Bulk::new(dir.join(crate::bulk::BULK_DIR), id, memory);
            if batched {
                b.batched();
            }
            b
        })
    }

    /// The statement commits in batches (`CALL { } IN TRANSACTIONS`): each batch decides
    /// on its own rows whether it takes the direct path.
    pub fn batched(&mut self) {
        self.batched = true;
        if let Some(b) = self.bulk.as_mut() {
            b.batched();
        }
    }

    /// Registers a node shape (labels and property keys) for the direct path; see
    /// [`crate::bulk`].
    pub fn bulk_shape(&mut self, labels: &[Arc<str>], keys: &[Arc<str>]) -> usize {
        self.bulk().shape(labels, keys)
    }

    /// Registers a relationship shape (type and property keys) for the direct path.
    pub fn bulk_rel_shape(&mut self, ty: &Arc<str>, keys: &[Arc<str>]) -> usize {
        self.bulk().rel_shape(ty, keys)
    }

    /// Checks a bulk row's `values` against `key(k)` and counts the non-null ones.
    fn bulk_values<'k>(
        values: &[Value],
        key: impl Fn(usize) -> &'k str,
    ) -> Result<u64, EngineError> {
        let mut set = 0;
        for (k, v) in values.iter().enumerate() {
            if !v.is_null() {
                check_value(key(k), v)?;
                set += 1;
            }
        }
        Ok(set)
    }

    /// Creates a node of shape `shape` through the direct path (`values` in the shape's
    /// key order; null for an absent property). Its id is given at commit, so nothing in
    /// the statement may refer to it.
    pub fn bulk_node(&mut self, shape: usize, values: &[Value]) -> Result<(), EngineError> {
        self.claim_new()?;
        let b = self.bulk();
        let set = Self::bulk_values(values, |k| b.key(shape, k))?;
        let labels = b.labels(shape).len() as u64;
        self.counters.nodes_created += 1;
        self.counters.labels_added += labels;
        self.counters.properties_set += set;
        self.bulk().push(shape, values)
    }

    /// Creates `n` nodes of shape `shape` through the direct path, given column by
    /// column (see [`crate::bulk::Bulk::push_chunk`]). Values in `Values` chunks are
    /// checked as [`Txn::bulk_node`] checks them; typed ones are of storable types.
    pub fn bulk_nodes(
        &mut self,
        shape: usize,
        n: usize,
        cols: Vec<crate::bulk::Chunk>,
    ) -> Result<(), EngineError> {
        self.claim_new()?;
        let b = self.bulk();
        let mut set = 0;
        for (k, c) in cols.iter().enumerate() {
            if let crate::bulk::Chunk::Values(vs) = c {
                for v in vs.iter().filter(|v| !v.is_null()) {
                    check_value(b.key(shape, k), v)?;
                }
            }
            set += c.non_null();
        }
        let labels = b.labels(shape).len() as u64;
        self.counters.nodes_created += n as u64;
        self.counters.labels_added += labels * n as u64;
        self.counters.properties_set += set;
        self.bulk().push_chunk(shape, n, cols)
    }

    /// Creates a relationship of shape `shape` from `src` to `dst` through the direct
    /// path (`values` in the shape's key order). Its id is given at commit, so nothing
    /// in the statement may refer to it; its ends are checked again at commit against
    /// deletions committed meanwhile.
    pub fn bulk_rel(
        &mut self,
        shape: usize,
        src: u64,
        dst: u64,
        values: &[Value],
    ) -> Result<(), EngineError> {
        self.live_ends(src, dst)?;
        self.claim_new()?;
        let b = self.bulk();
        let set = Self::bulk_values(values, |k| b.rel_key(shape, k))?;
        self.counters.relationships_created += 1;
        self.counters.properties_set += set;
        self.bulk().push_rel(shape, src, dst, values)
    }

    fn check_writable(&self) -> Result<(), EngineError> {
        // (A checkpoint since the snapshot is no obstacle: the commit replays this
        // transaction's ops onto the newest generation, whose ids are the same.)
        if !self.store.is_writable() {
            return Err(EngineError::ReadOnly(format!(
                "{} is open for writing by another process (or read-only here); this one can only read",
                self.store.dir.display()
            )));
        }
        Ok(())
    }

    fn push(&mut self, op: Op) -> Result<(), EngineError> {
        if self.writer {
            // Analytical: no versions, no log.
            self.work.apply(&self.snap.db, &op, 0)?;
        } else {
            // What this transaction creates nobody older can reach, so it needs no version
            // (0); what it changes is stamped at commit.
            let ts = match op {
                Op::CreateNode { .. } | Op::CreateRel { .. } => 0,
                _ => UNCOMMITTED,
            };
            self.work.apply(&self.snap.db, &op, ts)?;
            self.ops.push(&op);
            self.account()?;
            if !self.ops.fits() {
                return Err(EngineError::Refused(
                    "the transaction's log record passed 2 GiB; commit in batches (CALL { } IN TRANSACTIONS)".into(),
                ));
            }
        }
        Ok(())
    }

    /// Grows the transaction's memory grant to what its writes hold (working copy plus
    /// log record), in steps of 1 MiB or an eighth, so that the shared budget is not
    /// touched per write. Fails cleanly past the database's memory limit.
    fn account(&mut self) -> Result<(), EngineError> {
        let need = self.work.bytes.saturating_sub(self.snap.delta.bytes) + self.ops.bytes();
        let g = self
            .mem
            .get_or_insert_with(|| self.store.memory.empty_grant("a transaction's writes"));
        if need <= g.bytes() {
            return Ok(());
        }
        let step = (need / 8).max(1 << 20);
        let have = g.bytes();
        if g.try_resize(need + step).is_err() {
            g.try_resize(need).map_err(|e| {
                EngineError::Memory(format!(
                    "the database's memory limit ({}) cannot hold this transaction's writes ({}; {} in use elsewhere): commit in smaller batches (CALL {{ }} IN TRANSACTIONS), CHECKPOINT, or raise --memory-limit",
                    human(e.limit_bytes),
                    human(need),
                    human((e.limit_bytes - e.available_bytes).saturating_sub(have))
                ))
            })?;
        }
        Ok(())
    }

    pub fn create_node(&mut self, labels: Vec<Arc<str>>, props: Props) -> Result<u64, EngineError> {
        for (k, v) in &props {
            check_value(k, v)?;
        }
        self.counters.nodes_created += 1;
        self.counters.labels_added += labels.len() as u64;
        self.counters.properties_set += props.len() as u64;
        self.create_checked(labels, props)
    }

    /// Creates a node whose values are checked and counted already.
    fn create_checked(&mut self, labels: Vec<Arc<str>>, props: Props) -> Result<u64, EngineError> {
        let id = self.store.alloc_node();
        self.claim_new()?;
        self.push(Op::CreateNode { id, labels, props })?;
        Ok(id)
    }

    /// Both ends of a relationship to be created exist.
    fn live_ends(&self, src: u64, dst: u64) -> Result<(), EngineError> {
        match [src, dst].into_iter().find(|&n| !self.work.node_exists(n)) {
            Some(n) => Err(EngineError::Constraint(format!(
                "cannot create a relationship to node {n}: it has been deleted"
            ))),
            None => Ok(()),
        }
    }

    fn live_node(&self, id: u64) -> Result<(), EngineError> {
        if self.work.node_exists(id) {
            Ok(())
        } else {
            Err(EngineError::Constraint(format!(
                "node {id} has been deleted in this transaction"
            )))
        }
    }

    pub fn set_node_prop(
        &mut self,
        id: u64,
        key: &Arc<str>,
        value: Value,
    ) -> Result<(), EngineError> {
        check_value(key, &value)?;
        if !self.work.node_exists(id) {
            return Ok(()); // setting on a deleted node is a no-op, as in Neo4j
        }
        let current = self.work.node_value(&self.snap.db, id, key)?;
        if value.is_null() && current.is_null() {
            return Ok(()); // removing what is not there changes and counts nothing
        }
        self.claim(Entity::Node(id))?;
        self.counters.properties_set += 1;
        // (Claimed: another transaction's change since this snapshot would have been a
        // conflict, so `current` is the value.) Setting the value it has is counted, as
        // Neo4j does, but writes nothing: a transaction of such sets commits with no
        // log record.
        if current == value {
            return Ok(());
        }
        self.push(Op::SetNodeProp {
            id,
            key: key.clone(),
            value,
        })
    }

    /// Adds (`add`) or removes a label; a no-op when already so.
    pub fn set_label(&mut self, id: u64, label: &Arc<str>, add: bool) -> Result<(), EngineError> {
        self.live_node(id)?;
        let has = self.view().node_labels(id)?.contains(label);
        if has == add {
            return Ok(());
        }
        self.claim(Entity::Node(id))?;
        let label = label.clone();
        let op = if add {
            self.counters.labels_added += 1;
            Op::AddLabel { id, label }
        } else {
            self.counters.labels_removed += 1;
            Op::RemoveLabel { id, label }
        };
        self.push(op)
    }

    /// Deletes a node; with `detach` its relationships too, otherwise it must have none.
    ///
    /// Its created relationships are deleted one by one; its segment ones die with it
    /// (see [`View`]: a segment relationship with a deleted end is deleted), so a
    /// `DETACH DELETE` costs one record a node, whatever its degree. They are counted.
    pub fn delete_node(&mut self, id: u64, detach: bool) -> Result<(), EngineError> {
        if !self.work.node_exists(id) {
            return Ok(()); // deleted already (twice in one statement is fine)
        }
        let mut created = Vec::new();
        let mut seg = 0u64;
        self.view()
            .node_rels_parts(id, |r, c| if c { created.push(r) } else { seg += 1 })?;
        if seg + created.len() as u64 > 0 {
            if !detach {
                return Err(EngineError::ConnectedNode {
                    node: id,
                    rels: seg + created.len() as u64,
                });
            }
            for r in created {
                self.delete_rel(&r)?;
            }
        }
        self.claim(Entity::Node(id))?;
        self.counters.nodes_deleted += 1;
        self.counters.relationships_deleted += seg;
        self.push(Op::DeleteNode { id })
    }

    pub fn create_rel(
        &mut self,
        ty: &Arc<str>,
        src: u64,
        dst: u64,
        props: Props,
    ) -> Result<RelRef, EngineError> {
        for (k, v) in &props {
            check_value(k, v)?;
        }
        self.counters.relationships_created += 1;
        self.counters.properties_set += props.len() as u64;
        self.create_rel_checked(ty, src, dst, props)
    }

    /// Creates a relationship whose values are checked and counted already.
    fn create_rel_checked(
        &mut self,
        ty: &Arc<str>,
        src: u64,
        dst: u64,
        props: Props,
    ) -> Result<RelRef, EngineError> {
        self.live_ends(src, dst)?;
        // Locking both ends keeps a concurrent DETACH DELETE from leaving this
        // relationship dangling.
        self.claim(Entity::Node(src))?;
        self.claim(Entity::Node(dst))?;
        let t = self.work.intern_type(ty);
        let base = self.work.base_edges[t as usize];
        let eid = self.store.alloc_edge(ty, base);
        self.claim_new()?;
        self.push(Op::CreateRel {
            ty: ty.clone(),
            eid,
            src,
            dst,
            props,
        })?;
        Ok(RelRef {
            ty: t,
            src: src as u32,
            dst: dst as u32,
            eid,
        })
    }

    /// Claims relationship `r` for a write and gives its type's name; `None` when this
    /// transaction has deleted it.
    fn claim_rel(&mut self, r: &RelRef) -> Result<Option<Arc<str>>, EngineError> {
        if self.work.rel_at(r.ty, r.eid, r.src as u64, r.dst as u64) == Some(None) {
            return Ok(None);
        }
        self.claim(Entity::Rel(r.ty, r.eid))?;
        Ok(Some(self.work.types[r.ty as usize].clone()))
    }

    pub fn delete_rel(&mut self, r: &RelRef) -> Result<(), EngineError> {
        let Some(ty) = self.claim_rel(r)? else {
            return Ok(()); // deleted already
        };
        self.counters.relationships_deleted += 1;
        self.push(Op::DeleteRel {
            ty,
            eid: r.eid,
            src: r.src as u64,
            dst: r.dst as u64,
        })
    }

    pub fn set_rel_prop(
        &mut self,
        r: &RelRef,
        key: &Arc<str>,
        value: Value,
    ) -> Result<(), EngineError> {
        check_value(key, &value)?;
        let Some(ty) = self.claim_rel(r)? else {
            return Ok(()); // setting on a deleted relationship is a no-op
        };
        let ends = (r.src as u64, r.dst as u64);
        let current = self.work.rel_value(&self.snap.db, &ty, r.eid, ends, key)?;
        if value.is_null() && current.is_null() {
            return Ok(());
        }
        self.counters.properties_set += 1;
        // (The value it has already: counted, nothing written; see `set_node_prop`.)
        if current == value {
            return Ok(());
        }
        self.push(Op::SetRelProp {
            ty,
            eid: r.eid,
            src: r.src as u64,
            dst: r.dst as u64,
            key: key.clone(),
            value,
        })
    }

    /// Makes the transaction's writes durable and visible; returns the commit timestamp
    /// (the snapshot's for a read-only transaction).
    pub fn commit(mut self) -> Result<u64, EngineError> {
        let r = self.commit_inner();
        self.finish();
        r
    }

    /// [`Txn::commit`] that returns once the commit is in the log, before its sync: the
    /// caller awaits [`Unsynced::poll_synced`] (or [`Unsynced::wait`]) before it tells
    /// anyone the commit happened. Until then its writes are visible to no one and its
    /// locks are held.
    pub fn commit_unsynced(mut self) -> Result<Unsynced, EngineError> {
        match self.commit_written() {
            Ok(ts) => Ok(Unsynced { txn: self, ts }),
            Err(e) => {
                self.finish();
                Err(e)
            }
        }
    }

    fn commit_inner(&mut self) -> Result<u64, EngineError> {
        let ts = self.commit_written()?;
        self.store.wait_synced(ts)?;
        Ok(ts)
    }

    /// Writes the commit's record to the log and makes it the head to be published by
    /// its sync (which the caller waits for); a commit that needs no sync is published.
    fn commit_written(&mut self) -> Result<u64, EngineError> {
        let store = self.store.clone();
        if let Some(b) = self.bulk.as_mut() {
            if b.direct && b.batch_rows() > 0 {
                return self.commit_bulk();
            }
            // Below the threshold: ordinary creations through the delta (`bulk_node`
            // checked and counted them).
            let rels = b.take_rel_rows();
            for (labels, props) in b.take_rows() {
                self.create_checked(labels, props)?;
            }
            for (ty, src, dst, props) in rels {
                self.create_rel_checked(&ty, src, dst, props)?;
            }
        }
        if self.writer {
            // Analytical: the working copy is the newest state (one writer at a time).
            let mut c = lock(&store.commit);
            let cur = store.current.load();
            c.clock += 1;
            // Its records carry timestamp 0: analytical mode keeps no versions.
            let mut work = std::mem::replace(&mut self.work, (*cur.delta).clone());
            store.collect_into(&c, &mut work, u64::MAX - 1, usize::MAX);
            store.replace_current(cur.with_delta(Arc::new(work), c.clock));
            store.unlogged.store(true, Ordering::SeqCst);
            return Ok(c.clock);
        }
        if self.ops.is_empty() {
            return Ok(self.snap.ts);
        }
        let ts = {
            let mut c = lock(&store.commit);
            if let Some(why) = &c.failed {
                return Err(EngineError::Refused(format!(
                    "the write-ahead log could not be synced earlier ({why}); reopen the database"
                )));
            }
            let ts = c.clock + 1;
            let cur = c.head.clone().unwrap_or_else(|| store.current.load_full());
            // A checkpoint that began while this transaction was open wrote the ids
            // below its floor into its segments. A node created there commits anyway:
            // its id is a deleted row of the checkpoint's table, and its record in the
            // delta brings it back (no one else was handed that id). So does a
            // relationship's record: its id is a deleted CSR entry at (0, 0), a hole
            // no one else has, and the record (its ends, its properties) stands for
            // it. Only an id that a bulk write's relationship took (a live entry) is a
            // conflict. Every other op keeps its ids across a checkpoint and replays
            // onto the new generation.
            let floor = match &c.floor {
                Some(f) if self.id < f.first_tx => Some(Some(&f.edges)),
                _ if !Arc::ptr_eq(&cur.db, &self.snap.db) => Some(None),
                _ => None,
            };
            // The ops, decoded once for the floor check and the replay below.
            let mut decoded: Option<Vec<Op>> = None;
            if let Some(edges) = floor {
                let edge_floor = |ty: &str| match edges {
                    Some(m) => m.get(ty).copied().unwrap_or(0),
                    None => cur
                        .delta
                        .types
                        .iter()
                        .position(|t| **t == *ty)
                        .map_or(0, |t| cur.delta.base_edges[t]),
                };
                for op in decoded.get_or_insert_with(|| self.ops.ops()).iter() {
                    let Op::CreateRel { ty, eid, .. } = op else {
                        continue;
                    };
                    if *eid >= edge_floor(ty) {
                        continue;
                    }
                    // A running checkpoint writes no bulk relationships (a write of
                    // those holds the commit lock throughout): below its floor is a hole.
                    let hole = edges.is_some() || edge_is_hole(&cur.db, ty, *eid)?;
                    if !hole {
                        return Err(EngineError::Conflict(
                            "a bulk write of relationships took the ids of relationships this transaction created; retry the transaction".into(),
                        ));
                    }
                }
            }
            let mut d = if cur.ts == self.snap.ts && Arc::ptr_eq(&cur.db, &self.snap.db) {
                // Nothing committed since this snapshot: the working copy is the new head
                // once what it changed carries this commit's timestamp.
                let mut d = std::mem::replace(&mut self.work, (*cur.delta).clone());
                // In key order: consecutive records share their path down the B-tree
                // (the lock set's hash order sent each to a cold one).
                self.locked.sort_unstable();
                for &e in &self.locked {
                    d.restamp(e, UNCOMMITTED, ts);
                }
                d.stamp_graves(ts);
                d
            } else {
                let mut d = (*cur.delta).clone();
                let ops = decoded.take().unwrap_or_else(|| self.ops.ops());
                for op in &ops {
                    d.apply(&cur.db, op, ts)?;
                }
                // A node this transaction deleted must have no relationship left: a
                // direct write of relationships takes no lock on its ends, so one may
                // have committed edges to it since this transaction's snapshot (those
                // it saw, it deleted). Retrying sees them and deletes them too.
                // The node's segment relationships it saw died with it; any other
                // (segment or created) that is not deleted is new.
                let view = View::new(&cur.db, &d);
                let seen = View::new(&self.snap.db, &self.snap.delta);
                for op in &ops {
                    if let Op::DeleteNode { id } = op {
                        let mut now = Vec::new();
                        view.node_rels_parts(*id, |r, _| now.push((r.ty, r.eid)))?;
                        if now.is_empty() {
                            continue;
                        }
                        let mut before = hashbrown::HashSet::new();
                        seen.node_rels_parts(*id, |r, _| {
                            before.insert((r.ty, r.eid));
                        })?;
                        if now.iter().any(|e| !before.contains(e)) {
                            return Err(EngineError::Conflict(format!(
                                "node {id} gained relationships from another transaction after this one began deleting it; retry the transaction"
                            )));
                        }
                    }
                }
                d
            };
            // Tombstones every open snapshot sees past go, a bounded number a commit,
            // and their ids to later creations.
            let max = crate::store::COLLECT_PER_COMMIT.max(2 * self.ops.len());
            store.collect_into(&c, &mut d, store.collect_horizon(self.id), max);
            {
                // The head grows by this commit: within the memory limit or not at all.
                // (The transaction's own grant is returned first: the same bytes.)
                self.mem = None;
                let mut g = lock(&store.delta_grant);
                if d.bytes > g.bytes() {
                    g.try_resize(d.bytes).map_err(|e| {
                        EngineError::Memory(format!(
                            "the database's memory limit ({}) cannot hold this commit's changes ({} more; {} in use): CHECKPOINT to move the delta into segments, or raise --memory-limit",
                            human(e.limit_bytes),
                            human(d.bytes - g.bytes()),
                            human(e.limit_bytes - e.available_bytes)
                        ))
                    })?;
                }
            }
            let next = Arc::new(cur.with_delta(Arc::new(d), ts));
            c.clock = ts;
            match c.wal.as_mut() {
                Some(w) => {
                    if let Err(e) = w.write_record(self.ops.finish(ts)) {
                        c.clock = ts - 1;
                        return Err(e.into());
                    }
                    c.head = Some(next);
                }
                None => store.current.store(next),
            }
            ts
        };
        self.ops.clear();
        Ok(ts)
    }

    /// Commits a direct write (seed 004): its tables, and the delta with them, become a
    /// new generation, beside open transactions and other bulk writes (one publishes at
    /// a time). In analytical mode, created relationships wait up to [`BULK_WAIT`] for
    /// other writers to finish.
    fn commit_bulk(&mut self) -> Result<u64, EngineError> {
        let t0 = std::time::Instant::now();
        let store = self.store.clone();
        // Writes of other kinds in the same transaction commit first (through the log;
        // in analytical mode, the working copy becomes the head the checkpoint writes).
        if self.writer || !self.ops.is_empty() {
            let bulk = self.bulk.take();
            let r = self.commit_inner();
            self.bulk = bulk;
            r?;
        }
        let tables = self.bulk.as_mut().expect("a bulk write").take_tables()?;
        let rels = self.bulk.as_mut().expect("a bulk write").take_rel_tables();
        let remove = |tables: &[crate::bulk::BulkTable]| {
            for t in tables {
                let _ = std::fs::remove_file(&t.path);
            }
        };
        let unlogged = store.mode() == StorageMode::InMemoryAnalytical
            || store.unlogged.load(Ordering::SeqCst);
        if rels.is_empty() && !unlogged {
            // Nodes only: a checkpoint beside whatever else is open (their ids are
            // reserved past every id handed out so far).
            let publisher = store.publishing();
            return match store.run_checkpoint(
                &publisher,
                None,
                crate::checkpoint::Incoming {
                    tables,
                    ..Default::default()
                },
                true,
                t0,
            ) {
                Ok(_) => Ok(store.snapshot().ts),
                Err(e) => Err(e),
            };
        }
        // Relationships between existing nodes: their ends are checked under the commit
        // lock against deletions committed meanwhile, and a transaction still open that
        // deletes an end fails at its commit (`commit_inner`'s replay finds the new
        // edges), so other writers need not finish first. Writes the log does not hold
        // (analytical mode) need the database to themselves.
        loop {
            let publisher = store.publishing();
            let c = lock(&store.commit);
            if !unlogged || !store.has_uncommitted_writers(self.registered) {
                // Relationships were not locked at their ends: one whose end another
                // transaction deleted since this one began cannot be written.
                let head = store.snapshot();
                if head.ts != self.snap.ts {
                    let live = |n: u64| {
                        head.delta.node_exists(n)
                            && (n >= head.delta.base_nodes || !head.db.node_deleted(n))
                    };
                    let gone = rels
                        .iter()
                        .flat_map(|r| r.ends.iter())
                        .flat_map(|&(a, z)| [a, z])
                        .find(|&n| !live(n));
                    if let Some(n) = gone {
                        drop(c);
                        remove(&tables);
                        return Err(EngineError::Conflict(format!(
                            "node {n} was deleted by another transaction while this one created relationships to it"
                        )));
                    }
                }
                return match store.run_checkpoint(
                    &publisher,
                    Some(c),
                    crate::checkpoint::Incoming {
                        tables,
                        rels,
                        append: None,
                        compact: false,
                    },
                    true,
                    t0,
                ) {
                    Ok(_) => Ok(store.snapshot().ts),
                    Err(e) => Err(e),
                };
            }
            drop(c);
            drop(publisher);
            if t0.elapsed() > BULK_WAIT {
                remove(&tables);
                return Err(EngineError::Conflict(format!(
                    "a bulk write of relationships ({} of them) commits as a checkpoint, and other transactions kept uncommitted writes open for {} s",
                    rels.iter().map(|r| r.ends.len()).sum::<usize>(),
                    BULK_WAIT.as_secs()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Discards the transaction's writes.
    pub fn rollback(mut self) {
        self.finish();
    }

    /// Commits what is written so far and goes on as a new transaction on the newest
    /// snapshot (`CALL { } IN TRANSACTIONS`: a batch at a time), after a checkpoint when
    /// the log or the delta passed its threshold, so a batched load of any size keeps
    /// both bounded. The newest snapshot may be of a newer generation than the one the
    /// statement planned on (this checkpoint, or one another session published): the
    /// caller compares `snap.db`'s generation and re-plans what reads the graph.
    pub fn commit_continue(&mut self) -> Result<u64, EngineError> {
        let ts = self.commit_inner()?;
        self.checked = false;
        self.mark = self.counters;
        self.release_locks();
        if let Some(b) = self.bulk.as_mut() {
            b.next_batch();
        }
        if !self.writer {
            // Nothing of this transaction is uncommitted now: the checkpoint need not
            // wait for it, nor keep versions for its snapshot.
            self.unregister();
            lock(&self.store.active).remove(&self.id);
            self.store
                .clone()
                .checkpoint_if_due(BATCH_CHECKPOINT_DELTA_BYTES);
        }
        self.renew();
        Ok(ts)
    }

    /// The writes of the batch not committed yet, as log ops (`CALL { } IN
    /// TRANSACTIONS` replays them onto the generation the statement began on, for what
    /// reads it after a checkpoint moved the transaction past it).
    pub fn batch_ops(&mut self) -> Vec<Op> {
        self.ops.ops()
    }

    /// Discards what is written since the last commit and goes on on the newest snapshot.
    pub fn rollback_continue(&mut self) -> Result<(), EngineError> {
        self.ops.clear();
        if let Some(b) = self.bulk.as_mut() {
            b.clear_batch();
        }
        self.checked = false;
        self.counters = self.mark;
        self.release_locks();
        self.renew();
        Ok(())
    }

    /// Moves the transaction to the newest snapshot (of whatever generation).
    fn renew(&mut self) {
        if !self.writer {
            // (The analytical writer keeps its token, and its count, to the end.)
            self.unregister();
        }
        let snap = {
            // (Under the lock: see `Store::collect_horizon`.)
            let mut active = lock(&self.store.active);
            let snap = self.store.snapshot();
            active.insert(self.id, snap.ts);
            snap
        };
        self.mem = None;
        self.work = (*snap.delta).clone();
        self.snap = snap;
    }

    fn release_locks(&mut self) {
        if !self.locked.is_empty() {
            let mut locks = lock(&self.store.locks);
            for e in self.locked.drain(..) {
                if locks.get(&e) == Some(&self.id) {
                    locks.remove(&e);
                }
            }
            // A large transaction grew the table (25 bytes an entity); give that back
            // rather than hold it for the life of the database.
            let (len, cap) = (locks.len(), locks.capacity());
            if cap > 4096 && len * 4 < cap {
                locks.shrink_to(len * 2);
            }
        }
    }

    fn finish(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        self.bulk = None;
        self.mem = None;
        self.release_locks();
        self.unregister();
        if self.writer {
            self.store.analytical_writer.store(false, Ordering::Release);
            self.writer = false;
        }
        lock(&self.store.active).remove(&self.id);
        self.store.collect_published();
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A commit in the log whose sync is still to come ([`Txn::commit_unsynced`]): it holds
/// the transaction's locks until then. Dropped before it was synced, it waits for the
/// sync (blocking), so no commit is left unpublished.
pub struct Unsynced {
    /// Finished (`done`) once its sync ended or failed.
    txn: Txn,
    ts: u64,
}

impl Unsynced {
    /// The commit's timestamp.
    pub fn ts(&self) -> u64 {
        self.ts
    }

    /// Ready once the commit is on disk and published. When no sync running covers it,
    /// `lead` says who syncs: this call (blocking for it) or another thread (see
    /// [`Lead`]); otherwise it returns `Pending` and the end of a running sync wakes
    /// the task.
    pub fn poll_synced(
        &mut self,
        cx: &mut std::task::Context<'_>,
        mut lead: Lead<'_>,
    ) -> Poll<Result<u64, EngineError>> {
        if self.txn.done {
            return Poll::Ready(Ok(self.ts));
        }
        let r = self.txn.store.poll_synced(self.ts, cx, &mut lead);
        if r.is_ready() {
            self.txn.finish(); // (synced or failed: nothing more will come of waiting)
        }
        r.map(|r| r.map(|()| self.ts))
    }

    /// Blocks until the commit is on disk and published.
    pub fn wait(mut self) -> Result<u64, EngineError> {
        let r = self.txn.store.wait_synced(self.ts);
        self.txn.finish();
        r.map(|()| self.ts)
    }
}

impl Drop for Unsynced {
    fn drop(&mut self) {
        if !self.txn.done {
            let _ = self.txn.store.wait_synced(self.ts);
        }
    }
}

fn describe(e: Entity) -> String {
    match e {
        Entity::Node(n) => format!("node {n}"),
        Entity::Rel(_, r) => format!("relationship {r}"),
    }
}

impl Store {
    /// Starts a transaction on the current snapshot.
    pub fn begin(self: &Arc<Store>) -> Txn {
        let id = self.next_tx.fetch_add(1, Ordering::Relaxed);
        let snap = {
            // (Under the lock: see `Store::collect_horizon`.)
            let mut active = lock(&self.active);
            let snap = self.snapshot();
            active.insert(id, snap.ts);
            snap
        };
        Txn {
            store: self.clone(),
            id,
            work: (*snap.delta).clone(),
            snap,
            ops: crate::wal::OpLog::default(),
            locked: Vec::new(),
            checked: false,
            counters: Counters::default(),
            mark: Counters::default(),
            writer: false,
            registered: false,
            bulk: None,
            batched: false,
            mem: None,
            done: false,
        }
    }
}

/// Whether relationship `eid` of type `ty` is, in `db`'s segments, a hole a checkpoint
/// left for an id handed to a transaction that had not committed: a deleted entry from
/// node 0 to node 0.
fn edge_is_hole(db: &Database, ty: &str, eid: u64) -> Result<bool, EngineError> {
    let Some(t) = db.rel_type_index(ty) else {
        return Ok(false);
    };
    Ok(match db.edge_positions(t, 0, 0, eid)? {
        Some((seg, out, _)) => db.edge_deletions(t, seg).is_some_and(|d| d[0].get(out)),
        None => false,
    })
}

fn human(b: u64) -> String {
    quiver_common::size::human_bytes(b)
}
