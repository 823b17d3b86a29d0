//! The database directory.
//!
//! A database is a directory holding a `CURRENT` pointer, the manifest it names, and one
//! generation folder of immutable segment files:
//!
//! ```text
//! social.qdb/
//!   CURRENT                 "manifest-000001.json <crc32>"
//!   manifest-000001.json    labels, id spaces, node tables, relationship types, files
//!   LOCK                    flock()ed by a writer
//!   g000001/
//!     nodes-0000.seg        one node table: typed columns in row groups
//!     ids-0000.seg          the :ID index of one id space (sorted keys -> node ids)
//!     rel-0000.out.seg      CSR of one relationship type, by source
//!     rel-0000.in.seg       CSR of the same type, by target
//!     rel-0000.props.seg    relationship properties, in edge-id order
//! ```
//!
//! - [`manifest`]: the manifest types (serde), versioned and checksummed.
//! - [`fsio`]: the file layer every durable write goes through, with fault injection.
//! - [`write`]: staging a new generation and publishing it with one atomic switch.
//! - [`read`]: opening a database [`Mapped`](OpenMode::Mapped), [`Loaded`](OpenMode::Loaded)
//!   or [`Offline`](OpenMode::Offline), and the read API the query engine builds on.
//!
//! **Invariant:** files in a published generation are never modified; a new import writes
//! a new generation and switches `CURRENT`.

pub mod error;
pub mod fsio;
pub mod manifest;
pub mod read;
pub mod write;

pub use error::{OpenError, ReadError, WriteError};
pub use manifest::Manifest;
pub use read::{Database, Direction, IdKey, OpenMode, TableRef};
