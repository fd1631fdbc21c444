//! What applying entries records: each breaker's state by endpoint (whether it is open, since
//! when, how many entries it holds, how often and how long it was open), and the two-phase writes
//! applied.

use metrics::{
    Counter, Gauge, Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge,
    histogram,
};

pub const TRANSACTIONS_APPLIED: &str = "wal_transactions_applied_total";
pub const TRANSACTION_ITEMS_APPLIED: &str = "wal_transaction_items_applied_total";
pub const TRANSACTION_APPLY_LAG: &str = "wal_transaction_apply_lag_seconds";
pub const BREAKER_OPEN: &str = "wal_consumer_breaker_open";
pub const BREAKER_HELD: &str = "wal_consumer_breaker_held";
pub const BREAKER_OPENED: &str = "wal_consumer_breaker_opened_total";
pub const BREAKER_OPEN_SECONDS: &str = "wal_consumer_breaker_open_seconds_total";
pub const BREAKER_OPENED_AT: &str = "wal_consumer_breaker_opened_at_seconds";

/// Describes these metrics; a binary that applies entries calls it once with its own.
pub fn describe() {
    describe_counter!(
        TRANSACTIONS_APPLIED,
        "Two-phase writes whose every item was applied, by namespace."
    );
    describe_counter!(
        TRANSACTION_ITEMS_APPLIED,
        "Items of two-phase writes applied, by namespace (an item applied again after a restart counts again)."
    );
    describe_histogram!(
        TRANSACTION_APPLY_LAG,
        Unit::Seconds,
        "From a two-phase write's commit to its last item applied, by namespace."
    );
    describe_gauge!(
        BREAKER_OPEN,
        "1 while a target endpoint's breaker is open (the target is unavailable and its entries are held), by endpoint."
    );
    describe_gauge!(
        BREAKER_HELD,
        "Entries waiting for an unavailable target, by endpoint."
    );
    describe_counter!(BREAKER_OPENED, "Times a target endpoint's breaker opened.");
    describe_counter!(
        BREAKER_OPEN_SECONDS,
        "Seconds target endpoints' breakers were open, added when each closes."
    );
}

/// One target endpoint's breaker handles.
#[derive(Debug)]
pub struct BreakerMetrics {
    open: Gauge,
    opened_at: Gauge,
    pub held: Gauge,
    opened_total: Counter,
    open_seconds: Counter,
}

impl BreakerMetrics {
    pub fn new(endpoint: &str) -> Self {
        let labels = [("endpoint", endpoint.to_owned())];
        Self {
            open: gauge!(BREAKER_OPEN, &labels),
            opened_at: gauge!(BREAKER_OPENED_AT, &labels),
            held: gauge!(BREAKER_HELD, &labels),
            opened_total: counter!(BREAKER_OPENED, &labels),
            open_seconds: counter!(BREAKER_OPEN_SECONDS, &labels),
        }
    }

    pub fn opened(&self) {
        self.open.set(1.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        self.opened_at.set(now.as_secs_f64().floor());
        self.opened_total.increment(1);
    }

    pub fn closed(&self, open_for: std::time::Duration) {
        self.open.set(0.0);
        self.opened_at.set(0.0);
        self.open_seconds.increment(open_for.as_secs());
    }
}

/// A two-phase write finished: `items` applied by this attempt, `lag` since its commit.
pub fn transaction_applied(namespace: &str, items: u64, lag: std::time::Duration) {
    counter!(TRANSACTIONS_APPLIED, "namespace" => namespace.to_owned()).increment(1);
    counter!(TRANSACTION_ITEMS_APPLIED, "namespace" => namespace.to_owned()).increment(items);
    histogram!(TRANSACTION_APPLY_LAG, "namespace" => namespace.to_owned()).record(lag);
}
