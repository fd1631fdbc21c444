//! `walctl txn show NAMESPACE TXN_ID`: where a two-phase write stands, read from the namespace's
//! staging tables.

use serde_json::json;
use wal_core::durable::{DurableSettings, DurableStorage, TxnState, transaction_lifetime};
use wal_core::process::{BrokerFlags, CqlFlags};

use crate::Failure;
use crate::output::{Format, print_json, table, when};

pub async fn run(
    (brokers, cql): (&BrokerFlags, &CqlFlags),
    control_plane: &str,
    namespace: &str,
    id: &str,
    format: Format,
) -> Result<(), Failure> {
    let namespace = crate::namespace::current(control_plane, namespace).await?;
    let durable = namespace.durable_storage.as_ref().ok_or_else(|| {
        Failure::usage(format!(
            "namespace '{}' has no durable_storage, so it has no two-phase writes",
            namespace.name
        ))
    })?;
    let clusters = brokers
        .cluster_map(brokers.kafka(), cql.cql_nodes.clone())
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
            "the staging tables are in CQL; pass --cql-nodes (or set WAL_CQL_NODES), or name the shard's contact points in the cluster map",
        ));
    }
    let storage = DurableStorage::connect(&DurableSettings::on_shard(shard, &durable.keyspace))
        .await
        .map_err(|e| Failure::broker(format!("keyspace '{}': {e}", durable.keyspace)))?;
    let failed = |e: wal_core::durable::DurableError| Failure::broker(e.to_string());
    let txn = storage
        .transaction(&namespace.name, id)
        .await
        .map_err(failed)?
        .ok_or_else(|| {
            Failure::not_found(format!(
                "transaction '{id}' of namespace '{}': no record (never staged, or past its TTL)",
                namespace.name
            ))
        })?;
    let staged = storage
        .staged_count(&namespace.name, id)
        .await
        .map_err(failed)?;
    let expired = txn.state == TxnState::Open
        && wal_core::entry::now_micros().saturating_sub(txn.opened_at_micros)
            > transaction_lifetime(&namespace).as_micros() as i64;
    let state = if expired { "expired" } else { txn.state.name() };
    let applied = match txn.item_count {
        Some(count) => format!("{} of {count}", txn.applied_through),
        None => "-".to_owned(),
    };
    match format {
        Format::Json => print_json(&json!({
            "namespace": namespace.name,
            "transaction_id": id,
            "state": state,
            "staged_items": staged,
            "item_count": txn.item_count,
            "applied_through": txn.applied_through,
            "opened_at": when(txn.opened_at_micros),
            "committed_at": txn.committed_at_micros.map(when),
            "reason": txn.reason,
        })),
        Format::Table => {
            let mut rows = table(&[
                "state",
                "staged",
                "applied",
                "opened",
                "committed",
                "reason",
            ]);
            rows.add_row(vec![
                state.to_owned(),
                staged.to_string(),
                applied,
                when(txn.opened_at_micros),
                txn.committed_at_micros.map(when).unwrap_or_default(),
                txn.reason.unwrap_or_default(),
            ]);
            println!("{rows}");
        }
    }
    Ok(())
}
