//! `walctl txn abort NAMESPACE TXN_ID --reason R`: the control plane's AbortTransaction, which
//! authorizes (the namespace's admin grant), aborts and audits it; walctl only asks and prints.

use serde_json::json;
use wal_proto::v1::TransactionAbortRequest;

use super::reason;
use crate::Failure;
use crate::namespace::refused;
use crate::operations::client;
use crate::output::{Format, print_json, when};

#[derive(Debug, clap::Args)]
pub struct Abort {
    namespace: String,
    transaction_id: String,
    /// Why: kept on an open transaction it aborts (`txn show` prints it), and in the audit.
    #[arg(long)]
    reason: String,
    /// Recorded as who aborted it when the connection carries no principal.
    #[arg(long, env = "USER", default_value = "walctl")]
    operator: String,
}

pub async fn run(args: Abort, address: &str, format: Format) -> Result<(), Failure> {
    let asked = format!(
        "aborting transaction '{}' of namespace '{}'",
        args.transaction_id, args.namespace
    );
    let response = client(address)
        .await?
        .abort_transaction(TransactionAbortRequest {
            namespace: args.namespace,
            transaction_id: args.transaction_id,
            reason: args.reason,
            operator: args.operator,
        })
        .await
        .map_err(|status| refused(&status, &asked))?
        .into_inner();
    match format {
        Format::Json => print_json(&json!({
            "changed": response.changed,
            "summary": response.summary,
            "transaction": response.transaction.as_ref().map(|txn| json!({
                "transaction_id": txn.transaction_id,
                "state": txn.state,
                "opened_at": when(txn.opened_at_micros),
                "reason": reason(txn),
            })),
        })),
        Format::Table => println!("{}", response.summary),
    }
    Ok(())
}
