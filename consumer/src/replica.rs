//! One destination region of a replicated namespace (a `region` target), as the reader that
//! replicates to it sees it. Each destination reads the namespace's topic with a consumer group
//! of its own (`<prefix><topic>.region-<name>`), so a region that is down for hours holds back
//! nobody else: its backlog waits on the topic and drains when it is back.
//!
//! What differs from plain delivery, and why:
//! - every entry goes to this region's writer, whatever the entry's own target says (the
//!   producer accepts no other target on a replicated namespace);
//! - the entries of one key go one at a time, in queue order ([`KeyLanes`]), and a retryable
//!   failure is retried in place, after its backoff, instead of being put back on the topic
//!   behind later writes of its key (and in front of every other region's reader);
//! - a DLQ copy names its region (`destination_region`), and an entry naming another region (a
//!   redriven copy) is acknowledged here without being applied;
//! - entries wait for their deliver-at in memory, never parked on a delay tier (a parked copy
//!   would come back to every region's reader).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use wal_namespaces::Namespace;
use wal_queue::entry::{self, Body, ENTRY_VERSION, Entry, Target as TargetSpec};
use wal_queue::{Queue, Reader};
use wal_targets::Kind;
use wal_targets::region::{RegionSettings, StartFrom, same_region};

use crate::lanes::KeyLanes;
use crate::metrics::ReplicationMetrics;

/// How often a destination region's reader writes a heartbeat on each queue it reads.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub struct Replica {
    pub region: String,
    /// The region this consumer runs in: the origin of its heartbeats.
    pub local: String,
    /// The namespace's region target narrowed to this region alone.
    pub target: TargetSpec,
    pub start_from: StartFrom,
    pub lanes: Arc<KeyLanes>,
    /// The original write time of the newest entry applied (a heartbeat's: when it was
    /// written); 0 before the first.
    applied_written_micros: AtomicI64,
    /// Made with the crew: a region's gauges live while its reader does.
    metrics: Option<ReplicationMetrics>,
}

impl Replica {
    /// The destinations `namespace` replicates to from region `local`; empty when its default
    /// target is not a region target.
    pub fn of(namespace: &Namespace, local: &str) -> Vec<Replica> {
        let Some(target) = namespace
            .default_target
            .as_ref()
            .filter(|_| namespace.replicated())
        else {
            return Vec::new();
        };
        // Checked when the namespace was loaded.
        let Ok(settings) = wal_targets::parse::<RegionSettings>(&target.settings_json) else {
            return Vec::new();
        };
        settings
            .destinations_from(local)
            .into_iter()
            .map(|(region, destination)| Replica {
                target: TargetSpec {
                    kind: Kind::Region.name().to_owned(),
                    settings_json: RegionSettings::only(&region, &destination, settings.start_from)
                        .to_json(),
                },
                metrics: Some(ReplicationMetrics::new(&namespace.name, &region)),
                local: local.to_owned(),
                region,
                start_from: settings.start_from,
                lanes: Arc::default(),
                applied_written_micros: AtomicI64::new(0),
            })
            .collect()
    }

    /// The reader of the namespace's queues that replicates to this region.
    pub fn reader(&self) -> Reader {
        Reader {
            name: format!("region-{}", self.region),
            from_oldest: self.start_from == StartFrom::Earliest,
        }
    }

    /// Whether this region applies `entry`: every entry, unless it is a copy for another
    /// region alone.
    pub fn applies(&self, entry: &Entry) -> bool {
        entry.destination_region.is_empty() || same_region(&entry.destination_region, &self.region)
    }
}

impl Replica {
    /// Records an entry applied in this region.
    pub fn applied(&self, entry: &Entry) {
        self.applied_written_micros
            .fetch_max(entry.original_write_time_micros, Ordering::Relaxed);
    }

    /// How far this region trails, given the entries its reader has yet to apply: nothing when
    /// none wait, else the age of the newest entry applied (since `started_micros` when none
    /// was), never negative (the source's clocks may be ahead of this one).
    pub fn lag_seconds(&self, waiting: u64, started_micros: i64) -> f64 {
        if waiting == 0 {
            return 0.0;
        }
        let applied = self.applied_written_micros.load(Ordering::Relaxed);
        let since = if applied > 0 { applied } else { started_micros };
        (entry::now_micros().saturating_sub(since)).max(0) as f64 / 1e6
    }

    /// Sets the region's gauges: entries waiting, lag in seconds, whether its writer answers.
    pub fn report(&self, waiting: u64, started_micros: i64, connected: bool) {
        if let Some(metrics) = &self.metrics {
            metrics.lag_entries.set(waiting as f64);
            metrics
                .lag_seconds
                .set(self.lag_seconds(waiting, started_micros));
            metrics.connected.set(if connected { 1.0 } else { 0.0 });
        }
    }

    /// A heartbeat for this region.
    pub fn heartbeat(&self, namespace: &str) -> Entry {
        let now = entry::now_micros();
        Entry {
            version: ENTRY_VERSION,
            id: entry::new_entry_id(),
            namespace: namespace.to_owned(),
            key: format!("wal.heartbeat.{}", self.region),
            body: Some(Body::Payload(Vec::new())),
            original_write_time_micros: now,
            deliver_at_micros: now,
            enqueued_at_micros: now,
            origin_region: self.local.clone(),
            destination_region: self.region.clone(),
            heartbeat: true,
            ..Entry::default()
        }
    }

    /// Writes a heartbeat on `queue` every [`HEARTBEAT_EVERY`] until `stop`. A failed write is
    /// only logged: the next one comes soon, and the lag reads high meanwhile, as it should.
    pub async fn beat(&self, queue: Arc<dyn Queue>, stop: tokio_util::sync::CancellationToken) {
        let namespace = queue.spec().namespace.clone();
        loop {
            tokio::select! {
                () = tokio::time::sleep(HEARTBEAT_EVERY) => {}
                () = stop.cancelled() => return,
            }
            match queue.enqueue(&self.heartbeat(&namespace)).await {
                Ok(()) => {
                    if let Some(metrics) = &self.metrics {
                        metrics.heartbeats.increment(1);
                    }
                }
                Err(error) => {
                    tracing::debug!(%error, region = %self.region, "writing a heartbeat failed")
                }
            }
        }
    }
}
