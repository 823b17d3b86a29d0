//! What can go wrong in the engine: [`EngineError`], every failure an open, a read, a
//! write, the log or a transaction reports; and [`lock`], how the engine takes a mutex
//! (a panic elsewhere does not make a lock unusable).

use crate::delta::ApplyError;
use crate::wal::WalError;
use quiver_storage::{OpenError, ReadError, WriteError};
use std::sync::{Mutex, MutexGuard};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("write-ahead log: {0}")]
    Wal(#[from] WalError),
    #[error("{0}")]
    Apply(#[from] ApplyError),
    /// Another transaction changed the same entity: retry the transaction.
    #[error("{0} (a transient conflict: retry the transaction)")]
    Conflict(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Constraint(String),
    /// DELETE (not DETACH DELETE) of a node that still has relationships.
    #[error("cannot delete node {node}: it still has {rels} relationship(s); delete them first or use DETACH DELETE")]
    ConnectedNode { node: u64, rels: u64 },
    /// A value that cannot be a property (a map, a node, a list of lists).
    #[error("{0}")]
    PropertyType(String),
    /// The database's `--memory-limit` could not cover a write: it is rolled back, the
    /// database stays usable.
    #[error("{0}")]
    Memory(String),
    /// A write on a store that only reads: another process holds the writer's lock, or
    /// it was opened read-only (a reader of a cluster; Bolt's `NotALeader`, on which
    /// drivers route the write to the writer).
    #[error("{0}")]
    ReadOnly(String),
}

impl EngineError {
    /// Whether retrying the transaction can succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, EngineError::Conflict(_))
    }
}

/// Locks a mutex, recovering from a panic elsewhere (the data is a plain map).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
