//! What the control plane's tests share: a control plane on the real stack, namespace configs.
// Each test binary uses part of it; helpers panic like the tests they serve.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use tokio::net::TcpListener;
use tonic::transport::Channel;
use wal_control_plane::options::ControlPlaneOptions;
use wal_control_plane::server::ControlPlane;
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;

pub fn kafka_bootstrap() -> String {
    std::env::var("WAL_KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:19092".into())
}

pub fn sqs_endpoint() -> String {
    std::env::var("WAL_SQS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:19324".into())
}

pub fn unique(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &id[..12])
}

/// A control plane on a free port with a fresh SQLite store, and a client for it.
pub async fn control_plane() -> NamespaceRegistryClient<Channel> {
    control_plane_at().await.0
}

/// Like [`control_plane`], with its address.
pub async fn control_plane_at() -> (NamespaceRegistryClient<Channel>, String) {
    let store = std::env::temp_dir().join(format!("{}.db", unique("registry")));
    let options = ControlPlaneOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: format!("sqlite://{}", store.display()),
        kafka_bootstrap: kafka_bootstrap(),
        sqs_endpoint: Some(sqs_endpoint()),
        sqs_region: "us-east-1".into(),
    };
    let control_plane = ControlPlane::start(&options).await.unwrap_or_else(|e| {
        panic!("control plane start (is the stack up? scripts/stack up): {e:#}")
    });
    let listener = TcpListener::bind(options.listen).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(control_plane.serve(listener, std::future::pending()));
    let channel = Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (
        NamespaceRegistryClient::new(channel),
        format!("http://{address}"),
    )
}

/// A namespace config: `queues` as (name, "KAFKA" | "SQS") in one persistence configuration each.
pub fn config(name: &str, kind: &str, queues: &[&str], extra: &str) -> String {
    let key = if kind == "KAFKA" {
        "wal-kafka-topics"
    } else {
        "wal-queue"
    };
    let names: Vec<String> = queues.iter().map(|q| format!("\"{q}\"")).collect();
    format!(
        r#"{{"namespace": "{name}", "persistence_configurations": {{"persistence_configuration": [
            {{"physical_storage": {{"type": "{kind}"}}, "config": {{"{key}": [{}]}}}}]}}{extra}}}"#,
        names.join(", ")
    )
}

/// The walctl binary with `args` against `control_plane`, the stack's CQL nodes in its
/// environment (the brokers' come from the test's own, as `scripts/stack env` set them).
pub async fn walctl_at(control_plane: &str, args: &[&str]) -> std::process::Output {
    let cql = std::env::var("WAL_CQL_NODES").unwrap_or_else(|_| "127.0.0.1:19042".into());
    tokio::process::Command::new(env!("CARGO_BIN_EXE_walctl"))
        .arg("--control-plane")
        .arg(control_plane)
        .args(args)
        .env("WAL_CQL_NODES", cql)
        .output()
        .await
        .unwrap()
}

/// The JSON a successful walctl printed; a failure shows its stderr.
pub fn json_of(output: &std::process::Output) -> serde_json::Value {
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Applies `config` (namespace JSON) to the control plane; the namespace it defines.
pub async fn apply_config(
    registry: &mut NamespaceRegistryClient<Channel>,
    config: &str,
) -> wal_namespaces::Namespace {
    registry
        .apply(wal_proto::v1::ApplyRequest {
            config_json: config.to_owned(),
            author: "test-operator".into(),
        })
        .await
        .unwrap();
    wal_namespaces::parse(config, "test").unwrap()
}
