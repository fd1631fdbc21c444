//! A consumer stopped while its Kafka broker is away stops within a bound, whichever way it is
//! stopped: its runtime dropped with it running (as when a test fails, or a program panics), an
//! orderly shutdown in-process, and SIGTERM to the process. Before, the first took 10 s or never
//! ended (each in about half the runs here): each group consumer's close polled for a group
//! coordinator on an async worker, and the dropping runtime waited for it and for the broker
//! calls in flight on its blocking threads. Alone in its binary: it stops a shared
//! service.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::mpsc;
use std::time::{Duration, Instant};

use wal_consumer::{Consumer, ConsumerHandle};
use wal_namespaces::{Backend, Namespace};
use wal_testkit::write_true;
use wal_testkit::{Cql, Restart, TestProducer, consumer_process_logging_to, cql_target};
use wal_testkit::{eventually, local_stack, namespace_json, put, stack, start_consumer, unique};
use wal_testkit::{terminate, write};

/// How long stopping may take with the broker away, as `wal-consumer --help` promises: the final
/// commits wait at most 10 s and leaving the groups 10 s (no entry is in progress, so the
/// shutdown grace is not used); a backlog reading under way ends within 5 s; the rest is margin
/// for this shared machine. It took 9 to 10 s in-process and 0.2 to 5 s as a process here.
const STOP_BOUND: Duration = Duration::from_secs(35);
/// How long a runtime dropped with a consumer running may take to let go. Nothing in that drop
/// waits on a broker now: it took 0.1 to 0.2 s here. Before, it took 10 s (the backlog and probe
/// calls in flight timing out) or never ended (a consumer's close).
const LET_GO_BOUND: Duration = Duration::from_secs(5);
/// How long the broker is away before the consumers are stopped.
const OUTAGE_BEFORE_STOP: Duration = Duration::from_secs(5);
/// Rows written through each consumer's namespace before the outage.
const ROWS: i64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_stopped_while_its_broker_is_away_stops_within_a_bound() {
    let cql = Cql::connect().await;
    // A namespace of its own for each consumer, so each has joined its groups once its own rows
    // are applied. Two queues each, with their delay tiers: ten group consumers apiece to close.
    // The abandoned consumer's rows come last, just before the outage: the close of a consumer
    // that was busy when its broker went away is the one that never finished.
    let abandoned_ns = Served::new(&cql).await;
    let in_process_ns = Served::new(&cql).await;
    let process_ns = Served::new(&cql).await;
    let dir = std::env::temp_dir().join(unique("outage-shutdown"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{}.json", process_ns.namespace.name)),
        &process_ns.config,
    )
    .unwrap();
    let log = dir.join("consumer.log");

    let all = [&in_process_ns, &process_ns, &abandoned_ns];
    let mut producer = TestProducer::start(all.map(|s| s.namespace.clone()).to_vec()).await;
    let abandoned = AbandonedConsumer::start(abandoned_ns.namespace.clone());
    let in_process = uncommitting_consumer(in_process_ns.namespace.clone()).await;
    let mut process = consumer_process_logging_to(&dir, &log);
    for served in all {
        for i in 0..ROWS {
            let id = format!("r{i}");
            write_true(
                &producer.client,
                write(&served.namespace.name, &put(&id, "up")),
            )
            .await;
        }
        eventually(
            Duration::from_secs(60),
            "each consumer's own rows",
            || async { (cql.count(&served.table).await == ROWS).then_some(()) },
        )
        .await;
    }
    producer.shutdown().await;

    stack("down", "kafka");
    let _restart = Restart("kafka");
    // Long enough for the clients to have lost the broker (they notice within a second or two).
    tokio::time::sleep(OUTAGE_BEFORE_STOP).await;

    let started = Instant::now();
    let dropped = tokio::task::spawn_blocking(move || abandoned.drop_within(LET_GO_BOUND))
        .await
        .unwrap();
    assert!(
        dropped,
        "a runtime dropped with a consumer running did not let go within {LET_GO_BOUND:?} with the broker away"
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
    terminate(&process.0);
    let status = eventually(
        STOP_BOUND,
        "the consumer process to exit after SIGTERM with the broker away",
        || std::future::ready(process.0.try_wait().unwrap()),
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

/// A consumer whose Kafka consumers never commit by themselves (an interval of an hour), so the
/// offsets of the entries it applies are stored but not committed when the broker goes away: as
/// for entries applied from the read-ahead during an outage. Closing then has a commit to make,
/// which waits for a group coordinator.
async fn uncommitting_consumer(namespace: Namespace) -> ConsumerHandle {
    let mut settings = local_stack().settings().unwrap();
    settings.clusters = settings
        .clusters
        .tune_kafka(|kafka| kafka.commit_interval = Duration::from_secs(3600));
    Consumer::start(&settings, vec![namespace])
        .await
        .unwrap()
        .spawn()
}

/// A Kafka namespace of two queues, its JSON, and the new table it delivers to.
struct Served {
    namespace: Namespace,
    config: String,
    table: String,
}

impl Served {
    async fn new(cql: &Cql) -> Self {
        let table = cql.table().await;
        let config = namespace_json(Backend::Kafka, 2, &cql_target(&table), "");
        let namespace = wal_namespaces::parse(&config, "test").unwrap();
        Self {
            namespace,
            config,
            table,
        }
    }
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
