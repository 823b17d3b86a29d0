//! What a server is started with: `ServeOptions` (listen address, TLS, workers,
//! limits, routing), the caches connections share, the commit syncer, and the TLS
//! configuration from certificate files.

use super::*;

/// The server's settings.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// Require LOGON with a user of the database (`false`: `--no-auth`).
    pub auth: bool,
    /// Most authenticated connections at once; past it a client that has logged in is
    /// answered with a transient error and closed. An idle connection costs no thread,
    /// only its buffers and session (a few kilobytes).
    pub max_connections: usize,
    /// Most statements running at once: the worker pool's threads (Neo4j's
    /// `server.bolt.thread_pool_max_size`, 400). A statement past it waits for a worker.
    pub workers: usize,
    /// Threads that read and write the sockets (0: one a core, at most 8).
    pub io_threads: usize,
    /// Most connections at once that have not authenticated yet (they count apart, so
    /// that silent sockets cannot take the authenticated ones' slots); past it a new
    /// connection is closed at once.
    pub max_pending: usize,
    /// A connection must finish the handshake and authenticate within this, or it is
    /// closed (PostgreSQL's `authentication_timeout`, shorter).
    pub auth_timeout: Duration,
    /// A connection silent this long is closed.
    pub idle_timeout: Duration,
    /// Largest message after authentication (a RUN with its parameters).
    pub max_message: usize,
    /// Each session's query memory limit (`None`: the default).
    pub query_memory_limit: Option<u64>,
    /// Where LOAD CSV reads from (`None`: the `import` folder beside the database).
    pub import_dir: Option<std::path::PathBuf>,
    /// Where queries spill (`None`: the system's temporary directory).
    pub temp_dir: Option<std::path::PathBuf>,
    /// How long a query waits for memory other queries hold (`None`: the default).
    pub memory_wait: Option<Duration>,
    /// TLS (`bolt+s://`), from `--tls-cert` and `--tls-key`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// A statement running longer is stopped (`None`: no limit).
    pub query_timeout: Option<Duration>,
    /// A web app's folder served over plain HTTP on the Bolt port (the Neo4j Browser's
    /// static site; `http`).
    pub browser: Option<std::path::PathBuf>,
    /// What a ROUTE answer lists (several servers of one database); `None`: this server
    /// alone, in every role it can take.
    pub routing: Option<Routing>,
    /// What the connections learn of the statements they run, shared (not
    /// configuration: one per server, so that its memory does not grow with the
    /// connections).
    pub caches: Arc<Caches>,
}

/// A server's parsed queries and quick statement texts (see [`QUICK`]).
#[derive(Debug, Default)]
pub struct Caches {
    pub(crate) parses: Arc<quiver_query::ParseCache>,
    /// Statement texts that ran as quick graph reads, with each one's debt (see
    /// [`INLINE_SAVES`], [`Conn::run_inline`]).
    pub(crate) quick: Mutex<HashMap<Box<str>, u32>>,
    /// The connections logged in (counted by the listener, `net::Slot`).
    pub(crate) live: Arc<std::sync::atomic::AtomicUsize>,
    /// Runs the syncs that inline writes hand off ([`Conn::await_sync`]).
    pub(crate) syncer: Syncer,
}

impl Caches {
    pub(crate) fn quick(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, u32>> {
        self.quick.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The thread that runs the syncs inline writes hand off (`Lead::Elsewhere`), started
/// at the first. One thread, since one such sync runs at a time; not the blocking
/// pool, which statements on workers can fill (`--workers`), so a sync never waits
/// behind a long query. A hand-off it cannot take (the thread could not start) runs
/// where it was handed.
#[derive(Default)]
pub(crate) struct Syncer(
    std::sync::OnceLock<Mutex<std::sync::mpsc::Sender<quiver_engine::SyncHandoff>>>,
);

impl std::fmt::Debug for Syncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Syncer")
    }
}

impl Syncer {
    pub(crate) fn hand(&self, h: quiver_engine::SyncHandoff) {
        let tx = self.0.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<quiver_engine::SyncHandoff>();
            // (Ends when the server's caches go, with the last sender.)
            let _ = std::thread::Builder::new()
                .name("quiver-sync".into())
                .spawn(move || {
                    for h in rx {
                        h.run();
                    }
                });
            Mutex::new(tx)
        });
        let sent = tx.lock().unwrap_or_else(|e| e.into_inner()).send(h);
        if let Err(unsent) = sent {
            unsent.0.run();
        }
    }
}

/// The servers of one database as drivers with a `neo4j://` address see them: reads
/// spread over `readers`, writes to `writers`.
#[derive(Debug, Clone, Default)]
pub struct Routing {
    /// Addresses (`host:port`) that take writes (the one process that holds the lock).
    pub writers: Vec<String>,
    /// Addresses that serve reads.
    pub readers: Vec<String>,
}

/// A TLS configuration from a PEM certificate chain and a PEM private key.
pub fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> io::Result<Arc<rustls::ServerConfig>> {
    let open = |p: &std::path::Path| {
        std::fs::File::open(p)
            .map(io::BufReader::new)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))
    };
    let certs = rustls_pemfile::certs(&mut open(cert)?).collect::<Result<Vec<_>, _>>()?;
    if certs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: no PEM certificate in it", cert.display()),
        ));
    }
    let key = rustls_pemfile::private_key(&mut open(key)?)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: no PEM private key in it", key.display()),
        )
    })?;
    let bad = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(bad)?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(bad)?;
    Ok(Arc::new(cfg))
}

/// Largest message before authentication: HELLO and LOGON are small, so an
/// unauthenticated client cannot make the server hold much.
pub const PRE_AUTH_MESSAGE_MAX: usize = 64 << 10;

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: "127.0.0.1:7687".parse().expect("valid address"),
            auth: true,
            max_connections: 10_000,
            workers: 400,
            io_threads: 0,
            max_pending: 4096,
            auth_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(600),
            max_message: 64 << 20,
            query_memory_limit: None,
            import_dir: None,
            temp_dir: None,
            memory_wait: None,
            tls: None,
            query_timeout: None,
            browser: None,
            routing: None,
            caches: Arc::default(),
        }
    }
}
