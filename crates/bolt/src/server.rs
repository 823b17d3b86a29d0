//! The Bolt server: the handshake, chunked messages, and one connection's state
//! machine (HELLO, LOGON, RUN, PULL, DISCARD, BEGIN, COMMIT, ROLLBACK, RESET, LOGOFF,
//! ROUTE, TELEMETRY, GOODBYE).
//!
//! Each connection has two threads: the connection's, which reads messages and writes
//! responses, and a worker that owns the connection's `Session` and runs its
//! statements. A statement's rows reach the connection through a channel of two
//! batches: the worker blocks while the client has not pulled, so a result never sits
//! whole in server memory (`PULL n` sends n records and keeps the cursor open).

use crate::packstream::{decode, encode, Pack};
use crate::users::Users;
use crate::values::{from_pack, to_pack};
use quiver_engine::Store;
use quiver_query::procs::PType;
use quiver_query::{ColumnsHook, Params, QueryError, Session, Value};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HELLO: u8 = 0x01;
const GOODBYE: u8 = 0x02;
const RESET: u8 = 0x0F;
const RUN: u8 = 0x10;
const BEGIN: u8 = 0x11;
const COMMIT: u8 = 0x12;
const ROLLBACK: u8 = 0x13;
const DISCARD: u8 = 0x2F;
const PULL: u8 = 0x3F;
const TELEMETRY: u8 = 0x54;
const ROUTE: u8 = 0x66;
const LOGON: u8 = 0x6A;
const LOGOFF: u8 = 0x6B;
const SUCCESS: u8 = 0x70;
const RECORD: u8 = 0x71;
const IGNORED: u8 = 0x7E;
const FAILURE: u8 = 0x7F;

/// The server's settings.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// Require LOGON with a user of the database (`false`: `--no-auth`).
    pub auth: bool,
    /// Most authenticated connections at once; past it a client that has logged in is
    /// answered with a transient error and closed.
    pub max_connections: usize,
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
            max_connections: 64,
            max_pending: 1024,
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
        }
    }
}

/// The Bolt versions served: 5.1 (the first with LOGON) to 5.4.
const VERSIONS: (u8, u8) = (1, 4);

/// Reads the client's preamble and four proposals; answers the version chosen (or
/// zero, and `None`). A proposal is `[0, range, minor, major]`: versions
/// `major.minor` down to `major.(minor - range)`.
///
/// When the client offers the v1 manifest (`00 00 01 FF`, which drivers for Bolt 5.7+
/// send first), the server answers with it: the manifest marker, a varint count of
/// version ranges, the ranges, and a varint of capabilities (none); the client then
/// sends the version it picked and its capabilities.
pub fn handshake(s: &mut (impl Read + Write)) -> io::Result<Option<(u8, u8)>> {
    let mut b = [0u8; 20];
    s.read_exact(&mut b)?;
    if b[..4] != [0x60, 0x60, 0xB0, 0x17] {
        return Ok(None);
    }
    if b[4..].chunks(4).any(|p| p == [0, 0, 1, 0xFF]) {
        let (lo, hi) = VERSIONS;
        // The manifest, one range (5.hi down to 5.lo), no capabilities.
        s.write_all(&[0, 0, 1, 0xFF, 1, 0, hi - lo, hi, 5, 0])?;
        s.flush()?;
        let mut chosen = [0u8; 4];
        s.read_exact(&mut chosen)?;
        // The client's capabilities: a varint (at most 10 bytes), none understood.
        let mut one = [0u8; 1];
        for _ in 0..10 {
            s.read_exact(&mut one)?;
            if one[0] & 0x80 == 0 {
                break;
            }
        }
        let (minor, major) = (chosen[2], chosen[3]);
        return Ok((major == 5 && (lo..=hi).contains(&minor)).then_some((5, minor)));
    }
    for p in b[4..].chunks(4) {
        let (range, minor, major) = (p[1], p[2], p[3]);
        if major != 5 {
            continue;
        }
        let lo = minor.saturating_sub(range);
        let pick = minor.min(VERSIONS.1);
        if pick >= lo.max(VERSIONS.0) {
            s.write_all(&[0, 0, pick, 5])?;
            s.flush()?;
            return Ok(Some((5, pick)));
        }
    }
    s.write_all(&[0, 0, 0, 0])?;
    s.flush()?;
    Ok(None)
}

/// Reads one chunked message (chunks until a zero-length one), refusing more than
/// `max` bytes. `Ok(None)` at a clean end of stream.
pub fn read_message(r: &mut impl Read, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut msg = Vec::new();
    loop {
        let mut h = [0u8; 2];
        match r.read_exact(&mut h) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && msg.is_empty() => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        }
        let n = u16::from_be_bytes(h) as usize;
        if n == 0 {
            if msg.is_empty() {
                continue; // a NOOP chunk (keep-alive)
            }
            return Ok(Some(msg));
        }
        if msg.len() + n > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a message larger than {max} bytes"),
            ));
        }
        let at = msg.len();
        msg.resize(at + n, 0);
        r.read_exact(&mut msg[at..])?;
    }
}

/// Input read in as large pieces as the socket gives, so that pipelined messages are
/// seen together (and answered in one write).
struct Pipelined {
    buf: Vec<u8>,
    pos: usize,
    end: usize,
}

struct PipeReader<'a, S> {
    p: &'a mut Pipelined,
    s: &'a mut S,
}

impl Pipelined {
    fn reader<'a, S: Read>(&'a mut self, s: &'a mut S) -> PipeReader<'a, S> {
        PipeReader { p: self, s }
    }
}

impl<S: Read> Read for PipeReader<'_, S> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.p.pos == self.p.end {
            self.p.pos = 0;
            self.p.end = self.s.read(&mut self.p.buf)?;
        }
        let n = out.len().min(self.p.end - self.p.pos);
        out[..n].copy_from_slice(&self.p.buf[self.p.pos..self.p.pos + n]);
        self.p.pos += n;
        Ok(n)
    }
}

/// Appends `v` as one chunked message.
pub fn write_message(out: &mut Vec<u8>, v: &Pack) {
    let mut body = Vec::new();
    encode(v, &mut body);
    for c in body.chunks(u16::MAX as usize) {
        out.extend_from_slice(&(c.len() as u16).to_be_bytes());
        out.extend_from_slice(c);
    }
    out.extend_from_slice(&[0, 0]);
}

/// A Neo4j status code and a message, as drivers map them to their exceptions.
#[derive(Debug, Clone)]
pub struct Failure {
    pub code: &'static str,
    pub message: String,
}

impl Failure {
    fn new(code: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

/// The status code of a query error (drivers raise `CypherSyntaxError`,
/// `ConstraintError`, `TransientError` (retried by managed transactions)...).
pub fn failure(e: &QueryError) -> Failure {
    use quiver_engine::EngineError as E;
    let code = match e {
        QueryError::Parse(_) | QueryError::UnknownFunction(_) => {
            "Neo.ClientError.Statement.SyntaxError"
        }
        QueryError::MissingParam(_) => "Neo.ClientError.Statement.ParameterMissing",
        QueryError::Type(..) => "Neo.ClientError.Statement.TypeError",
        QueryError::Argument(_) | QueryError::ArgumentValue(..) => {
            "Neo.ClientError.Statement.ArgumentError"
        }
        QueryError::Semantic(..) => "Neo.ClientError.Statement.SemanticError",
        QueryError::EntityNotFound(_) => "Neo.ClientError.Statement.EntityNotFound",
        QueryError::Procedure(_) => "Neo.ClientError.Procedure.ProcedureNotFound",
        QueryError::InvalidArgument(..) => "Neo.ClientError.Statement.ArgumentError",
        QueryError::Memory { .. } => "Neo.TransientError.General.MemoryPoolOutOfMemoryError",
        QueryError::Cancelled => "Neo.TransientError.Transaction.Terminated",
        QueryError::Engine(E::Conflict(_)) => "Neo.TransientError.Transaction.DeadlockDetected",
        QueryError::Engine(E::Constraint(_) | E::ConnectedNode { .. }) => {
            "Neo.ClientError.Schema.ConstraintValidationFailed"
        }
        QueryError::Engine(E::PropertyType(_)) => "Neo.ClientError.Statement.TypeError",
        QueryError::Engine(E::Memory(_)) => "Neo.TransientError.General.MemoryPoolOutOfMemoryError",
        // The storage failed (a full disk, a damaged file), not the statement: drivers
        // must not tell the user to fix their query.
        QueryError::Engine(E::Wal(_) | E::Write(_) | E::Apply(_)) => {
            "Neo.DatabaseError.Transaction.TransactionCommitFailed"
        }
        QueryError::RolledBack(inner) => return failure(inner),
        e if e.is_storage_failure() => "Neo.DatabaseError.Statement.ExecutionFailed",
        _ => "Neo.ClientError.Statement.ExecutionFailed",
    };
    Failure::new(code, e.to_string())
}

/// What a statement's run sends the connection.
enum Event {
    Columns(Vec<String>),
    Rows(Vec<Vec<Pack>>),
    Done(Result<Done, Failure>),
}

struct Done {
    columns: Vec<String>,
    /// EXPLAIN's or PROFILE's plan text, and whether it was profiled.
    plan: Option<(String, bool)>,
    counters: quiver_engine::Counters,
    wrote: bool,
}

enum Job {
    Run {
        text: String,
        params: Params,
        events: SyncSender<Event>,
    },
    /// BEGIN, COMMIT or ROLLBACK.
    Tx(&'static str, Sender<Result<(), Failure>>),
    /// The user logged in (empty without authentication).
    User(String),
}

/// The worker: runs the connection's statements on its session, one at a time.
fn worker(mut session: Session, jobs: Receiver<Job>, cancel: Arc<AtomicBool>) {
    let slot: Arc<Mutex<Option<SyncSender<Event>>>> = Arc::new(Mutex::new(None));
    let hook_slot = slot.clone();
    session.opts.cancel = Some(cancel.clone());
    session.opts.on_columns = Some(ColumnsHook(Arc::new(move |cols: &[String]| {
        if let Some(tx) = hook_slot.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = tx.send(Event::Columns(cols.to_vec()));
        }
    })));
    while let Ok(job) = jobs.recv() {
        cancel.store(false, Ordering::Relaxed);
        match job {
            Job::User(name) => {
                // `dbms.showCurrentUser()` (the Browser asks on connect): every user may
                // do everything, as an admin of Neo4j may.
                let row = vec![
                    Value::str(&name),
                    Value::list(vec![Value::str("admin")]),
                    Value::list(Vec::new()),
                ];
                const NAMES: [&str; 2] = ["dbms.showCurrentUser", "dbms.security.showCurrentUser"];
                // (A LOGOFF and a new LOGON replace the user, not add one.)
                session
                    .opts
                    .procedures
                    .registered
                    .retain(|p| !NAMES.contains(&p.name.as_str()));
                for proc_name in NAMES {
                    session.opts.procedures.registered.push(Arc::new(
                        quiver_query::procs::Procedure {
                            name: proc_name.into(),
                            inputs: Vec::new(),
                            optional: 0,
                            outputs: vec![
                                ("username".into(), PType::String),
                                ("roles".into(), PType::Other),
                                ("flags".into(), PType::Other),
                            ],
                            body: quiver_query::procs::Body::Table(vec![(Vec::new(), row.clone())]),
                        },
                    ));
                }
                session.opts.client.user = name;
            }
            Job::Tx(cmd, reply) => {
                let r = session
                    .run(cmd, &Params::new(), &mut |_, _| Ok(()))
                    .map(|_| ())
                    .map_err(|e| failure(&e));
                let _ = reply.send(r);
            }
            Job::Run {
                text,
                params,
                events,
            } => {
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(events.clone());
                let r = session.run(&text, &params, &mut |g, b| {
                    let mut rows = Vec::with_capacity(b.len);
                    for r in 0..b.len {
                        let row: Vec<Pack> = b
                            .cols
                            .iter()
                            .map(|c| to_pack(g, &c[r]))
                            .collect::<Result<_, _>>()?;
                        rows.push(row);
                    }
                    // The client went away or discarded the rest: stop the statement.
                    events
                        .send(Event::Rows(rows))
                        .map_err(|_| QueryError::Cancelled)
                });
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
                let done = r
                    .map(|s| Done {
                        columns: s.columns,
                        plan: s.plan.map(|p| (p, !s.explained)),
                        wrote: !s.counters.is_empty(),
                        counters: s.counters,
                    })
                    .map_err(|e| failure(&e));
                let _ = events.send(Event::Done(done));
            }
        }
    }
    // The connection closed: an open transaction rolls back.
    if session.in_transaction() {
        let _ = session.run("ROLLBACK", &Params::new(), &mut |_, _| Ok(()));
    }
}

/// A statement whose rows are being pulled.
struct Open {
    events: Receiver<Event>,
    pending: VecDeque<Vec<Pack>>,
    done: Option<Result<Done, Failure>>,
    started: Instant,
    /// The query timeout passed and the statement was told to stop.
    timed_out: bool,
}

impl Open {
    /// Takes the statement's next event into `pending` or `done`.
    fn pump(&mut self, timeout: Option<Duration>, cancel: &AtomicBool) {
        match self.recv(timeout, cancel) {
            Ok(Event::Rows(r)) => self.pending.extend(r),
            Ok(Event::Done(d)) => self.done = Some(d),
            Ok(Event::Columns(_)) => {}
            Err(_) => self.done = Some(Err(internal())),
        }
    }

    /// The statement's next event. Past `timeout` since it started, the statement is
    /// cancelled and its cancellation reported as a timeout.
    fn recv(
        &mut self,
        timeout: Option<Duration>,
        cancel: &AtomicBool,
    ) -> Result<Event, mpsc::RecvError> {
        let ev = match timeout {
            Some(t) if !self.timed_out => {
                let left = t.saturating_sub(self.started.elapsed());
                match self.events.recv_timeout(left) {
                    Ok(e) => Ok(e),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        self.timed_out = true;
                        cancel.store(true, Ordering::Relaxed);
                        self.events.recv()
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => Err(mpsc::RecvError),
                }
            }
            _ => self.events.recv(),
        }?;
        Ok(match ev {
            Event::Done(Err(f)) if self.timed_out && f.code == "Neo.TransientError.Transaction.Terminated" => {
                Event::Done(Err(Failure::new("Neo.ClientError.Transaction.TransactionTimedOut", format!(
                        "the statement ran longer than the server's query timeout ({} s) and was stopped",
                        timeout.map_or(0, |t| t.as_secs())
                    ))))
            }
            e => e,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// After HELLO, before LOGON.
    Authentication,
    Ready,
    Streaming,
    TxReady,
    TxStreaming,
    Failed,
    /// After an authentication failure: the connection closes.
    Defunct,
}

struct Conn {
    state: State,
    in_tx: bool,
    jobs: Sender<Job>,
    cancel: Arc<AtomicBool>,
    open: Option<Open>,
    out: Vec<u8>,
    bookmark: u64,
    timeout: Option<Duration>,
}

fn success(out: &mut Vec<u8>, meta: Vec<(&str, Pack)>) {
    write_message(out, &Pack::Struct(SUCCESS, vec![Pack::map(meta)]));
}

fn fail(out: &mut Vec<u8>, f: &Failure) {
    write_message(
        out,
        &Pack::Struct(
            FAILURE,
            vec![Pack::map(vec![
                ("code", Pack::str(f.code)),
                ("message", Pack::str(f.message.clone())),
            ])],
        ),
    );
}

fn stats(c: &quiver_engine::Counters) -> Pack {
    let mut m = Vec::new();
    let mut put = |k: &str, v: u64| {
        if v > 0 {
            m.push((k.to_string(), Pack::Int(v as i64)));
        }
    };
    put("nodes-created", c.nodes_created);
    put("nodes-deleted", c.nodes_deleted);
    put("relationships-created", c.relationships_created);
    put("relationships-deleted", c.relationships_deleted);
    put("properties-set", c.properties_set);
    put("labels-added", c.labels_added);
    put("labels-removed", c.labels_removed);
    Pack::Map(m)
}

impl Conn {
    /// Starts a statement and waits for its columns (or its failure).
    fn run(&mut self, text: String, params: Params) -> Result<Vec<String>, Failure> {
        let (tx, rx) = mpsc::sync_channel(2);
        let started = Instant::now();
        self.jobs
            .send(Job::Run {
                text,
                params,
                events: tx,
            })
            .map_err(|_| internal())?;
        let mut open = Open {
            events: rx,
            pending: VecDeque::new(),
            done: None,
            started,
            timed_out: false,
        };
        loop {
            match open.recv(self.timeout, &self.cancel) {
                Ok(Event::Columns(c)) => {
                    self.open = Some(open);
                    return Ok(c);
                }
                Ok(Event::Rows(r)) => open.pending.extend(r),
                Ok(Event::Done(Ok(d))) => {
                    // A command (SHOW INDEXES...): columns come with its end.
                    let c = d.columns.clone();
                    open.done = Some(Ok(d));
                    self.open = Some(open);
                    return Ok(c);
                }
                Ok(Event::Done(Err(f))) => return Err(f),
                Err(_) => return Err(internal()),
            }
        }
    }

    /// Sends up to `n` records (all for -1) of the open statement, then its summary or
    /// `has_more`. With `discard`, drops them instead.
    fn pull(&mut self, n: i64, discard: bool) {
        let Some(open) = self.open.as_mut() else {
            fail(
                &mut self.out,
                &Failure::new(
                    "Neo.ClientError.Request.Invalid",
                    "nothing to pull: no statement is open",
                ),
            );
            self.state = State::Failed;
            return;
        };
        if discard {
            // Stop the statement; what it already made is dropped.
            self.cancel.store(true, Ordering::Relaxed);
            open.pending.clear();
            while open.done.is_none() {
                open.pump(self.timeout, &self.cancel);
                open.pending.clear();
            }
            // A discarded read that was cut short still ended well for the client.
            if let Some(Err(f)) = &open.done {
                if f.code == "Neo.TransientError.Transaction.Terminated" {
                    open.done = Some(Ok(Done {
                        columns: Vec::new(),
                        plan: None,
                        counters: Default::default(),
                        wrote: false,
                    }));
                }
            }
        }
        let mut sent = 0i64;
        while n < 0 || sent < n {
            if let Some(row) = open.pending.pop_front() {
                write_message(&mut self.out, &Pack::Struct(RECORD, vec![Pack::List(row)]));
                sent += 1;
                continue;
            }
            if open.done.is_some() {
                break;
            }
            open.pump(self.timeout, &self.cancel);
        }
        // n records sent and nothing waiting: one more event tells whether the
        // statement has ended (then the summary goes now, not after another PULL).
        if open.pending.is_empty() && open.done.is_none() {
            open.pump(self.timeout, &self.cancel);
        }
        if !open.pending.is_empty() || open.done.is_none() {
            success(&mut self.out, vec![("has_more", Pack::Bool(true))]);
            return;
        }
        let open = self.open.take().expect("checked above");
        let t_last = open.started.elapsed().as_millis() as i64;
        match open.done.expect("ended") {
            Ok(d) => {
                let mut meta = vec![
                    ("t_last", Pack::Int(t_last)),
                    ("type", Pack::str(if d.wrote { "rw" } else { "r" })),
                    ("db", Pack::str("neo4j")),
                ];
                if !d.counters.is_empty() {
                    meta.push(("stats", stats(&d.counters)));
                }
                if let Some((text, profiled)) = &d.plan {
                    meta.extend(crate::plan::entry(text, *profiled));
                }
                if !self.in_tx {
                    self.bookmark += 1;
                    meta.push(("bookmark", Pack::str(format!("quiver:{}", self.bookmark))));
                }
                success(&mut self.out, meta);
                self.state = if self.in_tx {
                    State::TxReady
                } else {
                    State::Ready
                };
            }
            Err(f) => {
                fail(&mut self.out, &f);
                // A failed statement in a transaction has rolled it back.
                self.in_tx = false;
                self.state = State::Failed;
            }
        }
    }

    fn tx(&mut self, cmd: &'static str) -> Result<(), Failure> {
        let (tx, rx) = mpsc::channel();
        self.jobs.send(Job::Tx(cmd, tx)).map_err(|_| internal())?;
        rx.recv().map_err(|_| internal())?
    }

    /// Drops an open statement and rolls back an open transaction (RESET, errors).
    fn reset(&mut self) {
        if self.open.is_some() {
            // The discard's own responses are not sent; those queued before are.
            let keep = self.out.len();
            self.pull(-1, true);
            self.out.truncate(keep);
        }
        if self.in_tx {
            let _ = self.tx("ROLLBACK");
            self.in_tx = false;
        }
    }
}

fn internal() -> Failure {
    Failure::new(
        "Neo.DatabaseError.General.UnknownError",
        "the statement's worker stopped",
    )
}

fn params_of(p: Option<&Pack>) -> Result<Params, Failure> {
    let mut out = Params::new();
    if let Some(Pack::Map(m)) = p {
        for (k, v) in m {
            let v = from_pack(v).map_err(|message| {
                Failure::new(
                    "Neo.ClientError.Statement.TypeError",
                    format!("parameter ${k}: {message}"),
                )
            })?;
            out.insert(k.clone(), v);
        }
    }
    Ok(out)
}

/// A socket whose reads fail once a deadline passes (`None`: only the idle timeout):
/// a peer that sends a byte a second cannot hold a connection past it.
struct Deadlined {
    s: TcpStream,
    deadline: Option<std::time::Instant>,
    idle: Duration,
}

impl Read for Deadlined {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        if let Some(d) = self.deadline {
            let left = d.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the handshake and authentication took too long",
                ));
            }
            self.s.set_read_timeout(Some(left.min(self.idle)))?;
        }
        self.s.read(b)
    }
}

impl Write for Deadlined {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.s.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.s.flush()
    }
}

/// A stream whose authentication deadline can be lifted (plain or TLS over
/// [`Deadlined`]).
trait Lift {
    fn lift_deadline(&mut self);
}

impl Lift for Deadlined {
    fn lift_deadline(&mut self) {
        self.deadline = None;
        let _ = self.s.set_read_timeout(Some(self.idle));
    }
}

impl Lift for rustls::StreamOwned<rustls::ServerConnection, Deadlined> {
    fn lift_deadline(&mut self) {
        self.sock.lift_deadline();
    }
}

/// What a connection reports to the accept loop: `authenticated` when it has logged in
/// (`false`: the server is full, and it must close).
pub struct Gate<'a> {
    pub authenticated: &'a (dyn Fn() -> bool + Sync),
}

/// Serves one connection until it closes (over TLS when the options have it).
pub fn connection(
    stream: TcpStream,
    store: Arc<Store>,
    users: Arc<Users>,
    opts: &ServeOptions,
    id: usize,
    gate: &Gate<'_>,
) -> io::Result<()> {
    stream.set_read_timeout(Some(opts.auth_timeout.min(opts.idle_timeout)))?;
    stream.set_nodelay(true)?;
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let stream = Deadlined {
        s: stream,
        deadline: Some(std::time::Instant::now() + opts.auth_timeout),
        idle: opts.idle_timeout,
    };
    match &opts.tls {
        Some(cfg) => {
            let conn = rustls::ServerConnection::new(cfg.clone())
                .map_err(|e| io::Error::new(io::ErrorKind::Other, e.to_string()))?;
            let mut s = rustls::StreamOwned::new(conn, stream);
            bolt(&mut s, store, users, opts, id, &peer, gate)
        }
        None => {
            let mut s = stream;
            bolt(&mut s, store, users, opts, id, &peer, gate)
        }
    }
}

/// The first bytes of a connection, read to tell Bolt from an HTTP request, given
/// back before the rest of the stream.
struct Prefixed<'a, S> {
    head: Vec<u8>,
    pos: usize,
    inner: &'a mut S,
}

impl<S: Read> Read for Prefixed<'_, S> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        if self.pos < self.head.len() {
            let n = b.len().min(self.head.len() - self.pos);
            b[..n].copy_from_slice(&self.head[self.pos..self.pos + n]);
            self.pos += n;
            return Ok(n);
        }
        self.inner.read(b)
    }
}

impl<S: Write> Write for Prefixed<'_, S> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.inner.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<S: Lift> Lift for Prefixed<'_, S> {
    fn lift_deadline(&mut self) {
        self.inner.lift_deadline()
    }
}

/// Bolt inside WebSocket binary messages, as the Neo4j Browser and the JavaScript
/// driver in a web page speak it (Neo4j accepts both on its Bolt port): reads give the
/// messages' payloads in order, writes are gathered and each flush sends them as one
/// binary message. Pings are answered by `tungstenite`; a close ends the stream.
struct WsBolt<S: Read + Write> {
    ws: tungstenite::WebSocket<S>,
    input: Vec<u8>,
    pos: usize,
    output: Vec<u8>,
}

fn ws_error(e: tungstenite::Error) -> io::Error {
    match e {
        tungstenite::Error::Io(e) => e,
        e => io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
    }
}

impl<S: Read + Write> Read for WsBolt<S> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.input.len() {
            match self.ws.read() {
                Ok(tungstenite::Message::Binary(d)) => {
                    self.input.clear();
                    self.input.extend_from_slice(&d);
                    self.pos = 0;
                }
                Ok(tungstenite::Message::Close(_))
                | Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                    return Ok(0)
                }
                Ok(_) => {} // pings (answered), pongs, text: not Bolt
                Err(e) => return Err(ws_error(e)),
            }
        }
        let n = b.len().min(self.input.len() - self.pos);
        b[..n].copy_from_slice(&self.input[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl<S: Read + Write> Write for WsBolt<S> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        if !self.output.is_empty() {
            let msg = tungstenite::Message::binary(std::mem::take(&mut self.output));
            self.ws.send(msg).map_err(ws_error)?;
        }
        Ok(())
    }
}

impl<S: Read + Write + Lift> Lift for WsBolt<S> {
    fn lift_deadline(&mut self) {
        self.ws.get_mut().lift_deadline()
    }
}

/// The protocol over an established stream: Bolt, or Bolt over WebSocket when the
/// client opens with an HTTP request (`GET `) to upgrade.
fn bolt(
    stream: &mut (impl Read + Write + Lift),
    store: Arc<Store>,
    users: Arc<Users>,
    opts: &ServeOptions,
    id: usize,
    peer: &str,
    gate: &Gate<'_>,
) -> io::Result<()> {
    let mut head = [0u8; 4];
    stream.read_exact(&mut head)?;
    if &head != b"GET " {
        let mut s = Prefixed {
            head: head.to_vec(),
            pos: 0,
            inner: stream,
        };
        return bolt_on(&mut s, store, users, opts, id, peer, gate);
    }
    // HTTP: a WebSocket upgrade carries Bolt; any other request is a web app's file or
    // the discovery document (`http`).
    let request = crate::http::read_head(stream, &head)?;
    if !crate::http::is_upgrade(&request) {
        return crate::http::respond(stream, &request, opts.browser.as_deref());
    }
    let s = Prefixed {
        head: request,
        pos: 0,
        inner: stream,
    };
    // Messages past the server's limit (the Bolt layer also caps them) and frames of
    // at most 1 MiB, so that no client makes the server buffer more.
    let max = opts.max_message.saturating_add(64 << 10);
    let cfg = tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max.min(1 << 20)));
    let ws = match tungstenite::accept_with_config(s, Some(cfg)) {
        Ok(ws) => ws,
        // Not a WebSocket upgrade, or a broken one: nothing to answer over Bolt.
        Err(tungstenite::HandshakeError::Failure(e)) => return Err(ws_error(e)),
        Err(tungstenite::HandshakeError::Interrupted(_)) => {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the WebSocket handshake did not finish",
            ))
        }
    };
    let mut ws = WsBolt {
        ws,
        input: Vec::new(),
        pos: 0,
        output: Vec::new(),
    };
    let r = bolt_on(&mut ws, store, users, opts, id, peer, gate);
    let _ = ws.ws.close(None);
    let _ = ws.ws.flush();
    r
}

/// The protocol over an established stream.
fn bolt_on(
    stream: &mut (impl Read + Write + Lift),
    store: Arc<Store>,
    users: Arc<Users>,
    opts: &ServeOptions,
    id: usize,
    peer: &str,
    gate: &Gate<'_>,
) -> io::Result<()> {
    if handshake(stream)?.is_none() {
        return Ok(());
    }
    let (jobs, rx) = mpsc::channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let w = {
        let mut session = Session::on(store);
        session.opts.client = quiver_engine::activity::Client {
            connection: format!("bolt-{id}"),
            address: peer.to_string(),
            user: String::new(),
        };
        if let Some(l) = opts.query_memory_limit {
            session.opts.memory_limit = l;
        }
        if let Some(d) = &opts.import_dir {
            session.opts.import_dir = Some(d.clone());
        }
        if let Some(d) = &opts.temp_dir {
            session.opts.temp_dir = Some(d.clone());
        }
        if let Some(w) = opts.memory_wait {
            session.opts.memory_wait = w;
        }
        let cancel = cancel.clone();
        std::thread::Builder::new()
            .name(format!("bolt-{id}-worker"))
            .spawn(move || worker(session, rx, cancel))?
    };
    let mut c = Conn {
        state: State::Authentication,
        in_tx: false,
        jobs,
        cancel,
        open: None,
        out: Vec::new(),
        bookmark: 0,
        timeout: opts.query_timeout,
    };
    let mut hello = false;
    let mut authed = false;
    let mut input = Pipelined {
        buf: vec![0; 64 << 10],
        pos: 0,
        end: 0,
    };
    let r = (|| -> io::Result<()> {
        loop {
            let max = if c.state == State::Authentication {
                PRE_AUTH_MESSAGE_MAX
            } else {
                opts.max_message
            };
            let Some(msg) = read_message(&mut input.reader(stream), max)? else {
                return Ok(());
            };
            let (tag, fields) = match decode(&msg) {
                Ok(Pack::Struct(t, f)) => (t, f),
                Ok(_) | Err(_) => return Ok(()), // not a message: the protocol is broken
            };
            let mut close = handle(&mut c, &mut hello, tag, &fields, &users, opts, id, peer);
            if !authed && !matches!(c.state, State::Authentication | State::Defunct) {
                authed = true;
                stream.lift_deadline();
                if !(gate.authenticated)() {
                    // Logged in, but the server is full: a transient error the driver
                    // retries, in place of the success.
                    c.out.clear();
                    fail(
                        &mut c.out,
                        &Failure::new(
                            "Neo.TransientError.Request.NoThreadsAvailable",
                            format!(
                                "the server has {} connections open, its --max-connections; try again later",
                                opts.max_connections
                            ),
                        ),
                    );
                    close = true;
                }
            }
            // Messages the client pipelined (RUN then PULL) are answered together, in
            // one write, once none is left waiting.
            if close || c.state == State::Defunct || input.pos == input.end {
                stream.write_all(&c.out)?;
                stream.flush()?;
                c.out.clear();
            }
            if close || c.state == State::Defunct {
                return Ok(());
            }
        }
    })();
    c.reset();
    drop(c);
    let _ = w.join();
    r
}

/// Handles one message; `true` when the connection should close.
#[allow(clippy::too_many_arguments)]
fn handle(
    c: &mut Conn,
    hello: &mut bool,
    tag: u8,
    f: &[Pack],
    users: &Users,
    opts: &ServeOptions,
    id: usize,
    peer: &str,
) -> bool {
    if tag == GOODBYE {
        c.reset();
        return true;
    }
    if !*hello {
        if tag != HELLO {
            return true;
        }
        *hello = true;
        success(
            &mut c.out,
            vec![
                (
                    "server",
                    Pack::str(format!(
                        "Neo4j/5.26.0 compatible; Quiver/{}",
                        env!("CARGO_PKG_VERSION")
                    )),
                ),
                ("connection_id", Pack::str(format!("bolt-{id}"))),
                ("hints", Pack::map(vec![])),
            ],
        );
        return false;
    }
    if tag == RESET {
        c.reset();
        if c.state != State::Authentication {
            c.state = State::Ready;
        }
        success(&mut c.out, vec![]);
        return false;
    }
    if c.state == State::Failed {
        write_message(&mut c.out, &Pack::Struct(IGNORED, vec![]));
        return false;
    }
    if c.state == State::Authentication {
        if tag != LOGON {
            fail(
                &mut c.out,
                &Failure::new(
                    "Neo.ClientError.Security.Unauthorized",
                    "authenticate first (LOGON)",
                ),
            );
            c.state = State::Defunct;
            return true;
        }
        let auth = f.first().cloned().unwrap_or(Pack::Null);
        let scheme = auth.get("scheme").and_then(Pack::as_str).unwrap_or("none");
        let ok = if !opts.auth {
            true
        } else if scheme == "basic" {
            let user = auth.get("principal").and_then(Pack::as_str).unwrap_or("");
            let pass = auth.get("credentials").and_then(Pack::as_str).unwrap_or("");
            users.verify(user, pass)
        } else {
            false
        };
        if ok {
            users.login_succeeded(peer);
            c.state = State::Ready;
            let user = if opts.auth {
                auth.get("principal").and_then(Pack::as_str).unwrap_or("")
            } else {
                ""
            };
            let _ = c.jobs.send(Job::User(user.to_string()));
            success(&mut c.out, vec![]);
        } else {
            // Slow down guessing, more with each failure in a row from one address.
            std::thread::sleep(users.login_failed(peer));
            fail(
                &mut c.out,
                &Failure::new(
                    "Neo.ClientError.Security.Unauthorized",
                    "The client is unauthorized due to authentication failure.",
                ),
            );
            c.state = State::Defunct;
        }
        return false;
    }
    let failed = |c: &mut Conn, f: Failure| {
        fail(&mut c.out, &f);
        c.reset();
        c.state = State::Failed;
    };
    match (tag, c.state) {
        (LOGOFF, State::Ready) => {
            c.state = State::Authentication;
            success(&mut c.out, vec![]);
        }
        (TELEMETRY, _) => success(&mut c.out, vec![]),
        (ROUTE, State::Ready) => {
            let addr = Pack::List(vec![Pack::str(opts.listen.to_string())]);
            let server = |role: &str| {
                Pack::map(vec![("addresses", addr.clone()), ("role", Pack::str(role))])
            };
            success(
                &mut c.out,
                vec![(
                    "rt",
                    Pack::map(vec![
                        ("ttl", Pack::Int(300)),
                        ("db", Pack::str("neo4j")),
                        (
                            "servers",
                            Pack::List(vec![server("WRITE"), server("READ"), server("ROUTE")]),
                        ),
                    ]),
                )],
            );
        }
        (BEGIN, State::Ready) => match c.tx("BEGIN") {
            Ok(()) => {
                c.in_tx = true;
                c.state = State::TxReady;
                success(&mut c.out, vec![]);
            }
            Err(e) => failed(c, e),
        },
        (COMMIT | ROLLBACK, State::TxReady) => {
            let cmd = if tag == COMMIT { "COMMIT" } else { "ROLLBACK" };
            c.in_tx = false;
            match c.tx(cmd) {
                Ok(()) => {
                    c.state = State::Ready;
                    let mut meta = vec![];
                    if tag == COMMIT {
                        c.bookmark += 1;
                        meta.push(("bookmark", Pack::str(format!("quiver:{}", c.bookmark))));
                    }
                    success(&mut c.out, meta);
                }
                Err(e) => failed(c, e),
            }
        }
        (RUN, State::Ready | State::TxReady) => {
            let Some(text) = f.first().and_then(Pack::as_str) else {
                failed(
                    c,
                    Failure::new(
                        "Neo.ClientError.Request.Invalid",
                        "RUN needs a query string",
                    ),
                );
                return false;
            };
            let params = match params_of(f.get(1)) {
                Ok(p) => p,
                Err(e) => {
                    failed(c, e);
                    return false;
                }
            };
            let started = Instant::now();
            match c.run(text.to_string(), params) {
                Ok(cols) => {
                    let mut meta = vec![
                        (
                            "fields",
                            Pack::List(cols.into_iter().map(Pack::Str).collect()),
                        ),
                        ("t_first", Pack::Int(started.elapsed().as_millis() as i64)),
                    ];
                    if c.in_tx {
                        meta.push(("qid", Pack::Int(0)));
                    }
                    success(&mut c.out, meta);
                    c.state = if c.in_tx {
                        State::TxStreaming
                    } else {
                        State::Streaming
                    };
                }
                Err(e) => failed(c, e),
            }
        }
        (PULL | DISCARD, State::Streaming | State::TxStreaming) => {
            let n = f
                .first()
                .and_then(|m| m.get("n"))
                .and_then(Pack::as_int)
                .unwrap_or(-1);
            c.pull(n, tag == DISCARD);
            if c.state == State::Failed {
                c.reset();
            }
        }
        (t, s) => failed(
            c,
            Failure::new(
                "Neo.ClientError.Request.Invalid",
                format!("message 0x{t:02X} is not expected in state {s:?}"),
            ),
        ),
    }
    false
}

/// Accepts connections until the process ends. Each gets its own threads. Connections
/// that have not authenticated count against `max_pending` (past it a new one is closed
/// at once) and must authenticate within `auth_timeout`; authenticated ones count
/// against `max_connections` (past it, the login is answered with a transient error).
pub fn serve(listener: TcpListener, store: Arc<Store>, opts: ServeOptions) -> io::Result<()> {
    let users = Arc::new(
        Users::load(store.dir())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?,
    );
    let live = Arc::new(AtomicUsize::new(0));
    let pending = Arc::new(AtomicUsize::new(0));
    let mut next = 0usize;
    for s in listener.incoming() {
        let Ok(stream) = s else { continue };
        next += 1;
        if pending.load(Ordering::SeqCst) >= opts.max_pending {
            // Unauthenticated connections past their own limit: closed, costing the
            // authenticated ones nothing.
            drop(stream);
            continue;
        }
        pending.fetch_add(1, Ordering::SeqCst);
        let (store, users, opts) = (store.clone(), users.clone(), opts.clone());
        let (live, pending) = (live.clone(), pending.clone());
        let id = next;
        std::thread::Builder::new()
            .name(format!("bolt-{id}"))
            .spawn(move || {
                let counted = std::sync::atomic::AtomicBool::new(false);
                let authenticated = || {
                    pending.fetch_sub(1, Ordering::SeqCst);
                    let took = live
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                            (n < opts.max_connections).then_some(n + 1)
                        })
                        .is_ok();
                    counted.store(true, Ordering::SeqCst);
                    if !took {
                        // Counted as neither: the connection closes now.
                        live.fetch_add(1, Ordering::SeqCst);
                    }
                    took
                };
                let _ = connection(
                    stream,
                    store,
                    users,
                    &opts,
                    id,
                    &Gate {
                        authenticated: &authenticated,
                    },
                );
                if counted.load(Ordering::SeqCst) {
                    live.fetch_sub(1, Ordering::SeqCst);
                } else {
                    pending.fetch_sub(1, Ordering::SeqCst);
                }
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failure of the files is the database's error, not the client's.
    #[test]
    fn storage_failures_are_database_errors() {
        let disk_full = QueryError::Engine(quiver_engine::EngineError::Wal(
            quiver_engine::wal::WalError::Io {
                path: "log".into(),
                source: std::io::Error::other("No space left on device"),
            },
        ));
        assert_eq!(
            failure(&disk_full).code,
            "Neo.DatabaseError.Transaction.TransactionCommitFailed"
        );
        assert_eq!(
            failure(&QueryError::RolledBack(Box::new(disk_full))).code,
            "Neo.DatabaseError.Transaction.TransactionCommitFailed"
        );
        let conflict = QueryError::Engine(quiver_engine::EngineError::Conflict("x".into()));
        assert!(failure(&conflict).code.starts_with("Neo.TransientError."));
        let typed = QueryError::Type(quiver_cypher::Detail::InvalidArgumentValue, "x".into());
        assert_eq!(failure(&typed).code, "Neo.ClientError.Statement.TypeError");
    }

    /// A stream that reads `input` and records what is written.
    struct Mock {
        input: io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Mock {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.input.read(b)
        }
    }

    impl Write for Mock {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn mock(input: &[u8]) -> Mock {
        Mock {
            input: io::Cursor::new(input.to_vec()),
            output: Vec::new(),
        }
    }

    const MAGIC: [u8; 4] = [0x60, 0x60, 0xB0, 0x17];

    #[test]
    fn handshake_picks_from_ranges() {
        // 5.8 down to 5.0, then 4.4: 5.4 is chosen.
        let mut m = mock(
            &[
                &MAGIC[..],
                &[0, 8, 8, 5, 0, 2, 4, 4, 0, 0, 0, 3, 0, 0, 0, 0],
            ]
            .concat(),
        );
        assert_eq!(handshake(&mut m).unwrap(), Some((5, 4)));
        assert_eq!(m.output, [0, 0, 4, 5]);
        // Only 4.x: refused with zeros.
        let mut m = mock(
            &[
                &MAGIC[..],
                &[0, 2, 4, 4, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0],
            ]
            .concat(),
        );
        assert_eq!(handshake(&mut m).unwrap(), None);
        assert_eq!(m.output, [0, 0, 0, 0]);
        // 5.0 alone (no LOGON): refused.
        let mut m = mock(&[&MAGIC[..], &[0, 0, 0, 5], &[0; 12]].concat());
        assert_eq!(handshake(&mut m).unwrap(), None);
        // Not Bolt (an HTTP request): nothing is answered.
        let mut m = mock(b"GET / HTTP/1.1\r\nHost: x\r\n");
        assert_eq!(handshake(&mut m).unwrap(), None);
        assert!(m.output.is_empty());
    }

    #[test]
    fn handshake_speaks_the_v1_manifest() {
        // The driver offers the manifest; the server lists 5.4 down to 5.1 and no
        // capabilities; the driver picks 5.4 with no capabilities.
        let client = [
            &MAGIC[..],
            &[0, 0, 1, 0xFF, 0, 8, 8, 5, 0, 2, 4, 4, 0, 0, 0, 3],
            &[0, 0, 4, 5, 0],
        ]
        .concat();
        let mut m = mock(&client);
        assert_eq!(handshake(&mut m).unwrap(), Some((5, 4)));
        assert_eq!(m.output, [0, 0, 1, 0xFF, 1, 0, 3, 4, 5, 0]);
        // A pick outside what was offered is refused.
        let client = [&MAGIC[..], &[0, 0, 1, 0xFF], &[0; 12], &[0, 0, 8, 5, 0]].concat();
        assert_eq!(handshake(&mut mock(&client)).unwrap(), None);
    }

    #[test]
    fn messages_are_chunked_and_capped() {
        let v = Pack::Struct(0x10, vec![Pack::str("x".repeat(70_000))]);
        let mut out = Vec::new();
        write_message(&mut out, &v);
        let back = read_message(&mut io::Cursor::new(out.clone()), 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(decode(&back).unwrap(), v);
        // Over the cap: an error, before the rest is read.
        assert!(read_message(&mut io::Cursor::new(out), 1 << 10).is_err());
        // A clean end of stream between messages.
        assert!(read_message(&mut io::Cursor::new(Vec::new()), 10)
            .unwrap()
            .is_none());
    }
}
