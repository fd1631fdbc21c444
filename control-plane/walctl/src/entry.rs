//! `walctl entry NAMESPACE ENTRY_ID`: what each destination of a namespace did with one entry,
//! from the receipts its readers recorded (for every entry of a namespace with
//! `durable_storage.receipts`, and for a write that awaited its destinations).

use serde_json::json;
use wal_clusters::flags::{BrokerFlags, CqlFlags};
use wal_durable::Outcome;

use crate::Failure;
use crate::output::{Format, print_json, table, when};

#[derive(Debug, clap::Args)]
pub struct Entry {
    #[command(flatten)]
    brokers: BrokerFlags,
    #[command(flatten)]
    cql: CqlFlags,
    namespace: String,
    entry_id: String,
    /// The region the consumers run in (their --region), for a replicated namespace's regions.
    #[arg(long, env = "WAL_REGION", default_value = "local")]
    region: String,
}

pub async fn run(command: Entry, control_plane: &str, format: Format) -> Result<(), Failure> {
    let without = "its destinations record no receipts";
    let flags = (&command.brokers, &command.cql);
    let (namespace, storage) =
        crate::durable::open(flags, (control_plane, None), &command.namespace, without).await?;
    let receipts = storage
        .receipts(&namespace.name, &command.entry_id)
        .await
        .map_err(|e| Failure::broker(format!("reading the receipts: {e}")))?;
    let rows: Vec<(String, &'static str, Option<i64>)> = namespace
        .destination_names(&command.region)
        .into_iter()
        .map(
            |name| match receipts.iter().find(|r| r.destination == name) {
                Some(receipt) => {
                    let state = match receipt.outcome {
                        Outcome::Applied => "applied",
                        Outcome::DeadLettered => "dead_lettered",
                    };
                    (name, state, Some(receipt.at_millis.saturating_mul(1000)))
                }
                None => (name, "pending", None),
            },
        )
        .collect();
    match format {
        Format::Json => print_json(&json!({
            "namespace": namespace.name,
            "entry_id": command.entry_id,
            "destinations": rows
                .iter()
                .map(|(name, state, at)| json!({"destination": name, "state": state, "at": at.map(when)}))
                .collect::<Vec<_>>(),
        })),
        Format::Table => {
            let mut out = table(&["DESTINATION", "STATE", "AT"]);
            for (name, state, at) in &rows {
                out.add_row(vec![
                    name.clone(),
                    (*state).to_owned(),
                    at.map_or("-".to_owned(), when),
                ]);
            }
            println!("{out}");
        }
    }
    Ok(())
}
