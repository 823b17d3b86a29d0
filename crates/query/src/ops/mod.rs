//! Physical operators: a pull-based tree that passes [`Batch`]es.
//!
//! Each operator's `next` returns the next batch of rows (never empty) or `None` when it
//! is exhausted for the current input. Operators under an [`Optional`] read their input
//! from an [`Argument`] and are called again after each new argument batch, so pattern
//! operators keep no "done" state of their own. Blocking operators (aggregate, sort,
//! distinct, shortest path) account what they hold against the query's memory budget
//! and fail with [`QueryError::Memory`] naming themselves instead of growing unbounded.

use crate::batch::{Batch, BATCH_ROWS};
use crate::error::QueryError;
use crate::expr::{eval, eval_col, CExpr, Env};
use crate::graph::{dirs, flip};
pub(crate) use crate::memory::{account, account_or_spill, grow};
use crate::value::{order, Key, PathVal, RelRef, Value};
use hashbrown::{HashMap, HashSet};
use quiver_common::memory::{Grant, MemoryBudget};
use quiver_cypher::ast::Dir;
use quiver_storage::Direction;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering as AtOrd};
use std::sync::Arc;
use std::time::Instant;

mod aggregate;
mod colagg;
pub mod colload;
mod expand;
mod join;
pub mod load;
mod rows;
mod scan;
mod sort;
mod spill;
mod weighted;
pub mod write;

pub use aggregate::*;
pub use colagg::*;
pub use expand::*;
pub use join::*;
pub use rows::*;
pub use scan::*;
pub use sort::*;

/// Rows, time and memory of one operator (PROFILE).
#[derive(Debug, Clone, Default)]
pub struct OpStats {
    pub rows: u64,
    pub batches: u64,
    /// Time inside `next`, children included.
    pub nanos: u64,
    pub peak_bytes: u64,
}

pub struct Cx<'g, 'db> {
    pub env: Env<'g, 'db>,
    pub budget: MemoryBudget,
    pub stats: Vec<OpStats>,
    pub cancel: Option<&'g AtomicBool>,
    /// See [`crate::QueryOptions::deadline`].
    pub deadline: Option<std::time::Instant>,
    /// The transaction a writing statement writes in (`None`: read only).
    pub tx: Option<&'g mut quiver_engine::Txn>,
    /// The statement runs inside BEGIN ... COMMIT.
    pub explicit_tx: bool,
    /// The declared indexes and uniqueness constraints writes must keep.
    pub indexes: Option<&'g crate::index::IndexSet>,
    /// LOAD CSV's import directory, rejects file and bad-row count.
    pub load: crate::ops::load::LoadState,
    /// How many rows the operator above wants from the next batch: a LIMIT lowers it
    /// (starting small and doubling) so that expansions hand over their first rows
    /// early instead of filling a whole batch; an operator that consumes all its input
    /// (aggregation, sort, an eager buffer) asks for full batches again.
    pub want: usize,
    /// Where operators spill (see `QueryOptions::temp_dir`).
    pub temp_dir: Option<std::path::PathBuf>,
    /// The database's projected graphs (see `QueryOptions::catalog`).
    pub catalog: Option<std::sync::Arc<crate::gds::Catalog>>,
}

impl Cx<'_, '_> {
    /// Runs `f` (which drains an input) with full batches asked for.
    pub(crate) fn full<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = std::mem::replace(&mut self.want, crate::batch::BATCH_ROWS);
        let r = f(self);
        self.want = saved;
        r
    }

    /// The rows an expansion gathers before it hands a batch over.
    #[inline]
    pub(crate) fn batch_target(&self) -> usize {
        self.want.clamp(1, crate::batch::BATCH_ROWS)
    }
}

impl<'g> Cx<'g, '_> {
    pub(crate) fn check_cancel(&self) -> Result<(), QueryError> {
        self.stop().check()
    }

    /// What stops the query, for work spread over threads.
    pub(crate) fn stop(&self) -> Stop<'g> {
        Stop {
            cancel: self.cancel,
            deadline: self.deadline,
        }
    }
}

/// A query's cancellation flag and deadline.
#[derive(Clone, Copy)]
pub(crate) struct Stop<'g> {
    cancel: Option<&'g AtomicBool>,
    deadline: Option<std::time::Instant>,
}

impl Stop<'_> {
    /// `Cancelled` once the flag is set or the deadline has passed.
    pub(crate) fn check(&self) -> Result<(), QueryError> {
        match self.cancel {
            Some(c) if c.load(AtOrd::Relaxed) => Err(QueryError::Cancelled),
            _ if self
                .deadline
                .is_some_and(|d| std::time::Instant::now() >= d) =>
            {
                Err(QueryError::Cancelled)
            }
            _ => Ok(()),
        }
    }
}

pub trait Op {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError>;
    /// Most bytes the operator has held at once (PROFILE).
    fn mem_peak(&self) -> u64 {
        0
    }
}

pub type BoxOp = Box<dyn Op>;

/// The first of `batches` now; the rest from `out` on later calls (blocking operators
/// compute everything, then hand it out batch by batch).
fn emit(out: &mut Option<std::vec::IntoIter<Batch>>, batches: Vec<Batch>) -> Option<Batch> {
    let mut it = batches.into_iter();
    let first = it.next();
    *out = Some(it);
    first
}

/// Records rows and time of the operator below it.
pub struct Counted {
    pub id: usize,
    pub inner: BoxOp,
}

impl Op for Counted {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let t = Instant::now();
        let r = self.inner.next(cx)?;
        let peak = self.inner.mem_peak();
        let s = &mut cx.stats[self.id];
        s.nanos += t.elapsed().as_nanos() as u64;
        s.peak_bytes = s.peak_bytes.max(peak);
        if let Some(b) = &r {
            s.rows += b.len as u64;
            s.batches += 1;
        }
        Ok(r)
    }
}

/// One row without columns, once.
pub struct Once {
    pub done: bool,
}

impl Op for Once {
    fn next(&mut self, _: &mut Cx) -> Result<Option<Batch>, QueryError> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(None);
        }
        Ok(Some(Batch::unit()))
    }
}

pub type ArgCell = Rc<RefCell<Option<Batch>>>;

/// A subquery body the executor plans again on the graph it meets (each row of a
/// stateful `CALL { }`, each batch of `CALL { } IN TRANSACTIONS` once the transaction has
/// moved to a newer generation). The planner implements it (`plan::Replan`): operators
/// call back into planning through this trait, so that `ops` does not depend on `plan`.
pub(crate) trait Replanner {
    /// The body's first plan node (its operators keep their PROFILE rows).
    fn first_id(&self) -> usize;
    /// The body planned on `g`: its root operator, its input cell, and how many plan
    /// nodes the statement has with it.
    fn plan(
        &self,
        g: &crate::graph::Graph,
        indexes: &crate::index::IndexSet,
    ) -> Result<(BoxOp, ArgCell, usize), QueryError>;
}

/// The batch an [`Optional`] hands to the pattern below it.
pub struct Argument {
    pub cell: ArgCell,
}

impl Op for Argument {
    fn next(&mut self, _: &mut Cx) -> Result<Option<Batch>, QueryError> {
        Ok(self.cell.borrow_mut().take())
    }
}
