//! A namespace's queues: the names each backend accepts, the DLQ each queue gets, and no name
//! used twice.

use std::collections::BTreeSet;

use super::Spelling;
use crate::error::Problems;
use crate::file::{PersistenceConfiguration, StorageKind};
use crate::model::{Backend, QueueConfig};

pub(super) fn storage_queues(
    problems: &mut Problems<'_>,
    path: &str,
    storage: &PersistenceConfiguration,
    spelling: Spelling,
) -> Vec<QueueConfig> {
    let config = &storage.config;
    let kind_path = format!(
        "{}.{}.type",
        path.trim_end_matches(".config"),
        spelling.name("physical_storage")
    );
    let Layout {
        backend,
        queue_key,
        dlq_key,
        queues,
        dlqs,
        foreign,
    } = Layout::of(storage);
    for (key, present) in foreign {
        if present {
            problems.add(
                format!("{path}.{key}"),
                format!("not a setting of {backend} storage ({kind_path} says {backend}); its queues go in {queue_key}"),
            );
        }
    }
    let Some(names) = queues else {
        problems.add(
            format!("{path}.{queue_key}"),
            format!("{backend} storage needs its queue names in {queue_key}, which is missing"),
        );
        return Vec::new();
    };
    if names.is_empty() {
        problems.add(
            format!("{path}.{queue_key}"),
            "expected at least one queue name, found an empty list",
        );
        return Vec::new();
    }
    let dlq_names = pair_dlqs(
        problems,
        &format!("{path}.{dlq_key}"),
        names,
        dlqs.as_deref(),
    );
    let dlqs_given = dlqs.as_ref().is_some_and(|d| !d.is_empty());
    let mut queues = Vec::new();
    for (i, (name, dlq)) in names.iter().zip(dlq_names).enumerate() {
        let queue_path = format!("{path}.{queue_key}[{i}]");
        if check_queue_name(problems, &queue_path, backend, name) && !dlqs_given {
            // The default DLQ name is the queue's plus "-dlq": only its length can be wrong.
            if !valid_queue_name(backend, &dlq) {
                problems.add(queue_path, format!("too long to leave room for its default DLQ name {dlq:?}; name the DLQ in {dlq_key}"));
            }
        } else if dlqs_given {
            check_queue_name(problems, &format!("{path}.{dlq_key}"), backend, &dlq);
        }
        queues.push(QueueConfig {
            backend,
            name: name.clone(),
            dlq,
            cluster: config.kafka_cluster.clone(),
        });
    }
    queues
}

/// Where one backend's settings live in a storage config, and the other backend's settings,
/// which must not be there (with whether each is).
struct Layout<'a> {
    backend: Backend,
    queue_key: &'static str,
    dlq_key: &'static str,
    queues: &'a Option<Vec<String>>,
    dlqs: &'a Option<Vec<String>>,
    foreign: [(&'static str, bool); 3],
}

impl<'a> Layout<'a> {
    fn of(storage: &'a PersistenceConfiguration) -> Self {
        let config = &storage.config;
        match storage.physical_storage.kind {
            StorageKind::Sqs => Layout {
                backend: Backend::Sqs,
                queue_key: "wal-queue",
                dlq_key: "wal-dlq-queue",
                queues: &config.wal_queue,
                dlqs: &config.wal_dlq_queue,
                foreign: [
                    ("wal-kafka-topics", config.wal_kafka_topics.is_some()),
                    (
                        "wal-kafka-dlq-topics",
                        config.wal_kafka_dlq_topics.is_some(),
                    ),
                    (
                        "wal.kafka.bootstrap.servers.prefix",
                        config.kafka_cluster.is_some(),
                    ),
                ],
            },
            StorageKind::Kafka => Layout {
                backend: Backend::Kafka,
                queue_key: "wal-kafka-topics",
                dlq_key: "wal-kafka-dlq-topics",
                queues: &config.wal_kafka_topics,
                dlqs: &config.wal_kafka_dlq_topics,
                foreign: [
                    ("wal-queue", config.wal_queue.is_some()),
                    ("wal-dlq-queue", config.wal_dlq_queue.is_some()),
                    (
                        "queue.poll-interval.secs",
                        config.poll_interval_secs.is_some(),
                    ),
                ],
            },
        }
    }
}

/// Every queue gets a DLQ: `<queue>-dlq` by default, one shared DLQ, or one per queue.
pub(super) fn pair_dlqs(
    problems: &mut Problems<'_>,
    path: &str,
    queues: &[String],
    dlqs: Option<&[String]>,
) -> Vec<String> {
    match dlqs.unwrap_or_default() {
        [] => queues.iter().map(|q| format!("{q}-dlq")).collect(),
        [shared] => vec![shared.clone(); queues.len()],
        many if many.len() == queues.len() => many.to_vec(),
        many => {
            problems.add(
                path,
                format!(
                    "{} DLQ names for {} queues; expected none (each queue gets <queue>-dlq), one shared, or one per queue",
                    many.len(),
                    queues.len()
                ),
            );
            queues.iter().map(|q| format!("{q}-dlq")).collect()
        }
    }
}

/// Queue names are per backend: a Kafka topic and an SQS queue may share a name.
pub(super) fn check_queue_names_distinct(
    problems: &mut Problems<'_>,
    path: &str,
    queues: &[QueueConfig],
) {
    let mut seen = BTreeSet::new();
    for queue in queues {
        if !seen.insert((queue.backend, &queue.name)) {
            problems.add(
                path,
                format!("{} queue '{}' is listed twice", queue.backend, queue.name),
            );
        }
    }
    for queue in queues {
        if seen.contains(&(queue.backend, &queue.dlq)) {
            problems.add(
                path,
                format!(
                    "'{}' is both a queue and the DLQ of '{}'; a DLQ must be a queue of its own",
                    queue.dlq, queue.name
                ),
            );
        }
    }
}

pub(super) fn check_namespace_name(problems: &mut Problems<'_>, name: &str) {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !(first_ok && rest_ok && name.len() <= 64) {
        problems.add(
            "namespace",
            format!("expected a letter, then letters, digits, '_', '-' or '.' (64 at most), found {name:?}"),
        );
    }
}

/// The longest Kafka topic name a namespace may use.
pub const KAFKA_TOPIC_MAX: usize = 239;

pub(super) fn queue_name_rule(backend: Backend) -> (usize, &'static str, &'static str) {
    match backend {
        Backend::Sqs => (80, "_-", "letters, digits, '_' or '-', 80 at most"),
        // Kafka allows 249; the delay tiers' topics add up to 10 (`.delay-15m`).
        Backend::Kafka => (
            KAFKA_TOPIC_MAX,
            "._-",
            "letters, digits, '.', '_' or '-', 239 at most (249 less room for the delay tiers' suffix)",
        ),
    }
}

pub(super) fn valid_queue_name(backend: Backend, name: &str) -> bool {
    let (max, allowed, _) = queue_name_rule(backend);
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || allowed.contains(c));
    !name.is_empty() && name.len() <= max && chars_ok && name != "." && name != ".."
}

/// Reports an invalid name; returns whether the name was valid.
pub(super) fn check_queue_name(
    problems: &mut Problems<'_>,
    path: &str,
    backend: Backend,
    name: &str,
) -> bool {
    let valid = valid_queue_name(backend, name);
    if !valid {
        let (_, _, rule) = queue_name_rule(backend);
        problems.add(
            path,
            format!("not a valid {backend} queue name: expected {rule}, found {name:?}"),
        );
    }
    valid
}
