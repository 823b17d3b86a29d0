//! Errors of reading bytes back.

/// A byte layout that does not describe what it should.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    #[error("corrupted data: {what}")]
    Corrupted { what: String },
    #[error(
        "format version {found} is newer than this build understands ({supported}); upgrade quiver"
    )]
    UnsupportedVersion { found: u32, supported: u32 },
}

pub(crate) fn corrupted(what: impl Into<String>) -> FormatError {
    FormatError::Corrupted { what: what.into() }
}
