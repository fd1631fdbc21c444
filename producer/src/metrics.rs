//! The producer's metrics, declared in one place. Labels are bounded: `namespace` takes only
//! configured namespace names (requests for others count under [`UNKNOWN_NAMESPACE`]) and
//! `outcome` only the values of [`Outcome`].

use std::time::Duration;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};

pub const REQUESTS: &str = "wal_producer_requests_total";
pub const WRITE_SECONDS: &str = "wal_producer_write_seconds";
pub const CLAIM_CHECKS: &str = "wal_producer_claim_checks_total";
pub const IN_FLIGHT: &str = "wal_producer_in_flight";

/// The namespace label of requests that named no configured namespace.
pub const UNKNOWN_NAMESPACE: &str = "_unknown";

/// Latency buckets in seconds: a write is a broker round trip, normally a few milliseconds.
pub const WRITE_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    True,
    False,
    Unknown,
    Invalid,
    NotFound,
    Shed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "true",
            Self::False => "false",
            Self::Unknown => "unknown",
            Self::Invalid => "invalid",
            Self::NotFound => "not_found",
            Self::Shed => "shed",
        }
    }
}

pub fn describe() {
    describe_counter!(
        REQUESTS,
        "WriteToLog requests by namespace and outcome (true, false, unknown, invalid, not_found, shed)"
    );
    describe_histogram!(
        WRITE_SECONDS,
        metrics::Unit::Seconds,
        "WriteToLog latency by namespace and outcome"
    );
    describe_counter!(
        CLAIM_CHECKS,
        "payloads stored in durable storage because they were too large for the queue"
    );
    describe_gauge!(IN_FLIGHT, "writes of the namespace in flight now");
}

pub fn request(namespace: &str, outcome: Outcome, elapsed: Duration) {
    let labels = [
        ("namespace", namespace.to_owned()),
        ("outcome", outcome.as_str().to_owned()),
    ];
    counter!(REQUESTS, &labels).increment(1);
    histogram!(WRITE_SECONDS, &labels).record(elapsed.as_secs_f64());
}

pub fn claim_check(namespace: &str) {
    counter!(CLAIM_CHECKS, "namespace" => namespace.to_owned()).increment(1);
}

pub fn in_flight(namespace: &str, count: usize) {
    gauge!(IN_FLIGHT, "namespace" => namespace.to_owned()).set(count as f64);
}
