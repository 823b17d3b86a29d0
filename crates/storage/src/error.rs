//! Errors of opening, reading and writing a database.

use quiver_format::FormatError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    #[error("{path}: no quiver database here (no CURRENT file); create one with `quiver import --db {path} ...`")]
    NotADatabase { path: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {source}")]
    Format { file: PathBuf, source: FormatError },
    #[error("{file}: corrupted: {what}")]
    Corrupted { file: PathBuf, what: String },
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    #[error("{what} needs random access, which a database opened offline does not allow; open it mapped or loaded")]
    OfflineRandomAccess { what: &'static str },
    #[error("no {kind} named '{name}'")]
    NotFound { kind: &'static str, name: String },
    #[error("node id {id} is out of range (the database has {n_nodes} nodes)")]
    NodeOutOfRange { id: u64, n_nodes: u64 },
    #[error("{file}: {source}")]
    Format { file: PathBuf, source: FormatError },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    #[error("{path} already holds a database; pass --overwrite to replace it")]
    Exists { path: PathBuf },
    #[error("{path} exists and is not a quiver database; choose another path or remove it")]
    NotEmpty { path: PathBuf },
    #[error("{path} is being written by another process (lock held)")]
    Locked { path: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T, WriteError>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T, WriteError> {
        self.map_err(|source| WriteError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}
