//! A namespace after validation: every default filled in, every number in range. The producer,
//! the consumer and the control plane work with these types only, never with the file form.

use std::time::Duration;

use serde_json::{Map, Value};
use wal_proto::v1::Target;
use wal_targets::Kind;

#[derive(Debug, Clone, PartialEq)]
pub struct Namespace {
    pub name: String,
    /// At least one. Writes are spread across them by key.
    pub queues: Vec<QueueConfig>,
    pub consumer: ConsumerSettings,
    pub retry: RetryPolicy,
    pub delay: DelayLimits,
    pub payload_limit_bytes: usize,
    pub rate_limit: RateLimit,
    pub default_target: Option<TargetConfig>,
    pub durable_storage: Option<DurableStorageConfig>,
    /// What the namespace is for, and who to call: free text for operators.
    pub context: Option<String>,
    pub contacts: Option<String>,
    /// Who may write, replicate and administer it, once authorization is on.
    pub access: crate::Access,
    /// Further stores every entry is delivered to, each by a reader of its own.
    pub destinations: Vec<DestinationConfig>,
}

/// A further store a namespace delivers every entry to, read with a position of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct DestinationConfig {
    /// Unique in the namespace, never [`DEFAULT_DESTINATION`].
    pub name: String,
    /// Never a region target.
    pub target: TargetConfig,
    pub start_from: wal_targets::region::StartFrom,
}

impl DestinationConfig {
    /// Whether its reader starts from the oldest entry the queues hold, the first time it runs.
    pub fn from_oldest(&self) -> bool {
        self.start_from == wal_targets::region::StartFrom::Earliest
    }
}

/// The destination name of region `region` of a replicated namespace.
pub fn region_destination(region: &str) -> String {
    format!("region-{region}")
}

/// The name of the destination that delivers to each entry's own target or the namespace's
/// default target, read by the namespace's own consumer group.
pub const DEFAULT_DESTINATION: &str = "default";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Backend {
    Kafka,
    Sqs,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Kafka => "kafka",
            Self::Sqs => "sqs",
        })
    }
}

/// One queue (Kafka topic or SQS queue) and its DLQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    pub backend: Backend,
    pub name: String,
    pub dlq: String,
    /// The Kafka cluster's name, mapped to bootstrap servers by the deployment.
    pub cluster: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerSettings {
    pub stack: Option<String>,
    pub poll_wait: Duration,
    pub max_messages_per_poll: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub multiplier: f64,
    pub max_backoff: Duration,
    /// Fraction (0 to 1) of each wait that is randomised.
    pub jitter: f64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayLimits {
    pub max_delay: Duration,
    pub default_jitter: Duration,
    pub max_jitter: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    pub writes_per_second: u32,
    pub burst: u32,
    pub max_in_flight: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TargetConfig {
    /// A kind this build delivers to; its settings were checked by the kind's rules.
    pub kind: Kind,
    pub settings: Map<String, Value>,
    /// `settings` as JSON text, as entries carry it; made once here instead of on every write.
    pub settings_json: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableStorageConfig {
    /// The CQL keyspace.
    pub keyspace: String,
    /// The CQL cluster's name, mapped to contact points by the deployment.
    pub shard: Option<String>,
    /// Every entry also kept in the keyspace's archive table, for replay.
    pub archive: Option<ArchiveConfig>,
    /// How long a two-phase write may stay open before it expires.
    pub transaction_lifetime: Duration,
    /// Every entry's destinations record what they did with it (`receipts`).
    pub receipts: bool,
}

impl DurableStorageConfig {
    /// A keyspace on the default shard, no archive, the default transaction lifetime.
    pub fn keyspace(keyspace: &str) -> Self {
        Self {
            keyspace: keyspace.to_owned(),
            shard: None,
            archive: None,
            transaction_lifetime: DEFAULT_TRANSACTION_LIFETIME,
            receipts: false,
        }
    }
}

/// How long a two-phase write may stay open when the namespace does not say.
pub const DEFAULT_TRANSACTION_LIFETIME: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveConfig {
    /// How long each entry is kept from its original write time.
    pub retention: Duration,
}

impl TargetConfig {
    /// The target as entries carry it.
    pub fn entry_target(&self) -> Target {
        Target {
            kind: self.kind.name().to_owned(),
            settings_json: self.settings_json.clone(),
        }
    }
}

impl RetryPolicy {
    /// The longest an entry can spend in retries: every attempt waiting the longest backoff
    /// (with its jitter). An upper bound, for sizing how long what an entry points at must live.
    pub fn horizon(&self) -> std::time::Duration {
        self.max_backoff
            .mul_f64(1.0 + self.jitter)
            .saturating_mul(self.max_attempts)
    }
}

impl Namespace {
    /// Whether the namespace's destinations are its regions: its default target is a `region`
    /// target, so each destination region reads it with a consumer group of its own and applies
    /// every entry, and a write names no target of its own.
    pub fn replicated(&self) -> bool {
        self.default_target
            .as_ref()
            .is_some_and(|target| target.kind == wal_targets::Kind::Region)
    }

    /// The names of the destinations a consumer in region `local` delivers this namespace's
    /// entries to: `default` (its target) or each region it replicates to
    /// ([`region_destination`]), then each of its `destinations`.
    pub fn destination_names(&self, local: &str) -> Vec<String> {
        let mut names = Vec::new();
        if !self.replicated() {
            names.push(DEFAULT_DESTINATION.to_owned());
        } else if let Some(target) = &self.default_target
            && let Ok(settings) =
                wal_targets::parse::<wal_targets::region::RegionSettings>(&target.settings_json)
        {
            let regions = settings.destinations_from(local).into_keys();
            names.extend(regions.map(|region| region_destination(&region)));
        }
        names.extend(self.destinations.iter().map(|d| d.name.clone()));
        names
    }

    /// The longest an entry of this namespace can wait for its deliver-at: the longest delay
    /// plus the widest jitter a request may ask for, or a retry's longest backoff.
    pub fn longest_wait(&self) -> std::time::Duration {
        let delayed = self.delay.max_delay.saturating_add(self.delay.max_jitter);
        let retried = self.retry.max_backoff.mul_f64(1.0 + self.retry.jitter);
        delayed.max(retried)
    }

    /// The index in [`Namespace::queues`] of the queue a key's entries go to. The hash
    /// (FNV-1a, 64 bit) is fixed so every producer, of every version, sends a key to the same
    /// queue. Adding queues moves some keys to new queues; entries of a key keep their order
    /// within each queue.
    pub fn queue_index(&self, key: &str) -> usize {
        let count = self.queues.len().max(1) as u64;
        usize::try_from(key_hash(key.as_bytes()) % count).unwrap_or(0)
    }
}

/// The platform's key hash, FNV-1a 64. Fixed: every producer, consumer and walctl of every
/// version puts a key in the same queue, archive shard and replay lane; changing it would move
/// keys where a replay would no longer find them.
pub fn key_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{RetryPolicy, key_hash};

    #[test]
    fn the_retry_horizon_bounds_every_attempt_at_its_longest_wait() {
        let policy = RetryPolicy {
            max_attempts: 8,
            initial_backoff: Duration::from_secs(1),
            multiplier: 2.0,
            max_backoff: Duration::from_secs(600),
            jitter: 0.25,
        };
        assert_eq!(policy.horizon(), Duration::from_secs(8 * 750));
    }

    #[test]
    fn the_key_hash_is_the_published_fnv1a() {
        // Reference values of FNV-1a 64: changing the hash would move keys between queues.
        assert_eq!(key_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(key_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(key_hash(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
