//! An open database: the current segments, the delta over them, the log, and the
//! transactions that read and write them.
//!
//! **Invariant:** segments never change; only a checkpoint writes new ones (a new
//! generation), and readers holding a [`Snapshot`] of the old one keep reading it.
//!
//! Concurrency:
//! - the current state is an `Arc<Current>` behind an [`ArcSwap`]: a snapshot is one
//!   atomic load, readers take no lock at all;
//! - a writer locks each entity it writes (node or relationship) in a lock table; an
//!   entity locked by another open transaction, or changed by a commit after this
//!   transaction's snapshot, is a conflict, reported at once as [`EngineError::Conflict`]
//!   (retryable): the later writer fails, nobody waits;
//! - commits are serialised by the commit lock: replay the ops onto the head, append
//!   them to the log and fsync, swap the head in.

use crate::delta::{Delta, Entity};
use crate::error::{lock, EngineError};
use crate::wal::Wal;
use arc_swap::ArcSwap;
use hashbrown::HashMap;
use quiver_common::memory::{Grant, MemoryBudget};
use quiver_storage::manifest::Manifest;
use quiver_storage::write::{lock_database, Staging};
use quiver_storage::{Database, OpenMode, WriteError};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;

/// How writes are kept (seed 000's two modes, with Memgraph's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageMode {
    /// MVCC, snapshot isolation, every commit in the log.
    InMemoryTransactional,
    /// No log, no locks, one writer at a time; durable after a CHECKPOINT.
    InMemoryAnalytical,
}

impl StorageMode {
    pub fn name(self) -> &'static str {
        match self {
            StorageMode::InMemoryTransactional => "IN_MEMORY_TRANSACTIONAL",
            StorageMode::InMemoryAnalytical => "IN_MEMORY_ANALYTICAL",
        }
    }
}

/// The state readers see: segments, and the committed delta over them.
pub struct Current {
    pub db: Arc<Database>,
    pub delta: Arc<Delta>,
    /// Commit timestamp of the last commit in `delta`.
    pub ts: u64,
    /// Commits up to this timestamp were folded into `db` by a checkpoint of this
    /// process (their records, and so their versions, are gone from `delta`).
    pub folded: u64,
    /// The versions of what those commits changed after the oldest snapshot still open
    /// when the checkpoint began: a transaction open across it claims against them.
    pub folded_versions: Arc<HashMap<Entity, u64>>,
}

impl Current {
    pub(crate) fn new(db: Arc<Database>, delta: Arc<Delta>, ts: u64) -> Current {
        Current {
            db,
            delta,
            ts,
            folded: 0,
            folded_versions: Arc::default(),
        }
    }

    /// A successor with another delta (a commit): what was folded stays known.
    pub(crate) fn with_delta(&self, delta: Arc<Delta>, ts: u64) -> Current {
        Current {
            db: self.db.clone(),
            delta,
            ts,
            folded: self.folded,
            folded_versions: self.folded_versions.clone(),
        }
    }

    /// The timestamp of the last commit that changed `e`, as far as a transaction whose
    /// snapshot is at `since` needs to know.
    pub(crate) fn version(&self, e: Entity, since: u64) -> u64 {
        let v = self.delta.version(e);
        if self.folded > since {
            v.max(self.folded_versions.get(&e).copied().unwrap_or(0))
        } else {
            v
        }
    }
}

/// The lock table's hash: an entity's id in the low bits (a statement claims nodes in
/// id order, so its inserts land side by side instead of on a cold cache line each:
/// SET on 25% of social 1's users spent 12% of its time on the lock table's misses),
/// its low 7 bits again in the top 7, which the table compares first.
#[derive(Clone, Copy, Default)]
pub(crate) struct LockHash;

impl std::hash::BuildHasher for LockHash {
    type Hasher = LockHasher;
    fn build_hasher(&self) -> LockHasher {
        LockHasher(0)
    }
}

pub(crate) struct LockHasher(u64);

impl std::hash::Hasher for LockHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 << 57)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u32(&mut self, t: u32) {
        // A relationship's type: mixed into the high bits, so types do not collide
        // side by side.
        self.0 ^= (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u64(&mut self, id: u64) {
        self.0 = self.0.wrapping_add(id);
    }
}

/// Where a running checkpoint's created relationships end, per type: a transaction
/// that began before it and created one below these ids (a deleted entry of the
/// checkpoint's segment) cannot commit.
pub(crate) struct Floor {
    /// Transactions with ids from here began after the checkpoint did.
    pub(crate) first_tx: u64,
    pub(crate) edges: HashMap<Arc<str>, u64>,
}

/// A consistent view for one query or transaction.
#[derive(Clone)]
pub struct Snapshot {
    pub db: Arc<Database>,
    pub delta: Arc<Delta>,
    pub ts: u64,
}

/// The log and the commit clock, behind the commit lock.
///
/// Group commit: a commit applies its ops onto `head` and writes its log record under
/// the commit lock, then leaves the lock to wait for the disk. One committer at a time
/// (the holder of `Store::sync`) syncs the log for every record written so far and
/// publishes the head as of that point; the others find their record synced already.
/// Readers see a commit only once it is on disk.
pub(crate) struct CommitState {
    pub(crate) wal: Option<Wal>,
    pub(crate) clock: u64,
    /// The newest state written to the log but not yet synced and published (`None`:
    /// the published state is the newest).
    pub(crate) head: Option<Arc<Current>>,
    /// Timestamp of the last commit known to be on disk.
    pub(crate) synced: u64,
    /// Set when a sync of the log failed: whether the records since the last good sync
    /// reached the disk is unknown, so nothing more is committed until a reopen replays
    /// what the log holds.
    pub(crate) failed: Option<String>,
    /// Set while a checkpoint writes: where its created entities end.
    pub(crate) floor: Option<Floor>,
}

/// The write counters of a statement or transaction (what Neo4j's drivers show).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub nodes_created: u64,
    pub nodes_deleted: u64,
    pub relationships_created: u64,
    pub relationships_deleted: u64,
    pub properties_set: u64,
    pub labels_added: u64,
    pub labels_removed: u64,
}

impl Counters {
    pub fn is_empty(&self) -> bool {
        *self == Counters::default()
    }

    /// What was counted since `before` (a statement's share of its transaction).
    pub fn since(&self, before: &Counters) -> Counters {
        Counters {
            nodes_created: self.nodes_created - before.nodes_created,
            nodes_deleted: self.nodes_deleted - before.nodes_deleted,
            relationships_created: self.relationships_created - before.relationships_created,
            relationships_deleted: self.relationships_deleted - before.relationships_deleted,
            properties_set: self.properties_set - before.properties_set,
            labels_added: self.labels_added - before.labels_added,
            labels_removed: self.labels_removed - before.labels_removed,
        }
    }

    /// `(name, value)` of each non-zero counter.
    pub fn items(&self) -> Vec<(&'static str, u64)> {
        [
            ("nodes created", self.nodes_created),
            ("nodes deleted", self.nodes_deleted),
            ("relationships created", self.relationships_created),
            ("relationships deleted", self.relationships_deleted),
            ("properties set", self.properties_set),
            ("labels added", self.labels_added),
            ("labels removed", self.labels_removed),
        ]
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .collect()
    }
}

/// Settings of an open store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub open_mode: OpenMode,
    /// A checkpoint runs after a commit once the log is this large.
    pub checkpoint_log_bytes: u64,
    /// ... or the delta holds this much.
    pub checkpoint_delta_bytes: u64,
    /// The database's memory limit (`--memory-limit`): the committed delta, every open
    /// transaction's uncommitted writes and every query's operators take grants from it.
    pub memory_limit: u64,
    /// Whether the automatic checkpoint runs on a thread of its own (a server: the
    /// commit that passed the threshold returns at once) rather than in the session
    /// whose commit passed it (a one-shot command, which then exits on a clean state).
    pub background_checkpoints: bool,
}

/// Three quarters of the machine's memory.
pub fn default_memory_limit() -> u64 {
    quiver_common::size::physical_memory_bytes().max(1 << 30) / 4 * 3
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            open_mode: OpenMode::Mapped,
            checkpoint_log_bytes: 256 << 20,
            checkpoint_delta_bytes: 512 << 20,
            memory_limit: default_memory_limit(),
            background_checkpoints: false,
        }
    }
}

pub struct Store {
    pub(crate) dir: PathBuf,
    pub opts: StoreOptions,
    /// The global memory budget (see [`StoreOptions::memory_limit`]).
    pub memory: MemoryBudget,
    /// The queries running (SHOW TRANSACTIONS).
    pub activity: Arc<crate::activity::Activity>,
    /// What the committed delta holds, against `memory`.
    pub(crate) delta_grant: Mutex<Grant>,
    pub(crate) current: ArcSwap<Current>,
    pub(crate) commit: Mutex<CommitState>,
    /// The syncs of the log running (see [`CommitState`]), each for a group of commits.
    sync: Mutex<Syncing>,
    /// Signalled when a sync ends.
    sync_done: std::sync::Condvar,
    /// Tasks waiting for a sync that another committer leads ([`Unsynced::poll_synced`]):
    /// woken when a sync ends.
    sync_waiters: Mutex<Vec<std::task::Waker>>,
    pub(crate) locks: Mutex<HashMap<Entity, u64, LockHash>>,
    /// Open transactions: id -> snapshot timestamp.
    pub(crate) active: Mutex<HashMap<u64, u64>>,
    pub(crate) next_tx: AtomicU64,
    pub(crate) next_node: AtomicU64,
    /// Transactions holding uncommitted writes of any kind (creations included): a
    /// checkpoint waits for none.
    pub(crate) writers: AtomicUsize,
    pub(crate) next_edge: Mutex<HashMap<Arc<str>, u64>>,
    /// Ids of created entities the delta collected ([`Delta::collect`]), for creations
    /// to take before new ones: a queue's ids stay within what is live at once.
    pub(crate) free: Mutex<FreeIds>,
    /// Whether `free` holds node ids, or edge ids (a creation looks at the list only
    /// then).
    pub(crate) free_nodes: AtomicBool,
    pub(crate) free_edges: AtomicBool,
    mode: Mutex<StorageMode>,
    /// Analytical mode: the one writing transaction holds this.
    pub(crate) analytical_writer: AtomicBool,
    /// Analytical writes not yet made durable by a checkpoint.
    pub(crate) unlogged: AtomicBool,
    pub(crate) index_hook: Mutex<Option<IndexHook>>,
    /// Held by the one checkpoint that writes at a time.
    pub(crate) publisher: Mutex<()>,
    /// Set while a background checkpoint is asked for or runs.
    pub(crate) checkpointing: Arc<AtomicBool>,
    /// What a layer above keeps for the store's life (the query crate's catalog of
    /// projected graphs), made on first use.
    pub attached: std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>,
    /// The database's writer lock; `None` when another process holds it (read only).
    _lock: Option<File>,
}

/// Ids handed back by the delta's collection ([`Store::free`]).
#[derive(Debug, Default)]
pub(crate) struct FreeIds {
    /// Lowest first: ids stay packed at the low end, so that a checkpoint can end the
    /// created range at the last live one ([`Store::trim_collected_ids`]).
    pub(crate) nodes: BinaryHeap<Reverse<u64>>,
    /// Per relationship type, by name (type ids are a delta's own).
    pub(crate) edges: HashMap<Arc<str>, BinaryHeap<Reverse<u64>>>,
}

impl FreeIds {
    /// Takes ids `delta` collected: nodes past its segments (a collected id below them is
    /// a hole of a checkpoint's table), relationships by their type's name; each list
    /// up to [`FREE_MAX`].
    fn add(&mut self, delta: &Delta, nodes: &[u64], rels: &[(u32, u64)]) {
        let room = FREE_MAX.saturating_sub(self.nodes.len());
        self.nodes.extend(
            nodes
                .iter()
                .copied()
                .filter(|&n| n >= delta.base_nodes)
                .take(room)
                .map(Reverse),
        );
        for &(t, e) in rels {
            let Some(name) = delta.types.get(t as usize) else {
                continue;
            };
            let v = self.edges.entry(name.clone()).or_default();
            if v.len() < FREE_MAX {
                v.push(Reverse(e));
            }
        }
    }
}

/// Ids a free list keeps at most (8 MiB of node ids): past it, collected ids stay
/// unused until a checkpoint (a hole of its table, as a rolled-back creation's id).
const FREE_MAX: usize = 1 << 20;

/// Graves a commit collects at least (and as many as twice its own ops): the work is
/// bounded per commit and keeps pace with the deletions.
pub(crate) const COLLECT_PER_COMMIT: usize = 4096;

/// Graves a step of [`Store::collect_published`] collects at most.
const COLLECT_PER_STEP: usize = 65_536;

/// Property names the segments index: `:ID` columns and declared indexes.
/// Brings the declared indexes up to date with a new generation (they are built by the
/// query layer); publishes a newer generation and says so when it changed anything.
pub type IndexHook = Box<dyn Fn(&Path, &Database) -> Result<bool, String> + Send + Sync>;

pub(crate) fn indexed_names(m: &Manifest) -> Vec<Arc<str>> {
    let mut v: Vec<Arc<str>> = Vec::new();
    for t in &m.node_tables {
        if let Some(c) = t.id_column {
            v.push(Arc::from(t.columns[c].name.as_str()));
        }
    }
    for i in &m.indexes {
        v.push(Arc::from(i.property.as_str()));
    }
    v.sort();
    v.dedup();
    v
}

/// Creates an empty database at `dir` (which must not hold one).
pub fn create_empty(dir: &Path) -> Result<(), EngineError> {
    let staging = Staging::begin(dir, false)?;
    let m = Manifest::empty(
        staging.generation(),
        format!("quiver {}", env!("CARGO_PKG_VERSION")),
    );
    staging.publish(&m)?;
    Ok(())
}

impl Store {
    /// Opens the database at `dir`, replaying its log. With `create`, a directory that
    /// does not exist (or is empty) becomes an empty database.
    pub fn open(dir: &Path, create: bool, opts: StoreOptions) -> Result<Arc<Store>, EngineError> {
        Self::open_as(dir, create, opts, false)
    }

    /// Opens the database at `dir` to read only, whether or not another process writes
    /// it: the writer's lock is not taken, the log is read as it stands, nothing is
    /// written (a reader of several that serve one database from shared storage).
    pub fn open_read_only(dir: &Path, opts: StoreOptions) -> Result<Arc<Store>, EngineError> {
        Self::open_as(dir, false, opts, true)
    }

    fn open_as(
        dir: &Path,
        create: bool,
        opts: StoreOptions,
        read_only: bool,
    ) -> Result<Arc<Store>, EngineError> {
        let mut opts = opts;
        // The delta goes to segments well before it could fill the memory limit.
        opts.checkpoint_delta_bytes = opts.checkpoint_delta_bytes.min(opts.memory_limit / 4);
        let is_empty_dir = dir.is_dir()
            && std::fs::read_dir(dir)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
        if create && (!dir.exists() || is_empty_dir) {
            create_empty(dir)?;
        }
        // Open first: a directory that is not a database gets no LOCK file.
        let db = Arc::new(Database::open(dir, opts.open_mode)?);
        let lock = if read_only {
            None
        } else {
            match lock_database(dir) {
                Ok(f) => Some(f),
                Err(WriteError::Locked { .. }) => None,
                Err(e) => return Err(e.into()),
            }
        };
        let log = db.manifest().log_start();
        let mut delta = base_delta(&db)?;
        let (wal, replay) = if lock.is_some() {
            let (w, r) = Wal::open(dir, log)?;
            (Some(w), r)
        } else {
            (None, crate::wal::read_only(dir, log)?)
        };
        let mut clock = 0;
        for (ts, ops) in &replay.records {
            for op in ops {
                delta.apply(&db, op, *ts)?;
            }
            clock = clock.max(*ts);
        }
        // (Past every id the log used, collected ones included: those are handed out
        // from the free lists.)
        let next_edge = next_edges(&delta);
        // No transaction is open: every tombstone the log left goes.
        let mut free = FreeIds::default();
        let (mut nodes, mut rels) = (Vec::new(), Vec::new());
        delta.collect(u64::MAX - 1, usize::MAX, &mut nodes, &mut rels);
        free.add(&delta, &nodes, &rels);
        let memory = MemoryBudget::new(opts.memory_limit);
        // The log's replay is what the database holds: it is granted even past the limit
        // (the limit then refuses new writes until a checkpoint).
        let mut delta_grant = memory.empty_grant("the delta");
        delta_grant.force_resize(delta.bytes);
        if lock.is_some() {
            // Table files of bulk writes a killed process never committed.
            let _ = std::fs::remove_dir_all(dir.join(crate::bulk::BULK_DIR));
        }
        Ok(Arc::new(Store {
            dir: dir.to_path_buf(),
            memory,
            activity: Default::default(),
            delta_grant: Mutex::new(delta_grant),
            next_node: AtomicU64::new(delta.next_node),
            writers: AtomicUsize::new(0),
            current: ArcSwap::from_pointee(Current::new(db, Arc::new(delta), clock)),
            commit: Mutex::new(CommitState {
                wal,
                clock,
                head: None,
                synced: clock,
                failed: None,
                floor: None,
            }),
            publisher: Mutex::new(()),
            checkpointing: Arc::new(AtomicBool::new(false)),
            sync_waiters: Mutex::new(Vec::new()),
            sync: Mutex::new(Syncing::default()),
            sync_done: std::sync::Condvar::new(),
            locks: Mutex::new(HashMap::with_hasher(LockHash)),
            active: Mutex::new(HashMap::new()),
            index_hook: Mutex::new(None),
            next_tx: AtomicU64::new(1),
            next_edge: Mutex::new(next_edge),
            free_nodes: AtomicBool::new(!free.nodes.is_empty()),
            free_edges: AtomicBool::new(!free.edges.is_empty()),
            free: Mutex::new(free),
            mode: Mutex::new(StorageMode::InMemoryTransactional),
            analytical_writer: AtomicBool::new(false),
            unlogged: AtomicBool::new(false),
            attached: std::sync::OnceLock::new(),
            _lock: lock,
            opts,
        }))
    }

    /// Sets what rebuilds the declared indexes after a checkpoint (once per store).
    pub fn set_index_hook(&self, hook: IndexHook) {
        let mut h = lock(&self.index_hook);
        if h.is_none() {
            *h = Some(hook);
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn is_writable(&self) -> bool {
        self._lock.is_some()
    }

    /// The committed state now.
    pub fn snapshot(&self) -> Snapshot {
        let c = self.current.load();
        Snapshot {
            db: c.db.clone(),
            delta: c.delta.clone(),
            ts: c.ts,
        }
    }

    pub fn mode(&self) -> StorageMode {
        *lock(&self.mode)
    }

    /// Bytes in the log now.
    pub fn log_bytes(&self) -> u64 {
        lock(&self.commit).wal.as_ref().map_or(0, |w| w.bytes)
    }

    /// Whether the log holds commits that no checkpoint has put into segments yet (or
    /// analytical mode holds unlogged writes).
    pub fn has_uncheckpointed_writes(&self) -> bool {
        self.log_bytes() > crate::wal::HEADER as u64 || self.unlogged.load(Ordering::SeqCst)
    }

    /// Number of open transactions.
    pub fn active_transactions(&self) -> usize {
        lock(&self.active).len()
    }

    /// Switches the storage mode. Refused while other transactions are open; leaving
    /// analytical mode first checkpoints its unlogged writes.
    pub fn set_mode(&self, mode: StorageMode, own_open: usize) -> Result<(), EngineError> {
        let others = self.active_transactions().saturating_sub(own_open);
        if others > 0 {
            return Err(EngineError::Refused(format!(
                "cannot switch the storage mode while {others} other transaction(s) are open; commit or roll them back first"
            )));
        }
        if mode == StorageMode::InMemoryTransactional && self.unlogged.load(Ordering::SeqCst) {
            self.checkpoint()?;
        }
        // Not while a checkpoint replays the log: analytical writes are not in it.
        let _publishing = self.publishing();
        *lock(&self.mode) = mode;
        Ok(())
    }

    /// Installs a new head outside the commit path (a checkpoint, an analytical commit,
    /// a reload), accounting its delta as it is: what it holds is held already.
    pub(crate) fn replace_current(&self, c: Current) {
        lock(&self.delta_grant).force_resize(c.delta.bytes);
        self.current.store(Arc::new(c));
    }

    /// Bytes the committed delta is accounted at.
    pub fn delta_granted_bytes(&self) -> u64 {
        lock(&self.delta_grant).bytes()
    }

    pub(crate) fn commit_lock(&self) -> MutexGuard<'_, CommitState> {
        lock(&self.commit)
    }

    /// The right to publish a generation: one writer of generations at a time (a
    /// checkpoint, index DDL, which holds it across its publish and [`Store::reload`]).
    pub fn publishing(&self) -> MutexGuard<'_, ()> {
        lock(&self.publisher)
    }

    /// Reopens on the newest generation after something else published one (index DDL,
    /// holding [`Store::publishing`]): its segments, and the commits of its log.
    pub fn reload(&self) -> Result<(), EngineError> {
        let mut c = lock(&self.commit);
        self.sync_locked(&mut c)?;
        let db = Arc::new(Database::open(&self.dir, self.opts.open_mode)?);
        let delta = self.replayed(&db)?;
        self.adopt(&mut c, db, delta, 0, Arc::default());
        Ok(())
    }

    /// The delta of generation `db` with the commits of its log (all synced).
    pub(crate) fn replayed(&self, db: &Database) -> Result<Delta, EngineError> {
        let mut delta = base_delta(db)?;
        let log = crate::wal::read_only(&self.dir, db.manifest().log_start())?;
        for (ts, ops) in &log.records {
            for op in ops {
                delta.apply(db, op, *ts)?;
            }
        }
        Ok(delta)
    }

    /// Whether a transaction other than the caller (`own`: the caller is one) holds
    /// uncommitted writes.
    pub(crate) fn has_uncommitted_writers(&self, own: bool) -> bool {
        self.writers.load(Ordering::SeqCst) > own as usize
    }

    /// Makes every commit written to the log durable and published (commit lock held):
    /// afterwards nothing is between its log write and its sync.
    pub(crate) fn sync_locked(&self, c: &mut CommitState) -> Result<(), EngineError> {
        if c.synced >= c.clock {
            return Ok(());
        }
        if let Some(w) = c.wal.as_ref() {
            if let Err(e) = w.sync_handle().sync_data() {
                let err = sync_failed(&e.to_string());
                c.failed = Some(e.to_string());
                return Err(err);
            }
        }
        c.synced = c.clock;
        if let Some(h) = c.head.take() {
            if h.ts > self.current.load().ts {
                self.current.store(h);
            }
        }
        Ok(())
    }

    /// Installs generation `db` with `delta` as the newest state (commit lock held, the
    /// log synced): id allocation continues past both, and past what open transactions
    /// hold already.
    pub(crate) fn adopt(
        &self,
        c: &mut CommitState,
        db: Arc<Database>,
        delta: Delta,
        folded: u64,
        folded_versions: Arc<HashMap<Entity, u64>>,
    ) {
        c.head = None;
        c.synced = c.clock;
        self.clear_free_ids();
        self.next_node.fetch_max(delta.next_node, Ordering::SeqCst);
        {
            let mut m = lock(&self.next_edge);
            for (ty, next) in next_edges(&delta) {
                let e = m.entry(ty).or_insert(0);
                *e = (*e).max(next);
            }
        }
        let mut cur = Current::new(db, Arc::new(delta), c.clock);
        cur.folded = folded;
        cur.folded_versions = folded_versions;
        self.replace_current(cur);
    }

    /// The id the next transaction will get.
    pub(crate) fn next_tx_id(&self) -> u64 {
        self.next_tx.load(Ordering::SeqCst)
    }

    /// The oldest snapshot an open transaction reads.
    pub(crate) fn oldest_snapshot(&self) -> Option<u64> {
        lock(&self.active).values().copied().min()
    }

    /// The newest published state.
    pub(crate) fn head(&self) -> Arc<Current> {
        self.current.load_full()
    }

    /// Returns once the commit `ts` (already in the log) is on disk and published. A
    /// committer whose record no running sync covers syncs for everyone whose record is
    /// written, when fewer than [`MAX_SYNCS`] run; the others wait for a sync to end
    /// and look again.
    pub(crate) fn wait_synced(&self, ts: u64) -> Result<(), EngineError> {
        loop {
            match self.sync_step(ts, MAX_SYNCS) {
                SyncStep::Done(r) => return r,
                SyncStep::Lead(g) => return self.lead_sync(g),
                SyncStep::Wait(mut g) => {
                    g.blocked += 1;
                    let mut g = self.sync_done.wait(g).unwrap_or_else(|e| e.into_inner());
                    g.blocked -= 1;
                }
            }
        }
    }

    /// [`Store::wait_synced`] for a task that must not block while another committer
    /// syncs: a sync none running covers is begun as `lead` says (here, blocking this
    /// call for it as a committer is blocked, or handed to another thread); otherwise
    /// the task waits to be woken by the sync that ends, without holding its thread.
    pub(crate) fn poll_synced(
        self: &Arc<Self>,
        ts: u64,
        cx: &mut std::task::Context<'_>,
        lead: &mut Lead<'_>,
    ) -> Poll<Result<(), EngineError>> {
        let most = match lead {
            Lead::Here => MAX_SYNCS,
            Lead::Elsewhere(_) => 1,
        };
        let (mut g, begin) = match self.sync_step(ts, most) {
            SyncStep::Done(r) => return Poll::Ready(r),
            SyncStep::Lead(g) => match lead {
                Lead::Here => return Poll::Ready(self.lead_sync(g)),
                Lead::Elsewhere(_) => (g, true),
            },
            SyncStep::Wait(g) => (g, false),
        };
        // Registered under `sync`: the sync that ends next wakes it.
        lock(&self.sync_waiters).push(cx.waker().clone());
        if let (true, Lead::Elsewhere(hand)) = (begin, lead) {
            g.handed += 1;
            drop(g);
            hand(SyncHandoff {
                store: self.clone(),
            });
        }
        Poll::Pending
    }

    /// What a committer waiting for commit `ts` does next: nothing (synced or failed),
    /// lead a sync (when fewer than `most` run or are handed off, and none covers it),
    /// or wait for one to end (holding `sync`, so that the end is not missed).
    fn sync_step(&self, ts: u64, most: u32) -> SyncStep<'_> {
        let g = lock(&self.sync);
        if let Some(r) = self.synced(ts) {
            return SyncStep::Done(r);
        }
        if g.running + g.handed < most && g.upto < ts {
            return SyncStep::Lead(g);
        }
        SyncStep::Wait(g)
    }

    /// Whether the commit `ts` is on disk and published (or the log failed).
    fn synced(&self, ts: u64) -> Option<Result<(), EngineError>> {
        let c = lock(&self.commit);
        if c.synced >= ts {
            return Some(Ok(()));
        }
        c.failed.as_ref().map(|why| Err(sync_failed(why)))
    }

    /// A sync of the log for every commit written so far, by the committer that took
    /// it (`g`: the `sync` state, released while the file syncs); wakes the waiting
    /// committers and tasks when it ends.
    fn lead_sync(&self, mut g: MutexGuard<'_, Syncing>) -> Result<(), EngineError> {
        let taken = {
            let c = lock(&self.commit);
            match (&c.failed, c.wal.as_ref()) {
                (Some(why), _) => Err(sync_failed(why)),
                (None, Some(w)) if c.synced < c.clock => {
                    Ok(Some((c.clock, c.head.clone(), w.sync_handle())))
                }
                _ => Ok(None), // nothing to sync (or no log)
            }
        };
        let (upto, head, file) = match taken {
            Ok(Some(t)) => t,
            other => {
                // Nothing to sync, or the log failed. (A handed sync can find its
                // commits synced by a worker's: its waiters wake to see so.)
                let blocked = g.blocked > 0;
                drop(g);
                self.wake_sync_waiters(blocked);
                return other.map(|_| ());
            }
        };
        g.running += 1;
        g.upto = g.upto.max(upto);
        drop(g);
        let r = file.sync_data();
        let r = {
            let mut c = lock(&self.commit);
            match r {
                Err(e) => {
                    let err = sync_failed(&e.to_string());
                    c.failed = Some(e.to_string());
                    Err(err)
                }
                Ok(()) => {
                    // Everything written before this sync began is on disk, whatever
                    // another sync running beside it does.
                    c.synced = c.synced.max(upto);
                    if let Some(h) = head {
                        // (Its delta was granted when it was written.)
                        if h.ts > self.current.load().ts {
                            self.current.store(h.clone());
                        }
                        if c.head.as_ref().is_some_and(|x| Arc::ptr_eq(x, &h)) {
                            c.head = None;
                        }
                    }
                    Ok(())
                }
            }
        };
        let blocked = {
            let mut g = lock(&self.sync);
            g.running -= 1;
            g.blocked > 0
        };
        self.wake_sync_waiters(blocked);
        r
    }

    /// Wakes the tasks waiting for a sync to end, and the threads when `blocked`.
    fn wake_sync_waiters(&self, blocked: bool) {
        if blocked {
            self.sync_done.notify_all();
        }
        let waiters = std::mem::take(&mut *lock(&self.sync_waiters));
        for w in waiters {
            w.wake();
        }
    }

    /// A node id for a creation: a collected one if there is one, else a new one.
    #[inline]
    pub(crate) fn alloc_node(&self) -> u64 {
        if self.free_nodes.load(Ordering::Relaxed) {
            let mut f = lock(&self.free);
            if let Some(Reverse(id)) = f.nodes.pop() {
                if f.nodes.is_empty() {
                    self.free_nodes.store(false, Ordering::Relaxed);
                }
                return id;
            }
        }
        self.next_node.fetch_add(1, Ordering::Relaxed)
    }

    /// Collects up to `max` of `delta`'s tombstones at `horizon` (commit lock held) and
    /// hands their ids to later creations; returns how many graves went. Not the ids
    /// while a checkpoint writes: its tables end at ids handed out before it began, and
    /// a collected id below that end is a hole of its table.
    pub(crate) fn collect_into(
        &self,
        c: &CommitState,
        delta: &mut Delta,
        horizon: u64,
        max: usize,
    ) -> usize {
        let before = delta.graves.len();
        let (mut nodes, mut rels) = (Vec::new(), Vec::new());
        delta.collect(horizon, max, &mut nodes, &mut rels);
        let gone = before - delta.graves.len();
        if c.floor.is_some() || (nodes.is_empty() && rels.is_empty()) {
            return gone;
        }
        let mut f = lock(&self.free);
        f.add(delta, &nodes, &rels);
        self.free_nodes
            .store(!f.nodes.is_empty(), Ordering::Relaxed);
        self.free_edges
            .store(!f.edges.is_empty(), Ordering::Relaxed);
        gone
    }

    /// Lowers the id allocator to just past `delta`'s last live created node when every
    /// id between was collected and is free (commit lock held, a checkpoint beginning:
    /// see [`crate::checkpoint`]). Also `delta.next_node`'s end then: the checkpoint writes
    /// its created table up to there. Returns the new end.
    pub(crate) fn trim_collected_ids(&self, delta: &Delta) -> u64 {
        let counter = self.next_node.load(Ordering::SeqCst);
        let mut last = delta.base_nodes;
        for (&n, r) in delta.nodes.range(delta.base_nodes..) {
            if !r.deleted {
                last = n + 1;
            }
        }
        if last >= counter {
            return counter;
        }
        let mut f = lock(&self.free);
        // Every id of `last..counter` must be free: a handed-out one may be committed.
        let free = f
            .nodes
            .iter()
            .filter(|&&Reverse(n)| n >= last && n < counter)
            .count() as u64;
        if free != counter - last || delta.nodes.range(last..).next().is_some() {
            return counter;
        }
        // Under the list's lock: no id of it is handed out meanwhile, and none after
        // (every one is past the new end, which the allocator hands out next).
        if self
            .next_node
            .compare_exchange(counter, last, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return counter;
        }
        f.nodes = BinaryHeap::new();
        self.free_nodes.store(false, Ordering::Relaxed);
        last
    }

    /// [`Store::trim_collected_ids`] for relationship ids: a type's allocator goes back
    /// to just past its last created relationship when every id between was collected
    /// (then the next checkpoint's segment of the type has no holes for them).
    pub(crate) fn trim_collected_edges(&self, delta: &Delta) {
        let mut f = lock(&self.free);
        let mut next = lock(&self.next_edge);
        for (ty, end) in next_edges(delta) {
            let (Some(counter), Some(heap)) = (next.get(&ty).copied(), f.edges.get_mut(&ty)) else {
                continue;
            };
            if end >= counter {
                continue;
            }
            let free = heap
                .iter()
                .filter(|&&Reverse(e)| e >= end && e < counter)
                .count() as u64;
            if free == counter - end {
                next.insert(ty, end);
                heap.clear();
            }
        }
    }

    /// Forgets the collected ids (a checkpoint begins: it writes tables up to the ids
    /// handed out so far, and ids below their end are never handed out again).
    pub(crate) fn clear_free_ids(&self) {
        let mut f = lock(&self.free);
        f.nodes = BinaryHeap::new();
        f.edges = HashMap::new();
        self.free_nodes.store(false, Ordering::Relaxed);
        self.free_edges.store(false, Ordering::Relaxed);
    }

    /// The newest timestamp whose deletions every open transaction but `me` sees: the
    /// published state's, or an older snapshot's (read under the lock [`Store::begin`]
    /// takes a snapshot under, so no transaction is beginning on an older one).
    pub(crate) fn collect_horizon(&self, me: u64) -> u64 {
        let active = lock(&self.active);
        let published = self.current.load().ts;
        active
            .iter()
            .filter(|(&id, _)| id != me)
            .map(|(_, &ts)| ts)
            .fold(published, u64::min)
    }

    /// Collects what the published state's last commits deleted once no open
    /// transaction predates them (a transaction's end calls it): a commit collects only
    /// what was published before it, so without this a database whose writes stop keeps
    /// its last deletions' tombstones. Takes a timestamp of its own (no log record: it
    /// changes nothing a reader can see), so that a transaction that began on the state
    /// before commits by replay, as after any commit. Skipped while a commit is between
    /// its log write and its sync (that commit's end collects), and in analytical mode
    /// (its commits collect everything).
    pub(crate) fn collect_published(&self) {
        // A large deletion's graves go in steps, the commit lock given up between
        // (each step about 20 ms of removals).
        while self.collect_published_step(COLLECT_PER_STEP) {}
    }

    /// One step of [`Store::collect_published`]: whether it collected a full `max`.
    fn collect_published_step(&self, max: usize) -> bool {
        let cur = self.current.load();
        match cur.delta.graves.front() {
            Some(&(ts, _)) if ts <= cur.ts => {}
            _ => return false,
        }
        drop(cur);
        if self.analytical_writer.load(Ordering::Acquire) || self.unlogged.load(Ordering::SeqCst) {
            return false;
        }
        let mut c = lock(&self.commit);
        if c.head.is_some() || c.failed.is_some() || c.wal.is_none() {
            return false;
        }
        let cur = self.current.load_full();
        let horizon = self.collect_horizon(u64::MAX);
        if cur.delta.graves.front().is_none_or(|g| g.0 > horizon) {
            return false;
        }
        let mut d = (*cur.delta).clone();
        let full = self.collect_into(&c, &mut d, horizon, max) == max;
        c.clock += 1;
        c.synced = c.clock;
        self.replace_current(cur.with_delta(Arc::new(d), c.clock));
        full
    }

    pub(crate) fn alloc_edge(&self, ty: &Arc<str>, base: u64) -> u64 {
        if self.free_edges.load(Ordering::Relaxed) {
            let mut f = lock(&self.free);
            if let Some(v) = f.edges.get_mut(ty) {
                if let Some(Reverse(id)) = v.pop() {
                    if id >= base {
                        return id;
                    }
                }
            }
        }
        let mut m = lock(&self.next_edge);
        let e = m.entry(ty.clone()).or_insert(base);
        *e = (*e).max(base);
        let id = *e;
        *e += 1;
        id
    }

    /// Hands out `n` node ids at once, past every id handed out so far: the range a live
    /// append's nodes take (see [`crate::append`]). Ids it does not publish are deleted
    /// rows of a later checkpoint's table, as a rolled-back transaction's are.
    pub fn reserve_nodes(&self, n: u64) -> u64 {
        self.next_node.fetch_add(n, Ordering::SeqCst)
    }
}

/// The next edge id of each type: past the segments and past every created edge.
fn next_edges(delta: &Delta) -> HashMap<Arc<str>, u64> {
    let mut m = HashMap::new();
    for (i, t) in delta.types.iter().enumerate() {
        let base = delta.base_edges[i];
        let top = delta
            .rels
            .range((i as u32, 0)..(i as u32 + 1, 0))
            .next_back()
            .map_or(base, |((_, e), _)| (*e + 1).max(base));
        m.insert(t.clone(), top);
    }
    m
}

/// The syncs of the log that may run at once. A sync covers the commits written when it
/// began; with two clients each commit is written while the other's sync runs, and
/// waiting for that one to end before starting its own nearly doubled its wait. Two
/// syncs of a file overlap on the device (here 10.7K syncs/s from one thread, 12.8K
/// from two, into preallocated space).
const MAX_SYNCS: u32 = 2;

/// See [`Store::sync_step`].
enum SyncStep<'a> {
    Done(Result<(), EngineError>),
    Lead(MutexGuard<'a, Syncing>),
    Wait(MutexGuard<'a, Syncing>),
}

/// The syncs running ([`Store::wait_synced`]).
#[derive(Default)]
struct Syncing {
    running: u32,
    /// The newest commit a running (or ended) sync covers.
    upto: u64,
    /// Threads blocked on `sync_done` (a sync that ends with none skips the notify: a
    /// `futex` call a commit).
    blocked: u32,
    /// Syncs handed to another thread ([`SyncHandoff`]) that have not begun: counted
    /// with the running ones, so that no other caller hands or leads one meanwhile.
    handed: u32,
}

/// Who begins a sync that an [`Unsynced`] commit waits for, when none running covers it.
pub enum Lead<'a> {
    /// The caller, blocking its thread for the sync, while fewer than two run (its
    /// thread has no other work waiting).
    Here,
    /// Never the caller: a sync to begin is handed to this function, to run
    /// [`SyncHandoff::run`] on a thread that may block (the caller's thread serves
    /// others meanwhile). One sync at a time.
    Elsewhere(&'a mut dyn FnMut(SyncHandoff)),
}

/// A sync of the log handed to another thread ([`Lead::Elsewhere`]). Its waiters wait
/// until it runs: dropped unrun, it runs then.
pub struct SyncHandoff {
    store: Arc<Store>,
}

impl SyncHandoff {
    /// Syncs every commit written so far (blocking), publishes them and wakes their
    /// waiters.
    pub fn run(self) {}
}

impl Drop for SyncHandoff {
    fn drop(&mut self) {
        let mut g = lock(&self.store.sync);
        g.handed -= 1;
        // (A failure is every waiter's: each finds it on waking.)
        let _ = self.store.lead_sync(g);
    }
}

/// A commit after a failed sync of the log: its outcome is unknown until a reopen.
fn sync_failed(why: &str) -> EngineError {
    EngineError::Refused(format!(
        "the write-ahead log could not be synced ({why}); whether this commit reached the disk is unknown: reopen the database to see"
    ))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// The lock table's hash keeps entities apart (nodes from relationships, types from
    /// each other) and consecutive nodes in consecutive buckets.
    #[test]
    fn lock_hashes_are_distinct_and_ordered() {
        let h = |e: Entity| LockHash.hash_one(e);
        let mut seen = std::collections::HashSet::new();
        for id in 0..2000u64 {
            for e in [
                Entity::Node(id),
                Entity::Rel(0, id),
                Entity::Rel(1, id),
                Entity::Rel(7, id),
            ] {
                assert!(seen.insert(h(e)), "{e:?} collides");
            }
        }
        // Bucket bits (the low ones) follow the node id.
        for id in 0..1000u64 {
            assert_eq!(
                h(Entity::Node(id + 1)) & 0xFFFF,
                (h(Entity::Node(id)) & 0xFFFF) + 1
            );
        }
        let mut m: HashMap<Entity, u64, LockHash> = HashMap::with_hasher(LockHash);
        for id in 0..10_000u64 {
            m.insert(Entity::Node(id * 4), id);
            m.insert(Entity::Rel(3, id), id);
        }
        assert_eq!(m.get(&Entity::Node(400)), Some(&100));
        assert_eq!(m.get(&Entity::Rel(3, 400)), Some(&400));
        assert_eq!(m.get(&Entity::Node(401)), None);
    }
}
