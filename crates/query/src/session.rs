//! The `Session`: an open database and what one client's statements share (an explicit
//! transaction, the indexes loaded for the current generation, the parse cache, the
//! options), and how a statement runs on it: parsed, checked, planned on the
//! transaction's graph (an auto-commit one when none is open), executed into a sink,
//! committed.

use crate::cache::ParseCache;
use crate::cache::Prepared;
use crate::error::QueryError;
use crate::index;
use crate::index::IndexSet;
use crate::options::*;
use crate::plan::Params;
use crate::statement::default_load_dirs;
use crate::statement::run_statement;
use quiver_cypher::ast::Parsed;
use quiver_engine::{Store, StoreOptions, Txn};
use quiver_storage::{Database, OpenMode};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// An open database and the session's state: an explicit transaction, the indexes,
/// options. What the CLI and the shell (and later the server) talk to.
pub struct Session {
    pub(crate) store: Arc<Store>,
    pub(crate) tx: Option<Txn>,
    indexes: IndexSet,
    /// Generation the indexes were loaded for.
    indexes_gen: u64,
    /// Queries parsed, by their text (shared by a server's sessions).
    parsed: Arc<ParseCache>,
    pub opts: QueryOptions,
    /// An auto-commit statement's commit is left to be synced by the caller
    /// ([`Session::take_unsynced`]) instead of waited for here: a server that answers
    /// the client only after the sync, without holding its thread meanwhile.
    pub defer_sync: bool,
    /// The last auto-commit statement's commit, not yet synced (with `defer_sync`).
    unsynced: Option<quiver_engine::Unsynced>,
}

impl Session {
    /// Opens the database at `dir` (which must exist).
    pub fn open(dir: &Path, mode: OpenMode) -> Result<Session, QueryError> {
        Self::open_with(dir, mode, false)
    }

    /// Opens the database at `dir`; with `create`, a missing directory becomes an empty
    /// database.
    pub fn open_with(dir: &Path, mode: OpenMode, create: bool) -> Result<Session, QueryError> {
        let opts = StoreOptions {
            open_mode: mode,
            ..StoreOptions::default()
        };
        Self::open_opts(dir, opts, create)
    }

    /// Opens with the store's options given (memory limit, checkpoint thresholds).
    pub fn open_opts(dir: &Path, opts: StoreOptions, create: bool) -> Result<Session, QueryError> {
        let store = Store::open(dir, create, opts)?;
        Ok(Self::on(store))
    }

    /// A session on an already open store (several sessions may share one).
    pub fn on(store: Arc<Store>) -> Session {
        // Checkpoints write new node tables; the declared indexes follow them.
        let budget = store.memory.clone();
        store.set_index_hook(Box::new(move |dir, db| {
            index::refresh_in(dir, db, true, &budget).map_err(|e| e.to_string())
        }));
        if store.is_writable() && index::stale(&store.snapshot().db) {
            // A crash between a checkpoint and its index rebuild: rebuild now. A failure
            // leaves the indexes stale until the next checkpoint, which retries.
            let _ = store.checkpoint();
        }
        let snap = store.snapshot();
        let (import_dir, rejects_dir) = default_load_dirs(store.dir());
        let database_memory = Some(store.memory.clone());
        let activity = Some(store.activity.clone());
        let catalog = Some(crate::gds::Catalog::of(&store));
        Session {
            indexes: IndexSet::load(&snap.db),
            indexes_gen: snap.db.manifest().generation,
            store,
            tx: None,
            parsed: Arc::default(),
            defer_sync: false,
            unsynced: None,
            opts: QueryOptions {
                import_dir: Some(import_dir),
                rejects_dir: Some(rejects_dir),
                database_memory,
                activity,
                catalog,
                ..QueryOptions::default()
            },
        }
    }

    /// Takes its parsed queries from (and adds them to) `cache`, which other sessions
    /// share: a server's connections keep one cache, not one each.
    pub fn share_parses(&mut self, cache: Arc<ParseCache>) {
        self.parsed = cache;
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The segments as of now (the committed delta is not in it).
    pub fn db(&self) -> Arc<Database> {
        self.store.snapshot().db
    }

    pub fn in_transaction(&self) -> bool {
        self.tx.is_some()
    }

    fn refresh_indexes(&mut self, db: &Database) {
        if db.manifest().generation != self.indexes_gen {
            self.indexes = IndexSet::load(db);
            self.indexes_gen = db.manifest().generation;
        }
    }

    /// Runs a query or a command.
    pub fn run(
        &mut self,
        text: &str,
        params: &Params,
        sink: &mut Sink,
    ) -> Result<Summary, QueryError> {
        let t0 = Instant::now();
        // A commit left unsynced that no one took: synced before anything else runs
        // (a query, or a command: BEGIN's snapshot must hold it too).
        if let Some(u) = self.unsynced.take() {
            u.wait()?;
        }
        let stmt = match self.parsed.get(text) {
            Some(stmt) => stmt,
            None => match quiver_cypher::parse(text)? {
                Parsed::Command(c) => return self.command(c, t0, params, sink),
                Parsed::Query(stmt) => {
                    let stmt = Arc::new(Prepared::new(stmt));
                    self.parsed.keep(text, &stmt);
                    stmt
                }
            },
        };
        self.query(text, &stmt, params, sink)
    }

    /// The last auto-commit statement's commit when it was left unsynced
    /// ([`Session::defer_sync`]): the caller waits for its sync before it answers.
    pub fn take_unsynced(&mut self) -> Option<quiver_engine::Unsynced> {
        self.unsynced.take()
    }

    pub(crate) fn query(
        &mut self,
        text: &str,
        prepared: &Prepared,
        params: &Params,
        sink: &mut Sink,
    ) -> Result<Summary, QueryError> {
        let stmt = &prepared.stmt;
        let writes = stmt.query.writes();
        let explicit = self.tx.is_some();
        // A read outside a transaction runs on the committed snapshot, registering
        // nothing; anything else runs in the open transaction or a new one.
        let mut tx = match self.tx.take() {
            Some(tx) => Some(tx),
            None if writes => Some(self.store.begin()),
            None => None,
        };
        let (db, delta) = match &mut tx {
            Some(tx) => {
                if writes {
                    for p in &stmt.query.parts {
                        intern_names(p, &mut tx.work);
                    }
                }
                (tx.snap.db.clone(), Arc::new(tx.work.clone()))
            }
            None => {
                let snap = self.store.snapshot();
                (snap.db, snap.delta)
            }
        };
        self.refresh_indexes(&db);
        let r = prepared.check(text).and_then(|()| {
            run_statement(
                &db,
                Some(delta),
                tx.as_mut().filter(|_| writes),
                explicit,
                &self.indexes,
                text,
                stmt,
                params,
                &self.opts,
                sink,
            )
        });
        let Some(tx) = tx else { return r };
        if !explicit {
            let s = r?;
            if self.defer_sync {
                self.unsynced = Some(tx.commit_unsynced()?);
            } else {
                tx.commit()?;
            }
            self.maybe_checkpoint();
            return Ok(s);
        }
        match r {
            Ok(s) => {
                self.tx = Some(tx);
                Ok(s)
            }
            Err(e) => {
                tx.rollback();
                Err(QueryError::RolledBack(Box::new(e)))
            }
        }
    }

    /// Checkpoints when the log or the delta has grown past its threshold (on a thread
    /// of its own when the store says so).
    pub(crate) fn maybe_checkpoint(&mut self) {
        self.store.checkpoint_if_due(u64::MAX);
    }
}

/// Labels and relationship types a writing statement names, so that the planner knows
/// them before the statement creates them (a MERGE must find what an earlier row made).
fn intern_names(q: &quiver_cypher::ast::SingleQuery, d: &mut quiver_engine::Delta) {
    use quiver_cypher::ast::{Clause, Pattern, SetItem};
    let pat = |p: &Pattern, d: &mut quiver_engine::Delta| {
        for n in std::iter::once(&p.start).chain(p.steps.iter().map(|s| &s.1)) {
            for l in &n.labels {
                d.intern_label(&Arc::from(l.as_str()));
            }
            if let Some(e) = &n.label_expr {
                e.for_each_name(&mut |l| {
                    d.intern_label(&Arc::from(l.as_str()));
                });
            }
        }
        for (r, _) in &p.steps {
            for t in &r.types {
                d.intern_type(&Arc::from(t.as_str()));
            }
            if let Some(e) = &r.type_expr {
                e.for_each_name(&mut |t| {
                    d.intern_type(&Arc::from(t.as_str()));
                });
            }
        }
    };
    for c in &q.clauses {
        match c {
            Clause::Match { patterns, .. } | Clause::Create(patterns) => {
                for p in patterns {
                    pat(p, d);
                }
            }
            Clause::Merge { pattern, .. } => pat(pattern, d),
            Clause::Set(items) => {
                for i in items {
                    if let SetItem::Labels { labels, .. } = i {
                        for l in labels {
                            d.intern_label(&Arc::from(l.as_str()));
                        }
                    }
                }
            }
            Clause::CallInTx { body, .. } => intern_names(body, d),
            Clause::CallSubquery { body, unions, .. } => {
                intern_names(body, d);
                for (_, p) in unions {
                    intern_names(p, d);
                }
            }
            _ => {}
        }
    }
}
