//! A namespace as written in its JSON file: the shapes users bring (Netflix's published WAL
//! configs, in camelCase and in snake_case) plus the platform's own settings.
//!
//! Every struct refuses unknown fields. The doc comments here are the reference documentation:
//! they become the descriptions in `namespaces/namespace.schema.json`.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

/// One namespace: a named configuration of queues, limits, retry policy and default target.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NamespaceFile {
    /// The namespace's name, as WriteToLog requests give it: a letter, then letters, digits,
    /// '_', '-' or '.', 64 characters at most.
    pub namespace: String,
    /// Where entries are stored: one or more physical storages, each with its queues.
    #[serde(alias = "persistenceConfigurations")]
    pub persistence_configurations: PersistenceConfigurations,
    /// How the consumer retries failed deliveries.
    #[serde(default, alias = "retryPolicy")]
    pub retry_policy: Option<RetryPolicyFile>,
    /// Limits on requested delays and the default jitter window.
    #[serde(default, alias = "delayLimits")]
    pub delay_limits: Option<DelayLimitsFile>,
    /// The largest payload a request may carry, in bytes (1 MiB when unset, 64 MiB at most).
    /// Payloads larger than the queue takes are claim-checked into durable storage when the
    /// namespace has one, and refused otherwise.
    #[serde(default, alias = "payloadLimitBytes")]
    pub payload_limit_bytes: Option<u64>,
    /// Admission control at the producer.
    #[serde(default, alias = "rateLimit")]
    pub rate_limit: Option<RateLimitFile>,
    /// Where entries go when a request names no target. May instead be given as `target` inside
    /// a persistence configuration, as Netflix's configs do; not both.
    #[serde(default, alias = "defaultTarget")]
    pub default_target: Option<TargetFile>,
    /// Who may do what to this namespace once the platform's authorization is on (it is off
    /// unless the deployment turns it on). Each list names principals (what a client
    /// certificate's name maps to), `prefix*` for every principal starting with `prefix`, or
    /// `*` for any authenticated client. A list left out grants that action to no one but the
    /// deployment's super-users.
    #[serde(default)]
    pub access: Option<AccessFile>,
    /// Further stores every entry is delivered to, besides the default target (or the write's
    /// own target): a database and its backup, a table and a cache, a table and a topic. Each
    /// is read with a Kafka consumer group of its own, so each has its own position, breaker,
    /// retries and DLQ copies, and a slow or dead one holds back no other. Kafka queues only
    /// (an SQS message is received by one reader); at most 8.
    #[serde(default)]
    pub destinations: Vec<DestinationFile>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DestinationFile {
    /// The destination's name, unique in the namespace: a lowercase letter, then lowercase
    /// letters, digits or '-', 32 characters at most. It names the destination's consumer group
    /// (`<topic>.destination-<name>`), its metrics and its DLQ copies. `default` is taken: it is
    /// the namespace's own target.
    pub name: String,
    /// Where it delivers every entry, whatever target the write named: a cql, cache, kafka or
    /// http target (a region target replicates through the default target instead).
    pub target: TargetFile,
    /// Where its reader starts the first time it runs, said explicitly because a namespace may
    /// already hold entries: `earliest` (everything its queues still hold) or `now` (what is
    /// written from then on; `latest` is the same).
    #[serde(alias = "startFrom")]
    pub start_from: StartFromFile,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StartFromFile {
    Earliest,
    #[serde(alias = "latest")]
    Now,
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AccessFile {
    /// Who may call WriteToLog, WriteToLogBatch and the two-phase calls on it.
    #[serde(default)]
    pub write: Vec<String>,
    /// Which other regions' consumers may replicate into it. Reserved: a region's writer reads
    /// no namespace config, so it lets in its own --super-users (the consumers' principals)
    /// for every namespace, and this is not checked.
    #[serde(default)]
    pub replicate: Vec<String>,
    /// Who may apply or delete it on the control plane. (DLQ redrive and replay go to the
    /// brokers directly, with the operator's own cluster map and credentials: the brokers' ACLs
    /// on that user decide them, not this list.)
    #[serde(default)]
    pub admin: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PersistenceConfigurations {
    /// At least one storage. Several queues (in one storage or across several) spread writes by
    /// key, so a namespace can grow past one queue's throughput.
    #[serde(alias = "persistenceConfiguration")]
    pub persistence_configuration: Vec<PersistenceConfiguration>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PersistenceConfiguration {
    #[serde(alias = "physicalStorage")]
    pub physical_storage: PhysicalStorage,
    pub config: StorageConfig,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhysicalStorage {
    /// The queue backend.
    #[serde(rename = "type")]
    pub kind: StorageKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum StorageKind {
    #[serde(rename = "KAFKA", alias = "kafka")]
    Kafka,
    #[serde(rename = "SQS", alias = "sqs")]
    Sqs,
}

/// A storage's settings. SQS storages name queues in `wal-queue`/`wal-dlq-queue`, Kafka storages
/// in `wal-kafka-topics`/`wal-kafka-dlq-topics`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// SQS: the namespace's queues, at least one.
    #[serde(default, rename = "wal-queue")]
    pub wal_queue: Option<Vec<String>>,
    /// SQS: the DLQs: none (each queue gets `<queue>-dlq`), one shared by all queues, or one per
    /// queue in the same order.
    #[serde(default, rename = "wal-dlq-queue")]
    pub wal_dlq_queue: Option<Vec<String>>,
    /// SQS: the consumer's long-poll wait, in seconds (0 to 20; 10 when unset).
    #[serde(default, rename = "queue.poll-interval.secs")]
    pub poll_interval_secs: Option<u64>,
    /// SQS: how many messages the consumer takes per poll (1 to 10000; 100 when unset).
    #[serde(default, rename = "queue.max-messages-per-poll")]
    pub max_messages_per_poll: Option<u64>,
    /// Kafka: the namespace's topics, at least one.
    #[serde(default, rename = "wal-kafka-topics")]
    pub wal_kafka_topics: Option<Vec<String>>,
    /// Kafka: the DLQ topics, paired with the topics like `wal-dlq-queue`.
    #[serde(default, rename = "wal-kafka-dlq-topics")]
    pub wal_kafka_dlq_topics: Option<Vec<String>>,
    /// Kafka: which cluster, as a name the deployment maps to bootstrap servers.
    #[serde(default, rename = "wal.kafka.bootstrap.servers.prefix")]
    pub kafka_cluster: Option<String>,
    /// The consumer deployment that serves this namespace.
    #[serde(default, alias = "consumerStack")]
    pub consumer_stack: Option<String>,
    /// Free text: what the namespace is for.
    #[serde(default)]
    pub context: Option<String>,
    /// Free text: who to call.
    #[serde(default)]
    pub contacts: Option<String>,
    /// The default target in Netflix's shape: `type` names the target kind, the other fields are
    /// its settings. `{}` means none.
    #[serde(default)]
    pub target: Option<Map<String, Value>>,
    /// Durable storage (CQL) for claim-checked payloads, two-phase items and archives.
    #[serde(default, alias = "durableStorage")]
    pub durable_storage: Option<DurableStorageFile>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DurableStorageFile {
    /// The CQL keyspace holding the namespace's tables.
    pub namespace: String,
    /// Which cluster, as a name the deployment maps to CQL contact points.
    #[serde(default)]
    pub shard: Option<String>,
    /// The storage kind: "kv" or "cql" (both are CQL tables here).
    #[serde(rename = "type")]
    pub kind: String,
    /// Keep every entry in a time-bucketed table of this keyspace, so the namespace can be
    /// replayed after corruption beyond what its queues still hold: SQS deletes what was
    /// consumed, and Kafka keeps only its retention. Off when unset.
    #[serde(default)]
    pub archive: Option<ArchiveFile>,
    /// How long a two-phase write may stay open (items appended, not committed) before it
    /// expires, in seconds from its first append (3600 when unset; 60 to 604800).
    #[serde(default, alias = "transactionLifetimeSecs")]
    #[schemars(range(min = 60, max = 604800))]
    pub transaction_lifetime_secs: Option<u64>,
    /// Every entry's destinations record what they did with it (applied, dead-lettered) in this
    /// keyspace's `receipts` table, kept 7 days, so `walctl entry` shows any entry's state per
    /// destination: one more CQL write per entry and destination. A write awaiting its
    /// destinations has them recorded either way. Off when unset.
    #[serde(default)]
    pub receipts: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveFile {
    /// How long each entry is kept, in days from its write (1 to 3650).
    #[serde(alias = "retentionDays")]
    #[schemars(range(min = 1, max = 3650))]
    pub retention_days: u64,
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicyFile {
    /// Delivery attempts before an entry goes to the DLQ (1 to 100; 5 when unset).
    #[serde(default, alias = "maxAttempts")]
    pub max_attempts: Option<u32>,
    /// The first retry's wait in milliseconds (1 to 3600000; 500 when unset).
    #[serde(default, alias = "initialBackoffMs")]
    pub initial_backoff_ms: Option<u64>,
    /// Each retry waits this many times longer than the last (1.0 to 10.0; 2.0 when unset).
    #[serde(default)]
    pub multiplier: Option<f64>,
    /// The longest wait between attempts in milliseconds (at least the initial backoff, 1 day at
    /// most; 300000 when unset).
    #[serde(default, alias = "maxBackoffMs")]
    pub max_backoff_ms: Option<u64>,
    /// Each wait is randomised by up to this fraction of itself, so retries of a burst do not
    /// arrive together (0.0 to 1.0; 0.2 when unset).
    #[serde(default)]
    pub jitter: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelayLimitsFile {
    /// The longest delay a request may ask for, in milliseconds (365 days at most; 30 days when
    /// unset).
    #[serde(default, alias = "maxDelayMs")]
    pub max_delay_ms: Option<u64>,
    /// The jitter window used when a request gives none, in milliseconds (0 when unset).
    #[serde(default, alias = "defaultJitterMs")]
    pub default_jitter_ms: Option<u64>,
    /// The widest jitter window a request may ask for, in milliseconds (1 day when unset).
    #[serde(default, alias = "maxJitterMs")]
    pub max_jitter_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitFile {
    /// Sustained writes per second this namespace is admitted (1 to 1000000; 10000 when unset).
    #[serde(default, alias = "writesPerSecond")]
    pub writes_per_second: Option<u32>,
    /// Writes admitted at once above the sustained rate (the writes per second when unset).
    #[serde(default)]
    pub burst: Option<u32>,
    /// Writes of this namespace the producer holds at once; more are shed with
    /// RESOURCE_EXHAUSTED (1 to 100000; 1024 when unset).
    #[serde(default, alias = "maxInFlight")]
    pub max_in_flight: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetFile {
    /// The target kind: cql, cache, kafka or http (see the consumer README for each kind's settings).
    pub kind: String,
    /// The kind's settings.
    #[serde(default)]
    pub settings: Map<String, Value>,
}
