//! The namespace archive: every entry a consumer takes for delivery, kept in a time-bucketed CQL
//! table for the namespace's retention, so `walctl replay` can read a namespace's history back
//! where its queues no longer hold it: SQS deletes what was consumed, and Kafka keeps only its
//! retention.
//!
//! A row is partitioned by namespace, hour of the entry's original write time and shard (a hash
//! of the entry's key), and clustered by write time and id. So one partition holds an hour of a
//! 32nd of the keys: at 10,000 entries a second of 1 KiB, about 1.1 GB an hour spread over 32
//! partitions of 35 MB. A key's entries all sit in one shard in write-time order, which is the
//! order a replay applies them in. An entry is always written under its original write time and
//! id, so its retry, delay and redrive copies overwrite one row instead of adding rows.
//!
//! Both the bucket width and the shard count are fixed: rows written under one layout could not
//! be found under another.

use std::time::Duration;

use futures::StreamExt as _;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::CqlValue;
use tokio::sync::mpsc;

use super::archive_writer::ArchiveRow;
use super::{DurableError, DurableStorage, cql};
use wal_queue::entry::{self, CodecError, Entry};

/// The width of a partition's time bucket.
pub const ARCHIVE_BUCKET_MICROS: i64 = 3_600_000_000;
/// Partitions per bucket; a key's entries all go to one.
pub const ARCHIVE_SHARDS: i32 = 32;
/// Rows fetched per page when reading.
const PAGE_ROWS: i32 = 2000;
/// Rows read ahead of the caller.
const READ_AHEAD: usize = 1024;

/// The archive's prepared statements.
#[derive(Debug)]
pub(super) struct ArchiveStatements {
    /// The INSERT of one row, which the archive writer batches.
    pub(super) put: PreparedStatement,
    read: PreparedStatement,
    mark_started: PreparedStatement,
    started: PreparedStatement,
}

pub(super) fn schema(keyspace: &str) -> [String; 2] {
    [
        // Time-window compaction: rows arrive roughly in time order and expire by TTL, so whole
        // SSTables are dropped when their window expires instead of being compacted.
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.archive (\
             namespace text, bucket bigint, shard int, written_at bigint, id text, entry blob, \
             PRIMARY KEY ((namespace, bucket, shard), written_at, id)) \
             WITH compaction = {{'class': 'TimeWindowCompactionStrategy', \
             'compaction_window_unit': 'DAYS', 'compaction_window_size': 1}}"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.archive_starts (\
             namespace text PRIMARY KEY, since bigint)"
        ),
    ]
}

impl ArchiveStatements {
    pub(super) async fn prepare(
        session: &scylla::client::session::Session,
        keyspace: &str,
    ) -> Result<Self, DurableError> {
        let prepare = |text: String| super::prepare(session, text);
        let mut read = prepare(format!(
            "SELECT written_at, entry FROM {keyspace}.archive \
             WHERE namespace = ? AND bucket = ? AND shard = ? AND written_at >= ? AND written_at < ?"
        ))
        .await?;
        read.set_page_size(PAGE_ROWS);
        Ok(Self {
            put: prepare(format!(
                "INSERT INTO {keyspace}.archive (namespace, bucket, shard, written_at, id, entry) \
                 VALUES (?, ?, ?, ?, ?, ?) USING TTL ?"
            ))
            .await?,
            read,
            mark_started: prepare(format!(
                "INSERT INTO {keyspace}.archive_starts (namespace, since) VALUES (?, ?) IF NOT EXISTS"
            ))
            .await?,
            started: prepare(format!(
                "SELECT since FROM {keyspace}.archive_starts WHERE namespace = ?"
            ))
            .await?,
        })
    }
}

/// The shard of a key: FNV-1a of its bytes, so it never changes between versions.
pub fn archive_shard(key: &str) -> i32 {
    i32::try_from(entry::key_hash(key.as_bytes()) % ARCHIVE_SHARDS as u64).unwrap_or(0)
}

/// `entry`'s archive row, kept until `retention` after its original write time; `None` when
/// that time has passed.
fn archive_row(entry: &Entry, retention: Duration) -> Option<ArchiveRow> {
    let written_at = entry.original_write_time_micros;
    let age = Duration::from_micros(u64::try_from(entry::now_micros() - written_at).unwrap_or(0));
    let left = retention.checked_sub(age).filter(|left| !left.is_zero())?;
    // Rounded up: a row must not expire before its retention is over.
    let seconds = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    Some(ArchiveRow {
        namespace: entry.namespace.clone(),
        bucket: written_at.div_euclid(ARCHIVE_BUCKET_MICROS),
        shard: archive_shard(&entry.key),
        written_at,
        id: entry.id.clone(),
        entry: entry::encode(entry),
        ttl: i32::try_from(seconds).unwrap_or(i32::MAX),
    })
}

/// An entry's archive row as the archive's prepared INSERT and its values, for a target writing
/// to the archive's cluster to send in the same request as its own write (one request, where
/// the archive writer would make a second). The row is in the archive once that request is
/// acknowledged.
#[derive(Debug)]
pub struct ArchiveInsert {
    statement: PreparedStatement,
    row: ArchiveRow,
}

impl ArchiveInsert {
    pub fn statement(&self) -> &PreparedStatement {
        &self.statement
    }

    /// The statement's values, in its column order.
    pub fn values(&self) -> impl scylla::serialize::row::SerializeRow + '_ {
        self.row.values()
    }

    /// The statement's values as driver values, for a batch whose rows are bound as such.
    pub fn cql_values(&self) -> Vec<CqlValue> {
        let row = &self.row;
        vec![
            CqlValue::Text(row.namespace.clone()),
            CqlValue::BigInt(row.bucket),
            CqlValue::Int(row.shard),
            CqlValue::BigInt(row.written_at),
            CqlValue::Text(row.id.clone()),
            CqlValue::Blob(row.entry.clone()),
            CqlValue::Int(row.ttl),
        ]
    }

    /// The bytes of the archived entry (its payload included).
    pub fn entry_bytes(&self) -> usize {
        self.row.entry.len()
    }
}

/// One archived entry as read back.
#[derive(Debug)]
pub struct Archived {
    pub shard: i32,
    /// The entry's original write time, in microseconds.
    pub written_at: i64,
    pub entry: Result<Entry, CodecError>,
}

impl DurableStorage {
    /// Keeps `entry` in the archive until `retention` after its original write time. The entry
    /// must carry its payload (not a claim check, which expires sooner). One already older than
    /// its retention is not written.
    pub async fn archive(&self, entry: &Entry, retention: Duration) -> Result<(), DurableError> {
        match archive_row(entry, retention) {
            Some(row) => self.archive_writer.write(row).await,
            None => Ok(()),
        }
    }

    /// `entry`'s archive row as a statement and its values, for a write to the same cluster to
    /// carry in its own request (see [`ArchiveInsert`]); `None` when the entry is already older
    /// than its retention, and nothing is to be written. The entry must carry its payload.
    pub fn archive_insert(&self, entry: &Entry, retention: Duration) -> Option<ArchiveInsert> {
        Some(ArchiveInsert {
            statement: self.archive.put.clone(),
            row: archive_row(entry, retention)?,
        })
    }

    /// Records that `namespace`'s archive is kept from `since_micros` on, unless an earlier
    /// start is already recorded. Returns the recorded start.
    pub async fn mark_archive_started(
        &self,
        namespace: &str,
        since_micros: i64,
    ) -> Result<i64, DurableError> {
        self.session
            .execute_unpaged(&self.archive.mark_started, (namespace, since_micros))
            .await
            .map_err(|e| cql("archive start")(&e))?;
        Ok(self
            .archive_started(namespace)
            .await?
            .unwrap_or(since_micros))
    }

    /// Since when `namespace`'s archive is kept, if it ever was.
    pub async fn archive_started(&self, namespace: &str) -> Result<Option<i64>, DurableError> {
        let rows = self
            .session
            .execute_unpaged(&self.archive.started, (namespace,))
            .await
            .map_err(|e| cql("archive start read")(&e))?
            .into_rows_result()
            .map_err(|e| cql("archive start read")(&e))?;
        let row: Option<(i64,)> = rows
            .maybe_first_row()
            .map_err(|e| cql("archive start read")(&e))?;
        Ok(row.map(|(since,)| since))
    }

    /// Reads `namespace`'s archived entries written in `[from_micros, to_micros)`, shard after
    /// shard and each shard in write-time order (then id order), into a channel the caller
    /// drains. The channel ends after the last row, or after an error.
    pub fn read_archive(
        self: &std::sync::Arc<Self>,
        namespace: &str,
        from_micros: i64,
        to_micros: i64,
    ) -> mpsc::Receiver<Result<Archived, DurableError>> {
        let (sender, rows) = mpsc::channel(READ_AHEAD);
        let storage = std::sync::Arc::clone(self);
        let namespace = namespace.to_owned();
        tokio::spawn(async move {
            for shard in 0..ARCHIVE_SHARDS {
                if let Err(error) = storage
                    .read_shard(&namespace, shard, (from_micros, to_micros), &sender)
                    .await
                {
                    let _ = sender.send(Err(error)).await;
                    return;
                }
            }
        });
        rows
    }

    async fn read_shard(
        &self,
        namespace: &str,
        shard: i32,
        (from_micros, to_micros): (i64, i64),
        sender: &mpsc::Sender<Result<Archived, DurableError>>,
    ) -> Result<(), DurableError> {
        if from_micros >= to_micros {
            return Ok(());
        }
        let first = from_micros.div_euclid(ARCHIVE_BUCKET_MICROS);
        let last = (to_micros - 1).div_euclid(ARCHIVE_BUCKET_MICROS);
        for bucket in first..=last {
            let values = (namespace, bucket, shard, from_micros, to_micros);
            let mut rows = self
                .session
                .execute_iter(self.archive.read.clone(), values)
                .await
                .map_err(|e| cql("archive read")(&e))?
                .rows_stream::<(i64, Vec<u8>)>()
                .map_err(|e| cql("archive read")(&e))?;
            while let Some(row) = rows.next().await {
                let (written_at, bytes) = row.map_err(|e| cql("archive read")(&e))?;
                let archived = Archived {
                    shard,
                    written_at,
                    entry: entry::decode(&bytes),
                };
                if sender.send(Ok(archived)).await.is_err() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
