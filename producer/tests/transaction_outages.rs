#![allow(clippy::expect_used, clippy::unwrap_used)]

//! Two-phase writes through outages on the real stack:
//! - the producer killed with SIGKILL between staging the items and the broker's acknowledgement
//!   of the commit marker (Kafka is stopped, so the marker waits in the producer's memory): the
//!   client's retry with the same transaction id, to a new producer, ends with the set applied
//!   once, in order;
//! - the same, and no client commits again: the next producer's sweep of transactions left
//!   committing sends the marker, and the set is applied once;
//! - the staging store (Cassandra) killed: appends and commits answer UNAVAILABLE naming it, the
//!   queue gets no marker, and once it is back the same call succeeds without a restart.
//!
//! Each stops a service every test shares, so they take turns and are the only tests in their
//! binary, whose name says "outage": under `cargo test` a lock takes turns within the binary and
//! cargo runs binaries one at a time; scripts/test runs the outage programs on a stack of their
//! own, one test at a time.

use std::time::Duration;

use tokio::sync::Mutex;
use tonic::Code;
use wal_namespaces::Backend;
use wal_proto::v1::transactions_client::TransactionsClient;
use wal_proto::v1::{AppendItemsRequest, Trilean, WriteTransactionRequest};
use wal_testkit::{
    Cql, Fleet, ProducerProcess, Restart, Upstream, eventually, kafka_log, namespace_json,
    numbered_items, stack, start_consumer, transaction_of, unique, with_durable_storage,
};

/// One outage at a time, when `cargo test` runs this binary's tests on threads of one process.
static OUTAGE: Mutex<()> = Mutex::const_new(());

const STAGING: &str = "wal_txn_test";
const ITEMS: u64 = 50;
const LIMIT: Duration = Duration::from_secs(180);

fn transaction(namespace: &str, id: &str) -> WriteTransactionRequest {
    let payloads = numbered_items(ITEMS).into_iter().map(String::into_bytes);
    transaction_of(namespace, id, payloads)
}

/// The transaction's state as its staging row has it.
async fn staged_state(cql: &Cql, namespace: &str, id: &str) -> Option<String> {
    let rows = cql
        .session
        .query_unpaged(
            format!("SELECT state FROM {STAGING}.transactions WHERE namespace = ? AND id = ?"),
            (namespace, id),
        )
        .await
        .ok()?
        .into_rows_result()
        .ok()?;
    let (state,) = rows.maybe_first_row::<(Option<String>,)>().ok()??;
    state
}

/// A transaction left `committing` by a producer killed while its marker waited for a stopped
/// Kafka, which is running again when this returns; a consumer is running.
struct LeftCommitting {
    upstream: Upstream,
    consumer: wal_testkit::ConsumerHandle,
    cql: Cql,
    dir: std::path::PathBuf,
    name: String,
    id: String,
}

async fn left_committing() -> LeftCommitting {
    let upstream = Upstream::start(|_| 200).await;
    let text = with_durable_storage(
        &namespace_json(Backend::Kafka, 1, &upstream.target(), ""),
        STAGING,
    );
    let namespace = wal_namespaces::parse(&text, "test").unwrap();
    let name = namespace.name.clone();
    let dir = std::env::temp_dir().join(unique("txn-producer-crash"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), &text).unwrap();
    let cql = Cql::connect().await;
    // Long enough that the marker is still waiting for the broker when the kill comes.
    let mut first = ProducerProcess::start(&dir, Duration::from_secs(60)).await;
    let consumer = start_consumer(vec![namespace]).await;

    let id = unique("txn");
    let restart = Restart("kafka");
    stack("down", "kafka");
    let client = TransactionsClient::new(first.channel.clone());
    let call = tokio::spawn({
        let request = transaction(&name, &id);
        let mut client = client.clone();
        async move { client.write_transaction(request).await }
    });
    // Staged and committing: the marker is sent and not acknowledged.
    eventually(LIMIT, "the commit under way", || async {
        (staged_state(&cql, &name, &id).await.as_deref() == Some("committing")).then_some(())
    })
    .await;
    first.kill();
    let answer = call.await.unwrap();
    assert!(
        answer.is_err(),
        "the killed producer cannot have answered: {answer:?}"
    );
    drop(restart);
    LeftCommitting {
        upstream,
        consumer,
        cql,
        dir,
        name,
        id,
    }
}

impl LeftCommitting {
    /// Waits for every item applied, then asserts each was applied once, in sequence order,
    /// and the transaction ended `applied`.
    async fn assert_applied_once(self) {
        let upstream = &self.upstream;
        eventually(LIMIT, "every item applied", || async {
            (upstream.count() >= ITEMS as usize).then_some(())
        })
        .await;
        // Give a second application time to show.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            upstream.bodies(),
            numbered_items(ITEMS),
            "each item once, in sequence order"
        );
        let (cql, name, id) = (&self.cql, &self.name, &self.id);
        eventually(LIMIT, "the transaction applied", || async {
            (staged_state(cql, name, id).await.as_deref() == Some("applied")).then_some(())
        })
        .await;
        self.consumer.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_killed_before_the_marker_was_acknowledged_loses_nothing_when_the_client_retries()
 {
    let _turn = OUTAGE.lock().await;
    let left = left_committing().await;

    // The client's retry, same id and items, to a producer started anew.
    let second = ProducerProcess::start(&left.dir, Duration::from_secs(10)).await;
    let retried = eventually(LIMIT, "the retry answered", || async {
        let request = transaction(&left.name, &left.id);
        let answer = TransactionsClient::new(second.channel.clone())
            .write_transaction(request)
            .await
            .ok()?
            .into_inner();
        // UNKNOWN while Kafka is still finding its feet: sent again, as a client would.
        (answer.durable() != Trilean::Unknown).then_some(answer)
    })
    .await;
    assert_eq!(retried.durable(), Trilean::True, "{}", retried.message);
    left.assert_applied_once().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_left_committing_is_queued_by_a_producer_without_the_clients_retry() {
    let _turn = OUTAGE.lock().await;
    let left = left_committing().await;

    // No client commits again: a producer's sweep finds the transaction committing for longer
    // than twice its write timeout and sends the marker.
    let _second = ProducerProcess::start(&left.dir, Duration::from_secs(2)).await;
    left.assert_applied_once().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_staging_store_down_appends_and_commits_are_unavailable_and_queue_nothing() {
    let _turn = OUTAGE.lock().await;
    let upstream = Upstream::start(|_| 200).await;
    let text = with_durable_storage(
        &namespace_json(Backend::Kafka, 1, &upstream.target(), ""),
        STAGING,
    );
    let fleet = Fleet::start(wal_namespaces::parse(&text, "test").unwrap()).await;
    let name = fleet.name().to_owned();
    let topic = fleet.namespace.queues[0].name.clone();
    let client = TransactionsClient::new(fleet.producer.channel.clone());

    let restart = Restart("cassandra");
    stack("kill", "cassandra");
    let id = unique("txn");
    let append = client
        .clone()
        .append_items(AppendItemsRequest {
            namespace: name.clone(),
            transaction_id: id.clone(),
            items: transaction(&name, &id).items,
        })
        .await
        .unwrap_err();
    wal_testkit::assert_refused(&append, Code::Unavailable, &["staging store"]);
    let write = client
        .clone()
        .write_transaction(transaction(&name, &id))
        .await
        .unwrap_err();
    assert_eq!(write.code(), Code::Unavailable, "{write}");
    assert!(
        kafka_log(&topic).await.is_empty(),
        "no marker reached the queue"
    );
    drop(restart);

    // Back: the same call succeeds, without a restart.
    let answer = eventually(LIMIT, "a commit once Cassandra is back", || async {
        let answer = client
            .clone()
            .write_transaction(transaction(&name, &id))
            .await
            .ok()?
            .into_inner();
        (answer.durable() == Trilean::True).then_some(answer)
    })
    .await;
    assert_eq!(answer.durable(), Trilean::True);
    eventually(LIMIT, "every item applied", || async {
        (upstream.bodies() == numbered_items(ITEMS)).then_some(())
    })
    .await;
    fleet.stop().await;
}
