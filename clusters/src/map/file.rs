//! The cluster map's file form (`--clusters FILE`, `WAL_CLUSTERS`): parsed strictly, each
//! problem named with its path in the file, secret references resolved, the properties the
//! platform sets itself refused.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use wal_queue::kafka::KafkaSettings;
use wal_queue::sqs::SqsSettings;
use wal_runtime::secret::Secrets;

use super::{ClusterMap, ClusterMapError, CqlShard, Named};

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
