//! `walctl txn write NAMESPACE TXN_ID --items FILE`: a JSON array of items, each
//! `{"target": {"kind": ..., "settings": {...}}, "payload": ...}` (target optional: the
//! namespace's default; a payload that is not a JSON string is sent as its JSON text), staged in
//! array order as sequences 0, 1, ... and committed. Up to the per-call limit in one
//! WriteTransaction; more, in AppendItems calls of that size, then CommitTransaction.

use std::io::Read as _;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};
use wal_proto::v1::transactions_client::TransactionsClient;
use wal_proto::v1::{
    AppendItemsRequest, CommitTransactionRequest, Target, TransactionItem, WriteTransactionRequest,
};

use crate::Failure;
use crate::output::{self, Format};
use crate::producer::ProducerFlags;

/// Items per call: the producer's per-call limit.
const PER_CALL: usize = 1000;

#[derive(Debug, clap::Args)]
pub struct TxnWrite {
    namespace: String,
    /// The transaction's id, its idempotency key: writing it again is safe.
    transaction_id: String,
    /// The items: a JSON array file, or - for standard input.
    #[arg(long)]
    items: PathBuf,
    #[command(flatten)]
    producer: ProducerFlags,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemFile {
    #[serde(default)]
    target: Option<TargetFile>,
    payload: Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetFile {
    kind: String,
    #[serde(default)]
    settings: Value,
}

fn read_items(path: &PathBuf) -> Result<Vec<TransactionItem>, Failure> {
    let text = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::usage(format!("reading the items from standard input: {e}")))?;
        text
    } else {
        std::fs::read_to_string(path).map_err(|e| {
            Failure::usage(format!(
                "cannot read the items file {}: {e}",
                path.display()
            ))
        })?
    };
    let items: Vec<ItemFile> = serde_json::from_str(&text).map_err(|e| {
        Failure::usage(format!(
            "{}: {e}; expected a JSON array of {{\"target\": {{\"kind\", \"settings\"}}, \"payload\"}}",
            path.display()
        ))
    })?;
    if items.is_empty() {
        return Err(Failure::usage(format!(
            "{}: no items; a transaction has at least one",
            path.display()
        )));
    }
    Ok(items
        .into_iter()
        .enumerate()
        .map(|(at, item)| TransactionItem {
            sequence: at as u64,
            target: item.target.map(|t| Target {
                kind: t.kind,
                settings_json: t.settings.to_string(),
            }),
            payload: match item.payload {
                Value::String(text) => text.into_bytes(),
                other => other.to_string().into_bytes(),
            },
        })
        .collect())
}

pub async fn run(write: TxnWrite, format: Format) -> Result<(), Failure> {
    let items = read_items(&write.items)?;
    let count = items.len() as u64;
    let mut client = TransactionsClient::new(write.producer.connect().await?);
    let (namespace, id) = (write.namespace.clone(), write.transaction_id.clone());
    let refused = |s: tonic::Status| write.producer.refused(&s, "transaction refused");
    let response = if items.len() <= PER_CALL {
        client
            .write_transaction(WriteTransactionRequest {
                namespace: namespace.clone(),
                transaction_id: id.clone(),
                items,
            })
            .await
            .map_err(refused)?
    } else {
        for chunk in items.chunks(PER_CALL) {
            client
                .append_items(AppendItemsRequest {
                    namespace: namespace.clone(),
                    transaction_id: id.clone(),
                    items: chunk.to_vec(),
                })
                .await
                .map_err(refused)?;
        }
        client
            .commit_transaction(CommitTransactionRequest {
                namespace: namespace.clone(),
                transaction_id: id.clone(),
                item_count: count,
            })
            .await
            .map_err(refused)?
    }
    .into_inner();
    let durable = response.durable();
    let word = crate::write::durable_word(durable);
    match format {
        Format::Json => output::print_json(&json!({
            "namespace": namespace,
            "transaction_id": id,
            "items": count,
            "durable": word,
            "message": response.message,
        })),
        Format::Table if response.message.is_empty() => {
            println!("{word} transaction {id} ({count} items)")
        }
        Format::Table => println!(
            "{word} transaction {id} ({count} items): {}",
            response.message
        ),
    }
    crate::write::exit_for(durable)
}
