//! What a statement is run with and what it reports: `QueryOptions` (limits, deadline,
//! load directories, hooks), the default memory limits, and the `Summary` of a run.

use super::*;

/// Per-query settings.
#[derive(Debug, Clone)]
pub struct QueryOptions {
    /// Bytes a query's operators may hold (hash tables, sort buffers, BFS frontiers).
    /// Where operators spill what outgrows their grant (a full ORDER BY's sorted
    /// runs); `None`: they fail instead. Default: the system's temporary directory.
    pub temp_dir: Option<PathBuf>,
    pub memory_limit: u64,
    /// How long a request for memory waits while other queries hold the database's
    /// limit, before the query fails (see [`quiver_common::memory::WaitPolicy`]).
    pub memory_wait: Duration,
    /// Set to stop a running query (Ctrl-C in the shell).
    pub cancel: Option<Arc<AtomicBool>>,
    /// Past this instant the query stops as if cancelled (checked where cancellation
    /// is, once a batch): a server runs a statement that has been quick on its I/O
    /// thread with a short deadline, and on a worker if it is not done by then.
    pub deadline: Option<Instant>,
    /// Where LOAD CSV may read files (`None`: LOAD CSV is refused).
    pub import_dir: Option<PathBuf>,
    /// Where LOAD CSV ... IGNORE BAD writes the rows it skips (a file per statement).
    pub rejects_dir: Option<PathBuf>,
    /// The database's memory budget: a query's operators take their grants from it
    /// as well as from `memory_limit` (`None`: only the query's own limit).
    pub database_memory: Option<MemoryBudget>,
    /// Told the result's column names once the statement is planned, before its first
    /// row (a server answers RUN with them and streams the rows as they are pulled).
    pub on_columns: Option<ColumnsHook>,
    /// Procedures `CALL` may run besides the built-in `db.*` ones.
    pub procedures: procs::Procedures,
    /// Where running queries are listed (SHOW TRANSACTIONS), and who runs them.
    pub activity: Option<Arc<quiver_engine::activity::Activity>>,
    pub client: quiver_engine::activity::Client,
    /// The database's projected graphs (`gds.graph.project`), shared by its sessions.
    pub catalog: Option<Arc<crate::gds::Catalog>>,
}

/// See [`QueryOptions::on_columns`].
#[derive(Clone)]
pub struct ColumnsHook(pub Arc<dyn Fn(&[String]) + Send + Sync>);

impl std::fmt::Debug for ColumnsHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ColumnsHook")
    }
}

/// How long a query waits for the database's memory by default: long enough for the
/// other heavy queries of a busy server to end, short enough that a client learns of
/// an overloaded server (SQL Server waits up to 25 times the plan's cost estimate).
pub const DEFAULT_MEMORY_WAIT: Duration = Duration::from_secs(30);

/// A quarter of the machine's memory, at most 4 GiB.
pub fn default_memory_limit() -> u64 {
    let ram = quiver_common::size::physical_memory_bytes().max(1 << 30);
    (ram / 4).min(4 << 30)
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            memory_limit: default_memory_limit(),
            memory_wait: DEFAULT_MEMORY_WAIT,
            temp_dir: Some(std::env::temp_dir()),
            cancel: None,
            deadline: None,
            import_dir: None,
            rejects_dir: None,
            database_memory: None,
            on_columns: None,
            procedures: procs::Procedures::default(),
            activity: None,
            client: Default::default(),
            catalog: None,
        }
    }
}

/// What a run produced besides its rows.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub columns: Vec<String>,
    pub rows: u64,
    pub elapsed: Duration,
    /// Most bytes the query's operators held at once.
    pub peak_bytes: u64,
    /// The plan (EXPLAIN) or the plan with rows, time and memory per operator (PROFILE).
    pub plan: Option<String>,
    /// EXPLAIN: planned, not run.
    pub explained: bool,
    /// Set by index DDL: the database changed on disk.
    pub changed: bool,
    pub message: Option<String>,
    /// What the statement wrote.
    pub counters: quiver_engine::Counters,
    /// Rows LOAD CSV ... IGNORE BAD skipped, and the file they were written to.
    pub bad_rows: u64,
    pub rejects_path: Option<PathBuf>,
    /// The statement only reads the graph (no writes, procedures or LOAD CSV): running
    /// it again has no effect but its rows ([`quiver_cypher::ast::Query::graph_read`]).
    pub graph_read: bool,
    /// The statement reads or writes the graph and nothing else: in auto-commit it
    /// commits at its end only, so stopped before that it leaves nothing
    /// ([`quiver_cypher::ast::Query::rerunnable`]).
    pub rerunnable: bool,
}

/// Receives result batches as they are produced.
pub type Sink<'s> = dyn FnMut(&Graph, &Batch) -> Result<(), QueryError> + 's;

pub(crate) fn summary_msg(t0: Instant, msg: String) -> Summary {
    Summary {
        elapsed: t0.elapsed(),
        message: Some(msg),
        ..Summary::default()
    }
}
