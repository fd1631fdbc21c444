//! What a transaction call is checked for before anything is staged or committed: its id,
//! its items, its state, its completeness; each refusal says what was wrong and what was expected.

use futures::StreamExt as _;
use tonic::Status;
use wal_durable::{
    DurableError, DurableStorage, MAX_TRANSACTION_ID_BYTES, StagedItem, Txn, TxnState,
    transaction_lifetime,
};
use wal_namespaces::Namespace;
use wal_proto::v1::TransactionItem;

use super::{MAX_BYTES_PER_CALL, MAX_ITEMS_PER_CALL, MAX_ITEMS_PER_TRANSACTION, MISSING_NAMED};
use crate::request;

pub(super) fn expired(namespace: &Namespace, txn: &Txn) -> bool {
    wal_durable::past_lifetime(namespace, txn)
}

pub(super) fn refuse_unless_open(namespace: &Namespace, id: &str, txn: &Txn) -> Result<(), Status> {
    if txn.state == TxnState::Open && !expired(namespace, txn) {
        return Ok(());
    }
    let state = if txn.state == TxnState::Open {
        TxnState::Expired
    } else {
        txn.state
    };
    Err(refused(namespace, id, state))
}

pub(super) fn refused(namespace: &Namespace, id: &str, state: TxnState) -> Status {
    let why = match state {
        TxnState::Expired => format!(
            "expired: it was not committed within {} s of its first append",
            transaction_lifetime(namespace).as_secs()
        ),
        TxnState::Aborted => "aborted".to_owned(),
        other => format!("already {}", other.name()),
    };
    crate::status::refused(
        tonic::Code::FailedPrecondition,
        "transaction_id",
        format!(
            "transaction '{id}' of namespace '{}' is {why}",
            namespace.name
        ),
    )
}

pub(super) fn unavailable(error: DurableError) -> Status {
    Status::unavailable(format!("the staging store: {error}"))
}

/// Refuses the commit unless sequences 0..count are all staged and none beyond, reading the
/// staged sequences a page at a time.
pub(super) async fn check_complete(
    durable: &DurableStorage,
    namespace: &str,
    id: &str,
    count: u64,
) -> Result<(), Status> {
    let mut items = durable
        .items_from(namespace, id, 0)
        .await
        .map_err(unavailable)?;
    let (mut next, mut missing, mut named, mut beyond) = (0u64, 0u64, Vec::new(), None);
    while let Some(item) = items.next().await {
        let sequence = item.map_err(unavailable)?.sequence;
        if sequence >= count {
            beyond = Some(sequence);
            break;
        }
        for gap in next..sequence {
            missing += 1;
            if named.len() < MISSING_NAMED {
                named.push(gap);
            }
        }
        next = sequence + 1;
    }
    for gap in next..count {
        missing += 1;
        if named.len() < MISSING_NAMED {
            named.push(gap);
        }
        if named.len() >= MISSING_NAMED {
            missing += count - gap - 1;
            break;
        }
    }
    if missing > 0 {
        return Err(crate::status::refused(
            tonic::Code::FailedPrecondition,
            "item_count",
            format!(
                "transaction '{id}': {missing} of {count} items are not staged: sequences {named:?}{}; nothing was queued",
                if missing > named.len() as u64 {
                    " and more"
                } else {
                    ""
                }
            ),
        ));
    }
    if let Some(sequence) = beyond {
        return Err(crate::status::refused(
            tonic::Code::FailedPrecondition,
            "item_count",
            format!(
                "transaction '{id}': sequence {sequence} is staged but the commit counts {count} items (0 to {}); nothing was queued",
                count - 1
            ),
        ));
    }
    Ok(())
}

pub(super) fn check_id(id: &str) -> Result<(), Status> {
    if wal_durable::is_transaction_id(id) {
        Ok(())
    } else {
        Err(crate::status::refused(
            tonic::Code::InvalidArgument,
            "transaction_id",
            format!(
                "transaction_id {id:?}: expected 1 to {MAX_TRANSACTION_ID_BYTES} letters, digits or '-', '_', '.', ':'"
            ),
        ))
    }
}

/// A call's items, checked as WriteToLog checks a write's payload and target, resolved to what
/// is staged.
pub(super) fn check_items(
    namespace: &Namespace,
    items: Vec<TransactionItem>,
) -> Result<Vec<StagedItem>, Status> {
    if items.is_empty() || items.len() > MAX_ITEMS_PER_CALL {
        return Err(crate::status::refused(
            tonic::Code::InvalidArgument,
            "items",
            format!(
                "items: {} in one call; expected 1 to {MAX_ITEMS_PER_CALL} (the per-call item limit)",
                items.len()
            ),
        ));
    }
    let mut sequences: Vec<u64> = items.iter().map(|i| i.sequence).collect();
    sequences.sort_unstable();
    if let Some(twice) = sequences.windows(2).find(|w| w[0] == w[1]) {
        return Err(crate::status::refused(
            tonic::Code::InvalidArgument,
            "items",
            format!(
                "items: sequence {} appears twice in one call; expected each sequence once",
                twice[0]
            ),
        ));
    }
    let bytes: usize = items.iter().map(|i| i.payload.len()).sum();
    if bytes > MAX_BYTES_PER_CALL {
        return Err(crate::status::refused(
            tonic::Code::InvalidArgument,
            "items",
            format!(
                "items carry {bytes} payload bytes in one call; expected at most {MAX_BYTES_PER_CALL} (the per-call byte limit)"
            ),
        ));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(at, item)| {
            let place = |what: String| {
                crate::status::refused(
                    tonic::Code::InvalidArgument,
                    &format!("items[{at}]"),
                    format!("items[{at}] (sequence {}): {what}", item.sequence),
                )
            };
            if item.sequence >= MAX_ITEMS_PER_TRANSACTION {
                return Err(place(format!(
                    "sequence beyond the transaction item limit; expected below {MAX_ITEMS_PER_TRANSACTION}"
                )));
            }
            if item.payload.is_empty() {
                return Err(place("payload is empty; an item must carry its mutation".to_owned()));
            }
            if item.payload.len() > namespace.payload_limit_bytes {
                return Err(place(format!(
                    "payload of {} bytes exceeds the namespace's limit of {} bytes",
                    item.payload.len(),
                    namespace.payload_limit_bytes
                )));
            }
            let target = request::target(namespace, item.target.clone())
                .map_err(|invalid| place(invalid.to_string()))?;
            Ok(StagedItem {
                sequence: item.sequence,
                target_kind: target.kind,
                target_settings: target.settings_json,
                payload: item.payload,
            })
        })
        .collect()
}
