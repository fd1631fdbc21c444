#![allow(clippy::expect_used, clippy::unwrap_used)]

//! The durable keyspace's schema versions against real Cassandra: a new keyspace is recorded at
//! this build's version; a keyspace a newer build migrated is refused with an error naming it,
//! its version and who recorded it; a keyspace from before versions is migrated forward, its
//! transactions left `committing` by an older build indexed where the resend sweep reads.

use futures::TryStreamExt as _;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use wal_durable::{DurableError, DurableSettings, DurableStorage, Listing, SCHEMA_VERSION};

/// A keyspace of its own for each test: they change its version.
fn keyspace() -> String {
    wal_testkit::unique("wal_schema").replace('-', "_")
}

fn settings(keyspace: &str) -> DurableSettings {
    let nodes = wal_testkit::cql_nodes();
    let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
    DurableSettings::new(&nodes, keyspace)
}

async fn session() -> Session {
    SessionBuilder::new()
        .known_nodes(wal_testkit::cql_nodes())
        .build()
        .await
        .expect("a CQL session (is the stack up? scripts/stack up)")
}

async fn recorded_version(session: &Session, keyspace: &str) -> Option<i32> {
    recorded(session, keyspace)
        .await
        .map(|(version, _)| version)
}

/// The version recorded and when.
async fn recorded(session: &Session, keyspace: &str) -> Option<(i32, scylla::value::CqlTimestamp)> {
    let rows = session
        .query_unpaged(
            format!(
                "SELECT version, written_at FROM {keyspace}.schema_version \
                 WHERE component = 'durable'"
            ),
            (),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    rows.maybe_first_row().unwrap()
}

async fn drop_keyspace(session: &Session, keyspace: &str) {
    session
        .query_unpaged(format!("DROP KEYSPACE IF EXISTS {keyspace}"), ())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_new_keyspace_is_recorded_at_this_builds_version() {
    let keyspace = keyspace();
    DurableStorage::connect(&settings(&keyspace)).await.unwrap();
    let session = session().await;
    assert_eq!(
        recorded_version(&session, &keyspace).await,
        Some(SCHEMA_VERSION)
    );
    // Connecting again takes no step: the version is not written again.
    let first = recorded(&session, &keyspace).await;
    DurableStorage::connect(&settings(&keyspace)).await.unwrap();
    assert_eq!(recorded(&session, &keyspace).await, first);
    drop_keyspace(&session, &keyspace).await;
}

#[tokio::test]
async fn a_keyspace_a_newer_build_migrated_is_refused_naming_it() {
    let keyspace = keyspace();
    DurableStorage::connect(&settings(&keyspace)).await.unwrap();
    let session = session().await;
    let newer = SCHEMA_VERSION + 1;
    session
        .query_unpaged(
            format!(
                "INSERT INTO {keyspace}.schema_version (component, version, written_by) \
                 VALUES ('durable', ?, 'wal-consumer 9.9.9')"
            ),
            (newer,),
        )
        .await
        .unwrap();

    let error = DurableStorage::connect(&settings(&keyspace))
        .await
        .expect_err("a newer schema refused");
    assert!(
        matches!(&error, DurableError::NewerSchema { found, supported, .. }
            if *found == newer && *supported == SCHEMA_VERSION),
        "{error:?}"
    );
    let message = error.to_string();
    for part in [
        format!("keyspace '{keyspace}'"),
        format!("schema version {newer}"),
        "wal-consumer 9.9.9".to_owned(),
        format!("up to {SCHEMA_VERSION}"),
    ] {
        assert!(message.contains(&part), "'{part}' not in: {message}");
    }
    // Refused, not migrated back.
    assert_eq!(recorded_version(&session, &keyspace).await, Some(newer));
    drop_keyspace(&session, &keyspace).await;
}

#[tokio::test]
async fn a_keyspace_from_before_versions_is_migrated_and_its_committing_transactions_swept() {
    let keyspace = keyspace();
    // A keyspace as a build before versions left it: version 1's tables, no schema_version,
    // a transaction committing and one committed, both indexed under `applying` as that build
    // indexed them.
    DurableStorage::connect(&settings(&keyspace)).await.unwrap();
    let session = session().await;
    session
        .query_unpaged(format!("DROP TABLE {keyspace}.schema_version"), ())
        .await
        .unwrap();
    let namespace = "orders";
    for (id, state) in [
        ("left-committing", "committing"),
        ("committed", "committed"),
    ] {
        session
            .query_unpaged(
                format!(
                    "INSERT INTO {keyspace}.transactions (namespace, id, state) VALUES (?, ?, ?) \
                     USING TTL 3600"
                ),
                (namespace, id, state),
            )
            .await
            .unwrap();
        session
            .query_unpaged(
                format!(
                    "INSERT INTO {keyspace}.transactions_by_state (namespace, state, id, since) \
                     VALUES (?, 'applying', ?, toTimestamp(now())) USING TTL 3600"
                ),
                (namespace, id),
            )
            .await
            .unwrap();
    }

    let storage = DurableStorage::connect(&settings(&keyspace)).await.unwrap();
    assert_eq!(
        recorded_version(&session, &keyspace).await,
        Some(SCHEMA_VERSION)
    );
    let committing: Vec<String> = storage
        .listed(namespace, Listing::Committing)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(committing, ["left-committing"]);
    // The entry keeps the TTL it had, not none.
    let rows = session
        .query_unpaged(
            format!(
                "SELECT TTL(since) FROM {keyspace}.transactions_by_state \
                 WHERE namespace = ? AND state = 'committing' AND id = 'left-committing'"
            ),
            (namespace,),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    let (ttl,) = rows.first_row::<(Option<i32>,)>().unwrap();
    assert!(ttl.is_some_and(|t| t > 0 && t <= 3600), "{ttl:?}");
    drop_keyspace(&session, &keyspace).await;
}
