//! The writer's metrics, by namespace and origin region.

use std::time::Duration;

use metrics::{counter, describe_counter, describe_histogram, histogram};
use wal_proto::v1::ApplyResult;

/// Histogram buckets (seconds) for one call's apply.
pub const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

pub fn describe() {
    wal_runtime::tls::describe();
    wal_runtime::authorize::describe();
    describe_counter!(
        "wal_writer_entries_total",
        "Replicated entries answered, by namespace, origin region and result (applied, retryable, unavailable, permanent)"
    );
    describe_counter!(
        "wal_writer_overloaded_total",
        "Calls refused with RESOURCE_EXHAUSTED (the in-flight bound was taken), by source region"
    );
    describe_histogram!(
        "wal_writer_call_seconds",
        "How long one ApplyReplicated call took to apply its entries"
    );
}

/// Counts a call's answers: once per namespace, origin and result, not once per entry (a
/// counter looked up by its labels costs about as much as the rest of an entry's bookkeeping).
pub(crate) fn entries<'a>(answered: impl Iterator<Item = (&'a str, &'a str, ApplyResult)>) {
    let mut counts: Vec<((&str, &str, &'static str), u64)> = Vec::new();
    for (namespace, origin, result) in answered {
        let result = match result {
            ApplyResult::Applied => "applied",
            ApplyResult::Retryable => "retryable",
            ApplyResult::Unavailable => "unavailable",
            ApplyResult::Permanent | ApplyResult::Unspecified => "permanent",
        };
        let labels = (namespace, origin, result);
        match counts.iter_mut().find(|(seen, _)| *seen == labels) {
            Some((_, count)) => *count += 1,
            None => counts.push((labels, 1)),
        }
    }
    for ((namespace, origin, result), count) in counts {
        counter!("wal_writer_entries_total", "namespace" => namespace.to_owned(), "origin" => origin.to_owned(), "result" => result).increment(count);
    }
}

pub(crate) fn overloaded(source: &str) {
    counter!("wal_writer_overloaded_total", "source" => source.to_owned()).increment(1);
}

pub(crate) fn call_seconds(elapsed: Duration) {
    histogram!("wal_writer_call_seconds").record(elapsed);
}
