//! The pauses in force, in the control plane's store: one row per paused (namespace,
//! destination), the empty destination standing for the whole namespace. A pause is a row, so
//! it outlives every restart until it is resumed; the Watch stream carries them to consumers.

use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::store::{NamespaceStore, StoreError};

/// One pause in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseRecord {
    pub namespace: String,
    /// Empty: every destination of the namespace.
    pub destination: String,
    pub paused_by: String,
    pub paused_at_micros: i64,
    pub reason: String,
}

impl PauseRecord {
    pub fn to_proto(&self) -> wal_proto::v1::Pause {
        wal_proto::v1::Pause {
            namespace: self.namespace.clone(),
            destination: self.destination.clone(),
            paused_by: self.paused_by.clone(),
            paused_at_micros: self.paused_at_micros,
            reason: self.reason.clone(),
        }
    }
}

impl NamespaceStore {
    /// Records `pause` unless its (namespace, destination) is paused already. Returns the pause
    /// in force and whether it is this one.
    pub async fn pause(&self, pause: &PauseRecord) -> Result<(PauseRecord, bool), StoreError> {
        // ON CONFLICT DO NOTHING (SQLite and PostgreSQL alike): two operators pausing at once
        // both succeed, and the first one's reason stays.
        let inserted = sqlx::query(
            "INSERT INTO pauses (namespace, destination, paused_by, paused_at_micros, reason)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(&pause.namespace)
        .bind(&pause.destination)
        .bind(&pause.paused_by)
        .bind(pause.paused_at_micros)
        .bind(&pause.reason)
        .execute(&self.pool)
        .await
        .map_err(|e| self.database(e))?;
        let changed = inserted.rows_affected() == 1;
        match self.pause_of(&pause.namespace, &pause.destination).await? {
            Some(found) => Ok((found, changed)),
            // Resumed between the two statements: what was asked is what held.
            None => Ok((pause.clone(), changed)),
        }
    }

    /// Ends the pause of (namespace, destination), returning it when there was one.
    pub async fn resume(
        &self,
        namespace: &str,
        destination: &str,
    ) -> Result<Option<PauseRecord>, StoreError> {
        let found = self.pause_of(namespace, destination).await?;
        let deleted = sqlx::query("DELETE FROM pauses WHERE namespace = $1 AND destination = $2")
            .bind(namespace)
            .bind(destination)
            .execute(&self.pool)
            .await
            .map_err(|e| self.database(e))?;
        // Another resume may have deleted it between the two statements: only one says so.
        Ok(found.filter(|_| deleted.rows_affected() == 1))
    }

    async fn pause_of(
        &self,
        namespace: &str,
        destination: &str,
    ) -> Result<Option<PauseRecord>, StoreError> {
        const QUERY: &str = "SELECT namespace, destination, paused_by, paused_at_micros, reason FROM pauses WHERE namespace = $1 AND destination = $2";
        let row = sqlx::query(QUERY)
            .bind(namespace)
            .bind(destination)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.database(e))?;
        row.map(|row| self.pause_from(&row)).transpose()
    }

    /// The pauses in force, of one namespace (`Some`) or of all, by namespace then destination.
    pub async fn pauses(&self, namespace: Option<&str>) -> Result<Vec<PauseRecord>, StoreError> {
        let query = match namespace {
            Some(name) => sqlx::query(
                "SELECT namespace, destination, paused_by, paused_at_micros, reason FROM pauses
                 WHERE namespace = $1 ORDER BY namespace, destination",
            )
            .bind(name),
            None => sqlx::query(
                "SELECT namespace, destination, paused_by, paused_at_micros, reason FROM pauses
                 ORDER BY namespace, destination",
            ),
        };
        let rows = query
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.database(e))?;
        rows.iter().map(|row| self.pause_from(row)).collect()
    }

    fn pause_from(&self, row: &AnyRow) -> Result<PauseRecord, StoreError> {
        let get = |e| self.database(e);
        Ok(PauseRecord {
            namespace: row.try_get("namespace").map_err(get)?,
            destination: row.try_get("destination").map_err(get)?,
            paused_by: row.try_get("paused_by").map_err(get)?,
            paused_at_micros: row.try_get("paused_at_micros").map_err(get)?,
            reason: row.try_get("reason").map_err(get)?,
        })
    }
}
