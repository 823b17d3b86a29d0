//! An operator's memory: its grant grown under the query's limit and the database's
//! (`account`, waiting while other queries hold the memory), or a verdict to spill
//! (`account_or_spill`), and the error that names the operator and both limits. Below
//! the operators and the indexes alike, which both account what they build.

use crate::error::QueryError;
use quiver_common::memory::Grant;
use quiver_common::size::human_bytes;

/// Grows `grant` to `bytes` without waiting, in steps of 1/8 so that accounting is not
/// paid per row; false when the limit refuses.
#[inline]
pub(crate) fn grow(grant: &mut Grant, bytes: u64) -> bool {
    let want = bytes.max(grant.bytes() + grant.bytes() / 8);
    bytes <= grant.bytes() || grant.try_resize(want).is_ok() || grant.try_resize(bytes).is_ok()
}

/// Grows `grant` to `bytes`, waiting while other queries hold the database's memory
/// (see [`quiver_common::memory`]), or fails naming `operator`.
#[inline]
pub(crate) fn account(
    grant: &mut Grant,
    bytes: u64,
    operator: &'static str,
) -> Result<(), QueryError> {
    if grow(grant, bytes) {
        return Ok(());
    }
    grant
        .grow_waiting(bytes)
        .map_err(|e| memory_error(grant, operator, e))
}

/// Grows `grant` to `bytes` for an operator that can spill: `Ok(false)` when it should
/// spill instead, which is when its query's own limit refuses (no other query can make
/// room), or the database's does while it holds enough for a spill to be worth it;
/// holding less, it waits for the database's memory as [`account`] does.
#[inline]
pub(crate) fn account_or_spill(
    grant: &mut Grant,
    bytes: u64,
    operator: &'static str,
) -> Result<bool, QueryError> {
    if grow(grant, bytes) {
        return Ok(true);
    }
    let b = grant.budget();
    let own_limit_refuses = b.used_bytes() - grant.bytes() + bytes > b.limit_bytes();
    if own_limit_refuses || grant.bytes() >= SPILL_MIN_BYTES {
        return Ok(false);
    }
    account(grant, bytes, operator).map(|()| true)
}

/// The least an operator holds before it spills rather than waits for memory: smaller
/// runs or partitions cost more in files and merges than they free.
pub(crate) const SPILL_MIN_BYTES: u64 = 4 << 20;

pub(crate) fn memory_error(
    grant: &Grant,
    operator: &'static str,
    e: quiver_common::memory::GrantRefused,
) -> QueryError {
    use quiver_common::memory::GrantRefused;
    let waited = match &e {
        GrantRefused::Exceeded(_) => String::new(),
        GrantRefused::TimedOut { waited, .. } => format!(
            "; waited {:.1} s for other queries to give memory back",
            waited.as_secs_f64()
        ),
        GrantRefused::Deadlock { waited, .. } => format!(
            "; every query holding memory was waiting for more, and this one, the youngest, gave way after {:.1} s",
            waited.as_secs_f64()
        ),
        GrantRefused::Cancelled => return QueryError::Cancelled,
    };
    let e = e.exceeded().expect("not cancelled");
    QueryError::Memory {
        operator,
        limit: human_bytes(e.limit_bytes),
        asked: human_bytes(e.asked_bytes),
        database: e.limit_bytes != grant.budget().limit_bytes(),
        waited,
    }
}
