//! `walctl pause`, `resume`, `pauses` and `audit`: the control plane's Operations service
//! (proto/wal/v1/operations.proto). Each change is made, authorized and audited by the control
//! plane; walctl only asks and prints.

use clap::Args;
use serde_json::{Value, json};
use wal_proto::v1::operations_client::OperationsClient;
use wal_proto::v1::{
    AuditRecord, AuditRequest, ListPausesRequest, Pause as PauseMessage, PauseRequest,
    ResumeRequest,
};

use crate::Failure;
use crate::namespace::{channel, refused};
use crate::output::{Format, print_json, table, when};

#[derive(Debug, Args)]
pub struct Pause {
    namespace: String,
    /// One destination ("default", a store's name, "region-<name>"); every destination when
    /// left out.
    destination: Option<String>,
    /// Why: shown beside the pause wherever it is listed, and in the audit.
    #[arg(long)]
    reason: String,
    /// Recorded as who paused it when the connection carries no principal.
    #[arg(long, env = "USER", default_value = "walctl")]
    operator: String,
}

#[derive(Debug, Args)]
pub struct Resume {
    namespace: String,
    /// The destination a pause named; the namespace-wide pause when left out (pauses of single
    /// destinations stay, and are listed).
    destination: Option<String>,
    #[arg(long, env = "USER", default_value = "walctl")]
    operator: String,
}

#[derive(Debug, Args)]
pub struct Pauses {
    /// Only this namespace's.
    namespace: Option<String>,
}

#[derive(Debug, Args)]
pub struct Audit {
    /// Only this namespace's.
    namespace: Option<String>,
    /// Records at most, newest first (at most 10,000).
    #[arg(long, default_value_t = 100)]
    limit: u32,
}

/// The control plane's Operations client. A DLQ read may be long (up to 10,000 entries, a
/// payload each in an export); each message is bounded by its request's limit.
pub async fn client(address: &str) -> Result<OperationsClient<tonic::transport::Channel>, Failure> {
    Ok(OperationsClient::new(channel(address).await?).max_decoding_message_size(64 << 20))
}

pub async fn pause(args: Pause, address: &str, format: Format) -> Result<(), Failure> {
    let asked = format!("pausing namespace '{}'", args.namespace);
    let response = client(address)
        .await?
        .pause(PauseRequest {
            namespace: args.namespace,
            destination: args.destination.unwrap_or_default(),
            reason: args.reason,
            operator: args.operator,
        })
        .await
        .map_err(|status| refused(&status, &asked))?
        .into_inner();
    let pause = response.pause.unwrap_or_default();
    match format {
        Format::Json => print_json(&json!({
            "changed": response.changed,
            "pause": pause_json(&pause),
        })),
        Format::Table => {
            let what = subject(&pause);
            if response.changed {
                println!("paused {what}: consumers hold its entries until it is resumed");
            } else {
                println!(
                    "{what} was paused already, by {} at {}: {}",
                    pause.paused_by,
                    when(pause.paused_at_micros),
                    pause.reason
                );
            }
        }
    }
    Ok(())
}

pub async fn resume(args: Resume, address: &str, format: Format) -> Result<(), Failure> {
    let asked = format!("resuming namespace '{}'", args.namespace);
    let what = match &args.destination {
        Some(destination) => format!("{}/{destination}", args.namespace),
        None => args.namespace.clone(),
    };
    let response = client(address)
        .await?
        .resume(ResumeRequest {
            namespace: args.namespace,
            destination: args.destination.unwrap_or_default(),
            operator: args.operator,
        })
        .await
        .map_err(|status| refused(&status, &asked))?
        .into_inner();
    match format {
        Format::Json => print_json(&json!({
            "changed": response.changed,
            "ended": response.ended.as_ref().map(pause_json),
            "still_paused": response.still_paused.iter().map(pause_json).collect::<Vec<_>>(),
        })),
        Format::Table => {
            if response.changed {
                println!("resumed {what}: its held entries are delivered");
            } else {
                println!("{what} was not paused; nothing changed");
            }
            if !response.still_paused.is_empty() {
                println!("still paused:");
                print_pauses(&response.still_paused);
            }
        }
    }
    Ok(())
}

pub async fn pauses(args: Pauses, address: &str, format: Format) -> Result<(), Failure> {
    let response = client(address)
        .await?
        .list_pauses(ListPausesRequest {
            namespace: args.namespace.unwrap_or_default(),
        })
        .await
        .map_err(|status| refused(&status, "listing the pauses"))?
        .into_inner();
    match format {
        Format::Json => print_json(&json!(
            response.pauses.iter().map(pause_json).collect::<Vec<_>>()
        )),
        Format::Table if response.pauses.is_empty() => println!("nothing is paused"),
        Format::Table => print_pauses(&response.pauses),
    }
    Ok(())
}

pub async fn audit(args: Audit, address: &str, format: Format) -> Result<(), Failure> {
    let response = client(address)
        .await?
        .audit(AuditRequest {
            namespace: args.namespace.unwrap_or_default(),
            limit: args.limit,
        })
        .await
        .map_err(|status| refused(&status, "reading the audit"))?
        .into_inner();
    match format {
        Format::Json => print_json(&json!(
            response.records.iter().map(record_json).collect::<Vec<_>>()
        )),
        Format::Table => {
            let mut out = table(&["AT", "ACTOR", "VERB", "WHAT", "DETAIL", "RESULT"]);
            for record in &response.records {
                let what = match record.subject.as_str() {
                    "" => record.namespace.clone(),
                    subject => format!("{}/{subject}", record.namespace),
                };
                out.add_row([
                    when(record.at_micros),
                    record.actor.clone(),
                    record.verb.clone(),
                    what,
                    record.detail.clone(),
                    record.result.clone(),
                ]);
            }
            println!("{out}");
        }
    }
    Ok(())
}

/// `namespace` (every destination) or `namespace/destination`.
fn subject(pause: &PauseMessage) -> String {
    match pause.destination.as_str() {
        "" => format!("{} (every destination)", pause.namespace),
        destination => format!("{}/{destination}", pause.namespace),
    }
}

fn print_pauses(pauses: &[PauseMessage]) {
    let mut out = table(&["PAUSED", "BY", "SINCE", "REASON"]);
    for pause in pauses {
        out.add_row([
            subject(pause),
            pause.paused_by.clone(),
            when(pause.paused_at_micros),
            pause.reason.clone(),
        ]);
    }
    println!("{out}");
}

fn pause_json(pause: &PauseMessage) -> Value {
    json!({
        "namespace": pause.namespace,
        "destination": pause.destination,
        "paused_by": pause.paused_by,
        "paused_at": when(pause.paused_at_micros),
        "reason": pause.reason,
    })
}

fn record_json(record: &AuditRecord) -> Value {
    json!({
        "id": record.id,
        "at": when(record.at_micros),
        "actor": record.actor,
        "verb": record.verb,
        "namespace": record.namespace,
        "subject": record.subject,
        "detail": record.detail,
        "result": record.result,
    })
}
