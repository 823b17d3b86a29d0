//! Every limit of the system, as a named constant with its unit and the reason for it.

/// Rows in one row group of a node or relationship property table. SQL Server's
/// columnstore uses the same number (seed 004): large enough that per-group metadata is
/// negligible, small enough that one group of one column fits comfortably in memory.
pub const ROW_GROUP_ROWS_MAX: usize = 1 << 20;

/// Bytes a node row group being imported may hold (its buffers and encoded copy), even
/// when the budget allows more: a wide table's full 1,048,576-row group held 430 MiB at
/// the default budget (half of RAM), and smaller groups import as fast, since the
/// last group's encoding is the only part that does not overlap the parsing.
pub const ROW_GROUP_BYTES_MAX: u64 = 160 << 20;

/// Seed 004's rule (SQL Server's bulk-load threshold): a statement that creates at least
/// this many nodes writes them straight into row groups of a new node table, not row by
/// row into the delta. Below it, the few rows would make a row group too small to pay
/// for its metadata and its checkpoint.
pub const BULK_ROWS_MIN: u64 = 102_400;

/// A batch of `CALL { } IN TRANSACTIONS` takes the direct path from this many rows of
/// its own. Its commit is a checkpoint (about 14 ms here) that adds a table, so small
/// batches go through the delta, and the automatic checkpoint folds many of them into
/// one table: 300k nodes in the default 1,000-row batches took 4.1 s and left 198
/// one-batch tables when every batch past the statement's first 102,400 rows went
/// direct; through the delta they take about 1.5 s. `OF 100000 ROWS`, the usual
/// batch of a bulk load, stays direct.
pub const BATCH_DIRECT_MIN: u64 = 50_000;

/// Column builders of one bulk write hold at most this many bytes before they are
/// encoded as row groups (shared among the write's node shapes, each at least
/// [`BULK_GROUP_BYTES_MIN`]): a bulk write's memory is a few of these (one filling, one
/// queued and one being encoded per shape), not its input's size. A write that fills
/// it goes direct whatever its row count.
pub const BULK_GROUP_BYTES: usize = 32 << 20;

/// The smallest row group a shape's share of [`BULK_GROUP_BYTES`] gives.
pub const BULK_GROUP_BYTES_MIN: usize = 8 << 20;

/// How long a bulk write (LOAD CSV's direct path) waits for the database's memory that
/// other queries and loads hold before it fails: it queues rather than fails for want
/// of another's grant.
pub const BULK_GRANT_WAIT_SECS: u64 = 60;

/// Internal node ids are `u32`: four billion nodes per database. Adjacency lists and ID
/// maps store them at 4 bytes (or fewer once bit-packed); widening later is a format bump.
pub const NODES_MAX: u64 = u32::MAX as u64 - 1;

/// Relationships per relationship type: edge ids are `u32` while the CSR is built
/// (4 bytes per edge in the sort buffers). Widening is a local change in `import::edges`.
pub const EDGES_PER_TYPE_MAX: u64 = u32::MAX as u64;

/// Bytes of CSV read and split per window. Each window is split into chunks that parse in
/// parallel; the window is the unit of memory held by the reader (two are in flight).
pub const CSV_WINDOW_BYTES: usize = 8 << 20;

/// Bytes per parse chunk within a window: small enough to balance two to sixty-four
/// threads, large enough that per-chunk overhead (one column batch) is amortised.
pub const CSV_CHUNK_BYTES: usize = 1 << 20;

/// A single CSV record may not be larger than this. A record that does not end within
/// this many bytes is almost always an unterminated quote, reported as such.
pub const CSV_RECORD_BYTES_MAX: usize = 64 << 20;

/// Columns per CSV file; a header with more is rejected rather than allocating blindly.
pub const CSV_COLUMNS_MAX: usize = 16_384;

/// Smallest memory budget an import accepts: below this the fixed buffers (two CSV
/// windows, one chunk batch per thread) no longer fit.
pub const IMPORT_BUDGET_BYTES_MIN: u64 = 24 << 20;

/// Default import budget as a fraction of physical RAM (numerator / denominator).
pub const IMPORT_BUDGET_RAM_FRACTION: (u64, u64) = (1, 2);

/// Labels per database (label sets are stored as bitmaps of up to this many bits).
pub const LABELS_MAX: usize = 64;

const _: () = assert!(CSV_CHUNK_BYTES <= CSV_WINDOW_BYTES);
const _: () = assert!(ROW_GROUP_ROWS_MAX <= u32::MAX as usize);
const _: () = assert!(IMPORT_BUDGET_BYTES_MIN >= 2 * CSV_WINDOW_BYTES as u64);
