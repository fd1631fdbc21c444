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
//!    indexed under `committing` too, so the sweep sends its marker again.

use futures::TryStreamExt as _;
use scylla::client::session::Session;
use scylla::value::CqlTimestamp;

use super::{DurableError, cql};
use crate::entry::now_micros;

/// The version this build migrates to, and the newest it runs on.
pub const SCHEMA_VERSION: i32 = 2;

/// The row of `schema_version` the durable tables are versioned under.
const COMPONENT: &str = "durable";

/// Brings `keyspace` to [`SCHEMA_VERSION`]: reads its version, refuses a newer one, takes each
/// step after it in order and records it. Returns the version found (0: none recorded).
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
    let from = found.map_or(0, |(version, _)| version);
    for version in from + 1..=SCHEMA_VERSION {
        step(session, keyspace, version).await?;
        record(session, keyspace, version).await?;
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

async fn record(session: &Session, keyspace: &str, version: i32) -> Result<(), DurableError> {
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
    session
        .query_unpaged(
            format!(
                "INSERT INTO {keyspace}.schema_version (component, version, written_by, written_at) \
                 VALUES (?, ?, ?, ?)"
            ),
            (
                COMPONENT,
                version,
                written_by,
                CqlTimestamp(now_micros() / 1000),
            ),
        )
        .await
        .map_err(|e| cql("schema version")(&e))?;
    Ok(())
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
        _ => unreachable!("no step to schema version {version}"),
    }
}

/// Version 2: every transaction indexed under `applying` whose row says `committing` is indexed
/// under `committing` as well, with the entry's own remaining TTL. One pass over the index (its
/// partitions are per namespace and listing, so the pass reads them all, a page at a time).
async fn index_committing(session: &Session, keyspace: &str) -> Result<(), DurableError> {
    let state = session
        .prepare(format!(
            "SELECT state FROM {keyspace}.transactions WHERE namespace = ? AND id = ?"
        ))
        .await
        .map_err(|e| cql("prepare")(&e))?;
    let index = session
        .prepare(format!(
            "INSERT INTO {keyspace}.transactions_by_state (namespace, state, id, since) \
             VALUES (?, 'committing', ?, ?) USING TTL ?"
        ))
        .await
        .map_err(|e| cql("prepare")(&e))?;
    let mut rows = session
        .query_iter(
            format!(
                "SELECT namespace, state, id, since, TTL(since) FROM {keyspace}.transactions_by_state"
            ),
            (),
        )
        .await
        .map_err(|e| cql("schema migration")(&e))?
        .rows_stream::<(String, String, String, Option<CqlTimestamp>, Option<i32>)>()
        .map_err(|e| cql("schema migration")(&e))?;
    let mut indexed = 0usize;
    while let Some((namespace, listing, id, since, ttl)) = rows
        .try_next()
        .await
        .map_err(|e| cql("schema migration")(&e))?
    {
        if listing != "applying" {
            continue;
        }
        let row: Option<(Option<String>,)> = session
            .execute_unpaged(&state, (&namespace, &id))
            .await
            .map_err(|e| cql("schema migration")(&e))?
            .into_rows_result()
            .map_err(|e| cql("schema migration")(&e))?
            .maybe_first_row()
            .map_err(|e| cql("schema migration")(&e))?;
        if row.and_then(|(state,)| state).as_deref() != Some("committing") {
            continue;
        }
        let since = since.unwrap_or(CqlTimestamp(now_micros() / 1000));
        // An entry written without a TTL keeps none; CQL takes 0 as "no TTL".
        session
            .execute_unpaged(&index, (&namespace, &id, since, ttl.unwrap_or(0)))
            .await
            .map_err(|e| cql("schema migration")(&e))?;
        indexed += 1;
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

async fn run(session: &Session, statement: String) -> Result<(), DurableError> {
    session
        .query_unpaged(statement, &[])
        .await
        .map_err(|e| cql("schema")(&e))
        .map(drop)
}
