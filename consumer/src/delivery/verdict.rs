//! What becomes of an entry after an attempt, decided in one place: from the attempt's outcome,
//! the attempts made (this one included) and the namespace's retry policy. The deliverer acts
//! on the verdict; nothing else compares attempts with `max_attempts` or picks a backoff.

use std::time::Duration;

use wal_apply::TargetError;
use wal_namespaces::RetryPolicy;
use wal_queue::Failure;

use crate::backoff;

/// The verdict on one attempt.
#[derive(Debug, PartialEq)]
pub(super) enum Verdict {
    /// Try again here after `wait`. Only a destination that retries in place does (a region):
    /// it keeps a key's later writes behind this one, and a retry copy put back on the topic
    /// would reach every region's reader.
    InPlace { wait: Duration, reason: String },
    /// Done with this delivery: settle it with the queue.
    Settle(Settle),
}

/// How a delivery ends with its queue.
#[derive(Debug, PartialEq)]
pub(super) enum Settle {
    /// The effect happened.
    Acknowledge,
    /// A retry copy due after `wait` goes on the queue, then the original is acknowledged.
    Later { wait: Duration, reason: String },
    /// The DLQ copy is written with this failure, then the original is acknowledged.
    DeadLetter(Failure),
}

/// The verdict on an attempt that ended `applied`, the `attempts`-th of the entry. `unit` draws
/// a uniform number in 0..1 for the backoff's jitter, called only when there is a wait to pick
/// (not for the applied entries of the hot path).
pub(super) fn verdict(
    applied: &Result<(), TargetError>,
    attempts: u32,
    policy: &RetryPolicy,
    in_place: bool,
    unit: impl FnOnce() -> f64,
) -> Verdict {
    let reason = match applied {
        Ok(()) => return Verdict::Settle(Settle::Acknowledge),
        Err(error @ TargetError::Permanent { .. }) => {
            return Verdict::Settle(Settle::DeadLetter(Failure::permanent(error.to_string())));
        }
        Err(error) => error.to_string(),
    };
    let gave_up = |reason: String| {
        Verdict::Settle(Settle::DeadLetter(Failure::retryable(format!(
            "gave up after {attempts} attempts: {reason}"
        ))))
    };
    if attempts >= policy.max_attempts {
        return gave_up(reason);
    }
    let wait = backoff::retry_wait(policy, attempts, unit());
    match applied {
        _ if !in_place => Verdict::Settle(Settle::Later { wait, reason }),
        Err(TargetError::Retryable { .. }) => Verdict::InPlace { wait, reason },
        // Unavailable or throttled reaches a verdict only for a target without a breaker (past
        // their bound); a destination retrying in place puts no retry copy back on the topic.
        _ => gave_up(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(500),
            multiplier: 2.0,
            max_backoff: Duration::from_secs(60),
            jitter: 0.0,
        }
    }

    fn retryable() -> Result<(), TargetError> {
        Err(TargetError::retryable("timed out"))
    }

    #[test]
    fn an_applied_entry_is_acknowledged() {
        let verdict = verdict(&Ok(()), 3, &policy(), false, || 0.5);
        assert_eq!(verdict, Verdict::Settle(Settle::Acknowledge));
    }

    #[test]
    fn a_permanent_failure_is_dead_lettered_at_its_first_attempt() {
        let failed = Err(TargetError::permanent("bad payload"));
        let verdict = verdict(&failed, 1, &policy(), false, || 0.5);
        assert_eq!(
            verdict,
            Verdict::Settle(Settle::DeadLetter(Failure::permanent("bad payload")))
        );
    }

    #[test]
    fn a_retryable_failure_is_retried_later_with_the_backoff_until_the_last_attempt() {
        let first = verdict(&retryable(), 1, &policy(), false, || 0.5);
        let second = verdict(&retryable(), 2, &policy(), false, || 0.5);
        let last = verdict(&retryable(), 3, &policy(), false, || 0.5);
        let later = |millis| {
            Verdict::Settle(Settle::Later {
                wait: Duration::from_millis(millis),
                reason: "timed out".into(),
            })
        };
        assert_eq!(first, later(500));
        assert_eq!(second, later(1000));
        assert_eq!(
            last,
            Verdict::Settle(Settle::DeadLetter(Failure::retryable(
                "gave up after 3 attempts: timed out"
            )))
        );
    }

    #[test]
    fn a_destination_retrying_in_place_never_puts_a_copy_back() {
        let again = verdict(&retryable(), 1, &policy(), true, || 0.5);
        assert_eq!(
            again,
            Verdict::InPlace {
                wait: Duration::from_millis(500),
                reason: "timed out".into()
            }
        );
        let unavailable = Err(TargetError::unavailable("refused"));
        assert_eq!(
            verdict(&unavailable, 1, &policy(), true, || 0.5),
            Verdict::Settle(Settle::DeadLetter(Failure::retryable(
                "gave up after 1 attempts: refused"
            )))
        );
    }

    #[test]
    fn an_unavailable_target_without_a_breaker_is_retried_like_a_failed_attempt() {
        let throttled = Err(TargetError::Throttled {
            reason: "429".into(),
            wait: Duration::from_secs(5),
        });
        assert!(matches!(
            verdict(&throttled, 2, &policy(), false, || 0.5),
            Verdict::Settle(Settle::Later { .. })
        ));
    }
}
