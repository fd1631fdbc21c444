#![allow(clippy::expect_used, clippy::unwrap_used)]

//! Cross-region replication on the real stack: a source region's producer and consumer on Kafka,
//! and for each destination region a `wal-writer` with a memcached of its own (the stack's
//! memcached, memcached2 and memcached3), all on loopback.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memcache::exp::AsyncMetaClient;
use tokio::net::TcpListener;
use tonic::{Request, Response, Status};
use wal_proto::v1::region_writer_server::{RegionWriter, RegionWriterServer};
use wal_proto::v1::{ApplyReplicatedRequest, ApplyReplicatedResponse, ApplyResult};
use wal_testkit::ConsumerHandle;
use wal_testkit::{
    Backend, TestProducer, TestWriter, cache_converges, cache_delete, cache_set, cached,
    eventually, keyed, namespace_with_target, region_caches, region_target, start_consumer_with,
    write_all_durably,
};
use wal_writer::{RegionWriterService, WriterOptions};

const LIMIT: Duration = Duration::from_secs(120);
/// Quick retries, so a test sees many.
const QUICK: &str = r#""retry_policy": {"max_attempts": 50, "initial_backoff_ms": 20, "multiplier": 2.0, "max_backoff_ms": 100, "jitter": 0.0}"#;

async fn producer_in(region: &str, namespaces: Vec<wal_namespaces::Namespace>) -> TestProducer {
    let region = region.to_owned();
    TestProducer::start_with(namespaces, move |options| options.region = region).await
}

async fn consumer_in(region: &str, namespaces: Vec<wal_namespaces::Namespace>) -> ConsumerHandle {
    let region = region.to_owned();
    start_consumer_with(namespaces, move |options| options.region = region).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_region_ends_with_the_sources_last_write_of_each_key() {
    const KEYS: usize = 1000;
    const ROUNDS: usize = 5;
    let caches = region_caches();
    let writers = [
        TestWriter::start("regionb", &caches[0]).await,
        TestWriter::start("regionc", &caches[1]).await,
        TestWriter::start("regiond", &caches[2]).await,
    ];
    let target = region_target(&writers.iter().collect::<Vec<_>>());
    let namespace = namespace_with_target(Backend::Kafka, 2, &target, QUICK);
    let name = namespace.name.clone();
    let mut producer = producer_in("regiona", vec![namespace.clone()]).await;
    let consumer = consumer_in("regiona", vec![namespace]).await;

    // Sets and deletes interleaved; each round after the last one was stored, so every key's
    // writes have one order.
    let prefix = wal_testkit::unique("rep");
    let mut expected = BTreeMap::new();
    for round in 0..ROUNDS {
        let mut writes = Vec::new();
        for k in 0..KEYS {
            let key = format!("{prefix}-{k}");
            let (payload, value) = if (k + round) % 3 == 2 {
                (cache_delete(&key), None)
            } else {
                let value = format!("v{round}");
                (cache_set(&key, &value), Some(value))
            };
            writes.push(keyed(&name, &key, &payload));
            expected.insert(key, value);
        }
        write_all_durably(&producer.client, writes, 100, 8).await;
    }
    for cache in &caches {
        cache_converges(cache, &expected).await;
    }
    consumer.shutdown().await;
    producer.shutdown().await;
    for mut writer in writers {
        writer.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_regions_replicating_to_each_other_apply_each_write_once_and_never_loop() {
    let caches = region_caches();
    // Region a's cache is caches[1], region b's caches[2]; each writer applies there.
    let writer_a = TestWriter::start("region-a", &caches[1]).await;
    let writer_b = TestWriter::start("region-b", &caches[2]).await;
    // Both regions run the same namespace config (as a deployment would), each with its own
    // topic; each consumer skips its own region.
    let target = region_target(&[&writer_a, &writer_b]);
    let in_a = namespace_with_target(Backend::Kafka, 1, &target, QUICK);
    let in_b = namespace_with_target(Backend::Kafka, 1, &target, QUICK);
    let mut producer_a = producer_in("region-a", vec![in_a.clone()]).await;
    let mut producer_b = producer_in("region-b", vec![in_b.clone()]).await;
    let consumer_a = consumer_in("region-a", vec![in_a.clone()]).await;
    let consumer_b = consumer_in("region-b", vec![in_b.clone()]).await;

    let prefix = wal_testkit::unique("bi");
    let (from_a, from_b) = (format!("{prefix}-from-a"), format!("{prefix}-from-b"));
    let writes_a = (0..20)
        .map(|i| {
            keyed(
                &in_a.name,
                &format!("{from_a}-{i}"),
                &cache_set(&format!("{from_a}-{i}"), "a"),
            )
        })
        .collect();
    let writes_b = (0..20)
        .map(|i| {
            keyed(
                &in_b.name,
                &format!("{from_b}-{i}"),
                &cache_set(&format!("{from_b}-{i}"), "b"),
            )
        })
        .collect();
    write_all_durably(&producer_a.client, writes_a, 10, 2).await;
    write_all_durably(&producer_b.client, writes_b, 10, 2).await;

    // Each region's writes arrive in the other region's cache, and only there.
    let expect = |prefix: &str, value: Option<&str>| -> BTreeMap<String, Option<String>> {
        (0..20)
            .map(|i| (format!("{prefix}-{i}"), value.map(str::to_owned)))
            .collect()
    };
    cache_converges(&caches[2], &expect(&from_a, Some("a"))).await;
    cache_converges(&caches[1], &expect(&from_b, Some("b"))).await;
    cache_converges(&caches[1], &expect(&from_a, None)).await;
    cache_converges(&caches[2], &expect(&from_b, None)).await;

    // No record came back: each topic holds exactly the writes made in its region (and its
    // readers' heartbeats, written there too).
    for (namespace, count, origin) in [(&in_a, 20, "region-a"), (&in_b, 20, "region-b")] {
        let log = wal_testkit::kafka_log(&namespace.queues[0].name).await;
        let writes = log.iter().filter(|e| !e.heartbeat).count();
        assert_eq!(writes, count, "writes on {}", namespace.queues[0].name);
        assert!(log.iter().all(|e| e.origin_region == origin), "{log:?}");
    }
    consumer_a.shutdown().await;
    consumer_b.shutdown().await;
    producer_a.shutdown().await;
    producer_b.shutdown().await;
}

/// A writer that answers RETRYABLE for one chosen entry its first `failures` times, and records
/// the order in which it applied each key's entries.
struct Flaky {
    inner: RegionWriterService,
    fail_key: String,
    failures: Mutex<u32>,
    applied: Arc<Mutex<Vec<(String, String)>>>,
}

#[tonic::async_trait]
impl RegionWriter for Flaky {
    async fn apply_replicated(
        &self,
        request: Request<ApplyReplicatedRequest>,
    ) -> Result<Response<ApplyReplicatedResponse>, Status> {
        let request = request.into_inner();
        let mut fail = vec![false; request.entries.len()];
        let mut passed = ApplyReplicatedRequest {
            source_region: request.source_region.clone(),
            entries: Vec::new(),
        };
        for (i, entry) in request.entries.iter().enumerate() {
            let mut failures = self.failures.lock().unwrap();
            if entry.key == self.fail_key && *failures > 0 {
                *failures -= 1;
                fail[i] = true;
            } else {
                passed.entries.push(entry.clone());
            }
        }
        let mut answers = if passed.entries.is_empty() {
            Vec::new()
        } else {
            let kept = passed.entries.clone();
            let answers = self
                .inner
                .apply_replicated(Request::new(passed))
                .await?
                .into_inner()
                .outcomes;
            let mut applied = self.applied.lock().unwrap();
            for (entry, answer) in kept.iter().zip(&answers) {
                if answer.result() == ApplyResult::Applied {
                    applied.push((
                        entry.key.clone(),
                        String::from_utf8_lossy(entry_payload(entry)).into_owned(),
                    ));
                }
            }
            answers
        }
        .into_iter();
        let outcomes = fail
            .into_iter()
            .map(|failed| {
                if failed {
                    wal_proto::v1::ApplyOutcome {
                        result: ApplyResult::Retryable as i32,
                        reason: "injected: this entry's attempt timed out".into(),
                    }
                } else {
                    answers.next().expect("an answer per passed entry")
                }
            })
            .collect();
        Ok(Response::new(ApplyReplicatedResponse { outcomes }))
    }
}

fn entry_payload(entry: &wal_proto::v1::Entry) -> &[u8] {
    match &entry.body {
        Some(wal_proto::v1::entry::Body::Payload(payload)) => payload,
        _ => &[],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_entry_failing_in_place_holds_back_only_its_key_and_is_applied_first() {
    let caches = region_caches();
    let prefix = wal_testkit::unique("flaky");
    let slow_key = format!("{prefix}-slow");
    let applied = Arc::new(Mutex::new(Vec::new()));
    let options = WriterOptions::for_local_stack("regionb", vec![caches[0].clone()]);
    let flaky = Flaky {
        inner: RegionWriterService::new(options.settings().unwrap()).unwrap(),
        fail_key: slow_key.clone(),
        failures: Mutex::new(5),
        applied: Arc::clone(&applied),
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RegionWriterServer::new(flaky))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let target = format!(
        r#"{{"kind": "region", "settings": {{"regions": {{"regionb": {{"writer": "{address}"}}}}}}}}"#
    );
    let namespace = namespace_with_target(Backend::Kafka, 1, &target, QUICK);
    let name = namespace.name.clone();
    let mut producer = producer_in("regiona", vec![namespace.clone()]).await;
    let consumer = consumer_in("regiona", vec![namespace]).await;

    // Entry n (the slow key's first write) fails five times; the entries after it (other keys,
    // and the slow key's second write) succeed or wait.
    let mut writes = vec![keyed(&name, &slow_key, &cache_set(&slow_key, "first"))];
    writes.extend((0..20).map(|i| {
        let key = format!("{prefix}-{i}");
        keyed(&name, &key, &cache_set(&key, "other"))
    }));
    writes.push(keyed(&name, &slow_key, &cache_set(&slow_key, "second")));
    for request in writes {
        wal_testkit::write_true(&producer.client, request).await;
    }
    let mut expected: BTreeMap<String, Option<String>> = (0..20)
        .map(|i| (format!("{prefix}-{i}"), Some("other".to_owned())))
        .collect();
    expected.insert(slow_key.clone(), Some("second".to_owned()));
    cache_converges(&caches[0], &expected).await;
    // The record is written when the writer answers, after the cache write: wait for both of
    // the slow key's writes to be in it before reading it.
    let applied = eventually(LIMIT, "the slow key's two writes recorded", || async {
        let applied = applied.lock().unwrap().clone();
        (applied.iter().filter(|(key, _)| *key == slow_key).count() >= 2).then_some(applied)
    })
    .await;
    let slow: Vec<&String> = applied
        .iter()
        .filter(|(key, _)| *key == slow_key)
        .map(|(_, payload)| payload)
        .collect();
    assert_eq!(
        slow.len(),
        2,
        "each of the slow key's writes applied once: {slow:?}"
    );
    assert!(
        slow[0].contains("first") && slow[1].contains("second"),
        "the slow key's writes in the order written: {slow:?}"
    );
    let first_other = applied
        .iter()
        .position(|(key, _)| *key != slow_key)
        .expect("other keys applied");
    let slow_first = applied
        .iter()
        .position(|(key, _)| *key == slow_key)
        .expect("the slow key applied");
    assert!(
        first_other < slow_first,
        "other keys went on while the slow key's first write was retried: {applied:?}"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    server.abort();
}

/// The member ids of a Kafka consumer group: a member keeps its id for as long as its consumer
/// runs, so an unchanged id means the reader was not restarted.
async fn members(group: String) -> Vec<String> {
    use rdkafka::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    tokio::task::spawn_blocking(move || {
        let client: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", wal_testkit::kafka_bootstrap())
            .create()
            .unwrap();
        let groups = client
            .fetch_group_list(Some(&group), Duration::from_secs(10))
            .unwrap();
        groups
            .groups()
            .iter()
            .flat_map(|g| g.members().iter().map(|m| m.id().to_owned()))
            .collect()
    })
    .await
    .unwrap()
}

/// How many samples of the scrape carry namespace `namespace` and region `region`.
fn region_samples(namespace: &str, region: &str) -> usize {
    let (namespace, region) = (
        format!("namespace=\"{namespace}\""),
        format!("region=\"{region}\""),
    );
    wal_testkit::scrape()
        .lines()
        .filter(|line| {
            !line.starts_with('#') && line.contains(&namespace) && line.contains(&region)
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn adding_or_removing_a_region_by_reload_starts_or_stops_only_its_reader() {
    use wal_namespaces::feed::{Feed, Source};
    wal_testkit::scrape();
    let caches = region_caches();
    let b = TestWriter::start("regionb", &caches[0]).await;
    let c = TestWriter::start("regionc", &caches[1]).await;
    let d = TestWriter::start("regiond", &caches[2]).await;
    let dir = std::env::temp_dir().join(wal_testkit::unique("regions"));
    std::fs::create_dir_all(&dir).unwrap();
    let text = wal_testkit::namespace_json(Backend::Kafka, 1, &region_target(&[&b, &c]), QUICK);
    let namespace = wal_namespaces::parse(&text, "test").unwrap();
    let (name, topic) = (namespace.name.clone(), namespace.queues[0].name.clone());
    std::fs::write(dir.join("ns.json"), &text).unwrap();
    let mut producer = TestProducer::start(vec![namespace]).await;
    let consumer = wal_testkit::start_consumer_following(
        Feed::open(Source::Folder(dir.clone())).await.unwrap(),
    )
    .await;
    let group = |region: &str| format!("wal-consumer.{topic}.region-{region}");
    let prefix = wal_testkit::unique("reload");
    let written = async |key: &str, caches: &[&String]| {
        wal_testkit::write_true(&producer.client, keyed(&name, key, &cache_set(key, "x"))).await;
        let expected = BTreeMap::from([(key.to_owned(), Some("x".to_owned()))]);
        for cache in caches {
            cache_converges(cache, &expected).await;
        }
    };
    written(&format!("{prefix}-1"), &[&caches[0], &caches[1]]).await;
    let (member_b, member_c) = (
        members(group("regionb")).await,
        members(group("regionc")).await,
    );
    assert_eq!(
        (member_b.len(), member_c.len()),
        (1, 1),
        "{member_b:?} {member_c:?}"
    );

    // Region d added: its reader starts; b's and c's go on as they were.
    let added = text.replace(&region_target(&[&b, &c]), &region_target(&[&b, &c, &d]));
    std::fs::write(dir.join("ns.json"), &added).unwrap();
    eventually(LIMIT, "region d's reader in its group", || async {
        (members(group("regiond")).await.len() == 1).then_some(())
    })
    .await;
    written(
        &format!("{prefix}-2"),
        &[&caches[0], &caches[1], &caches[2]],
    )
    .await;
    assert_eq!(
        members(group("regionb")).await,
        member_b,
        "b's reader was not restarted"
    );
    assert_eq!(
        members(group("regionc")).await,
        member_c,
        "c's reader was not restarted"
    );
    let member_d = members(group("regiond")).await;
    eventually(LIMIT, "region d's replication metrics scraped", || async {
        (region_samples(&name, "regiond") > 0).then_some(())
    })
    .await;
    assert!(
        region_samples(&name, "regionc") > 0,
        "{}",
        wal_testkit::scrape()
    );

    // Region c removed: its reader stops; b's and d's go on.
    let removed = text.replace(&region_target(&[&b, &c]), &region_target(&[&b, &d]));
    std::fs::write(dir.join("ns.json"), &removed).unwrap();
    eventually(LIMIT, "region c's reader gone from its group", || async {
        members(group("regionc")).await.is_empty().then_some(())
    })
    .await;
    written(&format!("{prefix}-3"), &[&caches[0], &caches[2]]).await;
    eventually(LIMIT, "region c's metrics gone from the scrape", || async {
        (region_samples(&name, "regionc") == 0).then_some(())
    })
    .await;
    assert!(
        region_samples(&name, "regionb") > 0 && region_samples(&name, "regiond") > 0,
        "b's and d's metrics stay: {}",
        wal_testkit::scrape()
    );
    assert_eq!(members(group("regionb")).await, member_b);
    assert_eq!(members(group("regiond")).await, member_d);
    let cache_c = AsyncMetaClient::connect(caches[1].as_str()).await.unwrap();
    assert_eq!(
        cached(&cache_c, &format!("{prefix}-3")).await,
        None,
        "nothing goes to c now"
    );

    consumer.shutdown().await;
    producer.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// How long the down region's writer stays away.
const OUTAGE: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_region_down_for_minutes_holds_back_no_other_region_and_drains_when_back() {
    let caches = region_caches();
    let mut down = TestWriter::start("regionb", &caches[0]).await;
    let mut others = [
        TestWriter::start("regionc", &caches[1]).await,
        TestWriter::start("regiond", &caches[2]).await,
    ];
    let target = region_target(&[&down, &others[0], &others[1]]);
    let namespace = namespace_with_target(Backend::Kafka, 2, &target, QUICK);
    let name = namespace.name.clone();
    let mut producer = producer_in("regiona", vec![namespace.clone()]).await;
    let consumer = consumer_in("regiona", vec![namespace]).await;
    let prefix = wal_testkit::unique("down");

    // Steady load all along: a key a write, about 20 a second.
    // How many are written so far: on a busy machine the load runs below 20 a second, so what
    // the regions must hold is counted, not assumed from the time.
    let so_far = Arc::new(AtomicUsize::new(0));
    let load = {
        let client = producer.client.clone();
        let (name, prefix) = (name.clone(), prefix.clone());
        let stop = tokio_util::sync::CancellationToken::new();
        let stopped = stop.clone();
        let so_far = Arc::clone(&so_far);
        let task = tokio::spawn(async move {
            let mut written = 0usize;
            while !stopped.is_cancelled() {
                let key = format!("{prefix}-{written}");
                wal_testkit::write_true(&client, keyed(&name, &key, &cache_set(&key, "v"))).await;
                written += 1;
                so_far.store(written, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            written
        });
        (stop, task)
    };
    let until = |n: usize| -> BTreeMap<String, Option<String>> {
        (0..n)
            .map(|i| (format!("{prefix}-{i}"), Some("v".to_owned())))
            .collect()
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let address = down.address;
    down.stop().await;
    let outage = tokio::time::Instant::now();

    // Meanwhile the other regions keep up: what was written well into the outage reaches them
    // while region b is still away, and does not reach b.
    tokio::time::sleep(OUTAGE / 2).await;
    let written_midway = until(so_far.load(Ordering::Relaxed));
    assert!(
        written_midway.len() > 100,
        "the load kept writing during the outage ({} written)",
        written_midway.len()
    );
    for cache in &caches[1..] {
        cache_converges(cache, &written_midway).await;
    }
    assert!(
        outage.elapsed() < OUTAGE,
        "the other regions were checked during the outage"
    );
    let cache_b = AsyncMetaClient::connect(caches[0].as_str()).await.unwrap();
    let last_midway = format!("{prefix}-{}", written_midway.len() - 1);
    assert_eq!(
        cached(&cache_b, &last_midway).await,
        None,
        "b's writer is down"
    );

    tokio::time::sleep(OUTAGE.saturating_sub(outage.elapsed())).await;
    let mut back = TestWriter::start_at("regionb", &caches[0], address).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (stop, task) = load;
    stop.cancel();
    let written = task.await.unwrap();
    // Nothing lost: region b drains its backlog, and every region holds every write.
    for cache in &caches {
        cache_converges(cache, &until(written)).await;
    }
    consumer.shutdown().await;
    producer.shutdown().await;
    back.stop().await;
    for writer in &mut others {
        writer.stop().await;
    }
}
