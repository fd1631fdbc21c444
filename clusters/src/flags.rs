//! Where the brokers and CQL are: the flags every binary takes for them, one clap group each,
//! with the same names and environment variables everywhere (`scripts/stack env` and the Helm
//! chart set the variables once for all processes).

use std::path::PathBuf;

use wal_namespaces::feed::{ClientTls, Source};

use crate::{ClusterMap, ClusterMapError};
use wal_queue::kafka::KafkaSettings;
use wal_queue::sqs::SqsSettings;
use wal_runtime::secret::Secrets;

/// The brokers a process's namespaces live on.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct BrokerFlags {
    /// The cluster map (JSON): Kafka clusters, CQL shards and SQS by the names namespace configs
    /// use. Read at start-up. Without it, the single-address flags are the map, each cluster
    /// named "default"; with it, they stand only for the sections the file leaves out.
    #[arg(long, env = "WAL_CLUSTERS")]
    pub clusters: Option<PathBuf>,

    /// Kafka bootstrap servers, for namespaces on Kafka.
    #[arg(long, env = "WAL_KAFKA_BOOTSTRAP", default_value = "127.0.0.1:19092")]
    pub kafka_bootstrap: String,

    /// SQS endpoint (ElasticMQ locally), for namespaces on SQS; unset means AWS in --sqs-region.
    #[arg(long, env = "WAL_SQS_ENDPOINT")]
    pub sqs_endpoint: Option<String>,

    /// AWS region for SQS.
    #[arg(long, env = "WAL_SQS_REGION", default_value = "us-east-1")]
    pub sqs_region: String,

    /// Copies of each topic the platform creates on Kafka (at most the cluster's brokers; a
    /// process refuses to start on a cluster with fewer). Unset, 1: one broker's stack.
    #[arg(long, env = "WAL_KAFKA_REPLICATION_FACTOR", value_parser = clap::value_parser!(i32).range(1..))]
    pub kafka_replication_factor: Option<i32>,

    /// The min.insync.replicas of each topic the platform creates: the copies a write needs
    /// before it is answered TRUE (at most --kafka-replication-factor). Unset, the broker's.
    #[arg(long, env = "WAL_KAFKA_MIN_INSYNC_REPLICAS", value_parser = clap::value_parser!(i32).range(1..))]
    pub kafka_min_insync_replicas: Option<i32>,
}

impl BrokerFlags {
    pub fn kafka(&self) -> KafkaSettings {
        let mut settings = KafkaSettings::new(&self.kafka_bootstrap);
        if let Some(copies) = self.kafka_replication_factor {
            settings.replication_factor = copies;
        }
        settings.min_insync_replicas = self.kafka_min_insync_replicas;
        settings
    }

    pub fn sqs(&self) -> SqsSettings {
        match &self.sqs_endpoint {
            Some(endpoint) => SqsSettings::local(endpoint),
            None => SqsSettings::aws(&self.sqs_region),
        }
    }

    /// The cluster map: the --clusters file over these flags' single clusters (`kafka`, a
    /// binary's Kafka settings; `cql_nodes`, its CQL contact points).
    pub fn cluster_map(
        &self,
        kafka: KafkaSettings,
        cql: &CqlFlags,
    ) -> Result<ClusterMap, ClusterMapError> {
        self.cluster_map_as(kafka, cql, Secrets::Read)
    }

    /// Like [`cluster_map`](Self::cluster_map), reading the file's secrets or only checking
    /// their form ([`Secrets`]).
    pub fn cluster_map_as(
        &self,
        kafka: KafkaSettings,
        cql: &CqlFlags,
        secrets: Secrets,
    ) -> Result<ClusterMap, ClusterMapError> {
        let map = ClusterMap::single(kafka, cql.cql_nodes.clone(), self.sqs())
            .with_cql_replication(cql.cql_replication_factor);
        let map = match &self.clusters {
            Some(path) => map.with_file_as(path, secrets)?,
            None => map,
        };
        // A file's clusters were checked as it was read, naming their fields; what is left is
        // the flags' cluster (no file, or one without a kafka section).
        for (_, kafka) in map.kafka_clusters() {
            if let Err((field, reason)) =
                crate::kafka_copies(kafka.replication_factor, kafka.min_insync_replicas)
            {
                let flag = format!("--kafka-{}", field.replace('_', "-"));
                return Err(ClusterMapError::Flags { flag, reason });
            }
        }
        Ok(map)
    }
}

/// The CQL cluster: durable storage, claim checks, archives and cql targets.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct CqlFlags {
    /// CQL contact points (comma-separated host:port), for durable storage (claim checks, the
    /// archive) and cql targets. A --clusters file with a cql section stands in for them.
    #[arg(long, env = "WAL_CQL_NODES", value_delimiter = ',')]
    pub cql_nodes: Vec<String>,

    /// Copies of the keyspaces the platform creates (staging, archives, claim checks), at most
    /// the cluster's nodes. Unset, 1: one node's stack. A --clusters shard may set its own.
    #[arg(long, env = "WAL_CQL_REPLICATION_FACTOR", value_parser = clap::value_parser!(u8).range(1..))]
    pub cql_replication_factor: Option<u8>,
}

/// Where a service's namespaces come from: a folder of configs, or a control plane to follow.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct FeedFlags {
    /// The folder of namespace configs, one JSON file per namespace, read again every second:
    /// changes apply without a restart. Not used with --control-plane.
    #[arg(long, env = "WAL_NAMESPACES", default_value = "namespaces/examples")]
    pub namespaces: PathBuf,

    /// Take the namespaces from this control plane (e.g. http://127.0.0.1:50060) and follow
    /// its changes, instead of reading --namespaces.
    #[arg(long, env = "WAL_CONTROL_PLANE")]
    pub control_plane: Option<String>,

    /// The CA certificate (PEM) a TLS control plane's certificate chains to (with an https://
    /// --control-plane).
    #[arg(long, env = "WAL_CONTROL_PLANE_CA", requires = "control_plane")]
    pub control_plane_ca: Option<PathBuf>,

    /// The client certificate (PEM) to present to a control plane that requires one.
    #[arg(
        long,
        env = "WAL_CONTROL_PLANE_CERT",
        requires = "control_plane_ca",
        requires = "control_plane_key"
    )]
    pub control_plane_cert: Option<PathBuf>,

    /// The private key (PEM) of --control-plane-cert.
    #[arg(long, env = "WAL_CONTROL_PLANE_KEY", requires = "control_plane_cert")]
    pub control_plane_key: Option<PathBuf>,
}

impl FeedFlags {
    /// A folder of configs, as tests and benchmarks use.
    pub fn folder(namespaces: PathBuf) -> Self {
        Self {
            namespaces,
            control_plane: None,
            control_plane_ca: None,
            control_plane_cert: None,
            control_plane_key: None,
        }
    }

    /// Where the namespaces come from.
    pub fn source(&self) -> Source {
        match &self.control_plane {
            Some(url) => Source::ControlPlane(
                url.clone(),
                self.control_plane_ca.clone().map(|ca| ClientTls {
                    ca,
                    cert: self.control_plane_cert.clone(),
                    key: self.control_plane_key.clone(),
                }),
            ),
            None => Source::Folder(self.namespaces.clone()),
        }
    }
}

/// A binary's flags at their defaults with the environment ignored (tests and benchmarks start
/// from these, whatever the shell that runs them has set), then the local stack's addresses from
/// the environment `scripts/stack env` prints. Panics if the flags' own defaults do not parse: a
/// build defect.
pub fn local_defaults<T: clap::Parser>() -> T {
    let command = T::command().mut_args(|arg| arg.env(None::<&'static str>));
    let name = command.get_name().to_owned();
    let matches = command
        .try_get_matches_from([name])
        .unwrap_or_else(|e| panic!("the flags' defaults: {e}"));
    T::from_arg_matches(&matches).unwrap_or_else(|e| panic!("the flags' defaults: {e}"))
}

impl BrokerFlags {
    /// The local stack's brokers: `scripts/stack env`'s addresses, else the stack's defaults.
    pub fn local_stack() -> Self {
        Self {
            clusters: None,
            kafka_bootstrap: env_or("WAL_KAFKA_BOOTSTRAP", "127.0.0.1:19092"),
            sqs_endpoint: Some(env_or("WAL_SQS_ENDPOINT", "http://127.0.0.1:19324")),
            sqs_region: "us-east-1".to_owned(),
            kafka_replication_factor: env_parsed("WAL_KAFKA_REPLICATION_FACTOR"),
            kafka_min_insync_replicas: env_parsed("WAL_KAFKA_MIN_INSYNC_REPLICAS"),
        }
    }
}

impl CqlFlags {
    /// The local stack's Cassandra: `scripts/stack env`'s address, else the stack's default.
    pub fn local_stack() -> Self {
        Self {
            cql_nodes: list_or("WAL_CQL_NODES", "127.0.0.1:19042"),
            cql_replication_factor: env_parsed("WAL_CQL_REPLICATION_FACTOR"),
        }
    }
}

/// The local stack's memcached servers: `scripts/stack env`'s, else the stack's default.
pub fn local_memcached() -> Vec<String> {
    list_or("WAL_MEMCACHED", "127.0.0.1:19211")
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// A number `scripts/stack env` set (the clustered stack's replication); unset, `None`. Panics
/// on a value that is not one: the stack's environment is made by a script, not typed.
fn env_parsed<T: std::str::FromStr>(name: &str) -> Option<T> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value}: expected a number")),
    )
}

fn list_or(name: &str, default: &str) -> Vec<String> {
    env_or(name, default)
        .split(',')
        .map(str::to_owned)
        .collect()
}
