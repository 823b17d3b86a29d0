//! Errors of running a query. Every failure is a value of [`QueryError`]; no input makes
//! the engine panic.

use quiver_cypher::{Detail, ParseError};
use quiver_storage::ReadError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A value of the wrong type reached an operator or function.
    #[error("type error: {1}")]
    Type(Detail, String),
    #[error("parameter ${0} is not set; pass it with --param {0}=VALUE (or :param in the shell)")]
    MissingParam(String),
    #[error("unknown function {0}()")]
    UnknownFunction(String),
    #[error("{0}")]
    Argument(String),
    /// The per-query memory limit would be exceeded.
    #[error("{} memory limit of {limit} exceeded in {operator} (asked for {asked} more{waited}); {}", if *.database { "the database's" } else { "query" }, if *.database { "run it again when fewer queries run, or raise --memory-limit (or --memory-wait-secs)" } else { "narrow the query, add LIMIT, or raise --query-memory-limit" })]
    Memory {
        operator: &'static str,
        limit: String,
        asked: String,
        /// The database's limit refused it (what every query and write share), not the
        /// query's own.
        database: bool,
        /// How the request waited for other queries ("" when it did not).
        waited: String,
    },
    #[error("{0}")]
    Unsupported(String),
    /// A statement that is well formed but cannot mean anything (MERGE on a null).
    #[error("{1}")]
    Semantic(Detail, String),
    /// A value the syntax forbids where it stands, found when the statement ran (a
    /// negative LIMIT from a parameter).
    #[error("{1}")]
    InvalidArgument(Detail, String),
    /// An argument out of the range a function takes (a percentile above 1, a range()
    /// step of 0), found when the statement ran.
    #[error("{1}")]
    ArgumentValue(Detail, String),
    /// CALL of a procedure that does not exist.
    #[error("{0}")]
    Procedure(String),
    /// A node or relationship deleted earlier in the transaction was read.
    #[error("{0}")]
    EntityNotFound(String),
    #[error("index: {0}")]
    Index(String),
    #[error("query cancelled")]
    Cancelled,
    /// A write failed: a conflict (retryable), a constraint, the log.
    #[error(transparent)]
    Engine(#[from] quiver_engine::EngineError),
    /// A LOAD CSV row or file failed.
    #[error("{0}")]
    Csv(String),
    /// A statement failed inside BEGIN ... COMMIT, which rolled the transaction back.
    #[error("{0}\nthe transaction was rolled back")]
    RolledBack(Box<QueryError>),
}

impl QueryError {
    /// Whether retrying the transaction can succeed (a write conflict).
    pub fn is_retryable(&self) -> bool {
        match self {
            QueryError::Engine(e) => e.is_retryable(),
            QueryError::RolledBack(e) => e.is_retryable(),
            _ => false,
        }
    }
}

impl QueryError {
    /// A value of the wrong type reached a function or operator when the statement ran.
    pub(crate) fn ty(msg: impl Into<String>) -> QueryError {
        QueryError::Type(Detail::InvalidArgumentValue, msg.into())
    }

    /// Whether the files failed (I/O, a damaged segment, the log), not the statement:
    /// servers report it as the database's error, not the client's.
    pub fn is_storage_failure(&self) -> bool {
        use quiver_engine::EngineError as E;
        let read = |r: &ReadError| matches!(r, ReadError::Io { .. } | ReadError::Format { .. });
        match self {
            QueryError::Read(r) | QueryError::Engine(E::Read(r)) => read(r),
            QueryError::Engine(E::Open(_) | E::Write(_) | E::Wal(_) | E::Apply(_)) => true,
            QueryError::RolledBack(inner) => inner.is_storage_failure(),
            _ => false,
        }
    }

    /// Why, as openCypher's detail code, where the error is one the language defines
    /// (the TCK's `SyntaxError ...: UndefinedVariable`); `None` for failures of the
    /// database itself (memory, I/O, conflicts).
    pub fn detail(&self) -> Option<Detail> {
        use quiver_engine::EngineError;
        Some(match self {
            QueryError::Parse(p) => p.detail,
            QueryError::MissingParam(_) => Detail::MissingParameter,
            QueryError::UnknownFunction(_) => Detail::UnknownFunction,
            QueryError::Type(d, _)
            | QueryError::InvalidArgument(d, _)
            | QueryError::ArgumentValue(d, _) => *d,
            QueryError::Procedure(_) => Detail::ProcedureNotFound,
            QueryError::EntityNotFound(_) => Detail::DeletedEntityAccess,
            QueryError::Semantic(d, _) => *d,
            QueryError::Engine(EngineError::ConnectedNode { .. }) => Detail::DeleteConnectedNode,
            QueryError::Engine(EngineError::PropertyType(_)) => Detail::InvalidPropertyType,
            QueryError::RolledBack(inner) => return inner.detail(),
            _ => return None,
        })
    }
}
