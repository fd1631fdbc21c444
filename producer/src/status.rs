//! The one place where refusals become gRPC statuses.

use tonic::Status;

use crate::admission::Shed;
use crate::request::Invalid;

pub fn invalid(error: &Invalid) -> Status {
    Status::invalid_argument(error.to_string())
}

pub fn shed(error: &Shed) -> Status {
    Status::resource_exhausted(error.to_string())
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
