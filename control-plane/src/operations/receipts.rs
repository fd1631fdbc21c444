//! What each destination of a namespace did with one entry, from the receipts its readers
//! recorded in the namespace's durable storage: how a cancel learns it came too late.

use std::time::Duration;

use wal_namespaces::Namespace;
use wal_proto::v1::DestinationOutcome;

use super::durable_sessions::DurableSessions;

/// The longest a cancel waits for a cluster to connect and answer: past it, delivery is unknown
/// and the cancel still stands.
const READ_WAIT: Duration = Duration::from_secs(5);

/// Each destination's state, or why it is not known.
pub type Delivery = Result<Receipts, String>;

/// Each destination's state by the receipts found; `any` is false when none was.
#[derive(Debug, Clone, Default)]
pub struct Receipts {
    pub destinations: Vec<DestinationOutcome>,
    pub any: bool,
}

impl DurableSessions {
    /// Each destination of `namespace` and what it did with entry `id`, by its receipts; a
    /// replicated namespace's destinations are the regions other than `region`.
    pub async fn delivery(
        &self,
        (clusters, region): (&wal_clusters::ClusterMap, &str),
        namespace: &Namespace,
        id: &str,
    ) -> Delivery {
        let started = tokio::time::Instant::now();
        let storage = self.of(clusters, namespace, READ_WAIT).await?;
        let left = READ_WAIT.saturating_sub(started.elapsed());
        let receipts = tokio::time::timeout(left, storage.receipts(&namespace.name, id))
            .await
            .map_err(|_| format!("reading its receipts took longer than {READ_WAIT:?}"))?
            .map_err(|e| format!("reading its receipts failed: {e}"))?;
        let receipts_on = namespace
            .durable_storage
            .as_ref()
            .is_some_and(|d| d.receipts);
        if receipts.is_empty() && !receipts_on {
            // Without `receipts`, only writes that awaited their destinations have them: no
            // receipt says nothing about any other write.
            return Err(format!(
                "namespace '{}' records receipts only for writes that awaited their destinations (its durable_storage.receipts is off)",
                namespace.name
            ));
        }
        let names = namespace.destination_names(region);
        Ok(Receipts {
            destinations: wal_durable::destination_outcomes(names, &receipts),
            any: !receipts.is_empty(),
        })
    }
}
