//! The one place where refusals become gRPC statuses.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt as _};
use wal_proto::v1::WriteResult;

use crate::admission::Shed;
use crate::request::Invalid;

pub fn invalid(error: &Invalid) -> Status {
    refused(Code::InvalidArgument, &error.field(), error.to_string())
}

/// A refusal of the request's `field`: the message for a person, and a `google.rpc.BadRequest`
/// field violation naming the field for a client library, which types the error by it.
pub fn refused(code: Code, field: &str, message: String) -> Status {
    Status::with_error_details(
        code,
        message.clone(),
        ErrorDetails::with_bad_request_violation(field, message),
    )
}

/// RESOURCE_EXHAUSTED, with a `google.rpc.RetryInfo` detail when the namespace's rate limit
/// knows when the next write is let through: a client reads the wait from it rather than the
/// message's words. (A write over the in-flight cap gets none: that wait depends on the writes
/// ahead of it, so the client backs off as it would.)
pub fn shed(error: &Shed) -> Status {
    match error {
        Shed::Rate { retry_after, .. } => Status::with_error_details(
            Code::ResourceExhausted,
            error.to_string(),
            ErrorDetails::with_retry_info(Some(*retry_after)),
        ),
        Shed::InFlight { .. } => Status::resource_exhausted(error.to_string()),
    }
}

pub fn unknown_namespace(name: &str) -> Status {
    if name.is_empty() {
        return refused(
            Code::InvalidArgument,
            "namespace",
            "namespace is empty; name the namespace to write to".to_owned(),
        );
    }
    refused(
        Code::NotFound,
        "namespace",
        format!("namespace '{name}' is not configured on this producer"),
    )
}

pub fn too_large_for_queue(
    namespace: &str,
    queue: &str,
    payload: usize,
    max_payload: usize,
) -> Status {
    refused(
        Code::InvalidArgument,
        "payload",
        format!(
            "payload of {payload} bytes does not fit queue '{queue}' ({max_payload} bytes at most) and namespace '{namespace}' has no durable storage for larger payloads"
        ),
    )
}

/// A refused write of a batch: its status's code and message, and what its details say for a
/// client (the field refused, the wait a rate limit asks for), since a batch result has no
/// status details of its own.
pub fn batch_result(status: &Status) -> WriteResult {
    let details = status.get_error_details();
    let field = details
        .bad_request()
        .and_then(|bad| bad.field_violations.first())
        .map(|violation| violation.field.clone())
        .unwrap_or_default();
    let retry_after_millis = details
        .retry_info()
        .and_then(|info| info.retry_delay)
        // Rounded up: a wait under a millisecond is still a wait, and 0 means none was given.
        .map(|delay| u64::try_from(delay.as_micros().div_ceil(1000)).unwrap_or(u64::MAX))
        .unwrap_or_default();
    WriteResult {
        code: status.code() as i32,
        error: status.message().to_owned(),
        response: None,
        field,
        retry_after_millis,
    }
}
