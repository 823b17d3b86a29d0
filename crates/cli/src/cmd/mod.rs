//! Subcommands.

pub mod bench;
pub mod check;
pub mod control;
pub mod export;
pub mod generate;
pub mod import;
pub mod info;
pub mod query;
pub mod serve;
pub mod shell;
pub mod user;

use quiver_common::size::parse_bytes;
use quiver_query::Session;
use quiver_storage::OpenMode;
use std::path::PathBuf;

/// How `query` and `shell` open a database.
#[derive(clap::Args)]
pub struct DbArgs {
    #[arg(long)]
    pub db: PathBuf,
    /// Create an empty database at --db when none is there (a statement that writes
    /// does that anyway; reads, the shell and the server need this).
    #[arg(long)]
    pub create: bool,
    /// mapped (instant open, pages on demand) or loaded (all in RAM first).
    #[arg(long, default_value = "mapped", value_parser = parse_open)]
    pub open: OpenMode,
    /// Most memory a query's operators may hold (e.g. 512MiB, 2GiB).
    #[arg(long, value_parser = parse_bytes)]
    pub query_memory_limit: Option<u64>,
    /// Most memory the open database may hold: its uncommitted and committed writes
    /// (the delta), every query's operators and LOAD CSV's buffers take grants from it
    /// (e.g. 2GiB). A write that cannot get memory fails and rolls back. Default:
    /// three quarters of RAM.
    #[arg(long, value_parser = parse_bytes)]
    pub memory_limit: Option<u64>,
    /// Where LOAD CSV reads files from (paths are confined to it). Default: the `import`
    /// folder beside the database.
    #[arg(long, value_name = "DIR")]
    pub import_dir: Option<PathBuf>,
    /// A checkpoint runs after a commit once the write-ahead log holds this much
    /// (e.g. 64MiB). Between Memgraph's 20 MiB WAL files and PostgreSQL's 1 GB
    /// max_wal_size; a checkpoint folds the changes, so it costs what changed.
    #[arg(long, value_parser = parse_bytes, default_value = "256MiB")]
    pub checkpoint_log_size: u64,
    /// ... or once the committed delta holds this much (at most a quarter of the
    /// memory limit).
    #[arg(long, value_parser = parse_bytes, default_value = "512MiB")]
    pub checkpoint_delta_size: u64,
    /// Where a query spills what outgrows its memory (a sort's runs); default the
    /// system's temporary directory ($TMPDIR or /tmp).
    #[arg(long)]
    pub temp_dir: Option<PathBuf>,
    /// How long a query waits for memory that other queries hold once --memory-limit
    /// is reached, before it fails (seconds). When every query holding memory waits
    /// for more, the youngest gives way at once.
    #[arg(long, default_value_t = quiver_query::DEFAULT_MEMORY_WAIT.as_secs_f64())]
    pub memory_wait_secs: f64,
}

impl DbArgs {
    /// The session for statements that read only, unless `writes`: a path with no
    /// database is an error (a typo must not look like an empty graph) unless the
    /// statements write or `--create` is given; then an empty database is made there,
    /// and stderr says so.
    pub fn open(&self, writes: bool) -> anyhow::Result<Session> {
        self.open_with(writes, false)
    }

    /// The session, with automatic checkpoints on a thread of their own (a server).
    /// The store's options these arguments give.
    pub fn store_options(&self, background_checkpoints: bool) -> quiver_engine::StoreOptions {
        quiver_engine::StoreOptions {
            open_mode: self.open,
            memory_limit: self
                .memory_limit
                .unwrap_or_else(quiver_engine::store::default_memory_limit),
            checkpoint_log_bytes: self.checkpoint_log_size,
            checkpoint_delta_bytes: self.checkpoint_delta_size,
            background_checkpoints,
        }
    }

    pub fn open_with(&self, writes: bool, background_checkpoints: bool) -> anyhow::Result<Session> {
        if !self.db.join("CURRENT").exists() {
            let empty_dir = std::fs::read_dir(&self.db).is_ok_and(|mut d| d.next().is_none());
            if !(self.db.exists() && !empty_dir) {
                if !(writes || self.create) {
                    anyhow::bail!(
                        "{}: no quiver database here; create one with `quiver import --db {} --nodes ...`, or pass --create for an empty one",
                        self.db.display(),
                        self.db.display()
                    );
                }
                eprintln!("quiver: created an empty database at {}", self.db.display());
            }
        }
        let opts = self.store_options(background_checkpoints);
        let mut session = Session::open_opts(&self.db, opts, true)?;
        if let Some(l) = self.query_memory_limit {
            session.opts.memory_limit = l;
        }
        if let Some(d) = &self.temp_dir {
            session.opts.temp_dir = Some(d.clone());
        }
        session.opts.memory_wait =
            std::time::Duration::from_secs_f64(self.memory_wait_secs.max(0.0));
        if let Some(d) = &self.import_dir {
            session.opts.import_dir = Some(d.clone());
        }
        Ok(session)
    }
}

/// `--open mapped|loaded|offline`.
pub fn parse_open(s: &str) -> Result<OpenMode, String> {
    s.parse()
}
