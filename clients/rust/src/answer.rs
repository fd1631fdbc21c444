//! What one attempt's answer asks the client to do: the retry rules of clients/BEHAVIOUR.md in
//! one place.

use std::time::Duration;

use tonic::{Code, Status};
use tonic_types::StatusExt as _;
use wal_proto::v1::{Trilean, WriteResult, WriteToLogResponse};

/// One attempt's answer, sorted by what comes next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer<T> {
    /// TRUE, FALSE or another final answer: returned.
    Done(T),
    /// The producer answered UNKNOWN: the entry may be stored; retried with the same id.
    Unknown(String),
    /// No answer (the call failed in transport): the entry may be stored; retried with the same
    /// id, on another producer when there is one, and the producer is paused.
    Lost(String),
    /// No answer within the time the caller had left (DEADLINE_EXCEEDED): the entry may be
    /// stored; the producer is not blamed, since the budget was the caller's.
    TimedOut(String),
    /// Never sent (its deadline ended while it waited for a batch): nothing stored by it.
    Unsent(String),
    /// Over the namespace's limits, nothing stored: retried after `retry_after` when given.
    Shed {
        retry_after: Option<Duration>,
        message: String,
    },
    /// The request is wrong or not allowed: never retried.
    Refused {
        code: Code,
        field: String,
        message: String,
    },
}

/// Whether a status refuses the request (never retried) or failed the call (retried).
pub(crate) fn refuses(code: Code) -> bool {
    matches!(
        code,
        Code::InvalidArgument
            | Code::NotFound
            | Code::PermissionDenied
            | Code::Unauthenticated
            | Code::FailedPrecondition
            | Code::AlreadyExists
            | Code::OutOfRange
            | Code::Unimplemented
    )
}

/// A failed call: a refusal, a shed, or a transport failure (the request may have been stored).
pub(crate) fn of_status<T>(status: &Status) -> Answer<T> {
    let details = status.get_error_details();
    let message = status.message().to_owned();
    if status.code() == Code::ResourceExhausted {
        let retry_after = details.retry_info().and_then(|info| info.retry_delay);
        return Answer::Shed {
            retry_after,
            message,
        };
    }
    if refuses(status.code()) {
        let field = details
            .bad_request()
            .and_then(|bad| bad.field_violations.first())
            .map(|violation| violation.field.clone())
            .unwrap_or_default();
        return Answer::Refused {
            code: status.code(),
            field,
            message,
        };
    }
    if status.code() == Code::DeadlineExceeded {
        return Answer::TimedOut(format!("{:?}: {message}", status.code()));
    }
    Answer::Lost(format!("{:?}: {message}", status.code()))
}

/// A WriteToLog (or commit) answer: TRUE and FALSE are final, UNKNOWN and unspecified are not.
pub(crate) fn of_response(response: WriteToLogResponse) -> Answer<WriteToLogResponse> {
    match response.durable() {
        Trilean::True | Trilean::False => Answer::Done(response),
        Trilean::Unknown | Trilean::Unspecified => Answer::Unknown(response.message),
    }
}

/// One write's result in a batch: its code and, when 0, its answer.
pub(crate) fn of_batch_result(result: WriteResult) -> Answer<WriteToLogResponse> {
    let code = Code::from_i32(result.code);
    match (code, result.response) {
        (Code::Ok, Some(response)) => of_response(response),
        (Code::Ok, None) => Answer::Unknown("a batch result without an answer".to_owned()),
        (Code::ResourceExhausted, _) => Answer::Shed {
            retry_after: (result.retry_after_millis > 0)
                .then(|| Duration::from_millis(result.retry_after_millis)),
            message: result.error,
        },
        (code, _) if refuses(code) => Answer::Refused {
            code,
            field: result.field,
            message: result.error,
        },
        (code, _) => Answer::Lost(format!("{code:?}: {}", result.error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::ErrorDetails;

    #[test]
    fn refusals_are_final_and_name_their_field_failures_are_retried() {
        let refused = Status::with_error_details(
            Code::InvalidArgument,
            "payload is empty",
            ErrorDetails::with_bad_request_violation("payload", "payload is empty"),
        );
        assert_eq!(
            of_status::<()>(&refused),
            Answer::Refused {
                code: Code::InvalidArgument,
                field: "payload".into(),
                message: "payload is empty".into()
            }
        );
        for code in [
            Code::Unavailable,
            Code::Internal,
            Code::Cancelled,
            Code::Aborted,
            Code::DataLoss,
        ] {
            assert!(matches!(
                of_status::<()>(&Status::new(code, "x")),
                Answer::Lost(_)
            ));
        }
        assert!(matches!(
            of_status::<()>(&Status::new(Code::DeadlineExceeded, "x")),
            Answer::TimedOut(_)
        ));
        let shed = Status::with_error_details(
            Code::ResourceExhausted,
            "over the rate",
            ErrorDetails::with_retry_info(Some(Duration::from_millis(40))),
        );
        assert_eq!(
            of_status::<()>(&shed),
            Answer::Shed {
                retry_after: Some(Duration::from_millis(40)),
                message: "over the rate".into()
            }
        );
    }

    #[test]
    fn unspecified_counts_as_unknown_and_batch_results_keep_their_field() {
        let unspecified = WriteToLogResponse::default();
        assert!(matches!(of_response(unspecified), Answer::Unknown(_)));
        let refused = WriteResult {
            code: Code::NotFound as i32,
            error: "namespace 'x' is not configured".into(),
            field: "namespace".into(),
            ..WriteResult::default()
        };
        assert!(matches!(
            of_batch_result(refused),
            Answer::Refused { code: Code::NotFound, field, .. } if field == "namespace"
        ));
        let shed = WriteResult {
            code: Code::ResourceExhausted as i32,
            retry_after_millis: 25,
            ..WriteResult::default()
        };
        assert!(matches!(
            of_batch_result(shed),
            Answer::Shed { retry_after: Some(wait), .. } if wait == Duration::from_millis(25)
        ));
    }
}
