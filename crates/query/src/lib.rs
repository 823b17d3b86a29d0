//! Cypher execution over an open database.
//!
//! The path of a query: [`quiver_cypher`] parses and checks the text; [`plan`] binds
//! names to labels, types and properties of the database and builds a tree of physical
//! operators ([`ops`]); the tree runs pulling [`batch::Batch`]es of rows whose values
//! reference storage ([`value`]); [`render`] turns results into text, CSV or JSON.
//!
//! Queries take `&Database` and hold no locks: a database generation is immutable, so
//! any number of threads can query one open database at once, each seeing the
//! generation it opened (a consistent snapshot). [`Session`] adds what needs the
//! directory: index DDL (which publishes a new generation) and reopening.
//!
//! **Invariant:** library code never panics on a query; every failure is a
//! [`QueryError`].

pub mod append;
pub mod batch;
pub mod error;
pub mod expr;
pub mod fulltext;
pub mod graph;
pub mod index;
pub(crate) mod memory;
pub mod ops;
pub mod plan;
pub mod procs;
pub mod render;
pub mod vector;

mod cache;
mod options;
mod text;

pub use cache::*;
/// The write operators and LOAD CSV live with the other operators, by family.
pub use ops::{load, write};
pub use options::*;
/// The value type lives in the engine (the delta stores values); re-exported here.
pub use quiver_engine::value;
pub use text::*;

pub use error::QueryError;
pub use graph::Graph;
pub use plan::Params;
pub use value::Value;

use batch::Batch;
use index::IndexSet;
use ops::{Cx, OpStats};
use quiver_common::memory::MemoryBudget;
use quiver_common::size::human_bytes;
use quiver_cypher::ast::Explain;
use quiver_cypher::ast::{Command, Parsed};
use quiver_engine::{StorageMode, Store, StoreOptions, Txn};
use quiver_storage::{Database, OpenMode};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn render_plan(descs: &[plan::Desc], root: usize, stats: Option<&[OpStats]>) -> String {
    let mut out = String::new();
    fn walk(
        descs: &[plan::Desc],
        id: usize,
        depth: usize,
        stats: Option<&[OpStats]>,
        out: &mut String,
    ) {
        let d = &descs[id];
        out.push_str(&"  ".repeat(depth));
        out.push_str(d.name);
        if !d.detail.is_empty() {
            out.push_str(&format!(" {}", d.detail));
        }
        if let Some(s) = stats {
            let st = &s[id];
            let child_ns: u64 = d.children.iter().map(|&c| s[c].nanos).sum();
            let own = st.nanos.saturating_sub(child_ns);
            out.push_str(&format!(
                "  [rows {}, time {:.3} ms (self {:.3} ms){}]",
                st.rows,
                st.nanos as f64 / 1e6,
                own as f64 / 1e6,
                if st.peak_bytes > 0 {
                    format!(", memory {}", human_bytes(st.peak_bytes))
                } else {
                    String::new()
                }
            ));
        }
        out.push('\n');
        for &c in &d.children {
            walk(descs, c, depth + 1, stats, out);
        }
    }
    walk(descs, root, 0, stats, &mut out);
    out
}

/// Runs one read query against `db`, passing result batches to `sink`.
pub fn run(
    db: &Database,
    indexes: &IndexSet,
    text: &str,
    params: &Params,
    opts: &QueryOptions,
    sink: &mut Sink,
) -> Result<Summary, QueryError> {
    let stmt = quiver_cypher::parse_query(text)?;
    quiver_cypher::bind::check(text, &stmt)?;
    run_statement(
        db, None, None, false, indexes, text, &stmt, params, opts, sink,
    )
}

/// Runs a parsed statement that passed `bind::check` on `db` plus `delta`, writing
/// through `tx` when given.
#[allow(clippy::too_many_arguments)]
pub fn run_statement(
    db: &Database,
    delta: Option<Arc<quiver_engine::Delta>>,
    tx: Option<&mut quiver_engine::Txn>,
    explicit_tx: bool,
    indexes: &IndexSet,
    text: &str,
    stmt: &quiver_cypher::ast::Statement,
    params: &Params,
    opts: &QueryOptions,
    sink: &mut Sink,
) -> Result<Summary, QueryError> {
    let t0 = Instant::now();
    let writes = stmt.query.writes();
    if writes && tx.is_none() {
        return Err(QueryError::Unsupported(
            "this statement writes; run it through a session (quiver query / shell)".into(),
        ));
    }
    let g = Graph::with_delta(db, delta, writes);
    procs::check(text, stmt, &opts.procedures)?;
    let mut planner = plan::Planner::new(&g, params, indexes, &opts.procedures);
    let (root, columns) = planner.plan(&stmt.query)?;
    let descs = std::mem::take(&mut planner.descs);
    if let Some(h) = &opts.on_columns {
        (h.0)(&columns);
    }
    if stmt.explain == Some(Explain::Explain) {
        return Ok(Summary {
            columns,
            plan: Some(render_plan(&descs, root.id, None)),
            explained: true,
            elapsed: t0.elapsed(),
            ..Summary::default()
        });
    }
    let before = tx.as_ref().map(|t| t.counters).unwrap_or_default();
    let budget = match &opts.database_memory {
        Some(db) => db.child_waiting(
            opts.memory_limit,
            quiver_common::memory::WaitPolicy {
                timeout: opts.memory_wait,
                cancel: opts.cancel.clone(),
                // Parallel operators wait on rayon's workers: they run queued jobs.
                idle: Some(|| matches!(rayon::yield_now(), Some(rayon::Yield::Executed))),
            },
        ),
        None => MemoryBudget::new(opts.memory_limit),
    };
    // A query that held much gives the memory back when it ends, however it ends
    // (glibc keeps freed memory in its arenas otherwise: a server at rest held 650-800
    // MiB after eight big queries).
    struct Release(MemoryBudget);
    impl Drop for Release {
        fn drop(&mut self) {
            if self.0.peak_bytes() >= quiver_common::memory::RELEASE_AFTER_BYTES {
                quiver_common::memory::release_free_memory();
            }
        }
    }
    let _release = Release(budget.clone());
    let _running = opts
        .activity
        .as_ref()
        .map(|a| a.start(text, &opts.client, &budget));
    let mut cx = Cx {
        env: expr::Env {
            g: &g,
            budget: Some(budget.clone()),
        },
        budget: budget.clone(),
        stats: vec![OpStats::default(); descs.len()],
        cancel: opts.cancel.as_deref(),
        deadline: opts.deadline,
        tx,
        explicit_tx,
        indexes: Some(indexes),
        load: load::LoadState::new(opts.import_dir.clone(), opts.rejects_dir.clone()),
        want: batch::BATCH_ROWS,
        temp_dir: opts.temp_dir.clone(),
    };
    let mut op = root.op;
    let mut rows = 0u64;
    // A statement that ends in an updating clause (no RETURN) has no result rows: its
    // batches only drive the writes.
    let returns = !columns.is_empty();
    while let Some(b) = op.next(&mut cx)? {
        if returns {
            rows += b.len as u64;
            sink(&g, &b)?;
        }
    }
    let plan = (stmt.explain == Some(Explain::Profile))
        .then(|| render_plan(&descs, root.id, Some(&cx.stats)));
    let counters = cx
        .tx
        .as_ref()
        .map(|t| t.counters.since(&before))
        .unwrap_or_default();
    let rejects_path = cx.load.finish()?;
    Ok(Summary {
        columns,
        rows,
        elapsed: t0.elapsed(),
        peak_bytes: budget.peak_bytes(),
        plan,
        counters,
        bad_rows: cx.load.bad_rows,
        rejects_path,
        graph_read: stmt.query.graph_read(),
        rerunnable: stmt.query.rerunnable(),
        ..Summary::default()
    })
}

/// LOAD CSV's defaults for a database at `db`: files come from the `import` folder beside
/// it, skipped rows go to `<db>.rejects/` beside it.
pub fn default_load_dirs(db: &Path) -> (PathBuf, PathBuf) {
    let parent = db
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = db
        .file_name()
        .map_or_else(|| "db".into(), |n| n.to_string_lossy().to_string());
    (
        parent.join("import"),
        parent.join(format!("{name}.rejects")),
    )
}

/// Runs a query and collects its rows.
pub fn query(
    db: &Database,
    text: &str,
    params: &Params,
) -> Result<(Vec<String>, Vec<Vec<Value>>), QueryError> {
    let mut rows = Vec::new();
    let ix = IndexSet::load(db);
    let s = run(
        db,
        &ix,
        text,
        params,
        &QueryOptions::default(),
        &mut |_, b| {
            for r in 0..b.len {
                rows.push(b.row(r));
            }
            Ok(())
        },
    )?;
    Ok((s.columns, rows))
}

/// An open database and the session's state: an explicit transaction, the indexes,
/// options. What the CLI and the shell (and later the server) talk to.
pub struct Session {
    store: Arc<Store>,
    tx: Option<Txn>,
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

/// A row of SHOW INDEXES: Neo4j 5's columns (`(type, indexProvider)`, the label and
/// property, the owning constraint, the index config), then Quiver's kind and entries.
fn index_row(
    id: usize,
    name: &str,
    (ty, provider): (&str, &str),
    (label, prop): (&str, &str),
    owner: Value,
    config: Vec<(&str, Value)>,
    (kind, entries): (&str, Value),
) -> Vec<Value> {
    vec![
        Value::Int(id as i64),
        Value::str(name),
        Value::str("ONLINE"),
        Value::Float(100.0),
        Value::str(ty),
        Value::str("NODE"),
        Value::list(vec![Value::str(label)]),
        Value::list(vec![Value::str(prop)]),
        Value::str(provider),
        owner,
        Value::Null,
        Value::Null,
        index::options_map(provider, config),
        Value::str(kind),
        entries,
    ]
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

fn summary_msg(t0: Instant, msg: String) -> Summary {
    Summary {
        elapsed: t0.elapsed(),
        message: Some(msg),
        ..Summary::default()
    }
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

    fn query(
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
    fn maybe_checkpoint(&mut self) {
        self.store.checkpoint_if_due(u64::MAX);
    }

    fn command(
        &mut self,
        c: Command,
        t0: Instant,
        params: &Params,
        sink: &mut Sink,
    ) -> Result<Summary, QueryError> {
        let schema = matches!(
            c,
            Command::CreateIndex { .. }
                | Command::DropIndex { .. }
                | Command::CreateVectorIndex { .. }
                | Command::CreateFulltextIndex { .. }
                | Command::DropIndexNamed { .. }
                | Command::CreateConstraint { .. }
                | Command::DropConstraint { .. }
        );
        let reopen = schema && self.suspend_for_schema()?;
        let r = self.command_inner(c, t0, params, sink);
        if reopen {
            self.tx = Some(self.store.begin());
        }
        r
    }

    /// The value of an expression of constants and parameters (a DDL command's name or
    /// options), through `RETURN expr`.
    fn eval_const(
        &mut self,
        e: &quiver_cypher::ast::Expr,
        params: &Params,
    ) -> Result<Value, QueryError> {
        let text = format!("RETURN {} AS v", quiver_cypher::print::expr(e));
        let mut v = Value::Null;
        self.run(&text, params, &mut |_, b| {
            if b.len > 0 {
                v = b.cols[0][0].clone();
            }
            Ok(())
        })?;
        Ok(v)
    }

    /// `CREATE VECTOR INDEX`: its name and options evaluated, checked, and recorded in
    /// a new generation's manifest (searches read the vectors where they are stored).
    #[allow(clippy::too_many_arguments)]
    fn create_vector_index(
        &mut self,
        t0: Instant,
        params: &Params,
        name: &quiver_cypher::ast::Expr,
        if_not_exists: bool,
        (label, relationship): (String, bool),
        prop: String,
        options: Option<quiver_cypher::ast::Expr>,
    ) -> Result<Summary, QueryError> {
        let (name, options) =
            self.index_name_options(name, options.as_ref(), params, "a vector index's")?;
        let (dimensions, similarity) = index::vector_options(&options)?;
        let meta = quiver_storage::manifest::VectorIndexMeta {
            name,
            label,
            property: prop,
            dimensions,
            similarity,
            file: None,
            covers_nodes: 0,
            entries: 0,
            relationship,
        };
        let db = self.db();
        if let Some(v) = db.manifest().vector_indexes.iter().find(|v| {
            v.name == meta.name
                || (v.label == meta.label
                    && v.property == meta.property
                    && v.relationship == meta.relationship)
        }) {
            if if_not_exists {
                return Ok(summary_msg(
                    t0,
                    format!("vector index {} exists already; nothing changed", v.name),
                ));
            }
            return Err(QueryError::Index(format!(
                "a vector index {} on :{}({}) exists already; IF NOT EXISTS accepts that",
                v.name, v.label, v.property
            )));
        }
        let on = if meta.relationship {
            format!("()-[:{}]-() ({})", meta.label, meta.property)
        } else {
            format!(":{}({})", meta.label, meta.property)
        };
        let dims = match meta.dimensions {
            0 => "the vectors' own dimensions".to_string(),
            d => format!("{d} dimensions"),
        };
        let shown = format!(
            "vector index {} on {on} created: {dims}, {}",
            meta.name, meta.similarity
        );
        self.schema_ddl(t0, move |dir, db, budget| {
            index::vector_create_in(dir, db, meta, true, budget)?;
            Ok(shown)
        })
    }

    /// An index DDL's name (a string, perhaps a parameter) and options (`Null` when
    /// none), evaluated; `kind` names the index in the error.
    fn index_name_options(
        &mut self,
        name: &quiver_cypher::ast::Expr,
        options: Option<&quiver_cypher::ast::Expr>,
        params: &Params,
        kind: &str,
    ) -> Result<(String, Value), QueryError> {
        let name = match self.eval_const(name, params)? {
            Value::Str(s) if !s.is_empty() => s.to_string(),
            v => {
                return Err(QueryError::Index(format!(
                    "{kind} name must be a string, got {}",
                    v.type_name()
                )))
            }
        };
        let options = match options {
            Some(e) => self.eval_const(e, params)?,
            None => Value::Null,
        };
        Ok((name, options))
    }

    /// `CREATE FULLTEXT INDEX`: recorded in a new generation (searches scan, so nothing
    /// is built).
    #[allow(clippy::too_many_arguments)]
    fn create_fulltext_index(
        &mut self,
        t0: Instant,
        params: &Params,
        name: &quiver_cypher::ast::Expr,
        if_not_exists: bool,
        labels: Vec<String>,
        properties: Vec<String>,
        options: Option<quiver_cypher::ast::Expr>,
    ) -> Result<Summary, QueryError> {
        let (name, options) =
            self.index_name_options(name, options.as_ref(), params, "a full-text index's")?;
        let analyzer = fulltext::options(&options)?;
        let db = self.db();
        let m = db.manifest();
        if m.fulltext_indexes.iter().any(|f| f.name == name)
            || m.vector_indexes.iter().any(|v| v.name == name)
        {
            if if_not_exists {
                return Ok(summary_msg(
                    t0,
                    format!("an index named {name} exists already; nothing changed"),
                ));
            }
            return Err(QueryError::Index(format!(
                "an index named {name} exists already; IF NOT EXISTS accepts that"
            )));
        }
        let meta = quiver_storage::manifest::FulltextIndexMeta {
            name,
            labels,
            properties,
            analyzer,
        };
        let shown = format!(
            "full-text index {} on :{}({}) created",
            meta.name,
            meta.labels.join("|"),
            meta.properties.join(", ")
        );
        self.schema_ddl(t0, move |dir, db, _| {
            index::fulltext_create_in(dir, db, meta, true)?;
            Ok(shown)
        })
    }

    /// `DROP INDEX name [IF EXISTS]`: a vector index by its name, or a range index by
    /// the name SHOW INDEXES gives it.
    fn drop_index_named(
        &mut self,
        t0: Instant,
        name: &str,
        if_exists: bool,
    ) -> Result<Summary, QueryError> {
        let db = self.db();
        if db
            .manifest()
            .fulltext_indexes
            .iter()
            .any(|v| v.name == name)
        {
            let owned = name.to_string();
            return self.schema_ddl(t0, move |dir, db, _| {
                index::fulltext_drop_in(dir, db, &owned, true)?;
                Ok(format!("full-text index {owned} dropped"))
            });
        }
        if db.manifest().vector_indexes.iter().any(|v| v.name == name) {
            let owned = name.to_string();
            return self.schema_ddl(t0, move |dir, db, _| {
                index::vector_drop_in(dir, db, &owned, true)?;
                Ok(format!("vector index {owned} dropped"))
            });
        }
        let range = index::show(&db).into_iter().find(|i| {
            i.kind == "property"
                && index::constraint_name(&i.label, std::slice::from_ref(&i.property)).replacen(
                    "constraint",
                    "index",
                    1,
                ) == name
        });
        if let Some(i) = range {
            let (label, prop) = (i.label.clone(), i.property.clone());
            return self.schema_ddl(t0, move |dir, db, _| {
                index::drop_in(dir, db, &label, &prop, true)?;
                Ok(format!("index on :{label}({prop}) dropped"))
            });
        }
        if if_exists {
            return Ok(summary_msg(
                t0,
                format!("there is no index named {name}; nothing changed"),
            ));
        }
        Err(QueryError::Index(format!(
            "there is no index named {name}; SHOW INDEXES lists them (DROP INDEX {name} IF EXISTS accepts that)"
        )))
    }

    /// Index and constraint DDL inside an explicit transaction, as the drivers' managed
    /// transactions send it (LangChain's `CREATE CONSTRAINT IF NOT EXISTS`): a
    /// transaction that has not written lets its snapshot go, the DDL runs on its own
    /// (folding the delta and publishing a generation), and the transaction goes on
    /// with a fresh snapshot (`true`). After writes it is refused, as Neo4j refuses a
    /// schema change after a write in one transaction.
    fn suspend_for_schema(&mut self) -> Result<bool, QueryError> {
        match self.tx.take() {
            None => Ok(false),
            Some(tx) if tx.has_written() => {
                self.tx = Some(tx);
                Err(QueryError::Argument(
                    "a schema change (index or constraint) cannot follow writes in the same transaction; commit the writes first (Neo4j refuses this too)".into(),
                ))
            }
            Some(tx) => {
                tx.rollback();
                Ok(true)
            }
        }
    }

    fn command_inner(
        &mut self,
        c: Command,
        t0: Instant,
        params: &Params,
        sink: &mut Sink,
    ) -> Result<Summary, QueryError> {
        match c {
            Command::Begin => {
                if self.tx.is_some() {
                    return Err(QueryError::Argument(
                        "a transaction is already open; COMMIT or ROLLBACK it first".into(),
                    ));
                }
                self.tx = Some(self.store.begin());
                Ok(summary_msg(t0, "transaction started".into()))
            }
            Command::Commit => {
                let tx = self.tx.take().ok_or_else(|| {
                    QueryError::Argument("no transaction is open (BEGIN starts one)".into())
                })?;
                let counters = tx.counters;
                tx.commit()?;
                self.maybe_checkpoint();
                let mut s = summary_msg(t0, "committed".into());
                s.counters = counters;
                Ok(s)
            }
            Command::Rollback => {
                let tx = self.tx.take().ok_or_else(|| {
                    QueryError::Argument("no transaction is open (BEGIN starts one)".into())
                })?;
                tx.rollback();
                Ok(summary_msg(t0, "rolled back".into()))
            }
            Command::Checkpoint => {
                self.no_tx("CHECKPOINT")?;
                let r = self.store.checkpoint()?;
                Ok(summary_msg(
                    t0,
                    format!(
                        "checkpoint: generation {}, {} nodes and {} relationships written to segments, {} property values folded into columns, {} deletions marked, {} ids indexed, {} relationship segments merged, {} changes carried as ops, {} of log freed, {:.1} ms",
                        r.generation,
                        r.nodes_written,
                        r.relationships_written,
                        r.values_folded,
                        r.entities_deleted,
                        r.ids_indexed,
                        r.rel_segments_merged,
                        r.carried_ops,
                        human_bytes(r.log_bytes_freed),
                        r.elapsed.as_secs_f64() * 1e3
                    ),
                ))
            }
            Command::StorageMode(name) => {
                let mode = match name.to_ascii_uppercase().as_str() {
                    "IN_MEMORY_TRANSACTIONAL" => StorageMode::InMemoryTransactional,
                    "IN_MEMORY_ANALYTICAL" => StorageMode::InMemoryAnalytical,
                    _ => {
                        return Err(QueryError::Argument(format!(
                            "unknown storage mode {name}: IN_MEMORY_TRANSACTIONAL or IN_MEMORY_ANALYTICAL"
                        )))
                    }
                };
                self.store.set_mode(mode, usize::from(self.tx.is_some()))?;
                Ok(summary_msg(t0, format!("storage mode: {}", mode.name())))
            }
            Command::FreeMemory => {
                // Old versions live in snapshots; they are freed when the last
                // transaction holding one ends. What remains is the live delta.
                let snap = self.store.snapshot();
                Ok(summary_msg(
                    t0,
                    format!(
                        "versions no open transaction can see are released as their snapshots close ({} open); the live delta holds {}",
                        self.store.active_transactions(),
                        human_bytes(snap.delta.bytes)
                    ),
                ))
            }
            Command::ShowStorageInfo => {
                let snap = self.store.snapshot();
                let d = &snap.delta;
                let live_nodes = snap.db.n_nodes()
                    - snap.db.n_deleted_nodes()
                    - d.nodes
                        .range(..d.base_nodes)
                        .filter(|(_, r)| r.deleted && !r.created)
                        .count() as u64
                    // (Created nodes below `base_nodes`: ids a checkpoint left as
                    // deleted rows for the transaction that then committed them.)
                    + d.nodes
                        .iter()
                        .filter(|(_, r)| r.created && !r.deleted)
                        .count() as u64;
                let seg_edges: u64 = (0..snap.db.rel_types().len())
                    .map(|t| snap.db.rel_types()[t].meta.n_edges - snap.db.n_deleted_edges(t))
                    .sum();
                let created_rels = d
                    .rels
                    .iter()
                    .filter(|(_, r)| r.created && !r.deleted)
                    .count() as u64;
                let deleted_seg_rels = d
                    .rels
                    .iter()
                    .filter(|(_, r)| !r.created && r.deleted)
                    .count() as u64
                    + quiver_engine::view::View::new(&snap.db, d).rels_deleted_with_ends()?;
                let mode = self.store.mode();
                let rows: Vec<(&str, Value)> = vec![
                    ("storage_mode", Value::str(mode.name())),
                    (
                        "durability",
                        Value::str(match mode {
                            StorageMode::InMemoryTransactional => "every commit is in the write-ahead log (fsync)",
                            StorageMode::InMemoryAnalytical => "writes are durable after CHECKPOINT (no log, no rollback across statements, no isolation)",
                        }),
                    ),
                    ("nodes", Value::Int(live_nodes as i64)),
                    ("relationships", Value::Int((seg_edges + created_rels - deleted_seg_rels) as i64)),
                    ("generation", Value::Int(snap.db.manifest().generation as i64)),
                    ("segment_bytes", Value::Int(snap.db.disk_bytes() as i64)),
                    ("segment_resident_bytes", Value::Int(snap.db.resident_bytes() as i64)),
                    ("delta_bytes", Value::Int(d.bytes as i64)),
                    ("delta_changes", Value::Int(d.changes as i64)),
                    ("log_bytes", Value::Int(self.store.log_bytes() as i64)),
                    ("open_transactions", Value::Int(self.store.active_transactions() as i64)),
                    ("memory_limit", Value::Int(self.store.memory.limit_bytes() as i64)),
                    ("memory_in_use", Value::Int(self.store.memory.used_bytes() as i64)),
                    ("memory_delta_granted", Value::Int(self.store.delta_granted_bytes() as i64)),
                    ("query_memory_limit", Value::Int(self.opts.memory_limit as i64)),
                ];
                let rows = rows
                    .into_iter()
                    .map(|(k, v)| vec![Value::str(k), v])
                    .collect();
                table(&snap.db, &["key", "value"], rows, t0, sink)
            }
            Command::ShowDatabases => {
                let db = self.db();
                let row = vec![
                    Value::str("neo4j"),
                    Value::str("standard"),
                    Value::list(Vec::new()),
                    Value::str(if self.store.is_writable() {
                        "read-write"
                    } else {
                        "read-only"
                    }),
                    Value::str("primary"),
                    Value::Bool(true),
                    Value::str("online"),
                    Value::str("online"),
                    Value::str(""),
                    Value::Bool(true),
                    Value::Bool(true),
                    Value::list(Vec::new()),
                ];
                table(
                    &db,
                    &[
                        "name",
                        "type",
                        "aliases",
                        "access",
                        "role",
                        "writer",
                        "requestedStatus",
                        "currentStatus",
                        "statusMessage",
                        "default",
                        "home",
                        "constituents",
                    ],
                    vec![row],
                    t0,
                    sink,
                )
            }
            Command::CreateVectorIndex {
                name,
                if_not_exists,
                label,
                prop,
                options,
                relationship,
            } => self.create_vector_index(
                t0,
                params,
                &name,
                if_not_exists,
                (label, relationship),
                prop,
                options,
            ),
            Command::CreateFulltextIndex {
                name,
                if_not_exists,
                labels,
                props,
                options,
            } => {
                self.create_fulltext_index(t0, params, &name, if_not_exists, labels, props, options)
            }
            Command::DropIndexNamed { name, if_exists } => {
                self.drop_index_named(t0, &name, if_exists)
            }
            Command::ShowIndexes => {
                let db = self.db();
                // Neo4j 5's columns, then Quiver's own: what kind of index, how many
                // entries.
                let rows = index::show(&db)
                    .into_iter()
                    .enumerate()
                    .map(|(n, i)| {
                        let props = vec![i.property.clone()];
                        let key = index::constraint_name(&i.label, &props);
                        let (name, owner) = match i.kind {
                            "unique" => (key.clone(), Value::str(&key)),
                            "id (automatic)" => (key.replacen("constraint", "id", 1), Value::Null),
                            _ => (key.replacen("constraint", "index", 1), Value::Null),
                        };
                        index_row(
                            n + 1,
                            &name,
                            ("RANGE", "range-1.0"),
                            (&i.label, &i.property),
                            owner,
                            Vec::new(),
                            (i.kind, Value::Int(i.entries as i64)),
                        )
                    })
                    .collect();
                let mut rows: Vec<Vec<Value>> = rows;
                for v in &db.manifest().vector_indexes {
                    let kind = match (v.relationship, &v.file) {
                        (false, Some(_)) => ("vector (HNSW)", Value::Int(v.entries as i64)),
                        _ => ("vector (exact search)", Value::Null),
                    };
                    let mut row = index_row(
                        rows.len() + 1,
                        &v.name,
                        ("VECTOR", "vector-2.0"),
                        (&v.label, &v.property),
                        Value::Null,
                        vec![
                            (
                                "vector.dimensions",
                                match v.dimensions {
                                    0 => Value::Null,
                                    d => Value::Int(d as i64),
                                },
                            ),
                            ("vector.similarity_function", Value::str(&v.similarity)),
                        ],
                        kind,
                    );
                    if v.relationship {
                        row[5] = Value::str("RELATIONSHIP");
                    }
                    rows.push(row);
                }
                for f in &db.manifest().fulltext_indexes {
                    let mut row = index_row(
                        rows.len() + 1,
                        &f.name,
                        ("FULLTEXT", "fulltext-1.0"),
                        ("", ""),
                        Value::Null,
                        vec![
                            ("fulltext.analyzer", Value::str(&f.analyzer)),
                            ("fulltext.eventually_consistent", Value::Bool(false)),
                        ],
                        ("fulltext (scan)", Value::Null),
                    );
                    row[6] = Value::list(f.labels.iter().map(|l| Value::str(l)).collect());
                    row[7] = Value::list(f.properties.iter().map(|p| Value::str(p)).collect());
                    rows.push(row);
                }
                table(
                    &db,
                    &[
                        "id",
                        "name",
                        "state",
                        "populationPercent",
                        "type",
                        "entityType",
                        "labelsOrTypes",
                        "properties",
                        "indexProvider",
                        "owningConstraint",
                        "lastRead",
                        "readCount",
                        "options",
                        "kind",
                        "entries",
                    ],
                    rows,
                    t0,
                    sink,
                )
            }
            Command::CreateIndex {
                label,
                prop,
                if_not_exists: true,
            } if self
                .db()
                .manifest()
                .indexes
                .iter()
                .any(|i| i.label == label && i.property == prop) =>
            {
                Ok(summary_msg(
                    t0,
                    format!("index on :{label}({prop}) exists already; nothing changed"),
                ))
            }
            Command::CreateIndex { label, prop, .. } => self.schema_ddl(t0, |dir, db, budget| {
                let n = index::create_in(dir, db, &label, &prop, true, budget)?;
                Ok(format!("index on :{label}({prop}) created, {n} entries"))
            }),
            Command::DropIndex { label, prop } => self.schema_ddl(t0, |dir, db, _| {
                index::drop_in(dir, db, &label, &prop, true)?;
                Ok(format!("index on :{label}({prop}) dropped"))
            }),
            Command::CreateConstraint {
                name,
                label,
                props,
                if_not_exists,
            } => {
                let shown = format!("(:{label} {{{}}})", props.join(", "));
                let existing = index::constraints(&self.db());
                let same = existing.iter().find(|c| c.1 == label && c.2 == props);
                let named = name
                    .as_ref()
                    .and_then(|n| existing.iter().find(|c| &c.0 == n));
                match (same.or(named), if_not_exists) {
                    (Some(c), true) => {
                        return Ok(summary_msg(
                            t0,
                            format!("constraint {} exists already; nothing changed", c.0),
                        ))
                    }
                    (Some(c), false) if same.is_some() => {
                        return Err(QueryError::Index(format!(
                            "a uniqueness constraint on {shown} exists already ({}); IF NOT EXISTS accepts that",
                            c.0
                        )))
                    }
                    (Some(c), false) => {
                        return Err(QueryError::Index(format!(
                            "a constraint named {} exists already (on :{}({})); choose another name",
                            c.0,
                            c.1,
                            c.2.join(", ")
                        )))
                    }
                    (None, _) => {}
                }
                if let [prop] = props.as_slice() {
                    return self.schema_ddl(t0, |dir, db, budget| {
                        index::constrain_in(
                            dir,
                            db,
                            name.as_deref(),
                            &label,
                            prop,
                            true,
                            true,
                            budget,
                        )
                    });
                }
                self.no_tx("index and constraint DDL")?;
                // Two nodes that already share every value refuse it, as Neo4j does.
                let q = |x: &str| format!("`{}`", x.replace('`', "``"));
                let vals: Vec<String> = props.iter().map(|p| format!("n.{}", q(p))).collect();
                let text = format!(
                    "MATCH (n:{}) WHERE {} WITH {}, collect(id(n)) AS ids WHERE size(ids) > 1 RETURN ids[0], ids[1], [{}] LIMIT 1",
                    q(&label),
                    vals.iter().map(|v| format!("{v} IS NOT NULL")).collect::<Vec<_>>().join(" AND "),
                    vals.iter().enumerate().map(|(i, v)| format!("{v} AS k{i}")).collect::<Vec<_>>().join(", "),
                    (0..vals.len()).map(|i| format!("k{i}")).collect::<Vec<_>>().join(", "),
                );
                let mut dup = None;
                self.run(&text, &Params::new(), &mut |g, b| {
                    if b.len > 0 {
                        dup = Some((
                            render::text(g, &b.cols[0][0])?,
                            render::text(g, &b.cols[1][0])?,
                            render::text(g, &b.cols[2][0])?,
                        ));
                    }
                    Ok(())
                })?;
                if let Some((a, b, v)) = dup {
                    return Err(QueryError::Index(format!(
                        "cannot add the constraint: nodes {a} and {b} with label :{label} both have ({}) = {v}",
                        props.join(", ")
                    )));
                }
                let name = name.unwrap_or_else(|| index::constraint_name(&label, &props));
                self.schema_ddl(t0, |dir, db, budget| {
                    index::constrain_composite_in(
                        dir,
                        db,
                        Some(&name),
                        &label,
                        &props,
                        true,
                        budget,
                    )
                })
            }
            Command::DropConstraint {
                name,
                mut label,
                mut props,
                if_exists,
            } => {
                if let Some(n) = &name {
                    if label.is_empty() {
                        match index::constraints(&self.db()).into_iter().find(|c| &c.0 == n) {
                            Some((_, l, p)) => (label, props) = (l, p),
                            None if if_exists => {
                                return Ok(summary_msg(
                                    t0,
                                    format!("there is no constraint named {n}; nothing changed"),
                                ))
                            }
                            None => {
                                return Err(QueryError::Index(format!(
                                    "there is no constraint named {n}; SHOW CONSTRAINTS lists them (DROP CONSTRAINT {n} IF EXISTS accepts that)"
                                )))
                            }
                        }
                    }
                }
                if let [prop] = props.as_slice() {
                    self.schema_ddl(t0, |dir, db, budget| {
                        index::constrain_in(dir, db, None, &label, prop, false, true, budget)
                    })
                } else {
                    self.schema_ddl(t0, |dir, db, budget| {
                        index::constrain_composite_in(dir, db, None, &label, &props, true, budget)
                    })
                }
            }
            Command::ShowTransactions => {
                let db = self.db();
                // The listing lists itself, as Neo4j's does.
                let _me = self.store.activity.start(
                    "SHOW TRANSACTIONS",
                    &self.opts.client,
                    &self.store.memory.child(self.opts.memory_limit),
                );
                let rows = self
                    .store
                    .activity
                    .list()
                    .into_iter()
                    .map(|q| {
                        let m = &q.memory;
                        let waiting = m.waiting_for_bytes();
                        let status = if waiting > 0 {
                            format!("Waiting for memory ({} more)", human_bytes(waiting))
                        } else {
                            "Running".to_string()
                        };
                        let us = q
                            .started
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_micros() as i64);
                        let mut start = String::new();
                        quiver_csv::value::format_datetime(us, &mut start);
                        let dur = |d: Duration| {
                            Value::Duration(Arc::new(quiver_engine::value::Dur {
                                months: 0,
                                days: 0,
                                secs: d.as_secs() as i64,
                                nanos: d.subsec_nanos() as i32,
                            }))
                        };
                        vec![
                            Value::str("neo4j"),
                            Value::str(&format!("neo4j-transaction-{}", q.id)),
                            Value::str(&format!("query-{}", q.id)),
                            Value::str(&q.client.connection),
                            Value::str(&q.client.address),
                            Value::str(&q.client.user),
                            Value::str(&q.text),
                            Value::str(&start),
                            Value::str(&status),
                            dur(q.since.elapsed()),
                            Value::Int(m.used_bytes() as i64),
                            Value::Int((m.used_bytes() + waiting) as i64),
                            Value::Int(m.peak_bytes() as i64),
                            Value::Int(waiting as i64),
                            dur(m.waited()),
                            Value::Int(m.limit_bytes() as i64),
                            Value::Map(Arc::new(Vec::new())),
                            Value::Map(Arc::new(Vec::new())),
                        ]
                    })
                    .collect();
                table(
                    &db,
                    &[
                        "database",
                        "transactionId",
                        "currentQueryId",
                        "connectionId",
                        "clientAddress",
                        "username",
                        "currentQuery",
                        "startTime",
                        "status",
                        "elapsedTime",
                        "estimatedUsedHeapMemory",
                        "memoryAskedBytes",
                        "memoryPeakBytes",
                        "memoryWaitingForBytes",
                        "memoryWaited",
                        "memoryLimitBytes",
                        "metaData",
                        "parameters",
                    ],
                    rows,
                    t0,
                    sink,
                )
            }
            Command::Shown {
                inner,
                text,
                yields,
                columns,
                returns,
            } => {
                // The command's rows, then the YIELD / WHERE / RETURN as a query over them.
                let mut rows: Vec<Vec<Value>> = Vec::new();
                let cols = self
                    .command(*inner, t0, &Params::new(), &mut |_, b| {
                        for r in 0..b.len {
                            rows.push(b.row(r));
                        }
                        Ok(())
                    })?
                    .columns;
                let q = shown_query(&cols, &text, yields, columns.as_deref(), returns);
                let maps = rows
                    .into_iter()
                    .map(|r| {
                        let m: Vec<(Arc<str>, Value)> =
                            cols.iter().map(|c| Arc::from(c.as_str())).zip(r).collect();
                        Value::Map(Arc::new(m))
                    })
                    .collect();
                // The user's parameters (`WHERE name = $index_name`) and the rows.
                let mut params = params.clone();
                params.insert(SHOWN_ROWS.into(), Value::list(maps));
                let stmt = match quiver_cypher::parse(&q)? {
                    Parsed::Query(s) => Prepared::new(s),
                    Parsed::Command(_) => {
                        return Err(QueryError::Argument(format!("not a query: {q}")))
                    }
                };
                self.query(&q, &stmt, &params, sink)
            }
            Command::ShowFunctions => {
                let db = self.db();
                let mut names = expr::Func::names();
                names.sort_unstable_by_key(|n| n.to_lowercase());
                let rows = names
                    .into_iter()
                    .map(|n| {
                        vec![
                            Value::str(&n),
                            Value::str(""),
                            Value::str(""),
                            Value::str(&format!("{n}(..)")),
                            Value::Bool(true),
                            Value::Bool(false),
                        ]
                    })
                    .collect();
                table(
                    &db,
                    &[
                        "name",
                        "category",
                        "description",
                        "signature",
                        "isBuiltIn",
                        "aggregating",
                    ],
                    rows,
                    t0,
                    sink,
                )
            }
            Command::ShowProcedures => {
                let db = self.db();
                let mut procs: Vec<Arc<procs::Procedure>> = procs::builtins().to_vec();
                procs.extend(self.opts.procedures.registered.iter().cloned());
                procs.sort_by(|a, b| a.name.cmp(&b.name));
                procs.dedup_by(|a, b| a.name == b.name);
                let rows = procs
                    .iter()
                    .map(|p| {
                        vec![
                            Value::str(&p.name),
                            Value::str(""),
                            Value::str("READ"),
                            Value::Bool(false),
                            Value::str(&p.signature()),
                        ]
                    })
                    .collect();
                table(
                    &db,
                    &["name", "description", "mode", "worksOnSystem", "signature"],
                    rows,
                    t0,
                    sink,
                )
            }
            Command::ShowConstraints => {
                // Neo4j 5's columns; the index that keeps a constraint shares its name.
                let db = self.db();
                let rows = index::constraints(&db)
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, label, props))| {
                        vec![
                            Value::Int(i as i64 + 1),
                            Value::str(&name),
                            Value::str("UNIQUENESS"),
                            Value::str("NODE"),
                            Value::List(vec![Value::str(&label)].into()),
                            Value::List(
                                props
                                    .iter()
                                    .map(|p| Value::str(p))
                                    .collect::<Vec<_>>()
                                    .into(),
                            ),
                            Value::str(&name),
                            Value::Null,
                        ]
                    })
                    .collect();
                table(
                    &db,
                    &[
                        "id",
                        "name",
                        "type",
                        "entityType",
                        "labelsOrTypes",
                        "properties",
                        "ownedIndex",
                        "propertyType",
                    ],
                    rows,
                    t0,
                    sink,
                )
            }
        }
    }

    fn no_tx(&self, what: &str) -> Result<(), QueryError> {
        match self.tx {
            Some(_) => Err(QueryError::Argument(format!(
                "{what} cannot run inside a transaction; COMMIT or ROLLBACK first"
            ))),
            None => Ok(()),
        }
    }

    /// CREATE INDEX (`create`) or DROP INDEX: a new generation over the segments.
    /// Index and constraint DDL: the delta is folded into segments first (an index is
    /// built over segments), `f` publishes a new generation, and the store reopens on it.
    fn schema_ddl(
        &mut self,
        t0: Instant,
        f: impl FnOnce(&Path, &Database, &MemoryBudget) -> Result<String, QueryError>,
    ) -> Result<Summary, QueryError> {
        self.no_tx("index and constraint DDL")?;
        if !self.store.snapshot().delta.is_empty() {
            self.store.checkpoint()?;
        }
        // No checkpoint publishes between this generation and the reload.
        let publishing = self.store.publishing();
        let db = self.db();
        let msg = f(self.store.dir(), &db, &self.store.memory)?;
        self.store.reload()?;
        drop(publishing);
        let mut s = summary_msg(t0, msg);
        s.changed = true;
        Ok(s)
    }
}

/// A command's result rows (plain values) as one batch to `sink`.
fn table(
    db: &Database,
    columns: &[&str],
    rows: Vec<Vec<Value>>,
    t0: Instant,
    sink: &mut Sink,
) -> Result<Summary, QueryError> {
    let n = rows.len() as u64;
    if n > 0 {
        let mut b = Batch::empty(columns.len());
        for r in rows {
            b.push_row(r);
        }
        sink(&Graph::new(db), &b)?;
    }
    Ok(Summary {
        columns: columns.iter().map(|c| c.to_string()).collect(),
        rows: n,
        elapsed: t0.elapsed(),
        ..Summary::default()
    })
}

/// The parameter that carries a SHOW command's rows into its YIELD / WHERE query.
const SHOWN_ROWS: &str = "__shown_rows";

/// The query that a SHOW command's `YIELD ...` or `WHERE ...` (`text`) reads as over
/// its rows (maps of `cols`): each column bound by name, then `text` as a `WITH` (after
/// YIELD) or its `WHERE`, and a `RETURN` of what was yielded when `text` has none.
fn shown_query(
    cols: &[String],
    text: &str,
    yields: bool,
    yielded: Option<&[String]>,
    returns: bool,
) -> String {
    let q = |c: &str| {
        let plain = c.chars().next().is_some_and(|f| f.is_ascii_alphabetic())
            && c.chars().all(|x| x.is_ascii_alphanumeric() || x == '_');
        if plain {
            c.to_string()
        } else {
            format!("`{}`", c.replace('`', "``"))
        }
    };
    let bind: Vec<String> = cols
        .iter()
        .map(|c| format!("__r.{} AS {}", q(c), q(c)))
        .collect();
    let mut out = format!("UNWIND ${SHOWN_ROWS} AS __r WITH {}", bind.join(", "));
    if yields {
        out += " WITH ";
    } else {
        out += " ";
    }
    out += text;
    if !returns {
        let shown = yielded.map_or_else(|| cols.to_vec(), <[String]>::to_vec);
        out += " RETURN ";
        out += &shown.iter().map(|c| q(c)).collect::<Vec<_>>().join(", ");
    }
    out
}
