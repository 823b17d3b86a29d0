//! Subcommands.

pub mod bench;
pub mod check;
pub mod export;
pub mod generate;
pub mod import;
pub mod info;
pub mod query;
pub mod shell;

use quiver_storage::OpenMode;

/// `--open mapped|loaded|offline`.
pub fn parse_open(s: &str) -> Result<OpenMode, String> {
    s.parse()
}
