//! The memory budget and its grants.
//!
//! A [`MemoryBudget`] is a byte count shared by everything one import or one query
//! holds. A consumer that is about to allocate a large buffer first takes a [`Grant`]
//! for it; when the budget cannot cover the request the consumer spills, flushes early,
//! waits or fails with [`BudgetExceeded`]. Grants return their bytes when dropped (RAII),
//! so accounting cannot leak on an error path. This is the cure for seed 004's oversized
//! memory grants: grants are sized to need and grown in steps, never asked for up front.
//!
//! A query's budget is a [`MemoryBudget::child`] of the database's. When the database's
//! limit (not the query's own) refuses a request, [`Grant::grow_waiting`] waits for other
//! queries to give memory back, as SQL Server's grant queue does, instead of failing at
//! once: bounded by the child's [`WaitPolicy`], cancellable, and with a deadlock rule.
//! When every query that holds memory is waiting for more, none can go on; the youngest
//! of them gives up (a retryable error) so that the others can.
//!
//! The budget accounts for what buffers hold; it is not an allocator. Small, bounded
//! allocations (headers, per-chunk metadata) are covered by the fixed overhead that the
//! import promises on top of the budget.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A request the budget could not cover.
#[derive(Debug, Clone, thiserror::Error)]
#[error("memory budget exceeded by {what}: asked {asked_bytes} bytes, {available_bytes} of {limit_bytes} available")]
pub struct BudgetExceeded {
    pub what: &'static str,
    pub asked_bytes: u64,
    pub available_bytes: u64,
    pub limit_bytes: u64,
}

/// Why [`Grant::grow_waiting`] gave up.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GrantRefused {
    /// Refused without waiting: the budget's own limit (waiting cannot help), or a
    /// budget that does not wait.
    #[error("{0}")]
    Exceeded(BudgetExceeded),
    /// The parent's limit stayed full for the whole wait.
    #[error("{refused} (waited {waited:?})")]
    TimedOut {
        refused: BudgetExceeded,
        waited: Duration,
    },
    /// Every holder of the parent's memory was waiting for more; this one, the
    /// youngest, gave up so that the others can go on.
    #[error("{refused} (every query holding memory was waiting for more; waited {waited:?})")]
    Deadlock {
        refused: BudgetExceeded,
        waited: Duration,
    },
    /// The budget's cancel flag was set while it waited.
    #[error("cancelled while waiting for memory")]
    Cancelled,
}

impl GrantRefused {
    /// The refusal behind it (`None`: cancelled).
    pub fn exceeded(&self) -> Option<&BudgetExceeded> {
        match self {
            GrantRefused::Exceeded(e)
            | GrantRefused::TimedOut { refused: e, .. }
            | GrantRefused::Deadlock { refused: e, .. } => Some(e),
            GrantRefused::Cancelled => None,
        }
    }
}

/// How a child budget waits when its parent's limit is full.
#[derive(Debug, Clone)]
pub struct WaitPolicy {
    /// The longest one request waits.
    pub timeout: Duration,
    /// Set to stop waiting (the query was cancelled).
    pub cancel: Option<Arc<AtomicBool>>,
    /// Work a waiting thread does instead of sleeping, true when it did some: a thread
    /// pool's queued jobs. A pool's worker that slept while it waited would hold back
    /// the jobs of the very query whose memory it waits for (a parallel sort, the
    /// morsels of another aggregation): with two workers, two waiting morsels stop
    /// every other query's parallel work, and no memory ever comes back.
    pub idle: Option<fn() -> bool>,
}

/// Where the children of a budget wait for its memory.
#[derive(Debug, Default)]
struct WaitRoom {
    /// Waiting children by id: how many of their threads wait, and the child.
    book: Mutex<BTreeMap<u64, (usize, MemoryBudget)>>,
    cv: Condvar,
    /// Threads waiting (read without the lock on every release).
    n_waiting: AtomicUsize,
    /// Children holding more than nothing.
    holders: AtomicUsize,
    next_child: AtomicU64,
}

/// How long a deadlock must last before a victim gives up: a holder that is between two
/// requests is not waiting, and the condition must survive its next one.
const DEADLOCK_GRACE: Duration = Duration::from_millis(250);

#[derive(Debug)]
struct Inner {
    limit_bytes: u64,
    used_bytes: AtomicU64,
    peak_bytes: AtomicU64,
    /// A budget inside a larger one (a query's inside the database's): every byte is
    /// also taken from the parent.
    parent: Option<MemoryBudget>,
    /// Where this budget's children wait.
    room: WaitRoom,
    /// Among the parent's children, higher is younger.
    id: u64,
    /// How this budget waits for its parent (`None`: it fails at once).
    wait: Option<WaitPolicy>,
    /// Bytes asked and not yet granted while a request waits.
    pending_bytes: AtomicU64,
    /// Total time requests waited.
    waited_nanos: AtomicU64,
}

/// A shared byte budget. Cloning shares the same budget.
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    inner: Arc<Inner>,
}

fn inner(limit_bytes: u64, parent: Option<MemoryBudget>, wait: Option<WaitPolicy>) -> Inner {
    let id = parent.as_ref().map_or(0, |p| {
        p.inner.room.next_child.fetch_add(1, Ordering::Relaxed)
    });
    Inner {
        limit_bytes,
        used_bytes: AtomicU64::new(0),
        peak_bytes: AtomicU64::new(0),
        parent,
        room: WaitRoom::default(),
        id,
        wait,
        pending_bytes: AtomicU64::new(0),
        waited_nanos: AtomicU64::new(0),
    }
}

impl MemoryBudget {
    pub fn new(limit_bytes: u64) -> Self {
        MemoryBudget {
            inner: Arc::new(inner(limit_bytes, None, None)),
        }
    }

    /// A budget of at most `limit_bytes` whose grants are also taken from `self`: a
    /// request fails when either cannot cover it.
    pub fn child(&self, limit_bytes: u64) -> Self {
        MemoryBudget {
            inner: Arc::new(inner(limit_bytes, Some(self.clone()), None)),
        }
    }

    /// Like [`child`](Self::child), but [`Grant::grow_waiting`] waits under `policy`
    /// when `self`'s limit is what refuses.
    pub fn child_waiting(&self, limit_bytes: u64, policy: WaitPolicy) -> Self {
        MemoryBudget {
            inner: Arc::new(inner(limit_bytes, Some(self.clone()), Some(policy))),
        }
    }

    pub fn limit_bytes(&self) -> u64 {
        self.inner.limit_bytes
    }

    pub fn used_bytes(&self) -> u64 {
        self.inner.used_bytes.load(Ordering::Relaxed)
    }

    pub fn available_bytes(&self) -> u64 {
        self.inner.limit_bytes.saturating_sub(self.used_bytes())
    }

    /// The most bytes ever granted at once.
    pub fn peak_bytes(&self) -> u64 {
        self.inner.peak_bytes.load(Ordering::Relaxed)
    }

    /// Bytes a request is waiting for now (0: none waits).
    pub fn waiting_for_bytes(&self) -> u64 {
        self.inner.pending_bytes.load(Ordering::Relaxed)
    }

    /// How long this budget's requests have waited, in total.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.inner.waited_nanos.load(Ordering::Relaxed))
    }

    /// A child's used bytes went from none to some (`+`) or back (`-`).
    fn note_holder(&self, now_holds: bool) {
        if let Some(p) = &self.inner.parent {
            if now_holds {
                p.inner.room.holders.fetch_add(1, Ordering::SeqCst);
            } else {
                p.inner.room.holders.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    fn reserve(&self, bytes: u64, what: &'static str) -> Result<(), BudgetExceeded> {
        let inner = &self.inner;
        let mut used = inner.used_bytes.load(Ordering::Relaxed);
        loop {
            let new = used.saturating_add(bytes);
            if new > inner.limit_bytes {
                return Err(BudgetExceeded {
                    what,
                    asked_bytes: bytes,
                    available_bytes: inner.limit_bytes.saturating_sub(used),
                    limit_bytes: inner.limit_bytes,
                });
            }
            match inner.used_bytes.compare_exchange_weak(
                used,
                new,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    // Every transition from nothing to something (and back, in
                    // `release_local`) is told, so the parent's holder count is exact.
                    if used == 0 && bytes > 0 {
                        self.note_holder(true);
                    }
                    if let Some(p) = &inner.parent {
                        if let Err(e) = p.reserve(bytes, what) {
                            self.release_local(bytes);
                            return Err(e);
                        }
                    }
                    inner.peak_bytes.fetch_max(new, Ordering::Relaxed);
                    return Ok(());
                }
                Err(actual) => used = actual,
            }
        }
    }

    /// Counts `bytes` whatever the limit: for memory that is held already (a replayed
    /// log), so that the accounting stays true and new requests are refused instead.
    fn reserve_anyway(&self, bytes: u64) {
        let prev = self.inner.used_bytes.fetch_add(bytes, Ordering::AcqRel);
        if prev == 0 && bytes > 0 {
            self.note_holder(true);
        }
        self.inner
            .peak_bytes
            .fetch_max(prev + bytes, Ordering::Relaxed);
        if let Some(p) = &self.inner.parent {
            p.reserve_anyway(bytes);
        }
    }

    /// Takes back a local reservation whose parent refused.
    fn release_local(&self, bytes: u64) {
        let prev = self.inner.used_bytes.fetch_sub(bytes, Ordering::AcqRel);
        debug_assert!(prev >= bytes, "released more than granted");
        if prev == bytes {
            self.note_holder(false);
        }
        self.wake();
    }

    /// Wakes the children waiting for this budget's memory.
    fn wake(&self) {
        let room = &self.inner.room;
        if room.n_waiting.load(Ordering::SeqCst) > 0 {
            // Under the lock: a waiter checks and sleeps while holding it, so the
            // wake-up cannot fall between its check and its sleep.
            let _book = lock(&room.book);
            room.cv.notify_all();
        }
    }

    fn release(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        // The parent first, so that a waiter woken by it finds the bytes back.
        if let Some(p) = &self.inner.parent {
            p.release(bytes);
        }
        self.release_local(bytes);
    }

    /// Takes a grant of exactly `bytes`, or fails without taking anything.
    pub fn try_grant(&self, bytes: u64, what: &'static str) -> Result<Grant, BudgetExceeded> {
        self.reserve(bytes, what)?;
        Ok(Grant {
            budget: self.clone(),
            bytes,
            what,
        })
    }

    /// An empty grant that can grow later with [`Grant::try_grow`].
    pub fn empty_grant(&self, what: &'static str) -> Grant {
        Grant {
            budget: self.clone(),
            bytes: 0,
            what,
        }
    }

    /// Takes `bytes`, waiting under this budget's policy while its parent's limit is
    /// what refuses (see the module's documentation).
    fn reserve_waiting(&self, bytes: u64, what: &'static str) -> Result<(), GrantRefused> {
        let refused = match self.reserve(bytes, what) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let (Some(policy), Some(parent)) = (&self.inner.wait, &self.inner.parent) else {
            return Err(GrantRefused::Exceeded(refused));
        };
        if self.used_bytes().saturating_add(bytes) > self.inner.limit_bytes {
            // The query's own limit: no other query can make room for it.
            return Err(GrantRefused::Exceeded(refused));
        }
        let room = &parent.inner.room;
        let me = self.inner.id;
        let start = Instant::now();
        let mut book = lock(&room.book);
        book.entry(me).or_insert((0, self.clone())).0 += 1;
        room.n_waiting.fetch_add(1, Ordering::SeqCst);
        self.inner.pending_bytes.fetch_add(bytes, Ordering::Relaxed);
        let mut stuck_since: Option<Instant> = None;
        let outcome = loop {
            let last = match self.reserve(bytes, what) {
                Ok(()) => break Ok(()),
                Err(e) => e,
            };
            if self.used_bytes().saturating_add(bytes) > self.inner.limit_bytes {
                break Err(GrantRefused::Exceeded(last));
            }
            if policy
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
            {
                break Err(GrantRefused::Cancelled);
            }
            let waited = start.elapsed();
            if waited >= policy.timeout {
                break Err(GrantRefused::TimedOut {
                    refused: last,
                    waited,
                });
            }
            // Deadlock: every child holding memory is here, and none will return any.
            let waiting_holders: Vec<u64> = book
                .iter()
                .filter(|(_, (_, b))| b.used_bytes() > 0)
                .map(|(id, _)| *id)
                .collect();
            let all_stuck = !waiting_holders.is_empty()
                && waiting_holders.len() >= room.holders.load(Ordering::SeqCst);
            if all_stuck && waiting_holders.last() == Some(&me) {
                let since = *stuck_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= DEADLOCK_GRACE {
                    break Err(GrantRefused::Deadlock {
                        refused: last,
                        waited,
                    });
                }
            } else {
                stuck_since = None;
            }
            if let Some(idle) = policy.idle {
                drop(book);
                let worked = idle();
                book = lock(&room.book);
                if worked {
                    continue;
                }
            }
            // A pool's worker comes back soon to look for work again.
            let most = if policy.idle.is_some() { 5 } else { 50 };
            let slice = Duration::from_millis(most).min(policy.timeout - waited);
            book = room
                .cv
                .wait_timeout(book, slice)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        };
        if let Some(e) = book.get_mut(&me) {
            e.0 -= 1;
            if e.0 == 0 {
                book.remove(&me);
            }
        }
        room.n_waiting.fetch_sub(1, Ordering::SeqCst);
        drop(book);
        self.inner.pending_bytes.fetch_sub(bytes, Ordering::Relaxed);
        self.inner
            .waited_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        outcome
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bytes held against a [`MemoryBudget`]; returned when dropped.
#[derive(Debug)]
pub struct Grant {
    budget: MemoryBudget,
    bytes: u64,
    what: &'static str,
}

impl Grant {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Grows the grant by `extra` bytes, or leaves it unchanged and fails.
    pub fn try_grow(&mut self, extra: u64) -> Result<(), BudgetExceeded> {
        self.budget.reserve(extra, self.what)?;
        self.bytes += extra;
        Ok(())
    }

    /// Grows the grant to `bytes` (if it is less), waiting while the parent's limit is
    /// full and the budget's [`WaitPolicy`] allows (see the module's documentation).
    pub fn grow_waiting(&mut self, bytes: u64) -> Result<(), GrantRefused> {
        if bytes <= self.bytes {
            return Ok(());
        }
        self.budget.reserve_waiting(bytes - self.bytes, self.what)?;
        self.bytes = bytes;
        Ok(())
    }

    /// Grows or shrinks the grant to exactly `bytes`.
    pub fn try_resize(&mut self, bytes: u64) -> Result<(), BudgetExceeded> {
        if bytes > self.bytes {
            self.try_grow(bytes - self.bytes)
        } else {
            self.budget.release(self.bytes - bytes);
            self.bytes = bytes;
            Ok(())
        }
    }

    /// Sets the grant to exactly `bytes`, past the limit if need be (see
    /// [`MemoryBudget::reserve_anyway`]).
    pub fn force_resize(&mut self, bytes: u64) {
        if bytes > self.bytes {
            self.budget.reserve_anyway(bytes - self.bytes);
        } else {
            self.budget.release(self.bytes - bytes);
        }
        self.bytes = bytes;
    }

    pub fn budget(&self) -> &MemoryBudget {
        &self.budget
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.release(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_takes_from_its_parent() {
        let db = MemoryBudget::new(100);
        let q1 = db.child(80);
        let q2 = db.child(80);
        let a = q1.try_grant(70, "a").unwrap();
        assert_eq!(db.used_bytes(), 70);
        // q2's own limit would allow 40; the parent has 30 left.
        let e = q2.try_grant(40, "b").unwrap_err();
        assert_eq!(e.limit_bytes, 100);
        assert_eq!(q2.used_bytes(), 0, "a refused request takes nothing");
        let mut b = q2.try_grant(30, "b").unwrap();
        assert!(b.try_grow(1).is_err());
        drop(a);
        assert_eq!(db.used_bytes(), 30);
        b.try_grow(50).unwrap();
        assert!(b.try_grow(1).is_err(), "q2's own limit of 80");
        drop(b);
        assert_eq!(
            (db.used_bytes(), q1.used_bytes(), q2.used_bytes()),
            (0, 0, 0)
        );
    }

    #[test]
    fn a_forced_grant_counts_past_the_limit() {
        let db = MemoryBudget::new(100);
        let q = db.child(1000);
        let mut held = q.empty_grant("held");
        held.force_resize(150);
        assert_eq!((db.used_bytes(), q.used_bytes()), (150, 150));
        assert!(db.try_grant(1, "more").is_err(), "new requests are refused");
        held.force_resize(40);
        assert!(db.try_grant(60, "more").is_ok());
        drop(held);
        assert_eq!(db.used_bytes(), 0);
    }

    #[test]
    fn grants_are_bounded_and_returned() {
        let b = MemoryBudget::new(100);
        let g1 = b.try_grant(60, "a").unwrap();
        assert!(b.try_grant(50, "b").is_err());
        let mut g2 = b.try_grant(40, "b").unwrap();
        assert_eq!(b.available_bytes(), 0);
        assert!(g2.try_grow(1).is_err());
        assert_eq!(g2.bytes(), 40);
        drop(g1);
        g2.try_grow(50).unwrap();
        assert_eq!(b.used_bytes(), 90);
        g2.try_resize(10).unwrap();
        assert_eq!(b.used_bytes(), 10);
        drop(g2);
        assert_eq!(b.used_bytes(), 0);
        assert_eq!(b.peak_bytes(), 100);
    }

    fn waiting(timeout_ms: u64) -> WaitPolicy {
        WaitPolicy {
            timeout: Duration::from_millis(timeout_ms),
            cancel: None,
            idle: None,
        }
    }

    #[test]
    fn a_request_waits_for_another_query_to_give_memory_back() {
        let db = MemoryBudget::new(100);
        let q1 = db.child_waiting(100, waiting(10_000));
        let q2 = db.child_waiting(100, waiting(10_000));
        let held = q1.try_grant(80, "q1").unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        let mut g = q2.empty_grant("q2");
        g.grow_waiting(50).expect("granted once q1 let go");
        assert!(
            q2.waited() >= Duration::from_millis(50),
            "{:?}",
            q2.waited()
        );
        assert_eq!((db.used_bytes(), q2.waiting_for_bytes()), (50, 0));
        t.join().unwrap();
        drop(g);
        assert_eq!(db.used_bytes(), 0);
        assert!(lock(&db.inner.room.book).is_empty(), "no one waits");
    }

    /// A waiter runs its policy's idle work instead of sleeping: here that work is
    /// what gives the memory back (as a pool's queued job of the query that holds it
    /// would), and no other thread exists to do it.
    #[test]
    fn a_waiter_does_its_idle_work_and_the_memory_it_frees_is_granted() {
        static HELD: Mutex<Option<Grant>> = Mutex::new(None);
        let db = MemoryBudget::new(100);
        let q1 = db.child_waiting(100, waiting(10_000));
        *lock(&HELD) = Some(q1.try_grant(80, "q1").unwrap());
        let q2 = db.child_waiting(
            100,
            WaitPolicy {
                timeout: Duration::from_secs(10),
                cancel: None,
                idle: Some(|| lock(&HELD).take().is_some()),
            },
        );
        let t = Instant::now();
        let mut g = q2.empty_grant("q2");
        g.grow_waiting(50)
            .expect("granted once the idle work let go");
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(db.used_bytes(), 50);
    }

    #[test]
    fn a_request_past_its_own_limit_or_without_a_policy_fails_at_once() {
        let db = MemoryBudget::new(100);
        let q = db.child_waiting(10, waiting(10_000));
        let t = Instant::now();
        let e = q.empty_grant("q").grow_waiting(11).unwrap_err();
        assert!(matches!(e, GrantRefused::Exceeded(ref x) if x.limit_bytes == 10));
        let plain = db.child(1000);
        let _other = db.try_grant(95, "other").unwrap();
        let e = plain.empty_grant("p").grow_waiting(10).unwrap_err();
        assert!(matches!(e, GrantRefused::Exceeded(ref x) if x.limit_bytes == 100));
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_wait_ends_at_its_timeout_or_when_cancelled() {
        let db = MemoryBudget::new(100);
        let _hog = db.try_grant(100, "delta").unwrap();
        let q = db.child_waiting(100, waiting(120));
        let e = q.empty_grant("q").grow_waiting(1).unwrap_err();
        let GrantRefused::TimedOut { waited, .. } = e else {
            panic!("{e:?}")
        };
        assert!(waited >= Duration::from_millis(120));
        let cancel = Arc::new(AtomicBool::new(false));
        let q = db.child_waiting(
            100,
            WaitPolicy {
                timeout: Duration::from_secs(30),
                cancel: Some(cancel.clone()),
                idle: None,
            },
        );
        let c2 = cancel.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(80));
            c2.store(true, Ordering::Relaxed);
        });
        let e = q.empty_grant("q").grow_waiting(1).unwrap_err();
        assert!(matches!(e, GrantRefused::Cancelled), "{e:?}");
        t.join().unwrap();
        assert_eq!(db.used_bytes(), 100);
    }

    #[test]
    fn when_every_holder_waits_the_youngest_gives_up() {
        let db = MemoryBudget::new(100);
        let old = db.child_waiting(100, waiting(20_000));
        let young = db.child_waiting(100, waiting(20_000));
        let mut a = old.try_grant(50, "old").unwrap();
        let mut b = young.try_grant(40, "young").unwrap();
        let t = std::thread::spawn(move || {
            // The victim's error drops what it held, as a failed query's operators do.
            let r = b.grow_waiting(70);
            (r, b.bytes())
        });
        std::thread::sleep(Duration::from_millis(30));
        let t0 = Instant::now();
        a.grow_waiting(80).expect("the older query goes on");
        let (r, held) = t.join().unwrap();
        assert!(matches!(r, Err(GrantRefused::Deadlock { .. })), "{r:?}");
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert_eq!(held, 40, "a refused request takes nothing");
        assert_eq!(db.used_bytes(), 80);
        drop(a);
        assert_eq!(db.used_bytes(), 0);
        assert_eq!(db.inner.room.holders.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn error_names_what_asked() {
        let b = MemoryBudget::new(10);
        let e = b.try_grant(11, "id map").unwrap_err();
        assert_eq!(e.what, "id map");
        assert_eq!(e.asked_bytes, 11);
        assert!(e.to_string().contains("id map"));
    }
}

/// Allocations of this size and more come from the system and go back to it when freed
/// (the `quiver` command sets glibc's `M_MMAP_THRESHOLD` to it): a buffer that is to be
/// given back mid-work should be at least this large.
pub const MMAP_THRESHOLD: usize = 4 << 20;

/// Asks the kernel to back the 2 MiB-aligned part of a large buffer (`Vec` capacity
/// included) with transparent huge pages, where they are enabled for regions that ask
/// (`madvise` mode, the common default): a buffer filled once and read a few times (a
/// sort's rows) then takes one page fault per 2 MiB instead of one per 4 KiB, which was
/// a quarter of a sort of 1.6M rows. Does nothing for buffers under 4 MiB or elsewhere
/// than Linux.
pub fn advise_huge_pages<T>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = v.capacity() * std::mem::size_of::<T>();
        if bytes < 2 * HUGE {
            return;
        }
        let start = (v.as_ptr() as usize).next_multiple_of(HUGE);
        let end = (v.as_ptr() as usize + bytes) / HUGE * HUGE;
        if end > start {
            // SAFETY: the range lies inside the vector's own allocation; MADV_HUGEPAGE
            // changes how its pages are backed, never their contents.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
}

/// Gives the allocator's free memory back to the system (glibc's `malloc_trim`: every
/// arena, not only the top of the main one that `M_TRIM_THRESHOLD` trims). Called after
/// work that held a lot and let it go (a big query, a freed delta), so that a process at
/// rest holds what it uses. Costs a walk of the free lists: milliseconds for a big heap.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages to the system; it touches no live
    // allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A query's memory above which it gives its freed memory back when it ends.
pub const RELEASE_AFTER_BYTES: u64 = 16 << 20;

/// Asks for the cache line holding `x`, without waiting for it.
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it reads nothing the program sees and cannot fault.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(x as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
