//! A breaker per target endpoint: while a target is unavailable (connections refused, no host,
//! every connection broken, overloaded), its entries are held in place instead of failing one by
//! one. A held entry uses no attempt, writes no retry copy and never reaches the DLQ for the
//! target's absence; the queues it came from stop taking entries (see `worker`).
//!
//! - **Closed**: applies go through.
//! - **Open**: the first apply that finds the target unavailable opens it (one WARN). Applies
//!   wait in [`Breaker::admit`]. After a back-off (from [`PROBE_FIRST`], doubling up to
//!   [`PROBE_MAX`], or as long as a throttling target asked, up to [`THROTTLED_MAX`]) one
//!   waiting apply is let through as the probe; if the target is still away,
//!   the back-off doubles; if it answers, the breaker closes (one INFO, with how long it was
//!   open and how many entries waited) and every waiting apply goes.
//!
//! The probe is a real entry's apply, so no kind needs a health check of its own, and a probe
//! that succeeds has delivered something.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::BreakerMetrics;

/// The first wait before probing an unavailable target.
pub const PROBE_FIRST: Duration = Duration::from_millis(250);
/// The longest wait between probes: a target that returns is used again within this.
pub const PROBE_MAX: Duration = Duration::from_secs(2);
/// The longest a target asking to be left alone (HTTP 429's Retry-After) is waited for: a
/// header asking for a day would hold its entries for a day; past this the breaker probes anyway.
pub const THROTTLED_MAX: Duration = Duration::from_secs(300);
/// How long a probe may be out before another waiting apply is let through instead: a probe
/// whose task ended without an outcome (it cannot, short of a bug) must not hold the breaker
/// open for good. Longer than any apply timeout in use.
const PROBE_LEASE: Duration = Duration::from_secs(120);
/// Breakers kept; endpoints come from entries' targets, so their number is bounded here. Past
/// it, entries of further endpoints go without a breaker (failing and retrying one by one).
const MAX_BREAKERS: usize = 1024;

/// What [`Breaker::admit`] let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// The breaker is closed.
    Free,
    /// The breaker is open and this apply is the one probe.
    Probe,
}

/// The breakers of one consumer, by endpoint.
#[derive(Debug, Default)]
pub struct Breakers {
    by_endpoint: Mutex<HashMap<String, Arc<Breaker>>>,
}

impl Breakers {
    /// The breaker of `endpoint` (made on first use), or none past [`MAX_BREAKERS`].
    pub fn get(&self, endpoint: &str) -> Option<Arc<Breaker>> {
        let mut map = lock(&self.by_endpoint);
        if let Some(breaker) = map.get(endpoint) {
            return Some(Arc::clone(breaker));
        }
        if map.len() >= MAX_BREAKERS {
            return None;
        }
        let breaker = Arc::new(Breaker::new(endpoint));
        map.insert(endpoint.to_owned(), Arc::clone(&breaker));
        Some(breaker)
    }

    /// The endpoints whose breakers are open now, with how long and how many entries wait.
    pub fn open(&self) -> Vec<OpenBreaker> {
        let map = lock(&self.by_endpoint);
        let mut open: Vec<OpenBreaker> = map.values().filter_map(|b| b.report()).collect();
        open.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
        open
    }
}

/// An open breaker, as operators see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OpenBreaker {
    pub endpoint: String,
    pub open_seconds: u64,
    /// Entries waiting for the target now.
    pub held: u64,
    /// Why it opened: the first failure.
    pub reason: String,
}

/// One endpoint's breaker; see the module doc.
#[derive(Debug)]
pub struct Breaker {
    endpoint: String,
    /// Mirrors the state, so a closed breaker costs one atomic load per apply.
    open: AtomicBool,
    state: Mutex<State>,
    /// Bumped whenever the breaker closes or a probe ends, to wake waiting applies.
    changed: watch::Sender<u64>,
    metrics: BreakerMetrics,
}

#[derive(Debug)]
enum State {
    Closed,
    Open(Open),
}

#[derive(Debug)]
struct Open {
    since: Instant,
    reason: String,
    /// When the next probe may go.
    probe_at: Instant,
    backoff: Duration,
    /// When the probe out now was let through.
    probing: Option<Instant>,
    /// Applies waiting now, and entries that waited since it opened.
    waiting: u64,
    waited: u64,
}

impl Breaker {
    fn new(endpoint: &str) -> Self {
        Self {
            endpoint: endpoint.to_owned(),
            open: AtomicBool::new(false),
            state: Mutex::new(State::Closed),
            changed: watch::Sender::new(0),
            metrics: BreakerMetrics::new(endpoint),
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Waits until an apply may go to the target: at once while closed; while open, until it
    /// closes or this apply is picked as the probe. `None` at shutdown.
    pub async fn admit(&self, shutdown: &CancellationToken) -> Option<Pass> {
        if !self.is_open() {
            return Some(Pass::Free);
        }
        let mut changed = self.changed.subscribe();
        let mut waiting = Waiting::new(self);
        loop {
            let wake_at = {
                let mut state = lock(&self.state);
                let State::Open(open) = &mut *state else {
                    return Some(Pass::Free);
                };
                waiting.count(open, &self.metrics);
                let now = Instant::now();
                let probe_out = open
                    .probing
                    .is_some_and(|since| now.duration_since(since) < PROBE_LEASE);
                if !probe_out && now >= open.probe_at {
                    open.probing = Some(now);
                    return Some(Pass::Probe);
                }
                match open.probing {
                    Some(since) if probe_out => since + PROBE_LEASE,
                    _ => open.probe_at,
                }
            };
            tokio::select! {
                _ = changed.changed() => {}
                () = tokio::time::sleep_until(wake_at) => {}
                () = shutdown.cancelled() => return None,
            }
        }
    }

    /// A pass taken and not used (its entry was paused meanwhile): a probe's turn goes to the
    /// next entry waiting, at once, rather than after the probe's lease.
    pub fn unused(&self, pass: Pass) {
        if pass != Pass::Probe {
            return;
        }
        if let State::Open(open) = &mut *lock(&self.state) {
            open.probing = None;
        } else {
            return;
        }
        self.changed.send_modify(|n| *n += 1);
    }

    /// An entry starts waiting for the target (once per entry, however many times it is
    /// admitted): counted for the INFO that closes the breaker.
    pub fn hold_entry(&self) {
        if let State::Open(open) = &mut *lock(&self.state) {
            open.waited += 1;
        }
    }

    /// The apply found the target unavailable: opens the breaker, or, after a failed probe,
    /// waits longer before the next.
    pub fn unavailable(&self, pass: Pass, reason: &str) {
        self.away(pass, reason, Duration::ZERO);
    }

    /// The target asked to be left alone for `wait` (at most [`THROTTLED_MAX`]): as
    /// [`Breaker::unavailable`], and no probe before the wait is over.
    pub fn throttled(&self, pass: Pass, reason: &str, wait: Duration) {
        self.away(pass, reason, wait.min(THROTTLED_MAX));
    }

    /// Opens the breaker or backs off after a failed probe; the next probe no sooner than
    /// `at_least` from now.
    fn away(&self, pass: Pass, reason: &str, at_least: Duration) {
        let mut state = lock(&self.state);
        match &mut *state {
            State::Closed => {
                let now = Instant::now();
                *state = State::Open(Open {
                    since: now,
                    reason: reason.to_owned(),
                    probe_at: now + PROBE_FIRST.max(at_least),
                    backoff: PROBE_FIRST,
                    probing: None,
                    waiting: 0,
                    waited: 0,
                });
                self.open.store(true, Ordering::Release);
                self.metrics.opened();
                tracing::warn!(endpoint = %self.endpoint, reason, "target unavailable; holding its entries until it answers");
            }
            State::Open(open) if pass == Pass::Probe => {
                open.backoff = (open.backoff * 2).min(PROBE_MAX);
                open.probe_at = Instant::now() + open.backoff.max(at_least);
                open.probing = None;
                tracing::debug!(endpoint = %self.endpoint, reason, next_probe_in = ?open.backoff.max(at_least), "target still unavailable");
                drop(state);
                self.changed.send_modify(|n| *n += 1);
            }
            // An apply that started before it opened: already known, but a target asking to be
            // left alone longer than the next probe is waited for.
            State::Open(open) => {
                open.probe_at = open.probe_at.max(Instant::now() + at_least);
            }
        }
    }

    /// The apply reached the target (it succeeded, or failed for the entry's own reasons): the
    /// target answers, so an open breaker closes.
    pub fn answered(&self) {
        if !self.is_open() {
            return;
        }
        let mut state = lock(&self.state);
        let State::Open(open) = std::mem::replace(&mut *state, State::Closed) else {
            return;
        };
        self.open.store(false, Ordering::Release);
        drop(state);
        let open_for = open.since.elapsed();
        self.metrics.closed(open_for);
        tracing::info!(endpoint = %self.endpoint, ?open_for, entries_waited = open.waited, "target answers again; delivering its entries");
        self.changed.send_modify(|n| *n += 1);
    }

    fn report(&self) -> Option<OpenBreaker> {
        let state = lock(&self.state);
        let State::Open(open) = &*state else {
            return None;
        };
        Some(OpenBreaker {
            endpoint: self.endpoint.clone(),
            open_seconds: open.since.elapsed().as_secs(),
            held: open.waiting,
            reason: open.reason.clone(),
        })
    }
}

/// One apply waiting in [`Breaker::admit`], counted once while it waits.
struct Waiting<'a> {
    breaker: &'a Breaker,
    counted: bool,
}

impl<'a> Waiting<'a> {
    fn new(breaker: &'a Breaker) -> Self {
        Self {
            breaker,
            counted: false,
        }
    }

    fn count(&mut self, open: &mut Open, metrics: &BreakerMetrics) {
        if !self.counted {
            self.counted = true;
            open.waiting += 1;
            metrics.held.increment(1.0);
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        self.breaker.metrics.held.decrement(1.0);
        if let State::Open(open) = &mut *lock(&self.breaker.state) {
            open.waiting = open.waiting.saturating_sub(1);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change under these locks is one assignment, so a poisoned lock is still consistent.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
