//! `walctl txn show NAMESPACE TXN_ID`: where a two-phase write stands, as the control plane's
//! ShowTransaction reads it from the namespace's staging tables (or, with --direct, as walctl
//! reads them).

use serde_json::json;
use wal_durable::DurableStorage;
use wal_namespaces::Namespace;
use wal_proto::v1::{ShowTransactionRequest, Transaction};

use super::{applied, reason};
use crate::Failure;
use crate::namespace::refused;
use crate::operations::client;
use crate::output::{Format, print_json, table, when};

/// The transaction, from the control plane.
pub async fn asked(address: &str, namespace: &str, id: &str) -> Result<Transaction, Failure> {
    let asked = format!("showing transaction '{id}' of namespace '{namespace}'");
    let request = ShowTransactionRequest {
        namespace: namespace.to_owned(),
        transaction_id: id.to_owned(),
    };
    Ok(client(address)
        .await?
        .show_transaction(request)
        .await
        .map_err(|status| refused(&status, &asked))?
        .into_inner())
}

/// The transaction, read from the staging tables here.
pub async fn direct(
    namespace: &Namespace,
    storage: &DurableStorage,
    id: &str,
) -> Result<Transaction, Failure> {
    let failed = |e: wal_durable::DurableError| Failure::broker(e.to_string());
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
    Ok(wal_durable::shown(namespace, id, &txn, Some(staged)))
}

pub fn print(txn: &Transaction, format: Format) {
    match format {
        Format::Json => print_json(&json!({
            "namespace": txn.namespace,
            "transaction_id": txn.transaction_id,
            "state": txn.state,
            "staged_items": txn.staged_items,
            "item_count": txn.item_count,
            "applied_through": txn.applied_through,
            "opened_at": when(txn.opened_at_micros),
            "committed_at": txn.committed_at_micros.map(when),
            "reason": reason(txn),
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
                txn.state.clone(),
                txn.staged_items
                    .map_or_else(|| "-".to_owned(), |n| n.to_string()),
                applied(txn),
                when(txn.opened_at_micros),
                txn.committed_at_micros.map(when).unwrap_or_default(),
                txn.reason.clone(),
            ]);
            println!("{rows}");
        }
    }
}
