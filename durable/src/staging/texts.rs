//! The CQL of the staging statements, by the table each runs on: kept apart from their
//! preparing (`StagingStatements::prepare`), so each table's statements read together.

/// The statements on `transactions`: a transaction's row, moved between states by compare-and-set.
pub(super) struct Transactions {
    pub(super) open: String,
    pub(super) read: String,
    pub(super) move_state: String,
    pub(super) commit: String,
    pub(super) commit_unopened: String,
    pub(super) progress: String,
    pub(super) claim: String,
    pub(super) abort_unknown: String,
    pub(super) release: String,
    pub(super) finish: String,
}

impl Transactions {
    /// Their CQL on the tables of `keyspace`.
    pub(super) fn new(keyspace: &str) -> Self {
        Self {
            open: format!(
                "INSERT INTO {keyspace}.transactions (namespace, id, state, applied_through, opened_at, lease_until) \
                 VALUES (?, ?, 'open', 0, ?, 0) IF NOT EXISTS USING TTL ?"
            ),
            read: format!(
                "SELECT state, item_count, applied_through, opened_at, committed_at, reason \
                 FROM {keyspace}.transactions WHERE namespace = ? AND id = ?"
            ),
            move_state: format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET state = ?, reason = ? \
                 WHERE namespace = ? AND id = ? IF state = ?"
            ),
            commit: format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET state = 'committing', item_count = ?, committed_at = ? \
                 WHERE namespace = ? AND id = ? IF state = 'open'"
            ),
            commit_unopened: format!(
                "INSERT INTO {keyspace}.transactions (namespace, id, state, item_count, applied_through, opened_at, committed_at, lease_until) \
                 VALUES (?, ?, 'committing', ?, 0, ?, ?, 0) IF NOT EXISTS USING TTL ?"
            ),
            progress: format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET applied_through = ?, lease_until = ? \
                 WHERE namespace = ? AND id = ? IF applier = ?"
            ),
            claim: format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET applier = ?, lease_until = ? \
                 WHERE namespace = ? AND id = ? \
                 IF state IN ('committing', 'committed', 'dead_lettered') AND lease_until < ?"
            ),
            abort_unknown: format!(
                "INSERT INTO {keyspace}.transactions (namespace, id, state, applied_through, opened_at, lease_until) \
                 VALUES (?, ?, 'aborted', 0, ?, 0) IF NOT EXISTS USING TTL ?"
            ),
            release: format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET lease_until = 0 \
                 WHERE namespace = ? AND id = ? IF applier = ?"
            ),
            finish: format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET state = ?, applied_through = ?, reason = ?, finished_at = ?, lease_until = 0 \
                 WHERE namespace = ? AND id = ? IF applier = ?"
            ),
        }
    }
}

/// The statements on `transaction_items`: the staged items, read back in sequence order.
pub(super) struct Items {
    pub(super) put_item: String,
    pub(super) items_from: String,
    pub(super) items_in: String,
    pub(super) count_items: String,
    pub(super) drop_items: String,
}

impl Items {
    /// Their CQL on the tables of `keyspace`.
    pub(super) fn new(keyspace: &str) -> Self {
        Self {
            put_item: format!(
                "INSERT INTO {keyspace}.transaction_items \
                 (namespace, id, sequence, target_kind, target_settings, payload) \
                 VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS USING TTL ?"
            ),
            items_from: format!(
                "SELECT sequence, target_kind, target_settings, payload FROM {keyspace}.transaction_items \
                 WHERE namespace = ? AND id = ? AND sequence >= ?"
            ),
            items_in: format!(
                "SELECT sequence, target_kind, target_settings, payload FROM {keyspace}.transaction_items \
                 WHERE namespace = ? AND id = ? AND sequence IN ?"
            ),
            count_items: format!(
                "SELECT COUNT(*) FROM {keyspace}.transaction_items WHERE namespace = ? AND id = ?"
            ),
            drop_items: format!(
                "DELETE FROM {keyspace}.transaction_items WHERE namespace = ? AND id = ?"
            ),
        }
    }
}

/// The statements on the indexes: `open_transactions` (expiry) and `transactions_by_state`.
pub(super) struct Indexes {
    pub(super) index_open: String,
    pub(super) unindex_open: String,
    pub(super) opened_in: String,
    pub(super) index_state: String,
    pub(super) unindex_state: String,
    pub(super) list_state: String,
}

impl Indexes {
    /// Their CQL on the tables of `keyspace`.
    pub(super) fn new(keyspace: &str) -> Self {
        Self {
            index_open: format!(
                "INSERT INTO {keyspace}.open_transactions (namespace, bucket, id) VALUES (?, ?, ?) USING TTL ?"
            ),
            unindex_open: format!(
                "DELETE FROM {keyspace}.open_transactions WHERE namespace = ? AND bucket = ? AND id = ?"
            ),
            opened_in: format!(
                "SELECT id FROM {keyspace}.open_transactions WHERE namespace = ? AND bucket = ?"
            ),
            index_state: format!(
                "INSERT INTO {keyspace}.transactions_by_state (namespace, state, id, since) \
                 VALUES (?, ?, ?, ?) USING TTL ?"
            ),
            unindex_state: format!(
                "DELETE FROM {keyspace}.transactions_by_state WHERE namespace = ? AND state = ? AND id = ?"
            ),
            list_state: format!(
                "SELECT id, since FROM {keyspace}.transactions_by_state WHERE namespace = ? AND state = ?"
            ),
        }
    }
}
