//! From the file form to the domain model: defaults, ranges, names and cross-field rules. Pure:
//! no I/O, so the control plane, walctl and the services all validate the same way.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::time::Duration;

use serde_json::{Map, Value};
use wal_targets::Refusal;

use crate::error::{ConfigErrors, Problems};
use crate::file::{
    DelayLimitsFile, DurableStorageFile, NamespaceFile, PersistenceConfiguration, RateLimitFile,
    RetryPolicyFile, StorageKind, TargetFile,
};
use crate::model::{
    ArchiveConfig, Backend, ConsumerSettings, DelayLimits, DurableStorageConfig, Namespace,
    QueueConfig, RateLimit, RetryPolicy, TargetConfig,
};

const DAY_MS: u64 = 24 * 3600 * 1000;
const MIB: u64 = 1024 * 1024;

/// Which spelling the file used, so error paths name fields as the user wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spelling {
    Snake,
    Camel,
}

impl Spelling {
    fn key(self, snake: &'static str, camel: &'static str) -> &'static str {
        match self {
            Self::Snake => snake,
            Self::Camel => camel,
        }
    }
}

pub(crate) fn validate(
    file: NamespaceFile,
    origin: &str,
    spelling: Spelling,
) -> Result<Namespace, ConfigErrors> {
    let mut problems = Problems::new(origin);
    check_namespace_name(&mut problems, &file.namespace);

    let storages_path = format!(
        "{}.{}",
        spelling.key("persistence_configurations", "persistenceConfigurations"),
        spelling.key("persistence_configuration", "persistenceConfiguration")
    );
    let storages = &file.persistence_configurations.persistence_configuration;
    if storages.is_empty() {
        problems.add(
            &storages_path,
            "expected at least one persistence configuration, found an empty list",
        );
    }
    let mut shared = Shared::default();
    let mut queues = Vec::new();
    for (i, storage) in storages.iter().enumerate() {
        let path = format!("{storages_path}[{i}].config");
        queues.extend(storage_queues(&mut problems, &path, storage, spelling));
        shared.take(&mut problems, &path, storage, spelling);
    }
    check_queue_names_distinct(&mut problems, &storages_path, &queues);

    let default_target = match (file.default_target, shared.target) {
        (Some(_), Some((path, _))) => {
            problems.add(
                path,
                format!(
                    "the default target is given twice (also as {}); keep one",
                    spelling.key("default_target", "defaultTarget")
                ),
            );
            None
        }
        (Some(target), None) => {
            let path = spelling.key("default_target", "defaultTarget");
            let paths = TargetPaths {
                kind: format!("{path}.kind"),
                settings: format!("{path}.settings"),
            };
            check_target(&mut problems, &paths, target)
        }
        (None, Some((_, target))) => Some(target),
        (None, None) => None,
    };

    let namespace = Namespace {
        name: file.namespace,
        queues,
        consumer: ConsumerSettings {
            stack: shared.consumer_stack,
            poll_wait: shared.poll_wait.unwrap_or(Duration::from_secs(10)),
            max_messages_per_poll: shared.max_messages_per_poll.unwrap_or(100),
        },
        retry: retry_policy(
            &mut problems,
            spelling,
            file.retry_policy.unwrap_or_default(),
        ),
        delay: delay_limits(
            &mut problems,
            spelling,
            file.delay_limits.unwrap_or_default(),
        ),
        payload_limit_bytes: payload_limit(&mut problems, spelling, file.payload_limit_bytes),
        rate_limit: rate_limit(&mut problems, spelling, file.rate_limit.unwrap_or_default()),
        default_target,
        durable_storage: shared.durable_storage,
        context: shared.context,
        contacts: shared.contacts,
    };
    problems.finish(namespace)
}

/// Settings that may appear in any storage's config but belong to the namespace as a whole.
#[derive(Debug, Default)]
struct Shared {
    consumer_stack: Option<String>,
    context: Option<String>,
    contacts: Option<String>,
    poll_wait: Option<Duration>,
    max_messages_per_poll: Option<u32>,
    target: Option<(String, TargetConfig)>,
    durable_storage: Option<DurableStorageConfig>,
}

impl Shared {
    fn take(
        &mut self,
        problems: &mut Problems<'_>,
        path: &str,
        storage: &PersistenceConfiguration,
        spelling: Spelling,
    ) {
        let config = &storage.config;
        self.consumer_stack = self.consumer_stack.take().or(config.consumer_stack.clone());
        self.context = self.context.take().or(config.context.clone());
        self.contacts = self.contacts.take().or(config.contacts.clone());
        if let Some(secs) = config.poll_interval_secs {
            let secs = in_range(
                problems,
                format!("{path}.queue.poll-interval.secs"),
                secs,
                0,
                20,
            );
            self.poll_wait = Some(Duration::from_secs(secs));
        }
        if let Some(max) = config.max_messages_per_poll {
            let max = in_range(
                problems,
                format!("{path}.queue.max-messages-per-poll"),
                max,
                1,
                10_000,
            );
            self.max_messages_per_poll = u32::try_from(max).ok();
        }
        if let Some(target) = &config.target {
            let target_path = format!("{path}.target");
            if let Some(parsed) = netflix_target(problems, &target_path, target) {
                if self.target.is_some() {
                    problems.add(
                        &target_path,
                        "the default target is given in two storages; keep one",
                    );
                } else {
                    self.target = Some((target_path, parsed));
                }
            }
        }
        if let Some(durable) = &config.durable_storage {
            let durable_path = format!(
                "{path}.{}",
                spelling.key("durable_storage", "durableStorage")
            );
            if self.durable_storage.is_some() {
                problems.add(
                    &durable_path,
                    "durable storage is given in two storages; keep one",
                );
            }
            self.durable_storage = durable_storage(problems, &durable_path, durable, spelling);
        }
    }
}

fn storage_queues(
    problems: &mut Problems<'_>,
    path: &str,
    storage: &PersistenceConfiguration,
    spelling: Spelling,
) -> Vec<QueueConfig> {
    let config = &storage.config;
    let kind_path = format!(
        "{}.{}.type",
        path.trim_end_matches(".config"),
        spelling.key("physical_storage", "physicalStorage")
    );
    let (backend, queue_key, dlq_key, queues, dlqs, foreign) = match storage.physical_storage.kind {
        StorageKind::Sqs => (
            Backend::Sqs,
            "wal-queue",
            "wal-dlq-queue",
            &config.wal_queue,
            &config.wal_dlq_queue,
            [
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
        ),
        StorageKind::Kafka => (
            Backend::Kafka,
            "wal-kafka-topics",
            "wal-kafka-dlq-topics",
            &config.wal_kafka_topics,
            &config.wal_kafka_dlq_topics,
            [
                ("wal-queue", config.wal_queue.is_some()),
                ("wal-dlq-queue", config.wal_dlq_queue.is_some()),
                (
                    "queue.poll-interval.secs",
                    config.poll_interval_secs.is_some(),
                ),
            ],
        ),
    };
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

/// Every queue gets a DLQ: `<queue>-dlq` by default, one shared DLQ, or one per queue.
fn pair_dlqs(
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
fn check_queue_names_distinct(problems: &mut Problems<'_>, path: &str, queues: &[QueueConfig]) {
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

fn check_namespace_name(problems: &mut Problems<'_>, name: &str) {
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

fn queue_name_rule(backend: Backend) -> (usize, &'static str, &'static str) {
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

fn valid_queue_name(backend: Backend, name: &str) -> bool {
    let (max, allowed, _) = queue_name_rule(backend);
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || allowed.contains(c));
    !name.is_empty() && name.len() <= max && chars_ok && name != "." && name != ".."
}

/// Reports an invalid name; returns whether the name was valid.
fn check_queue_name(problems: &mut Problems<'_>, path: &str, backend: Backend, name: &str) -> bool {
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

fn netflix_target(
    problems: &mut Problems<'_>,
    path: &str,
    target: &Map<String, Value>,
) -> Option<TargetConfig> {
    if target.is_empty() {
        return None;
    }
    let mut settings = target.clone();
    let kind = match settings.remove("type") {
        Some(Value::String(kind)) => kind,
        Some(other) => {
            problems.add(
                format!("{path}.type"),
                format!("expected a string naming the target kind, found {other}"),
            );
            return None;
        }
        None => {
            problems.add(path, "a target needs a \"type\" naming its kind");
            return None;
        }
    };
    // Netflix's flat form: the settings sit beside "type".
    let paths = TargetPaths {
        kind: format!("{path}.type"),
        settings: path.to_owned(),
    };
    check_target(problems, &paths, TargetFile { kind, settings })
}

/// Where a target's kind and settings are in the file, for error paths.
struct TargetPaths {
    kind: String,
    settings: String,
}

/// Checks a target with the kinds' own rules (`wal_targets`): a target refused here would be
/// dead-lettered on every delivery, so the config is refused instead.
fn check_target(
    problems: &mut Problems<'_>,
    paths: &TargetPaths,
    target: TargetFile,
) -> Option<TargetConfig> {
    let settings_json = Value::Object(target.settings.clone()).to_string();
    match wal_targets::check(&target.kind, &settings_json) {
        Ok(kind) => Some(TargetConfig {
            kind,
            settings_json,
            settings: target.settings,
        }),
        Err(Refusal::Settings { kind, path, reason }) => {
            let field = if path == "." {
                paths.settings.clone()
            } else {
                format!("{}.{path}", paths.settings)
            };
            problems.add(field, format!("{kind} target settings: {reason}"));
            None
        }
        Err(refusal) => {
            problems.add(&paths.kind, refusal.to_string());
            None
        }
    }
}

fn durable_storage(
    problems: &mut Problems<'_>,
    path: &str,
    durable: &DurableStorageFile,
    spelling: Spelling,
) -> Option<DurableStorageConfig> {
    let mut ok = true;
    if !matches!(durable.kind.as_str(), "kv" | "cql") {
        problems.add(
            format!("{path}.type"),
            format!("expected \"kv\" or \"cql\", found {:?}", durable.kind),
        );
        ok = false;
    }
    let keyspace = &durable.namespace;
    let mut chars = keyspace.chars();
    let identifier = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && keyspace.len() <= 48;
    if !identifier {
        problems.add(
            format!("{path}.namespace"),
            format!("expected a CQL keyspace name (a letter, then letters, digits or '_', 48 at most), found {keyspace:?}"),
        );
        ok = false;
    }
    let archive = durable.archive.as_ref().map(|archive| {
        let days = in_range(
            problems,
            format!(
                "{path}.archive.{}",
                spelling.key("retention_days", "retentionDays")
            ),
            archive.retention_days,
            1,
            3650,
        );
        ArchiveConfig {
            retention: Duration::from_millis(days.saturating_mul(DAY_MS)),
        }
    });
    ok.then(|| DurableStorageConfig {
        keyspace: keyspace.clone(),
        shard: durable.shard.clone(),
        archive,
    })
}

fn in_range<T: PartialOrd + Display + Copy>(
    problems: &mut Problems<'_>,
    path: String,
    value: T,
    min: T,
    max: T,
) -> T {
    if !(min..=max).contains(&value) {
        problems.add(path, format!("expected {min} to {max}, found {value}"));
    }
    value
}

fn retry_policy(
    problems: &mut Problems<'_>,
    spelling: Spelling,
    file: RetryPolicyFile,
) -> RetryPolicy {
    let at = |field: &str| format!("{}.{field}", spelling.key("retry_policy", "retryPolicy"));
    let max_attempts = in_range(
        problems,
        at(spelling.key("max_attempts", "maxAttempts")),
        file.max_attempts.unwrap_or(5),
        1,
        100,
    );
    let initial = in_range(
        problems,
        at(spelling.key("initial_backoff_ms", "initialBackoffMs")),
        file.initial_backoff_ms.unwrap_or(500),
        1,
        3_600_000,
    );
    let multiplier = in_range(
        problems,
        at("multiplier"),
        file.multiplier.unwrap_or(2.0),
        1.0,
        10.0,
    );
    // At least the initial backoff: a smaller cap would make every retry wait less than the first.
    let max_backoff = in_range(
        problems,
        at(spelling.key("max_backoff_ms", "maxBackoffMs")),
        file.max_backoff_ms.unwrap_or(initial.max(300_000)),
        initial,
        DAY_MS,
    );
    let jitter = in_range(problems, at("jitter"), file.jitter.unwrap_or(0.2), 0.0, 1.0);
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::from_millis(initial),
        multiplier,
        max_backoff: Duration::from_millis(max_backoff),
        jitter,
    }
}

fn delay_limits(
    problems: &mut Problems<'_>,
    spelling: Spelling,
    file: DelayLimitsFile,
) -> DelayLimits {
    let at = |field: &str| format!("{}.{field}", spelling.key("delay_limits", "delayLimits"));
    let max_delay = in_range(
        problems,
        at(spelling.key("max_delay_ms", "maxDelayMs")),
        file.max_delay_ms.unwrap_or(30 * DAY_MS),
        0,
        365 * DAY_MS,
    );
    let max_jitter = in_range(
        problems,
        at(spelling.key("max_jitter_ms", "maxJitterMs")),
        file.max_jitter_ms.unwrap_or(DAY_MS),
        0,
        30 * DAY_MS,
    );
    let default_jitter = in_range(
        problems,
        at(spelling.key("default_jitter_ms", "defaultJitterMs")),
        file.default_jitter_ms.unwrap_or(0),
        0,
        max_jitter,
    );
    DelayLimits {
        max_delay: Duration::from_millis(max_delay),
        default_jitter: Duration::from_millis(default_jitter),
        max_jitter: Duration::from_millis(max_jitter),
    }
}

fn payload_limit(problems: &mut Problems<'_>, spelling: Spelling, limit: Option<u64>) -> usize {
    let limit = in_range(
        problems,
        spelling
            .key("payload_limit_bytes", "payloadLimitBytes")
            .to_owned(),
        limit.unwrap_or(MIB),
        1,
        64 * MIB,
    );
    usize::try_from(limit).unwrap_or(usize::MAX)
}

fn rate_limit(problems: &mut Problems<'_>, spelling: Spelling, file: RateLimitFile) -> RateLimit {
    let at = |field: &str| format!("{}.{field}", spelling.key("rate_limit", "rateLimit"));
    let writes_per_second = in_range(
        problems,
        at(spelling.key("writes_per_second", "writesPerSecond")),
        file.writes_per_second.unwrap_or(10_000),
        1,
        1_000_000,
    );
    let burst = in_range(
        problems,
        at("burst"),
        file.burst.unwrap_or(writes_per_second),
        1,
        1_000_000,
    );
    let max_in_flight = in_range(
        problems,
        at(spelling.key("max_in_flight", "maxInFlight")),
        file.max_in_flight.unwrap_or(1024),
        1,
        100_000,
    );
    RateLimit {
        writes_per_second,
        burst,
        max_in_flight,
    }
}
