//! The Bolt protocol: one connection's state machine (HELLO, LOGON, RUN, PULL, DISCARD,
//! BEGIN, COMMIT, ROLLBACK, RESET, LOGOFF, ROUTE, TELEMETRY, GOODBYE), here; the
//! handshake and chunked messages in `wire`, a server's options and TLS in `options`,
//! errors as FAILURE in `failure`, results on their way to the client in `results`.
//! The sockets, TLS streams, WebSocket and the accept loop are `net`'s.
//!
//! A connection costs no thread while it waits: its state machine ([`Conn`]) runs on
//! the I/O runtime's tasks, and a statement that runs takes a thread of the bounded
//! worker pool (`ServeOptions::workers`), unless it is a graph read that has been
//! quick: that one runs on the I/O thread, under a 2 ms deadline ([`Conn::run_inline`]).
//! A statement's rows reach the
//! connection through a channel of two batches: the worker blocks while the client has
//! not pulled, so a result never sits whole in server memory (`PULL n` sends n records
//! and keeps the cursor open). A connection's `Session` is made when it logs in.

use crate::packstream::{encode, list_header, struct_header, Pack};
use crate::users::Users;
use crate::values::{from_pack, write_value_with, ReadAhead};
use quiver_engine::Store;
use quiver_query::procs::PType;
use quiver_query::{ColumnsHook, Params, QueryError, Session, Value};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

mod failure;
mod options;
mod results;
mod wire;

pub use failure::*;
pub use options::*;
use results::*;
pub use wire::*;

/// How long an auto-commit statement that lost a write conflict keeps running again
/// (backing off 0.1 to 3.2 ms between attempts) before its client gets the transient
/// error: a lock wait, as Neo4j's clients see one. A budget of time, not of attempts:
/// on a loaded machine six clients on one node made a statement lose 30 times in a row
/// (under 0.1 s) and fail.
const RETRY_FOR: Duration = Duration::from_secs(5);

/// An auto-commit graph read, or write of the graph alone (`Summary::rerunnable`), that
/// ran in at most this long on a worker (its commit's sync included) is run on the
/// connection's I/O thread next time ([`Conn::run_inline`]): handing a statement to a
/// worker and its result back costs two thread wake-ups, more than such a statement's
/// own work. (Writes only where checkpoints run in the background, as `quiver serve`'s
/// do.)
const QUICK: Duration = Duration::from_micros(500);

/// How long an inline run may hold its I/O thread: past it the statement stops and
/// runs again on a worker (a graph read has nothing to undo). It bounds what a
/// statement that was quick and is not (a hub's neighbours) costs the connections that
/// share the thread.
const INLINE_DEADLINE: Duration = Duration::from_millis(2);

/// About what an inline run saves: a text's inline runs that had to run again on a
/// worker put it in debt by their time in these units, and each of its quick runs pays
/// one back ([`Conn::quick`]).
const INLINE_SAVES: Duration = Duration::from_micros(50);

/// What an inline run that finished past [`QUICK`] adds to its text's debt (a quick one
/// pays one back): a text runs inline while at most about a third of its runs are
/// long. It owed its time before (16 units for 0.8 ms), and a shortest path search
/// whose searches took 0.25 ms typically and 0.8 ms one time in ten then ran on
/// workers, at twice its CPU a query with one client.
const LONG_RUN: u32 = 2;

/// A text runs inline while its debt is under this (in [`INLINE_SAVES`]): a statement
/// whose parameters are sometimes slow stays inline while what it wastes is less than
/// what it saves, and one that is mostly slow goes to workers until its quick runs
/// there pay the debt back.
const INLINE_DEBT: u32 = 40;

/// Statement texts a server remembers as quick (past it, it forgets them all), and
/// only texts of at most [`QUICK_TEXT_BYTES`].
const QUICK_TEXTS: usize = 1024;
const QUICK_TEXT_BYTES: usize = 4 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
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

/// The session a connection has once it logged in, shared with the worker that runs
/// its statement of the moment.
type Shared = Arc<Mutex<Session>>;

/// One connection's protocol state.
pub(crate) struct Conn {
    pub(crate) state: State,
    in_tx: bool,
    /// The open transaction's deadline and the timeout it came from (BEGIN's
    /// `tx_timeout`).
    tx_deadline: Option<ClientDeadline>,
    hello: bool,
    session: Option<Shared>,
    /// The running statement's columns, from its `on_columns` hook until they are sent.
    slot: Arc<Mutex<ColumnSlot>>,
    /// Records the connection waits for (see [`ALL`]), read by the worker.
    demand: Arc<std::sync::atomic::AtomicI64>,
    pub(crate) cancel: Arc<AtomicBool>,
    open: Option<Open>,
    /// Responses not written yet.
    pub(crate) out: Vec<u8>,
    bookmark: u64,
    store: Arc<Store>,
    users: Arc<Users>,
    opts: Arc<ServeOptions>,
    id: usize,
    peer: String,
    /// The commit of the statement that ran inline, until its sync (awaited before it
    /// is answered, see [`Conn::await_sync`]).
    unsynced: Option<quiver_engine::Unsynced>,
}

/// Runs `f` on the worker pool (the runtime's bounded blocking threads).
async fn on_worker<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(f).await.map_err(|_| internal())
}

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Session> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

impl Conn {
    pub(crate) fn new(
        store: Arc<Store>,
        users: Arc<Users>,
        opts: Arc<ServeOptions>,
        id: usize,
        peer: SocketAddr,
    ) -> Conn {
        Conn {
            state: State::Authentication,
            in_tx: false,
            tx_deadline: None,
            hello: false,
            session: None,
            slot: Arc::new(Mutex::new(ColumnSlot::default())),
            demand: Arc::new(std::sync::atomic::AtomicI64::new(0)),
            cancel: Arc::new(AtomicBool::new(false)),
            open: None,
            out: Vec::new(),
            bookmark: 0,
            store,
            users,
            opts,
            id,
            peer: peer.to_string(),
            unsynced: None,
        }
    }

    /// The session, made at the first login (on a worker: opening one reads the
    /// declared indexes), with `user` as the current user.
    async fn login(&mut self, user: String) -> Result<(), Failure> {
        let made = self.session.clone();
        let (store, opts, id, peer) = (
            self.store.clone(),
            self.opts.clone(),
            self.id,
            self.peer.clone(),
        );
        let (cancel, slot, demand) = (self.cancel.clone(), self.slot.clone(), self.demand.clone());
        let session = on_worker(move || {
            let session = made.unwrap_or_else(|| {
                let mut s = Session::on(store);
                s.share_parses(opts.caches.parses.clone());
                s.opts.client = quiver_engine::activity::Client {
                    connection: format!("bolt-{id}"),
                    address: peer,
                    user: String::new(),
                };
                if let Some(l) = opts.query_memory_limit {
                    s.opts.memory_limit = l;
                }
                if let Some(d) = &opts.import_dir {
                    s.opts.import_dir = Some(d.clone());
                }
                if let Some(d) = &opts.temp_dir {
                    s.opts.temp_dir = Some(d.clone());
                }
                if let Some(w) = opts.memory_wait {
                    s.opts.memory_wait = w;
                }
                s.opts.cancel = Some(cancel);
                s.opts.on_columns = Some(ColumnsHook(Arc::new(move |cols: &[String]| {
                    let mut s = slot.lock().unwrap_or_else(|e| e.into_inner());
                    if demand.load(Ordering::Relaxed) == 0 {
                        if let Some(tx) = s.events.as_ref().and_then(|w| w.upgrade()) {
                            let e = Event {
                                columns: Some(cols.to_vec()),
                                rows: None,
                                done: None,
                            };
                            // (The channel is empty: nothing was sent before the columns.)
                            if tx.try_send(e).is_ok() {
                                return;
                            }
                        }
                    }
                    s.columns = Some(cols.to_vec());
                })));
                Arc::new(Mutex::new(s))
            });
            set_user(&mut lock(&session), user);
            session
        })
        .await?;
        self.session = Some(session);
        Ok(())
    }

    fn session(&self) -> Result<Shared, Failure> {
        self.session.clone().ok_or_else(internal)
    }

    /// Starts a statement on a worker. Its RUN is answered by [`Conn::answer_run`] once
    /// its columns come, which is when the worker first sends: with the records a
    /// pipelined PULL asks for, or with its end, so that a small result crosses from
    /// the worker once.
    /// `true`: it ran here, on the I/O thread ([`Conn::run_inline`]).
    fn run(
        &mut self,
        text: String,
        params: Params,
        deadline: Option<ClientDeadline>,
    ) -> Result<bool, Failure> {
        let session = self.session()?;
        let auto_commit = !self.in_tx;
        if let Some(d) = deadline.filter(|d| d.at <= Instant::now()) {
            return Err(d.failure());
        }
        let quick = auto_commit
            && self
                .opts
                .caches
                .quick()
                .get(text.as_str())
                .is_some_and(|&debt| debt < INLINE_DEBT);
        if quick && self.run_inline(&session, &text, &params) {
            return Ok(true);
        }
        let (events, rx) = mpsc::channel(2);
        let started = Instant::now();
        // (Cleared here, before the worker starts, so that a DISCARD's stop is not lost.)
        self.cancel.store(false, Ordering::Relaxed);
        self.demand.store(0, Ordering::Relaxed);
        let (slot, demand) = (self.slot.clone(), self.demand.clone());
        let remember = auto_commit && text.len() <= QUICK_TEXT_BYTES;
        // The worker's end is awaited through the events, not the task.
        drop(tokio::task::spawn_blocking(move || {
            let slot_of = || slot.lock().unwrap_or_else(|e| e.into_inner());
            let columns = || slot_of().columns.take();
            let mut session = lock(&session);
            slot_of().events = Some(events.downgrade());
            let mut out = Records::default();
            let mut body = Vec::new();
            // An auto-commit statement that lost a write conflict runs again, on a new
            // snapshot, while none of its records has gone out: the client sees it wait,
            // as Neo4j's lock waits, not fail (an explicit transaction fails: its
            // client retries it whole).
            let mut sent = false;
            let mut attempt = 0u32;
            let began = std::time::Instant::now();
            let r = loop {
                let r = session.run(&text, &params, &mut |g, b| {
                    out.push(g, b, &mut body)?;
                    let want = demand.load(Ordering::Relaxed);
                    if out.bytes.len() < SEND_BYTES && (want == ALL || (out.len() as i64) < want) {
                        return Ok(()); // the connection waits for more, or for the end
                    }
                    let e = Event {
                        columns: columns(),
                        rows: Some(std::mem::take(&mut out)),
                        done: None,
                    };
                    // The client went away or discarded the rest: stop the statement.
                    sent = true;
                    events.blocking_send(e).map_err(|_| QueryError::Cancelled)
                });
                match r {
                    Err(e)
                        if auto_commit
                            && !sent
                            && e.is_retryable()
                            && began.elapsed() < RETRY_FOR =>
                    {
                        attempt += 1;
                        out = Records::default(); // the failed attempt's rows
                        std::thread::sleep(Duration::from_micros(50 << attempt.min(6)));
                    }
                    r => break r,
                }
            };
            // A write runs inline only where checkpoints run in the background: one
            // due at its commit would otherwise run there, on the I/O thread.
            let inline_writes = session.store().opts.background_checkpoints;
            let done = r
                .map(|s| {
                    let rerunnable = s.rerunnable && (s.graph_read || inline_writes);
                    Done {
                        text: remember.then_some(text),
                        rerunnable,
                        ..Done::of(s)
                    }
                })
                .map_err(|e| failure(&e));
            slot_of().events = None;
            let _ = events.blocking_send(Event {
                columns: columns(),
                rows: Some(out),
                done: Some(done),
            });
        }));
        self.open = Some(Open {
            events: rx,
            columns: None,
            unanswered: Some(started),
            pending: VecDeque::new(),
            done: None,
            started,
            timed_out: false,
            deadline,
        });
        Ok(false)
    }

    /// Runs a statement that was a quick graph read or write here, on the I/O thread,
    /// with [`INLINE_DEADLINE`] and no wait for memory: a small result is then answered
    /// with no thread hand-off at all. `false` (and the text marked) when it stopped
    /// at the deadline, failed, or made more than a batch of records: the caller runs
    /// it on a worker, where it runs in full. Nothing is undone: a read only read, and
    /// an auto-commit write commits at its end only, so one that stopped or failed
    /// before that was rolled back (after a failed sync of the log, which refuses every
    /// later commit, the worker's run reports the refusal).
    fn run_inline(&mut self, session: &Shared, text: &str, params: &Params) -> bool {
        let started = Instant::now();
        self.cancel.store(false, Ordering::Relaxed);
        self.demand.store(0, Ordering::Relaxed);
        let mut out = Records::default();
        let mut body = Vec::new();
        let r = {
            let mut s = lock(session);
            let saved = (s.opts.deadline, s.opts.memory_wait);
            s.opts.deadline = Some(started + INLINE_DEADLINE);
            s.opts.memory_wait = Duration::ZERO;
            // A write's commit is synced after, without holding this thread while
            // another committer syncs ([`Conn::await_sync`]).
            s.defer_sync = true;
            let r = s.run(text, params, &mut |g, b| {
                out.push(g, b, &mut body)?;
                if out.bytes.len() > SEND_BYTES {
                    return Err(QueryError::Cancelled); // a large result: a worker's
                }
                Ok(())
            });
            s.defer_sync = false;
            self.unsynced = s.take_unsynced();
            (s.opts.deadline, s.opts.memory_wait) = saved;
            r
        };
        // (The columns hook left them in the slot; the summary has them too.)
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).columns = None;
        // (A statement that ran to its end committed: it is answered whatever it was.)
        let done = match r {
            Ok(s) => Done::of(s),
            Err(_) => {
                self.owe(text, started.elapsed());
                return false;
            }
        };
        // A run that finished saved its hand-off whatever it took; one past QUICK held
        // the thread from its other connections, so it owes LONG_RUN (a text most of
        // whose runs are long goes to workers).
        if let Some(debt) = self.opts.caches.quick().get_mut(text) {
            *debt = if done.elapsed > QUICK {
                debt.saturating_add(LONG_RUN)
            } else {
                debt.saturating_sub(1)
            };
        }
        self.open = Some(Open {
            // Nothing will come: what the statement made is here.
            events: mpsc::channel(1).1,
            columns: Some(done.columns.clone()),
            unanswered: Some(started),
            pending: VecDeque::from([out]),
            done: Some(Ok(done)),
            started,
            timed_out: false,
            deadline: None,
        });
        true
    }

    /// Waits for the sync of the inline statement's commit, if it wrote, letting the
    /// thread's other connections run until a sync covers it (more commits share the
    /// next one); when none running does, one begins, here or on a blocking thread. A
    /// failed sync fails the statement.
    async fn await_sync(&mut self) {
        let Some(mut u) = self.unsynced.take() else {
            return;
        };
        // With at most two connections open this thread leads the sync itself, beside
        // a running one too: with two clients each commit is written during the
        // other's sync, and the device takes two at once, and a hand-off to another
        // thread would add its wake-up to every statement. With more, one sync at a
        // time gathers the commits written while it runs, on the server's sync thread:
        // led here, it held one of the two I/O threads nearly all the time, leaving
        // every statement to the other (8 clients, property updates: 14,000-15,600
        // queries/s led here, 19,400-20,100 handed off; relationship creates
        // 11,500-11,900 and 13,700-15,100). (Handing the thread's other connections
        // to another thread for the sync instead, `tokio::task::block_in_place`, cost
        // more CPU than it saved.)
        let few = self.opts.caches.live.load(Ordering::Relaxed) <= 2;
        let syncer = &self.opts.caches.syncer;
        let mut hand = |h: quiver_engine::SyncHandoff| syncer.hand(h);
        let r = std::future::poll_fn(|cx| {
            let lead = if few {
                quiver_engine::Lead::Here
            } else {
                quiver_engine::Lead::Elsewhere(&mut hand)
            };
            u.poll_synced(cx, lead)
        })
        .await;
        if let Err(e) = r {
            if let Some(open) = self.open.as_mut() {
                open.pending.clear();
                open.done = Some(Err(failure(&QueryError::from(e))));
            }
        }
    }

    /// Remembers `text` as a quick graph read (see [`QUICK`]), or pays one back of its
    /// debt.
    fn note_quick(&mut self, text: String) {
        let mut quick = self.opts.caches.quick();
        if let Some(debt) = quick.get_mut(text.as_str()) {
            *debt = debt.saturating_sub(1);
            return;
        }
        if quick.len() >= QUICK_TEXTS {
            quick.clear();
        }
        quick.insert(text.into_boxed_str(), 0);
    }

    /// Adds `spent` of an inline run that saved nothing to `text`'s debt: at most
    /// [`INLINE_DEBT`] a run (past the deadline, time is the machine's load, not the
    /// statement's).
    fn owe(&mut self, text: &str, spent: Duration) {
        if let Some(debt) = self.opts.caches.quick().get_mut(text) {
            let units =
                (spent.as_micros() / INLINE_SAVES.as_micros()).clamp(1, INLINE_DEBT as u128);
            *debt = debt.saturating_add(units as u32);
        }
    }

    /// Answers the open statement's RUN if it is not yet: waits for its columns, or
    /// for its failure (then the statement is gone and the connection failed).
    pub(crate) async fn answer_run(&mut self) {
        let timeout = self.opts.query_timeout;
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let Some(started) = open.unanswered.take() else {
            return;
        };
        while open.columns.is_none() && open.done.is_none() {
            open.pump(timeout, &self.cancel).await;
        }
        let columns = match (&open.columns, &open.done) {
            (Some(c), _) => c.clone(),
            // A command (SHOW INDEXES...): its columns come with its end.
            (None, Some(Ok(d))) => d.columns.clone(),
            (None, Some(Err(f))) => {
                let f = f.clone();
                self.open = None;
                self.failed(f).await;
                return;
            }
            (None, None) => Vec::new(), // (the loop above ends with one of them)
        };
        let mut meta = vec![
            (
                "fields",
                Pack::List(columns.into_iter().map(Pack::Str).collect()),
            ),
            ("t_first", Pack::Int(started.elapsed().as_millis() as i64)),
        ];
        if self.in_tx {
            meta.push(("qid", Pack::Int(0)));
        }
        success(&mut self.out, meta);
    }

    /// Sends up to `n` records (all for -1) of the open statement, then its summary or
    /// `has_more`. With `discard`, drops them instead.
    async fn pull(&mut self, n: i64, discard: bool) {
        let timeout = self.opts.query_timeout;
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
                open.pump(timeout, &self.cancel).await;
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
                        rerunnable: false,
                        elapsed: Duration::ZERO,
                        text: None,
                    }));
                }
            }
        }
        let mut sent = 0i64;
        while n < 0 || sent < n {
            // What the worker should send before the connection hears from it again.
            let want = if n < 0 {
                ALL
            } else {
                (n - sent - open.pending_rows()).max(1)
            };
            self.demand.store(want, Ordering::Relaxed);
            if let Some(batch) = open.pending.front_mut() {
                sent += batch.send(&mut self.out, if n < 0 { -1 } else { n - sent });
                if batch.next == batch.ends.len() {
                    open.pending.pop_front();
                }
                continue;
            }
            if open.done.is_some() {
                break;
            }
            open.pump(timeout, &self.cancel).await;
        }
        // n records sent and nothing waiting: one more event tells whether the
        // statement has ended (then the summary goes now, not after another PULL).
        if open.pending.is_empty() && open.done.is_none() {
            open.pump(timeout, &self.cancel).await;
        }
        if !open.pending.is_empty() || open.done.is_none() {
            // Nothing asked until the next PULL: the worker sends what it makes at
            // once, and stops at the channel's two batches.
            self.demand.store(0, Ordering::Relaxed);
            success(&mut self.out, vec![("has_more", Pack::Bool(true))]);
            return;
        }
        let t_last = open.started.elapsed().as_millis() as i64;
        let Some(done) = self.open.take().and_then(|o| o.done) else {
            return; // (checked above)
        };
        match done {
            Ok(mut d) => {
                if let Some(t) = d.text.take().filter(|_| d.rerunnable && d.elapsed <= QUICK) {
                    self.note_quick(t);
                }
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

    /// BEGIN, COMMIT or ROLLBACK, on a worker.
    async fn tx(&mut self, cmd: &'static str) -> Result<(), Failure> {
        let session = self.session()?;
        on_worker(move || {
            lock(&session)
                .run(cmd, &Params::new(), &mut |_, _| Ok(()))
                .map(|_| ())
                .map_err(|e| failure(&e))
        })
        .await?
    }

    /// Drops an open statement and rolls back an open transaction (RESET, errors).
    pub(crate) async fn reset(&mut self) {
        if self.open.is_some() {
            // The discard's own responses are not sent; those queued before are.
            let keep = self.out.len();
            self.pull(-1, true).await;
            self.out.truncate(keep);
        }
        if self.in_tx {
            let _ = self.tx("ROLLBACK").await;
            self.in_tx = false;
        }
        self.tx_deadline = None;
    }

    /// The connection closed: a statement still open stops, a transaction rolls back.
    pub(crate) async fn close(&mut self) {
        self.reset().await;
        if let Some(session) = self.session.take() {
            let _ = on_worker(move || {
                let mut s = lock(&session);
                if s.in_transaction() {
                    let _ = s.run("ROLLBACK", &Params::new(), &mut |_, _| Ok(()));
                }
            })
            .await;
        }
    }
}

/// Makes `name` the session's user: `dbms.showCurrentUser()` (the Browser asks on
/// connect) answers it, with every right, as an admin of Neo4j has.
fn set_user(session: &mut Session, name: String) {
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
        session
            .opts
            .procedures
            .registered
            .push(Arc::new(quiver_query::procs::Procedure {
                name: proc_name.into(),
                inputs: Vec::new(),
                optional: 0,
                outputs: vec![
                    ("username".into(), PType::String),
                    ("roles".into(), PType::Other),
                    ("flags".into(), PType::Other),
                ],
                body: quiver_query::procs::Body::Table(vec![(Vec::new(), row.clone())]),
            }));
    }
    session.opts.client.user = name;
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

/// A PULL's or DISCARD's `n` (-1: all).
fn pull_n(f: &[Pack]) -> i64 {
    f.first()
        .and_then(|m| m.get("n"))
        .and_then(Pack::as_int)
        .unwrap_or(-1)
}

/// Handles one message; `true` when the connection should close.
pub(crate) async fn handle(c: &mut Conn, tag: u8, f: &[Pack]) -> bool {
    if c.open.as_ref().is_some_and(|o| o.unanswered.is_some()) {
        // A RUN before this message is answered first. A PULL says how many records
        // the worker should gather before it sends; a RESET or GOODBYE stops it.
        match tag {
            PULL => c.demand.store(
                if pull_n(f) < 0 { ALL } else { pull_n(f).max(1) },
                Ordering::Relaxed,
            ),
            RESET | GOODBYE => c.cancel.store(true, Ordering::Relaxed),
            _ => {}
        }
        c.answer_run().await;
    }
    if tag == GOODBYE {
        c.reset().await;
        return true;
    }
    if !c.hello {
        if tag != HELLO {
            return true;
        }
        c.hello = true;
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
                ("connection_id", Pack::str(format!("bolt-{}", c.id))),
                ("hints", Pack::map(vec![])),
            ],
        );
        return false;
    }
    if tag == RESET {
        c.reset().await;
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
        let opts = c.opts.clone();
        let ok = if !opts.auth {
            true
        } else if scheme == "basic" {
            let user = auth.get("principal").and_then(Pack::as_str).unwrap_or("");
            let pass = auth.get("credentials").and_then(Pack::as_str).unwrap_or("");
            let (users, user, pass) = (c.users.clone(), user.to_string(), pass.to_string());
            // (Argon2 takes tens of milliseconds: a worker's, not the I/O's.)
            on_worker(move || users.verify(&user, &pass))
                .await
                .unwrap_or(false)
        } else {
            false
        };
        if ok {
            c.users.login_succeeded(&c.peer);
            c.state = State::Ready;
            let user = if opts.auth {
                auth.get("principal").and_then(Pack::as_str).unwrap_or("")
            } else {
                ""
            };
            match c.login(user.to_string()).await {
                Ok(()) => success(&mut c.out, vec![]),
                Err(e) => {
                    fail(&mut c.out, &e);
                    c.state = State::Defunct;
                }
            }
        } else {
            // Slow down guessing, more with each failure in a row from one address.
            tokio::time::sleep(c.users.login_failed(&c.peer)).await;
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
    match (tag, c.state) {
        (LOGOFF, State::Ready) => {
            c.state = State::Authentication;
            success(&mut c.out, vec![]);
        }
        (TELEMETRY, _) => success(&mut c.out, vec![]),
        (ROUTE, State::Ready) => {
            let me = c.opts.listen.to_string();
            let (writers, readers) = match &c.opts.routing {
                Some(r) => (r.writers.clone(), r.readers.clone()),
                None if c.store.is_writable() => (vec![me.clone()], vec![me.clone()]),
                None => (Vec::new(), vec![me.clone()]),
            };
            let mut routers = writers.clone();
            routers.extend(readers.iter().filter(|r| !writers.contains(r)).cloned());
            if routers.is_empty() {
                routers.push(me);
            }
            let server = |role: &str, addrs: &[String]| {
                let addrs = addrs.iter().map(|a| Pack::str(a.as_str())).collect();
                Pack::map(vec![
                    ("addresses", Pack::List(addrs)),
                    ("role", Pack::str(role)),
                ])
            };
            // A short time to live when the table lists several servers: a driver soon
            // asks again, and sees a server that has gone.
            let ttl = if c.opts.routing.is_some() { 30 } else { 300 };
            success(
                &mut c.out,
                vec![(
                    "rt",
                    Pack::map(vec![
                        ("ttl", Pack::Int(ttl)),
                        ("db", Pack::str("neo4j")),
                        (
                            "servers",
                            Pack::List(vec![
                                server("WRITE", &writers),
                                server("READ", &readers),
                                server("ROUTE", &routers),
                            ]),
                        ),
                    ]),
                )],
            );
        }
        (BEGIN, State::Ready) => match c.tx("BEGIN").await {
            Ok(()) => {
                c.in_tx = true;
                c.tx_deadline = ClientDeadline::of(f.first());
                c.state = State::TxReady;
                success(&mut c.out, vec![]);
            }
            Err(e) => c.failed(e).await,
        },
        (COMMIT | ROLLBACK, State::TxReady) => {
            let cmd = if tag == COMMIT { "COMMIT" } else { "ROLLBACK" };
            // A transaction past its client's timeout was terminated: it commits nothing.
            if let Some(d) = c.tx_deadline.take().filter(|d| d.at <= Instant::now()) {
                if tag == COMMIT {
                    c.failed(d.failure()).await;
                    return false;
                }
            }
            c.in_tx = false;
            match c.tx(cmd).await {
                Ok(()) => {
                    c.state = State::Ready;
                    let mut meta = vec![];
                    if tag == COMMIT {
                        c.bookmark += 1;
                        meta.push(("bookmark", Pack::str(format!("quiver:{}", c.bookmark))));
                    }
                    success(&mut c.out, meta);
                }
                Err(e) => c.failed(e).await,
            }
        }
        (RUN, State::Ready | State::TxReady) => {
            let Some(text) = f.first().and_then(Pack::as_str) else {
                c.failed(Failure::new(
                    "Neo.ClientError.Request.Invalid",
                    "RUN needs a query string",
                ))
                .await;
                return false;
            };
            let params = match params_of(f.get(1)) {
                Ok(p) => p,
                Err(e) => {
                    c.failed(e).await;
                    return false;
                }
            };
            // The transaction's deadline, or an auto-commit statement's own.
            let deadline = if c.in_tx {
                c.tx_deadline
            } else {
                ClientDeadline::of(f.get(2))
            };
            // (Answered by `answer_run`, before the next message's answer or at the
            // end of what the client sent.)
            match c.run(text.to_string(), params, deadline) {
                Ok(inline) => {
                    c.state = if c.in_tx {
                        State::TxStreaming
                    } else {
                        State::Streaming
                    };
                    if inline {
                        c.await_sync().await;
                        // The I/O thread is the other connections' too: a client that
                        // pipelines many quick statements lets them in between.
                        tokio::task::yield_now().await;
                    }
                }
                Err(e) => c.failed(e).await,
            }
        }
        (PULL | DISCARD, State::Streaming | State::TxStreaming) => {
            c.pull(pull_n(f), tag == DISCARD).await;
            if c.state == State::Failed {
                c.reset().await;
            }
        }
        (t, s) => {
            c.failed(Failure::new(
                "Neo.ClientError.Request.Invalid",
                format!("message 0x{t:02X} is not expected in state {s:?}"),
            ))
            .await
        }
    }
    false
}

impl Conn {
    /// Answers a failure: what is open is dropped, and messages are ignored until a
    /// RESET.
    async fn failed(&mut self, f: Failure) {
        fail(&mut self.out, &f);
        self.reset().await;
        self.state = State::Failed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packstream::decode;

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

    /// Runs `text` with `n` as its parameter on `c`: whether it ran on the I/O thread
    /// (its end known at once after the RUN), and the records the PULL answers.
    async fn run_pull(c: &mut Conn, text: &str, n: i64) -> (bool, Vec<Pack>) {
        let params = Pack::map(vec![("n", Pack::Int(n))]);
        assert!(!handle(c, RUN, &[Pack::str(text), params, Pack::map(vec![])]).await);
        let inline = c.open.as_ref().is_some_and(|o| o.done.is_some());
        handle(c, PULL, &[Pack::map(vec![("n", Pack::Int(-1))])]).await;
        let out = std::mem::take(&mut c.out);
        let mut at = 0;
        let mut records = Vec::new();
        while let Some((m, used)) = take_message(&out[at..], usize::MAX).unwrap() {
            at += used;
            match decode(&m).unwrap() {
                Pack::Struct(RECORD, f) => records.extend(f),
                Pack::Struct(SUCCESS, _) => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(c.state, State::Ready);
        (inline, records)
    }

    /// A graph read that was quick on a worker runs on the I/O thread next time. When
    /// an inline run outruns its deadline or makes more than a batch of records, the
    /// statement runs again on a worker and answers whole; a write never runs inline
    /// where checkpoints are not in the background (a due one would run at its commit).
    /// A quick graph read whose parameter `n` makes it as slow as wanted.
    const COUNT: &str = "UNWIND range(1, $n) AS x RETURN count(x) AS c";

    /// A runtime for a test: the server's (several threads) or one thread, on which a
    /// task runs only when another yields.
    fn runtime(multi_thread: bool) -> tokio::runtime::Runtime {
        let mut b = if multi_thread {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(1);
            b
        } else {
            tokio::runtime::Builder::new_current_thread()
        };
        b.enable_all().build().unwrap()
    }

    /// Runs `text` ([`COUNT`] or alike) until a run of it is inline; how many
    /// ran on a worker before (a loaded machine can make a quick run slow).
    async fn until_inline(c: &mut Conn, text: &str) -> usize {
        let mut runs = 0;
        loop {
            let (inline, rows) = run_pull(c, text, 4).await;
            assert_eq!(rows, vec![Pack::List(vec![Pack::Int(4)])]);
            if inline {
                return runs;
            }
            runs += 1;
            assert!(runs <= 1000, "{:?}", c.opts.caches.quick());
        }
    }

    /// A connection to a new database at `dir`, logged in.
    async fn logged_in(dir: &std::path::Path) -> Conn {
        logged_in_with(dir, Default::default()).await
    }

    /// [`logged_in`] to a database opened with `store_opts`.
    async fn logged_in_with(
        dir: &std::path::Path,
        store_opts: quiver_engine::StoreOptions,
    ) -> Conn {
        let store = Store::open(&dir.join("db"), true, store_opts).unwrap();
        let opts = Arc::new(ServeOptions {
            auth: false,
            ..ServeOptions::default()
        });
        connect(store, opts).await
    }

    /// Another connection to `store`'s server of options `opts`, logged in.
    async fn connect(store: Arc<Store>, opts: Arc<ServeOptions>) -> Conn {
        let users = Arc::new(Users::load(store.dir()).unwrap());
        let peer = "127.0.0.1:1".parse().unwrap();
        let mut c = Conn::new(store, users, opts, 1, peer);
        handle(&mut c, HELLO, &[Pack::map(vec![])]).await;
        let none = Pack::map(vec![("scheme", Pack::str("none"))]);
        handle(&mut c, LOGON, &[none]).await;
        c.out.clear();
        c
    }

    /// Inline writes from several connections on a runtime of two threads: each waits
    /// for its commit's sync (leading one, beside one when two connections are open,
    /// or woken when one ends), sees its write on return, and none is lost; with two
    /// connections counted open and with eight.
    #[test]
    fn concurrent_inline_writes_wait_for_their_syncs() {
        for open in [2, 8] {
            let dir = tempfile::tempdir().unwrap();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let store_opts = quiver_engine::StoreOptions {
                    background_checkpoints: true,
                    ..Default::default()
                };
                let store = Store::open(&dir.path().join("db"), true, store_opts).unwrap();
                let opts = Arc::new(ServeOptions {
                    auth: false,
                    ..ServeOptions::default()
                });
                opts.caches.live.store(open, Ordering::Relaxed);
                let (per, conns) = (40i64, 6i64);
                let tasks: Vec<_> = (0..conns)
                    .map(|t| {
                        let (store, opts) = (store.clone(), opts.clone());
                        tokio::spawn(async move {
                            let mut c = connect(store, opts).await;
                            let create = "CREATE (w:W {k: $n}) RETURN w.k AS k";
                            let seen = "MATCH (w:W) WHERE w.k = $n RETURN count(w) AS c";
                            let mut inline_runs = 0;
                            for i in 0..per {
                                let k = t * 1000 + i;
                                let (inline, rows) = run_pull(&mut c, create, k).await;
                                assert_eq!(rows, vec![Pack::List(vec![Pack::Int(k)])]);
                                inline_runs += usize::from(inline);
                                let (_, rows) = run_pull(&mut c, seen, k).await;
                                assert_eq!(rows, vec![Pack::List(vec![Pack::Int(1)])], "{k}");
                            }
                            inline_runs
                        })
                    })
                    .collect();
                let mut inline_runs = 0;
                for t in tasks {
                    inline_runs += t.await.unwrap();
                }
                assert!(inline_runs > 0, "no write ran inline");
                let mut c = connect(store.clone(), opts.clone()).await;
                let count = "MATCH (w:W) WHERE $n > 0 RETURN count(w) AS c";
                let (_, rows) = run_pull(&mut c, count, 1).await;
                assert_eq!(rows, vec![Pack::List(vec![Pack::Int(per * conns)])]);
            });
            drop(rt);
            // Every acknowledged write is in the log: found again after a reopen.
            runtime(false).block_on(async {
                let store = Store::open(&dir.path().join("db"), false, Default::default()).unwrap();
                let opts = Arc::new(ServeOptions {
                    auth: false,
                    ..ServeOptions::default()
                });
                let mut c = connect(store, opts).await;
                let count = "MATCH (w:W) WHERE $n > 0 RETURN count(w) AS c";
                let (_, rows) = run_pull(&mut c, count, 1).await;
                assert_eq!(rows, vec![Pack::List(vec![Pack::Int(240)])]);
            });
        }
    }

    /// Where checkpoints run in the background, an auto-commit write that was quick on
    /// a worker runs inline too, and each statement's writes happen once: one whose
    /// inline run makes more than a batch of records stops before its commit (rolled
    /// back), and the worker's run is the one that commits.
    #[test]
    fn quick_writes_run_inline_each_once() {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime(false);
        rt.block_on(async {
            let store_opts = quiver_engine::StoreOptions {
                background_checkpoints: true,
                ..Default::default()
            };
            let mut c = logged_in_with(dir.path(), store_opts).await;
            let create = "UNWIND range(1, $n) AS x CREATE (w:W {x: x}) RETURN w.x AS x";
            let (mut made, mut inline_runs, mut runs) = (0i64, 0, 0);
            // (Bounds far past the few runs it takes, for a machine under load.)
            while inline_runs < 3 {
                let (inline, rows) = run_pull(&mut c, create, 2).await;
                assert_eq!(
                    rows,
                    vec![
                        Pack::List(vec![Pack::Int(1)]),
                        Pack::List(vec![Pack::Int(2)])
                    ]
                );
                made += 2;
                inline_runs += usize::from(inline);
                runs += 1;
                assert!(runs <= 1000, "{:?}", c.opts.caches.quick());
            }
            let (inline, rows) = run_pull(&mut c, create, 50_000).await;
            assert!(!inline);
            assert_eq!(rows.len(), 50_000);
            made += 50_000;
            let count = "MATCH (w:W) WHERE $n > 0 RETURN count(w) AS c";
            let (_, rows) = run_pull(&mut c, count, 1).await;
            assert_eq!(rows, vec![Pack::List(vec![Pack::Int(made)])]);
        });
    }

    /// A server's connections share what they learn: a text one connection found quick
    /// runs inline on another's first run of it, parsed once.
    #[test]
    fn connections_share_quick_texts() {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime(false);
        rt.block_on(async {
            let mut a = logged_in(dir.path()).await;
            let q = COUNT;
            assert!(!run_pull(&mut a, q, 1).await.0);
            until_inline(&mut a, q).await;
            let mut b = connect(a.store.clone(), a.opts.clone()).await;
            let debt = a.opts.caches.quick()[q];
            let (inline, rows) = run_pull(&mut b, q, 2).await;
            assert_eq!(rows, vec![Pack::List(vec![Pack::Int(2)])]);
            // Inline, or tried inline and stopped (a machine under load): then owed.
            assert!(inline || a.opts.caches.quick()[q] > debt);
            assert!(format!("{:?}", a.opts.caches).contains("ParseCache(1 texts)"));
        });
    }

    /// Statements run on the I/O thread yield to the thread's other connections one
    /// at a time: a client that pipelines many does not hold the thread for all.
    #[test]
    fn inline_statements_let_other_connections_in() {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime(false);
        rt.block_on(async {
            let mut c = logged_in(dir.path()).await;
            let q = COUNT;
            run_pull(&mut c, q, 1).await;
            until_inline(&mut c, q).await;
            let other = Arc::new(AtomicBool::new(false));
            let flag = other.clone();
            tokio::spawn(async move { flag.store(true, Ordering::Relaxed) });
            let mut ran = 0;
            while !other.load(Ordering::Relaxed) && ran < 50 {
                run_pull(&mut c, q, 3).await;
                ran += 1;
            }
            assert_eq!(ran, 1, "the other task ran after {ran} inline statements");
        });
    }

    #[test]
    fn quick_reads_run_inline_and_fall_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime(true);
        rt.block_on(async {
            let mut c = logged_in(dir.path()).await;
            let count = COUNT;
            assert_eq!(
                run_pull(&mut c, count, 3).await,
                (false, vec![Pack::List(vec![Pack::Int(3)])])
            );
            // (A first run slowed past QUICK by a loaded machine takes another.)
            until_inline(&mut c, count).await;
            // Tens of milliseconds: stopped at the deadline, then run whole on a worker.
            let (inline, rows) = run_pull(&mut c, count, 2_000_000).await;
            assert!(!inline);
            assert_eq!(rows, vec![Pack::List(vec![Pack::Int(2_000_000)])]);
            // Its 2 ms at the deadline are owed.
            let debt = c.opts.caches.quick()[count];
            assert!(debt >= INLINE_DEBT, "{debt}");
            // More records than an inline run keeps: all of them, in order, from a worker.
            let list = "UNWIND range(1, $n) AS x RETURN x";
            run_pull(&mut c, list, 1).await;
            let (inline, rows) = run_pull(&mut c, list, 50_000).await;
            assert!(!inline);
            assert_eq!(rows.len(), 50_000);
            assert!(rows
                .iter()
                .enumerate()
                .all(|(i, r)| *r == Pack::List(vec![Pack::Int(i as i64 + 1)])));
            // In debt, the text runs on workers, and its quick runs there pay the debt
            // back: then it runs inline again.
            // (Bounds far past the few runs it takes, for a machine under load.)
            let mut runs = 0;
            while !run_pull(&mut c, count, 1).await.0 {
                runs += 1;
                assert!(runs <= 1000, "{:?}", c.opts.caches.quick());
            }
            assert!(runs > 0);
            // A text that is sometimes slow goes back inline once its quick runs make up.
            let sum = "UNWIND range(1, $n) AS x RETURN sum(x) AS s";
            run_pull(&mut c, sum, 1).await;
            for _ in 0..3 {
                let (_, rows) = run_pull(&mut c, sum, 2_000_000).await;
                assert_eq!(rows, vec![Pack::List(vec![Pack::Int(2_000_001_000_000)])]);
                let mut runs = 0;
                while !run_pull(&mut c, sum, 2).await.0 {
                    runs += 1;
                    assert!(runs <= 1000, "{:?}", c.opts.caches.quick());
                }
            }
            // Writes and procedures never run inline.
            let create = "CREATE (n:T {v: $n}) RETURN n.v AS v";
            for i in 0..3 {
                assert_eq!(
                    run_pull(&mut c, create, i).await,
                    (false, vec![Pack::List(vec![Pack::Int(i)])])
                );
            }
            let labels = "CALL db.labels() YIELD label WHERE size(label) > $n RETURN label";
            for _ in 0..3 {
                assert!(!run_pull(&mut c, labels, 0).await.0);
            }
        });
    }

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

    /// The non-blocking reader takes whole messages out of what arrived, however it
    /// was split, and refuses one past the cap before it has all arrived.
    #[test]
    fn messages_are_taken_from_partial_input() {
        let a = Pack::Struct(0x10, vec![Pack::str("x".repeat(70_000))]);
        let b = Pack::Struct(0x3F, vec![Pack::map(vec![("n", Pack::Int(-1))])]);
        let mut wire = vec![0, 0]; // a NOOP chunk first
        write_message(&mut wire, &a);
        write_message(&mut wire, &b);
        let first_end = wire.len() - {
            let mut one = Vec::new();
            write_message(&mut one, &b);
            one.len()
        };
        for cut in [0, 1, 2, 3, 100, 65_537, first_end - 1] {
            assert!(
                take_message(&wire[..cut], 1 << 20).unwrap().is_none(),
                "{cut}"
            );
        }
        let (m, used) = take_message(&wire, 1 << 20).unwrap().unwrap();
        assert_eq!((decode(&m).unwrap(), used), (a, first_end));
        let (m, used) = take_message(&wire[first_end..], 1 << 20).unwrap().unwrap();
        assert_eq!((decode(&m).unwrap(), first_end + used), (b, wire.len()));
        // Only the first chunk's header is in: already past a 1 KiB cap.
        assert!(take_message(&wire[..4], 1 << 10).is_err());
    }
}
