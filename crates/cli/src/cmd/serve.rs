//! `quiver serve`: the Bolt server, so the Neo4j drivers and tools connect.

use super::DbArgs;
use anyhow::{bail, Context, Result};
use quiver_bolt::{ServeOptions, Users};
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub db: DbArgs,
    /// Address to listen on. Only loopback unless another address is asked for.
    #[arg(long, default_value = "127.0.0.1:7687")]
    pub listen: SocketAddr,
    /// Accept any client without a password (warned about; for local experiments).
    #[arg(long)]
    pub no_auth: bool,
    /// Most authenticated connections at once; a client that logs in past it gets a
    /// transient error (drivers retry). An idle connection holds no thread, only a few
    /// kilobytes.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections: usize,
    /// Most connections at once that have not authenticated yet (they do not take the
    /// authenticated ones' slots); past it a new connection is closed at once.
    #[arg(long, default_value_t = 4096)]
    pub max_pending_connections: usize,
    /// Most statements running at once, each on a worker thread (Neo4j's Bolt thread
    /// pool is 400); a statement past it waits for a worker.
    #[arg(long, default_value_t = 400)]
    pub workers: usize,
    /// Threads that read and write the sockets (0: one a core, at most 8).
    #[arg(long, default_value_t = 0)]
    pub io_threads: usize,
    /// Seconds a connection has to finish the Bolt handshake and log in before it is
    /// closed.
    #[arg(long, default_value_t = 10)]
    pub auth_timeout_secs: u64,
    /// Close a connection silent for this many seconds.
    #[arg(long, default_value_t = 600)]
    pub idle_timeout_secs: u64,
    /// Stop a statement that runs longer than this many seconds (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub query_timeout_secs: u64,
    /// Serve TLS (bolt+s://) with this PEM certificate chain (needs --tls-key).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Serve this folder's web app over HTTP on the Bolt port: the Neo4j Browser's
    /// static site (scripts/neo4j-tools.sh puts a copy in data/neo4j-tools/browser);
    /// open http://ADDRESS/ and connect to the same address.
    #[arg(long, value_name = "DIR")]
    pub browser: Option<std::path::PathBuf>,
    /// Open the database to read only, beside a writer (another `quiver serve` on the
    /// same shared storage, which holds its lock) or with none: the lock is not taken,
    /// writes fail with NotALeader (drivers send them to the writer the routing table
    /// names), and what the writer commits later is seen after a restart.
    #[arg(long)]
    pub read_only: bool,
    /// The servers of this database that take writes, for the ROUTE answer of drivers
    /// with a neo4j:// address (HOST:PORT, comma-separated; usually the one writer).
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT")]
    pub route_writers: Vec<String>,
    /// The servers of this database that serve reads (HOST:PORT, comma-separated):
    /// drivers spread read transactions over them. Default: this server alone.
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT")]
    pub route_readers: Vec<String>,
}

pub fn run(a: Args) -> Result<()> {
    let store = if a.read_only {
        if !a.db.db.join("CURRENT").exists() {
            bail!(
                "{}: no quiver database here (a --read-only server opens an existing one)",
                a.db.db.display()
            );
        }
        quiver_engine::Store::open_read_only(&a.db.db, a.db.store_options(true))?
    } else {
        let session = a.db.open_with(false, true)?;
        let store = session.store().clone();
        drop(session);
        store
    };
    let routing = (!a.route_writers.is_empty() || !a.route_readers.is_empty()).then(|| {
        quiver_bolt::server::Routing {
            writers: a.route_writers.clone(),
            readers: a.route_readers.clone(),
        }
    });
    let users = Users::load(&a.db.db)?;
    if a.no_auth {
        eprintln!(
            "warning: --no-auth: any client that reaches {} can read and write this database",
            a.listen
        );
    } else if users.is_empty() {
        bail!(
            "{} has no users, so nobody could log in: add one with `quiver user add NAME --db {}` (or serve with --no-auth)",
            a.db.db.display(),
            a.db.db.display()
        );
    }
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => Some(
            quiver_bolt::server::tls_config(c, k).context("loading the TLS certificate and key")?,
        ),
        _ => None,
    };
    if let Some(b) = &a.browser {
        if !b.join("index.html").is_file() {
            bail!(
                "{} has no index.html: give the folder of the Neo4j Browser's static site (scripts/neo4j-tools.sh fetches it into data/neo4j-tools/browser)",
                b.display()
            );
        }
    }
    let listener =
        TcpListener::bind(a.listen).with_context(|| format!("listening on {}", a.listen))?;
    // `quiver import --append` from other processes, through the control port: open
    // before the line below says the server is ready.
    // (Only the writer: a reader must not take the writer's control file.)
    let _control = if store.is_writable() {
        Some(super::control::start(store.clone())?)
    } else {
        None
    };
    let listen = listener.local_addr()?;
    eprintln!(
        "quiver: serving {} over Bolt on {listen} ({}, {}{})",
        a.db.db.display(),
        if tls.is_some() { "TLS" } else { "no TLS" },
        if a.no_auth {
            "no authentication"
        } else {
            "users of the database"
        },
        if store.is_writable() {
            ""
        } else {
            ", read only"
        }
    );
    if let Some(b) = &a.browser {
        let scheme = if tls.is_some() { "https" } else { "http" };
        // (Not eprintln!: a caller that read the line above and closed the pipe must
        // not stop the server.)
        let _ = writeln!(
            std::io::stderr(),
            "quiver: the web app in {} at {scheme}://{listen}/ (connect it to {listen})",
            b.display()
        );
    }
    let opts = ServeOptions {
        listen,
        auth: !a.no_auth,
        max_connections: a.max_connections,
        max_pending: a.max_pending_connections.max(1),
        workers: a.workers.max(1),
        io_threads: a.io_threads,
        auth_timeout: Duration::from_secs(a.auth_timeout_secs.max(1)),
        idle_timeout: Duration::from_secs(a.idle_timeout_secs.max(1)),
        query_memory_limit: a.db.query_memory_limit,
        import_dir: a.db.import_dir.clone(),
        temp_dir: a.db.temp_dir.clone(),
        memory_wait: Some(Duration::from_secs_f64(a.db.memory_wait_secs)),
        tls,
        query_timeout: (a.query_timeout_secs > 0)
            .then(|| Duration::from_secs(a.query_timeout_secs)),
        browser: a.browser.clone(),
        routing,
        ..ServeOptions::default()
    };
    quiver_bolt::serve(listener, store, opts)?;
    Ok(())
}
