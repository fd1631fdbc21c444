//! The numbers a namespace sets, each in its range with its default: retries, delays, payload
//! and rate limits; and its durable storage.

use std::fmt::Display;
use std::ops::RangeInclusive;
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
        let field = format!("{path}.archive.{}", spelling.name("retention_days"));
        let days = in_range(problems, field, archive.retention_days, 1..=3650);
        ArchiveConfig {
            retention: Duration::from_millis(days.saturating_mul(DAY_MS)),
        }
    });
    let lifetime = durable.transaction_lifetime_secs.map(|secs| {
        let field = format!("{path}.{}", spelling.name("transaction_lifetime_secs"));
        Duration::from_secs(in_range(problems, field, secs, 60..=604_800))
    });
    ok.then(|| DurableStorageConfig {
        keyspace: keyspace.clone(),
        shard: durable.shard.clone(),
        archive,
        transaction_lifetime: lifetime.unwrap_or(crate::model::DEFAULT_TRANSACTION_LIFETIME),
        receipts: durable.receipts.unwrap_or(false),
    })
}

/// `value`, with a problem at `path` when it is outside `range`.
pub(super) fn in_range<T: PartialOrd + Display + Copy>(
    problems: &mut Problems<'_>,
    path: String,
    value: T,
    range: RangeInclusive<T>,
) -> T {
    if !range.contains(&value) {
        let (min, max) = range.into_inner();
        problems.add(path, format!("expected {min} to {max}, found {value}"));
    }
    value
}

/// The numbers of one section of a config (`retry_policy`, say), each named by its path in the
/// file's spelling when it is out of range.
struct Section<'s, 'p> {
    problems: &'s mut Problems<'p>,
    spelling: Spelling,
    /// The section's name, in snake case; empty for the top level.
    name: &'static str,
}

impl<'s, 'p> Section<'s, 'p> {
    fn new(problems: &'s mut Problems<'p>, spelling: Spelling, name: &'static str) -> Self {
        Self {
            problems,
            spelling,
            name,
        }
    }

    /// The field `field` (snake case): `value`, or `default` when unset, checked against `range`.
    fn number<T>(
        &mut self,
        field: &str,
        value: Option<T>,
        default: T,
        range: RangeInclusive<T>,
    ) -> T
    where
        T: PartialOrd + Display + Copy,
    {
        let field = self.spelling.name(field);
        let path = match self.name {
            "" => field,
            section => format!("{}.{field}", self.spelling.name(section)),
        };
        in_range(self.problems, path, value.unwrap_or(default), range)
    }
}

pub(super) fn retry_policy(
    problems: &mut Problems<'_>,
    spelling: Spelling,
    file: RetryPolicyFile,
) -> RetryPolicy {
    let mut at = Section::new(problems, spelling, "retry_policy");
    let max_attempts = at.number("max_attempts", file.max_attempts, 5, 1..=100);
    let initial = at.number(
        "initial_backoff_ms",
        file.initial_backoff_ms,
        500,
        1..=3_600_000,
    );
    let multiplier = at.number("multiplier", file.multiplier, 2.0, 1.0..=10.0);
    // At least the initial backoff: a smaller cap would make every retry wait less than the first.
    let default_max = initial.max(300_000);
    let max_backoff = at.number(
        "max_backoff_ms",
        file.max_backoff_ms,
        default_max,
        initial..=DAY_MS,
    );
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::from_millis(initial),
        multiplier,
        max_backoff: Duration::from_millis(max_backoff),
        jitter: at.number("jitter", file.jitter, 0.2, 0.0..=1.0),
    }
}

pub(super) fn delay_limits(
    problems: &mut Problems<'_>,
    spelling: Spelling,
    file: DelayLimitsFile,
) -> DelayLimits {
    let mut at = Section::new(problems, spelling, "delay_limits");
    let max_delay = at.number(
        "max_delay_ms",
        file.max_delay_ms,
        30 * DAY_MS,
        0..=365 * DAY_MS,
    );
    let max_jitter = at.number("max_jitter_ms", file.max_jitter_ms, DAY_MS, 0..=30 * DAY_MS);
    let default_jitter = at.number(
        "default_jitter_ms",
        file.default_jitter_ms,
        0,
        0..=max_jitter,
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
    let mut at = Section::new(problems, spelling, "");
    let limit = at.number("payload_limit_bytes", limit, MIB, 1..=64 * MIB);
    usize::try_from(limit).unwrap_or(usize::MAX)
}

pub(super) fn rate_limit(
    problems: &mut Problems<'_>,
    spelling: Spelling,
    file: RateLimitFile,
) -> RateLimit {
    let mut at = Section::new(problems, spelling, "rate_limit");
    let per_second = at.number(
        "writes_per_second",
        file.writes_per_second,
        10_000,
        1..=1_000_000,
    );
    RateLimit {
        writes_per_second: per_second,
        burst: at.number("burst", file.burst, per_second, 1..=1_000_000),
        max_in_flight: at.number("max_in_flight", file.max_in_flight, 1024, 1..=100_000),
    }
}

pub(super) const DAY_MS: u64 = 24 * 3600 * 1000;
pub(super) const MIB: u64 = 1024 * 1024;
