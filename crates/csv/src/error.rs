//! Errors of reading CSV files: a file that cannot be read, or bad input at a place.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
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
    /// The file changed (shrank, grew or was rewritten) while it was read: what was
    /// read is not one version of it.
    #[error("{path}: the file changed while it was read ({detail}); import from a copy that nothing writes to")]
    Changed { path: PathBuf, detail: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub(crate) trait IoAt<T> {
    fn at(self, path: &std::path::Path) -> Result<T, ReadError>;
}

impl<T> IoAt<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T, ReadError> {
        self.map_err(|source| ReadError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}
