//! Which CQL failures are worth retrying. Decided here, where the driver's error is seen.

use scylla::errors::{DbError, ExecutionError, PrepareError, RequestAttemptError};

use crate::target::TargetError;

/// A failed write: the server's verdict on the statement is permanent; anything about reaching
/// or loading the cluster (timeouts, unavailable replicas, overload, broken connections) is not.
pub fn classify(operation: &str, error: &ExecutionError) -> TargetError {
    let permanent = match error {
        ExecutionError::BadQuery(_) => true,
        ExecutionError::LastAttemptError(attempt) => attempt_is_permanent(attempt),
        ExecutionError::PrepareError(prepare) => prepare_is_permanent(prepare),
        _ => false,
    };
    let reason = format!("cql {operation} failed: {error}");
    if permanent {
        TargetError::Permanent(reason)
    } else {
        TargetError::Retryable(reason)
    }
}

/// A failed prepare, typically a table or column that does not exist (permanent) or a cluster
/// that cannot be reached (retryable).
pub fn classify_prepare(statement: &str, error: &PrepareError) -> TargetError {
    let reason = format!("cql prepare of `{statement}` failed: {error}");
    if prepare_is_permanent(error) {
        TargetError::Permanent(reason)
    } else {
        TargetError::Retryable(reason)
    }
}

fn prepare_is_permanent(error: &PrepareError) -> bool {
    match error {
        PrepareError::AllAttemptsFailed { first_attempt } => attempt_is_permanent(first_attempt),
        _ => false,
    }
}

fn attempt_is_permanent(error: &RequestAttemptError) -> bool {
    match error {
        RequestAttemptError::SerializationError(_) => true,
        RequestAttemptError::DbError(db, _) => db_is_permanent(db),
        _ => false,
    }
}

fn db_is_permanent(error: &DbError) -> bool {
    matches!(
        error,
        DbError::SyntaxError
            | DbError::Invalid
            | DbError::AlreadyExists { .. }
            | DbError::FunctionFailure { .. }
            | DbError::AuthenticationError
            | DbError::Unauthorized
            | DbError::ConfigError
    )
}
