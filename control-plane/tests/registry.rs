//! The control plane against the real stack: applying a namespace creates its topics, queues and
//! DLQs on the brokers; applying again changes nothing; updates that would strand data are
//! refused with their reason and leave the stored version as it was.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use tonic::transport::Channel;
use tonic::{Code, Status};
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;
use wal_proto::v1::{ApplyRequest, DeleteRequest, GetRequest, HistoryRequest, NamespaceVersion};
use wal_queue::entry::{ENTRY_VERSION, Entry};
use wal_queue::kafka::{KafkaBackend, KafkaSettings};
use wal_queue::{Produce, QueueSpec};
use wal_testkit::{config, control_plane, kafka_bootstrap, sqs_endpoint, unique};

fn apply(config: String) -> ApplyRequest {
    ApplyRequest {
        config_json: config,
        author: "test-operator".into(),
        ..Default::default()
    }
}

/// Applies `config`, which must be accepted; the control plane's answer.
async fn applied(client: &mut Client, config: String) -> wal_proto::v1::ApplyResponse {
    client
        .apply(apply(config))
        .await
        .unwrap_or_else(|status| panic!("apply refused: {status:?}"))
        .into_inner()
}

/// Applies `config`, which must be refused with `code` and a message naming `needle`.
async fn refused(client: &mut Client, config: String, code: Code, needle: &str) -> tonic::Status {
    let status = client.apply(apply(config)).await.expect_err("refused");
    wal_testkit::assert_refused(&status, code, &[needle]);
    status
}

type Client = NamespaceRegistryClient<Channel>;

/// A control plane and a new Kafka namespace on it with one queue: the client, the name, the queue.
async fn one_kafka_queue() -> (Client, String, String) {
    let mut client = control_plane().await;
    let name = unique("cp");
    let queue = format!("{name}-q0");
    applied(&mut client, config(&name, "KAFKA", &[&queue], "")).await;
    (client, name, queue)
}

/// Version `version` of `name` (0: the current one).
async fn get(client: &mut Client, name: &str, version: i64) -> Result<NamespaceVersion, Status> {
    let name = name.to_owned();
    let asked = client.get(GetRequest { name, version }).await;
    asked.map(tonic::Response::into_inner)
}

/// Puts one entry, acknowledged by the broker, on `queue` (a queue or delay tier of `namespace`).
async fn put_entry(namespace: &str, queue: &str, dlq: &str) {
    let backend = KafkaBackend::new(KafkaSettings::new(&kafka_bootstrap())).unwrap();
    let entry = Entry {
        version: ENTRY_VERSION,
        id: unique("waiting"),
        namespace: namespace.to_owned(),
        ..Entry::default()
    };
    let queue = backend.queue(QueueSpec::new(namespace, queue, dlq));
    queue.enqueue(&entry).await.unwrap();
}

fn kafka_topics() -> Vec<String> {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_bootstrap())
        .create()
        .unwrap();
    let metadata = consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .unwrap();
    metadata
        .topics()
        .iter()
        .map(|t| t.name().to_owned())
        .collect()
}

async fn sqs_queue_exists(name: &str) -> bool {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version_latest()
        .http_client(wal_queue::sqs::https_client())
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .endpoint_url(sqs_endpoint())
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "x", "x", None, None, "test",
        ))
        .build();
    aws_sdk_sqs::Client::from_conf(config)
        .get_queue_url()
        .queue_name(name)
        .send()
        .await
        .is_ok()
}

#[tokio::test]
async fn applying_a_kafka_namespace_creates_its_topics_and_applying_again_changes_nothing() {
    let mut client = control_plane().await;
    let name = unique("cp");
    let topic = format!("{name}-q0");
    // A delay limit over the hold limit: the queue needs delay tiers as well.
    let text = config(
        &name,
        "KAFKA",
        &[&topic],
        r#", "delay_limits": {"max_delay_ms": 3600000, "max_jitter_ms": 0}"#,
    );

    let first = applied(&mut client, text.clone()).await;
    assert!(first.changed);
    let version = first.version.unwrap();
    assert_eq!(
        (version.version, version.author.as_str()),
        (1, "test-operator")
    );
    assert_eq!(version.changes, ["created"]);
    let topics = kafka_topics();
    for expected in [topic.clone(), format!("{topic}-dlq")] {
        assert!(
            first.created.contains(&expected),
            "{expected} not reported in {:?}",
            first.created
        );
        assert!(
            topics.contains(&expected),
            "{expected} is not on the broker"
        );
    }
    let tiers: Vec<&String> = first
        .created
        .iter()
        .filter(|t| t.starts_with(&format!("{topic}.delay-")))
        .collect();
    assert!(
        !tiers.is_empty(),
        "no delay tier created: {:?}",
        first.created
    );
    assert!(tiers.iter().all(|t| topics.contains(t)));

    let again = applied(&mut client, text).await;
    assert!(!again.changed);
    assert!(
        again.created.is_empty(),
        "created on the second apply: {:?}",
        again.created
    );
    assert_eq!(again.version.unwrap().version, 1);
    assert_eq!(
        client
            .history(HistoryRequest { name })
            .await
            .unwrap()
            .into_inner()
            .versions
            .len(),
        1
    );
}

#[tokio::test]
async fn applying_an_sqs_namespace_creates_its_queue_and_dlq() {
    let mut client = control_plane().await;
    let name = unique("cp");
    let queue = format!("{name}-q0");
    let applied = applied(&mut client, config(&name, "SQS", &[&queue], "")).await;
    assert!(applied.changed);
    assert!(sqs_queue_exists(&queue).await);
    assert!(sqs_queue_exists(&format!("{queue}-dlq")).await);
}

#[tokio::test]
async fn an_update_is_a_new_version_that_names_what_changed() {
    let (mut client, name, topic) = one_kafka_queue().await;
    let limit = r#", "rate_limit": {"writes_per_second": 50}"#;
    let updated = applied(&mut client, config(&name, "KAFKA", &[&topic], limit)).await;
    let version = updated.version.unwrap();
    assert_eq!(version.version, 2);
    assert_eq!(version.changes, ["rate_limit"]);
    // The old version stays readable as it was.
    let first = get(&mut client, &name, 1).await.unwrap();
    assert!(!first.config_json.contains("rate_limit"));
}

/// The stored version of `name`, to check a refusal left it alone.
async fn stored_version(client: &mut Client, name: &str) -> (i64, String) {
    let current = get(client, name, 0).await.unwrap();
    (current.version, current.config_json)
}

#[tokio::test]
async fn moving_a_queue_to_another_backend_is_refused_and_nothing_changes() {
    let (mut client, name, queue) = one_kafka_queue().await;
    let before = stored_version(&mut client, &name).await;

    let moved = config(&name, "SQS", &[&queue], "");
    let rule = format!("queue '{queue}' is on kafka");
    refused(&mut client, moved, Code::FailedPrecondition, &rule).await;
    assert_eq!(stored_version(&mut client, &name).await, before);
    assert!(
        !sqs_queue_exists(&queue).await,
        "the refused apply provisioned the SQS queue"
    );
}

#[tokio::test]
async fn a_new_namespace_cannot_take_over_another_ones_queues() {
    let (mut client, owner, queue) = one_kafka_queue().await;

    let renamed = unique("cp");
    let taken = config(&renamed, "KAFKA", &[&queue], "");
    let rule = format!("belongs to namespace '{owner}'");
    refused(&mut client, taken, Code::FailedPrecondition, &rule).await;
    let missing = get(&mut client, &renamed, 0).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
}

#[tokio::test]
async fn a_queue_that_holds_entries_cannot_be_dropped_and_an_empty_one_can() {
    let mut client = control_plane().await;
    let name = unique("cp");
    let (kept, full, empty) = (
        format!("{name}-q0"),
        format!("{name}-q1"),
        format!("{name}-q2"),
    );
    applied(
        &mut client,
        config(&name, "KAFKA", &[&kept, &full, &empty], ""),
    )
    .await;
    // One entry on the queue to be dropped, acknowledged by the broker.
    put_entry(&name, &full, &format!("{full}-dlq")).await;
    let before = stored_version(&mut client, &name).await;

    refused(
        &mut client,
        config(&name, "KAFKA", &[&kept, &empty], ""),
        Code::FailedPrecondition,
        &format!("queue '{full}' still holds 1 entries"),
    )
    .await;
    assert_eq!(stored_version(&mut client, &name).await, before);

    let dropped = applied(&mut client, config(&name, "KAFKA", &[&kept, &full], "")).await;
    assert_eq!(dropped.version.unwrap().version, 2);
}

#[tokio::test]
async fn a_config_that_does_not_validate_is_refused_naming_the_field() {
    let mut client = control_plane().await;
    let name = unique("cp");
    let bad = config(
        &name,
        "KAFKA",
        &[&format!("{name}-q0")],
        r#", "rate_limit": {"writes_per_second": "fast"}"#,
    );
    refused(
        &mut client,
        bad,
        Code::InvalidArgument,
        "rate_limit.writes_per_second",
    )
    .await;

    // A default target its kind would refuse, on Validate as on Apply (issue 17's case).
    let typo = r#", "default_target": {"kind": "cql", "settings": {"keyspace": "shop", "tabel": "orders"}}"#;
    let bad_target = config(&name, "KAFKA", &[&format!("{name}-q0")], typo);
    let needle = "default_target.settings.tabel: cql target settings: unknown field `tabel`";
    let validated = client
        .validate(apply(bad_target.clone()))
        .await
        .expect_err("refused");
    wal_testkit::assert_refused(&validated, Code::InvalidArgument, &[needle]);
    refused(&mut client, bad_target, Code::InvalidArgument, needle).await;
}

#[tokio::test]
async fn a_deleted_namespace_keeps_its_queues_and_its_rules() {
    let (mut client, name, queue) = one_kafka_queue().await;
    let deleted = client
        .delete(DeleteRequest {
            name: name.clone(),
            author: "test-operator".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(deleted.deleted);
    assert_eq!(deleted.version, 2);

    // Its entries are still on Kafka: neither a re-created namespace nor another one may strand them.
    let moved = config(&name, "SQS", &[&queue], "");
    let rule = format!("queue '{queue}' is on kafka");
    refused(&mut client, moved, Code::FailedPrecondition, &rule).await;
    let taken = config(&unique("cp"), "KAFKA", &[&queue], "");
    let owner = format!("belongs to namespace '{name}'");
    refused(&mut client, taken, Code::FailedPrecondition, &owner).await;

    let recreated = applied(&mut client, config(&name, "KAFKA", &[&queue], "")).await;
    assert!(recreated.changed);
    assert_eq!(recreated.version.unwrap().version, 3);
}

#[tokio::test]
async fn lowering_the_delay_limit_is_refused_while_a_tier_it_drops_holds_entries() {
    // The default limits (30 days) give the queue every tier, 5 s to 4 h.
    let (mut client, name, queue) = one_kafka_queue().await;
    // An entry parked on the 15-minute tier, as the consumer parks one.
    let tier = format!("{queue}.delay-15m");
    put_entry(&name, &tier, &format!("{queue}-dlq")).await;
    let before = stored_version(&mut client, &name).await;

    // At most 10 minutes of delay needs the 5 s and 1 m tiers only.
    let ten_minutes = r#", "delay_limits": {"max_delay_ms": 600000, "max_jitter_ms": 0}, "retry_policy": {"max_backoff_ms": 1000}"#;
    refused(
        &mut client,
        config(&name, "KAFKA", &[&queue], ten_minutes),
        Code::FailedPrecondition,
        &format!("delay tier '{tier}' still holds 1 entries"),
    )
    .await;
    assert_eq!(stored_version(&mut client, &name).await, before);

    // At most 1 hour keeps the 15 m tier and drops only the 4 h one, which is empty.
    let one_hour = r#", "delay_limits": {"max_delay_ms": 3600000, "max_jitter_ms": 0}, "retry_policy": {"max_backoff_ms": 1000}"#;
    let applied = applied(&mut client, config(&name, "KAFKA", &[&queue], one_hour)).await;
    assert_eq!(applied.version.unwrap().version, 2);
}

#[tokio::test]
async fn health_reports_serving_and_reflection_lists_the_registry() {
    use tonic_health::pb::health_check_response::ServingStatus;

    let (_client, address) = wal_testkit::control_plane_at().await;
    let channel = tonic::transport::Channel::from_shared(address)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let status = wal_testkit::health_status(&channel, "wal.v1.NamespaceRegistry").await;
    assert_eq!(status, ServingStatus::Serving);
    let (v1, v1alpha) = wal_testkit::reflected_services(&channel).await;
    for services in [v1, v1alpha] {
        assert!(
            services.contains(&"wal.v1.NamespaceRegistry".to_owned()),
            "{services:?}"
        );
    }
}

/// A queue's config with its cluster named: `config`'s first storage gets
/// `wal.kafka.bootstrap.servers.prefix`.
fn on_cluster(config: &str, cluster: &str) -> String {
    let mut value: serde_json::Value = serde_json::from_str(config).unwrap();
    value["persistence_configurations"]["persistence_configuration"][0]["config"]["wal.kafka.bootstrap.servers.prefix"] =
        serde_json::Value::from(cluster);
    value.to_string()
}

#[tokio::test]
async fn a_queue_moves_to_another_kafka_cluster_only_once_it_is_empty() {
    let (mut client, name, queue) = one_kafka_queue().await;
    let plain = config(&name, "KAFKA", &[&queue], "");
    // Naming the default cluster is where the queue already is: no move, nothing to drain.
    let named = applied(&mut client, on_cluster(&plain, "default")).await;
    assert!(named.changed);
    put_entry(&name, &queue, &format!("{queue}-dlq")).await;
    let before = stored_version(&mut client, &name).await;

    let moved = on_cluster(&plain, wal_testkit::SECOND_CLUSTER);
    let rule = format!("queue '{queue}' is on Kafka cluster 'default' and still holds 1 entries");
    refused(&mut client, moved, Code::FailedPrecondition, &rule).await;
    assert_eq!(stored_version(&mut client, &name).await, before);

    // A queue with nothing on it moves, and is provisioned on the new cluster.
    let (mut client, name, queue) = one_kafka_queue().await;
    let moved = on_cluster(
        &config(&name, "KAFKA", &[&queue], ""),
        wal_testkit::SECOND_CLUSTER,
    );
    let applied = applied(&mut client, moved).await;
    assert!(applied.created.contains(&queue), "{:?}", applied.created);
}

/// A destination read from the oldest entry that has not read what the queue holds is owed it:
/// removing the destination is refused, naming it, the queue and the count, unless the apply
/// gives those entries up. One that starts from what is written next and never ran owes nothing.
#[tokio::test]
async fn a_destination_still_owed_entries_is_removed_only_when_the_apply_gives_them_up() {
    let mut client = control_plane().await;
    let name = unique("cp");
    let queue = format!("{name}-q0");
    let store = |name: &str, start: &str| {
        format!(r#"{{"name": "{name}", "start_from": "{start}", "target": {{"kind": "cache"}}}}"#)
    };
    let with = |stores: &[String]| {
        let extra = format!(r#", "destinations": [{}]"#, stores.join(", "));
        config(&name, "KAFKA", &[&queue], &extra)
    };
    let (cache, events) = (store("cache", "earliest"), store("events", "now"));
    applied(&mut client, with(&[cache.clone(), events])).await;
    put_entry(&name, &queue, &format!("{queue}-dlq")).await;
    let (before, _) = stored_version(&mut client, &name).await;

    // Dropping the one that never ran and starts from now: nothing was owed to it.
    applied(&mut client, with(std::slice::from_ref(&cache))).await;
    let rule = format!("destination 'cache' is still owed 1 entries on queue '{queue}'");
    refused(&mut client, with(&[]), Code::FailedPrecondition, &rule).await;
    let validated = client
        .validate(apply(with(&[])))
        .await
        .expect_err("refused");
    wal_testkit::assert_refused(&validated, Code::FailedPrecondition, &[&rule]);
    assert_eq!(stored_version(&mut client, &name).await.0, before + 1);

    let given_up = ApplyRequest {
        drop_owed_destinations: true,
        ..apply(with(&[]))
    };
    let dropped = client.apply(given_up).await.unwrap().into_inner();
    assert_eq!(dropped.version.unwrap().version, before + 2);
    let (_, stored) = stored_version(&mut client, &name).await;
    let stored: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(stored["destinations"], serde_json::json!([]), "{stored}");
}
