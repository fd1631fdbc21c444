//! `walctl txn list NAMESPACE --state open|applying|dead-lettered`: the transactions in one
//! state, as the control plane's ListTransactions reads them from the staging's index by state
//! (or, with --direct, as walctl reads it the same way: `wal_durable`'s `live_in`).

use serde_json::json;
use wal_durable::DurableStorage;
use wal_namespaces::Namespace;
use wal_proto::v1::{ListTransactionsRequest, Transaction, TransactionListing};

use super::{applied, reason};
use crate::Failure;
use crate::namespace::refused;
use crate::operations::client;
use crate::output::{Format, print_json, table, when};

/// The states `list` takes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Listed {
    Open,
    Applying,
    #[value(alias = "dead_lettered")]
    DeadLettered,
}

impl Listed {
    fn listing(self) -> TransactionListing {
        match self {
            Listed::Open => TransactionListing::Open,
            Listed::Applying => TransactionListing::Applying,
            Listed::DeadLettered => TransactionListing::DeadLettered,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Listed::Open => "open",
            Listed::Applying => "applying",
            Listed::DeadLettered => "dead_lettered",
        }
    }
}

/// The listing, from the control plane.
pub async fn asked(
    address: &str,
    namespace: &str,
    state: Listed,
    limit: u32,
) -> Result<Vec<Transaction>, Failure> {
    let asked = format!(
        "listing the {} transactions of namespace '{namespace}'",
        state.name()
    );
    let request = ListTransactionsRequest {
        namespace: namespace.to_owned(),
        listing: state.listing().into(),
        limit,
    };
    Ok(client(address)
        .await?
        .list_transactions(request)
        .await
        .map_err(|status| refused(&status, &asked))?
        .into_inner()
        .transactions)
}

/// The listing, read from the staging tables here.
pub async fn direct(
    namespace: &Namespace,
    storage: &DurableStorage,
    state: Listed,
    limit: u32,
) -> Result<Vec<Transaction>, Failure> {
    let listings = wal_durable::listings_of(state.listing()).unwrap_or_default();
    let live = storage
        .live_in(&namespace.name, listings, limit as usize)
        .await
        .map_err(|e| Failure::broker(e.to_string()))?;
    Ok(live
        .iter()
        .map(|(id, txn)| wal_durable::shown(namespace, id, txn, None))
        .collect())
}

pub fn print(namespace: &str, state: Listed, listed: &[Transaction], format: Format) {
    match format {
        Format::Json => print_json(&json!({
            "namespace": namespace,
            "state": state.name(),
            "transactions": listed.iter().map(|txn| json!({
                "transaction_id": txn.transaction_id,
                "state": txn.state,
                "item_count": txn.item_count,
                "applied_through": txn.applied_through,
                "opened_at": when(txn.opened_at_micros),
                "committed_at": txn.committed_at_micros.map(when),
                "reason": reason(txn),
            })).collect::<Vec<_>>(),
        })),
        Format::Table => {
            let mut rows = table(&[
                "transaction",
                "state",
                "applied",
                "opened",
                "committed",
                "reason",
            ]);
            for txn in listed {
                rows.add_row(vec![
                    txn.transaction_id.clone(),
                    txn.state.clone(),
                    applied(txn),
                    when(txn.opened_at_micros),
                    txn.committed_at_micros.map(when).unwrap_or_default(),
                    txn.reason.clone(),
                ]);
            }
            println!("{rows}");
        }
    }
}
