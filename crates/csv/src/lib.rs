//! CSV for bulk import.
//!
//! - [`split`]: finds record boundaries in a window of bytes *in parallel* by quote parity
//!   (RFC 4180 escapes quotes by doubling, so the parity of quotes before a byte says
//!   whether it is inside a quoted field), so that quoted fields holding newlines still
//!   parse in parallel and correctly.
//! - [`tokenize`]: a zero-copy record reader over a chunk that starts on a record boundary;
//!   it yields field slices (unescaping doubled quotes into a scratch buffer only when a
//!   field has them) and tracks line and column for error messages.
//! - [`header`]: the Neo4j import header convention (`id:ID(User)`, `age:int`, `:LABEL`...).
//! - [`value`]: parsing of ints, floats, booleans, dates and timestamps from bytes.
//! - [`reader`]: files (plain or gzip) read as windows of whole records on a thread of
//!   their own, shared by `quiver import` and LOAD CSV.
//! - [`rejects`]: the rejects file, one CSV line per skipped row.
//! - [`sniff`]: what a file's first bytes say about its delimiter and quote.
//!
//! **Invariant:** this crate knows nothing of storage, queries or budgets; it turns files
//! into records, records into fields and fields into typed values, and reports positions.

pub mod error;
pub mod header;
pub mod reader;
pub mod rejects;
pub mod sniff;
pub mod split;
pub mod tokenize;
pub mod value;

pub use error::ReadError;

/// How a CSV file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dialect {
    pub delimiter: u8,
    /// `None` disables quoting altogether (every `"` is data).
    pub quote: Option<u8>,
    pub array_delimiter: u8,
}

impl Default for Dialect {
    fn default() -> Self {
        Dialect {
            delimiter: b',',
            quote: Some(b'"'),
            array_delimiter: b';',
        }
    }
}

/// A place in an input file, stored 0-based and shown 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    /// 0-based line.
    pub line: u64,
    /// 0-based byte column within the line.
    pub column: u64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line + 1, self.column + 1)
    }
}
