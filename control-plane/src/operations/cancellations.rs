//! The entries cancelled, in the control plane's store: one row per cancelled (namespace,
//! entry id), kept until no entry of the namespace can still be waiting. The Watch stream
//! carries those in force to consumers, which skip the entries.

use std::time::Duration;

use sqlx::Row as _;
use sqlx::any::AnyRow;
use wal_namespaces::Namespace;

use crate::store::{NamespaceStore, StoreError};

/// Cancellations in force a namespace may have at once: every consumer holds them all in memory
/// and every Watch snapshot carries them.
pub const MAX_PER_NAMESPACE: u64 = 1_000;
/// Cancellations in force across every namespace: a Watch snapshot carries each one's
/// namespace and id (at most 256 bytes), so it stays a few megabytes at most.
pub const MAX_IN_FORCE: u64 = 10_000;

/// Kept beyond an entry's longest possible wait: pauses, outages and DLQ redrives can hold an
/// entry past its deliver-at (a redriven dead letter is checked again). An SQS DLQ keeps a
/// message 14 days at most; a Kafka DLQ as long as its topic's retention, which may be longer.
const MARGIN: Duration = Duration::from_secs(14 * 86_400);

/// How long a cancellation of `namespace` is kept: its longest delay and jitter, its retries'
/// whole horizon, and [`MARGIN`].
pub fn keep(namespace: &Namespace) -> Duration {
    let delay = namespace.delay.max_delay + namespace.delay.max_jitter;
    delay + namespace.retry.horizon() + MARGIN
}

/// One cancellation in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancellationRecord {
    pub namespace: String,
    pub entry_id: String,
    pub cancelled_by: String,
    pub cancelled_at_micros: i64,
    pub reason: String,
    pub expires_at_micros: i64,
}

impl CancellationRecord {
    /// What a Watch snapshot carries of it: which entry, and until when; who and why stay in
    /// the store (ListCancellations, the audit), keeping snapshots small.
    pub fn to_feed(&self) -> wal_proto::v1::Cancellation {
        wal_proto::v1::Cancellation {
            namespace: self.namespace.clone(),
            entry_id: self.entry_id.clone(),
            expires_at_micros: self.expires_at_micros,
            ..Default::default()
        }
    }

    pub fn to_proto(&self) -> wal_proto::v1::Cancellation {
        wal_proto::v1::Cancellation {
            namespace: self.namespace.clone(),
            entry_id: self.entry_id.clone(),
            cancelled_by: self.cancelled_by.clone(),
            cancelled_at_micros: self.cancelled_at_micros,
            reason: self.reason.clone(),
            expires_at_micros: self.expires_at_micros,
        }
    }
}

/// What storing a cancellation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// Stored: this one is in force.
    New(CancellationRecord),
    /// The entry was cancelled already: that one stays.
    Already(CancellationRecord),
    /// The namespace has [`MAX_PER_NAMESPACE`] in force (`of_namespace`), or every namespace
    /// together [`MAX_IN_FORCE`]; the oldest of them expires then.
    Full {
        of_namespace: bool,
        oldest_expires_at_micros: i64,
    },
}

impl NamespaceStore {
    /// Stores `cancellation` unless its entry is cancelled already or its namespace is full.
    /// Expired cancellations (of every namespace) are removed first.
    pub async fn cancel(&self, cancellation: &CancellationRecord) -> Result<Cancelled, StoreError> {
        sqlx::query("DELETE FROM cancellations WHERE expires_at_micros <= $1")
            .bind(cancellation.cancelled_at_micros)
            .execute(&self.pool)
            .await
            .map_err(|e| self.database(e))?;
        let (namespace, id) = (&cancellation.namespace, &cancellation.entry_id);
        if let Some(found) = self.cancellation_of(namespace, id).await? {
            return Ok(Cancelled::Already(found));
        }
        // Checked before the insert, not locked with it: cancels racing at the cap may pass it
        // by their number.
        if let Some(full) = self.fullness(Some(namespace), MAX_PER_NAMESPACE).await? {
            return Ok(full);
        }
        if let Some(full) = self.fullness(None, MAX_IN_FORCE).await? {
            return Ok(full);
        }
        // ON CONFLICT DO NOTHING: of two operators cancelling one entry at once, the first
        // one's reason stays and both are told it is cancelled.
        let inserted = sqlx::query(
            "INSERT INTO cancellations (namespace, entry_id, cancelled_by, cancelled_at_micros, reason, expires_at_micros)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(namespace)
        .bind(id)
        .bind(&cancellation.cancelled_by)
        .bind(cancellation.cancelled_at_micros)
        .bind(&cancellation.reason)
        .bind(cancellation.expires_at_micros)
        .execute(&self.pool)
        .await
        .map_err(|e| self.database(e))?;
        if inserted.rows_affected() == 1 {
            return Ok(Cancelled::New(cancellation.clone()));
        }
        let found = self.cancellation_of(namespace, id).await?;
        Ok(Cancelled::Already(
            found.unwrap_or_else(|| cancellation.clone()),
        ))
    }

    /// [`Cancelled::Full`] when `namespace` (or every namespace) has `cap` in force.
    async fn fullness(
        &self,
        namespace: Option<&str>,
        cap: u64,
    ) -> Result<Option<Cancelled>, StoreError> {
        let query = match namespace {
            Some(name) => sqlx::query(
                "SELECT COUNT(*) AS n, MIN(expires_at_micros) AS oldest FROM cancellations WHERE namespace = $1",
            )
            .bind(name),
            None => sqlx::query(
                "SELECT COUNT(*) AS n, MIN(expires_at_micros) AS oldest FROM cancellations",
            ),
        };
        let row = query
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.database(e))?;
        let count: i64 = row.try_get("n").map_err(|e| self.database(e))?;
        if u64::try_from(count).unwrap_or(0) < cap {
            return Ok(None);
        }
        let oldest: Option<i64> = row.try_get("oldest").map_err(|e| self.database(e))?;
        Ok(Some(Cancelled::Full {
            of_namespace: namespace.is_some(),
            oldest_expires_at_micros: oldest.unwrap_or_default(),
        }))
    }

    async fn cancellation_of(
        &self,
        namespace: &str,
        entry_id: &str,
    ) -> Result<Option<CancellationRecord>, StoreError> {
        const QUERY: &str = "SELECT namespace, entry_id, cancelled_by, cancelled_at_micros, reason, expires_at_micros FROM cancellations WHERE namespace = $1 AND entry_id = $2";
        let row = sqlx::query(QUERY)
            .bind(namespace)
            .bind(entry_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.database(e))?;
        row.map(|row| self.cancellation_from(&row)).transpose()
    }

    /// The cancellations in force at `now_micros`, of one namespace (`Some`) or of all, newest
    /// first.
    pub async fn cancellations(
        &self,
        namespace: Option<&str>,
        now_micros: i64,
    ) -> Result<Vec<CancellationRecord>, StoreError> {
        let query = match namespace {
            Some(name) => sqlx::query(
                "SELECT namespace, entry_id, cancelled_by, cancelled_at_micros, reason, expires_at_micros
                 FROM cancellations WHERE namespace = $1 AND expires_at_micros > $2
                 ORDER BY cancelled_at_micros DESC, entry_id",
            )
            .bind(name)
            .bind(now_micros),
            None => sqlx::query(
                "SELECT namespace, entry_id, cancelled_by, cancelled_at_micros, reason, expires_at_micros
                 FROM cancellations WHERE expires_at_micros > $1
                 ORDER BY cancelled_at_micros DESC, namespace, entry_id",
            )
            .bind(now_micros),
        };
        let rows = query
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.database(e))?;
        rows.iter().map(|row| self.cancellation_from(row)).collect()
    }

    fn cancellation_from(&self, row: &AnyRow) -> Result<CancellationRecord, StoreError> {
        let get = |e| self.database(e);
        Ok(CancellationRecord {
            namespace: row.try_get("namespace").map_err(get)?,
            entry_id: row.try_get("entry_id").map_err(get)?,
            cancelled_by: row.try_get("cancelled_by").map_err(get)?,
            cancelled_at_micros: row.try_get("cancelled_at_micros").map_err(get)?,
            reason: row.try_get("reason").map_err(get)?,
            expires_at_micros: row.try_get("expires_at_micros").map_err(get)?,
        })
    }
}
