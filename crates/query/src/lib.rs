//! Cypher execution over an open database.
//!
//! The path of a query: [`quiver_cypher`] parses and checks the text; [`plan`] binds
//! names to labels, types and properties of the database and builds a tree of physical
//! operators ([`ops`]); the tree runs pulling [`batch::Batch`]es of rows whose values
//! reference storage ([`value`]); [`render`] turns results into text, CSV or JSON.
//!
//! Queries take `&Database` and hold no locks: a database generation is immutable, so
//! any number of threads can query one open database at once, each seeing the
//! generation it opened (a consistent snapshot). [`Session`] adds what needs the
//! directory: index DDL (which publishes a new generation) and reopening.
//!
//! **Invariant:** library code never panics on a query; every failure is a
//! [`QueryError`].

pub mod append;
pub mod batch;
pub mod error;
pub mod expr;
pub mod fulltext;
pub mod gds;
pub mod graph;
pub mod index;
pub(crate) mod memory;
pub mod ops;
pub mod plan;
pub mod procs;
pub mod render;
pub mod vector;

mod cache;
mod commands;
mod ddl;
mod options;
mod session;
mod statement;
mod text;

pub use cache::*;
/// The write operators and LOAD CSV live with the other operators, by family.
pub use ops::{load, write};
pub use options::*;
/// The value type lives in the engine (the delta stores values); re-exported here.
pub use quiver_engine::value;
pub use session::Session;
pub use statement::{default_load_dirs, run_statement};
pub use text::*;

pub use error::QueryError;
pub use graph::Graph;
pub use plan::Params;
pub use value::Value;

use batch::Batch;
use index::IndexSet;
use quiver_common::memory::MemoryBudget;
use quiver_cypher::ast::Parsed;
use quiver_storage::Database;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs one read query against `db`, passing result batches to `sink`.
pub fn run(
    db: &Database,
    indexes: &IndexSet,
    text: &str,
    params: &Params,
    opts: &QueryOptions,
    sink: &mut Sink,
) -> Result<Summary, QueryError> {
    let stmt = quiver_cypher::parse_query(text)?;
    quiver_cypher::bind::check(text, &stmt)?;
    run_statement(
        db, None, None, false, indexes, text, &stmt, params, opts, sink,
    )
}

/// Runs a query and collects its rows.
pub fn query(
    db: &Database,
    text: &str,
    params: &Params,
) -> Result<(Vec<String>, Vec<Vec<Value>>), QueryError> {
    let mut rows = Vec::new();
    let ix = IndexSet::load(db);
    let s = run(
        db,
        &ix,
        text,
        params,
        &QueryOptions::default(),
        &mut |_, b| {
            for r in 0..b.len {
                rows.push(b.row(r));
            }
            Ok(())
        },
    )?;
    Ok((s.columns, rows))
}
