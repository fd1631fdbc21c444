//! When a failed entry is tried again: exponential backoff with jitter, per the namespace's
//! retry policy. The wait becomes the retry copy's deliver-at on the queue, so the schedule
//! survives a consumer restart and no task sleeps through it.

use std::time::Duration;

use wal_namespaces::RetryPolicy;

/// The wait after `attempts_made` failed attempts (1 for the first failure): the initial backoff
/// times the multiplier for each earlier failure, capped at the longest backoff, then scaled by a
/// random factor in `1 ± jitter` (`unit` is uniform in 0..1). The result never exceeds
/// [`RetryPolicy::horizon`]'s per-attempt bound, `max_backoff * (1 + jitter)`.
pub fn retry_wait(policy: &RetryPolicy, attempts_made: u32, unit: f64) -> Duration {
    let exponent = i32::try_from(attempts_made.saturating_sub(1)).unwrap_or(i32::MAX);
    let base = (policy.initial_backoff.as_secs_f64() * policy.multiplier.powi(exponent))
        .min(policy.max_backoff.as_secs_f64());
    let factor = 1.0 - policy.jitter + 2.0 * policy.jitter * unit.clamp(0.0, 1.0);
    Duration::from_secs_f64((base * factor).max(0.0))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn policy(jitter: f64) -> RetryPolicy {
        RetryPolicy {
            max_attempts: 8,
            initial_backoff: Duration::from_millis(500),
            multiplier: 2.0,
            max_backoff: Duration::from_secs(60),
            jitter,
        }
    }

    #[test]
    fn waits_grow_by_the_multiplier_up_to_the_cap() {
        let waits: Vec<u128> = (1..=9)
            .map(|n| retry_wait(&policy(0.0), n, 0.5).as_millis())
            .collect();
        assert_eq!(
            waits,
            [500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000]
        );
    }

    #[test]
    fn jitter_spreads_a_wait_around_its_base() {
        assert_eq!(retry_wait(&policy(0.2), 2, 0.0).as_millis(), 800);
        assert_eq!(retry_wait(&policy(0.2), 2, 1.0).as_millis(), 1200);
    }

    proptest! {
        #[test]
        fn every_wait_is_within_the_horizon_bound(attempts in 0u32..10_000, unit in 0.0f64..=1.0, jitter in 0.0f64..=1.0) {
            let policy = policy(jitter);
            let wait = retry_wait(&policy, attempts, unit);
            prop_assert!(wait <= policy.max_backoff.mul_f64(1.0 + jitter) + Duration::from_nanos(1));
        }
    }
}
