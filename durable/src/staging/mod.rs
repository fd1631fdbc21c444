//! Staging for two-phase writes: a transaction's items kept in durable storage until its commit
//! marker is taken from the queue and every item applied.
//!
//! Three tables in the namespace's keyspace:
//! - `transactions`, one row per transaction (partition: namespace and transaction id): its
//!   state, its item count once committed, and how far its apply got (`applied_through`: the
//!   items below it are applied), so a retry or a restart resumes there;
//! - `transaction_items`, one row per item (partition: namespace and transaction id, clustered by
//!   sequence), read back in sequence order, a page at a time, so memory stays bounded however
//!   large the transaction;
//! - `open_transactions`, the open ones by the minute they opened, for the expiry sweep;
//! - `transactions_by_state`, the open, applying and dead-lettered ones, for operators
//!   ([`by_state`]).
//!
//! States: `open` (items may be appended) -> `committing` (the commit checked the items and is
//! putting the marker on the queue) -> `committed` (the broker acknowledged the marker) ->
//! `applied`, or `dead_lettered` (the marker went to the DLQ; a redrive resumes from
//! `applied_through`). `aborted` and `expired` end an open transaction. The moves out of `open`
//! are lightweight transactions (compare-and-set), so a commit racing an abort or a second
//! commit has one winner. A transaction written whole in one call (WriteTransaction) is never
//! `open`: its items are staged, then its row is inserted as `committing` if nobody made one,
//! two compare-and-sets where opening, staging and committing take three and five reads.
//!
//! Every row carries a TTL the producer chooses: at least the transaction's lifetime, plus the
//! marker's whole retry horizon and the DLQ's retention, so a marker never outlives its items.

mod by_state;
mod expiry;
mod items;
mod lease;
mod operator;
mod state;
mod texts;

pub use by_state::Listing;
pub use expiry::open_bucket;
pub use operator::{
    Abort, MAX_TRANSACTION_ID_BYTES, is_transaction_id, listings_of, past_lifetime, shown,
    shown_state,
};
pub use state::OneCall;

use scylla::statement::prepared::PreparedStatement;
use scylla::value::CqlTimestamp;

use super::{DurableError, DurableStorage, MAX_TTL, cql};

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
    commit_unopened: PreparedStatement,
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
    index_state: PreparedStatement,
    unindex_state: PreparedStatement,
    list_state: PreparedStatement,
}

/// The width of the open-transactions index's buckets: a transaction opened in bucket b can be
/// swept once bucket b and its lifetime are past.
pub const OPEN_BUCKET_MICROS: i64 = 60_000_000;

pub(super) fn schema(keyspace: &str) -> [String; 4] {
    [
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.transactions_by_state (\
             namespace text, state text, id text, since timestamp, \
             PRIMARY KEY ((namespace, state), id))"
        ),
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
    /// Prepares every statement, the paged reads with [`ITEM_PAGE`] rows a page.
    pub(super) async fn prepare(
        session: &scylla::client::session::Session,
        keyspace: &str,
    ) -> Result<Self, DurableError> {
        let prepare = |text: String| super::prepare(session, text);
        let transactions = texts::Transactions::new(keyspace);
        let items = texts::Items::new(keyspace);
        let indexes = texts::Indexes::new(keyspace);
        let mut items_from = prepare(items.items_from).await?;
        items_from.set_page_size(ITEM_PAGE);
        let mut list_state = prepare(indexes.list_state).await?;
        list_state.set_page_size(ITEM_PAGE);
        Ok(Self {
            open: prepare(transactions.open).await?,
            read: prepare(transactions.read).await?,
            put_item: prepare(items.put_item).await?,
            items_from,
            items_in: prepare(items.items_in).await?,
            move_state: prepare(transactions.move_state).await?,
            commit: prepare(transactions.commit).await?,
            commit_unopened: prepare(transactions.commit_unopened).await?,
            progress: prepare(transactions.progress).await?,
            claim: prepare(transactions.claim).await?,
            index_open: prepare(indexes.index_open).await?,
            unindex_open: prepare(indexes.unindex_open).await?,
            opened_in: prepare(indexes.opened_in).await?,
            count_items: prepare(items.count_items).await?,
            abort_unknown: prepare(transactions.abort_unknown).await?,
            release: prepare(transactions.release).await?,
            finish: prepare(transactions.finish).await?,
            drop_items: prepare(items.drop_items).await?,
            index_state: prepare(indexes.index_state).await?,
            unindex_state: prepare(indexes.unindex_state).await?,
            list_state,
        })
    }
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

/// The transaction ids an index query answered.
fn ids(
    result: scylla::response::query_result::QueryResult,
    operation: &'static str,
) -> Result<Vec<String>, DurableError> {
    let rows = result.into_rows_result().map_err(|e| cql(operation)(&e))?;
    rows.rows::<(String,)>()
        .map_err(|e| cql(operation)(&e))?
        .map(|row| row.map(|(id,)| id).map_err(|e| cql(operation)(&e)))
        .collect()
}

impl DurableStorage {
    /// Runs a prepared staging statement; `operation` names it in the error.
    async fn run(
        &self,
        statement: &PreparedStatement,
        values: impl scylla::serialize::row::SerializeRow,
        operation: &'static str,
    ) -> Result<scylla::response::query_result::QueryResult, DurableError> {
        self.session
            .execute_unpaged(statement, values)
            .await
            .map_err(|e| cql(operation)(&e))
    }

    /// Runs a lightweight transaction (a compare-and-set): whether it applied.
    async fn run_lwt(
        &self,
        statement: &PreparedStatement,
        values: impl scylla::serialize::row::SerializeRow,
        operation: &'static str,
    ) -> Result<bool, DurableError> {
        lwt_applied(self.run(statement, values, operation).await?)
    }
}
