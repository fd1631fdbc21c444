//! How to reach a Kafka cluster, and the clients one process shares across its Kafka queues.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rdkafka::admin::AdminClient;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::FutureProducer;
use tokio::sync::OnceCell;

use super::QueueSpec;
use super::context::OutageContext;
use super::delay;
use super::{KafkaQueue, PRODUCER_BUFFER_MESSAGES, TIER_PREFETCH_KIB};
use wal_runtime::outage::Outage;

/// The longest librdkafka waits between attempts to reach a broker that is away (see
/// `KafkaSettings::client_config`).
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// How to reach the Kafka cluster and how queues on it behave.
#[derive(Debug, Clone)]
pub struct KafkaSettings {
    pub bootstrap_servers: String,
    /// Consumer groups are named `<group_prefix><topic>`.
    pub group_prefix: String,
    /// How long librdkafka keeps trying to deliver one record; past it the answer is UNKNOWN.
    pub delivery_timeout: Duration,
    /// How long the producer waits to batch records together.
    pub linger: Duration,
    /// Partitions of each topic `provision` creates.
    pub partitions: i32,
    /// Copies of each topic `provision` creates (one per broker at most).
    pub replication_factor: i32,
    /// The topics' `min.insync.replicas`: how many copies a write with acks=all needs before
    /// the broker acknowledges it (and the platform answers TRUE). Unset, the broker's default
    /// (Kafka's own default is 1: one surviving copy).
    pub min_insync_replicas: Option<i32>,
    /// How often stored offsets are committed to the broker.
    pub commit_interval: Duration,
    /// A consumer that is silent this long is considered dead and its partitions reassigned.
    pub session_timeout: Duration,
    /// The longest a consumer may go between receives before it leaves its group. Long: a
    /// consumer whose in-progress slots all hold entries waiting for their deliver-at does not
    /// receive meanwhile, and must not lose its partitions (and its acknowledgements) for it.
    /// Dead processes are still found within `session_timeout`, by the background heartbeat.
    pub max_poll_interval: Duration,
    /// More librdkafka properties for every client of this cluster (security.protocol, sasl.*,
    /// ssl.*), from the cluster map. Never the ones the platform's guarantees rest on: the map
    /// refuses those (see `clusters`).
    pub client: wal_runtime::secret::ClientProperties,
}

impl KafkaSettings {
    /// Settings for a cluster at `bootstrap_servers` with the platform's defaults.
    pub fn new(bootstrap_servers: &str) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.to_owned(),
            group_prefix: "wal-consumer.".to_owned(),
            delivery_timeout: Duration::from_secs(5),
            linger: Duration::from_millis(1),
            partitions: 4,
            replication_factor: 1,
            min_insync_replicas: None,
            commit_interval: Duration::from_millis(500),
            session_timeout: Duration::from_secs(10),
            // librdkafka's maximum.
            max_poll_interval: Duration::from_secs(24 * 3600),
            client: wal_runtime::secret::ClientProperties::default(),
        }
    }

    /// A librdkafka configuration for this cluster: its bootstrap servers and the map's client
    /// properties; each client adds its own.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        // librdkafka backs off reconnecting to a broker that is away up to 10 s by default (the
        // Java client: 1 s), each client on its own schedule: after a minute-long outage the
        // consumers of one namespace first reached the returned broker 1.8 to 7.4 s after it
        // opened its port, and a late one held its queue's entries that much longer. With 1 s,
        // all ten within 0.1 to 0.9 s. A map's client properties may still set it, and must
        // when they set reconnect.backoff.ms above it (librdkafka refuses a maximum below it).
        config.set("reconnect.backoff.max.ms", millis(RECONNECT_BACKOFF_MAX));
        for (key, value) in &self.client {
            config.set(key, value);
        }
        config
    }
}

/// The clients one process shares across all its Kafka queues.
pub struct KafkaBackend {
    pub(super) settings: KafkaSettings,
    /// The idempotent producer in use: replaced when librdkafka declares it unusable (see
    /// `replace`).
    pub(super) producer: RwLock<Arc<FutureProducer<OutageContext>>>,
    /// When it was last replaced; held while it is being replaced.
    pub(super) replaced: Mutex<Option<Instant>>,
    /// The producer's view of its brokers, shared with its context: a delivered record says
    /// they answer again.
    pub(super) producer_outage: Arc<Outage>,
    /// The last refusal the producer heard of (see `credentials`).
    pub(super) producer_refusal: Arc<super::context::Refusal>,
    pub(super) admin: AdminClient<OutageContext>,
}

impl std::fmt::Debug for KafkaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaBackend")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl KafkaBackend {
    /// Creates the producer and admin clients. They connect lazily; only a malformed setting
    /// fails here.
    pub fn new(settings: KafkaSettings) -> Result<Arc<Self>, KafkaError> {
        let context = OutageContext::new("producer");
        let producer_outage = context.outage();
        let producer_refusal = context.refusal();
        let producer = create_producer(&settings, context)?;
        // At 0 from the start, so the first replacement is an increase an alert sees.
        wal_runtime::metrics::kafka_producer_replaced().increment(0);
        let admin = settings
            .client_config()
            .set("client.id", "wal-admin")
            .create_with_context(OutageContext::new("admin"))?;
        Ok(Arc::new(Self {
            settings,
            producer: RwLock::new(Arc::new(producer)),
            replaced: Default::default(),
            producer_outage,
            producer_refusal,
            admin,
        }))
    }

    /// The producer to send with now.
    pub(super) fn producer(&self) -> Arc<FutureProducer<OutageContext>> {
        Arc::clone(&self.producer.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// A handle on one queue of a namespace, with the delay tiers its longest wait needs.
    pub fn queue(self: &Arc<Self>, spec: QueueSpec) -> KafkaQueue {
        let tiers = delay::kafka_tiers(spec.longest_wait)
            .into_iter()
            .map(|wait| {
                let tier = KafkaQueue {
                    backend: Arc::clone(self),
                    spec: QueueSpec {
                        namespace: spec.namespace.clone(),
                        name: delay::tier_topic(&spec.name, wait),
                        // An undecodable record on a tier is dead-lettered with the queue's own.
                        dlq: spec.dlq.clone(),
                        longest_wait: Duration::ZERO,
                        cluster: spec.cluster.clone(),
                        reader: spec.reader.clone(),
                    },
                    receiver: OnceCell::new(),
                    tiers: Vec::new(),
                    tier_waits: Vec::new(),
                    prefetch_kib: Some(TIER_PREFETCH_KIB),
                };
                (wait, Arc::new(tier))
            })
            .collect::<Vec<_>>();
        KafkaQueue {
            backend: Arc::clone(self),
            spec,
            receiver: OnceCell::new(),
            tier_waits: tiers.iter().map(|(wait, _)| *wait).collect(),
            tiers,
            prefetch_kib: None,
        }
    }

    pub fn settings(&self) -> &KafkaSettings {
        &self.settings
    }
}

/// The platform's idempotent producer: acks from every in-sync copy, ordered per partition.
pub(super) fn create_producer(
    settings: &KafkaSettings,
    context: OutageContext,
) -> Result<FutureProducer<OutageContext>, KafkaError> {
    settings
        .client_config()
        .set("client.id", "wal")
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.timeout.ms", millis(settings.delivery_timeout))
        .set("linger.ms", millis(settings.linger))
        .set("message.max.bytes", "1048576")
        .set(
            "queue.buffering.max.messages",
            PRODUCER_BUFFER_MESSAGES.to_string(),
        )
        .create_with_context(context)
}

pub(super) fn millis(duration: Duration) -> String {
    duration.as_millis().to_string()
}
