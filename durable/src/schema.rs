//! The durable keyspace's schema, versioned: a process migrates the keyspace forward at start-up
//! and refuses to run on one a newer build has migrated past what it knows, because a table
//! changed under an older build would be read or written wrongly, silently.
//!
//! The version lives in the keyspace itself (`schema_version`, one row per component), so
//! every process of a deployment reads the same one. Each step is idempotent: processes that
//! start together may both take it, and a step cut short by a crash is taken again. Before
//! versions (the builds before 2026-11-28) the keyspace had no `schema_version` table: its
//! tables are version 1's, created `IF NOT EXISTS`, so such a keyspace is migrated as version 0.
//!
//! Versions:
//! 1. the claim checks, the archive and the two-phase staging tables;
//! 2. transactions left `committing` by a build before the producers' resend sweep were indexed
//!    under `applying`, where the sweep does not look (the closing note of issue 20): each is
//!    indexed under `committing` too, so the sweep sends its marker again. It covers what is
//!    there when it runs: producers of a build before the sweep (none was ever deployed) must be
//!    gone before the first process of a build with version 2 starts.
//! 3. the receipts table, where destinations record what became of an entry whose write awaits
//!    them. As every step, it is one way: once a process of a build with version 3 has started
//!    on a keyspace, processes of older builds refuse it (README, Upgrades).

use futures::TryStreamExt as _;
use std::time::Duration;

use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::statement::prepared::PreparedStatement;
use scylla::value::CqlTimestamp;

use super::{DurableError, cql};
use wal_queue::entry::now_micros;

/// The version this build migrates to, and the newest it runs on.
pub const SCHEMA_VERSION: i32 = 3;

/// The row of `schema_version` the durable tables are versioned under.
const COMPONENT: &str = "durable";

/// How many times [`advance`] takes its lightweight transaction when the cluster times it out:
/// a loaded cluster does now and then (a producer's start-up failed so in CI, 2026-11-30), and
/// one timeout should not stop a process at start.
const CAS_ATTEMPTS: u32 = 5;
/// The wait before the second attempt, growing by as much before each one after.
const CAS_BACKOFF: Duration = Duration::from_millis(500);

/// Brings `keyspace` to [`SCHEMA_VERSION`]: reads its version, refuses a newer one, takes each
/// step after it in order and records it ([`advance`]). Returns the version found (0: none
/// recorded).
pub(super) async fn migrate(
    session: &Session,
    keyspace: &str,
    replication_factor: u8,
) -> Result<i32, DurableError> {
    run(
        session,
        super::keyspace_schema(keyspace, replication_factor),
    )
    .await?;
    run(
        session,
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.schema_version (\
             component text PRIMARY KEY, version int, written_by text, written_at timestamp)"
        ),
    )
    .await?;
    let found = recorded(session, keyspace).await?;
    if let Some((version, written_by)) = &found
        && *version > SCHEMA_VERSION
    {
        return Err(DurableError::NewerSchema {
            keyspace: keyspace.to_owned(),
            found: *version,
            written_by: written_by.clone(),
            supported: SCHEMA_VERSION,
        });
    }
    // A version below 1 is no version a build wrote: start from the beginning.
    let mut current = found.map(|(version, _)| version);
    let from = current.map_or(0, |version| version.max(0));
    for version in from + 1..=SCHEMA_VERSION {
        step(session, keyspace, version).await?;
        advance(session, keyspace, current, version).await?;
        current = Some(version);
        tracing::info!(keyspace, version, "migrated the durable keyspace's schema");
    }
    Ok(from)
}

/// The version recorded, and which build recorded it.
async fn recorded(
    session: &Session,
    keyspace: &str,
) -> Result<Option<(i32, String)>, DurableError> {
    let rows = session
        .query_unpaged(
            format!(
                "SELECT version, written_by FROM {keyspace}.schema_version WHERE component = ?"
            ),
            (COMPONENT,),
        )
        .await
        .map_err(|e| cql("schema version")(&e))?
        .into_rows_result()
        .map_err(|e| cql("schema version")(&e))?;
    let row: Option<(Option<i32>, Option<String>)> = rows
        .maybe_first_row()
        .map_err(|e| cql("schema version")(&e))?;
    Ok(row.and_then(|(version, by)| Some((version?, by.unwrap_or_default()))))
}

/// Moves the recorded version from `from` (none recorded: `None`) to `to`, only if it still
/// says `from` (a lightweight transaction): a slower process of an older build finishing its
/// step never moves the version back under a newer one. Then reads it again: another process may
/// have moved it first, which is fine up to this build's version, and refused past it.
async fn advance(
    session: &Session,
    keyspace: &str,
    from: Option<i32>,
    to: i32,
) -> Result<(), DurableError> {
    let written_by = format!(
        "{} {}",
        std::env::args()
            .next()
            .and_then(|path| {
                std::path::Path::new(&path)
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
            })
            .unwrap_or_default(),
        env!("CARGO_PKG_VERSION")
    );
    let at = CqlTimestamp(now_micros() / 1000);
    let mut attempt = 1;
    while let Err(error) = cas(session, keyspace, from, to, &written_by, at).await {
        if attempt >= CAS_ATTEMPTS || !outcome_unknown(&error) {
            return Err(cql("schema version")(&error));
        }
        tracing::warn!(keyspace, to, attempt, %error, "moving the schema version timed out; trying again");
        tokio::time::sleep(CAS_BACKOFF * attempt).await;
        attempt += 1;
    }
    match recorded(session, keyspace).await? {
        Some((found, written_by)) if found > SCHEMA_VERSION => Err(DurableError::NewerSchema {
            keyspace: keyspace.to_owned(),
            found,
            written_by,
            supported: SCHEMA_VERSION,
        }),
        Some((found, _)) if found >= to => Ok(()),
        other => Err(DurableError::Cql {
            operation: "schema version",
            reason: format!(
                "keyspace '{keyspace}' records version {:?} after it was moved to {to}",
                other.map(|(found, _)| found)
            ),
        }),
    }
}

/// The lightweight transaction of [`advance`]. A timed-out one may have applied or not; taken
/// again it applies if it had not, and changes nothing if it had (its condition then fails).
async fn cas(
    session: &Session,
    keyspace: &str,
    from: Option<i32>,
    to: i32,
    written_by: &str,
    at: CqlTimestamp,
) -> Result<(), ExecutionError> {
    match from {
        None => {
            session
                .query_unpaged(
                    format!(
                        "INSERT INTO {keyspace}.schema_version \
                         (component, version, written_by, written_at) VALUES (?, ?, ?, ?) \
                         IF NOT EXISTS"
                    ),
                    (COMPONENT, to, written_by, at),
                )
                .await?;
        }
        Some(from) => {
            session
                .query_unpaged(
                    format!(
                        "UPDATE {keyspace}.schema_version SET version = ?, written_by = ?, \
                         written_at = ? WHERE component = ? IF version = ?"
                    ),
                    (to, written_by, at, COMPONENT, from),
                )
                .await?;
        }
    }
    Ok(())
}

/// A failure that says nothing of whether the statement applied: the cluster was too slow or
/// too short of replicas to answer in time, which passes.
fn outcome_unknown(error: &ExecutionError) -> bool {
    match error {
        ExecutionError::RequestTimeout(_) => true,
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, _)) => matches!(
            db,
            DbError::WriteTimeout { .. }
                | DbError::ReadTimeout { .. }
                | DbError::Unavailable { .. }
                | DbError::Overloaded
        ),
        _ => false,
    }
}

/// Takes the step to `version`.
async fn step(session: &Session, keyspace: &str, version: i32) -> Result<(), DurableError> {
    match version {
        1 => {
            let tables = super::schema(keyspace)
                .into_iter()
                .chain(super::archive::schema(keyspace))
                .chain(super::staging::schema(keyspace));
            for statement in tables {
                run(session, statement).await?;
            }
            Ok(())
        }
        2 => index_committing(session, keyspace).await,
        3 => {
            for statement in super::receipts::schema(keyspace) {
                run(session, statement).await?;
            }
            Ok(())
        }
        _ => Err(DurableError::Cql {
            operation: "schema migration",
            reason: format!("this build has no step to schema version {version}"),
        }),
    }
}

/// Version 2: every transaction indexed under `applying` whose row says `committing` is indexed
/// under `committing` as well, with the entry's own remaining TTL (else the row's). It reads
/// the index's partition keys, then only the `applying` partitions, a page at a time, and looks
/// up [`LOOKUPS`] transactions at once.
async fn index_committing(session: &Session, keyspace: &str) -> Result<(), DurableError> {
    use futures::StreamExt as _;
    let statements = Version2::prepare(session, keyspace).await?;
    let namespaces: Vec<(String, String)> = session
        .query_iter(
            format!("SELECT DISTINCT namespace, state FROM {keyspace}.transactions_by_state"),
            (),
        )
        .await
        .map_err(|e| failed(&e))?
        .rows_stream::<(String, String)>()
        .map_err(|e| failed(&e))?
        .try_collect()
        .await
        .map_err(|e| failed(&e))?;
    let mut indexed = 0usize;
    for (namespace, _) in namespaces.iter().filter(|(_, s)| s == "applying") {
        let mut pages = session
            .execute_iter(statements.listing.clone(), (namespace,))
            .await
            .map_err(|e| failed(&e))?
            .rows_stream::<(String, Option<CqlTimestamp>, Option<i32>)>()
            .map_err(|e| failed(&e))?
            .try_chunks(256);
        while let Some(chunk) = pages.try_next().await.map_err(|e| failed(&e.1))? {
            let moved: Vec<bool> = futures::stream::iter(chunk)
                .map(|(id, since, entry_ttl)| {
                    statements.index_if_committing(session, namespace, id, since, entry_ttl)
                })
                .buffer_unordered(LOOKUPS)
                .try_collect()
                .await?;
            indexed += moved.into_iter().filter(|m| *m).count();
        }
    }
    if indexed > 0 {
        tracing::info!(
            keyspace,
            indexed,
            "indexed the transactions an older build left committing under 'committing', for the resend sweep"
        );
    }
    Ok(())
}

/// Version 2's statements, prepared once for the whole step rather than per transaction.
struct Version2 {
    /// The transactions indexed under `applying` in a namespace, with the entry's remaining TTL.
    listing: PreparedStatement,
    /// A transaction's state and the row's remaining TTL.
    state: PreparedStatement,
    /// Indexes a transaction under `committing`.
    index: PreparedStatement,
}

impl Version2 {
    /// Prepares the listing, the state lookup and the index write, in that order.
    async fn prepare(session: &Session, keyspace: &str) -> Result<Self, DurableError> {
        let prepare = |text: String| super::prepare(session, text);
        let listing = prepare(format!(
            "SELECT id, since, TTL(since) FROM {keyspace}.transactions_by_state \
             WHERE namespace = ? AND state = 'applying'"
        ))
        .await?;
        let state = prepare(format!(
            "SELECT state, TTL(state) FROM {keyspace}.transactions WHERE namespace = ? AND id = ?"
        ))
        .await?;
        let index = prepare(format!(
            "INSERT INTO {keyspace}.transactions_by_state (namespace, state, id, since) \
             VALUES (?, 'committing', ?, ?) USING TTL ?"
        ))
        .await?;
        Ok(Self {
            listing,
            state,
            index,
        })
    }

    /// Indexes one transaction under `committing` if its row still says so: whether it did.
    async fn index_if_committing(
        &self,
        session: &Session,
        namespace: &str,
        id: String,
        since: Option<CqlTimestamp>,
        entry_ttl: Option<i32>,
    ) -> Result<bool, DurableError> {
        let row: Option<(Option<String>, Option<i32>)> = session
            .execute_unpaged(&self.state, (namespace, &id))
            .await
            .map_err(|e| failed(&e))?
            .into_rows_result()
            .map_err(|e| failed(&e))?
            .maybe_first_row()
            .map_err(|e| failed(&e))?;
        let Some((Some(found), row_ttl)) = row else {
            return Ok(false);
        };
        if found != "committing" {
            return Ok(false);
        }
        let since = since.unwrap_or(CqlTimestamp(now_micros() / 1000));
        // The staging writes every row and entry with a TTL; 0 (none) only if neither carries one,
        // as then the transaction's row lives on too.
        let ttl = entry_ttl.or(row_ttl).unwrap_or(0);
        session
            .execute_unpaged(&self.index, (namespace, &id, since, ttl))
            .await
            .map_err(|e| failed(&e))?;
        Ok(true)
    }
}

/// A failure of the migration's CQL, named as the migration's.
fn failed(e: &dyn std::fmt::Display) -> DurableError {
    cql("schema migration")(e)
}

/// Transactions version 2 looks up at once.
const LOOKUPS: usize = 16;

async fn run(session: &Session, statement: String) -> Result<(), DurableError> {
    session
        .query_unpaged(statement, &[])
        .await
        .map_err(|e| cql("schema")(&e))
        .map(drop)
}

#[cfg(test)]
mod tests {
    use scylla::errors::WriteType;
    use scylla::statement::Consistency;

    use super::*;

    fn attempt(db: DbError) -> ExecutionError {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, String::new()))
    }

    #[test]
    fn a_timed_out_lightweight_transaction_is_taken_again_and_a_refused_one_is_not() {
        let timed_out = attempt(DbError::WriteTimeout {
            consistency: Consistency::LocalSerial,
            received: 0,
            required: 1,
            write_type: WriteType::Cas,
        });
        assert!(outcome_unknown(&timed_out));
        assert!(outcome_unknown(&attempt(DbError::Overloaded)));
        assert!(!outcome_unknown(&attempt(DbError::Invalid)));
        assert!(!outcome_unknown(&attempt(DbError::Unauthorized)));
    }
}
