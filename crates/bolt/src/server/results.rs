//! A result on its way to the client: the events a running statement sends, the
//! records batched into messages of about 64 KiB, the open cursor that PULL n drains,
//! the columns' slot, and the SUCCESS metadata (summary counters).

use super::*;

/// What a statement's worker sends the connection, gathered so that a small result
/// crosses to the I/O side once: its columns (once, with the first send), records, and
/// at the end its outcome.
pub(crate) struct Event {
    pub(crate) columns: Option<Vec<String>>,
    pub(crate) rows: Option<Records>,
    pub(crate) done: Option<Result<Done, Failure>>,
}

/// What the connection wants of the running statement's records, for the worker to
/// decide when to send (`Conn::demand`): this many more (`ALL`: every one; 0: none
/// asked, so what is made goes at once, which gives an unpulled RUN its columns).
pub(crate) const ALL: i64 = -1;

/// A worker sends its records at least every this many bytes (so a PULL of everything
/// streams in pieces through the channel of two).
pub(crate) const SEND_BYTES: usize = 64 << 10;

impl Done {
    pub(crate) fn of(s: quiver_query::Summary) -> Done {
        Done {
            columns: s.columns,
            plan: s.plan.map(|p| (p, !s.explained)),
            wrote: !s.counters.is_empty(),
            counters: s.counters,
            rerunnable: s.rerunnable,
            elapsed: s.elapsed,
            text: None,
        }
    }
}

pub(crate) struct Done {
    pub(crate) columns: Vec<String>,
    /// EXPLAIN's or PROFILE's plan text, and whether it was profiled.
    pub(crate) plan: Option<(String, bool)>,
    pub(crate) counters: quiver_engine::Counters,
    pub(crate) wrote: bool,
    /// The statement read and wrote the graph alone, so that it may run inline (see
    /// [`QUICK`]), and how long it ran.
    pub(crate) rerunnable: bool,
    pub(crate) elapsed: Duration,
    /// The text of an auto-commit statement run on a worker, given back to be
    /// remembered as quick (or its debt paid down) when it turns out so.
    pub(crate) text: Option<String>,
}

/// A batch of RECORD messages, encoded by the worker that made them (the I/O tasks
/// only copy bytes): message `i` is `bytes[ends[i - 1]..ends[i]]`.
#[derive(Default)]
pub(crate) struct Records {
    pub(crate) bytes: Vec<u8>,
    pub(crate) ends: Vec<usize>,
    /// The first message not sent yet.
    pub(crate) next: usize,
}

impl Records {
    /// Appends a batch's rows as RECORD messages, each value written straight as
    /// PackStream (no `Pack` tree); `body` is scratch space.
    pub(crate) fn push(
        &mut self,
        g: &quiver_query::graph::Graph,
        b: &quiver_query::batch::Batch,
        body: &mut Vec<u8>,
    ) -> Result<(), QueryError> {
        let read = ReadAhead::nodes(g, &b.cols)?;
        for r in 0..b.len {
            body.clear();
            struct_header(1, RECORD, body);
            list_header(b.cols.len(), body);
            for c in &b.cols {
                write_value_with(g, &c[r], body, &read)?;
            }
            write_chunked(&mut self.bytes, body);
            self.ends.push(self.bytes.len());
        }
        Ok(())
    }

    /// How many are not sent yet.
    pub(crate) fn len(&self) -> usize {
        self.ends.len() - self.next
    }

    /// Appends up to `n` messages (all for a negative `n`) to `out`; how many.
    pub(crate) fn send(&mut self, out: &mut Vec<u8>, n: i64) -> i64 {
        let left = self.ends.len() - self.next;
        let k = if n < 0 { left } else { left.min(n as usize) };
        let from = if self.next == 0 {
            0
        } else {
            self.ends[self.next - 1]
        };
        self.next += k;
        let to = if self.next == 0 {
            0
        } else {
            self.ends[self.next - 1]
        };
        out.extend_from_slice(&self.bytes[from..to]);
        k as i64
    }
}

/// A statement whose rows are being pulled.
pub(crate) struct Open {
    pub(crate) events: mpsc::Receiver<Event>,
    /// Its fields, once the worker has sent them.
    pub(crate) columns: Option<Vec<String>>,
    /// The RUN is not answered yet (the answer waits for the columns): when it came.
    pub(crate) unanswered: Option<Instant>,
    /// Batches with records not sent yet.
    pub(crate) pending: VecDeque<Records>,
    pub(crate) done: Option<Result<Done, Failure>>,
    pub(crate) started: Instant,
    /// The query timeout passed and the statement was told to stop.
    pub(crate) timed_out: bool,
    /// The client's deadline (its `tx_timeout`), if it set one.
    pub(crate) deadline: Option<ClientDeadline>,
}

/// A deadline a client set: Bolt's `tx_timeout` (milliseconds) on BEGIN, or on an
/// auto-commit RUN.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientDeadline {
    pub(crate) at: Instant,
    pub(crate) timeout: Duration,
}

impl ClientDeadline {
    /// The deadline of a message's extra map, from now (none for a missing, zero or
    /// negative `tx_timeout`: the server's own limit stands).
    pub(crate) fn of(extra: Option<&Pack>) -> Option<ClientDeadline> {
        let ms = extra?.get("tx_timeout")?.as_int()?;
        (ms > 0).then(|| {
            let timeout = Duration::from_millis(ms as u64);
            ClientDeadline {
                at: Instant::now() + timeout,
                timeout,
            }
        })
    }

    /// What Neo4j answers a transaction that outlived its client's timeout.
    pub(crate) fn failure(&self) -> Failure {
        Failure::new(
            "Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration",
            format!(
                "The transaction has not completed within the timeout specified at its start by the client ({} ms) and was terminated. You may want to retry with a longer timeout.",
                self.timeout.as_millis()
            ),
        )
    }
}

impl Open {
    /// Takes the statement's next event into `columns`, `pending` and `done`.
    pub(crate) async fn pump(&mut self, timeout: Option<Duration>, cancel: &AtomicBool) {
        match self.recv(timeout, cancel).await {
            Some(e) => {
                if e.columns.is_some() {
                    self.columns = e.columns;
                }
                if let Some(r) = e.rows.filter(|r| r.len() > 0) {
                    self.pending.push_back(r);
                }
                if e.done.is_some() {
                    self.done = e.done;
                }
            }
            None => self.done = Some(Err(internal())),
        }
    }

    /// Records received and not sent.
    pub(crate) fn pending_rows(&self) -> i64 {
        self.pending.iter().map(|r| r.len() as i64).sum()
    }

    /// The statement's next event (`None`: its worker stopped without a word). Past
    /// `timeout` since it started, the statement is cancelled and its cancellation
    /// reported as a timeout.
    pub(crate) async fn recv(
        &mut self,
        timeout: Option<Duration>,
        cancel: &AtomicBool,
    ) -> Option<Event> {
        // The earlier of the server's limit and the client's deadline.
        let server = timeout.map(|t| (self.started + t, false));
        let client = self.deadline.map(|d| (d.at, true));
        let first = match (server, client) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        };
        let ev = match first {
            Some((at, by_client)) if !self.timed_out => {
                match tokio::time::timeout_at(
                    tokio::time::Instant::from_std(at),
                    self.events.recv(),
                )
                .await
                {
                    Ok(e) => e,
                    Err(_) => {
                        self.timed_out = true;
                        if !by_client {
                            self.deadline = None;
                        }
                        cancel.store(true, Ordering::Relaxed);
                        self.events.recv().await
                    }
                }
            }
            _ => self.events.recv().await,
        }?;
        let mut ev = ev;
        if let Some(Err(f)) = &ev.done {
            if self.timed_out && f.code == "Neo.TransientError.Transaction.Terminated" {
                ev.done = Some(Err(match self.deadline {
                    Some(d) => d.failure(),
                    None => Failure::new(
                        "Neo.ClientError.Transaction.TransactionTimedOut",
                        format!(
                            "the statement ran longer than the server's query timeout ({} s) and was stopped",
                            timeout.map_or(0, |t| t.as_secs())
                        ),
                    ),
                }));
            }
        }
        Some(ev)
    }
}

/// What a statement's `on_columns` hook leaves for its worker to send.
#[derive(Default)]
pub(crate) struct ColumnSlot {
    pub(crate) columns: Option<Vec<String>>,
    /// The running statement's channel: with no PULL waiting (a RUN sent on its own),
    /// the hook sends the columns at once, so that the RUN is answered before the
    /// first record is made (an aggregation's comes at its end). Weak: a worker that
    /// stops without a word still closes the channel.
    pub(crate) events: Option<mpsc::WeakSender<Event>>,
}

pub(crate) fn success(out: &mut Vec<u8>, meta: Vec<(&str, Pack)>) {
    write_message(out, &Pack::Struct(SUCCESS, vec![Pack::map(meta)]));
}

pub(crate) fn stats(c: &quiver_engine::Counters) -> Pack {
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
