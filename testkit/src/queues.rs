//! Readers for what the producer wrote and the consumer dead-lettered: a namespace's queues
//! (through the queue layer, whose conformance suite checks it on the same brokers) and a Kafka
//! topic's log read straight from its partitions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wal_namespaces::{Backend, Namespace};
use wal_queue::entry::Entry;
use wal_queue::kafka::{KafkaBackend, KafkaSettings};
use wal_queue::sqs::{SqsBackend, SqsSettings};
use wal_queue::{Queue, QueueSpec};

use crate::stack::{kafka_bootstrap, sqs_endpoint, unique};

/// Handles on a namespace's queues for reading back what the producer wrote.
pub async fn reader(namespace: &Namespace, queue: usize) -> Arc<dyn Queue> {
    let config = &namespace.queues[queue];
    let spec = QueueSpec::new(&namespace.name, &config.name, &config.dlq);
    match config.backend {
        Backend::Kafka => {
            let mut settings = KafkaSettings::new(&kafka_bootstrap());
            settings.group_prefix = unique("reader") + ".";
            Arc::new(KafkaBackend::new(settings).unwrap().queue(spec))
        }
        Backend::Sqs => Arc::new(
            SqsBackend::new(SqsSettings::local(&sqs_endpoint()))
                .await
                .queue(spec),
        ),
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
    kafka_log_on(&kafka_bootstrap(), topic).await
}

/// Like [`kafka_log`], on the Kafka cluster at `bootstrap` (none when it has no such topic).
pub async fn kafka_log_on(bootstrap: &str, topic: &str) -> Vec<Entry> {
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    use rdkafka::message::Message as _;
    use rdkafka::{Offset, TopicPartitionList};

    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
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
            if let Ok(entry) = wal_queue::entry::decode(message.payload().unwrap_or_default()) {
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

/// A handle on the DLQ of a namespace's first queue, for reading what was dead-lettered.
pub async fn dlq_reader(namespace: &Namespace) -> Arc<dyn Queue> {
    let mut dlq = namespace.clone();
    let queue = &mut dlq.queues[0];
    queue.name = queue.dlq.clone();
    reader(&dlq, 0).await
}

/// Reads the queue until an entry matching `wanted` arrives (60 s at most), acknowledging what
/// it reads.
pub async fn find_entry(queue: &dyn Queue, wanted: impl Fn(&Entry) -> bool) -> Entry {
    find_entries(queue, 1, wanted).await.remove(0)
}

/// Reads the queue until `count` entries matching `wanted` arrived (60 s at most), acknowledging
/// what it reads.
pub async fn find_entries(
    queue: &dyn Queue,
    count: usize,
    wanted: impl Fn(&Entry) -> bool,
) -> Vec<Entry> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut found = Vec::new();
    while found.len() < count {
        assert!(
            Instant::now() < deadline,
            "{} of {count} matching entries on {} within 60s",
            found.len(),
            queue.spec().name
        );
        for delivery in queue
            .receive(10, Duration::from_secs(1))
            .await
            .expect("receive")
        {
            queue.acknowledge(&delivery).await.expect("ack");
            if let Ok(entry) = delivery.entry
                && wanted(&entry)
            {
                found.push(entry);
            }
        }
    }
    found
}

/// Deletes every Kafka topic whose name starts with `prefix`, with its DLQ topic and delay
/// tiers when they share it: benchmarks call it at their end, for a million-entry run otherwise
/// leaves a gigabyte on the broker's disk. The prefix must name one benchmark run (`bench-`,
/// then the run's own id), so no other run's or test's topics go with it. A failure is
/// printed, not fatal: the figures stand.
pub async fn delete_topics(prefix: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::client::DefaultClientContext;

    assert!(
        prefix.starts_with("bench-") && prefix.len() >= "bench-x-1".len(),
        "delete_topics('{prefix}'): expected a prefix naming one benchmark run, 'bench-' then its id"
    );
    let admin: AdminClient<DefaultClientContext> = match rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_bootstrap())
        .create()
    {
        Ok(admin) => admin,
        Err(error) => return eprintln!("deleting topics '{prefix}*': {error}"),
    };
    let admin = Arc::new(admin);
    // The metadata call blocks; off the runtime's threads.
    let listing = Arc::clone(&admin);
    let listed = tokio::task::spawn_blocking(move || {
        listing
            .inner()
            .fetch_metadata(None, Duration::from_secs(10))
            .map(|metadata| {
                metadata
                    .topics()
                    .iter()
                    .map(|topic| topic.name().to_owned())
                    .collect::<Vec<_>>()
            })
    })
    .await
    .map_err(|joined| joined.to_string())
    .and_then(|listed| listed.map_err(|kafka| kafka.to_string()));
    let all = match listed {
        Ok(all) => all,
        Err(error) => return eprintln!("deleting topics '{prefix}*': listing them: {error}"),
    };
    let names: Vec<&str> = all
        .iter()
        .map(String::as_str)
        .filter(|name| name.starts_with(prefix))
        .collect();
    if names.is_empty() {
        return;
    }
    match admin.delete_topics(&names, &AdminOptions::new()).await {
        Ok(results) => {
            for failed in results.iter().filter_map(|r| r.as_ref().err()) {
                eprintln!("deleting topic {}: {}", failed.0, failed.1);
            }
        }
        Err(error) => eprintln!("deleting topics '{prefix}*': {error}"),
    }
}

/// A Kafka consumer group's state ("Stable", "PreparingRebalance", "CompletingRebalance",
/// "Empty"; empty when the brokers do not know the group) and its number of members, as the
/// group's coordinator reports them. Stable with N members means a rebalance to N completed:
/// the coordinator waits for every member to rejoin first.
pub fn group_state(group: &str) -> (String, usize) {
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    let admin: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_bootstrap())
        .create()
        .expect("a consumer for the group list");
    let Ok(list) = admin.fetch_group_list(Some(group), Duration::from_secs(5)) else {
        // The coordinator away for a moment (a broker restarting): not known yet.
        return (String::new(), 0);
    };
    let Some(info) = list.groups().first() else {
        return (String::new(), 0);
    };
    (info.state().to_owned(), info.members().len())
}

/// Creates the Kafka topic `topic` (and a DLQ beside it) on the local stack, for a kafka target.
pub async fn provision_topic(topic: &str) {
    use wal_queue::Produce as _;
    let backend = KafkaBackend::new(KafkaSettings::new(&kafka_bootstrap())).unwrap();
    let spec = QueueSpec::new("test", topic, &format!("{topic}-dlq"));
    backend.queue(spec).provision().await.unwrap();
}

/// How many records `topic` holds, from its partitions' watermarks: what a kafka target wrote.
pub async fn topic_records(topic: &str) -> usize {
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", kafka_bootstrap())
            .create()
            .unwrap();
        let timeout = Duration::from_secs(10);
        let metadata = consumer.fetch_metadata(Some(&topic), timeout).unwrap();
        metadata.topics()[0]
            .partitions()
            .iter()
            .map(|p| {
                let (low, high) = consumer.fetch_watermarks(&topic, p.id(), timeout).unwrap();
                usize::try_from(high - low).unwrap()
            })
            .sum()
    })
    .await
    .unwrap()
}
