//! Redrives in the control plane's store: one row per namespace for its running or last redrive
//! (the lock that lets one run at a time, whichever control plane runs it), and the progress on
//! Kafka DLQs per namespace and filter, which the next redrive with that filter continues from.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::dlq::Filter;
use super::dlq::redrive::Positions;
use crate::store::{NamespaceStore, StoreError};

/// A running redrive that has not reported for this long is taken to be dead (its control plane
/// was killed) and may be taken over. Judged by the clocks of the control planes sharing the
/// store, which must agree to within a few seconds (NTP).
pub const STALE_AFTER: Duration = Duration::from_secs(30);

pub const RUNNING: &str = "running";

/// What a redrive was asked to do.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedriveAsk {
    pub filter: Filter,
    /// The filter as the caller wrote it; names the progress with `filter_key`.
    pub filter_text: String,
    pub filter_key: String,
    pub rate: u32,
    pub max_redrives: u32,
    /// Set when this is a replay (`StartReplay`): the range it puts back. Absent in the rows of
    /// builds before replays, which read as redrives.
    #[serde(default)]
    pub replay: Option<ReplayAsk>,
}

/// What a replay was asked to put back: entries written in `[from_micros, to_micros)` (`to`
/// as resolved when the first run of the request began), but `excluded`, of `key` and
/// `origin_region` when given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayAsk {
    pub from_micros: i64,
    pub to_micros: i64,
    pub excluded: Vec<String>,
    pub key: Option<String>,
    pub origin_region: Option<String>,
    /// The one destination the copies are for (a destination's name); none: every one.
    #[serde(default)]
    pub destination: Option<String>,
}

/// How far a redrive is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedriveProgress {
    pub found: u64,
    pub read: u64,
    pub redriven: u64,
    pub redriven_before: u64,
    pub left: BTreeMap<String, u64>,
    pub error: String,
    /// A replay's excluded ids it never read, once it has read its whole range.
    #[serde(default)]
    pub excluded_unseen: Vec<String>,
}

/// A namespace's running or last redrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedriveRecord {
    pub namespace: String,
    pub id: String,
    pub state: String,
    pub started_by: String,
    pub started_at_micros: i64,
    pub updated_at_micros: i64,
    pub finished_at_micros: i64,
    pub ask: RedriveAsk,
    pub progress: RedriveProgress,
}

/// The progress kept for a namespace and filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SavedPositions {
    /// The bounds the first redrive with this filter resolved it to.
    pub since_micros: Option<i64>,
    pub until_micros: Option<i64>,
    pub positions: Positions,
    /// Entries redriven under it, by every redrive.
    pub redriven: u64,
}

fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

impl NamespaceStore {
    /// Records `record` as its namespace's redrive unless another one is running (and reported
    /// within [`STALE_AFTER`] of `record.started_at_micros`). `None`: claimed; else the one
    /// running.
    pub async fn claim_redrive(
        &self,
        record: &RedriveRecord,
    ) -> Result<Option<RedriveRecord>, StoreError> {
        let stale_before =
            record.started_at_micros - i64::try_from(STALE_AFTER.as_micros()).unwrap_or(i64::MAX);
        // One statement, so two control planes claiming at once cannot both win.
        let claimed = sqlx::query(
            "INSERT INTO redrives (namespace, id, state, started_by, started_at_micros,
                 updated_at_micros, finished_at_micros, request, progress)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (namespace) DO UPDATE SET id = excluded.id, state = excluded.state,
                 started_by = excluded.started_by, started_at_micros = excluded.started_at_micros,
                 updated_at_micros = excluded.updated_at_micros,
                 finished_at_micros = excluded.finished_at_micros, request = excluded.request,
                 progress = excluded.progress
             WHERE redrives.state <> 'running' OR redrives.updated_at_micros < $10",
        )
        .bind(&record.namespace)
        .bind(&record.id)
        .bind(&record.state)
        .bind(&record.started_by)
        .bind(record.started_at_micros)
        .bind(record.updated_at_micros)
        .bind(record.finished_at_micros)
        .bind(json(&record.ask))
        .bind(json(&record.progress))
        .bind(stale_before)
        .execute(&self.pool)
        .await
        .map_err(|e| self.database(e))?;
        if claimed.rows_affected() == 1 {
            return Ok(None);
        }
        let running = self.redrive(&record.namespace).await?;
        // Finished between the two statements: one more try finds it free.
        Ok(Some(running.unwrap_or_else(|| record.clone())))
    }

    /// Stores a redrive's state, ask and progress; false when the row is another redrive's now
    /// (this one was taken over as stale): it must stop.
    pub async fn update_redrive(&self, record: &RedriveRecord) -> Result<bool, StoreError> {
        let updated = sqlx::query(
            "UPDATE redrives SET state = $3, updated_at_micros = $4, finished_at_micros = $5,
                 progress = $6, request = $7
             WHERE namespace = $1 AND id = $2",
        )
        .bind(&record.namespace)
        .bind(&record.id)
        .bind(&record.state)
        .bind(record.updated_at_micros)
        .bind(record.finished_at_micros)
        .bind(json(&record.progress))
        .bind(json(&record.ask))
        .execute(&self.pool)
        .await
        .map_err(|e| self.database(e))?;
        Ok(updated.rows_affected() == 1)
    }

    /// The namespace's running or last redrive.
    pub async fn redrive(&self, namespace: &str) -> Result<Option<RedriveRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT namespace, id, state, started_by, started_at_micros, updated_at_micros,
                 finished_at_micros, request, progress
             FROM redrives WHERE namespace = $1",
        )
        .bind(namespace)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.database(e))?;
        row.map(|row| self.redrive_from(&row)).transpose()
    }

    fn redrive_from(&self, row: &AnyRow) -> Result<RedriveRecord, StoreError> {
        let get = |e| self.database(e);
        let request: String = row.try_get("request").map_err(get)?;
        let progress: String = row.try_get("progress").map_err(get)?;
        Ok(RedriveRecord {
            namespace: row.try_get("namespace").map_err(get)?,
            id: row.try_get("id").map_err(get)?,
            state: row.try_get("state").map_err(get)?,
            started_by: row.try_get("started_by").map_err(get)?,
            started_at_micros: row.try_get("started_at_micros").map_err(get)?,
            updated_at_micros: row.try_get("updated_at_micros").map_err(get)?,
            finished_at_micros: row.try_get("finished_at_micros").map_err(get)?,
            // Written by this module only; a row edited by hand into something else reads as
            // the defaults.
            ask: serde_json::from_str(&request).unwrap_or_default(),
            progress: serde_json::from_str(&progress).unwrap_or_default(),
        })
    }

    /// The progress kept for `namespace` and `filter_key`, if any.
    pub async fn redrive_positions(
        &self,
        namespace: &str,
        filter_key: &str,
    ) -> Result<Option<SavedPositions>, StoreError> {
        let row = sqlx::query(
            "SELECT since_micros, until_micros, positions, redriven FROM redrive_positions
             WHERE namespace = $1 AND filter_key = $2",
        )
        .bind(namespace)
        .bind(filter_key)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.database(e))?;
        let Some(row) = row else { return Ok(None) };
        let get = |e| self.database(e);
        let positions: String = row.try_get("positions").map_err(get)?;
        let redriven: i64 = row.try_get("redriven").map_err(get)?;
        Ok(Some(SavedPositions {
            since_micros: row.try_get("since_micros").map_err(get)?,
            until_micros: row.try_get("until_micros").map_err(get)?,
            positions: serde_json::from_str(&positions).unwrap_or_default(),
            redriven: u64::try_from(redriven).unwrap_or(0),
        }))
    }

    /// Keeps the progress for `namespace` and `filter_key`, replacing what was kept, if the
    /// namespace's running redrive is still `owner`; false (nothing kept) when another took it
    /// over, which then stops this one. The check locks the redrive's row for the write (one
    /// transaction), so a takeover comes before or after it, never between.
    pub async fn save_redrive_positions(
        &self,
        namespace: &str,
        filter_key: &str,
        saved: &SavedPositions,
        owner: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.database(e))?;
        // An update that changes nothing, for the row lock it takes (PostgreSQL) until the
        // commit: a claim by another control plane waits for it, so it cannot slip between.
        let owned = sqlx::query(
            "UPDATE redrives SET state = state
             WHERE namespace = $1 AND id = $2 AND state = 'running'",
        )
        .bind(namespace)
        .bind(owner)
        .execute(&mut *tx)
        .await
        .map_err(|e| self.database(e))?;
        if owned.rows_affected() != 1 {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO redrive_positions
                 (namespace, filter_key, since_micros, until_micros, positions, redriven)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (namespace, filter_key) DO UPDATE SET since_micros = excluded.since_micros,
                 until_micros = excluded.until_micros, positions = excluded.positions,
                 redriven = excluded.redriven",
        )
        .bind(namespace)
        .bind(filter_key)
        .bind(saved.since_micros)
        .bind(saved.until_micros)
        .bind(json(&saved.positions))
        .bind(i64::try_from(saved.redriven).unwrap_or(i64::MAX))
        .execute(&mut *tx)
        .await
        .map_err(|e| self.database(e))?;
        tx.commit().await.map_err(|e| self.database(e))?;
        Ok(true)
    }
}
