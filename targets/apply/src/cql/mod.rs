//! The cql target: row puts and deletes in ScyllaDB or Cassandra (payload format in
//! [`payload`]). Settings: `{"keyspace": "app", "table": "users", "consistency": "LOCAL_QUORUM"}`;
//! the table is the default for mutations that name none, the consistency (LOCAL_QUORUM unless
//! given) is every write's.
//!
//! Idempotent by timestamp: every write carries `USING TIMESTAMP` = the entry's original write
//! time, so applying an entry twice, or entries of a key in another order, leaves the same rows.

pub(crate) mod errors;
pub mod payload;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use scylla::client::session::Session;
use scylla::statement::Consistency;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::value::CqlValue;
use tokio::sync::{OnceCell, RwLock};
use wal_durable::ArchiveInsert;
use wal_targets::cql::{CqlSettings, WriteConsistency};

use self::payload::{Delete, Mutation as CqlMutation, Put};
use super::{Mutation, Target, TargetError, TargetKind};
use crate::clients::Clients;

/// Distinct statement shapes kept prepared per target (a shape is a table and, for deletes, the
/// key and column names). Past it statements are prepared per use, which is slower, not wrong.
const MAX_PREPARED: usize = 256;
/// The most bytes (the target's payload and the archived entry) of a write that carries its
/// archive row: under the 5 KiB past which Cassandra logs a warning for every such batch.
const CARRIED_BYTES: usize = 4 * 1024;

/// The driver's consistency for a write of `level`.
pub(crate) fn consistency(level: WriteConsistency) -> Consistency {
    match level {
        WriteConsistency::One => Consistency::One,
        WriteConsistency::Two => Consistency::Two,
        WriteConsistency::Three => Consistency::Three,
        WriteConsistency::Quorum => Consistency::Quorum,
        WriteConsistency::All => Consistency::All,
        WriteConsistency::LocalQuorum => Consistency::LocalQuorum,
        WriteConsistency::EachQuorum => Consistency::EachQuorum,
        WriteConsistency::LocalOne => Consistency::LocalOne,
    }
}

#[derive(Debug)]
pub struct Cql;

impl TargetKind for Cql {
    type Settings = CqlSettings;

    /// One CQL cluster per consumer; a keyspace is as far as the platform can tell replicas
    /// apart (a keyspace with too few live replicas is unavailable while others are not).
    fn endpoint(settings: &CqlSettings, _clients: &Clients) -> String {
        settings.keyspace.to_ascii_lowercase()
    }

    async fn build(
        settings: CqlSettings,
        clients: Arc<Clients>,
    ) -> Result<Arc<dyn Target>, TargetError> {
        let session = clients.cql().await?;
        Ok(Arc::new(CqlTarget {
            session,
            settings,
            prepared: RwLock::new(HashMap::new()),
            default_put: OnceCell::new(),
        }))
    }
}

#[derive(Debug)]
pub struct CqlTarget {
    session: Arc<Session>,
    settings: CqlSettings,
    prepared: RwLock<HashMap<String, PreparedStatement>>,
    /// The put of a row into the target's own table without a TTL: most entries are one, so it
    /// is kept apart, ready without making its text or looking it up.
    default_put: OnceCell<PreparedStatement>,
}

#[async_trait]
impl Target for CqlTarget {
    async fn apply(&self, mutation: Mutation<'_>) -> Result<(), TargetError> {
        self.write(mutation, None).await
    }

    /// Only at a consistency at least the archive's own (the driver's LOCAL_QUORUM) in the local
    /// datacenter: a target written at ONE would otherwise acknowledge an archive row one
    /// replica holds, and at QUORUM one that remote replicas hold. And only
    /// while the request stays under [`CARRIED_BYTES`]: a batch over two partitions is held to
    /// Cassandra's batch size limits (it warns past 5 KiB and refuses past 50 KiB, by default),
    /// which a row written by the archive writer, one partition per batch, is not.
    fn carries_archive(&self, bytes: usize) -> bool {
        let strong = matches!(
            self.settings.consistency,
            WriteConsistency::LocalQuorum | WriteConsistency::EachQuorum | WriteConsistency::All
        );
        strong && bytes <= CARRIED_BYTES
    }

    async fn apply_with_archive(
        &self,
        mutation: Mutation<'_>,
        archive: &ArchiveInsert,
    ) -> Result<(), TargetError> {
        self.write(mutation, Some(archive)).await
    }
}

impl CqlTarget {
    /// Writes the mutation's statements, and `archive` with them when given: a single statement
    /// alone, more as one batch (logged when the target's own statements are several, so they
    /// are all or nothing as before; unlogged when only the archive row joins one).
    async fn write(
        &self,
        mutation: Mutation<'_>,
        archive: Option<&ArchiveInsert>,
    ) -> Result<(), TargetError> {
        let timestamp = mutation.entry.original_write_time_micros;
        if timestamp <= 0 {
            return Err(TargetError::permanent(
                "the entry has no original write time; cql writes need it for USING TIMESTAMP",
            ));
        }
        let parsed = payload::parse(mutation.payload)?;
        if let [
            CqlMutation::Put(Put {
                table: None,
                row,
                ttl_seconds: None,
            }),
        ] = parsed.mutations.as_slice()
        {
            let statement = self
                .default_put
                .get_or_try_init(|| self.prepare(self.put_text(None, false)))
                .await?;
            let values = (row.get(), timestamp);
            let written = match archive {
                None => self.session.execute_unpaged(statement, values).await,
                Some(archive) => {
                    let batch = self.batch(BatchType::Unlogged, [statement], Some(archive));
                    self.session.batch(&batch, (values, archive.values())).await
                }
            };
            written.map_err(|e| errors::classify("write", &e))?;
            return Ok(());
        }
        let mut statements = Vec::with_capacity(parsed.mutations.len());
        let mut values = Vec::with_capacity(parsed.mutations.len() + 1);
        for each in &parsed.mutations {
            let (text, row) = self.statement(each, timestamp);
            statements.push(self.prepare(text).await?);
            values.push(row);
        }
        if let ([statement], [row], None) = (statements.as_slice(), values.as_slice(), archive) {
            self.session
                .execute_unpaged(statement, row)
                .await
                .map_err(|e| errors::classify("write", &e))?;
            return Ok(());
        }
        let kind = if statements.len() > 1 {
            BatchType::Logged
        } else {
            BatchType::Unlogged
        };
        let batch = self.batch(kind, &statements, archive);
        values.extend(archive.map(ArchiveInsert::cql_values));
        self.session
            .batch(&batch, values)
            .await
            .map_err(|e| errors::classify("batch write", &e))?;
        Ok(())
    }

    /// A batch of `statements`, and the archive row's last when given, at the target's
    /// consistency.
    fn batch<'s>(
        &self,
        kind: BatchType,
        statements: impl IntoIterator<Item = &'s PreparedStatement>,
        archive: Option<&ArchiveInsert>,
    ) -> Batch {
        let mut batch = Batch::new(kind);
        batch.set_consistency(consistency(self.settings.consistency));
        for statement in statements {
            batch.append_statement(statement.clone());
        }
        if let Some(archive) = archive {
            batch.append_statement(archive.statement().clone());
        }
        batch
    }

    /// The statement text for one mutation and the values to bind, in order.
    fn statement(&self, mutation: &CqlMutation, timestamp: i64) -> (String, Vec<CqlValue>) {
        let keyspace = quoted(&self.settings.keyspace);
        match mutation {
            CqlMutation::Put(Put {
                table,
                row,
                ttl_seconds,
            }) => {
                let mut values = vec![
                    CqlValue::Text(row.get().to_owned()),
                    CqlValue::BigInt(timestamp),
                ];
                if let Some(ttl) = ttl_seconds {
                    values.push(CqlValue::Int(i32::try_from(*ttl).unwrap_or(i32::MAX)));
                }
                (
                    self.put_text(table.as_deref(), ttl_seconds.is_some()),
                    values,
                )
            }
            CqlMutation::Delete(Delete {
                table,
                key,
                columns,
            }) => {
                let table = quoted(table.as_deref().unwrap_or(&self.settings.table));
                let what: Vec<String> = columns.iter().flatten().map(|c| quoted(c)).collect();
                let what = what.join(", ");
                // serde_json's map is ordered by key, so one key shape makes one statement text.
                let clauses: Vec<String> = key
                    .keys()
                    .map(|name| format!("{} = fromJson(?)", quoted(name)))
                    .collect();
                let text = format!(
                    "DELETE {what} FROM {keyspace}.{table} USING TIMESTAMP ? WHERE {}",
                    clauses.join(" AND ")
                );
                let mut values = vec![CqlValue::BigInt(timestamp)];
                values.extend(key.values().map(|v| CqlValue::Text(v.to_string())));
                (text, values)
            }
        }
    }

    /// `INSERT ... JSON ?` into `table` (the target's own when None), binding the row's JSON,
    /// the timestamp and, with `ttl`, the TTL.
    fn put_text(&self, table: Option<&str>, ttl: bool) -> String {
        let keyspace = quoted(&self.settings.keyspace);
        let table = quoted(table.unwrap_or(&self.settings.table));
        let ttl = if ttl { " AND TTL ?" } else { "" };
        format!("INSERT INTO {keyspace}.{table} JSON ? DEFAULT UNSET USING TIMESTAMP ?{ttl}")
    }

    async fn prepare(&self, text: String) -> Result<PreparedStatement, TargetError> {
        if let Some(statement) = self.prepared.read().await.get(&text) {
            return Ok(statement.clone());
        }
        let mut statement = self
            .session
            .prepare(text.as_str())
            .await
            .map_err(|e| errors::classify_prepare(&text, &e))?;
        statement.set_consistency(consistency(self.settings.consistency));
        let mut prepared = self.prepared.write().await;
        if prepared.len() < MAX_PREPARED {
            prepared.insert(text, statement.clone());
        }
        Ok(statement)
    }
}

/// A checked identifier as statement text: folded to lower case, as CQL folds unquoted names,
/// and quoted, so a column named like a keyword (`token`, `select`) still works.
fn quoted(identifier: &str) -> String {
    format!("\"{}\"", identifier.to_ascii_lowercase())
}
