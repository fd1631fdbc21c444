//! Reading SQS errors: short messages and the error codes that matter.
//!
//! SQS speaks a JSON protocol with query-compatible error codes: AWS sends the old code (for
//! example `AWS.SimpleQueueService.NonExistentQueue`) in a header that SQS-compatible servers
//! such as ElasticMQ leave out, and then the SDK's typed checks (`is_queue_does_not_exist`) miss.
//! Matching both spellings of the code works with both.

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

/// "code: message" for an error SQS answered, the full chain otherwise, never a response dump.
pub(crate) fn describe<E, R>(error: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match error.as_service_error() {
        Some(service) => format!(
            "{}: {}",
            service.code().unwrap_or("error"),
            service.message().unwrap_or("no message")
        ),
        None => DisplayErrorContext(error).to_string(),
    }
}

fn code_is<E, R>(error: &SdkError<E, R>, codes: &[&str]) -> bool
where
    E: ProvideErrorMetadata,
{
    error
        .as_service_error()
        .and_then(ProvideErrorMetadata::code)
        .is_some_and(|code| codes.contains(&code))
}

/// Whether a failed call says SQS is away rather than that the call was wrong: no answer (a
/// refused connection, a timeout, an unreadable response), a server error or throttling.
pub(crate) fn service_away<E: ProvideErrorMetadata>(error: &SdkError<E, HttpResponse>) -> bool {
    match error {
        SdkError::ServiceError(service) => {
            service.raw().status().is_server_error()
                || code_is(error, &["ThrottlingException", "RequestThrottled"])
        }
        _ => true,
    }
}

/// Whether `error` comes of a refused TCP connection: a reset answered the connection's first
/// packet, so no request went out on it.
pub(crate) fn connection_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = error.source();
    }
    false
}

pub fn is_missing_queue<E: ProvideErrorMetadata, R>(error: &SdkError<E, R>) -> bool {
    code_is(
        error,
        &[
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
        ],
    )
}

pub(crate) fn is_invalid_receipt<E: ProvideErrorMetadata, R>(error: &SdkError<E, R>) -> bool {
    code_is(error, &["ReceiptHandleIsInvalid", "InvalidParameterValue"])
}
