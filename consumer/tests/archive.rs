//! An archiving namespace whose cql target writes to the archive's cluster: every entry reaches
//! its table and the archive, whether its archive row rides in the target's own request (a small
//! put, or several mutations in one entry) or is written apart by the archive writer (an entry
//! too large to ride: a batch over two partitions is held to Cassandra's batch size limits).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use wal_namespaces::Backend;
use wal_queue::entry::{Body, now_micros};
use wal_testkit::{
    Cql, Fleet, KEYSPACE, cql_target, eventually, namespace_json, put, with_archive, write,
    write_true,
};

/// An entry's payload and the rows (id, value) it puts.
type Puts = (Vec<u8>, Vec<(String, String)>);

/// Above the most bytes a write carrying its archive row may have (4 KiB), twice over.
const LARGE: usize = 8 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_entry_reaches_its_table_and_the_archive_carried_or_written_apart() {
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let config = with_archive(
        &namespace_json(Backend::Kafka, 1, &cql_target(&table), ""),
        KEYSPACE,
    );
    let namespace = wal_namespaces::parse(&config, "test").unwrap();
    let name = namespace.name.clone();
    let fleet = Fleet::start(namespace).await;
    let from = now_micros();

    // Each payload by the entry id it was answered with, and the rows it puts.
    let mut payloads = BTreeMap::new();
    let mut rows = BTreeMap::new();
    let large = "x".repeat(LARGE);
    let mut writes: Vec<Puts> = (0..20)
        .map(|i| {
            let id = format!("small-{i}");
            (put(&id, "v"), vec![(id, "v".to_owned())])
        })
        .collect();
    writes.extend((0..3).map(|i| {
        let id = format!("large-{i}");
        (put(&id, &large), vec![(id, large.clone())])
    }));
    writes.push((
        br#"{"mutations":[{"put":{"row":{"id":"pair-a","value":"a"}}},{"put":{"row":{"id":"pair-b","value":"b"}}}]}"#.to_vec(),
        vec![("pair-a".to_owned(), "a".to_owned()), ("pair-b".to_owned(), "b".to_owned())],
    ));
    for (payload, puts) in writes {
        let id = write_true(&fleet.producer.client, write(&name, &payload)).await;
        payloads.insert(id, payload);
        rows.extend(puts);
    }

    eventually(
        Duration::from_secs(60),
        "every row in the table",
        || async {
            let found = cql.rows(&table).await;
            let expected: BTreeMap<_, _> = rows
                .iter()
                .map(|(id, value)| (id.clone(), Some(value.clone())))
                .collect();
            (found == expected).then_some(())
        },
    )
    .await;

    let storage = wal_testkit::durable_storage(KEYSPACE).await;
    // The entries were acknowledged only once archived; their rows are read when all are in.
    let archived = eventually(Duration::from_secs(30), "every entry archived", || {
        let storage = std::sync::Arc::clone(&storage);
        let name = name.clone();
        let expected = payloads.len();
        async move {
            let mut read = storage.read_archive(&name, from - 1_000_000, now_micros() + 1_000_000);
            let mut archived: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
            while let Some(row) = read.recv().await {
                let entry = row.unwrap().entry.unwrap();
                let Some(Body::Payload(payload)) = entry.body else {
                    panic!("entry {} archived without its payload", entry.id);
                };
                archived.entry(entry.id).or_default().push(payload);
            }
            (archived.len() >= expected).then_some(archived)
        }
    })
    .await;
    let expected: BTreeMap<String, Vec<Vec<u8>>> = payloads
        .into_iter()
        .map(|(id, payload)| (id, vec![payload]))
        .collect();
    assert!(
        archived == expected,
        "the archive holds each entry once with its payload: {} entries archived, {} written",
        archived.len(),
        expected.len()
    );
    // The 20 small puts and the pair ride in their target's request; the 3 large ones cannot.
    // Counted just after each attempt, so read once all 24 are; a carried batch the cluster
    // refused as overloaded is tried apart, so only the large ones' count is exact.
    let stats = fleet.consumer.deliverer().stats();
    let (carried, apart) = eventually(Duration::from_secs(10), "24 attempts counted", || {
        let carried = stats.archived_carried.load(Ordering::Relaxed);
        let apart = stats.archived_apart.load(Ordering::Relaxed);
        std::future::ready((carried + apart >= 24).then_some((carried, apart)))
    })
    .await;
    assert!(
        carried + apart == 24 && carried >= 1 && apart >= 3,
        "archive rows: {carried} carried in the target's request, {apart} written apart; \
         expected 24 in all, the 3 large ones apart and the others carried"
    );
    fleet.stop().await;
}
