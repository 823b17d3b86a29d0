//! The server's sockets: the accept loop, TLS, Bolt over WebSocket and plain HTTP on the
//! Bolt port, deadlines, and reading whole messages, all non-blocking on a Tokio
//! runtime. An idle connection is a parked task (its buffers and, once logged in, its
//! session: kilobytes, no thread), so thousands can be open at once; statements run on
//! the runtime's bounded pool of blocking threads, quick graph reads on the I/O thread
//! itself (`server::Conn`).
//!
//! Limits: connections that have not logged in count against `max_pending` (past it a
//! new connection is closed at once) and must finish the handshake and log in within
//! `auth_timeout`, every read included (a peer sending a byte a second is closed);
//! logged-in ones count against `max_connections` (past it the login is answered with
//! a transient error); a connection silent for `idle_timeout` is closed; a client that
//! disconnects stops its running statement.

use crate::server::{self, fail, handle, Conn, Failure, Hello, ServeOptions, State};
use crate::users::Users;
use futures_util::{SinkExt, StreamExt};
use quiver_engine::Store;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{self, protocol::Role, Message};
use tokio_tungstenite::WebSocketStream;

/// A byte stream: a TCP socket, or TLS over one.
trait Raw: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Raw for T {}

/// A connection's stream once the protocol is known: Bolt's bytes, or Bolt inside
/// binary WebSocket messages (the Neo4j Browser, JavaScript in a web page).
enum Io {
    Bytes(Box<dyn Raw>),
    Ws(Box<WebSocketStream<Box<dyn Raw>>>),
}

/// Input is read this much at a time; the buffer grows only for larger messages and
/// shrinks back once they are handled.
const READ_CHUNK: usize = 4 << 10;

/// Appends what arrives to `buf`; 0 at the end of the stream. Cancel-safe: nothing is
/// lost when the future is dropped.
async fn read_raw(raw: &mut Box<dyn Raw>, buf: &mut Vec<u8>) -> io::Result<usize> {
    buf.reserve(READ_CHUNK);
    raw.read_buf(buf).await
}

impl Io {
    /// Appends what arrives to `buf` (for WebSocket, the next binary message's
    /// payload); 0 at the end of the stream or a close. Cancel-safe.
    async fn read(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            Io::Bytes(raw) => read_raw(raw, buf).await,
            Io::Ws(ws) => loop {
                match ws.next().await {
                    Some(Ok(Message::Binary(d))) => {
                        buf.extend_from_slice(&d);
                        if !d.is_empty() {
                            return Ok(d.len());
                        }
                    }
                    Some(Ok(Message::Close(_))) | None => return Ok(0),
                    Some(Ok(_)) => {} // pings (answered), pongs, text: not Bolt
                    Some(Err(e)) => return Err(ws_error(e)),
                }
            },
        }
    }

    /// Sends `bytes` (as one binary message over WebSocket) and flushes.
    async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Io::Bytes(raw) => {
                raw.write_all(bytes).await?;
                raw.flush().await
            }
            Io::Ws(ws) => ws
                .send(Message::binary(bytes.to_vec()))
                .await
                .map_err(ws_error),
        }
    }

    /// Ends the stream politely (a WebSocket close, TLS's close_notify).
    async fn finish(&mut self) {
        let _ = match self {
            Io::Bytes(raw) => raw.shutdown().await,
            Io::Ws(ws) => ws.close(None).await.map_err(ws_error),
        };
    }
}

fn ws_error(e: tungstenite::Error) -> io::Error {
    match e {
        tungstenite::Error::Io(e) => e,
        e => io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what} took too long"))
}

/// `f`, failing at `deadline`.
async fn by<T>(
    deadline: Instant,
    what: &str,
    f: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    tokio::time::timeout_at(deadline, f)
        .await
        .map_err(|_| timed_out(what))?
}

/// A logged-in connection's idle limit, on one timer armed for the whole connection.
///
/// Each wait (a read of the next message, a write of answers) may take at most `limit`
/// from its start. The timer fires at or before the end of the wait running (it was set
/// for an earlier one), and then moves to that end. A `tokio::time::timeout` around
/// each wait registered a timer each time, and a registration on a time driver with no
/// timer unparks a parked I/O thread: two wake-ups of the idle second thread a
/// statement, each an `eventfd` write and a thread that runs for nothing (89% of the
/// server's `eventfd` writes in a one-client write load).
struct Idle {
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl Idle {
    fn new(limit: Duration) -> Idle {
        Idle {
            timer: Box::pin(tokio::time::sleep(limit)),
            limit,
        }
    }

    /// `f`, failing with `what` took too long past the limit.
    async fn within<T>(
        &mut self,
        what: &str,
        f: impl Future<Output = io::Result<T>>,
    ) -> io::Result<T> {
        let due = Instant::now() + self.limit;
        tokio::pin!(f);
        loop {
            tokio::select! {
                biased;
                out = &mut f => return out,
                () = &mut self.timer => {
                    if Instant::now() >= due {
                        return Err(timed_out(what));
                    }
                    self.timer.as_mut().reset(due);
                }
            }
        }
    }
}

/// The connection counts: logged-in ones and the others.
struct Counts {
    /// (Shared with the connections: `Caches::live`.)
    live: Arc<AtomicUsize>,
    pending: AtomicUsize,
}

/// A connection's place in [`Counts`]: pending from its accept, live from its login,
/// given back when it ends (however it ends).
struct Slot {
    counts: Arc<Counts>,
    live: bool,
    pending: bool,
}

impl Slot {
    /// A pending slot, or `None` when `max` are taken.
    fn pending(counts: &Arc<Counts>, max: usize) -> Option<Slot> {
        counts
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        Some(Slot {
            counts: counts.clone(),
            live: false,
            pending: true,
        })
    }

    /// The connection logged in: a live slot if one of `max` is free (`false`: the
    /// server is full and the connection must close).
    fn logged_in(&mut self, max: usize) -> bool {
        if self.pending {
            self.counts.pending.fetch_sub(1, Ordering::SeqCst);
            self.pending = false;
        }
        self.live = self
            .counts
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok();
        self.live
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.pending {
            self.counts.pending.fetch_sub(1, Ordering::SeqCst);
        }
        if self.live {
            self.counts.live.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Raises the process's open-file limit to its hard limit: each connection is a
/// descriptor, and the usual soft limit (1,024) is below the connection limits.
fn raise_fd_limit() {
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// Serves Bolt on `listener` until the process ends.
pub fn serve(
    listener: std::net::TcpListener,
    store: Arc<Store>,
    opts: ServeOptions,
) -> io::Result<()> {
    let users = Arc::new(
        Users::load(store.dir())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?,
    );
    raise_fd_limit();
    // The I/O threads parse messages, copy the records workers encode and run quick
    // graph reads (at most 2 ms each); a client's round trip waits for one: as many as
    // cores. On 2 cores
    // (bench/connections_bench.py, find node, medians of 4 rounds) one thread served a
    // single client 5% faster and 4 client processes 7% slower than two; two matched
    // the thread-per-connection server at 1, 4 and 16.
    let io_threads = match opts.io_threads {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get().min(8)),
        n => n,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(io_threads)
        .max_blocking_threads(opts.workers.max(1))
        .thread_name("bolt")
        .enable_io()
        .enable_time()
        .build()?;
    listener.set_nonblocking(true)?;
    rt.block_on(accept(listener, store, users, Arc::new(opts)))
}

async fn accept(
    listener: std::net::TcpListener,
    store: Arc<Store>,
    users: Arc<Users>,
    opts: Arc<ServeOptions>,
) -> io::Result<()> {
    let listener = TcpListener::from_std(listener)?;
    let counts = Arc::new(Counts {
        live: opts.caches.live.clone(),
        pending: AtomicUsize::new(0),
    });
    let mut next = 0usize;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(_) => {
                // Out of descriptors or memory for a moment: the next accept may fare
                // better once connections close.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        next += 1;
        // Past the pending limit: closed at once, costing the logged-in ones nothing.
        let Some(slot) = Slot::pending(&counts, opts.max_pending) else {
            continue;
        };
        let (store, users, opts) = (store.clone(), users.clone(), opts.clone());
        let id = next;
        tokio::spawn(async move {
            let _ = connection(stream, peer, store, users, opts, id, slot).await;
        });
    }
}

/// Serves one connection until it closes: TLS when the options have it, then Bolt, or
/// HTTP (a web app's files, or a WebSocket upgrade that carries Bolt).
async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    store: Arc<Store>,
    users: Arc<Users>,
    opts: Arc<ServeOptions>,
    id: usize,
    mut slot: Slot,
) -> io::Result<()> {
    tcp.set_nodelay(true)?;
    let deadline = Instant::now() + opts.auth_timeout;
    let mut raw: Box<dyn Raw> = match &opts.tls {
        Some(cfg) => {
            let accept = tokio_rustls::TlsAcceptor::from(cfg.clone()).accept(tcp);
            Box::new(by(deadline, "the TLS handshake", accept).await?)
        }
        None => Box::new(tcp),
    };
    let mut buf = Vec::new();
    while buf.len() < 4 {
        if by(deadline, "the handshake", read_raw(&mut raw, &mut buf)).await? == 0 {
            return Ok(());
        }
    }
    let io = if &buf[..4] == b"GET " {
        let head = loop {
            if let Some(n) = crate::http::head_len(&buf)? {
                break n;
            }
            if by(deadline, "the HTTP request", read_raw(&mut raw, &mut buf)).await? == 0 {
                return Ok(());
            }
        };
        if !crate::http::is_upgrade(&buf[..head]) {
            let mut out = Vec::new();
            crate::http::respond(&mut out, &buf[..head], opts.browser.as_deref())?;
            by(deadline, "the HTTP response", async {
                raw.write_all(&out).await?;
                raw.shutdown().await
            })
            .await?;
            return Ok(());
        }
        match crate::http::upgrade_reply(&buf[..head]) {
            Ok(reply) => by(deadline, "the WebSocket handshake", raw.write_all(&reply)).await?,
            Err(refusal) => {
                let _ = by(deadline, "the HTTP response", raw.write_all(&refusal)).await;
                return Ok(());
            }
        }
        // Messages past the server's limit (the Bolt layer also caps them) and frames
        // of at most 1 MiB, so that no client makes the server buffer more.
        let max = opts.max_message.saturating_add(64 << 10);
        let cfg = tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(max))
            .max_frame_size(Some(max.min(1 << 20)));
        let rest = buf.split_off(head);
        buf.clear();
        let ws = WebSocketStream::from_partially_read(raw, rest, Role::Server, Some(cfg)).await;
        Io::Ws(Box::new(ws))
    } else {
        Io::Bytes(raw)
    };
    let mut io = io;
    let r = bolt(
        &mut io, buf, deadline, store, users, &opts, id, peer, &mut slot,
    )
    .await;
    io.finish().await;
    r
}

/// Reads into `buf` until it holds `n` bytes (`false`: the stream ended first).
async fn fill(io: &mut Io, buf: &mut Vec<u8>, n: usize, deadline: Instant) -> io::Result<bool> {
    while buf.len() < n {
        if by(deadline, "the handshake", io.read(buf)).await? == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The Bolt protocol over an established stream; `buf` holds what was read already.
#[allow(clippy::too_many_arguments)]
async fn bolt(
    io: &mut Io,
    mut buf: Vec<u8>,
    deadline: Instant,
    store: Arc<Store>,
    users: Arc<Users>,
    opts: &Arc<ServeOptions>,
    id: usize,
    peer: SocketAddr,
    slot: &mut Slot,
) -> io::Result<()> {
    if !fill(io, &mut buf, 20, deadline).await? {
        return Ok(());
    }
    let mut preamble = [0u8; 20];
    preamble.copy_from_slice(&buf[..20]);
    buf.drain(..20);
    match server::hello(&preamble) {
        Hello::NotBolt => return Ok(()),
        Hello::Refused => return by(deadline, "the handshake", io.send(&[0, 0, 0, 0])).await,
        Hello::Version(minor) => {
            by(deadline, "the handshake", io.send(&[0, 0, minor, 5])).await?;
        }
        Hello::Manifest => {
            by(deadline, "the handshake", io.send(&server::MANIFEST_REPLY)).await?;
            let used = loop {
                if let Some((v, used)) = server::manifest_pick(&buf) {
                    if v.is_none() {
                        return Ok(());
                    }
                    break used;
                }
                if by(deadline, "the handshake", io.read(&mut buf)).await? == 0 {
                    return Ok(());
                }
            };
            buf.drain(..used);
        }
    }
    let mut c = Conn::new(store, users, opts.clone(), id, peer);
    let r = messages(io, &mut buf, deadline, &mut c, opts, slot).await;
    c.close().await;
    r
}

/// Runs `answer` (which may wait for a statement) while the socket is still read: a
/// client that goes away stops the statement; what it sends meanwhile (a RESET it
/// pipelines) waits its turn in `buf`, which grows to `limit` at most.
async fn watched<T>(
    io: &mut Io,
    buf: &mut Vec<u8>,
    eof: &mut bool,
    cancel: &AtomicBool,
    limit: usize,
    answer: impl Future<Output = T>,
) -> T {
    tokio::pin!(answer);
    loop {
        tokio::select! {
            biased;
            out = &mut answer => return out,
            r = io.read(buf), if !*eof && buf.len() < limit => {
                if !matches!(r, Ok(n) if n > 0) {
                    *eof = true;
                    cancel.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

/// Answers messages until the connection ends.
async fn messages(
    io: &mut Io,
    buf: &mut Vec<u8>,
    deadline: Instant,
    c: &mut Conn,
    opts: &ServeOptions,
    slot: &mut Slot,
) -> io::Result<()> {
    let mut authed = false;
    let mut eof = false;
    let mut idle = Idle::new(opts.idle_timeout);
    let cancel = c.cancel.clone();
    // The largest message taken now (smaller before login).
    let max = |c: &Conn| {
        if c.state == State::Authentication {
            server::PRE_AUTH_MESSAGE_MAX
        } else {
            opts.max_message
        }
    };
    loop {
        // Every whole message that arrived is answered, and the answers written
        // together (a client pipelines RUN and PULL).
        let mut close = false;
        let mut used = 0;
        while let Some((msg, n)) = server::take_message(&buf[used..], max(c))? {
            used += n;
            let Ok(crate::packstream::Pack::Struct(tag, fields)) = crate::packstream::decode(&msg)
            else {
                close = true; // not a message: the protocol is broken
                break;
            };
            let limit = max(c).saturating_add(used);
            close = watched(io, buf, &mut eof, &cancel, limit, handle(c, tag, &fields)).await;
            if !authed && !matches!(c.state, State::Authentication | State::Defunct) {
                authed = true;
                if !slot.logged_in(opts.max_connections) {
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
            if close || c.state == State::Defunct {
                close = true;
                break;
            }
        }
        if !close {
            // A RUN the client sent last is answered now (its PULL did not come with it).
            let limit = max(c).saturating_add(used);
            watched(io, buf, &mut eof, &cancel, limit, c.answer_run()).await;
        }
        buf.drain(..used);
        if buf.is_empty() && buf.capacity() > 64 << 10 {
            *buf = Vec::new(); // a large message passed: give its memory back
        }
        if !c.out.is_empty() {
            idle.within("writing to the client", io.send(&c.out))
                .await?;
            c.out.clear();
            if c.out.capacity() > 64 << 10 {
                c.out = Vec::new();
            }
        }
        if close || eof {
            return Ok(());
        }
        if server::take_message(buf, max(c))?.is_some() {
            // A message came while the last one was answered (a PULL sent apart from
            // its RUN): answer it before waiting for more.
            continue;
        }
        let read = io.read(buf);
        let n = if authed {
            idle.within("waiting for the client", read).await?
        } else {
            by(deadline, "the handshake and authentication", read).await?
        };
        if n == 0 {
            return Ok(());
        }
    }
}
