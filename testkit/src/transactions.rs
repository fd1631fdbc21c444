//! Two-phase writes as tests send them.

use wal_proto::v1::{TransactionItem, WriteTransactionRequest};

/// A WriteTransaction of one item per payload, sequences 0, 1, 2… in order, each to the
/// namespace's default target.
pub fn transaction_of(
    namespace: &str,
    id: &str,
    payloads: impl IntoIterator<Item = Vec<u8>>,
) -> WriteTransactionRequest {
    WriteTransactionRequest {
        namespace: namespace.to_owned(),
        transaction_id: id.to_owned(),
        items: payloads
            .into_iter()
            .zip(0..)
            .map(|(payload, sequence)| TransactionItem {
                sequence,
                target: None,
                payload,
            })
            .collect(),
    }
}

/// `item-0`, `item-1`… `item-{count-1}`: payloads an upstream's received bodies are compared to.
pub fn numbered_items(count: u64) -> Vec<String> {
    (0..count).map(|i| format!("item-{i}")).collect()
}
