//! What each destination of a namespace did with one entry, from the receipts its readers
//! recorded in the namespace's durable storage: how a cancel learns it came too late. The
//! control plane keeps one CQL session per (shard, keyspace) it was asked about.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use wal_durable::{DurableSettings, DurableStorage};
use wal_namespaces::Namespace;
use wal_proto::v1::DestinationOutcome;

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

#[derive(Debug, Default)]
pub struct ReceiptReader {
    sessions: Mutex<HashMap<(String, String), Arc<DurableStorage>>>,
}

impl ReceiptReader {
    /// Each destination of `namespace` and what it did with entry `id`, by its receipts; a
    /// replicated namespace's destinations are the regions other than `region`.
    pub async fn delivery(
        &self,
        (clusters, region): (&wal_clusters::ClusterMap, &str),
        namespace: &Namespace,
        id: &str,
    ) -> Delivery {
        let Some(durable) = namespace.durable_storage.as_ref() else {
            return Err(format!(
                "namespace '{}' has no durable_storage, so its destinations record no receipts",
                namespace.name
            ));
        };
        let read = async {
            let storage = self.storage(clusters, durable).await?;
            storage
                .receipts(&namespace.name, id)
                .await
                .map_err(|e| format!("reading its receipts failed: {e}"))
        };
        let receipts = tokio::time::timeout(READ_WAIT, read)
            .await
            .map_err(|_| format!("reading its receipts took longer than {READ_WAIT:?}"))??;
        if receipts.is_empty() && !durable.receipts {
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

    async fn storage(
        &self,
        clusters: &wal_clusters::ClusterMap,
        durable: &wal_namespaces::DurableStorageConfig,
    ) -> Result<Arc<DurableStorage>, String> {
        let shard_name = durable.shard.clone().unwrap_or_default();
        let key = (shard_name, durable.keyspace.clone());
        let mut sessions = self.sessions.lock().await;
        if let Some(storage) = sessions.get(&key) {
            return Ok(Arc::clone(storage));
        }
        let shard = clusters.cql(durable.shard.as_deref()).ok_or_else(|| {
            format!(
                "the control plane's cluster map has no CQL shard {:?}",
                durable.shard.as_deref().unwrap_or("(default)")
            )
        })?;
        if shard.contact_points.is_empty() {
            return Err(
                "the control plane has no CQL contact points to read receipts with (--cql-nodes, or the shard's in --clusters)"
                    .to_owned(),
            );
        }
        let settings = DurableSettings::on_shard(shard, &durable.keyspace);
        let storage = DurableStorage::connect(&settings)
            .await
            .map_err(|e| format!("connecting to keyspace '{}': {e}", durable.keyspace))?;
        let storage = Arc::new(storage);
        sessions.insert(key, Arc::clone(&storage));
        Ok(storage)
    }
}
