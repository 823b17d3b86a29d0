//! The memory budget and its grants.
//!
//! A [`MemoryBudget`] is a byte count shared by everything one import (later: one query)
//! holds. A consumer that is about to allocate a large buffer first takes a [`Grant`]
//! for it; when the budget cannot cover the request the consumer spills, flushes early
//! or fails with [`BudgetExceeded`]. Grants return their bytes when dropped (RAII), so
//! accounting cannot leak on an error path. This is the cure for seed 004's oversized
//! memory grants: grants are sized to need and grown in steps, never asked for up front.
//!
//! The budget accounts for what buffers hold; it is not an allocator. Small, bounded
//! allocations (headers, per-chunk metadata) are covered by the fixed overhead that the
//! import promises on top of the budget.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A request the budget could not cover.
#[derive(Debug, Clone, thiserror::Error)]
#[error("memory budget exceeded by {what}: asked {asked_bytes} bytes, {available_bytes} of {limit_bytes} available")]
pub struct BudgetExceeded {
    pub what: &'static str,
    pub asked_bytes: u64,
    pub available_bytes: u64,
    pub limit_bytes: u64,
}

#[derive(Debug)]
struct Inner {
    limit_bytes: u64,
    used_bytes: AtomicU64,
    peak_bytes: AtomicU64,
    /// A budget inside a larger one (a query's inside the database's): every byte is
    /// also taken from the parent.
    parent: Option<MemoryBudget>,
}

/// A shared byte budget. Cloning shares the same budget.
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    inner: Arc<Inner>,
}

impl MemoryBudget {
    pub fn new(limit_bytes: u64) -> Self {
        MemoryBudget {
            inner: Arc::new(Inner {
                limit_bytes,
                used_bytes: AtomicU64::new(0),
                peak_bytes: AtomicU64::new(0),
                parent: None,
            }),
        }
    }

    /// A budget of at most `limit_bytes` whose grants are also taken from `self`: a
    /// request fails when either cannot cover it.
    pub fn child(&self, limit_bytes: u64) -> Self {
        MemoryBudget {
            inner: Arc::new(Inner {
                limit_bytes,
                used_bytes: AtomicU64::new(0),
                peak_bytes: AtomicU64::new(0),
                parent: Some(self.clone()),
            }),
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
                    if let Some(p) = &inner.parent {
                        if let Err(e) = p.reserve(bytes, what) {
                            inner.used_bytes.fetch_sub(bytes, Ordering::AcqRel);
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
        let new = self.inner.used_bytes.fetch_add(bytes, Ordering::AcqRel) + bytes;
        self.inner.peak_bytes.fetch_max(new, Ordering::Relaxed);
        if let Some(p) = &self.inner.parent {
            p.reserve_anyway(bytes);
        }
    }

    fn release(&self, bytes: u64) {
        let prev = self.inner.used_bytes.fetch_sub(bytes, Ordering::AcqRel);
        debug_assert!(prev >= bytes, "released more than granted");
        if let Some(p) = &self.inner.parent {
            p.release(bytes);
        }
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

    #[test]
    fn error_names_what_asked() {
        let b = MemoryBudget::new(10);
        let e = b.try_grant(11, "id map").unwrap_err();
        assert_eq!(e.what, "id map");
        assert_eq!(e.asked_bytes, 11);
        assert!(e.to_string().contains("id map"));
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
