//! How far one reader of a namespace's queues trails, read from the brokers without joining its
//! group: what `walctl replication status` shows per region and `walctl destinations status`
//! per destination.

use std::sync::Arc;

use std::collections::BTreeMap;

use wal_clusters::Backends;
use wal_clusters::flags::BrokerFlags;
use wal_namespaces::Namespace;
use wal_queue::entry;
use wal_queue::{Position, Queue, QueueSpec, Reader};

use crate::Failure;
use crate::output::when;

/// The columns a reader's row shows after the ones that name it.
pub const COLUMNS: [&str; 7] = [
    "STATE",
    "LAG",
    "LAG SECONDS",
    "LAST APPLIED",
    "DEAD LETTERS",
    "LOST",
    "GAPS",
];

/// Clients for `namespace`'s queues, from the operator's broker flags.
pub async fn backends(brokers: &BrokerFlags, namespace: &Namespace) -> Result<Backends, Failure> {
    let clusters = brokers
        .cluster_map(brokers.kafka(), &Default::default())
        .map_err(|e| Failure::usage(e.to_string()))?;
    Backends::connect(&clusters, std::slice::from_ref(namespace))
        .await
        .map_err(|e| Failure::broker(format!("configuring the brokers: {e}")))
}

/// `namespace`'s dead letters counted by the reader `reader_of` names for each (none: not
/// counted).
pub async fn dead_letters_by(
    brokers: &BrokerFlags,
    namespace: &Namespace,
    reader_of: impl Fn(&wal_queue::entry::Entry) -> Option<String>,
) -> Result<BTreeMap<String, u64>, Failure> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let clusters = brokers
        .cluster_map(brokers.kafka(), &Default::default())
        .map_err(|e| Failure::usage(e.to_string()))?;
    wal_control_plane::operations::dlq::DeadLetters::connect(&clusters, namespace)
        .await
        .map_err(crate::dlq::dlq_failure)?
        .read_all(|found| {
            if let Some(reader) = reader_of(&found.entry) {
                *counts.entry(reader).or_default() += 1;
            }
        })
        .await
        .map_err(crate::dlq::dlq_failure)?;
    Ok(counts)
}

/// One reader's lag over every queue of its namespace.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Lag {
    /// Entries it has yet to read.
    pub entries: u64,
    /// The age of the oldest entry waiting for it.
    pub seconds: f64,
    /// The original write time of the newest entry it applied.
    pub last_applied_micros: Option<i64>,
    /// Entries the topics dropped before it read them.
    pub lost: u64,
    /// `topic/partition:from..to` per gap.
    pub gaps: Vec<String>,
    /// Whether it has committed a position on any partition.
    pub started: bool,
}

impl Lag {
    /// The lag of `reader` (`None`: the namespace's own group) on `namespace`'s queues.
    pub async fn of_reader(
        backends: &Backends,
        namespace: &Namespace,
        reader: Option<&Reader>,
    ) -> Result<Self, Failure> {
        let mut lag = Self::default();
        for config in &namespace.queues {
            let mut spec = QueueSpec::of(namespace, config);
            if let Some(reader) = reader {
                spec = spec.read_by(reader.clone());
            }
            let queue = backends
                .queue(config.backend, spec)
                .ok_or_else(|| Failure::broker("no client for the queue's backend"))?;
            let positions = queue
                .positions()
                .await
                .map_err(|e| Failure::broker(e.to_string()))?
                .unwrap_or_default();
            lag.started |= positions.iter().any(|p| p.committed.is_some());
            lag.read_queue(&queue, &positions).await?;
        }
        Ok(lag)
    }

    /// In a word: gap, not started, behind or caught up.
    pub fn state(&self) -> &'static str {
        if self.lost > 0 {
            "gap"
        } else if !self.started {
            "not started"
        } else if self.entries > 0 {
            "behind"
        } else {
            "caught up"
        }
    }

    /// The cells of [`COLUMNS`], with the reader's `dead_lettered` count.
    pub fn cells(&self, dead_lettered: u64) -> Vec<String> {
        vec![
            self.state().to_owned(),
            self.entries.to_string(),
            format!("{:.1}", self.seconds),
            self.last_applied_micros.map_or("-".to_owned(), when),
            dead_lettered.to_string(),
            self.lost.to_string(),
            if self.gaps.is_empty() {
                "-".to_owned()
            } else {
                self.gaps.join(" ")
            },
        ]
    }

    /// The same as JSON fields, beside which a row adds the ones that name it.
    pub fn json(&self, dead_lettered: u64) -> serde_json::Map<String, serde_json::Value> {
        let serde_json::Value::Object(fields) = serde_json::json!({
            "state": self.state(),
            "lag_entries": self.entries,
            "lag_seconds": self.seconds,
            "last_applied": self.last_applied_micros.map(when),
            "dead_lettered": dead_lettered,
            "lost": self.lost,
            "gaps": self.gaps,
        }) else {
            unreachable!("a JSON object literal")
        };
        fields
    }

    /// Adds one queue's partitions: lag, gaps, the oldest entry waiting and the newest applied.
    async fn read_queue(
        &mut self,
        queue: &Arc<dyn Queue>,
        positions: &[Position],
    ) -> Result<(), Failure> {
        let topic = &queue.spec().name;
        let now = entry::now_micros();
        for position in positions {
            self.entries += position.lag();
            if let Some(lost) = position.lost() {
                self.lost += u64::try_from(lost.end - lost.start).unwrap_or(0);
                self.gaps.push(format!(
                    "{topic}/{}:{}..{}",
                    position.partition, lost.start, lost.end
                ));
            }
            let written_at = async |offset: i64| -> Result<Option<i64>, Failure> {
                let found = queue
                    .entry_at(position.partition, offset)
                    .await
                    .map_err(|e| Failure::broker(e.to_string()))?;
                Ok(found
                    .and_then(Result::ok)
                    .map(|e| e.original_write_time_micros))
            };
            let Some(next) = position.committed else {
                continue;
            };
            if position.lag() > 0
                && let Some(written) = written_at(next.max(position.low)).await?
            {
                let waited = (now.saturating_sub(written)).max(0) as f64 / 1e6;
                self.seconds = self.seconds.max(waited);
            }
            if next > position.low
                && let Some(written) = written_at(next - 1).await?
            {
                self.last_applied_micros = self.last_applied_micros.max(Some(written));
            }
        }
        Ok(())
    }
}
