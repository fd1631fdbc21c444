//! Sessions on the namespaces' durable storage (their CQL keyspaces), for the calls that read
//! or change what is kept there: an entry's receipts (CancelEntry) and the staging of two-phase
//! writes (the transaction calls). One session per (shard, keyspace), made at its first use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::OnceCell;
use wal_durable::{DurableSettings, DurableStorage};
use wal_namespaces::{DurableStorageConfig, Namespace};

/// What connected, or is being connected, by (shard, keyspace).
type Sessions = HashMap<(String, String), Arc<OnceCell<Arc<DurableStorage>>>>;

#[derive(Debug, Default)]
pub struct DurableSessions {
    /// A cell per place: a slow first connection to one keyspace holds up only the calls on it.
    sessions: Mutex<Sessions>,
}

impl DurableSessions {
    /// The session on `namespace`'s durable storage, connecting it within `wait`; why not, in
    /// words, when it has none or it cannot be reached.
    pub async fn of(
        &self,
        clusters: &wal_clusters::ClusterMap,
        namespace: &Namespace,
        wait: Duration,
    ) -> Result<Arc<DurableStorage>, String> {
        let durable = namespace.durable_storage.as_ref().ok_or_else(|| {
            format!(
                "namespace '{}' has no durable_storage (no receipts, no two-phase writes)",
                namespace.name
            )
        })?;
        tokio::time::timeout(wait, self.connected(clusters, durable))
            .await
            .map_err(|_| {
                format!(
                    "keyspace '{}' did not answer within {wait:?}",
                    durable.keyspace
                )
            })?
    }

    async fn connected(
        &self,
        clusters: &wal_clusters::ClusterMap,
        durable: &DurableStorageConfig,
    ) -> Result<Arc<DurableStorage>, String> {
        let key = (
            durable.shard.clone().unwrap_or_default(),
            durable.keyspace.clone(),
        );
        let cell = {
            let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(sessions.entry(key).or_default())
        };
        let storage = cell
            .get_or_try_init(|| async {
                let shard = clusters.cql(durable.shard.as_deref()).ok_or_else(|| {
                    format!(
                        "the control plane's cluster map has no CQL shard {:?}",
                        durable.shard.as_deref().unwrap_or("(default)")
                    )
                })?;
                if shard.contact_points.is_empty() {
                    return Err(
                        "the control plane has no CQL contact points for it (--cql-nodes, or the shard's in --clusters)"
                            .to_owned(),
                    );
                }
                let settings = DurableSettings::on_shard(shard, &durable.keyspace);
                DurableStorage::connect(&settings)
                    .await
                    .map(Arc::new)
                    .map_err(|e| format!("connecting to keyspace '{}': {e}", durable.keyspace))
            })
            .await?;
        Ok(Arc::clone(storage))
    }
}
