//! `walctl txn show NAMESPACE TXN_ID`: where a two-phase write stands, read from the namespace's
//! staging tables.

use serde_json::json;
use wal_durable::DurableStorage;
use wal_namespaces::Namespace;

use super::{applied, shown_state};
use crate::Failure;
use crate::output::{Format, print_json, table, when};

pub async fn run(
    namespace: &Namespace,
    storage: &DurableStorage,
    id: &str,
    format: Format,
) -> Result<(), Failure> {
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
    let state = shown_state(namespace, &txn);
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
                applied(&txn),
                when(txn.opened_at_micros),
                txn.committed_at_micros.map(when).unwrap_or_default(),
                txn.reason.unwrap_or_default(),
            ]);
            println!("{rows}");
        }
    }
    Ok(())
}
