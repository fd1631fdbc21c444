//! An outage as one client sees it: the service it talks to stops answering, and later answers
//! again. An operator reading the log at 3 a.m. needs two lines, not one per failed connection
//! attempt: one WARN when the client loses the service, one INFO when it is back, saying how long
//! it was away and how many failures were folded into that count. While the outage lasts, a
//! reminder every [`REMINDER_EVERY`] keeps it visible in a recent window of the log.
//!
//! A process has many clients of one service (a consumer has one per queue and delay tier, and a
//! producer, and an admin client), and they all lose it together. So the WARN and the INFO are
//! the process's: the first of its clients to lose the service logs the WARN, the first to hear
//! from it again logs the INFO (with how long since the WARN); the others say so at DEBUG. The
//! first answer of any client ends the process's outage, not the last: an idle or short-lived
//! client may never hear from its service again, and must not keep the next outage's WARN from
//! being logged. A client still without its service after that logs its own WARN at its next
//! reminder (every five minutes), which is the process's again.
//!
//! Every failure is still counted in `wal_broker_errors_total`, every outage in
//! `wal_broker_outages_total`, and `wal_broker_away` is 1 while the service is away, labelled by
//! service and client (see [`crate::metrics`]).

use std::fmt::Display;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use metrics::{Counter, Gauge};

use crate::metrics::{broker_away, broker_errors, broker_outages};

/// How often a lasting outage is logged again.
pub const REMINDER_EVERY: Duration = Duration::from_secs(300);

/// One client's view of whether its service answers; see the module doc.
#[derive(Debug)]
pub struct Outage {
    /// The service, as a metric label and in log lines: "kafka", "sqs".
    service: &'static str,
    /// Whose view this is: "producer", a consumer's topic.
    client: String,
    /// Set while away, so [`Outage::answered`] costs one atomic load on the hot path.
    away: AtomicBool,
    state: Mutex<Option<Away>>,
    errors: Counter,
    outages: Counter,
    away_gauge: Gauge,
}

#[derive(Debug)]
struct Away {
    since: Instant,
    failures: u64,
    reminded: Instant,
}

/// What a failure or an answer changed, for callers that act on it (and for tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The service was answering; this failure starts an outage.
    Lost,
    /// The service was away already; the failure was counted.
    StillAway,
    /// The service was away; this answer ends the outage, which lasted this long.
    Back { away_for: Duration, failures: u64 },
    /// The service was answering and still is.
    Up,
}

impl Outage {
    pub fn new(service: &'static str, client: &str) -> Self {
        Self {
            service,
            client: client.to_owned(),
            away: AtomicBool::new(false),
            state: Mutex::new(None),
            errors: broker_errors(service, client),
            outages: broker_outages(service, client),
            away_gauge: broker_away(service, client),
        }
    }

    /// Records a failure that says the service is away (a refused connection, every broker
    /// down), not that one request was wrong.
    pub fn failed(&self, reason: &dyn Display) -> Change {
        self.errors.increment(1);
        let now = Instant::now();
        let mut state = self.lock();
        match state.as_mut() {
            None => {
                *state = Some(Away {
                    since: now,
                    failures: 1,
                    reminded: now,
                });
                self.away.store(true, Ordering::Release);
                self.away_gauge.set(1.0);
                self.outages.increment(1);
                if process::lost(self.service, now) {
                    tracing::warn!(service = self.service, client = %self.client, %reason, "lost the service; failures are counted until it answers again");
                } else {
                    tracing::debug!(service = self.service, client = %self.client, %reason, "lost the service too");
                }
                Change::Lost
            }
            Some(away) => {
                away.failures += 1;
                tracing::debug!(service = self.service, client = %self.client, %reason, failures = away.failures, "still away");
                let due = now.duration_since(away.reminded) >= REMINDER_EVERY;
                if due {
                    away.reminded = now;
                }
                if due && process::remind(self.service, now) {
                    tracing::warn!(service = self.service, client = %self.client, %reason, away_for = ?now.duration_since(away.since), failures = away.failures, "the service is still away");
                }
                Change::StillAway
            }
        }
    }

    /// Records that the service answered.
    pub fn answered(&self) -> Change {
        if !self.away.load(Ordering::Acquire) {
            // This client never lost it, but another one of the process may have (a
            // short-lived one that is gone): any answer ends the process's outage.
            if process::may_be_away(self.service)
                && let Some(since) = process::back(self.service)
            {
                tracing::info!(service = self.service, client = %self.client, away_for = ?since.elapsed(), "the service answers again");
            }
            return Change::Up;
        }
        let Some(away) = self.lock().take() else {
            return Change::Up;
        };
        self.away.store(false, Ordering::Release);
        self.away_gauge.set(0.0);
        let away_for = away.since.elapsed();
        match process::back(self.service) {
            Some(since) => {
                let away_for = since.elapsed();
                tracing::info!(service = self.service, client = %self.client, ?away_for, failures = away.failures, "the service answers again");
            }
            None => {
                tracing::debug!(service = self.service, client = %self.client, ?away_for, failures = away.failures, "the service answers this client again")
            }
        }
        Change::Back {
            away_for,
            failures: away.failures,
        }
    }

    /// Whether the last thing heard of the service was a failure.
    pub fn is_away(&self) -> bool {
        self.away.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Away>> {
        // Every change under the lock is one assignment, so a poisoned lock is still consistent.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Outage {
    /// A short-lived client (a lag reading) dropped while away leaves no series saying it is.
    fn drop(&mut self) {
        if self.away.load(Ordering::Acquire) {
            self.away_gauge.set(0.0);
        }
    }
}

/// The process's view of each service: away since when, reminded when.
mod process {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, MutexGuard, PoisonError};
    use std::time::Instant;

    use super::REMINDER_EVERY;

    #[derive(Debug)]
    struct Away {
        since: Instant,
        reminded: Instant,
    }

    static SERVICES: Mutex<BTreeMap<&'static str, Away>> = Mutex::new(BTreeMap::new());
    /// The services the process is without, one bit each (a hash of the name; two may share
    /// one): the answers' fast path reads only this.
    static AWAY: AtomicU64 = AtomicU64::new(0);

    fn bit(service: &str) -> u64 {
        let hash = service.bytes().fold(0u32, |hash, byte| {
            hash.wrapping_mul(31).wrapping_add(u32::from(byte))
        });
        1 << (hash % 64)
    }

    /// Whether the process may be without `service` (never false when it is).
    pub(super) fn may_be_away(service: &str) -> bool {
        AWAY.load(Ordering::Acquire) & bit(service) != 0
    }

    fn services() -> MutexGuard<'static, BTreeMap<&'static str, Away>> {
        // Every change under the lock is one step, so a poisoned lock is still consistent.
        SERVICES.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes which services are away; under the lock.
    fn publish(services: &BTreeMap<&'static str, Away>) {
        let bits = services.keys().fold(0, |bits, service| bits | bit(service));
        AWAY.store(bits, Ordering::Release);
    }

    /// A client lost `service`; whether the process had it until now.
    pub(super) fn lost(service: &'static str, now: Instant) -> bool {
        let mut services = services();
        if services.contains_key(service) {
            return false;
        }
        services.insert(
            service,
            Away {
                since: now,
                reminded: now,
            },
        );
        publish(&services);
        true
    }

    /// A client still without `service` is due a reminder: whether the process logs it. It
    /// does when its own reminder is due, and when the process heard from the service since
    /// (another client's answer ended its outage): this client's lasting one is logged then,
    /// and is the process's again.
    pub(super) fn remind(service: &'static str, now: Instant) -> bool {
        let mut services = services();
        let due = match services.get_mut(service) {
            Some(away) if now.duration_since(away.reminded) >= REMINDER_EVERY => {
                away.reminded = now;
                true
            }
            Some(_) => false,
            None => {
                services.insert(
                    service,
                    Away {
                        since: now,
                        reminded: now,
                    },
                );
                true
            }
        };
        publish(&services);
        due
    }

    /// A client hears from `service` again; when that ends the process's outage, since when it
    /// lasted.
    pub(super) fn back(service: &'static str) -> Option<Instant> {
        let mut services = services();
        let since = services.remove(service).map(|away| away.since);
        publish(&services);
        since
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_one_loss_and_one_return_however_many_failures_between() {
        let outage = Outage::new("kafka", "t");
        assert_eq!(outage.answered(), Change::Up);
        assert_eq!(outage.failed(&"down"), Change::Lost);
        assert!(outage.is_away());
        for _ in 0..10 {
            assert_eq!(outage.failed(&"down"), Change::StillAway);
        }
        let Change::Back { failures, .. } = outage.answered() else {
            panic!("the answer ends the outage");
        };
        assert_eq!(failures, 11);
        assert!(!outage.is_away());
        assert_eq!(outage.answered(), Change::Up);
        assert_eq!(outage.failed(&"down again"), Change::Lost);
    }

    #[test]
    fn the_process_loses_a_service_once_however_many_clients_notice() {
        let (first, second) = (
            Outage::new("test-service", "a"),
            Outage::new("test-service", "b"),
        );
        let now = Instant::now();
        assert_eq!(first.failed(&"down"), Change::Lost);
        assert!(
            !process::lost("test-service", now),
            "the process lost it already"
        );
        assert_eq!(second.failed(&"down"), Change::Lost);
        // The first answer ends the process's outage, though the second client waits on.
        assert!(matches!(first.answered(), Change::Back { .. }));
        assert!(second.is_away());
        assert!(process::back("test-service").is_none(), "ended already");
        // A client still away is logged at its next reminder, and is the process's outage.
        assert!(process::remind("test-service", now));
        assert!(!process::lost("test-service", now));
        // Any answer ends it, from a client that never lost the service too.
        let third = Outage::new("test-service", "c");
        assert_eq!(third.answered(), Change::Up);
        assert!(process::lost("test-service", now), "a new outage");
    }
}
