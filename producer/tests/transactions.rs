#![allow(clippy::expect_used, clippy::unwrap_used)]

//! Two-phase writes on the real stack: items staged in Cassandra through the producer's
//! Transactions service, the commit marker on Kafka, the consumer applying every item.

use std::time::Duration;

use rand::seq::SliceRandom as _;
use tonic::Code;
use tonic::transport::Channel;
use wal_namespaces::Backend;
use wal_proto::v1::transactions_client::TransactionsClient;
use wal_proto::v1::{
    AbortTransactionRequest, AppendItemsRequest, CommitTransactionRequest, Target, TransactionItem,
    Trilean, WriteTransactionRequest,
};
use wal_testkit::{
    Cql, Fleet, Upstream, assert_refused, cql_target, eventually, namespace_with_target, put,
    unique,
};

const LIMIT: Duration = Duration::from_secs(120);
/// The staging keyspace of the tests' namespaces.
const STAGING: &str = "wal_txn_test";

/// A Kafka namespace with durable storage (where transactions are staged), its default target
/// `target`.
fn staged_namespace(target: &str) -> wal_namespaces::Namespace {
    let mut namespace = namespace_with_target(Backend::Kafka, 1, target, "");
    namespace.durable_storage = Some(wal_namespaces::DurableStorageConfig::keyspace(STAGING));
    namespace
}

/// The tests' staging store, read as the producer and the consumer read it.
async fn staging_storage() -> wal_durable::DurableStorage {
    let nodes = std::env::var("WAL_CQL_NODES").unwrap_or_else(|_| "127.0.0.1:19042".into());
    wal_durable::DurableStorage::connect(&wal_durable::DurableSettings::new(
        &[nodes.as_str()],
        STAGING,
    ))
    .await
    .unwrap()
}

fn client(fleet: &Fleet) -> TransactionsClient<Channel> {
    TransactionsClient::new(fleet.producer.channel.clone())
}

/// One transaction of a test: makes its requests, each naming the namespace and the id.
struct Txn {
    namespace: String,
    id: String,
}

impl Txn {
    fn new(namespace: &str) -> Self {
        Self::named(namespace, &unique("txn"))
    }

    fn named(namespace: &str, id: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            id: id.to_owned(),
        }
    }

    fn append(&self, items: Vec<TransactionItem>) -> AppendItemsRequest {
        AppendItemsRequest {
            namespace: self.namespace.clone(),
            transaction_id: self.id.clone(),
            items,
        }
    }

    fn commit(&self, item_count: u64) -> CommitTransactionRequest {
        CommitTransactionRequest {
            namespace: self.namespace.clone(),
            transaction_id: self.id.clone(),
            item_count,
        }
    }

    /// Commits the transaction and asserts the answer is TRUE: its marker is on the queue.
    async fn commit_stored(&self, client: &mut TransactionsClient<Channel>, item_count: u64) {
        let answer = client
            .commit_transaction(self.commit(item_count))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);
    }

    fn abort(&self) -> AbortTransactionRequest {
        AbortTransactionRequest {
            namespace: self.namespace.clone(),
            transaction_id: self.id.clone(),
        }
    }
}

/// An item for the namespace's default target.
fn item(sequence: u64, payload: impl Into<Vec<u8>>) -> TransactionItem {
    TransactionItem {
        sequence,
        target: None,
        payload: payload.into(),
    }
}

/// A staged namespace delivering to an upstream that answers 200, its fleet, a client and a
/// transaction on it.
async fn upstream_fleet() -> (Upstream, Fleet, TransactionsClient<Channel>, Txn) {
    let upstream = Upstream::start(|_| 200).await;
    let fleet = Fleet::start(staged_namespace(&upstream.target())).await;
    let client = client(&fleet);
    let txn = Txn::new(&fleet.namespace.name);
    (upstream, fleet, client, txn)
}

fn cql_item(sequence: u64, table: &str, payload: Vec<u8>) -> TransactionItem {
    let target: serde_json::Value = serde_json::from_str(&cql_target(table)).unwrap();
    TransactionItem {
        sequence,
        target: Some(Target {
            kind: "cql".into(),
            settings_json: target["settings"].to_string(),
        }),
        payload,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_items_over_three_tables_appended_shuffled_end_as_their_last_sequence_says() {
    const ITEMS: u64 = 1000;
    const KEYS: u64 = 200;
    let cql = Cql::connect().await;
    let tables = [cql.table().await, cql.table().await, cql.table().await];
    let fleet = Fleet::start(staged_namespace(&cql_target(&tables[0]))).await;
    let mut client = client(&fleet);
    let txn = Txn::new(&fleet.namespace.name);
    // Item i puts key i % 200 of table (i / 7) % 3 to "v<i>": each key of a table is written
    // several times, and only the end state of sequence order leaves the last one (the items
    // land several at once; their timestamps decide).
    let item = |i: u64| {
        let table = &tables[((i / 7) % 3) as usize];
        cql_item(i, table, put(&format!("k{}", i % KEYS), &format!("v{i}")))
    };
    let mut items: Vec<TransactionItem> = (0..ITEMS).map(item).collect();
    items.shuffle(&mut rand::rng());
    for chunk in items.chunks(150) {
        let appended = client
            .append_items(txn.append(chunk.to_vec()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(appended.staged as usize, chunk.len());
    }
    txn.commit_stored(&mut client, ITEMS).await;

    // What sequence order leaves: for each (table, key), the value of its highest sequence.
    let mut expected = vec![std::collections::BTreeMap::new(); 3];
    for i in 0..ITEMS {
        expected[((i / 7) % 3) as usize].insert(format!("k{}", i % KEYS), Some(format!("v{i}")));
    }
    for (table, expected) in tables.iter().zip(&expected) {
        eventually(LIMIT, "every row as its last item left it", || async {
            (cql.rows(table).await == *expected).then_some(())
        })
        .await;
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_item_stops_the_apply_at_it_with_every_item_before_it_applied_and_counted() {
    const ITEMS: u64 = 100;
    // Mid-window: CQL items are applied several at once, so items after it are in flight when
    // it fails; the progress recorded is the prefix before it all the same.
    const FAILS: u64 = 70;
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let fleet = Fleet::start(staged_namespace(&cql_target(&table))).await;
    let mut client = client(&fleet);
    let txn = Txn::new(&fleet.namespace.name);
    let items = (0..ITEMS)
        .map(|i| {
            // A table that does not exist: a permanent failure, the marker to the DLQ.
            let table = if i == FAILS { "no_such_table" } else { &table };
            cql_item(i, table, put(&format!("k{i}"), "v"))
        })
        .collect();
    client.append_items(txn.append(items)).await.unwrap();
    txn.commit_stored(&mut client, ITEMS).await;

    let storage = staging_storage().await;
    let stopped = eventually(LIMIT, "the transaction dead-lettered", || async {
        storage
            .transaction(&txn.namespace, &txn.id)
            .await
            .unwrap()
            .filter(|t| t.state == wal_durable::TxnState::DeadLettered)
    })
    .await;
    let reason = stopped.reason.unwrap_or_default();
    assert_eq!(stopped.applied_through, FAILS, "{reason}");
    assert!(
        reason.contains("applied items 0..70, stopped at item 70")
            && reason.contains("no_such_table")
            && reason.contains("items after it were in flight and may have landed"),
        "{reason}"
    );
    let rows = cql.rows(&table).await;
    let missing: Vec<u64> = (0..FAILS)
        .filter(|i| !rows.contains_key(&format!("k{i}")))
        .collect();
    assert!(
        missing.is_empty(),
        "items before the failed one not applied: {missing:?}"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_reach_their_target_in_sequence_order_once_whatever_is_sent_twice() {
    let (upstream, fleet, mut client, txn) = upstream_fleet().await;

    // 50 items, sequence 17 held back.
    let mut items: Vec<TransactionItem> = (0..50)
        .filter(|i| *i != 17)
        .map(|i| item(i, format!("item-{i}")))
        .collect();
    items.reverse();
    client.append_items(txn.append(items)).await.unwrap();
    let refused = client.commit_transaction(txn.commit(50)).await.unwrap_err();
    assert_refused(&refused, Code::FailedPrecondition, &["[17]"]);

    // The same item again changes nothing; another item under a taken sequence is refused.
    let again = client
        .append_items(txn.append(vec![item(3, "item-3"), item(17, "item-17")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((again.staged, again.unchanged), (1, 1));
    let clash = client
        .append_items(txn.append(vec![item(4, "something else")]))
        .await
        .unwrap_err();
    assert_refused(&clash, Code::AlreadyExists, &["sequence 4"]);

    // Committed twice: TRUE both times, applied once, in sequence order.
    for _ in 0..2 {
        let answer = client
            .commit_transaction(txn.commit(50))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);
    }
    eventually(LIMIT, "the 50 items upstream", || async {
        (upstream.received().len() >= 50).then_some(())
    })
    .await;
    // Give a second (wrong) application time to show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let bodies = upstream.bodies();
    let expected: Vec<String> = (0..50).map(|i| format!("item-{i}")).collect();
    assert_eq!(bodies, expected, "each item once, in sequence order");

    // A committed transaction cannot be aborted or appended to.
    let abort = client.abort_transaction(txn.abort()).await.unwrap_err();
    assert_eq!(abort.code(), Code::FailedPrecondition, "{abort:?}");
    let late = client
        .append_items(txn.append(vec![item(50, "late")]))
        .await
        .unwrap_err();
    assert_eq!(late.code(), Code::FailedPrecondition, "{late:?}");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_in_one_call_sent_at_once_four_times_is_true_four_times_and_applied_once() {
    let (upstream, fleet, client, txn) = upstream_fleet().await;
    let request = |payloads: &str| WriteTransactionRequest {
        namespace: txn.namespace.clone(),
        transaction_id: txn.id.clone(),
        items: (0..20)
            .map(|i| item(i, format!("{payloads}-{i}")))
            .collect(),
    };
    // Four calls at once race for the one-step commit: whichever loses finds the items the
    // winner staged are its own, and answers as a commit sent again.
    let calls = (0..4).map(|_| {
        let (mut client, request) = (client.clone(), request("item"));
        async move { client.write_transaction(request).await }
    });
    for answer in futures::future::join_all(calls).await {
        let answer = answer.unwrap().into_inner();
        assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);
    }
    // One call made the row straight as committing (opened when committed), with every item.
    let storage = staging_storage().await;
    let row = storage
        .transaction(&txn.namespace, &txn.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.item_count, Some(20));
    assert_eq!(
        row.committed_at_micros,
        Some(row.opened_at_micros),
        "{row:?}"
    );
    assert_eq!(
        storage.staged_count(&txn.namespace, &txn.id).await.unwrap(),
        20
    );
    // The same id with other items, or with part of them, is refused, and nothing of it is
    // staged or applied.
    let other = client.clone().write_transaction(request("other")).await;
    assert_refused(
        &other.unwrap_err(),
        Code::AlreadyExists,
        &["committed with other items"],
    );
    let mut part = request("item");
    part.items.truncate(5);
    let part = client.clone().write_transaction(part).await;
    assert_refused(
        &part.unwrap_err(),
        Code::AlreadyExists,
        &["committed with other items than this call's 5"],
    );
    eventually(LIMIT, "the 20 items upstream", || async {
        (upstream.received().len() >= 20).then_some(())
    })
    .await;
    // Give a second (wrong) application time to show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let expected: Vec<String> = (0..20).map(|i| format!("item-{i}")).collect();
    assert_eq!(
        upstream.bodies(),
        expected,
        "each item once, in sequence order"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_transaction_is_never_applied_and_its_commit_is_refused() {
    let (upstream, fleet, mut client, txn) = upstream_fleet().await;
    let items = vec![item(0, "aborted")];
    client
        .append_items(txn.append(items.clone()))
        .await
        .unwrap();
    client.abort_transaction(txn.abort()).await.unwrap();
    let commit = client.commit_transaction(txn.commit(1)).await.unwrap_err();
    assert_refused(&commit, Code::FailedPrecondition, &["aborted"]);

    // A small transaction in one call goes through on the same namespace.
    let answer = client
        .write_transaction(WriteTransactionRequest {
            namespace: txn.namespace.clone(),
            transaction_id: unique("txn"),
            items: vec![item(0, "one call")],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);
    eventually(LIMIT, "the one-call transaction upstream", || async {
        (!upstream.received().is_empty()).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let bodies: Vec<Vec<u8>> = upstream.received().iter().map(|r| r.body.clone()).collect();
    assert_eq!(
        bodies,
        vec![b"one call".to_vec()],
        "the aborted item never arrives"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_transaction_expires_is_counted_and_its_late_commit_is_refused() {
    wal_testkit::scrape();
    let upstream = Upstream::start(|_| 200).await;
    let mut namespace = staged_namespace(&upstream.target());
    // Shorter than a namespace file may say (60 s at least), so the test does not wait long.
    namespace
        .durable_storage
        .as_mut()
        .unwrap()
        .transaction_lifetime = Duration::from_secs(3);
    let fleet = Fleet::start(namespace).await;
    let mut client = client(&fleet);
    let txn = Txn::new(&fleet.namespace.name);
    client
        .append_items(txn.append(vec![item(0, "abandoned")]))
        .await
        .unwrap();

    // Counted by the producer's sweep once its minute and its lifetime are past.
    let counted = format!(
        "wal_transactions_expired_total{{namespace=\"{}\"}} 1",
        txn.namespace
    );
    eventually(
        Duration::from_secs(180),
        "the expired transaction counted",
        || async { wal_testkit::scrape().contains(&counted).then_some(()) },
    )
    .await;
    let late = client.commit_transaction(txn.commit(1)).await.unwrap_err();
    assert_refused(&late, Code::FailedPrecondition, &["expired"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(upstream.received().is_empty(), "nothing of it applied");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_a_limit_are_refused_naming_it_and_stage_nothing() {
    let upstream = Upstream::start(|_| 200).await;
    let namespace = staged_namespace(&upstream.target());
    let plain = namespace_with_target(Backend::Kafka, 1, &upstream.target(), "");
    let mut producer =
        wal_testkit::TestProducer::start(vec![namespace.clone(), plain.clone()]).await;
    let mut client = TransactionsClient::new(producer.channel.clone());
    let append = |namespace: &str, id: &str, items: Vec<TransactionItem>| {
        Txn::named(namespace, id).append(items)
    };
    let name = namespace.name.as_str();
    let cases: Vec<(AppendItemsRequest, Code, &str)> = vec![
        (
            append(
                name,
                "t1",
                (0..1001).map(|i| item(i, b"x".to_vec())).collect(),
            ),
            Code::InvalidArgument,
            "per-call item limit",
        ),
        (
            append(
                name,
                "t2",
                (0..5).map(|i| item(i, vec![b'x'; 900_000])).collect(),
            ),
            Code::InvalidArgument,
            "per-call byte limit",
        ),
        (
            append(name, "t3", vec![item(100_000, b"x".to_vec())]),
            Code::InvalidArgument,
            "transaction item limit",
        ),
        (
            append(
                name,
                "t4",
                vec![item(1, b"x".to_vec()), item(1, b"x".to_vec())],
            ),
            Code::InvalidArgument,
            "sequence 1 appears twice",
        ),
        (
            append(name, "t5", vec![item(0, Vec::new())]),
            Code::InvalidArgument,
            "payload is empty",
        ),
        (
            append(name, "bad id!", vec![item(0, b"x".to_vec())]),
            Code::InvalidArgument,
            "transaction_id",
        ),
        (
            append(&plain.name, "t6", vec![item(0, b"x".to_vec())]),
            Code::FailedPrecondition,
            "has no durable_storage",
        ),
        (
            append("no_such_namespace", "t7", vec![item(0, b"x".to_vec())]),
            Code::NotFound,
            "no_such_namespace",
        ),
    ];
    for (request, code, names) in cases {
        let refused = client.append_items(request).await.unwrap_err();
        assert_refused(&refused, code, &[names]);
    }
    let t1 = Txn::named(name, "t1");
    for count in [0, 100_001] {
        let refused = client
            .commit_transaction(t1.commit(count))
            .await
            .unwrap_err();
        assert_refused(&refused, Code::InvalidArgument, &["transaction item limit"]);
    }
    // Nothing of a refused call was staged: t1 has no item to commit.
    let none = client.commit_transaction(t1.commit(1)).await.unwrap_err();
    assert_eq!(none.code(), Code::NotFound, "{none:?}");
    producer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_changed_mid_transaction_leaves_its_staged_items_where_they_were_staged() {
    const ITEMS: u64 = 10;
    let cql = Cql::connect().await;
    let (staged_under, changed_to) = (cql.table().await, cql.table().await);
    let before = staged_namespace(&cql_target(&staged_under));
    let mut after = before.clone();
    after.default_target = staged_namespace(&cql_target(&changed_to)).default_target;
    let mut producer = wal_testkit::TestProducer::start(vec![before.clone()]).await;
    let mut client = TransactionsClient::new(producer.channel.clone());
    let txn = Txn::new(&before.name);
    // Items naming no target take the namespace's default as it is when they are appended.
    let items = (0..ITEMS)
        .map(|i| item(i, put(&format!("k{i}"), "staged")))
        .collect();
    client.append_items(txn.append(items)).await.unwrap();

    // The default target changes before the commit, and the consumer only knows the new one.
    producer.live.reload(vec![after.clone()]).await.unwrap();
    txn.commit_stored(&mut client, ITEMS).await;
    let consumer = wal_testkit::start_consumer(vec![after]).await;
    let expected: std::collections::BTreeMap<String, Option<String>> = (0..ITEMS)
        .map(|i| (format!("k{i}"), Some("staged".to_owned())))
        .collect();
    eventually(
        LIMIT,
        "every item in the table it was staged for",
        || async { (cql.rows(&staged_under).await == expected).then_some(()) },
    )
    .await;
    assert!(
        cql.rows(&changed_to).await.is_empty(),
        "nothing follows the new default"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}
