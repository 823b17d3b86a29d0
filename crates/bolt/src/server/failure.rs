//! A statement's error as Bolt's FAILURE: Neo4j's status codes (`Neo.ClientError...`)
//! for each kind of Quiver error, and the message that carries them.

use super::*;

/// A Neo4j status code and a message, as drivers map them to their exceptions.
#[derive(Debug, Clone)]
pub struct Failure {
    pub code: &'static str,
    pub message: String,
}

impl Failure {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

/// The status code of a query error (drivers raise `CypherSyntaxError`,
/// `ConstraintError`, `TransientError` (retried by managed transactions)...).
pub fn failure(e: &QueryError) -> Failure {
    use quiver_engine::EngineError as E;
    let code = match e {
        QueryError::Parse(_) | QueryError::UnknownFunction(_) => {
            "Neo.ClientError.Statement.SyntaxError"
        }
        QueryError::MissingParam(_) => "Neo.ClientError.Statement.ParameterMissing",
        QueryError::Type(..) => "Neo.ClientError.Statement.TypeError",
        QueryError::Argument(_) | QueryError::ArgumentValue(..) => {
            "Neo.ClientError.Statement.ArgumentError"
        }
        QueryError::Semantic(..) => "Neo.ClientError.Statement.SemanticError",
        QueryError::EntityNotFound(_) => "Neo.ClientError.Statement.EntityNotFound",
        QueryError::Procedure(_) => "Neo.ClientError.Procedure.ProcedureNotFound",
        QueryError::InvalidArgument(..) => "Neo.ClientError.Statement.ArgumentError",
        QueryError::Memory { .. } => "Neo.TransientError.General.MemoryPoolOutOfMemoryError",
        QueryError::Cancelled => "Neo.TransientError.Transaction.Terminated",
        QueryError::Engine(E::Conflict(_)) => "Neo.TransientError.Transaction.DeadlockDetected",
        // Drivers take a write to a reader for a stale routing table: they route it to
        // the writer the ROUTE answer names.
        QueryError::Engine(E::ReadOnly(_)) => "Neo.ClientError.Cluster.NotALeader",
        QueryError::Engine(E::Constraint(_) | E::ConnectedNode { .. }) => {
            "Neo.ClientError.Schema.ConstraintValidationFailed"
        }
        QueryError::Engine(E::PropertyType(_)) => "Neo.ClientError.Statement.TypeError",
        QueryError::Engine(E::Memory(_)) => "Neo.TransientError.General.MemoryPoolOutOfMemoryError",
        // The storage failed (a full disk, a damaged file), not the statement: drivers
        // must not tell the user to fix their query.
        QueryError::Engine(E::Wal(_) | E::Write(_) | E::Apply(_)) => {
            "Neo.DatabaseError.Transaction.TransactionCommitFailed"
        }
        QueryError::RolledBack(inner) => return failure(inner),
        e if e.is_storage_failure() => "Neo.DatabaseError.Statement.ExecutionFailed",
        _ => "Neo.ClientError.Statement.ExecutionFailed",
    };
    Failure::new(code, e.to_string())
}

pub(crate) fn fail(out: &mut Vec<u8>, f: &Failure) {
    write_message(
        out,
        &Pack::Struct(
            FAILURE,
            vec![Pack::map(vec![
                ("code", Pack::str(f.code)),
                ("message", Pack::str(f.message.clone())),
            ])],
        ),
    );
}

pub(crate) fn internal() -> Failure {
    Failure::new(
        "Neo.DatabaseError.General.UnknownError",
        "the statement's worker stopped",
    )
}
