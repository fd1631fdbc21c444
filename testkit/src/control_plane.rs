//! A control plane in-process on the real stack, namespace configs for it, and walctl runs.

use tokio::net::TcpListener;
use tonic::transport::Channel;
use wal_control_plane::{ControlPlane, ControlPlaneSettings};
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;

use crate::stack::{cargo_bin, cql_nodes, unique, with_second_cluster};

/// A control plane on a free port with a fresh SQLite store, and a client for it.
pub async fn control_plane() -> NamespaceRegistryClient<Channel> {
    control_plane_at().await.0
}

/// Like [`control_plane`], with its address.
pub async fn control_plane_at() -> (NamespaceRegistryClient<Channel>, String) {
    let address = control_plane_serving(None, wal_runtime::authorize::Authorizer::off()).await;
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

/// A control plane on a free port with a fresh SQLite store, serving TLS when `tls` is given and
/// authorizing with `authorizer`; returns its address.
pub async fn control_plane_serving(
    tls: Option<wal_runtime::tls::ServerTls>,
    authorizer: wal_runtime::authorize::Authorizer,
) -> std::net::SocketAddr {
    let store = std::env::temp_dir().join(format!("{}.db", unique("registry")));
    let (address, _) = control_plane_with(&store, tls, authorizer, std::future::pending()).await;
    address
}

/// A plaintext control plane without authorization on the SQLite store at `store` (made when
/// missing), serving until `shutdown`; its URL, and its task, which ends once it has stopped
/// (its redrives' stops recorded).
pub async fn control_plane_on(
    store: &std::path::Path,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> (String, tokio::task::JoinHandle<()>) {
    let off = wal_runtime::authorize::Authorizer::off();
    let (address, task) = control_plane_with(store, None, off, shutdown).await;
    (format!("http://{address}"), task)
}

async fn control_plane_with(
    store: &std::path::Path,
    tls: Option<wal_runtime::tls::ServerTls>,
    authorizer: wal_runtime::authorize::Authorizer,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let brokers = wal_clusters::flags::BrokerFlags::local_stack();
    let clusters = brokers
        .cluster_map(
            brokers.kafka(),
            &wal_clusters::flags::CqlFlags::local_stack(),
        )
        .unwrap();
    let settings = ControlPlaneSettings {
        store: format!("sqlite://{}", store.display()),
        clusters: with_second_cluster(clusters),
        tls,
        authorizer,
        region: "local".to_owned(),
    };
    let control_plane = ControlPlane::start(&settings).await.unwrap_or_else(|e| {
        let error = anyhow::Error::from(e);
        panic!("control plane start (is the stack up? scripts/stack up): {error:#}")
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        control_plane.serve(listener, shutdown).await.unwrap();
    });
    (address, task)
}

/// A namespace config: `queues` as (name, "KAFKA" | "SQS") in one persistence configuration each,
/// and `extra` top-level members (starting with a comma).
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

/// walctl with `args` against `control_plane`, the stack's CQL nodes in its environment (the
/// brokers' come from the test's own, as `scripts/stack env` set them). For walctl's own tests:
/// cargo builds the binary for them.
pub async fn walctl_at(control_plane: &str, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(cargo_bin("walctl"))
        .arg("--control-plane")
        .arg(control_plane)
        .args(args)
        .env("WAL_CQL_NODES", cql_nodes().join(","))
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
    let (config_json, author) = (config.to_owned(), AUTHOR.to_owned());
    let request = wal_proto::v1::ApplyRequest {
        config_json,
        author,
        ..Default::default()
    };
    registry.apply(request).await.unwrap();
    wal_namespaces::parse(config, "test").unwrap()
}

/// Deletes namespace `name` on the control plane.
pub async fn delete_namespace(registry: &mut NamespaceRegistryClient<Channel>, name: &str) {
    let (name, author) = (name.to_owned(), AUTHOR.to_owned());
    let request = wal_proto::v1::DeleteRequest { name, author };
    registry.delete(request).await.unwrap();
}

/// Who the test kit's changes to namespaces are recorded as made by.
const AUTHOR: &str = "test-operator";
