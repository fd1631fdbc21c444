//! `walctl txn list NAMESPACE --state open|applying|dead-lettered`: the transactions in one
//! state, from the staging's index by state. Each listed transaction's own row is read, and one
//! that has moved on since its index entry was written is left out (reading on, so up to
//! `--limit` live ones are shown).

use futures::StreamExt as _;
use serde_json::json;
use wal_durable::{DurableStorage, Listing, Txn};
use wal_namespaces::Namespace;

use super::{applied, shown_state};
use crate::Failure;
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
    /// The index's listings it reads: applying is committed and not yet applied, whether or
    /// not the marker was acknowledged yet.
    fn listings(self) -> &'static [Listing] {
        match self {
            Listed::Open => &[Listing::Open],
            Listed::Applying => &[Listing::Committing, Listing::Applying],
            Listed::DeadLettered => &[Listing::DeadLettered],
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

pub async fn run(
    namespace: &Namespace,
    storage: &DurableStorage,
    state: Listed,
    limit: u32,
    format: Format,
) -> Result<(), Failure> {
    let listings = state.listings();
    let failed = |e: wal_durable::DurableError| Failure::broker(e.to_string());
    let mut streams = Vec::with_capacity(listings.len());
    for listing in listings {
        streams.push(
            storage
                .listed(&namespace.name, *listing)
                .await
                .map_err(failed)?
                .boxed(),
        );
    }
    let mut ids = futures::stream::iter(streams).flatten();
    // Read on past stale entries (a transaction that has moved on since its entry was
    // written) until `limit` live ones are found.
    let mut listed: Vec<(String, Txn)> = Vec::new();
    // An id can be in two listings for a moment (a move writes the new entry first).
    let mut seen = std::collections::HashSet::new();
    while listed.len() < limit as usize {
        let Some(id) = ids.next().await else {
            break;
        };
        let id = id.map_err(failed)?;
        if !seen.insert(id.clone()) {
            continue;
        }
        let txn = storage
            .transaction(&namespace.name, &id)
            .await
            .map_err(failed)?;
        let live = |t: &Txn| Listing::of(t.state).is_some_and(|l| listings.contains(&l));
        if let Some(txn) = txn.filter(live) {
            listed.push((id, txn));
        }
    }
    match format {
        Format::Json => print_json(&json!({
            "namespace": namespace.name,
            "state": state.name(),
            "transactions": listed.iter().map(|(id, txn)| json!({
                "transaction_id": id,
                "state": shown_state(namespace, txn),
                "item_count": txn.item_count,
                "applied_through": txn.applied_through,
                "opened_at": when(txn.opened_at_micros),
                "committed_at": txn.committed_at_micros.map(when),
                "reason": txn.reason,
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
            for (id, txn) in &listed {
                rows.add_row(vec![
                    id.clone(),
                    shown_state(namespace, txn).to_owned(),
                    applied(txn),
                    when(txn.opened_at_micros),
                    txn.committed_at_micros.map(when).unwrap_or_default(),
                    txn.reason.clone().unwrap_or_default(),
                ]);
            }
            println!("{rows}");
        }
    }
    Ok(())
}
