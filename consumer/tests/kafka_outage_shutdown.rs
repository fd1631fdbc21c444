//! A consumer stopped while its Kafka broker is away stops within a bound, whichever way it is
//! stopped: its runtime dropped with it running (as when a test fails, or a program panics), an
//! orderly shutdown in-process, and SIGTERM to the process. The first hung forever before: each
//! group consumer's close polled for a group coordinator on an async worker, which the dropping
//! runtime waited for (CI was held until its own limit by a test that had failed that way). Alone
//! in its binary: it stops a shared service.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use wal_namespaces::{Backend, Namespace};
use wal_testkit::write_true;
use wal_testkit::{Cql, Restart, TestProducer, consumer_process_logging_to, cql_target};
use wal_testkit::{eventually, namespace_json, put, stack, start_consumer, unique, write};

/// How long stopping may take with the broker away. The final commits wait at most 10 s and
/// leaving the groups 10 s; the rest is margin for this shared machine.
const STOP_BOUND: Duration = Duration::from_secs(60);
/// How long the broker is away before the consumers are stopped.
const OUTAGE_BEFORE_STOP: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_stopped_while_its_broker_is_away_stops_within_a_bound() {
    let cql = Cql::connect().await;
    let table = cql.table().await;
    // Two queues, each with its delay tiers: ten group consumers per consumer to close.
    let config = namespace_json(Backend::Kafka, 2, &cql_target(&table), "");
    let namespace = wal_namespaces::parse(&config, "test").unwrap();
    let name = namespace.name.clone();
    let dir = std::env::temp_dir().join(unique("outage-shutdown"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), &config).unwrap();
    let log = dir.join("consumer.log");

    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let abandoned = AbandonedConsumer::start(namespace.clone());
    let in_process = start_consumer(vec![namespace]).await;
    let mut process = consumer_process_logging_to(&dir, &log);
    // All three have joined their groups when every entry is applied (they share the groups, so
    // each may have applied some).
    for i in 0..20 {
        write_true(&producer.client, write(&name, &put(&format!("r{i}"), "up"))).await;
    }
    eventually(Duration::from_secs(60), "the 20 rows", || async {
        (cql.count(&table).await == 20).then_some(())
    })
    .await;
    producer.shutdown().await;

    stack("down", "kafka");
    let _restart = Restart("kafka");
    // Long enough for the clients to have lost the broker (they notice within a second or two).
    tokio::time::sleep(OUTAGE_BEFORE_STOP).await;

    let started = Instant::now();
    let dropped = tokio::task::spawn_blocking(move || abandoned.drop_within(STOP_BOUND))
        .await
        .unwrap();
    assert!(
        dropped,
        "a runtime dropped with a consumer running did not let go within {STOP_BOUND:?} with the broker away"
    );
    let abandoned_took = started.elapsed();

    let started = Instant::now();
    tokio::time::timeout(STOP_BOUND, in_process.shutdown())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the in-process consumer did not stop within {STOP_BOUND:?} with the broker away"
            )
        });
    let in_process_took = started.elapsed();

    let started = Instant::now();
    let pid = process.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = eventually(
        STOP_BOUND,
        "the consumer process to exit after SIGTERM with the broker away",
        || std::future::ready(process.try_wait().unwrap()),
    )
    .await;
    let process_took = started.elapsed();
    assert!(
        status.success(),
        "SIGTERM stops the consumer cleanly: {status}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("wal-consumer stopped"),
        "the consumer process says it stopped:\n{text}"
    );
    println!(
        "with the broker away: a runtime dropped with its consumer let go in {abandoned_took:?}; \
         the in-process consumer stopped in {in_process_took:?}, the process in {process_took:?}"
    );
}

/// A consumer on a runtime of its own, on a thread of its own, for dropping as a failed test's
/// runtime is dropped: with the consumer still running, never shut down.
struct AbandonedConsumer {
    drop_now: mpsc::Sender<()>,
    dropped: mpsc::Receiver<()>,
}

impl AbandonedConsumer {
    fn start(namespace: Namespace) -> Self {
        let (drop_now, drop_signal) = mpsc::channel();
        let (dropped_signal, dropped) = mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let consumer = runtime.block_on(start_consumer(vec![namespace]));
            let _ = drop_signal.recv();
            drop(consumer);
            drop(runtime);
            let _ = dropped_signal.send(());
        });
        Self { drop_now, dropped }
    }

    /// Drops the consumer's runtime; whether that finished within `limit`.
    fn drop_within(self, limit: Duration) -> bool {
        self.drop_now.send(()).unwrap();
        self.dropped.recv_timeout(limit).is_ok()
    }
}
