//! The numbers a namespace sets, each in its range with its default: retries, delays, payload
//! and rate limits; and its durable storage.

use std::fmt::Display;
use std::time::Duration;

use super::Spelling;
use crate::error::Problems;
use crate::file::{DelayLimitsFile, DurableStorageFile, RateLimitFile, RetryPolicyFile};
use crate::model::{ArchiveConfig, DelayLimits, DurableStorageConfig, RateLimit, RetryPolicy};

pub(super) fn durable_storage(
    problems: &mut Problems<'_>,
    path: &str,
    durable: &DurableStorageFile,
    spelling: Spelling,
) -> Option<DurableStorageConfig> {
    let mut ok = true;
    if !matches!(durable.kind.as_str(), "kv" | "cql") {
        problems.add(
            format!("{path}.type"),
            format!("expected \"kv\" or \"cql\", found {:?}", durable.kind),
        );
        ok = false;
    }
    let keyspace = &durable.namespace;
    let mut chars = keyspace.chars();
    let identifier = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && keyspace.len() <= 48;
    if !identifier {
        problems.add(
            format!("{path}.namespace"),
            format!("expected a CQL keyspace name (a letter, then letters, digits or '_', 48 at most), found {keyspace:?}"),
        );
        ok = false;
    }
    let archive = durable.archive.as_ref().map(|archive| {
        let days = in_range(
            problems,
            format!(
                "{path}.archive.{}",
                spelling.key("retention_days", "retentionDays")
            ),
            archive.retention_days,
            1,
            3650,
        );
        ArchiveConfig {
            retention: Duration::from_millis(days.saturating_mul(DAY_MS)),
        }
    });
    ok.then(|| DurableStorageConfig {
        keyspace: keyspace.clone(),
        shard: durable.shard.clone(),
        archive,
    })
}

pub(super) fn in_range<T: PartialOrd + Display + Copy>(
    problems: &mut Problems<'_>,
    path: String,
    value: T,
    min: T,
    max: T,
) -> T {
    if !(min..=max).contains(&value) {
        problems.add(path, format!("expected {min} to {max}, found {value}"));
    }
    value
}

pub(super) fn retry_policy(
    problems: &mut Problems<'_>,
    spelling: Spelling,
    file: RetryPolicyFile,
) -> RetryPolicy {
    let at = |field: &str| format!("{}.{field}", spelling.key("retry_policy", "retryPolicy"));
    let max_attempts = in_range(
        problems,
        at(spelling.key("max_attempts", "maxAttempts")),
        file.max_attempts.unwrap_or(5),
        1,
        100,
    );
    let initial = in_range(
        problems,
        at(spelling.key("initial_backoff_ms", "initialBackoffMs")),
        file.initial_backoff_ms.unwrap_or(500),
        1,
        3_600_000,
    );
    let multiplier = in_range(
        problems,
        at("multiplier"),
        file.multiplier.unwrap_or(2.0),
        1.0,
        10.0,
    );
    // At least the initial backoff: a smaller cap would make every retry wait less than the first.
    let max_backoff = in_range(
        problems,
        at(spelling.key("max_backoff_ms", "maxBackoffMs")),
        file.max_backoff_ms.unwrap_or(initial.max(300_000)),
        initial,
        DAY_MS,
    );
    let jitter = in_range(problems, at("jitter"), file.jitter.unwrap_or(0.2), 0.0, 1.0);
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::from_millis(initial),
        multiplier,
        max_backoff: Duration::from_millis(max_backoff),
        jitter,
    }
}

pub(super) fn delay_limits(
    problems: &mut Problems<'_>,
    spelling: Spelling,
    file: DelayLimitsFile,
) -> DelayLimits {
    let at = |field: &str| format!("{}.{field}", spelling.key("delay_limits", "delayLimits"));
    let max_delay = in_range(
        problems,
        at(spelling.key("max_delay_ms", "maxDelayMs")),
        file.max_delay_ms.unwrap_or(30 * DAY_MS),
        0,
        365 * DAY_MS,
    );
    let max_jitter = in_range(
        problems,
        at(spelling.key("max_jitter_ms", "maxJitterMs")),
        file.max_jitter_ms.unwrap_or(DAY_MS),
        0,
        30 * DAY_MS,
    );
    let default_jitter = in_range(
        problems,
        at(spelling.key("default_jitter_ms", "defaultJitterMs")),
        file.default_jitter_ms.unwrap_or(0),
        0,
        max_jitter,
    );
    DelayLimits {
        max_delay: Duration::from_millis(max_delay),
        default_jitter: Duration::from_millis(default_jitter),
        max_jitter: Duration::from_millis(max_jitter),
    }
}

pub(super) fn payload_limit(
    problems: &mut Problems<'_>,
    spelling: Spelling,
    limit: Option<u64>,
) -> usize {
    let limit = in_range(
        problems,
        spelling
            .key("payload_limit_bytes", "payloadLimitBytes")
            .to_owned(),
        limit.unwrap_or(MIB),
        1,
        64 * MIB,
    );
    usize::try_from(limit).unwrap_or(usize::MAX)
}

pub(super) fn rate_limit(
    problems: &mut Problems<'_>,
    spelling: Spelling,
    file: RateLimitFile,
) -> RateLimit {
    let at = |field: &str| format!("{}.{field}", spelling.key("rate_limit", "rateLimit"));
    let writes_per_second = in_range(
        problems,
        at(spelling.key("writes_per_second", "writesPerSecond")),
        file.writes_per_second.unwrap_or(10_000),
        1,
        1_000_000,
    );
    let burst = in_range(
        problems,
        at("burst"),
        file.burst.unwrap_or(writes_per_second),
        1,
        1_000_000,
    );
    let max_in_flight = in_range(
        problems,
        at(spelling.key("max_in_flight", "maxInFlight")),
        file.max_in_flight.unwrap_or(1024),
        1,
        100_000,
    );
    RateLimit {
        writes_per_second,
        burst,
        max_in_flight,
    }
}

pub(super) const DAY_MS: u64 = 24 * 3600 * 1000;
pub(super) const MIB: u64 = 1024 * 1024;
