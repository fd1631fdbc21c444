//! While a target is unavailable its entries are held in place, whatever the kind: an HTTP
//! upstream that refuses connections or answers 503 (or 429, for its Retry-After), a memcached
//! that is down. The namespaces'
//! retry schedule (3 attempts from 100 ms) is over long before the target returns, yet nothing
//! is retried or dead-lettered for its absence, and everything arrives once it is back. A slow
//! target is not an unavailable one: its timeouts are the entries' own trouble. The memcached
//! test stops the shared memcached, so no other test in this binary may use it.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use memcache::exp::{AsyncMetaClient, GetStatus};
use wal_consumer::ConsumerHandle;
use wal_namespaces::{Backend, Namespace};
use wal_testkit::{
    Restart, Upstream, eventually, refusing_address, stack, start_consumer, start_consumer_with,
};
use wal_testkit::{TestProducer, namespace_with_target, write, write_true};

const SHORT: &str = r#""retry_policy": {"max_attempts": 3, "initial_backoff_ms": 100, "multiplier": 2.0, "max_backoff_ms": 200, "jitter": 0.0}"#;
/// How long the target stays away: ten times the whole retry schedule.
const AWAY: Duration = Duration::from_secs(3);
const ENTRIES: usize = 5;

async fn write_entries(
    producer: &mut TestProducer,
    namespace: &Namespace,
    payload: &dyn Fn(usize) -> Vec<u8>,
) {
    for i in 0..ENTRIES {
        write_true(&producer.client, write(&namespace.name, &payload(i))).await;
    }
}

/// The consumer held entries for the target and used no attempt on them.
async fn assert_held(consumer: &ConsumerHandle, endpoint: &str) {
    let deliverer = consumer.deliverer();
    eventually(
        Duration::from_secs(30),
        "the target's breaker open",
        || async {
            let open = deliverer.targets().open_breakers();
            open.iter().any(|b| b.endpoint == endpoint).then_some(())
        },
    )
    .await;
    tokio::time::sleep(AWAY).await;
    let stats = deliverer.stats();
    assert!(stats.held.load(Ordering::Relaxed) > 0, "entries were held");
    assert_eq!(stats.retried.load(Ordering::Relaxed), 0, "no attempt used");
    assert_eq!(
        stats.dead_lettered.load(Ordering::Relaxed),
        0,
        "nothing dead-lettered"
    );
    assert_eq!(stats.delivered.load(Ordering::Relaxed), 0);
}

async fn assert_all_delivered(consumer: &ConsumerHandle) {
    let stats = consumer.deliverer().stats();
    eventually(Duration::from_secs(30), "every entry delivered", || async {
        (stats.delivered.load(Ordering::Relaxed) == ENTRIES as u64).then_some(())
    })
    .await;
}

fn assert_nothing_retried(consumer: &ConsumerHandle) {
    let stats = consumer.deliverer().stats();
    assert_eq!(stats.retried.load(Ordering::Relaxed), 0);
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 0);
    assert!(consumer.deliverer().targets().open_breakers().is_empty());
}

fn http_target(url: &str) -> String {
    format!(r#"{{"kind": "http", "settings": {{"url": "{url}"}}}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_refusing_connections_holds_its_entries_until_it_listens() {
    let address = refusing_address();
    let url = format!("http://{address}/hook");
    let namespace = namespace_with_target(Backend::Kafka, 1, &http_target(&url), SHORT);
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;
    write_entries(&mut producer, &namespace, &|i| format!("e{i}").into_bytes()).await;
    assert_held(&consumer, &format!("http/http://{address}")).await;

    let upstream = Upstream::serve(&address.to_string(), |_| 200, Duration::ZERO).await;
    assert_all_delivered(&consumer).await;
    assert!(upstream.count() >= ENTRIES);
    assert_nothing_retried(&consumer);
    consumer.shutdown().await;
    producer.shutdown().await;
}

/// What the 503 upstream answers now.
static STATUS: AtomicU16 = AtomicU16::new(503);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_answering_503_holds_its_entries_until_it_serves() {
    let upstream = Upstream::start(|_| STATUS.load(Ordering::Relaxed)).await;
    let namespace = namespace_with_target(Backend::Sqs, 1, &upstream.target(), SHORT);
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;
    write_entries(&mut producer, &namespace, &|i| format!("e{i}").into_bytes()).await;
    let origin = upstream.url.trim_end_matches("/hook");
    assert_held(&consumer, &format!("http/{origin}")).await;
    // While held, the upstream hears only the probes, a few a second at most.
    let probes = upstream.count();
    assert!(probes < 20, "{probes} requests while unavailable");

    STATUS.store(200, Ordering::Relaxed);
    assert_all_delivered(&consumer).await;
    assert_nothing_retried(&consumer);
    consumer.shutdown().await;
    producer.shutdown().await;
}

/// A throttling upstream (429) is held like an unavailable one, and not asked again before the
/// Retry-After it gave: the breaker's own back-off (250 ms, doubling to 2 s) would have probed
/// three or four times in those 4 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_answering_429_holds_its_entries_for_the_retry_after_it_gives() {
    const RETRY_AFTER: Duration = Duration::from_secs(4);
    let upstream = Upstream::throttling(&RETRY_AFTER.as_secs().to_string()).await;
    let namespace = namespace_with_target(Backend::Kafka, 1, &upstream.target(), SHORT);
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;
    write_entries(&mut producer, &namespace, &|i| format!("e{i}").into_bytes()).await;
    let origin = upstream.url.trim_end_matches("/hook");
    assert_held(&consumer, &format!("http/{origin}")).await;

    // The first 429 opened the breaker; requests already under way may answer just after it.
    // Then nothing until the wait it asked for is over, and then a probe.
    let first = upstream.received()[0].at;
    eventually(
        Duration::from_secs(30),
        "a probe once the wait is over",
        || async {
            let received = upstream.received();
            received
                .iter()
                .any(|r| r.at >= first + RETRY_AFTER)
                .then_some(())
        },
    )
    .await;
    let too_soon: Vec<Duration> = upstream
        .received()
        .iter()
        .map(|r| r.at.duration_since(first).unwrap_or_default())
        .filter(|since| *since > Duration::from_secs(1) && *since < RETRY_AFTER)
        .collect();
    assert!(
        too_soon.is_empty(),
        "asked again {too_soon:?} after the first 429, before its Retry-After of {RETRY_AFTER:?}"
    );

    upstream.mend();
    assert_all_delivered(&consumer).await;
    assert_nothing_retried(&consumer);
    let attempts: Vec<String> = upstream
        .received()
        .iter()
        .map(|r| r.headers["x-wal-attempt"].clone())
        .collect();
    assert!(
        attempts.iter().all(|a| a == "0"),
        "a throttled upstream spent attempts: {attempts:?}"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memcached_down_holds_its_entries_until_it_returns() {
    let target = r#"{"kind": "cache", "settings": {"ttl_seconds": 600}}"#;
    let namespace = namespace_with_target(Backend::Kafka, 1, target, SHORT);
    let key = |i: usize| format!("{}-{i}", namespace.name);
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;

    stack("down", "memcached");
    let restart = Restart("memcached");
    write_entries(&mut producer, &namespace, &|i| {
        format!(r#"{{"set": {{"key": "{}", "value": "v"}}}}"#, key(i)).into_bytes()
    })
    .await;
    let servers = wal_testkit::memcached();
    assert_held(&consumer, &format!("cache/{}", servers.join(","))).await;
    drop(restart);

    assert_all_delivered(&consumer).await;
    let client = AsyncMetaClient::connect(servers[0].as_str()).await.unwrap();
    eventually(Duration::from_secs(30), "every key set", || async {
        for i in 0..ENTRIES {
            let got = client.get(key(i)).send().await.ok()?;
            if got.status != GetStatus::Hit {
                return None;
            }
        }
        Some(())
    })
    .await;
    assert_nothing_retried(&consumer);
    consumer.shutdown().await;
    producer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_target_does_not_open_the_breaker() {
    // Every answer comes after the apply timeout: each attempt is this entry's trouble, retried
    // and finally dead-lettered, and the target is never taken for unavailable.
    let upstream = Upstream::serve("127.0.0.1:0", |_| 200, Duration::from_millis(800)).await;
    let namespace = namespace_with_target(Backend::Kafka, 1, &upstream.target(), SHORT);
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer_with(vec![namespace.clone()], |options| {
        options.apply_timeout_ms = 200;
    })
    .await;
    write_entries(&mut producer, &namespace, &|i| format!("e{i}").into_bytes()).await;
    let stats = consumer.deliverer().stats();
    eventually(
        Duration::from_secs(60),
        "every entry dead-lettered",
        || async { (stats.dead_lettered.load(Ordering::Relaxed) == ENTRIES as u64).then_some(()) },
    )
    .await;
    assert_eq!(stats.retried.load(Ordering::Relaxed), 2 * ENTRIES as u64);
    assert_eq!(stats.held.load(Ordering::Relaxed), 0, "nothing held");
    consumer.shutdown().await;
    producer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_target_holds_the_queue_entries_for_a_healthy_target_wait_behind_it() {
    let dead = refusing_address();
    let healthy = Upstream::start(|_| 200).await;
    let dead_url = format!("http://{dead}/hook");
    let namespace = namespace_with_target(Backend::Kafka, 1, &http_target(&dead_url), SHORT);
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;
    let deliverer = consumer.deliverer();

    // One entry for the dead target (the namespace's default) opens its breaker.
    write_true(&producer.client, write(&namespace.name, b"to the dead one")).await;
    eventually(Duration::from_secs(30), "the breaker open", || async {
        (!deliverer.targets().open_breakers().is_empty()).then_some(())
    })
    .await;
    // The receive under way when it opened ends within the namespace's poll wait (10 s); from
    // then on the queue is held.
    tokio::time::sleep(namespace.consumer.poll_wait + Duration::from_secs(1)).await;
    for i in 0..ENTRIES {
        let mut request = write(
            &namespace.name,
            format!("to the healthy one {i}").as_bytes(),
        );
        request.target = Some(wal_proto::v1::Target {
            kind: "http".into(),
            settings_json: format!(r#"{{"url": "{}"}}"#, healthy.url),
        });
        write_true(&producer.client, request).await;
    }
    tokio::time::sleep(AWAY).await;
    assert_eq!(healthy.count(), 0, "entries behind a held one wait");

    let revived = Upstream::serve(&dead.to_string(), |_| 200, Duration::ZERO).await;
    eventually(Duration::from_secs(30), "every entry delivered", || async {
        let delivered = deliverer.stats().delivered.load(Ordering::Relaxed);
        (delivered == ENTRIES as u64 + 1).then_some(())
    })
    .await;
    assert_eq!(healthy.count(), ENTRIES);
    assert_eq!(revived.count(), 1);
    assert_nothing_retried(&consumer);
    consumer.shutdown().await;
    producer.shutdown().await;
}

/// How long memcached stays away in the several-stores test: a minute unless
/// `WAL_STORES_AWAY_SECS` says otherwise.
fn store_away() -> Duration {
    Duration::from_secs(wal_testkit::env_u64("WAL_STORES_AWAY_SECS", 60))
}

/// One namespace, three destinations: its table (the default target), a cache of the table's
/// rows and an events topic, each read by a reader of its own. While memcached is down the
/// table and the topic take every write at their own pace, the cache's reader holds its
/// entries (its breaker open, no attempt used); once memcached is back every row reaches the
/// cache too, and nothing was retried or dead-lettered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_is_down_holds_back_no_other_destination() {
    let writes = wal_testkit::cql_rows::env_usize("WAL_STORES_WRITES", 10_000);
    let cql = wal_testkit::Cql::connect().await;
    let table = cql.table().await;
    let topic = wal_testkit::unique("order-events");
    let prefix = format!("{table}:");
    let extra = format!(
        r#"{SHORT}, "destinations": [
            {{"name": "cache", "start_from": "earliest", "target": {{"kind": "cache",
              "settings": {{"ttl_seconds": 600, "rows": {{"key": ["id"], "prefix": "{prefix}"}}}}}}}},
            {{"name": "events", "start_from": "earliest", "target": {{"kind": "kafka",
              "settings": {{"topic": "{topic}"}}}}}}]"#
    );
    let namespace =
        namespace_with_target(Backend::Kafka, 2, &wal_testkit::cql_target(&table), &extra);
    wal_testkit::provision_topic(&topic).await;
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;
    let stats = consumer.deliverer().stats();

    stack("down", "memcached");
    let restart = Restart("memcached");
    let down_at = std::time::Instant::now();
    let requests = (0..writes)
        .map(|i| wal_proto::v1::WriteToLogRequest {
            key: format!("o{i}"),
            ..write(
                &namespace.name,
                &wal_testkit::put(&format!("o{i}"), &format!("v{i}")),
            )
        })
        .collect();
    wal_testkit::write_all_durably(&producer.client, requests, 100, 4).await;
    // The table and the topic keep their pace while the cache is away.
    let kept_pace = eventually(store_away(), "the table and the topic hold every write", || async {
        let rows = cql.rows(&table).await.len();
        let records = wal_testkit::topic_records(&topic).await;
        eprintln!("memcached down {:>4.1} s: table {rows}/{writes}, topic {records}/{writes}, cache held {}", down_at.elapsed().as_secs_f64(), stats.held.load(Ordering::Relaxed));
        (rows == writes && records >= writes).then(|| down_at.elapsed())
    })
    .await;
    let servers = wal_testkit::memcached();
    let open = consumer.deliverer().targets().open_breakers();
    assert!(
        open.iter()
            .any(|b| b.endpoint == format!("cache/{}", servers.join(","))),
        "the cache's breaker is open while memcached is down: {open:?}"
    );
    // Counted once acknowledged, a moment after the row or record is seen.
    eventually(
        Duration::from_secs(30),
        "the table's and the topic's entries acknowledged",
        || async { (stats.delivered.load(Ordering::Relaxed) == 2 * writes as u64).then_some(()) },
    )
    .await;
    assert!(
        stats.held.load(Ordering::Relaxed) > 0,
        "the cache's entries were held"
    );
    eprintln!(
        "the table and the topic held all {writes} writes {kept_pace:?} after memcached went down"
    );
    tokio::time::sleep(store_away().saturating_sub(down_at.elapsed())).await;
    drop(restart);

    let back_at = std::time::Instant::now();
    eventually(
        Duration::from_secs(120),
        "every entry in all three destinations",
        || async { (stats.delivered.load(Ordering::Relaxed) == 3 * writes as u64).then_some(()) },
    )
    .await;
    eprintln!(
        "the cache caught up {:?} after memcached returned",
        back_at.elapsed()
    );
    let client = AsyncMetaClient::connect(servers[0].as_str()).await.unwrap();
    for i in 0..writes {
        let cached = wal_testkit::cached(&client, &format!("{prefix}o{i}")).await;
        let row: serde_json::Value = serde_json::from_str(&cached.unwrap_or_default())
            .unwrap_or_else(|e| panic!("row o{i} in the cache as JSON: {e}"));
        assert_eq!(
            row,
            serde_json::json!({"id": format!("o{i}"), "value": format!("v{i}")})
        );
    }
    assert_eq!(
        wal_testkit::topic_records(&topic).await,
        writes,
        "one record per write on the topic, no repeats"
    );
    assert_nothing_retried(&consumer);
    consumer.shutdown().await;
    producer.shutdown().await;
}
