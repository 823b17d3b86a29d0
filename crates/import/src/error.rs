//! Errors of an import. Every input error names the file, line and column.

use quiver_common::BudgetExceeded;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// Bad input at a place in a file.
    #[error("{file}:{line}:{column}: {message}", line = .line + 1, column = .column + 1)]
    Input {
        file: PathBuf,
        /// 0-based.
        line: u64,
        /// 0-based byte column.
        column: u64,
        message: String,
    },
    #[error("{file}: header column {column}: {message}", column = .column + 1)]
    Header {
        file: PathBuf,
        column: usize,
        message: String,
    },
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An input file changed while it was read.
    #[error("{path}: the file changed while it was read ({detail}); import from a copy that nothing writes to")]
    Changed { path: PathBuf, detail: String },
    #[error(transparent)]
    Storage(#[from] quiver_storage::WriteError),
    /// Reading the database an append adds to.
    #[error("reading the database appended to: {0}")]
    Read(#[from] quiver_storage::ReadError),
    #[error("{detail}; raise --memory-budget (the {what} needs more room)")]
    Budget {
        what: &'static str,
        detail: BudgetExceeded,
    },
    #[error("{rejected} bad rows exceed the tolerance of {tolerance}; nothing was imported (see {rejects})")]
    TooManyBadRows {
        rejected: u64,
        tolerance: u64,
        rejects: PathBuf,
    },
    #[error("import interrupted; nothing was imported")]
    Interrupted,
}

impl From<BudgetExceeded> for ImportError {
    fn from(detail: BudgetExceeded) -> Self {
        ImportError::Budget {
            what: detail.what,
            detail,
        }
    }
}

pub(crate) trait IoAt<T> {
    fn at(self, path: &std::path::Path) -> Result<T, ImportError>;
}

impl<T> IoAt<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T, ImportError> {
        self.map_err(|source| ImportError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

impl From<quiver_csv::ReadError> for ImportError {
    fn from(e: quiver_csv::ReadError) -> Self {
        match e {
            quiver_csv::ReadError::Input {
                file,
                line,
                column,
                message,
            } => ImportError::Input {
                file,
                line,
                column,
                message,
            },
            quiver_csv::ReadError::Io { path, source } => ImportError::Io { path, source },
            quiver_csv::ReadError::Changed { path, detail } => {
                ImportError::Changed { path, detail }
            }
            // ReadError is non-exhaustive only towards other crates' matches.
            #[allow(unreachable_patterns)]
            other => ImportError::Usage(other.to_string()),
        }
    }
}
