//! The audit trail: a row per operation (who, what, when, the result) in the control plane's
//! store, so every replica sharing it shows the same trail, and a line in the control plane's
//! log. Rows are only added; nothing here removes one.

use sqlx::Row as _;

use crate::store::{NamespaceStore, StoreError};

/// The most records one read returns.
pub const MOST: u32 = 10_000;
/// Records a read returns when it names no limit.
pub const DEFAULT: u32 = 100;

/// One operation, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// A UUIDv7: unique, and ordered by time.
    pub id: String,
    pub at_micros: i64,
    pub actor: String,
    pub verb: String,
    pub namespace: String,
    /// What within the namespace: a destination, or empty for the whole namespace.
    pub subject: String,
    pub detail: String,
    pub result: String,
}

impl AuditRecord {
    pub fn to_proto(&self) -> wal_proto::v1::AuditRecord {
        wal_proto::v1::AuditRecord {
            id: self.id.clone(),
            at_micros: self.at_micros,
            actor: self.actor.clone(),
            verb: self.verb.clone(),
            namespace: self.namespace.clone(),
            subject: self.subject.clone(),
            detail: self.detail.clone(),
            result: self.result.clone(),
        }
    }
}

impl NamespaceStore {
    pub async fn record(&self, record: &AuditRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO audit (id, at_micros, actor, verb, namespace, subject, detail, result)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&record.id)
        .bind(record.at_micros)
        .bind(&record.actor)
        .bind(&record.verb)
        .bind(&record.namespace)
        .bind(&record.subject)
        .bind(&record.detail)
        .bind(&record.result)
        .execute(&self.pool)
        .await
        .map_err(|e| self.database(e))?;
        Ok(())
    }

    /// The newest `limit` records, of one namespace (`Some`) or of all, newest first.
    pub async fn audit(
        &self,
        namespace: Option<&str>,
        limit: u32,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let limit = i64::from(limit.clamp(1, MOST));
        let query = match namespace {
            Some(name) => sqlx::query(
                "SELECT id, at_micros, actor, verb, namespace, subject, detail, result FROM audit
                 WHERE namespace = $1 ORDER BY at_micros DESC, id DESC LIMIT $2",
            )
            .bind(name)
            .bind(limit),
            None => sqlx::query(
                "SELECT id, at_micros, actor, verb, namespace, subject, detail, result FROM audit
                 ORDER BY at_micros DESC, id DESC LIMIT $1",
            )
            .bind(limit),
        };
        let rows = query
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.database(e))?;
        rows.iter()
            .map(|row| {
                let get = |e| self.database(e);
                Ok(AuditRecord {
                    id: row.try_get("id").map_err(get)?,
                    at_micros: row.try_get("at_micros").map_err(get)?,
                    actor: row.try_get("actor").map_err(get)?,
                    verb: row.try_get("verb").map_err(get)?,
                    namespace: row.try_get("namespace").map_err(get)?,
                    subject: row.try_get("subject").map_err(get)?,
                    detail: row.try_get("detail").map_err(get)?,
                    result: row.try_get("result").map_err(get)?,
                })
            })
            .collect()
    }
}
