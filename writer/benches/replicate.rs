//! Replication to three regions against the same work done by hand, side by side in one run on
//! the local stack.
//!
//! Platform: one namespace replicated from region `bench-a` to three regions on loopback, each a
//! `wal-writer` applying to its own memcached (the stack's memcached, memcached2, memcached3),
//! the consumer in-process with its defaults (256 entries in flight per region's reader).
//! Baseline: per region, a bare rdkafka consumer with a group of its own that decodes each entry,
//! reads its cache payload and sets it in that region's memcached, 256 at once, storing each
//! offset after its set: what a team would write by hand, without the writer hop, key lanes,
//! retries, breakers or DLQs.
//!
//! Two measures per round, each side in turn:
//! - throughput: entries already on a topic (4 partitions), applied in all three regions; rate =
//!   entries x 3 / time from the first apply to the last; CPU per applied entry = this process's
//!   CPU time (everything of the side runs in it; Kafka and memcached are other processes) over
//!   entries x 3;
//! - lag: writes through the producer (WriteToLog, TRUE) at half the platform's measured rate for
//!   BENCH_LAG_SECS; every 20th write's key is polled in each region's cache (every millisecond
//!   at first, then every tenth of the time waited so far), and its lag is the time from the
//!   TRUE answer to the key being visible there.
//!
//! Run with:
//!     scripts/stack up && cargo bench -p wal-writer --bench replicate
//! Tunables (environment): BENCH_ENTRIES (20000), BENCH_ROUNDS (3), BENCH_LAG_SECS (10),
//! BENCH_LAG_RATE (writes per second in the lag measure; default half the platform's rate).

#![allow(clippy::expect_used, clippy::unwrap_used)]

/// The allocator the platform's binaries use; both sides run with it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memcache::exp::{AsyncMetaClient, GetStatus};
use rdkafka::consumer::{Consumer as _, StreamConsumer};
use rdkafka::message::Message as _;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tokio::sync::Semaphore;
use wal_queue::entry::{self, Body, Entry};
use wal_queue::kafka::{KafkaBackend, KafkaSettings};
use wal_queue::{Produce, QueueSpec};
use wal_testkit::ConsumerHandle;
use wal_testkit::measure::{Rate, cpu_seconds, median, percentile, poll_after};
use wal_testkit::{
    Backend, TestProducer, TestWriter, cache_set, env_u64, keyed, namespace_with_target,
    region_caches, region_target, start_consumer_with, unique,
};

const IN_FLIGHT: usize = 256;
const SAMPLE_EVERY: u64 = 20;

/// Puts `entries` cache sets (keys `{prefix}-{i}`) on `topic`, made as the producer would.
async fn fill(namespace: &wal_namespaces::Namespace, prefix: &str, entries: u64) {
    let backend = KafkaBackend::new(KafkaSettings::new(&wal_testkit::kafka_bootstrap())).unwrap();
    let config = &namespace.queues[0];
    let queue = Arc::new(backend.queue(QueueSpec::of(namespace, config)));
    queue.provision().await.unwrap();
    let target = namespace.default_target.as_ref().map(|t| t.entry_target());
    let now = entry::now_micros();
    let limit = Arc::new(Semaphore::new(2000));
    let mut tasks = Vec::new();
    for i in 0..entries {
        let permit = Arc::clone(&limit).acquire_owned().await.unwrap();
        let key = format!("{prefix}-{i}");
        let entry = Entry {
            version: entry::ENTRY_VERSION,
            id: entry::new_entry_id(),
            namespace: namespace.name.clone(),
            body: Some(Body::Payload(cache_set(&key, "v").into_bytes())),
            key,
            target: target.clone(),
            original_write_time_micros: now,
            deliver_at_micros: now,
            enqueued_at_micros: now,
            origin_region: "bench-a".into(),
            ..Entry::default()
        };
        let queue = Arc::clone(&queue);
        tasks.push(tokio::spawn(async move {
            queue.enqueue(&entry).await.unwrap();
            drop(permit);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// Waits until `applied()` reaches `total`, timing from its first apply.
async fn timed(total: u64, applied: impl Fn() -> u64) -> Rate {
    let cpu = cpu_seconds();
    while applied() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let first = Instant::now();
    while applied() < total {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Throughput from the first apply; CPU from the start of the wait.
    Rate::over(total as usize, first.elapsed(), cpu_seconds() - cpu)
}

/// The platform side: the namespace, its three writers and a consumer replicating it.
struct Platform {
    namespace: wal_namespaces::Namespace,
    writers: Vec<TestWriter>,
}

impl Platform {
    async fn new() -> Self {
        let caches = region_caches();
        let mut writers = Vec::new();
        for (i, region) in ["bench-b", "bench-c", "bench-d"].iter().enumerate() {
            writers.push(TestWriter::start(region, &caches[i]).await);
        }
        let target = region_target(&writers.iter().collect::<Vec<_>>());
        let unlimited = r#""rate_limit": {"writes_per_second": 1000000, "burst": 1000000, "max_in_flight": 40000}"#;
        let namespace = namespace_with_target(Backend::Kafka, 1, &target, unlimited);
        Self { namespace, writers }
    }

    async fn consumer(&self) -> ConsumerHandle {
        start_consumer_with(vec![self.namespace.clone()], |o| {
            o.region = "bench-a".into()
        })
        .await
    }

    async fn throughput(&self, entries: u64) -> Rate {
        fill(&self.namespace, &unique("p"), entries).await;
        let consumer = self.consumer().await;
        let stats = Arc::clone(consumer.deliverer());
        let rate = timed(entries * 3, || {
            stats.stats().delivered.load(Ordering::Relaxed)
        })
        .await;
        consumer.shutdown().await;
        rate
    }
}

/// The baseline side: per region a bare rdkafka consumer setting each entry in its cache.
struct Baseline {
    namespace: wal_namespaces::Namespace,
}

impl Baseline {
    fn new() -> Self {
        let unlimited = r#""rate_limit": {"writes_per_second": 1000000, "burst": 1000000, "max_in_flight": 40000}"#;
        let namespace = namespace_with_target(
            Backend::Kafka,
            1,
            r#"{"kind": "cache", "settings": {}}"#,
            unlimited,
        );
        Self { namespace }
    }

    /// Starts the three regions' consumers; each counts its sets in `applied`.
    fn start(&self, applied: &Arc<AtomicU64>) -> Vec<tokio::task::JoinHandle<()>> {
        let topic = self.namespace.queues[0].name.clone();
        let group = unique("baseline");
        region_caches()
            .into_iter()
            .enumerate()
            .map(|(i, cache)| {
                let (topic, applied) = (topic.clone(), Arc::clone(applied));
                let group = format!("{group}-{i}");
                tokio::spawn(async move { by_hand(&topic, &group, &cache, applied).await })
            })
            .collect()
    }

    async fn throughput(&self, entries: u64) -> Rate {
        fill(&self.namespace, &unique("b"), entries).await;
        let applied = Arc::new(AtomicU64::new(0));
        let tasks = self.start(&applied);
        let rate = timed(entries * 3, || applied.load(Ordering::Relaxed)).await;
        tasks.iter().for_each(|t| t.abort());
        rate
    }
}

/// What a team would write by hand for one region.
async fn by_hand(topic: &str, group: &str, cache_at: &str, applied: Arc<AtomicU64>) {
    let consumer: Arc<StreamConsumer> = Arc::new(
        ClientConfig::new()
            .set("bootstrap.servers", wal_testkit::kafka_bootstrap())
            .set("group.id", group)
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.offset.store", "false")
            .create()
            .unwrap(),
    );
    consumer.subscribe(&[topic]).unwrap();
    // As many idle connections kept as sets run at once, as the platform's client does.
    let cache = AsyncMetaClient::connect(cache_at)
        .await
        .unwrap()
        .with_max_idle(IN_FLIGHT);
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    loop {
        let permit = Arc::clone(&slots).acquire_owned().await.unwrap();
        let message = consumer.recv().await.unwrap();
        let (partition, offset) = (message.partition(), message.offset());
        let entry = entry::decode(message.payload().unwrap_or_default()).unwrap();
        let Some(Body::Payload(payload)) = entry.body else {
            continue;
        };
        let set: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        let key = set["set"]["key"].as_str().unwrap().to_owned();
        let value = set["set"]["value"].as_str().unwrap().to_owned();
        let (cache, consumer, topic) = (cache.clone(), Arc::clone(&consumer), topic.to_owned());
        let applied = Arc::clone(&applied);
        tokio::spawn(async move {
            cache
                .set(key.as_str(), value.as_bytes())
                .send()
                .await
                .unwrap();
            let mut stored = TopicPartitionList::new();
            stored
                .add_partition_offset(&topic, partition, Offset::Offset(offset + 1))
                .unwrap();
            let _ = consumer.store_offsets(&stored);
            applied.fetch_add(1, Ordering::Relaxed);
            drop(permit);
        });
    }
}

/// Writes through `producer` at `rate` a second for `seconds` and measures, for every
/// [`SAMPLE_EVERY`]th write, the time from its TRUE to its key being visible in each region's
/// cache (milliseconds).
async fn lag(producer: &TestProducer, namespace: &str, rate: f64, seconds: u64) -> Vec<f64> {
    let caches: Vec<AsyncMetaClient> = futures::future::join_all(
        region_caches()
            .iter()
            .map(|c| AsyncMetaClient::connect(c.as_str())),
    )
    .await
    .into_iter()
    .map(Result::unwrap)
    .collect();
    let prefix = unique("lag");
    let every = Duration::from_secs_f64(1.0 / rate);
    let writes = (rate * seconds as f64) as u64;
    let started = tokio::time::Instant::now();
    let mut probes = Vec::new();
    let mut writing = Vec::new();
    for i in 0..writes {
        tokio::time::sleep_until(started + every.mul_f64(i as f64)).await;
        let key = format!("{prefix}-{i}");
        let request = keyed(namespace, &key, &cache_set(&key, "v"));
        let mut client = producer.client.clone();
        let caches = caches.clone();
        let write = async move {
            let answer = client.write_to_log(request).await.unwrap().into_inner();
            assert_eq!(answer.durable(), wal_proto::v1::Trilean::True);
            let durable = Instant::now();
            if i % SAMPLE_EVERY != 0 {
                return Vec::new();
            }
            let mut lags = Vec::new();
            for cache in &caches {
                loop {
                    let got = cache.get(key.as_str()).send().await.unwrap();
                    if got.status == GetStatus::Hit {
                        break;
                    }
                    tokio::time::sleep(poll_after(durable.elapsed())).await;
                }
                lags.push(durable.elapsed().as_secs_f64() * 1e3);
            }
            lags
        };
        if i % SAMPLE_EVERY == 0 {
            probes.push(tokio::spawn(write));
        } else {
            writing.push(tokio::spawn(write));
        }
    }
    for task in writing {
        task.await.unwrap();
    }
    let mut lags = Vec::new();
    for probe in probes {
        lags.extend(probe.await.unwrap());
    }
    lags
}

#[tokio::main]
async fn main() {
    let entries = env_u64("BENCH_ENTRIES", 20_000);
    let rounds = env_u64("BENCH_ROUNDS", 3).max(1);
    let lag_seconds = env_u64("BENCH_LAG_SECS", 10);
    println!(
        "replicate to 3 regions: {entries} entries per round, {rounds} rounds, {IN_FLIGHT} in flight per region"
    );
    let (mut platform_rates, mut baseline_rates) = (Vec::new(), Vec::new());
    let (mut platform_cpu, mut baseline_cpu) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Fresh namespaces each round (so each side starts from an empty group), sides
        // alternating which goes first.
        let platform = Platform::new().await;
        let baseline = Baseline::new();
        let (p, b) = if round % 2 == 0 {
            let p = platform.throughput(entries).await;
            (p, baseline.throughput(entries).await)
        } else {
            let b = baseline.throughput(entries).await;
            (platform.throughput(entries).await, b)
        };
        println!(
            "  round {round}: platform {:>7.0} applied/s ({:>5.1} µs CPU/entry)   by hand {:>7.0}/s ({:>5.1} µs CPU/entry)   ratio {:.2}",
            p.per_second,
            p.cpu_micros,
            b.per_second,
            b.cpu_micros,
            p.per_second / b.per_second
        );
        platform_rates.push(p.per_second);
        baseline_rates.push(b.per_second);
        platform_cpu.push(p.cpu_micros);
        baseline_cpu.push(b.cpu_micros);
        for mut writer in platform.writers {
            writer.stop().await;
        }
    }
    let (p, b) = (median(&mut platform_rates), median(&mut baseline_rates));
    println!(
        "median:   platform {p:>7.0} applied/s ({:>5.1} µs CPU/entry)   by hand {b:>7.0}/s ({:>5.1} µs CPU/entry)   ratio {:.2} (goal >= 0.8)",
        median(&mut platform_cpu),
        median(&mut baseline_cpu),
        p / b
    );

    // Lag at half the platform's rate (writes per second, each applied in three regions), unless
    // BENCH_LAG_RATE says otherwise. The producer's writes cost CPU on the same machine too.
    let rate = match env_u64("BENCH_LAG_RATE", 0) {
        0 => p / 3.0 / 2.0,
        given => given as f64,
    };
    println!(
        "lag from TRUE to visible in each region's cache, {rate:.0} writes/s for {lag_seconds} s, every {SAMPLE_EVERY}th write sampled:"
    );
    let platform = Platform::new().await;
    let baseline = Baseline::new();
    let mut producer =
        TestProducer::start(vec![platform.namespace.clone(), baseline.namespace.clone()]).await;
    let consumer = platform.consumer().await;
    // The groups join before the clock starts.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut platform_lag = lag(&producer, &platform.namespace.name, rate, lag_seconds).await;
    consumer.shutdown().await;
    let applied = Arc::new(AtomicU64::new(0));
    let by_hand = baseline.start(&applied);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut baseline_lag = lag(&producer, &baseline.namespace.name, rate, lag_seconds).await;
    by_hand.iter().for_each(|t| t.abort());
    println!(
        "  platform p50 {:>6.1} ms  p99 {:>6.1} ms   by hand p50 {:>6.1} ms  p99 {:>6.1} ms   ({} and {} samples; goal p99 <= 50 ms)",
        percentile(&mut platform_lag, 0.5),
        percentile(&mut platform_lag, 0.99),
        percentile(&mut baseline_lag, 0.5),
        percentile(&mut baseline_lag, 0.99),
        platform_lag.len(),
        baseline_lag.len()
    );
    producer.shutdown().await;
    for mut writer in platform.writers {
        writer.stop().await;
    }
}
