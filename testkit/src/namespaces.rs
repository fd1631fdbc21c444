//! Namespace configs with fresh queue names, targets, and the cql payloads tests write.

use wal_namespaces::{Backend, Namespace};

use crate::cql::KEYSPACE;
use crate::stack::unique;

/// A namespace config on `backend` with fresh queue names and `extra` top-level fields (JSON
/// object members, without braces).
pub fn namespace(backend: Backend, queues: usize, extra: &str) -> Namespace {
    namespace_with_target(
        backend,
        queues,
        r#"{"kind": "cql", "settings": {"keyspace": "app", "table": "t"}}"#,
        extra,
    )
}

/// Like [`namespace`], with `target` (a JSON object) as the default target.
pub fn namespace_with_target(
    backend: Backend,
    queues: usize,
    target: &str,
    extra: &str,
) -> Namespace {
    let text = namespace_json(backend, queues, target, extra);
    wal_namespaces::parse(&text, "test").unwrap_or_else(|e| panic!("{e}"))
}

/// The config file text [`namespace_with_target`] parses, for a process that reads a folder.
pub fn namespace_json(backend: Backend, queues: usize, target: &str, extra: &str) -> String {
    let name = unique("ns");
    let names: Vec<String> = (0..queues).map(|i| format!("\"{name}-q{i}\"")).collect();
    let (kind, key) = match backend {
        Backend::Kafka => ("KAFKA", "wal-kafka-topics"),
        Backend::Sqs => ("SQS", "wal-queue"),
    };
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(", {extra}")
    };
    format!(
        r#"{{"namespace": "{name}",
            "persistence_configurations": {{"persistence_configuration": [
              {{"physical_storage": {{"type": "{kind}"}}, "config": {{"{key}": [{}]}}}}]}},
            "default_target": {target}{extra}}}"#,
        names.join(", ")
    )
}

/// A cql target on `table` (in [`KEYSPACE`]) as namespace-config JSON.
pub fn cql_target(table: &str) -> String {
    format!(r#"{{"kind": "cql", "settings": {{"keyspace": "{KEYSPACE}", "table": "{table}"}}}}"#)
}

/// A further destination delivering to Kafka topic `topic`, as a namespace config's
/// `destinations` item, read from `start_from` (`earliest` or `now`).
pub fn kafka_store(name: &str, topic: &str, start_from: &str) -> String {
    format!(
        r#"{{"name": "{name}", "start_from": "{start_from}", "target": {{"kind": "kafka", "settings": {{"topic": "{topic}"}}}}}}"#
    )
}

/// `stores` as a namespace config's `destinations` field, for [`namespace_json`]'s `extra`.
pub fn destinations(stores: &[String]) -> String {
    format!(r#""destinations": [{}]"#, stores.join(", "))
}

/// A cql payload putting one row of a [`crate::Cql::table`].
pub fn put(id: &str, value: &str) -> Vec<u8> {
    format!(r#"{{"mutations":[{{"put":{{"row":{{"id":"{id}","value":"{value}"}}}}}}]}}"#)
        .into_bytes()
}

/// A cql payload deleting one row of a [`crate::Cql::table`].
pub fn delete(id: &str) -> Vec<u8> {
    format!(r#"{{"mutations":[{{"delete":{{"key":{{"id":"{id}"}}}}}}]}}"#).into_bytes()
}

/// `config` (a namespace file's text) keeping an archive for a week in durable storage in
/// `keyspace` on the default CQL shard.
pub fn with_archive(config: &str, keyspace: &str) -> String {
    let mut config: serde_json::Value = serde_json::from_str(config).unwrap();
    config["persistence_configurations"]["persistence_configuration"][0]["config"]["durable_storage"] =
        serde_json::json!({"namespace": keyspace, "type": "cql", "archive": {"retention_days": 7}});
    config.to_string()
}

/// `config` (a namespace file's text) with durable storage in `keyspace` on the default CQL
/// shard, where claim checks, the archive and two-phase writes' items go.
pub fn with_durable_storage(config: &str, keyspace: &str) -> String {
    let mut config: serde_json::Value = serde_json::from_str(config).unwrap();
    config["persistence_configurations"]["persistence_configuration"][0]["config"]["durable_storage"] =
        serde_json::json!({"namespace": keyspace, "type": "kv"});
    config.to_string()
}
