//! `walctl cancel` and `walctl cancellations`: cancelling one entry by its id through the
//! control plane's Operations service (proto/wal/v1/operations.proto, CancelEntry), which
//! authorizes, stores and audits it; walctl only asks and prints.

use clap::Args;
use serde_json::{Value, json};
use wal_proto::v1::{CancelEntryRequest, Cancellation, DestinationState, ListCancellationsRequest};

use crate::Failure;
use crate::namespace::refused;
use crate::operations::client;
use crate::output::{Format, print_json, table, when};

#[derive(Debug, Args)]
pub struct Cancel {
    namespace: String,
    /// The entry's id: the id WriteToLog answered with, or the idempotency key the write gave.
    entry_id: String,
    /// Why: shown beside the cancellation, and in the audit.
    #[arg(long)]
    reason: String,
    /// Recorded as who cancelled it when the connection carries no principal.
    #[arg(long, env = "USER", default_value = "walctl")]
    operator: String,
}

#[derive(Debug, Args)]
pub struct Cancellations {
    /// Only this namespace's.
    namespace: Option<String>,
}

pub async fn cancel(args: Cancel, address: &str, format: Format) -> Result<(), Failure> {
    let asked = format!(
        "cancelling entry '{}' of namespace '{}'",
        args.entry_id, args.namespace
    );
    let response = client(address)
        .await?
        .cancel_entry(CancelEntryRequest {
            namespace: args.namespace,
            entry_id: args.entry_id,
            reason: args.reason,
            operator: args.operator,
        })
        .await
        .map_err(|status| refused(&status, &asked))?
        .into_inner();
    let cancellation = response.cancellation.unwrap_or_default();
    match format {
        Format::Json => print_json(&json!({
            "changed": response.changed,
            "cancellation": cancellation_json(&cancellation),
            "delivery_known": response.delivery_known,
            "destinations": response.destinations.iter().map(|d| json!({
                "destination": d.destination,
                "state": state_name(d.state()),
            })).collect::<Vec<_>>(),
            "summary": response.summary,
        })),
        Format::Table => {
            if !response.changed {
                println!(
                    "was cancelled already, by {} at {}: {}",
                    cancellation.cancelled_by,
                    when(cancellation.cancelled_at_micros),
                    cancellation.reason
                );
            }
            println!("{}", response.summary);
        }
    }
    Ok(())
}

pub async fn cancellations(
    args: Cancellations,
    address: &str,
    format: Format,
) -> Result<(), Failure> {
    let response = client(address)
        .await?
        .list_cancellations(ListCancellationsRequest {
            namespace: args.namespace.unwrap_or_default(),
        })
        .await
        .map_err(|status| refused(&status, "listing the cancellations"))?
        .into_inner();
    match format {
        Format::Json => print_json(&json!(
            response
                .cancellations
                .iter()
                .map(cancellation_json)
                .collect::<Vec<_>>()
        )),
        Format::Table if response.cancellations.is_empty() => {
            println!("no entry is cancelled");
        }
        Format::Table => {
            let mut out = table(&["NAMESPACE", "ENTRY", "BY", "AT", "REASON", "UNTIL"]);
            for c in &response.cancellations {
                out.add_row([
                    c.namespace.clone(),
                    c.entry_id.clone(),
                    c.cancelled_by.clone(),
                    when(c.cancelled_at_micros),
                    c.reason.clone(),
                    when(c.expires_at_micros),
                ]);
            }
            println!("{out}");
        }
    }
    Ok(())
}

fn state_name(state: DestinationState) -> &'static str {
    match state {
        DestinationState::Applied => "applied",
        DestinationState::DeadLettered => "dead_lettered",
        DestinationState::Pending | DestinationState::Unspecified => "pending",
    }
}

fn cancellation_json(c: &Cancellation) -> Value {
    json!({
        "namespace": c.namespace,
        "entry_id": c.entry_id,
        "cancelled_by": c.cancelled_by,
        "cancelled_at": when(c.cancelled_at_micros),
        "reason": c.reason,
        "expires_at": when(c.expires_at_micros),
    })
}
