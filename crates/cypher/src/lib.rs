//! Cypher text to a syntax tree. The first stage of the query path (issue "Cypher: query
//! the imported graph"): [`lex`] turns text into tokens with positions, [`parse`] builds
//! the [`ast`] by recursive descent (expressions by precedence climbing) and reports the
//! first error with its line and column and what was expected.
//!
//! **Invariant:** `cypher` does not know storage exists; binding names to labels and
//! properties happens later.

pub mod ast;
pub mod bind;
pub mod detail;
pub mod lex;
pub mod parse;
pub mod print;

pub use detail::Detail;
pub use parse::{parse, parse_query, ParseError};
