//! A producer started in-process on the real local stack, a client for it, and a reader for its
//! queues (through the queue layer, whose conformance suite checks it on the same brokers).

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use wal_core::entry::Entry;
use wal_core::queue::kafka::{KafkaBackend, KafkaSettings};
use wal_core::queue::sqs::{SqsBackend, SqsSettings};
use wal_core::queue::{Queue, QueueSpec};
use wal_namespaces::{Backend, Namespace};
use wal_producer::registry::Registry;
use wal_producer::{Producer, ProducerOptions};
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::{Lifecycle, WriteToLogRequest};

pub fn unique(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &id[..12])
}

/// A namespace config on `backend` with fresh queue names and `extra` top-level fields (JSON
/// object members, without braces).
pub fn namespace(backend: Backend, queues: usize, extra: &str) -> Namespace {
    namespace_with_target(
        backend,
        queues,
        r#"{"kind": "cql", "settings": {"keyspace": "app", "table": "t"}}"#,
        extra,
    )
}

/// Like [`namespace`], with `target` (a JSON object) as the default target.
pub fn namespace_with_target(
    backend: Backend,
    queues: usize,
    target: &str,
    extra: &str,
) -> Namespace {
    let text = namespace_json(backend, queues, target, extra);
    wal_namespaces::parse(&text, "test").unwrap_or_else(|e| panic!("{e}"))
}

/// The config file text [`namespace_with_target`] parses, for a process that reads a folder.
pub fn namespace_json(backend: Backend, queues: usize, target: &str, extra: &str) -> String {
    let name = unique("ns");
    let names: Vec<String> = (0..queues).map(|i| format!("\"{name}-q{i}\"")).collect();
    let (kind, key) = match backend {
        Backend::Kafka => ("KAFKA", "wal-kafka-topics"),
        Backend::Sqs => ("SQS", "wal-queue"),
    };
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(", {extra}")
    };
    format!(
        r#"{{"namespace": "{name}",
            "persistence_configurations": {{"persistence_configuration": [
              {{"physical_storage": {{"type": "{kind}"}}, "config": {{"{key}": [{}]}}}}]}},
            "default_target": {target}{extra}}}"#,
        names.join(", ")
    )
}

pub struct TestProducer {
    pub client: WriteAheadLogClient<Channel>,
    pub channel: Channel,
    pub address: std::net::SocketAddr,
    pub registry: Arc<Registry>,
    /// Where reloads go; `live.current()` is the set served now.
    pub live: Arc<wal_producer::live::LiveRegistry>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestProducer {
    pub async fn start(namespaces: Vec<Namespace>) -> Self {
        Self::start_with(namespaces, |_| {}).await
    }

    pub async fn start_with(
        namespaces: Vec<Namespace>,
        adjust: impl FnOnce(&mut ProducerOptions),
    ) -> Self {
        Self::launch(namespaces, adjust, None).await
    }

    /// A producer serving `feed`'s namespaces and applying its changes until shut down.
    pub async fn start_following(feed: wal_namespaces::feed::Feed) -> Self {
        Self::launch(feed.namespaces().to_vec(), |_| {}, Some(feed)).await
    }

    async fn launch(
        namespaces: Vec<Namespace>,
        adjust: impl FnOnce(&mut ProducerOptions),
        feed: Option<wal_namespaces::feed::Feed>,
    ) -> Self {
        let mut options = ProducerOptions::for_local_stack(PathBuf::new());
        adjust(&mut options);
        let producer = Producer::start(&options, namespaces)
            .await
            .unwrap_or_else(|e| {
                panic!("producer start (is the stack up? scripts/stack up): {e:#}")
            });
        if let Some(feed) = feed {
            // Ends with the test's runtime.
            let never = tokio_util::sync::CancellationToken::new();
            tokio::spawn(producer.live().follow(feed, never));
        }
        let registry = producer.registry();
        let live = producer.live();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(producer.serve(listener, async {
            let _ = stopped.await;
        }));
        let channel = Channel::from_shared(format!("http://{address}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        Self {
            client: WriteAheadLogClient::new(channel.clone()),
            channel,
            address,
            registry,
            live,
            stop: Some(stop),
            server: Some(server),
        }
    }

    /// Starts a graceful shutdown and waits until the server has answered everything in flight.
    pub async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.unwrap().unwrap();
        }
    }
}

/// Writes `requests` in batches of `batch`, `concurrency` batches at a time, and asserts every
/// write is durable (TRUE).
/// Sends one write and asserts it was answered TRUE; returns the entry's id.
pub async fn write_true(
    client: &WriteAheadLogClient<Channel>,
    request: WriteToLogRequest,
) -> String {
    let answer = client
        .clone()
        .write_to_log(request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        answer.durable(),
        wal_proto::v1::Trilean::True,
        "{}",
        answer.message
    );
    answer.entry_id
}

pub async fn write_all_durably(
    client: &WriteAheadLogClient<Channel>,
    requests: Vec<WriteToLogRequest>,
    batch: usize,
    concurrency: usize,
) {
    use futures::StreamExt as _;
    use wal_proto::v1::{Trilean, WriteToLogBatchRequest};

    let batches = requests.chunks(batch).map(|chunk| {
        let mut client = client.clone();
        let writes = chunk.to_vec();
        async move {
            let answers = client
                .write_to_log_batch(WriteToLogBatchRequest { writes })
                .await
                .unwrap()
                .into_inner();
            for result in answers.results {
                let durable = result.response.as_ref().map(|a| a.durable());
                assert_eq!(
                    durable,
                    Some(Trilean::True),
                    "every write is stored: {result:?}"
                );
            }
        }
    });
    futures::stream::iter(batches)
        .buffer_unordered(concurrency)
        .collect::<Vec<()>>()
        .await;
}

pub fn write(namespace: &str, payload: &[u8]) -> WriteToLogRequest {
    WriteToLogRequest {
        namespace: namespace.to_owned(),
        payload: payload.to_vec(),
        ..WriteToLogRequest::default()
    }
}

pub fn delayed(
    namespace: &str,
    payload: &[u8],
    delay_millis: i64,
    original_micros: i64,
) -> WriteToLogRequest {
    WriteToLogRequest {
        lifecycle: Some(Lifecycle {
            delay_millis,
            jitter_millis: 0,
            original_write_time_micros: original_micros,
        }),
        ..write(namespace, payload)
    }
}

/// Handles on a namespace's queues for reading back what the producer wrote.
pub async fn reader(namespace: &Namespace, queue: usize) -> Arc<dyn Queue> {
    let config = &namespace.queues[queue];
    let spec = QueueSpec::new(&namespace.name, &config.name, &config.dlq);
    match config.backend {
        Backend::Kafka => {
            let bootstrap =
                std::env::var("WAL_KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:19092".into());
            let mut settings = KafkaSettings::new(&bootstrap);
            settings.group_prefix = unique("reader") + ".";
            Arc::new(KafkaBackend::new(settings).unwrap().queue(spec))
        }
        Backend::Sqs => {
            let endpoint = std::env::var("WAL_SQS_ENDPOINT")
                .unwrap_or_else(|_| "http://127.0.0.1:19324".into());
            Arc::new(
                SqsBackend::new(SqsSettings::local(&endpoint))
                    .await
                    .queue(spec),
            )
        }
    }
}

/// Everything that arrives on the queue within `window` (acknowledged as read).
pub async fn drain(queue: &dyn Queue, window: Duration) -> Vec<Entry> {
    drain_until(queue, window, |_| false).await
}

/// Reads until `enough` holds for what arrived (30 s at most; a new consumer group may take
/// seconds to join, more so right after a broker restart), then 2 s longer, so an entry that
/// should not be there has its chance to show up.
pub async fn read_back(queue: &dyn Queue, enough: impl Fn(&[Entry]) -> bool) -> Vec<Entry> {
    let mut entries = drain_until(queue, Duration::from_secs(30), enough).await;
    entries.extend(drain(queue, Duration::from_secs(2)).await);
    entries
}

async fn drain_until(
    queue: &dyn Queue,
    limit: Duration,
    done: impl Fn(&[Entry]) -> bool,
) -> Vec<Entry> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut entries = Vec::new();
    while !done(&entries) && tokio::time::Instant::now() < deadline {
        let wait = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .min(Duration::from_secs(1));
        for delivery in queue.receive(10, wait).await.expect("receive") {
            queue.acknowledge(&delivery).await.expect("ack");
            entries.push(
                delivery
                    .entry
                    .expect("the producer writes decodable entries"),
            );
        }
    }
    entries
}

/// Reads until an entry with `id` arrives (30 s at most).
pub async fn read_entry(queue: &dyn Queue, id: &str) -> Entry {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
        for delivery in queue
            .receive(10, Duration::from_secs(1))
            .await
            .expect("receive")
        {
            queue.acknowledge(&delivery).await.expect("ack");
            let entry = delivery.entry.expect("decodable");
            if entry.id == id {
                return entry;
            }
        }
    }
    panic!("entry {id} never arrived");
}

/// Every entry in a Kafka topic's log, read straight from its partitions (no consumer group, so
/// no join or rebalance can leave anything out): for checking what the broker holds.
pub async fn kafka_log(topic: &str) -> Vec<Entry> {
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    use rdkafka::message::Message as _;
    use rdkafka::{Offset, TopicPartitionList};

    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let bootstrap =
            std::env::var("WAL_KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:19092".into());
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", unique("log-reader"))
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let timeout = Duration::from_secs(10);
        let metadata = consumer.fetch_metadata(Some(&topic), timeout).unwrap();
        let partitions: Vec<i32> = metadata.topics()[0]
            .partitions()
            .iter()
            .map(|p| p.id())
            .collect();
        let mut list = TopicPartitionList::new();
        let mut ends = std::collections::BTreeMap::new();
        for partition in partitions {
            let (low, high) = consumer
                .fetch_watermarks(&topic, partition, timeout)
                .unwrap();
            if high > low {
                list.add_partition_offset(&topic, partition, Offset::Beginning)
                    .unwrap();
                ends.insert(partition, high);
            }
        }
        consumer.assign(&list).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut entries = Vec::new();
        while !ends.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "reading {topic} timed out"
            );
            let Some(message) = consumer.poll(Duration::from_secs(1)) else {
                continue;
            };
            let message = message.unwrap();
            if let Ok(entry) = wal_core::entry::decode(message.payload().unwrap_or_default()) {
                entries.push(entry);
            }
            if ends.get(&message.partition()) == Some(&(message.offset() + 1)) {
                ends.remove(&message.partition());
            }
        }
        entries
    })
    .await
    .unwrap()
}
