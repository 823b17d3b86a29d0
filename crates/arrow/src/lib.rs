//! Arrow and Parquet in and out of Quiver.
//!
//! - [`encode`]: Arrow record batches as the import's typed rows
//!   ([`encode::TypedBatch`]), and the property type of an Arrow column
//!   ([`encode::quiver_type`]).
//! - [`source`]: Parquet files (or folders of parts) and Arrow streams as the import's
//!   [`quiver_csv::reader::RecordSource`] ([`source::ArrowSource`]), typed by their schema.
//! - [`parts`]: a database built in parts by many writers (a Spark job's tasks): node,
//!   property, CSR and id index parts from Arrow batches, and their publish.
//! - [`export`]: the graph's columns written as Parquet files (`quiver export --format
//!   parquet`).
//! - [`scan`]: `MATCH (n:L) RETURN n.a, ...` straight from the column chunks to Arrow.
//! - [`result`]: query results as Arrow record batches (what the Python package hands
//!   to pandas, polars and pyarrow).
//!
//! **Invariant:** this crate is the only one that knows Arrow; the import sees typed
//! rows through `quiver_csv::reader::TypedRows`, the query engine rows.

pub mod encode;
pub mod export;
pub mod parts;
pub mod result;
pub mod scan;
pub mod source;

pub use source::{is_parquet, parquet_source, ArrowSource};

/// Lets LOAD CSV read Parquet files (as typed rows): called once by a program that
/// links this crate (the CLI, the Python module).
pub fn register() {
    quiver_csv::reader::set_typed_opener(|path| {
        is_parquet(path).then(|| {
            parquet_source(&[path.to_path_buf()]).map(|s| {
                std::sync::Arc::new(s) as std::sync::Arc<dyn quiver_csv::reader::RecordSource>
            })
        })
    });
}
