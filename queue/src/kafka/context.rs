//! What librdkafka tells the platform's Kafka clients besides records: errors, log lines and
//! rebalances.
//!
//! While the brokers are away librdkafka reports every failed connection attempt, to every
//! client, as an error event and a log line: hundreds a minute across a consumer's workers.
//! Those errors are the broker's absence, not anything the platform did, and librdkafka
//! reconnects by itself. So they are folded into the client's [`Outage`] (one WARN when lost, one
//! INFO when back, a count in between), and so are its log lines about the same absence; other
//! errors are logged as librdkafka reports them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rdkafka::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Message as _, OwnedMessage};
use rdkafka::topic_partition_list::TopicPartitionList;

use super::classify::broker_away;
use super::offsets::OffsetTracker;
use wal_runtime::outage::Outage;

/// The context of the producer and admin clients: errors folded into their outage, and the last
/// time the brokers refused to let the client in, for the start-up check (`credentials`).
#[derive(Debug)]
pub struct OutageContext {
    pub(super) outage: Arc<Outage>,
    pub(super) refusal: Arc<Refusal>,
}

/// The last time the brokers would not let a client in, in librdkafka's words.
pub(super) type Refusal = Mutex<Option<String>>;

impl OutageContext {
    /// A context for a client of the Kafka service, named `client` in logs and metrics.
    pub fn new(client: &str) -> Self {
        Self {
            outage: Arc::new(Outage::new("kafka", client)),
            refusal: Arc::new(Mutex::new(None)),
        }
    }

    /// A context for a client that takes the place of another (a replaced producer's successor): the same
    /// outage and the same place for refusals, so what was counted goes on being counted.
    pub(super) fn sharing(outage: &Arc<Outage>, refusal: &Arc<Refusal>) -> Self {
        Self {
            outage: Arc::clone(outage),
            refusal: Arc::clone(refusal),
        }
    }

    /// The client's view of its brokers, to say they answered (a record delivered): keep it
    /// before the context moves into the client.
    pub fn outage(&self) -> Arc<Outage> {
        Arc::clone(&self.outage)
    }

    /// Where the client's refusals are kept: keep it before the context moves into the client.
    pub(super) fn refusal(&self) -> Arc<Refusal> {
        Arc::clone(&self.refusal)
    }
}

impl ClientContext for OutageContext {
    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code().is_some_and(refused) {
            *self
                .refusal
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(reason.to_owned());
        }
        report_error(&self.outage, error, reason);
    }

    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        report_log(&self.outage, level, fac, message);
    }
}

/// For the short-lived clients that read a group's offsets (lag) or peek at a record.
impl ConsumerContext for OutageContext {}

/// A consumer's context: its outage, and the offsets of revoked partitions dropped, so a late
/// acknowledgement never stores an offset for a partition another consumer now owns.
pub(super) struct TrackingContext {
    /// The topic the consumer reads, for its log lines.
    pub(super) queue: String,
    pub(super) tracker: Arc<Mutex<OffsetTracker>>,
    pub(super) outage: Arc<Outage>,
    /// Whether the queue is held (paused): partitions a rebalance assigns meanwhile are paused
    /// as they arrive, so a held consumer keeps its place in the group and takes nothing new.
    pub(super) held: Arc<AtomicBool>,
    /// Records received while held, for the next receive (see `receiver`): those of a revoked
    /// partition are dropped with it, as librdkafka drops what it fetched of one; its new owner
    /// reads them from the committed offset.
    pub(super) kept: Arc<Mutex<Vec<OwnedMessage>>>,
}

impl ClientContext for TrackingContext {
    fn error(&self, error: KafkaError, reason: &str) {
        report_error(&self.outage, error, reason);
    }

    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        report_log(&self.outage, level, fac, message);
    }
}

impl ConsumerContext for TrackingContext {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(partitions) = rebalance {
            let revoked = numbers(partitions);
            // At DEBUG: when a consumer got and lost its partitions is what a slow recovery
            // after an outage is read from (scripts/test runs the outage programs so).
            tracing::debug!(queue = %self.queue, partitions = ?revoked, "partitions revoked");
            {
                let mut tracker = lock(&self.tracker);
                for partition in &revoked {
                    tracker.revoke(*partition);
                }
            }
            // One lock at a time: receive takes these two in the other order.
            lock_any(&self.kept).retain(|m| !revoked.contains(&m.partition()));
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(partitions) = rebalance {
            let assigned = numbers(partitions);
            tracing::debug!(queue = %self.queue, partitions = ?assigned, "partitions assigned");
            let mut tracker = lock(&self.tracker);
            for partition in assigned {
                tracker.assign(partition);
            }
            if self.held.load(Ordering::SeqCst)
                && let Err(error) = consumer.pause(partitions)
            {
                tracing::warn!(%error, "pausing the partitions a rebalance assigned to a held queue failed; they read ahead while held");
            }
        }
    }
}

/// The partition numbers of a rebalance's list (one topic: a consumer reads one queue).
fn numbers(partitions: &TopicPartitionList) -> Vec<i32> {
    partitions
        .elements()
        .iter()
        .map(|p| p.partition())
        .collect()
}

/// A lock whose holders change its value in one step (a push, a take): a poisoned one is still
/// consistent, and used.
pub(super) fn lock_any<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(super) fn lock(tracker: &Mutex<OffsetTracker>) -> MutexGuard<'_, OffsetTracker> {
    // A panic elsewhere while holding the lock leaves the tracker consistent (every method
    // mutates in one step), so a poisoned lock is still safe to use.
    tracker
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The brokers answered but would not let the client in: its credentials or TLS settings are
/// wrong (or the brokers' are), and trying again changes nothing until someone acts.
pub(super) fn refused(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Authentication
            | RDKafkaErrorCode::SSL
            | RDKafkaErrorCode::SaslAuthenticationFailed
    )
}

fn report_error(outage: &Outage, error: KafkaError, reason: &str) {
    match error.rdkafka_error_code() {
        Some(code) if broker_away(code) => {
            outage.failed(&format_args!("{error}: {reason}"));
        }
        _ => tracing::error!(%error, reason, "kafka client error"),
    }
}

/// librdkafka's log lines at their level, except what the broker's absence makes it say:
/// - its connection failures ("FAIL"), which it sends as error events too, which the outage
///   counts;
/// - requests that timed out on a broker that went away ("REQTMOUT"), a failure of its own;
/// - while the outage lasts, its other warnings and errors (a group session that timed out, a
///   leader not found): consequences of the same absence, at DEBUG.
fn report_log(outage: &Outage, level: RDKafkaLogLevel, fac: &str, message: &str) {
    let severe = matches!(
        level,
        RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error
            | RDKafkaLogLevel::Warning
    );
    if severe && fac == "REQTMOUT" {
        outage.failed(&message);
        return;
    }
    if severe && (fac == "FAIL" || outage.is_away()) {
        tracing::debug!(target: "librdkafka", fac, "{message}");
        return;
    }
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => tracing::error!(target: "librdkafka", fac, "{message}"),
        RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", fac, "{message}"),
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
            tracing::info!(target: "librdkafka", fac, "{message}")
        }
        RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", fac, "{message}"),
    }
}
