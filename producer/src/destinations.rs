//! Waiting for a write's destinations: once its entry is stored, the caller may ask to hear
//! which destinations applied it (`await_destinations_millis`). Each destination's reader
//! records what it did in the namespace's durable storage (`receipts`); this reads them until
//! every destination has answered or the wait is over.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;
use wal_durable::DurableStorage;
use wal_namespaces::Namespace;
use wal_proto::v1::{DestinationOutcome, DestinationState};

/// Writes that may wait for their destinations at once, producer-wide. Past it a write's
/// receipts are read once and its answer sent: waiting writes hold a task and read durable
/// storage every [`LONGEST_PAUSE`] at most, and that is bounded here.
pub const MAX_WAITING: usize = 4096;
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const LONGEST_PAUSE: Duration = Duration::from_millis(200);
/// The longest one read of the receipts may take (and never past the caller's deadline): a
/// slow cluster leaves destinations as the last read found them, it does not hold the answer.
/// 500 ms was too short on a loaded 2-core machine, where reads of a few seconds came back.
const LOOK_TIMEOUT: Duration = Duration::from_secs(2);

/// The writes waiting for their destinations.
#[derive(Debug, Clone)]
pub struct Waiting(Arc<Semaphore>);

impl Default for Waiting {
    fn default() -> Self {
        Self(Arc::new(Semaphore::new(MAX_WAITING)))
    }
}

impl Waiting {
    /// What each destination of `namespace` (as a consumer of region `local` delivers it) had
    /// done with entry `entry_id` when all had answered or `wait` was over.
    pub async fn outcomes(
        &self,
        durable: &DurableStorage,
        namespace: &Namespace,
        local: &str,
        entry_id: &str,
        wait: Duration,
    ) -> Vec<DestinationOutcome> {
        let names = namespace.destination_names(local);
        let until = Instant::now() + wait;
        // Without a place among the waiting writes, one look.
        let _place = self.0.try_acquire().ok();
        let looks_again = _place.is_some();
        let mut pause = FIRST_PAUSE;
        // What the last read that answered found: a read cut short by the deadline (or failed)
        // does not undo what an earlier one saw.
        let mut outcomes = wal_durable::destination_outcomes(names.iter().cloned(), &[]);
        loop {
            if let Some(read) = look(durable, &namespace.name, entry_id, &names, until).await {
                outcomes = read;
            }
            let pending = outcomes
                .iter()
                .any(|o| o.state() == DestinationState::Pending);
            if !pending || !looks_again || Instant::now() + pause >= until {
                return outcomes;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }
}

/// Each destination of `names` with what its receipt says, or pending; None when the read
/// failed or did not answer in time. The read ends by `until` too: a slow cluster must not
/// carry the answer past the caller's deadline.
async fn look(
    durable: &DurableStorage,
    namespace: &str,
    entry_id: &str,
    names: &[String],
    until: Instant,
) -> Option<Vec<DestinationOutcome>> {
    let by = until.min(Instant::now() + LOOK_TIMEOUT);
    let read = tokio::time::timeout_at(by, durable.receipts(namespace, entry_id)).await;
    let receipts = match read {
        Ok(Ok(receipts)) => receipts,
        Ok(Err(error)) => {
            tracing::debug!(%error, namespace, entry_id, "reading an entry's receipts failed");
            return None;
        }
        Err(_) => {
            tracing::debug!(namespace, entry_id, "reading an entry's receipts timed out");
            return None;
        }
    };
    Some(wal_durable::destination_outcomes(
        names.iter().cloned(),
        &receipts,
    ))
}

/// The call's own deadline (its `grpc-timeout`), when it sent one.
pub fn deadline_of(metadata: &tonic::metadata::MetadataMap) -> Option<Duration> {
    let text = metadata.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = text.split_at(text.len().checked_sub(1)?);
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.saturating_mul(3600)),
        "M" => Duration::from_secs(amount.saturating_mul(60)),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_deadline_is_read_in_every_unit_grpc_has() {
        let mut metadata = tonic::metadata::MetadataMap::new();
        assert_eq!(deadline_of(&metadata), None);
        for (text, expected) in [
            ("2S", Duration::from_secs(2)),
            ("1500m", Duration::from_millis(1500)),
            ("1M", Duration::from_secs(60)),
            ("7u", Duration::from_micros(7)),
        ] {
            metadata.insert(
                "grpc-timeout",
                text.parse().unwrap_or_else(|_| unreachable!()),
            );
            assert_eq!(deadline_of(&metadata), Some(expected), "{text}");
        }
        metadata.insert(
            "grpc-timeout",
            "soon".parse().unwrap_or_else(|_| unreachable!()),
        );
        assert_eq!(deadline_of(&metadata), None);
    }
}
