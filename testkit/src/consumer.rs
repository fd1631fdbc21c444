//! A consumer in-process on the real stack, or as a process of its own.

use std::path::PathBuf;

use wal_consumer::{Consumer, ConsumerHandle, ConsumerOptions};
use wal_namespaces::Namespace;

use crate::stack::{KilledWhenDropped, cargo_bin, with_second_cluster};

/// The local stack's addresses (from `scripts/stack env`), as the consumer takes them.
pub fn local_stack() -> ConsumerOptions {
    ConsumerOptions::for_local_stack(PathBuf::new())
}

/// Durable storage in `keyspace` on the local stack, for a test reading back what a consumer
/// kept there (the archive, receipts).
pub async fn durable_storage(keyspace: &str) -> std::sync::Arc<wal_durable::DurableStorage> {
    let nodes = crate::stack::cql_nodes();
    let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let settings = wal_durable::DurableSettings::new(&nodes, keyspace);
    let storage = wal_durable::DurableStorage::connect(&settings)
        .await
        .unwrap_or_else(|e| panic!("durable storage (is the stack up? scripts/stack up): {e}"));
    std::sync::Arc::new(storage)
}

/// Starts a consumer in-process on the real stack for `namespaces`.
pub async fn start_consumer(namespaces: Vec<Namespace>) -> ConsumerHandle {
    start_consumer_with(namespaces, |_| {}).await
}

pub async fn start_consumer_with(
    namespaces: Vec<Namespace>,
    adjust: impl FnOnce(&mut ConsumerOptions),
) -> ConsumerHandle {
    init_tracing();
    let mut options = ConsumerOptions::for_local_stack(PathBuf::new());
    adjust(&mut options);
    Consumer::start(&local_settings(&options), namespaces)
        .await
        .unwrap_or_else(|e| panic!("consumer start (is the stack up? scripts/stack up): {e:#}"))
        .spawn()
}

/// What `options` make, with the stack's second Kafka cluster in the cluster map.
fn local_settings(options: &ConsumerOptions) -> wal_consumer::ConsumerSettings {
    let mut settings = options.settings().expect("the local stack's cluster map");
    settings.clusters = with_second_cluster(settings.clusters);
    settings
}

/// Logs as RUST_LOG says (nothing when unset), once per test binary.
fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
}

/// Starts a consumer in-process serving `feed`'s namespaces and applying its changes.
pub async fn start_consumer_following(feed: wal_namespaces::feed::Feed) -> ConsumerHandle {
    init_tracing();
    Consumer::start(&local_settings(&local_stack()), feed.namespaces().to_vec())
        .await
        .unwrap_or_else(|e| panic!("consumer start (is the stack up? scripts/stack up): {e:#}"))
        .spawn_following(Some(feed))
}

/// A `wal-consumer` process on the local stack reading the namespace files in `namespaces`, its
/// metrics on `metrics_listen` (`127.0.0.1:0` when nobody reads them). For the consumer's own
/// tests and benches: cargo builds the binary for them. Killed when dropped, so a test that
/// fails halfway leaves no consumer running past it.
pub fn consumer_process(namespaces: &std::path::Path, metrics_listen: &str) -> KilledWhenDropped {
    consumer_process_at(namespaces, metrics_listen, "127.0.0.1:0")
}

/// Like [`consumer_process`], with `env` set over the stack's defaults (a fault proxy's
/// `WAL_KAFKA_BOOTSTRAP` and `WAL_CQL_NODES`, say).
pub fn consumer_process_with_env(
    namespaces: &std::path::Path,
    env: &[(&str, String)],
) -> KilledWhenDropped {
    consumer_command(namespaces, "127.0.0.1:0", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .spawn()
        .map(KilledWhenDropped)
        .expect("start wal-consumer")
}

/// Like [`consumer_process_with_env`], running the binary `binary` (another build's, for an
/// upgrade drill) rather than this build's.
pub fn consumer_process_from(
    binary: &std::path::Path,
    namespaces: &std::path::Path,
    env: &[(&str, String)],
) -> KilledWhenDropped {
    consumer_command_of(binary, namespaces, "127.0.0.1:0", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .spawn()
        .map(KilledWhenDropped)
        .expect("start wal-consumer")
}

/// Like [`consumer_process`], its gRPC health service on `health_listen`.
pub fn consumer_process_at(
    namespaces: &std::path::Path,
    metrics_listen: &str,
    health_listen: &str,
) -> KilledWhenDropped {
    consumer_command(namespaces, metrics_listen, health_listen)
        .env("RUST_LOG", "warn")
        .spawn()
        .map(KilledWhenDropped)
        .expect("start wal-consumer")
}

/// Like [`consumer_process`], logging to the file `log` as an operator would see it: the
/// binary's default log filter, not the test's.
pub fn consumer_process_logging_to(
    namespaces: &std::path::Path,
    log: &std::path::Path,
) -> KilledWhenDropped {
    consumer_process_logging_with_env(namespaces, log, &[])
}

/// Like [`consumer_process_logging_to`], with `env` set over the stack's defaults.
pub fn consumer_process_logging_with_env(
    namespaces: &std::path::Path,
    log: &std::path::Path,
    env: &[(&str, String)],
) -> KilledWhenDropped {
    consumer_command(namespaces, "127.0.0.1:0", "127.0.0.1:0")
        .env_remove("RUST_LOG")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stderr(std::fs::File::create(log).expect("the log file"))
        .spawn()
        .map(KilledWhenDropped)
        .expect("start wal-consumer")
}

/// Sends `process` SIGTERM, as an operator's stop or Kubernetes does; asserts it was sent.
pub fn terminate(process: &std::process::Child) {
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &process.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "SIGTERM to process {}", process.id());
}

fn consumer_command(
    namespaces: &std::path::Path,
    metrics_listen: &str,
    health_listen: &str,
) -> std::process::Command {
    consumer_command_of(
        &cargo_bin("wal-consumer"),
        namespaces,
        metrics_listen,
        health_listen,
    )
}

fn consumer_command_of(
    binary: &std::path::Path,
    namespaces: &std::path::Path,
    metrics_listen: &str,
    health_listen: &str,
) -> std::process::Command {
    let stack = local_stack();
    let mut command = std::process::Command::new(binary);
    command
        .env("WAL_NAMESPACES", namespaces)
        .env("WAL_KAFKA_BOOTSTRAP", &stack.brokers.kafka_bootstrap)
        .env(
            "WAL_SQS_ENDPOINT",
            stack.brokers.sqs_endpoint.unwrap_or_default(),
        )
        .env("WAL_CQL_NODES", stack.cql.cql_nodes.join(","))
        .env("WAL_CONSUMER_METRICS_LISTEN", metrics_listen)
        .env("WAL_CONSUMER_HEALTH_LISTEN", health_listen)
        .stdout(std::process::Stdio::null());
    command
}
