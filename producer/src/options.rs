//! The producer's command line. Every flag can also be set through the environment variable
//! named in its help, which is how the Helm chart and `scripts/stack env` configure it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

use crate::faults::Faults;
use crate::settings::ProducerSettings;
use wal_clusters::flags::{BrokerFlags, CqlFlags, FeedFlags, local_defaults};
use wal_runtime::authorize::SecurityFlags;

#[derive(Debug, Clone, Parser)]
#[command(name = "wal-producer", version, about = "The WriteToLog gRPC server")]
pub struct ProducerOptions {
    /// Where the gRPC server listens.
    #[arg(long, env = "WAL_PRODUCER_LISTEN", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,

    /// Where Prometheus metrics are served (GET /metrics).
    #[arg(
        long,
        env = "WAL_PRODUCER_METRICS_LISTEN",
        default_value = "127.0.0.1:9464"
    )]
    pub metrics_listen: SocketAddr,

    #[command(flatten)]
    pub feed: FeedFlags,

    #[command(flatten)]
    pub brokers: BrokerFlags,

    /// The longest SQS DelaySeconds used; longer delays are taken in steps this long. SQS's
    /// maximum, 900, is right outside tests, which shorten it to see many steps quickly.
    #[arg(long, env = "WAL_SQS_DELAY_STEP_SECS", default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..=900))]
    pub sqs_delay_step_secs: u64,

    #[command(flatten)]
    pub cql: CqlFlags,

    /// This producer's region, written on every entry as its origin.
    #[arg(long, env = "WAL_REGION", default_value = "local")]
    pub region: String,

    /// How long one write may wait for the broker before the answer is UNKNOWN.
    #[arg(long, env = "WAL_WRITE_TIMEOUT_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..=120_000))]
    pub write_timeout_ms: u64,

    /// Create every namespace's queues and DLQs at start-up if they are missing (local use;
    /// in production the control plane provisions).
    #[arg(long, env = "WAL_PROVISION", default_value_t = false)]
    pub provision: bool,

    /// TLS on the gRPC port, and authorization of writes against each namespace's
    /// `access.write`.
    #[command(flatten)]
    pub security: SecurityFlags,

    #[command(flatten)]
    pub log: wal_runtime::process::LogFlags,

    /// Faults for client libraries' conformance tests (see producer/src/faults.rs); hidden, as
    /// nothing outside a test sets it.
    #[arg(long, env = "WAL_TEST_FAULTS", default_value = "", hide = true)]
    pub test_faults: String,
}

impl ProducerOptions {
    /// Where the namespaces come from.
    pub fn source(&self) -> wal_namespaces::feed::Source {
        self.feed.source()
    }

    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.write_timeout_ms)
    }

    /// What the library runs on, from these flags; fails on a cluster map that cannot be read
    /// and on TLS files that cannot be used.
    pub fn settings(&self) -> anyhow::Result<ProducerSettings> {
        let write_timeout = self.write_timeout();
        let clusters = self
            .brokers
            .cluster_map(self.brokers.kafka(), &self.cql)?
            .tune_kafka(|kafka| kafka.delivery_timeout = write_timeout)
            .tune_sqs(|sqs| {
                sqs.send_timeout = write_timeout;
                sqs.delay_step = Duration::from_secs(self.sqs_delay_step_secs);
            });
        Ok(ProducerSettings {
            clusters,
            region: self.region.clone(),
            write_timeout,
            provision: self.provision,
            tls: self.security.server_tls()?,
            authorizer: self.security.authorizer().map_err(anyhow::Error::msg)?,
            faults: Arc::new(Faults::parse(&self.test_faults).map_err(anyhow::Error::msg)?),
        })
    }

    /// Options for a producer in tests and benchmarks: the flags' defaults (the environment
    /// ignored) with the stack's addresses from the environment `scripts/stack env` prints, any
    /// free port, provisioning on.
    pub fn for_local_stack(namespaces: PathBuf) -> Self {
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut options: Self = local_defaults();
        options.listen = any_port;
        options.metrics_listen = any_port;
        options.feed = FeedFlags::folder(namespaces);
        options.provision = true;
        options.brokers = BrokerFlags::local_stack();
        options.cql = CqlFlags::local_stack();
        options
    }
}
