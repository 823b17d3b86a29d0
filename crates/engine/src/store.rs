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

use crate::delta::{ApplyError, Delta, Entity, KeyVal, Op, Props, UNCOMMITTED};
use crate::value::{RelRef, Value};
use crate::view::View;
use crate::wal::{Wal, WalError};
use arc_swap::ArcSwap;
use hashbrown::HashMap;
use quiver_common::memory::{Grant, MemoryBudget};
use quiver_storage::manifest::Manifest;
use quiver_storage::write::{lock_database, Staging};
use quiver_storage::{Database, OpenError, OpenMode, ReadError, WriteError};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("write-ahead log: {0}")]
    Wal(#[from] WalError),
    #[error("{0}")]
    Apply(#[from] ApplyError),
    /// Another transaction changed the same entity: retry the transaction.
    #[error("{0} (a transient conflict: retry the transaction)")]
    Conflict(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Constraint(String),
    /// DELETE (not DETACH DELETE) of a node that still has relationships.
    #[error("cannot delete node {node}: it still has {rels} relationship(s); delete them first or use DETACH DELETE")]
    ConnectedNode { node: u64, rels: u64 },
    /// A value that cannot be a property (a map, a node, a list of lists).
    #[error("{0}")]
    PropertyType(String),
    /// The database's `--memory-limit` could not cover a write: it is rolled back, the
    /// database stays usable.
    #[error("{0}")]
    Memory(String),
    /// A write on a store that only reads: another process holds the writer's lock, or
    /// it was opened read-only (a reader of a cluster; Bolt's `NotALeader`, on which
    /// drivers route the write to the writer).
    #[error("{0}")]
    ReadOnly(String),
}

impl EngineError {
    /// Whether retrying the transaction can succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, EngineError::Conflict(_))
    }
}

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
    fn version(&self, e: Entity, since: u64) -> u64 {
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
    dir: PathBuf,
    pub opts: StoreOptions,
    /// The global memory budget (see [`StoreOptions::memory_limit`]).
    pub memory: MemoryBudget,
    /// The queries running (SHOW TRANSACTIONS).
    pub activity: Arc<crate::activity::Activity>,
    /// What the committed delta holds, against `memory`.
    delta_grant: Mutex<Grant>,
    current: ArcSwap<Current>,
    commit: Mutex<CommitState>,
    /// The syncs of the log running (see [`CommitState`]), each for a group of commits.
    sync: Mutex<Syncing>,
    /// Signalled when a sync ends.
    sync_done: std::sync::Condvar,
    /// Tasks waiting for a sync that another committer leads ([`Unsynced::poll_synced`]):
    /// woken when a sync ends.
    sync_waiters: Mutex<Vec<std::task::Waker>>,
    locks: Mutex<HashMap<Entity, u64, LockHash>>,
    /// Open transactions: id -> snapshot timestamp.
    active: Mutex<HashMap<u64, u64>>,
    next_tx: AtomicU64,
    pub(crate) next_node: AtomicU64,
    /// Transactions holding uncommitted writes of any kind (creations included): a
    /// checkpoint waits for none.
    writers: AtomicUsize,
    pub(crate) next_edge: Mutex<HashMap<Arc<str>, u64>>,
    mode: Mutex<StorageMode>,
    /// Analytical mode: the one writing transaction holds this.
    analytical_writer: AtomicBool,
    /// Analytical writes not yet made durable by a checkpoint.
    pub(crate) unlogged: AtomicBool,
    pub(crate) index_hook: Mutex<Option<IndexHook>>,
    /// Held by the one checkpoint that writes at a time.
    pub(crate) publisher: Mutex<()>,
    /// Set while a background checkpoint is asked for or runs.
    checkpointing: Arc<AtomicBool>,
    /// The database's writer lock; `None` when another process holds it (read only).
    _lock: Option<File>,
}

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
        let mut delta = crate::checkpoint::base_delta(&db)?;
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
        let next_edge = next_edges(&delta);
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
            mode: Mutex::new(StorageMode::InMemoryTransactional),
            analytical_writer: AtomicBool::new(false),
            unlogged: AtomicBool::new(false),
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

    /// Starts a transaction on the current snapshot.
    pub fn begin(self: &Arc<Store>) -> Txn {
        let snap = self.snapshot();
        let id = self.next_tx.fetch_add(1, Ordering::Relaxed);
        lock(&self.active).insert(id, snap.ts);
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
        let mut delta = crate::checkpoint::base_delta(db)?;
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
    fn wait_synced(&self, ts: u64) -> Result<(), EngineError> {
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
    fn poll_synced(
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

    fn alloc_edge(&self, ty: &Arc<str>, base: u64) -> u64 {
        let mut m = lock(&self.next_edge);
        let e = m.entry(ty.clone()).or_insert(base);
        *e = (*e).max(base);
        let id = *e;
        *e += 1;
        id
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

/// Locks a mutex, recovering from a panic elsewhere (the data is a plain map).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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
        let id = self.store.next_node.fetch_add(1, Ordering::Relaxed);
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
            let work = std::mem::replace(&mut self.work, (*cur.delta).clone());
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
            let d = if cur.ts == self.snap.ts && Arc::ptr_eq(&cur.db, &self.snap.db) {
                // Nothing committed since this snapshot: the working copy is the new head
                // once what it changed carries this commit's timestamp.
                let mut d = std::mem::replace(&mut self.work, (*cur.delta).clone());
                // In key order: consecutive records share their path down the B-tree
                // (the lock set's hash order sent each to a cold one).
                self.locked.sort_unstable();
                for &e in &self.locked {
                    d.restamp(e, UNCOMMITTED, ts);
                }
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
        let snap = self.store.snapshot();
        lock(&self.store.active).insert(self.id, snap.ts);
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

fn human(b: u64) -> String {
    quiver_common::size::human_bytes(b)
}

fn describe(e: Entity) -> String {
    match e {
        Entity::Node(n) => format!("node {n}"),
        Entity::Rel(_, r) => format!("relationship {r}"),
    }
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
