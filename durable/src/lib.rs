//! Durable storage: CQL tables (ScyllaDB in production, Cassandra locally) for what does not fit
//! on a queue. Today: claim-checked payloads, bodies too large for the backend, stored here while
//! the queue carries a [`ClaimCheck`] that the consumer resolves before delivery; and the
//! namespace archive ([`archive`]), every entry kept for replay.
//!
//! The keyspace is created with SimpleStrategy only when it does not exist yet; in production,
//! create it beforehand with NetworkTopologyStrategy and the replication you need, and the
//! platform leaves it alone.

mod archive;
mod archive_writer;
mod receipts;
mod schema;
mod staging;

use std::sync::Arc;
use std::time::Duration;

pub use archive::{ARCHIVE_BUCKET_MICROS, ARCHIVE_SHARDS, ArchiveInsert, Archived, archive_shard};
pub use receipts::{Outcome, RECEIPT_TTL, Receipt, destination_outcomes};
pub use schema::SCHEMA_VERSION;
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;
pub use staging::{
    Abort, ITEM_PAGE, Listing, MAX_TRANSACTION_ID_BYTES, OPEN_BUCKET_MICROS, OneCall, StagedItem,
    Txn, TxnState, is_transaction_id, listings_of, open_bucket, past_lifetime, shown, shown_state,
};

use wal_queue::entry::{ClaimCheck, now_micros};

/// Added to a claim check's lifetime beyond the entry's last possible delivery attempt, for DLQ
/// inspection and redrive (SQS keeps a DLQ message 14 days at most).
pub const CLAIM_CHECK_MARGIN: Duration = Duration::from_secs(14 * 24 * 3600);
/// How long a transaction of `namespace` may stay open (appended to, not committed) before it
/// expires: its durable storage's `transaction_lifetime_secs`.
pub fn transaction_lifetime(namespace: &wal_namespaces::Namespace) -> Duration {
    namespace
        .durable_storage
        .as_ref()
        .map_or(wal_namespaces::DEFAULT_TRANSACTION_LIFETIME, |d| {
            d.transaction_lifetime
        })
}

/// How long a namespace's staged transactions are kept: open for their lifetime, then the commit
/// marker's whole retry horizon, then the DLQ's retention (as for claim checks), so a marker
/// never outlives its items.
pub fn staging_keep(namespace: &wal_namespaces::Namespace) -> Duration {
    transaction_lifetime(namespace) + namespace.retry.horizon() + CLAIM_CHECK_MARGIN
}

/// CQL's longest TTL (20 years).
const MAX_TTL: Duration = Duration::from_secs(630_720_000);

/// How to reach the CQL cluster and where the platform's tables live.
#[derive(Debug, Clone)]
pub struct DurableSettings {
    /// Contact points, `host:port`.
    pub nodes: Vec<String>,
    pub keyspace: String,
    /// Replication factor used if the keyspace has to be created.
    pub replication_factor: u8,
    pub connect_timeout: Duration,
    /// The datacenter whose nodes requests go to first (the cluster map's shard says); unset,
    /// any.
    pub local_datacenter: Option<String>,
    /// A user and password, for a cluster with authentication on.
    pub credentials: Option<(String, wal_runtime::secret::Secret)>,
    /// The CA (PEM) the nodes' certificates chain to, for a cluster that speaks TLS.
    pub tls_ca: Option<std::path::PathBuf>,
}

impl DurableSettings {
    pub fn new(nodes: &[&str], keyspace: &str) -> Self {
        Self {
            nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
            keyspace: keyspace.to_owned(),
            replication_factor: 1,
            connect_timeout: Duration::from_secs(5),
            local_datacenter: None,
            credentials: None,
            tls_ca: None,
        }
    }

    /// Durable storage in `keyspace` on the CQL shard `shard` of the cluster map.
    pub fn on_shard(shard: &wal_clusters::CqlShard, keyspace: &str) -> Self {
        Self {
            nodes: shard.contact_points.clone(),
            local_datacenter: shard.local_datacenter.clone(),
            credentials: shard.username.clone().zip(shard.password.clone()),
            tls_ca: shard.tls_ca.clone(),
            replication_factor: shard.replication_factor.unwrap_or(1),
            ..Self::new(&[], keyspace)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    #[error(
        "keyspace name '{0}' is not a CQL identifier; expected a letter, then letters, digits or '_' (48 at most)"
    )]
    BadKeyspace(String),
    #[error("cannot connect to CQL nodes {nodes:?}: {reason}")]
    Connect { nodes: Vec<String>, reason: String },
    #[error(
        "the CQL cluster at {nodes:?} has {found} node(s), fewer than the {replication_factor} \
         copies of keyspace '{keyspace}' the cluster map asks for; lower the shard's \
         replication_factor (or --cql-replication-factor) to at most {found}"
    )]
    TooFewNodes {
        nodes: Vec<String>,
        keyspace: String,
        found: usize,
        replication_factor: u8,
    },
    #[error(
        "keyspace '{keyspace}' is at schema version {found} (recorded by {written_by}); this \
         build knows versions up to {supported}: run a build at least as new as the one that \
         migrated it (rolling back past a schema change is not supported)"
    )]
    NewerSchema {
        keyspace: String,
        found: i32,
        written_by: String,
        supported: i32,
    },
    #[error("CQL {operation} failed: {reason}")]
    Cql {
        operation: &'static str,
        reason: String,
    },
    #[error("claim check {table}/{namespace}/{id} not found (expired or never written)")]
    NotFound {
        table: String,
        namespace: String,
        id: String,
    },
    #[error("claim check {id} holds {found} bytes, the entry says {expected}")]
    SizeMismatch {
        id: String,
        expected: u64,
        found: usize,
    },
}

/// Prepares one of the platform's statements.
async fn prepare(session: &Session, text: String) -> Result<PreparedStatement, DurableError> {
    session.prepare(text).await.map_err(|e| cql("prepare")(&e))
}

fn cql(operation: &'static str) -> impl Fn(&dyn std::fmt::Display) -> DurableError {
    move |reason| DurableError::Cql {
        operation,
        reason: reason.to_string(),
    }
}

/// A session on the cluster with the platform's statements prepared.
#[derive(Debug)]
pub struct DurableStorage {
    session: Arc<Session>,
    keyspace: String,
    put_claim_check: PreparedStatement,
    get_claim_check: PreparedStatement,
    archive: archive::ArchiveStatements,
    /// Archive rows, batched per partition.
    archive_writer: archive_writer::ArchiveWriter,
    staging: staging::StagingStatements,
    receipts: receipts::ReceiptStatements,
}

impl DurableStorage {
    /// Connects, creates the keyspace if missing, migrates its tables to this build's
    /// [`SCHEMA_VERSION`] (refusing a newer one), and prepares the statements.
    pub async fn connect(settings: &DurableSettings) -> Result<Self, DurableError> {
        let keyspace = valid_identifier(&settings.keyspace)?;
        let place = wal_clusters::cql::CqlPlace {
            nodes: settings.nodes.clone(),
            local_datacenter: settings.local_datacenter.clone(),
            credentials: settings.credentials.clone(),
            tls_ca: settings.tls_ca.clone(),
        };
        let connect_error = |reason: String| DurableError::Connect {
            nodes: settings.nodes.clone(),
            reason,
        };
        let session = place
            .session_builder(settings.connect_timeout, None)
            .map_err(|e| connect_error(e.to_string()))?
            .build()
            .await
            .map_err(|e| connect_error(e.to_string()))?;
        // Cassandra creates a keyspace with more copies than nodes, then fails every write at
        // QUORUM: refuse it here, by name. The ring's members count, up or down.
        let found = session.get_cluster_state().get_nodes_info().len();
        if found < usize::from(settings.replication_factor) {
            return Err(DurableError::TooFewNodes {
                nodes: settings.nodes.clone(),
                keyspace: keyspace.to_owned(),
                found,
                replication_factor: settings.replication_factor,
            });
        }
        schema::migrate(&session, keyspace, settings.replication_factor).await?;
        let put_claim_check = session
            .prepare(format!(
                "INSERT INTO {keyspace}.claim_checks (namespace, id, body, written_at) \
                 VALUES (?, ?, ?, ?) USING TTL ?"
            ))
            .await
            .map_err(|e| cql("prepare")(&e))?;
        let get_claim_check = session
            .prepare(format!(
                "SELECT body FROM {keyspace}.claim_checks WHERE namespace = ? AND id = ?"
            ))
            .await
            .map_err(|e| cql("prepare")(&e))?;
        let archive = archive::ArchiveStatements::prepare(&session, keyspace).await?;
        let staging = staging::StagingStatements::prepare(&session, keyspace).await?;
        let receipts = receipts::ReceiptStatements::prepare(&session, keyspace).await?;
        let session = Arc::new(session);
        let archive_writer =
            archive_writer::ArchiveWriter::start(Arc::clone(&session), archive.put.clone());
        Ok(Self {
            session,
            archive_writer,
            keyspace: keyspace.to_owned(),
            put_claim_check,
            get_claim_check,
            archive,
            staging,
            receipts,
        })
    }

    /// The session, for components that keep their own statements in the same cluster.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Stores a payload for `keep` (capped at CQL's 20-year maximum) and returns the claim check
    /// an entry carries instead of it. `keep` must outlast the entry: its delay, every retry and
    /// [`CLAIM_CHECK_MARGIN`]; the producer computes it from the namespace's limits.
    pub async fn put_claim_check(
        &self,
        namespace: &str,
        id: &str,
        body: &[u8],
        keep: Duration,
    ) -> Result<ClaimCheck, DurableError> {
        let written_at = scylla::value::CqlTimestamp(now_micros() / 1000);
        let ttl = i32::try_from(keep.min(MAX_TTL).as_secs().max(1)).unwrap_or(i32::MAX);
        self.session
            .execute_unpaged(
                &self.put_claim_check,
                (namespace, id, body, written_at, ttl),
            )
            .await
            .map_err(|e| cql("claim check write")(&e))?;
        Ok(ClaimCheck {
            table: format!("{}.claim_checks", self.keyspace),
            id: id.to_owned(),
            size: body.len() as u64,
        })
    }

    /// Reads the payload a claim check points at, and checks it is whole.
    pub async fn get_claim_check(
        &self,
        namespace: &str,
        check: &ClaimCheck,
    ) -> Result<Vec<u8>, DurableError> {
        let rows = self
            .session
            .execute_unpaged(&self.get_claim_check, (namespace, &check.id))
            .await
            .map_err(|e| cql("claim check read")(&e))?
            .into_rows_result()
            .map_err(|e| cql("claim check read")(&e))?;
        let row: Option<(Vec<u8>,)> = rows
            .maybe_first_row()
            .map_err(|e| cql("claim check read")(&e))?;
        let Some((body,)) = row else {
            return Err(DurableError::NotFound {
                table: check.table.clone(),
                namespace: namespace.to_owned(),
                id: check.id.clone(),
            });
        };
        if body.len() as u64 != check.size {
            return Err(DurableError::SizeMismatch {
                id: check.id.clone(),
                expected: check.size,
                found: body.len(),
            });
        }
        Ok(body)
    }
}

/// The keyspace, created with SimpleStrategy if missing (see the module's doc).
fn keyspace_schema(keyspace: &str, replication_factor: u8) -> String {
    format!(
        "CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = \
         {{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}"
    )
}

/// The claim checks' table.
fn schema(keyspace: &str) -> [String; 1] {
    [format!(
        "CREATE TABLE IF NOT EXISTS {keyspace}.claim_checks (\
         namespace text, id text, body blob, written_at timestamp, \
         PRIMARY KEY ((namespace, id)))"
    )]
}

/// Keyspace names go into DDL text, so only plain CQL identifiers are accepted.
fn valid_identifier(name: &str) -> Result<&str, DurableError> {
    if is_cql_identifier(name) {
        Ok(name)
    } else {
        Err(DurableError::BadKeyspace(name.to_owned()))
    }
}

/// Whether `name` is a plain CQL identifier: a letter, then letters, digits or '_', 48 at most.
/// Only such names are ever put into statement text.
pub use wal_targets::cql::is_identifier as is_cql_identifier;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_names_are_plain_identifiers() {
        assert!(valid_identifier("wal_durable").is_ok());
        for bad in ["", "1abc", "a-b", "a;DROP", &"k".repeat(49)] {
            assert!(valid_identifier(bad).is_err(), "{bad} accepted");
        }
    }
}
