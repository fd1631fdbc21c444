//! What a CQL failure means: the statement's own fault, this attempt's trouble, or a cluster that
//! cannot serve anyone now. Decided here, where the driver's error is seen.

use scylla::errors::{DbError, ExecutionError, PrepareError, RequestAttemptError};

use crate::TargetError;

/// A failed write: the server's verdict on the statement is permanent; no connection, no host,
/// too few live replicas or an overloaded node is the cluster being unavailable; a timeout is
/// this attempt's trouble.
pub fn classify(operation: &str, error: &ExecutionError) -> TargetError {
    let reason = format!("cql {operation} failed");
    let permanent = match error {
        ExecutionError::BadQuery(_) => true,
        ExecutionError::LastAttemptError(attempt) => attempt_is_permanent(attempt),
        ExecutionError::PrepareError(prepare) => prepare_is_permanent(prepare),
        _ => false,
    };
    let unavailable = match error {
        ExecutionError::ConnectionPoolError(_) | ExecutionError::EmptyPlan => true,
        ExecutionError::LastAttemptError(attempt) => attempt_is_unavailable(attempt),
        ExecutionError::PrepareError(prepare) => prepare_is_unavailable(prepare),
        _ => false,
    };
    let failure = if permanent {
        TargetError::permanent(reason)
    } else if unavailable {
        TargetError::unavailable(reason)
    } else {
        TargetError::retryable(reason)
    };
    failure.caused_by(error.clone())
}

/// A failed prepare, typically a table or column that does not exist (permanent) or a cluster
/// that cannot be reached (unavailable).
pub fn classify_prepare(statement: &str, error: &PrepareError) -> TargetError {
    let reason = format!("cql prepare of `{statement}` failed");
    let failure = if prepare_is_permanent(error) {
        TargetError::permanent(reason)
    } else if prepare_is_unavailable(error) {
        TargetError::unavailable(reason)
    } else {
        TargetError::retryable(reason)
    };
    failure.caused_by(error.clone())
}

fn prepare_is_unavailable(error: &PrepareError) -> bool {
    match error {
        PrepareError::ConnectionPoolError(_) => true,
        PrepareError::AllAttemptsFailed { first_attempt } => attempt_is_unavailable(first_attempt),
        _ => false,
    }
}

fn attempt_is_unavailable(error: &RequestAttemptError) -> bool {
    match error {
        RequestAttemptError::BrokenConnectionError(_)
        | RequestAttemptError::UnableToAllocStreamId => true,
        RequestAttemptError::DbError(db, _) => matches!(
            db,
            DbError::Unavailable { .. } | DbError::Overloaded | DbError::IsBootstrapping
        ),
        _ => false,
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
