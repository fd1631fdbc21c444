use std::path::Path;

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
    assert!(problems[0].contains("Kafka cluster 'eu'") && problems[0].contains("known: default"));
    assert!(problems[1].contains("CQL shard 's9'") && problems[1].contains("known: default"));
    let resolved = flags_map().resolved(&namespace);
    assert_eq!(resolved.queues[0].cluster.as_deref(), Some("eu"));
}
