//! The target conformance suite: every target kind, against its real service, passes the same
//! checks: success has its effect, an unreachable service is a retryable failure, a rejected
//! mutation is a permanent one, and applying an entry twice has the effect of applying it once.
//! Plus, for cql, convergence: the same entries applied in another order, with repeats, leave
//! the same rows.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use memcache::exp::{AsyncMetaClient, GetStatus};
use rand::SeedableRng as _;
use rand::seq::SliceRandom as _;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::{Headers as _, Message as _};
use rdkafka::{Offset, TopicPartitionList};
use wal_apply::clients::{ClientSettings, Clients};
use wal_apply::{Mutation, TargetError, TargetRegistry};
use wal_queue::entry::{self, Body, Entry, Target as TargetSpec};
use wal_queue::kafka::{KafkaBackend, KafkaSettings};
use wal_queue::{Produce, QueueSpec};
use wal_testkit::{Cql, KEYSPACE, Upstream, delete, put, unique};

/// Addresses where nothing listens: every client made from these fails to connect.
const NOWHERE: &str = "127.0.0.1:1";

/// The local stack's addresses (the environment `scripts/stack env` prints), as a consumer on
/// the stack takes them.
fn settings() -> ClientSettings {
    ClientSettings {
        cql_nodes: wal_testkit::cql_nodes(),
        cql_credentials: None,
        cql_tls_ca: None,
        writer_tls: None,
        memcached: wal_testkit::memcached(),
        kafka_bootstrap: wal_testkit::kafka_bootstrap(),
        kafka_client: Default::default(),
        request_timeout: Duration::from_secs(3),
    }
}

fn registry(settings: ClientSettings) -> TargetRegistry {
    TargetRegistry::builtin(Arc::new(Clients::new(settings).unwrap()))
}

fn unreachable_registry() -> TargetRegistry {
    registry(ClientSettings {
        cql_nodes: vec![NOWHERE.into()],
        cql_credentials: None,
        cql_tls_ca: None,
        kafka_client: Default::default(),
        writer_tls: None,
        memcached: vec![NOWHERE.into()],
        kafka_bootstrap: NOWHERE.into(),
        request_timeout: Duration::from_secs(2),
    })
}

fn spec(kind: &str, settings: &str) -> TargetSpec {
    TargetSpec {
        kind: kind.into(),
        settings_json: settings.into(),
    }
}

fn entry_for(key: &str, payload: Vec<u8>, written_micros: i64) -> Entry {
    Entry {
        version: entry::ENTRY_VERSION,
        id: entry::new_entry_id(),
        namespace: "conformance".into(),
        key: key.into(),
        body: Some(Body::Payload(payload)),
        original_write_time_micros: written_micros,
        ..Entry::default()
    }
}

async fn apply(
    registry: &TargetRegistry,
    spec: &TargetSpec,
    entry: &Entry,
) -> Result<(), TargetError> {
    let target = registry.resolve(spec).await?;
    let Some(Body::Payload(payload)) = &entry.body else {
        unreachable!()
    };
    target
        .apply(Mutation {
            entry,
            payload,
            trace: None,
        })
        .await
}

/// What the suite needs of one target kind.
trait Harness: Sized {
    async fn new() -> Self;
    /// A target on the healthy service.
    fn target(&self) -> TargetSpec;
    /// The same kind pointed at nothing (used with [`unreachable_registry`]).
    fn unreachable(&self) -> TargetSpec {
        self.target()
    }
    /// A mutation that writes `value` under `key`.
    fn write(&self, key: &str, value: &str) -> Vec<u8>;
    /// A mutation the service rejects, and the target to send it to.
    fn rejected(&self) -> (TargetSpec, Vec<u8>);
    /// The effects seen for `key`, one per distinct entry as an idempotent reader sees them.
    async fn observed(&self, key: &str) -> Vec<String>;
}

macro_rules! target_conformance {
    ($module:ident, $harness:ty) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn success_has_its_effect() {
                let harness = <$harness>::new().await;
                let key = unique("k");
                let entry = entry_for(&key, harness.write(&key, "v1"), entry::now_micros());
                apply(&registry(settings()), &harness.target(), &entry)
                    .await
                    .unwrap();
                assert_eq!(harness.observed(&key).await, ["v1"]);
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_unreachable_service_is_unavailable_not_the_entrys_fault() {
                let harness = <$harness>::new().await;
                let key = unique("k");
                let entry = entry_for(&key, harness.write(&key, "v1"), entry::now_micros());
                let result = apply(&unreachable_registry(), &harness.unreachable(), &entry).await;
                // Unavailable opens the endpoint's breaker and holds the entry; Retryable would
                // use up its attempts.
                let Err(error @ TargetError::Unavailable { .. }) = result else {
                    panic!("unreachable: expected Unavailable, got {result:?}");
                };
                // The driver's error is kept, not only its words.
                assert!(error.cause().is_some(), "{error:?} keeps its cause");
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_rejected_mutation_is_a_permanent_failure() {
                let harness = <$harness>::new().await;
                let (target, payload) = harness.rejected();
                let entry = entry_for(&unique("k"), payload, entry::now_micros());
                let result = apply(&registry(settings()), &target, &entry).await;
                let Err(TargetError::Permanent { .. }) = result else {
                    panic!("rejected: expected Permanent, got {result:?}");
                };
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn applying_an_entry_twice_has_the_effect_of_once() {
                let harness = <$harness>::new().await;
                let registry = registry(settings());
                let key = unique("k");
                let entry = entry_for(&key, harness.write(&key, "v1"), entry::now_micros());
                apply(&registry, &harness.target(), &entry).await.unwrap();
                apply(&registry, &harness.target(), &entry).await.unwrap();
                assert_eq!(harness.observed(&key).await, ["v1"]);
            }
        }
    };
}

target_conformance!(cql, CqlHarness);
target_conformance!(cache, CacheHarness);
target_conformance!(kafka, KafkaHarness);
target_conformance!(http, HttpHarness);

struct CqlHarness {
    cql: Cql,
    table: String,
}

impl Harness for CqlHarness {
    async fn new() -> Self {
        let cql = Cql::connect().await;
        let table = cql.table().await;
        Self { cql, table }
    }
    fn target(&self) -> TargetSpec {
        spec(
            "cql",
            &format!(r#"{{"keyspace": "{KEYSPACE}", "table": "{}"}}"#, self.table),
        )
    }
    fn write(&self, key: &str, value: &str) -> Vec<u8> {
        put(key, value)
    }
    fn rejected(&self) -> (TargetSpec, Vec<u8>) {
        // The server refuses a table that does not exist.
        (
            spec(
                "cql",
                &format!(r#"{{"keyspace": "{KEYSPACE}", "table": "no_such_table"}}"#),
            ),
            put("k", "v"),
        )
    }
    async fn observed(&self, key: &str) -> Vec<String> {
        self.cql
            .rows(&self.table)
            .await
            .remove(key)
            .flatten()
            .into_iter()
            .collect()
    }
}

struct CacheHarness {
    client: AsyncMetaClient,
}

impl Harness for CacheHarness {
    async fn new() -> Self {
        Self {
            client: AsyncMetaClient::connect(settings().memcached[0].as_str())
                .await
                .unwrap(),
        }
    }
    fn target(&self) -> TargetSpec {
        spec("cache", r#"{"ttl_seconds": 600}"#)
    }
    fn write(&self, key: &str, value: &str) -> Vec<u8> {
        format!(r#"{{"set": {{"key": "{key}", "value": "{value}"}}}}"#).into_bytes()
    }
    fn rejected(&self) -> (TargetSpec, Vec<u8>) {
        // memcached refuses values over its item size limit (1 MiB by default).
        let big = "x".repeat(2 * 1024 * 1024);
        (
            self.target(),
            format!(r#"{{"set": {{"key": "big", "value": "{big}"}}}}"#).into_bytes(),
        )
    }
    async fn observed(&self, key: &str) -> Vec<String> {
        let got = self.client.get(key).send().await.unwrap();
        match (got.status, got.value) {
            (GetStatus::Hit, Some(value)) => vec![String::from_utf8(value).unwrap()],
            _ => Vec::new(),
        }
    }
}

struct KafkaHarness {
    topic: String,
}

impl Harness for KafkaHarness {
    async fn new() -> Self {
        let topic = unique("conformance-topic");
        let mut kafka = KafkaSettings::new(&settings().kafka_bootstrap);
        kafka.partitions = 1;
        let backend = KafkaBackend::new(kafka).unwrap();
        backend
            .queue(QueueSpec::new(
                "conformance",
                &topic,
                &format!("{topic}-dlq"),
            ))
            .provision()
            .await
            .unwrap();
        Self { topic }
    }
    fn target(&self) -> TargetSpec {
        spec("kafka", &format!(r#"{{"topic": "{}"}}"#, self.topic))
    }
    fn write(&self, _key: &str, value: &str) -> Vec<u8> {
        value.as_bytes().to_vec()
    }
    fn rejected(&self) -> (TargetSpec, Vec<u8>) {
        // Larger than the broker's and producer's record limit.
        (self.target(), vec![b'x'; 2 * 1024 * 1024])
    }
    async fn observed(&self, key: &str) -> Vec<String> {
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", settings().kafka_bootstrap)
            .set("group.id", unique("observer"))
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let (_, high) = consumer
            .fetch_watermarks(&self.topic, 0, Duration::from_secs(10))
            .unwrap();
        let mut partitions = TopicPartitionList::new();
        partitions
            .add_partition_offset(&self.topic, 0, Offset::Beginning)
            .unwrap();
        consumer.assign(&partitions).unwrap();
        // One effect per entry id: how a reader of the topic drops repeats.
        let mut by_id = BTreeMap::new();
        let mut read = 0;
        while read < high {
            let Some(message) = consumer.poll(Duration::from_secs(10)) else {
                panic!("topic ended early")
            };
            let message = message.unwrap();
            read = message.offset() + 1;
            if message.key() != Some(key.as_bytes()) {
                continue;
            }
            let headers = message.headers().unwrap();
            let id = headers
                .iter()
                .find(|h| h.key == "wal-entry-id")
                .and_then(|h| h.value)
                .unwrap()
                .to_vec();
            by_id.insert(
                id,
                String::from_utf8(message.payload().unwrap().to_vec()).unwrap(),
            );
        }
        by_id.into_values().collect()
    }
}

struct HttpHarness {
    upstream: Upstream,
}

impl Harness for HttpHarness {
    async fn new() -> Self {
        let upstream = Upstream::start(|r| {
            if r.body.starts_with(b"reject") {
                422
            } else {
                200
            }
        })
        .await;
        Self { upstream }
    }
    fn target(&self) -> TargetSpec {
        spec("http", &format!(r#"{{"url": "{}"}}"#, self.upstream.url))
    }
    fn unreachable(&self) -> TargetSpec {
        spec("http", &format!(r#"{{"url": "http://{NOWHERE}/hook"}}"#))
    }
    fn write(&self, key: &str, value: &str) -> Vec<u8> {
        format!("{key}={value}").into_bytes()
    }
    fn rejected(&self) -> (TargetSpec, Vec<u8>) {
        (self.target(), b"reject".to_vec())
    }
    async fn observed(&self, key: &str) -> Vec<String> {
        // One effect per idempotency key: how an upstream that honours the header applies them.
        let prefix = format!("{key}=");
        let by_key: BTreeMap<String, String> = self
            .upstream
            .received()
            .into_iter()
            .filter_map(|r| {
                let body = String::from_utf8(r.body).ok()?;
                let value = body.strip_prefix(&prefix)?.to_owned();
                Some((r.headers.get("idempotency-key")?.clone(), value))
            })
            .collect();
        by_key.into_values().collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cql_entries_replayed_in_another_order_with_repeats_leave_the_same_rows() {
    let cql = Cql::connect().await;
    let (in_order, shuffled) = (cql.table().await, cql.table().await);
    let registry = registry(settings());
    let target = |table: &str| {
        spec(
            "cql",
            &format!(r#"{{"keyspace": "{KEYSPACE}", "table": "{table}"}}"#),
        )
    };

    // 200 puts and deletes over 10 keys, each with its own original write time.
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let base = entry::now_micros() - 3_600_000_000;
    let mut entries = Vec::new();
    let mut oracle: BTreeMap<String, Option<String>> = BTreeMap::new();
    for i in 0..200i64 {
        let key = format!("key{}", i % 10);
        let deletes = i % 7 == 3;
        let payload = if deletes {
            delete(&key)
        } else {
            put(&key, &format!("value{i}"))
        };
        oracle.insert(key.clone(), (!deletes).then(|| format!("value{i}")));
        entries.push(entry_for(&key, payload, base + i));
    }
    for entry in &entries {
        apply(&registry, &target(&in_order), entry).await.unwrap();
    }
    let mut replay: Vec<&Entry> = entries.iter().chain(entries.iter().take(50)).collect();
    replay.shuffle(&mut rng);
    for entry in replay {
        apply(&registry, &target(&shuffled), entry).await.unwrap();
    }
    let expected: BTreeMap<String, Option<String>> =
        oracle.into_iter().filter(|(_, v)| v.is_some()).collect();
    assert_eq!(
        cql.rows(&in_order).await,
        expected,
        "in order: the last write of each key"
    );
    assert_eq!(
        cql.rows(&shuffled).await,
        expected,
        "shuffled with repeats: the same rows"
    );
    let keys: BTreeSet<_> = expected.keys().collect();
    assert!(
        keys.len() >= 5,
        "the check covers live rows, not only deletes"
    );
}
