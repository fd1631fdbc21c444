//! The local stack's services that want credentials (see `scripts/stack`): the first broker's
//! SASL_SSL listener (where it is, the CA its certificate chains to, its user) and the Cassandra
//! with authentication on (`cassandra-auth`), and cluster maps that reach them.

use std::path::{Path, PathBuf};

/// The SASL_SSL listener's address.
pub fn secure_bootstrap() -> String {
    var_or("WAL_KAFKA_SECURE", "127.0.0.1:19096")
}

/// The CA the listener's certificate chains to (made by `scripts/stack up`).
pub fn kafka_ca() -> PathBuf {
    if let Ok(path) = std::env::var("WAL_KAFKA_CA") {
        return PathBuf::from(path);
    }
    crate::stack::run_dir().join("kafka/tls/ca.pem")
}

/// The user the stack made, with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN credentials.
pub fn sasl_user() -> String {
    var_or("WAL_KAFKA_SASL_USER", "wal")
}

pub fn sasl_password() -> String {
    var_or("WAL_KAFKA_SASL_PASSWORD", "wal-local-secret")
}

/// The name the map written by [`secured_cluster_map`] gives its (default) Kafka cluster.
pub const SECURED_CLUSTER: &str = "secured";

/// Writes to `dir` a cluster map whose default Kafka cluster, [`SECURED_CLUSTER`], is the
/// SASL_SSL listener, logged in with `mechanism` and `password` and trusting the CA at `ca`.
/// The password goes in a file of its own that the map names as `${file:...}`, as a mounted
/// Secret would be. Returns the map's path.
pub fn secured_cluster_map(dir: &Path, mechanism: &str, password: &str, ca: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("the cluster map's folder");
    let secret = dir.join("kafka-password");
    std::fs::write(&secret, format!("{password}\n")).expect("the password file");
    let map = serde_json::json!({
        "kafka": {
            "default": SECURED_CLUSTER,
            "clusters": {
                SECURED_CLUSTER: {
                    "bootstrap_servers": secure_bootstrap(),
                    "client": {
                        "security.protocol": "SASL_SSL",
                        "sasl.mechanisms": mechanism,
                        "sasl.username": sasl_user(),
                        "sasl.password": format!("${{file:{}}}", secret.display()),
                        "ssl.ca.location": ca.display().to_string(),
                    }
                }
            }
        }
    });
    let path = dir.join("clusters.json");
    std::fs::write(&path, map.to_string()).expect("the cluster map");
    path
}

/// The Cassandra that wants a password (`scripts/stack up cassandra-auth`).
pub fn cql_auth_nodes() -> Vec<String> {
    var_or("WAL_CQL_AUTH_NODES", "127.0.0.1:19045")
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// The CA its certificate chains to (it speaks TLS only; made by `scripts/stack up`).
pub fn cql_auth_ca() -> PathBuf {
    if let Ok(path) = std::env::var("WAL_CQL_AUTH_CA") {
        return PathBuf::from(path);
    }
    crate::stack::run_dir().join("cassandra-auth/tls/ca.pem")
}

/// A session's place on it: its nodes, logged in as `password`'s user, over TLS.
pub fn cql_auth_place(password: &str) -> wal_clusters::cql::CqlPlace {
    wal_clusters::cql::CqlPlace {
        nodes: cql_auth_nodes(),
        local_datacenter: None,
        credentials: Some((
            cql_auth_login().0,
            wal_runtime::secret::Secret::new(password.to_owned()),
        )),
        tls_ca: Some(cql_auth_ca()),
    }
}

/// Its superuser, and that user's password.
pub fn cql_auth_login() -> (String, String) {
    (
        var_or("WAL_CQL_AUTH_USER", "cassandra"),
        var_or("WAL_CQL_AUTH_PASSWORD", "cassandra"),
    )
}

/// The name the map written by [`auth_cql_cluster_map`] gives its (default) CQL shard.
pub const AUTH_SHARD: &str = "auth";

/// Writes to `dir` a cluster map whose default CQL shard, [`AUTH_SHARD`], is the Cassandra
/// with authentication on, reached over TLS trusting `ca` and logged in as its superuser with
/// `password` (from a file the map names as `${file:...}`). Its Kafka is the flags' (the
/// stack's plaintext broker). Returns the map's path.
pub fn auth_cql_cluster_map(dir: &Path, password: &str, ca: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("the cluster map's folder");
    let secret = dir.join("cql-password");
    std::fs::write(&secret, format!("{password}\n")).expect("the password file");
    let map = serde_json::json!({
        "cql": {
            "default": AUTH_SHARD,
            "shards": {
                AUTH_SHARD: {
                    "contact_points": cql_auth_nodes(),
                    "username": cql_auth_login().0,
                    "password": format!("${{file:{}}}", secret.display()),
                    "tls_ca": ca.display().to_string(),
                }
            }
        }
    });
    let path = dir.join("clusters.json");
    std::fs::write(&path, map.to_string()).expect("the cluster map");
    path
}

/// The environment variable `name` (as `scripts/stack env` sets it), or the stack's default.
fn var_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}
