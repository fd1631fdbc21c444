//! The consumer's command line. Every flag can also be set through the environment variable
//! named in its help, which is how the Helm chart and `scripts/stack env` configure it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use wal_clusters::flags::{BrokerFlags, CqlFlags, FeedFlags, local_defaults, local_memcached};

use wal_clusters::ClusterMapError;

use crate::settings::ConsumerSettings;
use wal_apply::clients::ClientSettings;

/// See [`ConsumerOptions::max_held`].
pub const DEFAULT_MAX_HELD: u32 = 8192;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "wal-consumer",
    version,
    about = "Delivers a namespace's entries to their targets"
)]
pub struct ConsumerOptions {
    #[command(flatten)]
    pub feed: FeedFlags,

    /// Where Prometheus metrics are served (GET /metrics).
    #[arg(
        long,
        env = "WAL_CONSUMER_METRICS_LISTEN",
        default_value = "127.0.0.1:9465"
    )]
    pub metrics_listen: SocketAddr,

    /// Where the gRPC health service answers (grpc.health.v1, service "wal.consumer").
    #[arg(
        long,
        env = "WAL_CONSUMER_HEALTH_LISTEN",
        default_value = "127.0.0.1:50052"
    )]
    pub health_listen: SocketAddr,

    #[command(flatten)]
    pub brokers: BrokerFlags,

    /// Serve only the namespaces whose config names this consumer stack (`consumer_stack`, or
    /// Netflix's `consumerStack`), so each consumer group of a deployment has its own and scales
    /// alone. Unset: every namespace.
    #[arg(long, env = "WAL_CONSUMER_STACK")]
    pub consumer_stack: Option<String>,

    /// This consumer's region (as the producers here write it on every entry): a replicated
    /// namespace's entries are sent to every destination region but this one.
    #[arg(long, env = "WAL_REGION", default_value = "local")]
    pub region: String,

    /// Replicate only to these destination regions (comma-separated), so each region's readers
    /// can run in a deployment of their own (the chart's consumer group per region). Unset:
    /// every destination region of each replicated namespace but --region.
    #[arg(long, env = "WAL_REPLICATE_TO", value_delimiter = ',')]
    pub replicate_to: Vec<String>,

    /// Read only these destinations of each namespace (comma-separated): `default` (its own
    /// target), names from its `destinations`, `region-<name>` for a region it replicates to.
    /// So a slow store's readers can run in a deployment of their own (the chart's consumer
    /// group with `destinations`). Unset: every destination (regions as --replicate-to says).
    #[arg(long, env = "WAL_CONSUMER_DESTINATIONS", value_delimiter = ',')]
    pub destinations: Vec<String>,

    /// The CA certificate (PEM) the other regions' writers' certificates chain to. With it,
    /// writers are reached over TLS: a region target's writer address without a scheme, or
    /// with http://, is called with https://.
    #[arg(long, env = "WAL_WRITER_CA")]
    pub writer_ca: Option<std::path::PathBuf>,

    /// The client certificate (PEM) to present to writers that require one (their --authorize
    /// lets in only the principals it names).
    #[arg(
        long,
        env = "WAL_WRITER_CERT",
        requires = "writer_ca",
        requires = "writer_key"
    )]
    pub writer_cert: Option<std::path::PathBuf>,

    /// The private key (PEM) of --writer-cert.
    #[arg(long, env = "WAL_WRITER_KEY", requires = "writer_cert")]
    pub writer_key: Option<std::path::PathBuf>,

    /// Kafka bootstrap servers for kafka targets (the cluster map's default cluster when unset).
    #[arg(long, env = "WAL_TARGET_KAFKA_BOOTSTRAP")]
    pub target_kafka_bootstrap: Option<String>,

    /// The longest SQS DelaySeconds used; longer delays are taken in steps this long. SQS's
    /// maximum, 900, is right outside tests, which shorten it to see many steps quickly.
    #[arg(long, env = "WAL_SQS_DELAY_STEP_SECS", default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..=900))]
    pub sqs_delay_step_secs: u64,

    #[command(flatten)]
    pub cql: CqlFlags,

    /// memcached servers (comma-separated host:port) for cache targets that name none.
    #[arg(long, env = "WAL_MEMCACHED", value_delimiter = ',')]
    pub memcached: Vec<String>,

    /// Entries being applied or settled at once per queue.
    #[arg(long, env = "WAL_CONSUMER_MAX_IN_FLIGHT", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_in_flight: u32,

    /// Entries per queue that may wait in memory for their deliver-at (retries in backoff, the
    /// last seconds of a delay) without holding an in-flight slot. Bounds the consumer's memory
    /// with --max-in-flight: at most the sum of both entries per queue are held, about 2.5 KiB
    /// each. A steady stream of delayed entries keeps about its rate times the hold limit (SQS
    /// 5 s, Kafka 7 s) held (a Kafka entry back from its delay tier waits 2 to 7 s); the default, about 20 MiB,
    /// keeps up with some 1,500 delayed entries a second per queue. When the slots are used up
    /// the worker receives no more until held entries come due, and entries come late.
    #[arg(long, env = "WAL_CONSUMER_MAX_HELD", default_value_t = DEFAULT_MAX_HELD, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub max_held: u32,

    /// The longest one apply to a target may take before it counts as a retryable failure.
    #[arg(long, env = "WAL_CONSUMER_APPLY_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub apply_timeout_ms: u64,

    /// How long shutdown waits for entries in progress before closing the queues regardless.
    /// Closing takes at most 20 s more when the Kafka brokers do not answer: 10 s for the final
    /// commits, 10 s for the consumers to leave their groups.
    #[arg(long, env = "WAL_CONSUMER_SHUTDOWN_GRACE_MS", default_value_t = 30_000)]
    pub shutdown_grace_ms: u64,

    /// Create every namespace's queues and DLQs at start-up if they are missing (local use;
    /// in production the control plane provisions).
    #[arg(long, env = "WAL_PROVISION", default_value_t = false)]
    pub provision: bool,

    #[command(flatten)]
    pub log: wal_runtime::process::LogFlags,
}

impl ConsumerOptions {
    /// Where the namespaces come from.
    pub fn source(&self) -> wal_namespaces::feed::Source {
        self.feed.source()
    }

    pub fn apply_timeout(&self) -> Duration {
        Duration::from_millis(self.apply_timeout_ms)
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }

    /// What the library runs on, from these flags; fails on a cluster map that cannot be read.
    pub fn settings(&self) -> Result<ConsumerSettings, ClusterMapError> {
        let delay_step = Duration::from_secs(self.sqs_delay_step_secs);
        let clusters = self
            .brokers
            .cluster_map(self.brokers.kafka(), &self.cql)?
            .tune_sqs(|sqs| sqs.delay_step = delay_step);
        let mut clients = self.client_settings();
        if self.target_kafka_bootstrap.is_none() {
            // Kafka targets publish to the map's default cluster unless told otherwise, and
            // log in to it as the queues do.
            clients.kafka_bootstrap = clusters.default_kafka().bootstrap_servers.clone();
            clients.kafka_client = clusters.default_kafka().client.clone();
        }
        Ok(ConsumerSettings {
            clients,
            clusters,
            region: self.region.clone(),
            replicate_to: self.replicate_to.clone(),
            destinations: self.destinations.clone(),
            stack: self.consumer_stack.clone(),
            max_in_flight: self.max_in_flight,
            max_held: self.max_held,
            apply_timeout: self.apply_timeout(),
            shutdown_grace: self.shutdown_grace(),
            provision: self.provision,
        })
    }

    pub fn client_settings(&self) -> ClientSettings {
        ClientSettings {
            cql_nodes: self.cql.cql_nodes.clone(),
            writer_tls: self
                .writer_ca
                .clone()
                .map(|ca| wal_namespaces::feed::ClientTls {
                    ca,
                    cert: self.writer_cert.clone(),
                    key: self.writer_key.clone(),
                }),
            memcached: self.memcached.clone(),
            kafka_bootstrap: self
                .target_kafka_bootstrap
                .clone()
                .unwrap_or_else(|| self.brokers.kafka_bootstrap.clone()),
            ..ClientSettings::none(self.apply_timeout())
        }
    }

    /// Options for a consumer in tests and benchmarks: the flags' defaults (the environment
    /// ignored) with the stack's addresses from the environment `scripts/stack env` prints (its
    /// memcached for cache targets), any free port for metrics and health, provisioning on.
    pub fn for_local_stack(namespaces: PathBuf) -> Self {
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut options: Self = local_defaults();
        options.feed = FeedFlags::folder(namespaces);
        options.metrics_listen = any_port;
        options.health_listen = any_port;
        options.provision = true;
        options.brokers = BrokerFlags::local_stack();
        options.cql = CqlFlags::local_stack();
        options.memcached = local_memcached();
        options
    }
}
