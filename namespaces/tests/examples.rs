#![allow(clippy::expect_used, clippy::unwrap_used)]

//! The shipped persona configs load, with the values and defaults their users expect.

use std::path::Path;
use std::time::Duration;

use wal_namespaces::{Backend, load_dir, load_file};

fn example(name: &str) -> wal_namespaces::Namespace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    load_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn delay_queue_on_sqs_in_camel_case() {
    let ns = example("delay-queue-pds.json");
    assert_eq!(ns.name, "pds");
    assert_eq!(ns.queues.len(), 1);
    assert_eq!(ns.queues[0].backend, Backend::Sqs);
    assert_eq!(ns.queues[0].name, "dgwwal-dq-pds");
    assert_eq!(ns.queues[0].dlq, "dgwwal-dlq-pds");
    // SQS deletes what was consumed: the archive is what a replay reads.
    let archive = ns.durable_storage.as_ref().and_then(|d| d.archive.as_ref());
    assert_eq!(
        archive.map(|a| a.retention),
        Some(std::time::Duration::from_secs(14 * 86_400))
    );
    assert_eq!(ns.consumer.poll_wait, Duration::from_secs(10));
    assert_eq!(ns.consumer.max_messages_per_poll, 100);
    assert_eq!(ns.delay.default_jitter, Duration::from_secs(60));
    assert_eq!(ns.retry.max_attempts, 8);
    assert_eq!(
        ns.default_target.as_ref().map(|t| t.kind.name()),
        Some("cql")
    );
}

/// Netflix's cross-region config, as published: one writer per region, each destination region
/// read by a consumer group of its own (`wal_targets::region`).
#[test]
fn cross_region_replication_names_a_writer_per_region() {
    let ns = example("cross-region-evcache-foobar.json");
    assert_eq!(ns.queues[0].backend, Backend::Kafka);
    assert_eq!(ns.queues[0].name, "evcache_foobar");
    let target = ns.default_target.expect("a region target");
    assert_eq!(target.kind, wal_targets::Kind::Region);
    let settings: wal_targets::region::RegionSettings =
        wal_targets::parse(&target.settings_json).unwrap();
    let from_east = settings.destinations_from("us-east-1");
    assert_eq!(
        from_east.keys().collect::<Vec<_>>(),
        ["euwest1", "useast2", "uswest2"],
        "the local region is not a destination"
    );
    assert_eq!(
        from_east["euwest1"].writer_uri(),
        "http://dgwwal.foobar.cluster.eu-west-1.netflix.net:50070"
    );
}

#[test]
fn multi_partition_mutations_have_durable_storage_and_no_default_target() {
    let ns = example("multi-partition-kv-foobar.json");
    assert_eq!(ns.queues[0].dlq, "foobar_kv_multi_id-dlq");
    let durable = ns.durable_storage.expect("durable storage");
    assert_eq!(durable.keyspace, "foobar_wal_type");
    assert_eq!(durable.shard.as_deref(), Some("walfoobar"));
    assert!(ns.default_target.is_none(), "target {{}} means none");
    assert_eq!(ns.payload_limit_bytes, 8 * 1024 * 1024);
    assert_eq!(ns.contacts.as_deref(), Some("unknown"));
}

#[test]
fn the_examples_folder_loads_as_a_whole() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let namespaces = load_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(namespaces.len(), 4);
}

/// One write, three stores: the default target (a table) and two further destinations, each
/// read by a reader of its own from where it says.
#[test]
fn several_stores_name_their_destinations_and_where_each_starts() {
    use wal_targets::region::StartFrom;
    let ns = example("several-stores-orders.json");
    // Not the operator's tour's `orders` (README), which `scripts/up` runs beside it.
    assert_eq!(ns.name, "order_stores");
    assert_eq!(
        ns.default_target.as_ref().map(|t| t.kind.name()),
        Some("cql")
    );
    let destinations: Vec<(&str, &str, StartFrom)> = ns
        .destinations
        .iter()
        .map(|d| (d.name.as_str(), d.target.kind.name(), d.start_from))
        .collect();
    assert_eq!(
        destinations,
        [
            ("cache", "cache", StartFrom::Now),
            ("events", "kafka", StartFrom::Earliest)
        ]
    );
    assert_eq!(
        ns.destinations[1].target.settings_json,
        r#"{"topic":"order-events"}"#
    );
}

#[test]
fn a_folder_where_two_files_share_a_name_or_a_queue_is_refused() {
    let dir = std::env::temp_dir().join(format!("wal-ns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = |name: &str, topic: &str| {
        format!(
            r#"{{"namespace": "{name}", "persistence_configurations": {{"persistence_configuration": [
                {{"physical_storage": {{"type": "KAFKA"}}, "config": {{"wal-kafka-topics": ["{topic}"]}}}}]}}}}"#
        )
    };
    std::fs::write(dir.join("a.json"), config("orders", "orders-wal")).unwrap();
    std::fs::write(dir.join("b.json"), config("orders", "orders-b")).unwrap();
    std::fs::write(dir.join("c.json"), config("payments", "orders-wal")).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a config").unwrap();

    let errors = load_dir(&dir).expect_err("clashes refused").to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    let a = dir.join("a.json").display().to_string();
    let b = dir.join("b.json").display().to_string();
    let c = dir.join("c.json").display().to_string();
    assert_eq!(
        errors,
        format!(
            "{b}: namespace: namespace 'orders' is also defined in {a}\n\
             {c}: kafka queue 'orders-wal' is also used by namespace 'orders' ({a}); entries of two namespaces would mix\n\
             {c}: kafka queue 'orders-wal-dlq' is also used by namespace 'orders' ({a}); entries of two namespaces would mix"
        )
    );
}

#[test]
fn a_kafka_topic_and_an_sqs_queue_may_share_a_name() {
    let dir = std::env::temp_dir().join(format!("wal-ns-shared-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = |name: &str, kind: &str, key: &str| {
        format!(
            r#"{{"namespace": "{name}", "persistence_configurations": {{"persistence_configuration": [
                {{"physical_storage": {{"type": "{kind}"}}, "config": {{"{key}": ["events"]}}}}]}}}}"#
        )
    };
    std::fs::write(
        dir.join("a.json"),
        config("on_kafka", "KAFKA", "wal-kafka-topics"),
    )
    .unwrap();
    std::fs::write(dir.join("b.json"), config("on_sqs", "SQS", "wal-queue")).unwrap();
    let loaded = load_dir(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(loaded.map(|n| n.len()).map_err(|e| e.to_string()), Ok(2));
}

/// A config an earlier build stored with a target kind this build refuses still owns its queues:
/// the control plane reads it without the target (and says why), so it neither locks later
/// applies out nor loses the rule that nobody else may take its queues.
#[test]
fn a_stored_config_with_a_refused_target_keeps_its_queues_without_the_target() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cross-region-evcache-foobar.json");
    // A kind an earlier build delivered and this one does not.
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("evc-replication", "carrier-pigeon");
    let (namespace, refused) = wal_namespaces::parse_stored(&text, "stored").expect("readable");
    assert_eq!(namespace.queues[0].name, "evcache_foobar");
    assert!(namespace.default_target.is_none());
    let refused = refused.expect("the refusal is returned").to_string();
    assert!(
        refused.contains("\"carrier-pigeon\" is not a target kind"),
        "{refused}"
    );

    // Any other problem is still an error.
    let broken = text.replace("\"evcache_foobar\"]", "\"bad name!\"]");
    assert!(wal_namespaces::parse_stored(&broken, "stored").is_err());
    // And a valid config comes back whole, with nothing refused.
    let valid = example("delay-queue-pds.json");
    let pds = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/delay-queue-pds.json"),
    )
    .unwrap();
    assert_eq!(
        wal_namespaces::parse_stored(&pds, "stored").unwrap(),
        (valid, None)
    );
}
