//! Where the integration tests find the real services `scripts/stack up` starts. The addresses
//! come from the environment (`scripts/stack env`) with the stack's defaults; a service that is
//! not there fails the test that needs it, with the address it tried.

#![allow(dead_code)]

pub fn kafka_bootstrap() -> String {
    env_or("WAL_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
}

pub fn sqs_endpoint() -> String {
    env_or("WAL_SQS_ENDPOINT", "http://127.0.0.1:19324")
}

pub fn cql_nodes() -> String {
    env_or("WAL_CQL_NODES", "127.0.0.1:19042")
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// A name no earlier run used, so tests never see each other's leftovers on a long-lived stack.
pub fn unique(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &id[..12])
}
