//! Staging for two-phase writes: a transaction's items kept in durable storage until its commit
//! marker is taken from the queue and every item applied.
//!
//! Two tables in the namespace's keyspace:
//! - `transactions`, one row per transaction (partition: namespace and transaction id): its
//!   state, its item count once committed, and how far its apply got (`applied_through`: the
//!   items below it are applied), so a retry or a restart resumes there;
//! - `transaction_items`, one row per item (partition: namespace and transaction id, clustered by
//!   sequence), read back in sequence order, a page at a time, so memory stays bounded however
//!   large the transaction.
//!
//! States: `open` (items may be appended) -> `committing` (the commit checked the items and is
//! putting the marker on the queue) -> `committed` (the broker acknowledged the marker) ->
//! `applied`, or `dead_lettered` (the marker went to the DLQ; a redrive resumes from
//! `applied_through`). `aborted` and `expired` end an open transaction. The moves out of `open`
//! are lightweight transactions (compare-and-set), so a commit racing an abort or a second
//! commit has one winner.
//!
//! Every row carries a TTL the producer chooses: at least the transaction's lifetime, plus the
//! marker's whole retry horizon and the DLQ's retention, so a marker never outlives its items.

use futures::TryStreamExt as _;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::value::CqlTimestamp;

use super::{DurableError, DurableStorage, MAX_TTL, cql};
use crate::entry::now_micros;

/// Items read per page while checking a commit or applying.
pub const ITEM_PAGE: i32 = 256;

/// Where a transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    Open,
    Committing,
    Committed,
    Applied,
    DeadLettered,
    Aborted,
    Expired,
}

impl TxnState {
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Open => "open",
            TxnState::Committing => "committing",
            TxnState::Committed => "committed",
            TxnState::Applied => "applied",
            TxnState::DeadLettered => "dead_lettered",
            TxnState::Aborted => "aborted",
            TxnState::Expired => "expired",
        }
    }

    fn parse(name: &str) -> Result<Self, DurableError> {
        Ok(match name {
            "open" => TxnState::Open,
            "committing" => TxnState::Committing,
            "committed" => TxnState::Committed,
            "applied" => TxnState::Applied,
            "dead_lettered" => TxnState::DeadLettered,
            "aborted" => TxnState::Aborted,
            "expired" => TxnState::Expired,
            other => {
                return Err(DurableError::Cql {
                    operation: "transaction read",
                    reason: format!("unknown transaction state '{other}' in the table"),
                });
            }
        })
    }

    /// Whether the commit was accepted: the items will be applied.
    pub fn committed(self) -> bool {
        matches!(
            self,
            TxnState::Committing | TxnState::Committed | TxnState::Applied | TxnState::DeadLettered
        )
    }
}

/// A transaction's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    pub state: TxnState,
    /// Set by the commit.
    pub item_count: Option<u64>,
    /// Items with a lower sequence are applied.
    pub applied_through: u64,
    pub opened_at_micros: i64,
    pub committed_at_micros: Option<i64>,
    /// Why it was dead-lettered, expired or aborted.
    pub reason: Option<String>,
}

/// One staged item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedItem {
    pub sequence: u64,
    pub target_kind: String,
    pub target_settings: String,
    pub payload: Vec<u8>,
}

/// The staging statements, prepared once per session.
#[derive(Debug)]
pub(super) struct StagingStatements {
    open: PreparedStatement,
    read: PreparedStatement,
    put_item: PreparedStatement,
    items_from: PreparedStatement,
    items_in: PreparedStatement,
    move_state: PreparedStatement,
    commit: PreparedStatement,
    progress: PreparedStatement,
    claim: PreparedStatement,
    release: PreparedStatement,
    abort_unknown: PreparedStatement,
    count_items: PreparedStatement,
    index_open: PreparedStatement,
    unindex_open: PreparedStatement,
    opened_in: PreparedStatement,
    finish: PreparedStatement,
    drop_items: PreparedStatement,
}

/// The width of the open-transactions index's buckets: a transaction opened in bucket b can be
/// swept once bucket b and its lifetime are past.
pub const OPEN_BUCKET_MICROS: i64 = 60_000_000;

pub(super) fn schema(keyspace: &str) -> [String; 3] {
    [
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.open_transactions (\
             namespace text, bucket bigint, id text, PRIMARY KEY ((namespace, bucket), id))"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.transactions (\
             namespace text, id text, state text, item_count bigint, applied_through bigint, \
             opened_at timestamp, committed_at timestamp, finished_at timestamp, reason text, \
             applier text, lease_until bigint, \
             PRIMARY KEY ((namespace, id)))"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.transaction_items (\
             namespace text, id text, sequence bigint, target_kind text, target_settings text, \
             payload blob, PRIMARY KEY ((namespace, id), sequence))"
        ),
    ]
}

impl StagingStatements {
    pub(super) async fn prepare(
        session: &scylla::client::session::Session,
        keyspace: &str,
    ) -> Result<Self, DurableError> {
        let prepare = |text: String| async move {
            session.prepare(text).await.map_err(|e| cql("prepare")(&e))
        };
        let mut items_from = prepare(format!(
            "SELECT sequence, target_kind, target_settings, payload FROM {keyspace}.transaction_items \
             WHERE namespace = ? AND id = ? AND sequence >= ?"
        ))
        .await?;
        items_from.set_page_size(ITEM_PAGE);
        Ok(Self {
            open: prepare(format!(
                "INSERT INTO {keyspace}.transactions (namespace, id, state, applied_through, opened_at, lease_until) \
                 VALUES (?, ?, 'open', 0, ?, 0) IF NOT EXISTS USING TTL ?"
            ))
            .await?,
            read: prepare(format!(
                "SELECT state, item_count, applied_through, opened_at, committed_at, reason \
                 FROM {keyspace}.transactions WHERE namespace = ? AND id = ?"
            ))
            .await?,
            put_item: prepare(format!(
                "INSERT INTO {keyspace}.transaction_items \
                 (namespace, id, sequence, target_kind, target_settings, payload) \
                 VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS USING TTL ?"
            ))
            .await?,
            items_from,
            items_in: prepare(format!(
                "SELECT sequence, target_kind, target_settings, payload FROM {keyspace}.transaction_items \
                 WHERE namespace = ? AND id = ? AND sequence IN ?"
            ))
            .await?,
            move_state: prepare(format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET state = ?, reason = ? \
                 WHERE namespace = ? AND id = ? IF state = ?"
            ))
            .await?,
            commit: prepare(format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET state = 'committing', item_count = ?, committed_at = ? \
                 WHERE namespace = ? AND id = ? IF state = 'open'"
            ))
            .await?,
            progress: prepare(format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET applied_through = ?, lease_until = ? \
                 WHERE namespace = ? AND id = ? IF applier = ?"
            ))
            .await?,
            claim: prepare(format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET applier = ?, lease_until = ? \
                 WHERE namespace = ? AND id = ? \
                 IF state IN ('committing', 'committed', 'dead_lettered') AND lease_until < ?"
            ))
            .await?,
            index_open: prepare(format!(
                "INSERT INTO {keyspace}.open_transactions (namespace, bucket, id) VALUES (?, ?, ?) USING TTL ?"
            ))
            .await?,
            unindex_open: prepare(format!(
                "DELETE FROM {keyspace}.open_transactions WHERE namespace = ? AND bucket = ? AND id = ?"
            ))
            .await?,
            opened_in: prepare(format!(
                "SELECT id FROM {keyspace}.open_transactions WHERE namespace = ? AND bucket = ?"
            ))
            .await?,
            count_items: prepare(format!(
                "SELECT COUNT(*) FROM {keyspace}.transaction_items WHERE namespace = ? AND id = ?"
            ))
            .await?,
            abort_unknown: prepare(format!(
                "INSERT INTO {keyspace}.transactions (namespace, id, state, applied_through, opened_at, lease_until) \
                 VALUES (?, ?, 'aborted', 0, ?, 0) IF NOT EXISTS USING TTL ?"
            ))
            .await?,
            release: prepare(format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET lease_until = 0 \
                 WHERE namespace = ? AND id = ? IF applier = ?"
            ))
            .await?,
            finish: prepare(format!(
                "UPDATE {keyspace}.transactions USING TTL ? SET state = ?, applied_through = ?, reason = ?, finished_at = ?, lease_until = 0 \
                 WHERE namespace = ? AND id = ? IF applier = ?"
            ))
            .await?,
            drop_items: prepare(format!(
                "DELETE FROM {keyspace}.transaction_items WHERE namespace = ? AND id = ?"
            ))
            .await?,
        })
    }
}

/// The open-transactions index bucket of a transaction opened at `micros`.
pub fn open_bucket(micros: i64) -> i64 {
    micros.div_euclid(OPEN_BUCKET_MICROS)
}

/// A TTL in seconds for CQL, capped at its 20-year maximum.
fn ttl(keep: std::time::Duration) -> i32 {
    i32::try_from(keep.min(MAX_TTL).as_secs().max(1)).unwrap_or(i32::MAX)
}

fn micros(at: Option<CqlTimestamp>) -> Option<i64> {
    at.map(|t| t.0 * 1000)
}

type TxnRow = (
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<CqlTimestamp>,
    Option<CqlTimestamp>,
    Option<String>,
);

type ItemRow = (i64, Option<String>, Option<String>, Option<Vec<u8>>);

fn item(row: ItemRow) -> StagedItem {
    let (sequence, kind, settings, payload) = row;
    StagedItem {
        sequence: sequence.max(0) as u64,
        target_kind: kind.unwrap_or_default(),
        target_settings: settings.unwrap_or_default(),
        payload: payload.unwrap_or_default(),
    }
}

/// Whether a lightweight transaction applied: its answer's first column, `[applied]` (the row as
/// it was follows when it did not).
fn lwt_applied(result: scylla::response::query_result::QueryResult) -> Result<bool, DurableError> {
    let fail = |e: &dyn std::fmt::Display| cql("transaction update")(e);
    let rows = result.into_rows_result().map_err(|e| fail(&e))?;
    let row = rows
        .maybe_first_row::<scylla::value::Row>()
        .map_err(|e| fail(&e))?
        .ok_or_else(|| fail(&"no answer row"))?;
    match row.columns.first() {
        Some(Some(scylla::value::CqlValue::Boolean(applied))) => Ok(*applied),
        other => Err(fail(&format!("unexpected [applied] column {other:?}"))),
    }
}

impl DurableStorage {
    /// The transaction's row, if any.
    pub async fn transaction(
        &self,
        namespace: &str,
        id: &str,
    ) -> Result<Option<Txn>, DurableError> {
        let rows = self
            .session
            .execute_unpaged(&self.staging.read, (namespace, id))
            .await
            .map_err(|e| cql("transaction read")(&e))?
            .into_rows_result()
            .map_err(|e| cql("transaction read")(&e))?;
        let Some((state, count, applied, opened, committed, reason)) = rows
            .maybe_first_row::<TxnRow>()
            .map_err(|e| cql("transaction read")(&e))?
        else {
            return Ok(None);
        };
        Ok(Some(Txn {
            state: TxnState::parse(state.as_deref().unwrap_or("open"))?,
            item_count: count.map(|c| c.max(0) as u64),
            applied_through: applied.unwrap_or(0).max(0) as u64,
            opened_at_micros: micros(opened).unwrap_or(0),
            committed_at_micros: micros(committed),
            reason,
        }))
    }

    /// Opens the transaction if nobody has, and returns its row as it now stands.
    pub async fn open_transaction(
        &self,
        namespace: &str,
        id: &str,
        keep: std::time::Duration,
    ) -> Result<Txn, DurableError> {
        if let Some(txn) = self.transaction(namespace, id).await? {
            return Ok(txn);
        }
        let now = now_micros();
        let opened = CqlTimestamp(now / 1000);
        let result = self
            .session
            .execute_unpaged(&self.staging.open, (namespace, id, opened, ttl(keep)))
            .await
            .map_err(|e| cql("transaction open")(&e))?;
        if lwt_applied(result)? {
            // Indexed by when it opened, so an abandoned one is found and counted once expired.
            // The row's own opened_at is in milliseconds: the bucket is taken from those.
            self.session
                .execute_unpaged(
                    &self.staging.index_open,
                    (namespace, open_bucket(now / 1000 * 1000), id, ttl(keep)),
                )
                .await
                .map_err(|e| cql("transaction open")(&e))?;
        }
        self.transaction(namespace, id)
            .await?
            .ok_or_else(|| cql("transaction open")(&"the row is missing right after its insert"))
    }

    /// Records a transaction nobody opened as aborted, so a late first append cannot open it;
    /// false when it exists (opened meanwhile: abort it as an open one).
    pub async fn abort_unknown(
        &self,
        namespace: &str,
        id: &str,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        let at = CqlTimestamp(now_micros() / 1000);
        let result = self
            .session
            .execute_unpaged(&self.staging.abort_unknown, (namespace, id, at, ttl(keep)))
            .await
            .map_err(|e| cql("transaction abort")(&e))?;
        lwt_applied(result)
    }

    /// Drops the transaction from the open-transactions index (committed or aborted).
    pub async fn unindex_open(
        &self,
        namespace: &str,
        id: &str,
        txn: &Txn,
    ) -> Result<(), DurableError> {
        self.session
            .execute_unpaged(
                &self.staging.unindex_open,
                (namespace, open_bucket(txn.opened_at_micros), id),
            )
            .await
            .map_err(|e| cql("transaction index")(&e))?;
        Ok(())
    }

    /// The ids of the transactions opened in `bucket` and still indexed.
    pub async fn opened_in(
        &self,
        namespace: &str,
        bucket: i64,
    ) -> Result<Vec<String>, DurableError> {
        let rows = self
            .session
            .execute_unpaged(&self.staging.opened_in, (namespace, bucket))
            .await
            .map_err(|e| cql("transaction index")(&e))?
            .into_rows_result()
            .map_err(|e| cql("transaction index")(&e))?;
        rows.rows::<(String,)>()
            .map_err(|e| cql("transaction index")(&e))?
            .map(|row| {
                row.map(|(id,)| id)
                    .map_err(|e| cql("transaction index")(&e))
            })
            .collect()
    }

    /// Expires the transactions opened in `bucket` that are still open: each moved to
    /// `expired` (a compare-and-set, so of several sweepers one counts it) and dropped from the
    /// index. Returns how many this call expired.
    pub async fn expire_bucket(
        &self,
        namespace: &str,
        bucket: i64,
        keep: std::time::Duration,
    ) -> Result<u64, DurableError> {
        let mut expired = 0;
        for id in self.opened_in(namespace, bucket).await? {
            let Some(txn) = self.transaction(namespace, &id).await? else {
                continue;
            };
            if txn.state == TxnState::Open
                && self
                    .move_transaction(
                        namespace,
                        &id,
                        TxnState::Open,
                        TxnState::Expired,
                        Some("not committed within its lifetime"),
                        keep,
                    )
                    .await?
            {
                expired += 1;
            }
            self.session
                .execute_unpaged(&self.staging.unindex_open, (namespace, bucket, &id))
                .await
                .map_err(|e| cql("transaction index")(&e))?;
        }
        Ok(expired)
    }

    /// How many items of the transaction are staged.
    pub async fn staged_count(&self, namespace: &str, id: &str) -> Result<u64, DurableError> {
        let rows = self
            .session
            .execute_unpaged(&self.staging.count_items, (namespace, id))
            .await
            .map_err(|e| cql("transaction items count")(&e))?
            .into_rows_result()
            .map_err(|e| cql("transaction items count")(&e))?;
        let (count,) = rows
            .first_row::<(i64,)>()
            .map_err(|e| cql("transaction items count")(&e))?;
        Ok(count.max(0) as u64)
    }

    /// The staged items among `sequences`.
    pub async fn staged_items(
        &self,
        namespace: &str,
        id: &str,
        sequences: &[u64],
    ) -> Result<Vec<StagedItem>, DurableError> {
        let mut found = Vec::new();
        // ScyllaDB takes at most 100 clustering keys in one IN by default.
        for chunk in sequences.chunks(100) {
            let chunk: Vec<i64> = chunk.iter().map(|s| *s as i64).collect();
            let rows = self
                .session
                .execute_unpaged(&self.staging.items_in, (namespace, id, chunk))
                .await
                .map_err(|e| cql("transaction items read")(&e))?
                .into_rows_result()
                .map_err(|e| cql("transaction items read")(&e))?;
            for row in rows
                .rows::<ItemRow>()
                .map_err(|e| cql("transaction items read")(&e))?
            {
                found.push(item(row.map_err(|e| cql("transaction items read")(&e))?));
            }
        }
        Ok(found)
    }

    /// Stages `items` in one conditional batch: all of them, or none when any of their
    /// sequences was staged meanwhile (false; read them again and compare). They share a
    /// partition, so the batch is one lightweight transaction however many items it holds.
    pub async fn stage_items(
        &self,
        namespace: &str,
        id: &str,
        items: &[StagedItem],
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        if items.is_empty() {
            return Ok(true);
        }
        let mut batch = Batch::new(BatchType::Unlogged);
        let mut values = Vec::with_capacity(items.len());
        for staged in items {
            batch.append_statement(self.staging.put_item.clone());
            values.push((
                namespace,
                id,
                staged.sequence as i64,
                staged.target_kind.as_str(),
                staged.target_settings.as_str(),
                staged.payload.as_slice(),
                ttl(keep),
            ));
        }
        let result = self
            .session
            .batch(&batch, values)
            .await
            .map_err(|e| cql("transaction items write")(&e))?;
        lwt_applied(result)
    }

    /// The staged items from `from` on, in sequence order, a page at a time.
    pub async fn items_from(
        &self,
        namespace: &str,
        id: &str,
        from: u64,
    ) -> Result<impl futures::Stream<Item = Result<StagedItem, DurableError>> + Send, DurableError>
    {
        let pager = self
            .session
            .execute_iter(
                self.staging.items_from.clone(),
                (namespace.to_owned(), id.to_owned(), from as i64),
            )
            .await
            .map_err(|e| cql("transaction items read")(&e))?;
        let rows = pager
            .rows_stream::<ItemRow>()
            .map_err(|e| cql("transaction items read")(&e))?;
        Ok(rows
            .map_ok(item)
            .map_err(|e| cql("transaction items read")(&e)))
    }

    /// Moves an open transaction to committing with its item count; false when it was not open
    /// (someone else committed, aborted or expired it first).
    pub async fn begin_commit(
        &self,
        namespace: &str,
        id: &str,
        item_count: u64,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        let at = CqlTimestamp(now_micros() / 1000);
        let result = self
            .session
            .execute_unpaged(
                &self.staging.commit,
                (ttl(keep), item_count as i64, at, namespace, id),
            )
            .await
            .map_err(|e| cql("transaction commit")(&e))?;
        lwt_applied(result)
    }

    /// Moves the transaction from `from` to `to`, with a reason; false when it was not in `from`.
    pub async fn move_transaction(
        &self,
        namespace: &str,
        id: &str,
        from: TxnState,
        to: TxnState,
        reason: Option<&str>,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        let result = self
            .session
            .execute_unpaged(
                &self.staging.move_state,
                (ttl(keep), to.name(), reason, namespace, id, from.name()),
            )
            .await
            .map_err(|e| cql("transaction update")(&e))?;
        lwt_applied(result)
    }

    /// Records that the items below `applied_through` are applied, and extends `applier`'s
    /// lease to `lease_until_micros`; false when the lease is no longer `applier`'s.
    pub async fn record_progress(
        &self,
        namespace: &str,
        id: &str,
        applier: &str,
        applied_through: u64,
        lease_until_micros: i64,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        let result = self
            .session
            .execute_unpaged(
                &self.staging.progress,
                (
                    ttl(keep),
                    applied_through as i64,
                    lease_until_micros,
                    namespace,
                    id,
                    applier,
                ),
            )
            .await
            .map_err(|e| cql("transaction progress")(&e))?;
        lwt_applied(result)
    }

    /// Takes the transaction's apply for `applier` until `lease_until_micros`, unless someone
    /// holds an unexpired lease or it is no longer waiting to be applied (applied meanwhile):
    /// one apply at a time, however many markers a transaction has.
    pub async fn claim_apply(
        &self,
        namespace: &str,
        id: &str,
        applier: &str,
        lease_until_micros: i64,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        let result = self
            .session
            .execute_unpaged(
                &self.staging.claim,
                (
                    ttl(keep),
                    applier,
                    lease_until_micros,
                    namespace,
                    id,
                    now_micros(),
                ),
            )
            .await
            .map_err(|e| cql("transaction claim")(&e))?;
        lwt_applied(result)
    }

    /// Gives the apply's lease back, so the next attempt need not wait for it to run out.
    pub async fn release_apply(
        &self,
        namespace: &str,
        id: &str,
        applier: &str,
        keep: std::time::Duration,
    ) -> Result<(), DurableError> {
        self.session
            .execute_unpaged(&self.staging.release, (ttl(keep), namespace, id, applier))
            .await
            .map_err(|e| cql("transaction release")(&e))?;
        Ok(())
    }

    /// Ends a committed transaction's apply by `applier`: `applied`, or `dead_lettered` with
    /// why; false when the lease is no longer `applier`'s.
    #[allow(clippy::too_many_arguments)]
    pub async fn finish_transaction(
        &self,
        namespace: &str,
        id: &str,
        applier: &str,
        state: TxnState,
        applied_through: u64,
        reason: Option<&str>,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        let at = CqlTimestamp(now_micros() / 1000);
        let result = self
            .session
            .execute_unpaged(
                &self.staging.finish,
                (
                    ttl(keep),
                    state.name(),
                    applied_through as i64,
                    reason,
                    at,
                    namespace,
                    id,
                    applier,
                ),
            )
            .await
            .map_err(|e| cql("transaction update")(&e))?;
        lwt_applied(result)
    }

    /// Deletes an aborted transaction's items.
    pub async fn drop_items(&self, namespace: &str, id: &str) -> Result<(), DurableError> {
        self.session
            .execute_unpaged(&self.staging.drop_items, (namespace, id))
            .await
            .map_err(|e| cql("transaction items delete")(&e))?;
        Ok(())
    }
}
