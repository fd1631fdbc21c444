#![allow(clippy::expect_used, clippy::unwrap_used)]

//! The consumer process killed with SIGKILL in the middle of a two-phase write's apply: a
//! restarted consumer takes the transaction over once the dead one's lease runs out, resumes from
//! the progress it recorded, and finishes it. Items after the last record are applied again
//! (at least once); none is skipped, and each run goes in sequence order.

use std::process::Command;
use std::time::Duration;

use wal_namespaces::Backend;
use wal_proto::v1::Trilean;
use wal_proto::v1::transactions_client::TransactionsClient;
use wal_testkit::{
    TestProducer, Upstream, consumer_process, eventually, namespace_json, terminate,
    transaction_of, unique, with_durable_storage,
};

const ITEMS: u64 = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_killed_mid_transaction_and_restarted_finishes_it_from_its_progress() {
    // 10 ms an item: the apply takes about 10 s, so the kill lands in it.
    let upstream = Upstream::serve("127.0.0.1:0", |_| 200, Duration::from_millis(10)).await;
    let text = with_durable_storage(
        &namespace_json(Backend::Kafka, 1, &upstream.target(), ""),
        "wal_txn_test",
    );
    let namespace = wal_namespaces::parse(&text, "test").unwrap();
    let name = namespace.name.clone();
    let dir = std::env::temp_dir().join(unique("txn-crash-namespaces"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), &text).unwrap();
    let mut producer = TestProducer::start(vec![namespace]).await;

    let id = unique("txn");
    let answer = TransactionsClient::new(producer.channel.clone())
        .write_transaction(transaction_of(
            &name,
            &id,
            (0..ITEMS).map(|i| i.to_string().into_bytes()),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);

    let mut first = consumer_process(&dir, "127.0.0.1:0");
    eventually(Duration::from_secs(120), "the apply under way", || async {
        (upstream.count() >= 300).then_some(())
    })
    .await;
    Command::new("kill")
        .args(["-KILL", &first.id().to_string()])
        .status()
        .unwrap();
    first.wait().unwrap();
    // What the dead process had already sent is read by the upstream a moment later.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let at_kill = upstream.count();
    assert!(at_kill < ITEMS as usize, "the kill was to land mid-apply");

    let mut second = consumer_process(&dir, "127.0.0.1:0");
    let sequences = eventually(
        Duration::from_secs(180),
        "the transaction finished",
        || async {
            let seen: Vec<u64> = upstream
                .received()
                .iter()
                .map(|r| String::from_utf8_lossy(&r.body).parse().unwrap())
                .collect();
            (seen.last() == Some(&(ITEMS - 1))).then_some(seen)
        },
    )
    .await;
    // Two runs in sequence order: 0..k from the first, then r..999 from the second, which
    // resumed at r <= k (the last progress the first recorded).
    let (first_run, second_run) = sequences.split_at(at_kill);
    assert!(
        first_run.iter().copied().eq(0..at_kill as u64),
        "the first run in order"
    );
    let resumed = second_run[0];
    assert!(
        resumed <= at_kill as u64 && resumed > 0,
        "resumed at {resumed}, from recorded progress, not from 0 (killed after {at_kill})"
    );
    assert!(
        second_run.iter().copied().eq(resumed..ITEMS),
        "the second run in order, to the end: {:?}…",
        &second_run[..second_run.len().min(20)]
    );
    terminate(&second);
    second.wait().unwrap();
    producer.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
