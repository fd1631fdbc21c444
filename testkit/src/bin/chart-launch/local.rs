//! What a Kubernetes cluster would provide that a local stack provides differently: the
//! addresses of Kafka, Cassandra, SQS and memcached (from `scripts/stack env`), the Secrets
//! (made here), the mounted files' paths (folders of the pod's own) and the ports (free ones on
//! loopback). Each substitution is printed, so the log says what ran.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tonic::transport::Channel;
use wal_testkit::pki::{self, Named, Pki};
use wal_testkit::secured;

/// The local stack the plans run against, and the Secrets made for them.
pub struct Stack {
    pki: Pki,
    /// Brokers and Cassandra nodes of the stack: the replication the map may ask for.
    kafka_brokers: i64,
    cql_nodes: i64,
}

/// The principal the chart's pods present: its ServiceAccount `wal` in the namespace `default`
/// (`helm template` renders for), named as a SPIFFE URI as a mesh or cert-manager would.
const WORKLOAD: &str = "spiffe://cluster.local/ns/default/sa/wal";

impl Stack {
    pub fn new() -> Self {
        let count = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(1)
        };
        Self {
            pki: Pki::new("chart-launch"),
            kafka_brokers: count("WAL_KAFKA_REPLICATION_FACTOR"),
            cql_nodes: count("WAL_CQL_REPLICATION_FACTOR"),
        }
    }

    /// The files of the Secret `name`, made for this stack. The chart's value sets name three.
    pub fn secret(&self, name: &str) -> Result<Vec<(String, String)>> {
        Ok(match name {
            "wal-tls" => {
                let (cert, key) = self.pki.workload("workload", WORKLOAD);
                vec![
                    ("tls.crt".into(), read(&cert)?),
                    ("tls.key".into(), read(&key)?),
                    ("ca.crt".into(), self.pki.ca_pem()),
                ]
            }
            "kafka-login" => vec![("password".into(), secured::sasl_password())],
            "wal-store" => vec![("url".into(), var("WAL_POSTGRES_URL")?)],
            _ => bail!(
                "Secret {name}: the launch check makes wal-tls, kafka-login and wal-store only; \
                 teach testkit's chart-launch (local.rs) what a new Secret holds"
            ),
        })
    }

    /// A channel to a TLS server on loopback whose certificate this stack's Secrets made,
    /// presenting a client certificate that names `principal` ("ns/sa") as the chart's principal
    /// rules read it: spiffe://cluster.local/ns/NS/sa/SA.
    pub fn tls_channel(&self, address: std::net::SocketAddr, principal: &str) -> Channel {
        let (namespace, account) = principal.split_once('/').unwrap_or(("default", principal));
        let uri = format!("spiffe://cluster.local/ns/{namespace}/sa/{account}");
        let client = self.pki.client(Named::Uri(&uri));
        pki::tls_channel(address, &self.pki.ca_pem(), Some(&client))
    }

    /// This stack's value for a pod's variable that holds service addresses, if it is one.
    pub fn address_variable(&self, name: &str) -> Result<Option<String>> {
        Ok(match name {
            "WAL_CQL_NODES" | "WAL_MEMCACHED" => Some(var(name)?),
            _ => None,
        })
    }

    /// The chart's cluster map with this stack's addresses: the default Kafka cluster is the
    /// stack's, a second plaintext one its kafka2, one with SASL_SSL its secured listener
    /// (its user and CA); every CQL shard the stack's Cassandra; SQS its ElasticMQ. Replication
    /// the stack cannot hold (three copies on one broker) comes down to what it has.
    pub fn cluster_map(&self, text: &str) -> Result<String> {
        let mut map: Value = serde_json::from_str(text).context("the chart's cluster map")?;
        if let Some(kafka) = map.get_mut("kafka") {
            let default = kafka["default"].as_str().unwrap_or_default().to_owned();
            let mut plaintext_others = 0;
            let clusters = kafka["clusters"]
                .as_object_mut()
                .context("kafka.clusters is not an object")?;
            for (name, cluster) in clusters.iter_mut() {
                let protocol = cluster
                    .pointer("/client/security.protocol")
                    .and_then(Value::as_str)
                    .unwrap_or("PLAINTEXT")
                    .to_owned();
                let bootstrap = if protocol.starts_with("SASL") {
                    let client = cluster["client"].as_object_mut().context("client")?;
                    // The stack's user in place of the chart's, where the chart names one: a
                    // login the chart leaves out stays out, and fails as it would in a cluster.
                    if client.contains_key("sasl.username") {
                        client.insert("sasl.username".into(), secured::sasl_user().into());
                    }
                    // The stack's CA is in no system trust store, as a cluster's often is.
                    client.insert(
                        "ssl.ca.location".into(),
                        secured::kafka_ca().display().to_string().into(),
                    );
                    // Not testkit's default address: a stack without the listener (the
                    // clustered one) must not reach another stack's.
                    var("WAL_KAFKA_SECURE").context(
                        "a SASL_SSL cluster needs the stack's SASL listener; the main stack has one",
                    )?
                } else if *name == default {
                    var("WAL_KAFKA_BOOTSTRAP")?
                } else {
                    plaintext_others += 1;
                    if plaintext_others > 1 {
                        bail!("kafka cluster {name}: the stack has two plaintext clusters only");
                    }
                    var("WAL_KAFKA2_BOOTSTRAP")?
                };
                say(&format!("kafka cluster {name}: {bootstrap} ({protocol})"));
                cluster["bootstrap_servers"] = bootstrap.into();
                self.fit(name, cluster, "replication_factor", self.kafka_brokers);
                let factor = cluster["replication_factor"].as_i64().unwrap_or(1);
                self.fit(name, cluster, "min_insync_replicas", factor);
            }
        }
        if let Some(shards) = map
            .pointer_mut("/cql/shards")
            .and_then(Value::as_object_mut)
        {
            let listed = var("WAL_CQL_NODES")?;
            let nodes: Vec<Value> = listed.split(',').map(|n| n.to_owned().into()).collect();
            for (name, shard) in shards.iter_mut() {
                say(&format!("cql shard {name}: {listed}"));
                shard["contact_points"] = nodes.clone().into();
                self.fit(name, shard, "replication_factor", self.cql_nodes);
            }
        }
        if let Some(sqs) = map.get_mut("sqs") {
            sqs["endpoint"] = var("WAL_SQS_ENDPOINT")?.into();
        }
        Ok(serde_json::to_string_pretty(&map)?)
    }

    /// Lowers `field` of `section` to `most` when it asks for more, and says so.
    fn fit(&self, section: &str, object: &mut Value, field: &str, most: i64) {
        if let Some(asked) = object[field].as_i64().filter(|&asked| asked > most) {
            say(&format!(
                "{section}: {field} {asked} -> {most}, what this stack has \
                 (the clustered stack, scripts/stack --cluster, holds 3)"
            ));
            object[field] = most.into();
        }
    }
}

/// Rewrites every mounted path in `value` to the folder standing in for it: a path matches at
/// a boundary (at the start, after a separator such as ':' or ' ' or after a URL's "//", and
/// before a separator, '/' or the end), longest mount first, in one pass so a replacement is
/// never rewritten again.
pub fn rewrite_paths(value: &str, mounts: &[(String, PathBuf)]) -> String {
    let mut sorted: Vec<&(String, PathBuf)> = mounts.iter().collect();
    sorted.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    'scan: while !rest.is_empty() {
        let boundary_before = match out.chars().last() {
            None => true,
            Some('/') => out.ends_with("//"),
            Some(c) => !(c.is_alphanumeric() || "._-".contains(c)),
        };
        if boundary_before {
            for (path, local) in &sorted {
                if let Some(after) = rest.strip_prefix(path.as_str())
                    && !after.starts_with(|c: char| c.is_alphanumeric() || "._-".contains(c))
                {
                    out.push_str(&local.display().to_string());
                    rest = after;
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn var(name: &str) -> Result<String> {
    std::env::var(name).with_context(|| {
        format!("{name} is not set: run with the stack's addresses, eval \"$(scripts/stack env)\"")
    })
}

pub fn say(line: &str) {
    println!("chart-launch:   {line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounted_paths_are_rewritten_at_boundaries_only() {
        let mounts = vec![
            ("/tmp".to_owned(), PathBuf::from("/tmp/launch/p/tmp")),
            (
                "/var/lib/wal".to_owned(),
                PathBuf::from("/tmp/launch/p/store"),
            ),
            (
                "/etc/wal/secrets/kafka-login".to_owned(),
                PathBuf::from("/s/k"),
            ),
        ];
        assert_eq!(
            rewrite_paths("sqlite:///var/lib/wal/registry.db", &mounts),
            "sqlite:///tmp/launch/p/store/registry.db"
        );
        assert_eq!(
            rewrite_paths("${file:/etc/wal/secrets/kafka-login/password}", &mounts),
            "${file:/s/k/password}"
        );
        assert_eq!(
            rewrite_paths("/tmpfoo /tmp", &mounts),
            "/tmpfoo /tmp/launch/p/tmp"
        );
        assert_eq!(
            rewrite_paths(r#"{"dir":"/tmp","to":"/tmp/x"} /tmp,/tmp:/tmp.d"#, &mounts),
            r#"{"dir":"/tmp/launch/p/tmp","to":"/tmp/launch/p/tmp/x"} /tmp/launch/p/tmp,/tmp/launch/p/tmp:/tmp.d"#
        );
        assert_eq!(
            rewrite_paths("a/tmp/b /x/tmp/b", &mounts),
            "a/tmp/b /x/tmp/b"
        );
    }
}
