#![allow(clippy::expect_used, clippy::unwrap_used)]

//! The namespace archive against real Cassandra: entries archived at the same moment, which the
//! archive writer groups into batches per partition, are each read back once and whole.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use wal_durable::{DurableSettings, DurableStorage};
use wal_queue::entry::{Body, ENTRY_VERSION, Entry, new_entry_id, now_micros};

async fn storage() -> Arc<DurableStorage> {
    let nodes = wal_testkit::cql_nodes();
    let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let storage = DurableStorage::connect(&DurableSettings::new(&nodes, "wal_test"))
        .await
        .unwrap_or_else(|e| panic!("{e} (is the stack up? scripts/stack up)"));
    Arc::new(storage)
}

fn entry(namespace: &str, key: &str, written: i64, payload: Vec<u8>) -> Entry {
    Entry {
        version: ENTRY_VERSION,
        id: new_entry_id(),
        namespace: namespace.to_owned(),
        key: key.to_owned(),
        body: Some(Body::Payload(payload)),
        original_write_time_micros: written,
        ..Entry::default()
    }
}

#[tokio::test]
async fn entries_archived_at_the_same_moment_are_each_read_back_once_and_whole() {
    let storage = storage().await;
    let namespace = wal_testkit::unique("archive");
    let written = now_micros();
    // 400 small entries on three keys (three partitions, so batches of many rows), six of
    // 300 KB on one key (more than one batch's bytes), and one of 2 MB (alone in its write).
    let mut entries: Vec<Entry> = (0..400)
        .map(|i| {
            let payload = format!("small {i}").into_bytes();
            entry(&namespace, &format!("key-{}", i % 3), written + i, payload)
        })
        .collect();
    entries.extend((0..6).map(|i| {
        let payload = vec![b'a' + i as u8; 300_000];
        entry(&namespace, "key-0", written + 1000 + i, payload)
    }));
    entries.push(entry(
        &namespace,
        "key-1",
        written + 2000,
        vec![b'z'; 2_000_000],
    ));

    let archived = futures::future::join_all(
        entries
            .iter()
            .map(|entry| storage.archive(entry, Duration::from_secs(3600))),
    )
    .await;
    for (entry, archived) in entries.iter().zip(archived) {
        archived.unwrap_or_else(|e| panic!("archiving {}: {e}", entry.id));
    }

    let mut rows = storage.read_archive(&namespace, written, written + 10_000);
    let mut read: HashMap<String, Entry> = HashMap::new();
    while let Some(row) = rows.recv().await {
        let entry = row.expect("read").entry.expect("decoded");
        let id = entry.id.clone();
        assert!(read.insert(id, entry).is_none(), "an entry read twice");
    }
    assert_eq!(read.len(), entries.len(), "every archived entry read back");
    for entry in &entries {
        assert_eq!(read.get(&entry.id), Some(entry), "entry {} whole", entry.id);
    }
}
