//! The one place where refusals become gRPC statuses.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt as _};

use crate::admission::Shed;
use crate::request::Invalid;

pub fn invalid(error: &Invalid) -> Status {
    Status::invalid_argument(error.to_string())
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
        return Status::invalid_argument("namespace is empty; name the namespace to write to");
    }
    Status::not_found(format!(
        "namespace '{name}' is not configured on this producer"
    ))
}

pub fn too_large_for_queue(
    namespace: &str,
    queue: &str,
    payload: usize,
    max_payload: usize,
) -> Status {
    Status::invalid_argument(format!(
        "payload of {payload} bytes does not fit queue '{queue}' ({max_payload} bytes at most) and namespace '{namespace}' has no durable storage for larger payloads"
    ))
}
