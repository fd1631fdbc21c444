#![allow(clippy::expect_used, clippy::unwrap_used)]

//! Durable storage against real Cassandra through the `scylla` driver: claim-checked payloads
//! are written and read back whole.

use std::time::Duration;

use wal_durable::{DurableError, DurableSettings, DurableStorage};

async fn storage() -> DurableStorage {
    let nodes = wal_testkit::cql_nodes();
    let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
    DurableStorage::connect(&DurableSettings::new(&nodes, "wal_test"))
        .await
        .unwrap_or_else(|e| panic!("{e} (is the stack up? scripts/stack up)"))
}

#[tokio::test]
async fn a_claim_checked_payload_is_written_and_read_back_whole() {
    let storage = storage().await;
    let id = wal_testkit::unique("entry");
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();

    let check = storage
        .put_claim_check("orders", &id, &body, Duration::from_secs(3600))
        .await
        .expect("write");
    assert_eq!(check.id, id);
    assert_eq!(check.size, body.len() as u64);
    assert_eq!(check.table, "wal_test.claim_checks");

    let read = storage
        .get_claim_check("orders", &check)
        .await
        .expect("read");
    assert_eq!(read, body);
}

#[tokio::test]
async fn a_missing_or_truncated_claim_check_is_an_error_not_an_empty_payload() {
    let storage = storage().await;
    let id = wal_testkit::unique("entry");
    let check = storage
        .put_claim_check("orders", &id, b"12345", Duration::from_secs(3600))
        .await
        .expect("write");

    let elsewhere = storage.get_claim_check("payments", &check).await;
    assert!(
        matches!(elsewhere, Err(DurableError::NotFound { .. })),
        "{elsewhere:?}"
    );

    let mut wrong_size = check.clone();
    wrong_size.size = 6;
    let error = storage
        .get_claim_check("orders", &wrong_size)
        .await
        .expect_err("size checked");
    assert_eq!(
        error.to_string(),
        format!("claim check {id} holds 5 bytes, the entry says 6")
    );
}

#[tokio::test]
async fn a_claim_check_lives_as_long_as_it_is_asked_to() {
    let storage = storage().await;
    let id = wal_testkit::unique("entry");
    let keep = Duration::from_secs(400 * 24 * 3600);
    storage
        .put_claim_check("orders", &id, b"later", keep)
        .await
        .expect("write");
    let query = "SELECT TTL(body) FROM wal_test.claim_checks WHERE namespace = ? AND id = ?";
    let rows = storage
        .session()
        .query_unpaged(query, ("orders", &id))
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    let (ttl,): (Option<i32>,) = rows.single_row().unwrap();
    let ttl = u64::try_from(ttl.expect("a TTL is set")).unwrap();
    assert!(
        ttl > keep.as_secs() - 60 && ttl <= keep.as_secs(),
        "TTL {ttl}s for a {keep:?} keep"
    );
}
