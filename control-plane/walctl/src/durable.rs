//! A namespace's durable storage (CQL), opened from the shell with the operator's cluster map
//! or CQL flags: what `walctl txn` and `walctl entry` read.

use wal_clusters::flags::{BrokerFlags, CqlFlags};
use wal_durable::{DurableSettings, DurableStorage};
use wal_namespaces::Namespace;

use crate::Failure;

/// The namespace `namespace` as the control plane has it (or as `file` defines it), and its
/// durable storage; `without` says what a namespace without durable storage lacks, for the
/// refusal.
pub async fn open(
    (brokers, cql): (&BrokerFlags, &CqlFlags),
    (control_plane, file): (&str, Option<&std::path::Path>),
    namespace: &str,
    without: &str,
) -> Result<(Namespace, DurableStorage), Failure> {
    let namespace = crate::namespace::named(control_plane, file, namespace).await?;
    let durable = namespace.durable_storage.as_ref().ok_or_else(|| {
        Failure::usage(format!(
            "namespace '{}' has no durable_storage, so {without}",
            namespace.name
        ))
    })?;
    let clusters = brokers
        .cluster_map(brokers.kafka(), cql)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let shard = clusters
        .cql(durable.shard.as_deref())
        .ok_or_else(|| {
            Failure::usage(format!(
                "namespace '{}' names CQL shard {:?}, which the cluster map does not have; pass --clusters (or set WAL_CLUSTERS)",
                namespace.name,
                durable.shard.as_deref().unwrap_or("(default)")
            ))
        })?;
    if shard.contact_points.is_empty() {
        return Err(Failure::usage(
            "durable storage is in CQL; pass --cql-nodes (or set WAL_CQL_NODES), or name the shard's contact points in the cluster map",
        ));
    }
    let storage = DurableStorage::connect(&DurableSettings::on_shard(shard, &durable.keyspace))
        .await
        .map_err(|e| Failure::broker(format!("keyspace '{}': {e}", durable.keyspace)))?;
    Ok((namespace, storage))
}
