//! The platform on a Kafka cluster that wants TLS and SASL: the local stack's SASL_SSL listener
//! (`scripts/stack`), reached through a cluster map whose password is a `${file:...}` secret.
//! Writes are answered TRUE and delivered over it with each mechanism the broker offers; wrong
//! credentials or an untrusted broker certificate stop a process at start-up with an error that
//! names the cluster and the reason, and never the password.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use wal_producer::{Producer, ProducerOptions};
use wal_queue::{Backend, Produce};
use wal_testkit::secured::{
    SECURED_CLUSTER, kafka_ca, sasl_password, secure_bootstrap, secured_cluster_map,
};
use wal_testkit::{
    Upstream, eventually, kafka_bootstrap, kafka_log_on, namespace_with_target, unique, write,
    write_true,
};

fn folder() -> std::path::PathBuf {
    std::env::temp_dir().join(unique("secured-kafka"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_on_a_sasl_ssl_cluster_is_written_and_delivered() {
    let dir = folder();
    let map = secured_cluster_map(&dir, "SCRAM-SHA-256", &sasl_password(), &kafka_ca());
    let upstream = Upstream::start(|_| 200).await;
    let namespace = namespace_with_target(Backend::Kafka, 1, &upstream.target(), "");

    let fleet = wal_testkit::Fleet::start_on_map(namespace.clone(), &map).await;
    let id = write_true(
        &fleet.producer.client,
        write(&namespace.name, b"over SASL_SSL"),
    )
    .await;
    eventually(Duration::from_secs(60), "the entry delivered", || async {
        upstream
            .received()
            .iter()
            .any(|r| r.headers.get("idempotency-key") == Some(&id))
            .then_some(())
    })
    .await;
    // The secured listener is the stack's first broker: its plaintext listener shows the same
    // topic, with the entry on it.
    let log = kafka_log_on(&kafka_bootstrap(), &namespace.queues[0].name).await;
    assert_eq!(log.into_iter().map(|e| e.id).collect::<Vec<_>>(), [id]);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_mechanism_the_broker_offers_lets_the_producer_write() {
    for mechanism in ["PLAIN", "SCRAM-SHA-512"] {
        let map = secured_cluster_map(&folder(), mechanism, &sasl_password(), &kafka_ca());
        let namespace = wal_testkit::namespace(Backend::Kafka, 1, "");
        let mut producer = wal_testkit::TestProducer::start_with(vec![namespace.clone()], |o| {
            o.brokers.clusters = Some(map.clone())
        })
        .await;
        write_true(
            &producer.client,
            write(&namespace.name, mechanism.as_bytes()),
        )
        .await;
        producer.shutdown().await;
    }
}

/// Starts an in-process producer for one Kafka namespace with the cluster map at `map`, which
/// must fail; returns its error as an operator reads it.
async fn producer_start_error(map: &Path) -> String {
    let mut options = ProducerOptions::for_local_stack(std::path::PathBuf::new());
    options.brokers.clusters = Some(map.to_owned());
    let settings = options.settings().unwrap();
    let started = Instant::now();
    let namespace = wal_testkit::namespace(Backend::Kafka, 1, "");
    let error = match Producer::start(&settings, vec![namespace]).await {
        Ok(_) => panic!("a producer started with the cluster map {}", map.display()),
        Err(error) => format!("{error:#}"),
    };
    // The brokers' refusal, not the check's timeout, ended the start.
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "took {:?}: {error}",
        started.elapsed()
    );
    error
}

#[tokio::test]
async fn a_wrong_password_stops_the_producer_at_start_naming_the_cluster_not_the_password() {
    let wrong = format!("not-{}", unique("the-password"));
    for mechanism in ["SCRAM-SHA-256", "PLAIN"] {
        let map = secured_cluster_map(&folder(), mechanism, &wrong, &kafka_ca());
        let error = producer_start_error(&map).await;
        assert!(
            error.contains(&format!("Kafka cluster '{SECURED_CLUSTER}'"))
                && error.contains(&secure_bootstrap())
                && error.contains("refused")
                && error.contains("Authentication failed")
                && error.contains(mechanism)
                && error.contains(&format!("kafka.clusters.{SECURED_CLUSTER}.client")),
            "{error}"
        );
        assert!(!error.contains(&wrong), "the password is in: {error}");
    }
}

#[tokio::test]
async fn a_broker_certificate_from_another_ca_stops_the_producer_at_start() {
    let other = wal_testkit::pki::Pki::new("not the broker's CA");
    let map = secured_cluster_map(
        &folder(),
        "SCRAM-SHA-256",
        &sasl_password(),
        &other.ca_path(),
    );
    let error = producer_start_error(&map).await;
    assert!(
        error.contains(&format!("Kafka cluster '{SECURED_CLUSTER}'"))
            && error.contains("certificate verify failed"),
        "{error}"
    );
}

#[tokio::test]
async fn the_consumer_binary_exits_at_start_on_a_wrong_password_and_logs_no_secret() {
    let dir = folder();
    let wrong = format!("not-{}", unique("the-password"));
    let map = secured_cluster_map(&dir, "SCRAM-SHA-256", &wrong, &kafka_ca());
    let namespaces = dir.join("namespaces");
    std::fs::create_dir_all(&namespaces).unwrap();
    let upstream = Upstream::start(|_| 200).await;
    let config = wal_testkit::namespace_json(Backend::Kafka, 1, &upstream.target(), "");
    std::fs::write(namespaces.join("ns.json"), config).unwrap();

    // Everything the binary logs, debug lines included, goes to a file the test reads.
    let log = dir.join("consumer.log");
    let mut child = std::process::Command::new(wal_testkit::cargo_bin("wal-consumer"))
        .env("WAL_NAMESPACES", &namespaces)
        .env("WAL_CLUSTERS", &map)
        .env("WAL_CQL_NODES", wal_testkit::cql_nodes().join(","))
        .env("WAL_CONSUMER_METRICS_LISTEN", "127.0.0.1:0")
        .env("WAL_CONSUMER_HEALTH_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "debug")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start wal-consumer");
    let status = eventually(Duration::from_secs(30), "the consumer to exit", || {
        let status = child.try_wait().unwrap();
        async move { status }
    })
    .await;
    let output = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "exited {status}: {output}");
    assert!(
        output.contains(&format!("Kafka cluster '{SECURED_CLUSTER}'"))
            && output.contains("Authentication failed"),
        "{output}"
    );
    assert!(!output.contains(&wrong), "the password is in the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_target_publishes_to_the_secured_default_cluster_with_its_login() {
    use rdkafka::consumer::{Consumer as _, StreamConsumer};
    use rdkafka::message::Message as _;
    use wal_queue::QueueSpec;
    use wal_queue::kafka::{KafkaBackend, KafkaSettings};

    // The target topic, made through the same broker's plaintext listener.
    let topic = unique("secured-target");
    let plaintext = KafkaBackend::new(KafkaSettings::new(&kafka_bootstrap())).unwrap();
    let spec = QueueSpec::new("test", &topic, &format!("{topic}-dlq"));
    plaintext.queue(spec).provision().await.unwrap();

    let map = secured_cluster_map(&folder(), "SCRAM-SHA-256", &sasl_password(), &kafka_ca());
    let target = format!(r#"{{"kind": "kafka", "settings": {{"topic": "{topic}"}}}}"#);
    let namespace = namespace_with_target(Backend::Kafka, 1, &target, "");
    let fleet = wal_testkit::Fleet::start_on_map(namespace.clone(), &map).await;
    write_true(&fleet.producer.client, write(&namespace.name, b"published")).await;

    let reader: StreamConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_bootstrap())
        .set("group.id", unique("reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    reader.subscribe(&[&topic]).unwrap();
    let message = tokio::time::timeout(Duration::from_secs(60), reader.recv())
        .await
        .expect("a record on the target topic")
        .unwrap();
    assert_eq!(message.payload(), Some(b"published".as_slice()));
    fleet.stop().await;
}
