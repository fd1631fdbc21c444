#![allow(clippy::expect_used, clippy::unwrap_used)]

//! With the Kafka broker stopped, WriteToLog answers FALSE or UNKNOWN within its deadline and
//! never TRUE; when the broker returns, writes succeed again without restarting the producer.
//!
//! This stops the local broker (`scripts/stack down kafka`), so it is the only test in its binary
//! and its name says "outage": cargo runs test binaries one at a time, and scripts/test runs the
//! outage programs on a stack of their own, one test at a time; no other test sees the outage.

use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_proto::v1::Trilean;
use wal_testkit::{Restart, TestProducer, namespace, read_entry, reader, stack, write, write_true};

const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_broker_stopped_writes_are_never_true_and_succeed_again_when_it_returns() {
    let ns = namespace(Backend::Kafka, 1, "");
    let mut producer = TestProducer::start_with(vec![ns.clone()], |options| {
        options.write_timeout_ms = WRITE_TIMEOUT.as_millis() as u64;
    })
    .await;
    write_true(&producer.client, write(&ns.name, b"before")).await;

    let restart = Restart("kafka");
    stack("down", "kafka");
    for i in 0..5 {
        let started = Instant::now();
        let answer = producer
            .client
            .write_to_log(write(&ns.name, format!("during {i}").as_bytes()))
            .await;
        let elapsed = started.elapsed();
        let answer = answer
            .expect("an answer, not a transport error")
            .into_inner();
        assert!(
            matches!(answer.durable(), Trilean::False | Trilean::Unknown),
            "write {i} during the outage answered {:?}",
            answer.durable()
        );
        assert!(
            !answer.message.is_empty(),
            "a FALSE or UNKNOWN answer says why"
        );
        assert!(
            elapsed < WRITE_TIMEOUT + Duration::from_secs(2),
            "write {i} took {elapsed:?}"
        );
        println!(
            "during outage: {:?} after {elapsed:?}: {}",
            answer.durable(),
            answer.message
        );
    }
    drop(restart);

    let deadline = Instant::now() + Duration::from_secs(60);
    let recovered = loop {
        let answer = producer
            .client
            .write_to_log(write(&ns.name, b"after"))
            .await
            .unwrap()
            .into_inner();
        if answer.durable() == Trilean::True {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "writes did not recover within 60 s: {}",
            answer.message
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    read_entry(reader(&ns, 0).await.as_ref(), &recovered.entry_id).await;
    producer.shutdown().await;
}
