//! How far one reader of a namespace's queues trails, read from the brokers without joining its
//! group: a row of ListDestinations, here or read by `walctl ... --direct` from the operator's
//! machine.

use std::sync::Arc;

use wal_clusters::Backends;
use wal_namespaces::{Backend, Namespace};
use wal_queue::entry;
use wal_queue::{Position, Queue, QueueError, QueueSpec, Reader};

/// What stopped a lag from being read.
#[derive(Debug, thiserror::Error)]
pub enum LagError {
    #[error("no client for the {0:?} queues of the namespace")]
    NoClient(Backend),
    #[error(transparent)]
    Queue(#[from] QueueError),
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
    ) -> Result<Self, LagError> {
        let mut lag = Self::default();
        for config in &namespace.queues {
            let mut spec = QueueSpec::of(namespace, config);
            if let Some(reader) = reader {
                spec = spec.read_by(reader.clone());
            }
            let queue = backends
                .queue(config.backend, spec)
                .ok_or(LagError::NoClient(config.backend))?;
            let positions = queue.positions().await?.unwrap_or_default();
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

    /// Adds one queue's partitions: lag, gaps, the oldest entry waiting and the newest applied.
    async fn read_queue(
        &mut self,
        queue: &Arc<dyn Queue>,
        positions: &[Position],
    ) -> Result<(), LagError> {
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
            // An entry the reader cannot decode tells no time; it still counts in the lag.
            let written_at = async |offset: i64| -> Result<Option<i64>, LagError> {
                let found = queue.entry_at(position.partition, offset).await?;
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
