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
use std::path::{Path, PathBuf};

use serde::Deserialize;
use wal_namespaces::{Backend, Namespace};

use wal_queue::kafka::KafkaSettings;
use wal_queue::sqs::SqsSettings;
use wal_runtime::secret::Secrets;

/// The name of the one cluster of each kind the single-address flags make.
pub const DEFAULT_NAME: &str = "default";

/// librdkafka properties a cluster's `client` may not set, and why.
const PLATFORM_PROPERTIES: [(&str, &str); 8] = [
    ("bootstrap.servers", "set bootstrap_servers instead"),
    (
        "acks",
        "TRUE means every in-sync replica has the entry: acks is all",
    ),
    (
        "request.required.acks",
        "TRUE means every in-sync replica has the entry: acks is all",
    ),
    (
        "enable.idempotence",
        "retries must not write an entry twice",
    ),
    (
        "enable.auto.commit",
        "an entry is acknowledged only after its effect",
    ),
    (
        "enable.auto.offset.store",
        "an entry is acknowledged only after its effect",
    ),
    ("group.id", "consumer groups are named per queue"),
    ("client.id", "each client names itself"),
];

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

/// The file form, every section optional.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    #[serde(default)]
    kafka: Option<SectionFile<KafkaClusterFile>>,
    #[serde(default)]
    cql: Option<CqlSectionFile>,
    #[serde(default)]
    sqs: Option<SqsFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SectionFile<T> {
    default: String,
    clusters: BTreeMap<String, T>,
}

/// The CQL section names its entries shards, as namespace configs do.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CqlSectionFile {
    default: String,
    shards: BTreeMap<String, CqlShard>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KafkaClusterFile {
    bootstrap_servers: String,
    #[serde(default)]
    client: BTreeMap<String, String>,
    #[serde(default)]
    replication_factor: Option<i32>,
    #[serde(default)]
    min_insync_replicas: Option<i32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SqsFile {
    /// ElasticMQ or another SQS-compatible endpoint; unset, AWS in `region`.
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default = "default_region")]
    region: String,
}

fn default_region() -> String {
    "us-east-1".to_owned()
}

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

    /// This map with the sections the file at `path` has put in place of its own. Kafka
    /// clusters take this map's default Kafka settings (timeouts, partitions) with their own
    /// bootstrap servers and client properties.
    pub fn with_file(self, path: &Path) -> Result<Self, ClusterMapError> {
        self.with_file_as(path, Secrets::Read)
    }

    /// Like [`with_file`](Self::with_file); with [`Secrets::FormOnly`] the secret references
    /// are checked for their form but not read (a map checked away from where it runs).
    pub fn with_file_as(self, path: &Path, secrets: Secrets) -> Result<Self, ClusterMapError> {
        let text = std::fs::read(path).map_err(|source| ClusterMapError::Read {
            path: path.to_owned(),
            source,
        })?;
        let invalid = |at: &str, reason: String| ClusterMapError::Invalid {
            path: path.to_owned(),
            at: at.to_owned(),
            reason,
        };
        let file: MapFile =
            wal_targets::json::parse(&text).map_err(|e| invalid(&e.path, e.reason))?;
        let mut map = self;
        map.origin = Some(path.to_owned());
        if let Some(section) = file.kafka {
            let template = map.default_kafka().clone();
            let mut clusters = BTreeMap::new();
            for (name, cluster) in section.clusters {
                let at = format!("kafka.clusters.{name}");
                let settings = kafka_cluster(&template, cluster, secrets)
                    .map_err(|(field, reason)| invalid(&format!("{at}.{field}"), reason))?;
                clusters.insert(name, settings);
            }
            map.kafka =
                named(section.default, clusters).map_err(|r| invalid("kafka.default", r))?;
        }
        if let Some(mut section) = file.cql {
            let template = map.cql.get(None).and_then(|s| s.replication_factor);
            for (name, shard) in &mut section.shards {
                if shard.replication_factor == Some(0) {
                    let at = format!("cql.shards.{name}.replication_factor");
                    return Err(invalid(&at, "expected at least 1 copy".to_owned()));
                }
                shard.replication_factor = shard.replication_factor.or(template);
                if shard.contact_points.is_empty() {
                    let at = format!("cql.shards.{name}.contact_points");
                    return Err(invalid(&at, "expected at least one host:port".to_owned()));
                }
                if let Some(password) = &shard.password {
                    let at = format!("cql.shards.{name}.password");
                    let resolved = wal_runtime::secret::resolve_as(password.expose(), secrets)
                        .map_err(|reason| invalid(&at, reason))?;
                    shard.password = Some(wal_runtime::secret::Secret::new(resolved));
                }
                if shard.password.is_some() != shard.username.is_some() {
                    let at = format!("cql.shards.{name}");
                    return Err(invalid(
                        &at,
                        "expected username and password together".to_owned(),
                    ));
                }
            }
            map.cql =
                named(section.default, section.shards).map_err(|r| invalid("cql.default", r))?;
        }
        if let Some(sqs) = file.sqs {
            map.sqs = match sqs.endpoint {
                Some(endpoint) => SqsSettings::local(&endpoint),
                None => SqsSettings::aws(&sqs.region),
            };
        }
        Ok(map)
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

/// `clusters` with `default` among them, or why not.
fn named<T>(default: String, entries: BTreeMap<String, T>) -> Result<Named<T>, String> {
    let named = Named { default, entries };
    if named.entries.contains_key(&named.default) {
        return Ok(named);
    }
    Err(format!(
        "the default '{}' is not one of the entries; known: {}",
        named.default,
        named.known()
    ))
}

/// One cluster's settings: `template`'s with the file's servers and client properties.
fn kafka_cluster(
    template: &KafkaSettings,
    file: KafkaClusterFile,
    secrets: Secrets,
) -> Result<KafkaSettings, (String, String)> {
    if file.bootstrap_servers.trim().is_empty() {
        let reason = "expected host:port[,host:port...]".to_owned();
        return Err(("bootstrap_servers".to_owned(), reason));
    }
    for key in file.client.keys() {
        if let Some((_, why)) = PLATFORM_PROPERTIES.iter().find(|(k, _)| k == key) {
            let reason = format!("the platform sets this property itself: {why}");
            return Err((format!("client.{key}"), reason));
        }
    }
    let client = wal_runtime::secret::ClientProperties::resolved(file.client, secrets)
        .map_err(|(key, reason)| (format!("client.{key}"), reason))?;
    let replication_factor = file
        .replication_factor
        .unwrap_or(template.replication_factor);
    let min_insync_replicas = file.min_insync_replicas.or(template.min_insync_replicas);
    kafka_copies(replication_factor, min_insync_replicas).map_err(|(field, reason)| {
        let inherited = match field.as_str() {
            "replication_factor" => file.replication_factor.is_none(),
            _ => file.min_insync_replicas.is_none(),
        };
        let reason = if inherited {
            let flag = format!("--kafka-{}", field.replace('_', "-"));
            format!("{reason} (the value of {flag}, which this cluster takes as it sets none)")
        } else {
            reason
        };
        (field, reason)
    })?;
    Ok(KafkaSettings {
        bootstrap_servers: file.bootstrap_servers,
        client,
        replication_factor,
        min_insync_replicas,
        ..template.clone()
    })
}

/// Whether a topic's copies can be kept: at least one, and no more needed in sync than there
/// are (such a topic would refuse every write). The field at fault and why, if not.
pub fn kafka_copies(
    replication_factor: i32,
    min_insync_replicas: Option<i32>,
) -> Result<(), (String, String)> {
    if replication_factor < 1 {
        let reason = format!("{replication_factor}: expected at least 1 copy");
        return Err(("replication_factor".to_owned(), reason));
    }
    match min_insync_replicas {
        Some(n) if n < 1 || n > replication_factor => Err((
            "min_insync_replicas".to_owned(),
            format!(
                "{n}: expected 1 to replication_factor ({replication_factor}); more copies in \
                 sync than a topic has would refuse every write"
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags_map() -> ClusterMap {
        ClusterMap::single(
            KafkaSettings::new("127.0.0.1:19092"),
            vec!["127.0.0.1:19042".to_owned()],
            SqsSettings::local("http://127.0.0.1:19324"),
        )
    }

    fn with_text(text: &str) -> Result<ClusterMap, ClusterMapError> {
        let path = std::env::temp_dir().join(format!("wal-clusters-{}.json", uuid::Uuid::now_v7()));
        std::fs::write(&path, text).unwrap();
        let map = flags_map().with_file(&path);
        std::fs::remove_file(&path).unwrap();
        map
    }

    #[test]
    fn a_file_replaces_the_sections_it_has_and_keeps_the_flags_for_the_others() {
        let map = with_text(
            r#"{"kafka": {"default": "main", "clusters": {
                 "main": {"bootstrap_servers": "a:9092"},
                 "events": {"bootstrap_servers": "b:9092", "client": {"security.protocol": "SSL"}}}}}"#,
        )
        .unwrap();
        assert_eq!(map.default_kafka().bootstrap_servers, "a:9092");
        let events = map.kafka(Some("events")).unwrap();
        assert_eq!(events.bootstrap_servers, "b:9092");
        assert_eq!(events.client.get("security.protocol"), Some("SSL"));
        // The flags' timeouts travel to every cluster.
        assert_eq!(
            events.delivery_timeout,
            KafkaSettings::new("x").delivery_timeout
        );
        assert!(map.kafka(Some("default")).is_none());
        assert_eq!(map.cql(None).unwrap().contact_points, ["127.0.0.1:19042"]);
        assert_eq!(map.cql(Some("default")), map.cql(None));
    }

    #[test]
    fn secrets_come_from_the_environment_or_files_and_are_never_printed() {
        let file = std::env::temp_dir().join(format!("wal-cql-password-{}", uuid::Uuid::now_v7()));
        std::fs::write(&file, "cql-secret\n").unwrap();
        // PATH stands for a variable a deployment sets: it is set wherever this runs.
        let path = std::env::var("PATH").unwrap();
        let map = with_text(&format!(
            r#"{{"kafka": {{"default": "main", "clusters": {{"main": {{"bootstrap_servers": "a:9092",
                  "client": {{"sasl.username": "wal", "sasl.password": "${{env:PATH}}"}}}}}}}},
                "cql": {{"default": "s", "shards": {{"s": {{"contact_points": ["c:9042"],
                  "username": "wal", "password": "${{file:{}}}"}}}}}}}}"#,
            file.display()
        ))
        .unwrap();
        std::fs::remove_file(&file).unwrap();
        assert_eq!(
            map.default_kafka().client.get("sasl.password"),
            Some(path.as_str())
        );
        let shard = map.cql(None).unwrap();
        assert_eq!(
            shard.password.as_ref().map(|p| p.expose()),
            Some("cql-secret")
        );
        let printed = format!("{map:?}");
        assert!(
            !printed.contains(&path) && !printed.contains("cql-secret"),
            "{printed}"
        );
        assert!(printed.contains("<redacted>"), "{printed}");

        let error = with_text(
            r#"{"kafka": {"default": "m", "clusters": {"m": {"bootstrap_servers": "a:1",
                 "client": {"sasl.password": "${env:WAL_NO_SUCH_VARIABLE_EVER}"}}}}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("at kafka.clusters.m.client.sasl.password")
                && error.contains("WAL_NO_SUCH_VARIABLE_EVER"),
            "{error}"
        );
        let error = with_text(
            r#"{"cql": {"default": "s", "shards": {"s": {"contact_points": ["c:1"], "username": "u"}}}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("expected username and password together"),
            "{error}"
        );
    }

    #[test]
    fn replication_comes_from_the_file_else_the_flags() {
        let mut flags = KafkaSettings::new("127.0.0.1:19092");
        flags.replication_factor = 3;
        flags.min_insync_replicas = Some(2);
        let path = std::env::temp_dir().join(format!("wal-clusters-{}.json", uuid::Uuid::now_v7()));
        std::fs::write(
            &path,
            r#"{"kafka": {"default": "main", "clusters": {
                 "main": {"bootstrap_servers": "a:9092"},
                 "small": {"bootstrap_servers": "b:9092", "replication_factor": 1, "min_insync_replicas": 1}}},
                "cql": {"default": "s", "shards": {
                 "s": {"contact_points": ["c:9042"]},
                 "r5": {"contact_points": ["d:9042"], "replication_factor": 5}}}}"#,
        )
        .unwrap();
        let map = ClusterMap::single(flags, vec![], SqsSettings::local("http://x"))
            .with_cql_replication(Some(3))
            .with_file(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        let main = map.kafka(Some("main")).unwrap();
        assert_eq!(
            (main.replication_factor, main.min_insync_replicas),
            (3, Some(2))
        );
        let small = map.kafka(Some("small")).unwrap();
        assert_eq!(
            (small.replication_factor, small.min_insync_replicas),
            (1, Some(1))
        );
        assert_eq!(map.cql(Some("s")).unwrap().replication_factor, Some(3));
        assert_eq!(map.cql(Some("r5")).unwrap().replication_factor, Some(5));
    }

    #[test]
    fn mistakes_are_named_with_their_place() {
        let cases = [
            (
                r#"{"kafka": {"default": "x", "clusters": {"main": {"bootstrap_servers": "a:1"}}}}"#,
                "at kafka.default: the default 'x' is not one of the entries; known: main",
            ),
            (
                r#"{"kafka": {"default": "main", "clusters": {"main": {"bootstrap_server": "a:1"}}}}"#,
                "at kafka.clusters.main.bootstrap_server: unknown field",
            ),
            (
                r#"{"kafka": {"default": "main", "clusters": {"main": {"bootstrap_servers": "a:1", "client": {"acks": "1"}}}}}"#,
                "at kafka.clusters.main.client.acks: the platform sets this property itself",
            ),
            (
                r#"{"cql": {"default": "s", "shards": {"s": {"contact_points": []}}}}"#,
                "at cql.shards.s.contact_points: expected at least one",
            ),
            (r#"{"kafka": 3}"#, "at kafka: invalid type"),
            (
                r#"{"kafka": {"default": "m", "clusters": {"m": {"bootstrap_servers": "a:1", "replication_factor": 0}}}}"#,
                "at kafka.clusters.m.replication_factor: 0: expected at least 1 copy",
            ),
            (
                r#"{"kafka": {"default": "m", "clusters": {"m": {"bootstrap_servers": "a:1", "replication_factor": 2, "min_insync_replicas": 3}}}}"#,
                "at kafka.clusters.m.min_insync_replicas: 3: expected 1 to replication_factor (2)",
            ),
            (
                r#"{"cql": {"default": "s", "shards": {"s": {"contact_points": ["a:1"], "replication_factor": 0}}}}"#,
                "at cql.shards.s.replication_factor: expected at least 1 copy",
            ),
        ];
        for (text, expected) in cases {
            let error = with_text(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
        let missing = flags_map().with_file(Path::new("/nonexistent/clusters.json"));
        assert!(matches!(missing, Err(ClusterMapError::Read { .. })));
    }

    #[test]
    fn unknown_cluster_and_shard_names_are_listed_with_the_known_ones() {
        let namespace = wal_namespaces::parse(
            r#"{"namespace": "ns", "persistence_configurations": {"persistence_configuration": [
                 {"physical_storage": {"type": "KAFKA"}, "config": {"wal-kafka-topics": ["t"],
                  "wal.kafka.bootstrap.servers.prefix": "eu",
                  "durable_storage": {"namespace": "ks", "shard": "s9", "type": "kv"}}}]}}"#,
            "ns.json",
        )
        .unwrap();
        let problems = flags_map().unknown_names(&namespace);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("Kafka cluster 'eu'") && problems[0].contains("known: default")
        );
        assert!(problems[1].contains("CQL shard 's9'") && problems[1].contains("known: default"));
        let resolved = flags_map().resolved(&namespace);
        assert_eq!(resolved.queues[0].cluster.as_deref(), Some("eu"));
    }
}
