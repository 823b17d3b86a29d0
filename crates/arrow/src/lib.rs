//! Arrow and Parquet in and out of Quiver.
//!
//! - [`encode`]: Arrow record batches written as CSV records in the import's dialect
//!   ([`encode::CsvStream`]), and the property type of an Arrow column
//!   ([`encode::quiver_type`]).
//! - [`source`]: Parquet files (or folders of parts) and Arrow streams as the import's
//!   [`quiver_csv::reader::RecordSource`] ([`source::ArrowSource`]), typed by their schema.
//! - [`result`]: query results as Arrow record batches (what the Python package hands
//!   to pandas, polars and pyarrow).
//!
//! **Invariant:** this crate is the only one that knows Arrow; the import and the query
//! engine see a byte stream and rows.

pub mod encode;
pub mod result;
pub mod source;

pub use source::{is_parquet, parquet_source, ArrowSource};
