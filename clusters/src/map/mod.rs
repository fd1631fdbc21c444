//! The deployment's cluster map: what the cluster names in namespace configs stand for. A
//! namespace's `wal.kafka.bootstrap.servers.prefix` names a Kafka cluster and its durable
//! storage's `shard` a CQL shard; a namespace that names neither uses the map's defaults.
//!
//! Every process reads the same map at start-up (`--clusters FILE`, or `WAL_CLUSTERS`); changing
//! it takes a restart of each. Without a file, the single-address flags (`--kafka-bootstrap`,
//! `--cql-nodes`, `--sqs-endpoint`) are the map: one cluster of each kind, named `default`. A
//! file replaces the sections it has and keeps the flags' for those it leaves out. The format:
//!
//! ```json
//! {
//!   "kafka": {
//!     "default": "main",
//!     "clusters": {
//!       "main": {"bootstrap_servers": "kafka-main:9092"},
//!       "events": {"bootstrap_servers": "kafka-events:9093",
//!                  "client": {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512"}}
//!     }
//!   },
//!   "cql": {"default": "main", "shards": {"main": {"contact_points": ["scylla:9042"], "local_datacenter": "dc1"}}},
//!   "sqs": {"region": "us-east-1"}
//! }
//! ```
//!
//! `client` holds more librdkafka properties for every client of that cluster. The properties
//! the platform's guarantees rest on (`acks`, idempotence, offset commits, group ids) are
//! refused: the platform sets them itself. A value may be `${env:NAME}` or `${file:/path}`
//! (see [`wal_runtime::secret`]), so passwords stay out of the map; secret values are never printed.
//!
//! A CQL shard may name `username` and `password` (the password as such a reference, or plain)
//! for a cluster with authentication on.
//!
//! Replication of what the platform creates: a Kafka cluster's `replication_factor` (copies of
//! each topic) and `min_insync_replicas` (copies a write needs before it is answered TRUE), a
//! CQL shard's `replication_factor` (of the keyspaces for staging, archives and claim checks).
//! Unset, the flags' (`--kafka-replication-factor`, `--kafka-min-insync-replicas`,
//! `--cql-replication-factor`), else one copy and the broker's own minimum: right for one
//! broker and one node, wrong for production, where three copies and two in sync are usual. A
//! process refuses at start-up a map asking more copies than the cluster has brokers. They
//! apply when a topic or keyspace is created; one that exists keeps its own.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use wal_namespaces::{Backend, Namespace};

use wal_queue::kafka::KafkaSettings;
use wal_queue::sqs::SqsSettings;

mod file;

pub use file::kafka_copies;

/// The name of the one cluster of each kind the single-address flags make.
pub const DEFAULT_NAME: &str = "default";

/// The Kafka clusters, CQL shards and SQS endpoint of a deployment, by name.
#[derive(Debug, Clone)]
pub struct ClusterMap {
    kafka: Named<KafkaSettings>,
    cql: Named<CqlShard>,
    sqs: SqsSettings,
    /// Where the map was read from; `None` for the flags' map.
    origin: Option<PathBuf>,
}

/// How to reach one CQL cluster (a shard of durable storage).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CqlShard {
    /// `host:port` of the nodes the driver contacts first.
    pub contact_points: Vec<String>,
    /// The datacenter whose nodes the driver prefers; unset, any.
    #[serde(default)]
    pub local_datacenter: Option<String>,
    /// The user to log in as, on a cluster with authentication on.
    #[serde(default)]
    pub username: Option<String>,
    /// Its password: `${env:NAME}`, `${file:/path}` or the value itself. Resolved when the map
    /// is read; never printed.
    #[serde(default)]
    pub password: Option<wal_runtime::secret::Secret>,
    /// The CA certificate (PEM) the nodes' certificates chain to: with it, the shard is reached
    /// over TLS (the nodes' client_encryption_options).
    #[serde(default)]
    pub tls_ca: Option<PathBuf>,
    /// Copies of the keyspaces the platform creates on this shard; unset, the flags' (one).
    #[serde(default)]
    pub replication_factor: Option<u8>,
}

/// Entries by name, one of them the default.
#[derive(Debug, Clone)]
struct Named<T> {
    default: String,
    entries: BTreeMap<String, T>,
}

impl<T> Named<T> {
    fn single(entry: T) -> Self {
        Self {
            default: DEFAULT_NAME.to_owned(),
            entries: BTreeMap::from([(DEFAULT_NAME.to_owned(), entry)]),
        }
    }

    /// The entry `name` stands for; `None` (no name) is the default.
    fn get(&self, name: Option<&str>) -> Option<&T> {
        self.entries.get(name.unwrap_or(&self.default))
    }

    fn known(&self) -> String {
        let names: Vec<&str> = self.entries.keys().map(String::as_str).collect();
        names.join(", ")
    }
}

/// Why a cluster map could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClusterMapError {
    #[error("cannot read the cluster map {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{flag} is invalid: {reason}")]
    Flags { flag: String, reason: String },
    #[error("the cluster map {path} is invalid at {at}: {reason}")]
    Invalid {
        path: PathBuf,
        at: String,
        reason: String,
    },
}

/// Namespaces that name clusters or shards the map does not have, one problem a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct UnknownNames(pub Vec<String>);

impl ClusterMap {
    /// The map of the single-address flags: one Kafka cluster, one CQL shard, named `default`.
    pub fn single(kafka: KafkaSettings, cql_nodes: Vec<String>, sqs: SqsSettings) -> Self {
        let cql = CqlShard {
            contact_points: cql_nodes,
            local_datacenter: None,
            username: None,
            password: None,
            tls_ca: None,
            replication_factor: None,
        };
        Self {
            kafka: Named::single(kafka),
            cql: Named::single(cql),
            sqs,
            origin: None,
        }
    }

    /// This map with the single-address flags' CQL shard keeping `copies` of what the platform
    /// creates (`None`: one).
    pub fn with_cql_replication(mut self, copies: Option<u8>) -> Self {
        for shard in self.cql.entries.values_mut() {
            shard.replication_factor = copies;
        }
        self
    }

    /// This map with one more Kafka cluster, `name`, reached at `bootstrap_servers` with the
    /// default cluster's other settings (tests and embedding programs; deployments use a file).
    pub fn with_kafka_cluster(mut self, name: &str, bootstrap_servers: &str) -> Self {
        let settings = KafkaSettings {
            bootstrap_servers: bootstrap_servers.to_owned(),
            ..self.default_kafka().clone()
        };
        self.kafka.entries.insert(name.to_owned(), settings);
        self
    }

    /// Applies `tune` to every Kafka cluster's settings (a binary's timeouts, say).
    pub fn tune_kafka(mut self, tune: impl Fn(&mut KafkaSettings)) -> Self {
        self.kafka.entries.values_mut().for_each(tune);
        self
    }

    /// Applies `tune` to the SQS settings (a binary's timeouts, say).
    pub fn tune_sqs(mut self, tune: impl FnOnce(&mut SqsSettings)) -> Self {
        tune(&mut self.sqs);
        self
    }

    /// The Kafka cluster `name` stands for (`None`: the default).
    pub fn kafka(&self, name: Option<&str>) -> Option<&KafkaSettings> {
        self.kafka.get(name)
    }

    pub fn default_kafka(&self) -> &KafkaSettings {
        self.kafka
            .get(None)
            .unwrap_or_else(|| unreachable!("a map's default is one of its clusters"))
    }

    /// The name a queue's cluster setting resolves to.
    pub fn kafka_name<'a>(&'a self, name: Option<&'a str>) -> &'a str {
        name.unwrap_or(&self.kafka.default)
    }

    /// Every Kafka cluster, by name.
    pub fn kafka_clusters(&self) -> impl Iterator<Item = (&str, &KafkaSettings)> {
        self.kafka.entries.iter().map(|(n, s)| (n.as_str(), s))
    }

    /// The CQL shard `name` stands for (`None`: the default).
    pub fn cql(&self, name: Option<&str>) -> Option<&CqlShard> {
        self.cql.get(name)
    }

    /// Every CQL shard, by name.
    pub fn cql_shards(&self) -> impl Iterator<Item = (&str, &CqlShard)> {
        self.cql.entries.iter().map(|(n, s)| (n.as_str(), s))
    }

    /// The CQL shard a namespace that names none uses.
    pub fn default_cql_name(&self) -> &str {
        &self.cql.default
    }

    pub fn sqs(&self) -> &SqsSettings {
        &self.sqs
    }

    /// Where the map came from, for logs: the file, or the flags.
    pub fn origin(&self) -> String {
        match &self.origin {
            Some(path) => path.display().to_string(),
            None => "the single-address flags".to_owned(),
        }
    }

    /// What `namespace` names that this map does not have: each problem names the field and
    /// the names the map knows. Empty when the namespace can be served here.
    pub fn unknown_names(&self, namespace: &Namespace) -> Vec<String> {
        let mut problems = Vec::new();
        for queue in namespace
            .queues
            .iter()
            .filter(|q| q.backend == Backend::Kafka)
        {
            if let Some(cluster) = queue.cluster.as_deref()
                && self.kafka.get(Some(cluster)).is_none()
            {
                problems.push(format!(
                    "queue '{}': wal.kafka.bootstrap.servers.prefix names Kafka cluster '{cluster}', which the cluster map ({}) does not have; known: {}",
                    queue.name,
                    self.origin(),
                    self.kafka.known()
                ));
            }
        }
        if let Some(shard) = namespace
            .durable_storage
            .as_ref()
            .and_then(|d| d.shard.as_deref())
            && self.cql.get(Some(shard)).is_none()
        {
            problems.push(format!(
                "durable_storage.shard names CQL shard '{shard}', which the cluster map ({}) does not have; known: {}",
                self.origin(),
                self.cql.known()
            ));
        }
        problems
    }

    /// Refuses `namespaces` if any names a cluster or shard this map does not have.
    pub fn check(&self, namespaces: &[Namespace]) -> Result<(), UnknownNames> {
        let problems: Vec<String> = namespaces
            .iter()
            .flat_map(|ns| {
                let named = self.unknown_names(ns).into_iter();
                named.map(move |problem| format!("namespace '{}': {problem}", ns.name))
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(UnknownNames(problems))
        }
    }

    /// `namespace` with every Kafka queue's cluster named, the default's name where it named
    /// none: two configs that put a queue on the same cluster then compare equal.
    pub fn resolved(&self, namespace: &Namespace) -> Namespace {
        let mut resolved = namespace.clone();
        for queue in resolved.queues.iter_mut() {
            if queue.backend == Backend::Kafka && queue.cluster.is_none() {
                queue.cluster = Some(self.kafka.default.clone());
            }
        }
        resolved
    }
}

#[cfg(test)]
mod tests;
