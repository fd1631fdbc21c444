//! The producer's metrics, declared in one place. Labels are bounded: `namespace` takes only
//! configured namespace names (requests for others count under [`UNKNOWN_NAMESPACE`]) and
//! `outcome` only the values of [`Outcome`]. Each namespace registers its handles once, so the
//! hot path records without building label sets.

use std::time::Duration;

use metrics::{
    Counter, Gauge, Histogram, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};

pub const REQUESTS: &str = "wal_producer_requests_total";
pub const WRITE_SECONDS: &str = "wal_producer_write_seconds";
pub const CLAIM_CHECKS: &str = "wal_producer_claim_checks_total";
pub const IN_FLIGHT: &str = "wal_producer_in_flight";
pub const TRANSACTIONS: &str = "wal_transactions_committed_total";
pub const TRANSACTIONS_EXPIRED: &str = "wal_transactions_expired_total";
pub const TRANSACTION_ITEMS_STAGED: &str = "wal_transaction_items_staged_total";
pub const TRANSACTION_MARKERS_RESENT: &str = "wal_transaction_markers_resent_total";

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
    /// Refused by authorization: PERMISSION_DENIED or UNAUTHENTICATED.
    Denied,
}

impl Outcome {
    const ALL: [Self; 7] = [
        Self::True,
        Self::False,
        Self::Unknown,
        Self::Invalid,
        Self::NotFound,
        Self::Shed,
        Self::Denied,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "true",
            Self::False => "false",
            Self::Unknown => "unknown",
            Self::Invalid => "invalid",
            Self::NotFound => "not_found",
            Self::Shed => "shed",
            Self::Denied => "denied",
        }
    }
}

pub fn describe() {
    wal_namespaces::feed::describe_metrics();
    wal_runtime::metrics::describe();
    wal_runtime::tls::describe();
    wal_runtime::authorize::describe();
    describe_counter!(
        REQUESTS,
        "WriteToLog requests by namespace and outcome (true, false, unknown, invalid, not_found, shed, denied)"
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
    describe_counter!(
        TRANSACTIONS,
        "Two-phase commits by namespace and outcome (true, false, unknown, refused)"
    );
    describe_counter!(
        TRANSACTIONS_EXPIRED,
        "Two-phase writes never committed within the namespace's transaction lifetime"
    );
    describe_counter!(
        TRANSACTION_ITEMS_STAGED,
        "Items of two-phase writes staged in durable storage"
    );
    describe_counter!(
        TRANSACTION_MARKERS_RESENT,
        "Commit markers the sweep put on the queue for transactions left committing (a commit answered UNKNOWN and not retried)"
    );
}

/// A commit answered: `outcome` is true, false, unknown or refused.
pub fn transaction_committed(namespace: &str, outcome: &'static str) {
    counter!(TRANSACTIONS, "namespace" => namespace.to_owned(), "outcome" => outcome).increment(1);
}

pub fn transactions_expired(namespace: &str, count: u64) {
    counter!(TRANSACTIONS_EXPIRED, "namespace" => namespace.to_owned()).increment(count);
}

pub fn transaction_marker_resent(namespace: &str) {
    counter!(TRANSACTION_MARKERS_RESENT, "namespace" => namespace.to_owned()).increment(1);
}

pub fn transaction_items_staged(namespace: &str, count: u64) {
    counter!(TRANSACTION_ITEMS_STAGED, "namespace" => namespace.to_owned()).increment(count);
}

/// One namespace's metric handles.
#[derive(Debug, Clone)]
pub struct NamespaceMetrics {
    requests: [Counter; 7],
    latency: [Histogram; 7],
    claim_checks: Counter,
    in_flight: Gauge,
}

impl NamespaceMetrics {
    pub fn new(namespace: &str) -> Self {
        let ns = namespace.to_owned();
        Self {
            requests: Outcome::ALL
                .map(|o| counter!(REQUESTS, "namespace" => ns.clone(), "outcome" => o.as_str())),
            latency: Outcome::ALL.map(
                |o| histogram!(WRITE_SECONDS, "namespace" => ns.clone(), "outcome" => o.as_str()),
            ),
            claim_checks: counter!(CLAIM_CHECKS, "namespace" => ns.clone()),
            in_flight: gauge!(IN_FLIGHT, "namespace" => ns),
        }
    }

    pub fn request(&self, outcome: Outcome, elapsed: Duration) {
        let index = Outcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0);
        self.requests[index].increment(1);
        self.latency[index].record(elapsed.as_secs_f64());
    }

    pub fn claim_check(&self) {
        self.claim_checks.increment(1);
    }

    pub fn in_flight(&self, count: usize) {
        self.in_flight.set(count as f64);
    }
}
