//! An open Quiver database: the immutable segments, the delta layer over them, the
//! write-ahead log, transactions with snapshot isolation, the two storage modes, and
//! checkpoints.
//!
//! - [`value`]: the values queries and properties are made of.
//! - [`delta`]: the persistent delta (created and changed entities) and its ops.
//! - [`view`]: reads that merge the delta with the segments.
//! - [`wal`]: the log.
//! - [`store`]: [`Store`] (an open database) and [`Txn`] (a transaction).
//! - [`checkpoint`]: the delta into new segments.
//! - [`fold`]: changes to earlier segments folded into patched column chunks.
//! - [`bulk`]: seed 004's direct path: big creations straight into row groups.
//!
//! **Invariant:** segments never change; only a checkpoint writes new ones, as a new
//! generation, and a snapshot keeps the generation it was taken on.

pub mod activity;
pub mod append;
pub mod bulk;
pub mod checkpoint;
pub mod columns;
pub mod delta;
pub mod error;
pub mod fold;
pub mod nodemap;
pub mod segments;
pub mod store;
pub mod txn;
pub mod value;
pub mod view;
pub mod wal;

pub use checkpoint::CheckpointReport;
pub use delta::Delta;
pub use error::EngineError;
pub use store::{Counters, Lead, Snapshot, StorageMode, Store, StoreOptions, SyncHandoff};
pub use txn::{Txn, Unsynced};
pub use value::Value;
pub use view::View;
