//! Admission control: each namespace gets its own rate limit and its own cap on writes in flight,
//! so a namespace pushed far past its limits is refused at the door (RESOURCE_EXHAUSTED) instead
//! of queueing without bound, and cannot use up another namespace's share.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wal_namespaces::RateLimit;

/// Why a write was shed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Shed {
    #[error(
        "namespace '{namespace}' is over its rate limit of {per_second} writes/s (burst {burst}); retry after {retry_after:?}"
    )]
    Rate {
        namespace: String,
        per_second: u32,
        burst: u32,
        retry_after: Duration,
    },
    #[error(
        "namespace '{namespace}' already has {max_in_flight} writes in flight, its limit; retry with backoff"
    )]
    InFlight {
        namespace: String,
        max_in_flight: u32,
    },
}

#[derive(Debug)]
pub struct Admission {
    namespace: String,
    limit: RateLimit,
    limiter: DefaultDirectRateLimiter,
    in_flight: Arc<Semaphore>,
}

impl Admission {
    pub fn new(namespace: &str, limit: &RateLimit) -> Self {
        let per_second = NonZeroU32::new(limit.writes_per_second).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(limit.burst).unwrap_or(per_second);
        Self {
            namespace: namespace.to_owned(),
            limit: limit.clone(),
            limiter: RateLimiter::direct(Quota::per_second(per_second).allow_burst(burst)),
            in_flight: Arc::new(Semaphore::new(limit.max_in_flight as usize)),
        }
    }

    /// Admits one write, or says why not. The permit holds the write's in-flight slot until it
    /// is dropped; a refused write takes nothing from either limit.
    pub fn admit(&self) -> Result<OwnedSemaphorePermit, Shed> {
        // The slot first: giving it back is free, a rate token is not.
        let permit = Arc::clone(&self.in_flight)
            .try_acquire_owned()
            .map_err(|_| Shed::InFlight {
                namespace: self.namespace.clone(),
                max_in_flight: self.limit.max_in_flight,
            })?;
        self.limiter.check().map_err(|not_until| Shed::Rate {
            namespace: self.namespace.clone(),
            per_second: self.limit.writes_per_second,
            burst: self.limit.burst,
            retry_after: not_until.wait_time_from(DefaultClock::default().now()),
        })?;
        Ok(permit)
    }

    /// Writes of this namespace in flight now.
    pub fn in_flight(&self) -> usize {
        self.limit.max_in_flight as usize - self.in_flight.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(per_second: u32, burst: u32, max_in_flight: u32) -> RateLimit {
        RateLimit {
            writes_per_second: per_second,
            burst,
            max_in_flight,
        }
    }

    #[test]
    fn sheds_past_the_burst() {
        let admission = Admission::new("orders", &limit(1, 3, 100));
        let admitted: Vec<_> = (0..3)
            .map(|_| admission.admit().expect("within burst"))
            .collect();
        let shed = admission.admit().expect_err("over the burst");
        assert!(
            matches!(
                shed,
                Shed::Rate {
                    per_second: 1,
                    burst: 3,
                    ..
                }
            ),
            "{shed:?}"
        );
        assert!(
            shed.to_string()
                .starts_with("namespace 'orders' is over its rate limit of 1 writes/s")
        );
        drop(admitted);
    }

    #[test]
    fn sheds_past_the_in_flight_cap_and_recovers_when_writes_finish() {
        let admission = Admission::new("orders", &limit(1000, 1000, 2));
        let first = admission.admit().expect("one");
        let _second = admission.admit().expect("two");
        assert_eq!(admission.in_flight(), 2);
        assert!(matches!(
            admission.admit(),
            Err(Shed::InFlight {
                max_in_flight: 2,
                ..
            })
        ));
        drop(first);
        assert!(admission.admit().is_ok(), "a finished write frees its slot");
    }

    #[test]
    fn namespaces_do_not_share_limits() {
        let busy = Admission::new("busy", &limit(1, 1, 10));
        let quiet = Admission::new("quiet", &limit(1, 1, 10));
        let _held = busy.admit().expect("busy's one write");
        assert!(busy.admit().is_err());
        assert!(quiet.admit().is_ok(), "quiet keeps its own budget");
    }
}
