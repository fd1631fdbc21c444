//! One write through a launched plan, as a service would make it: to the producer the chart
//! wires, into a namespace its feed carries (made through the chart's control plane, or one of
//! the chart's own namespace files), answered TRUE, then delivered by the chart's consumers to an
//! upstream here. It shows the pods work together as wired (the cluster map, the feed, TLS),
//! which each pod's readiness alone does not.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tonic::transport::Channel;
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::{ApplyRequest, Target, Trilean, WriteToLogRequest};
use wal_testkit::Upstream;

use crate::local::{Stack, say};
use crate::{Plan, Pod};

/// How long the write may take to be answered TRUE (the namespace reaches the producer through
/// the feed first) and then to reach the upstream.
const LIMIT: Duration = Duration::from_secs(60);
/// How long one call may go unanswered: a call that hangs must not outlast the limits above.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// Writes once through the plan's producer and waits for its consumers to deliver it.
pub async fn write_through(
    stack: &Stack,
    plan: &Plan,
    ports: &BTreeMap<String, BTreeMap<u16, u16>>,
) -> Result<()> {
    let Some(producer) = pod_running(plan, "wal-producer") else {
        say("no producer in this value set: no write made");
        return Ok(());
    };
    let upstream = Upstream::start(|_| 200).await;
    let target = Target {
        kind: "http".into(),
        settings_json: serde_json::json!({"url": upstream.url}).to_string(),
    };
    let namespace = match pod_running(plan, "wal-control-plane") {
        Some(control_plane) => {
            apply_namespace(stack, plan, control_plane, ports, &upstream.url).await?
        }
        None => folder_namespace(plan)?,
    };
    // Unique: a folder namespace's topic may hold an earlier run's write.
    let payload = format!(
        "chart-launch wrote this to {namespace}: {}",
        wal_testkit::unique("write")
    );
    let request = WriteToLogRequest {
        namespace: namespace.clone(),
        payload: payload.clone().into_bytes(),
        // Only where the namespace has no default target of ours: the chart's own files.
        target: pod_running(plan, "wal-control-plane")
            .is_none()
            .then_some(target),
        idempotency_id: wal_testkit::unique("launch-write"),
        ..WriteToLogRequest::default()
    };
    let mut client =
        WriteAheadLogClient::new(channel(stack, producer, grpc_port(producer, ports)?)?);
    write_until_true(&mut client, &request, producer).await?;
    await_delivery(&upstream, &payload, &namespace).await
}

/// Applies a fresh Kafka namespace through the chart's control plane, its target the upstream here.
async fn apply_namespace(
    stack: &Stack,
    plan: &Plan,
    control_plane: &Pod,
    ports: &BTreeMap<String, BTreeMap<u16, u16>>,
    upstream_url: &str,
) -> Result<String> {
    let name = wal_testkit::unique("launch");
    let config = serde_json::json!({
        "namespace": name,
        "persistence_configurations": {"persistence_configuration": [{
            "physical_storage": {"type": "KAFKA"},
            "config": {"wal-kafka-topics": [name], "consumer_stack": consumer_stack(plan)},
        }]},
        "default_target": {"kind": "http", "settings": {"url": upstream_url}},
    });
    let channel = channel(stack, control_plane, grpc_port(control_plane, ports)?)?;
    let mut registry = NamespaceRegistryClient::new(channel);
    let apply = registry.apply(ApplyRequest {
        config_json: config.to_string(),
        author: "chart-launch".into(),
        ..Default::default()
    });
    tokio::time::timeout(CALL_TIMEOUT, apply)
        .await
        .context("the chart's control plane did not answer an Apply")?
        .context("applying a namespace through the chart's control plane")?;
    say(&format!(
        "namespace {name} applied through {}",
        control_plane.deployment
    ));
    Ok(name)
}

/// Retries the write until it is answered TRUE: the namespace reaches the producer by the feed.
async fn write_until_true(
    client: &mut WriteAheadLogClient<Channel>,
    request: &WriteToLogRequest,
    producer: &Pod,
) -> Result<()> {
    let namespace = &request.namespace;
    let started = Instant::now();
    loop {
        // The same idempotency id every time, as a client's retry would.
        let call = tokio::time::timeout(CALL_TIMEOUT, client.write_to_log(request.clone()));
        let last = match call.await {
            Ok(Ok(answer)) if answer.get_ref().durable() == Trilean::True => break,
            Ok(Ok(answer)) => format!(
                "{:?}: {}",
                answer.get_ref().durable(),
                answer.get_ref().message
            ),
            Ok(Err(status)) => status.to_string(),
            Err(_) => format!("no answer within {CALL_TIMEOUT:?}"),
        };
        if started.elapsed() > LIMIT {
            bail!(
                "{}: no write to {namespace} answered TRUE within {LIMIT:?}; the last answer: {last}",
                producer.deployment
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    say(&format!(
        "{}: a write to {namespace} answered TRUE after {:.1} s",
        producer.deployment,
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Waits for the consumers to deliver the payload: TRUE says it is durable, not that it flows.
async fn await_delivery(upstream: &Upstream, payload: &str, namespace: &str) -> Result<()> {
    let written = Instant::now();
    while !upstream.bodies().iter().any(|body| body == payload) {
        if written.elapsed() > LIMIT {
            bail!(
                "the write to {namespace} answered TRUE was not delivered to the upstream within {LIMIT:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    say(&format!(
        "the consumers delivered it to an upstream {:.1} s later",
        written.elapsed().as_secs_f64()
    ));
    Ok(())
}

fn pod_running<'a>(plan: &'a Plan, binary: &str) -> Option<&'a Pod> {
    plan.pods
        .iter()
        .find(|p| p.command.first().is_some_and(|c| c == binary))
}

fn env<'a>(pod: &'a Pod, name: &str) -> Option<&'a str> {
    pod.env
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value.as_deref())
}

/// The consumer stack of the first consumer that delivers here rather than to other regions.
fn consumer_stack(plan: &Plan) -> Option<String> {
    plan.pods
        .iter()
        .filter(|p| p.command.first().is_some_and(|c| c == "wal-consumer"))
        .find(|p| env(p, "WAL_REPLICATE_TO").is_none())
        .and_then(|p| env(p, "WAL_CONSUMER_STACK").map(str::to_owned))
}

/// A Kafka namespace of the chart's own namespace files that a launched consumer serves.
fn folder_namespace(plan: &Plan) -> Result<String> {
    let stacks: Vec<Option<&str>> = plan
        .pods
        .iter()
        .filter(|p| p.command.first().is_some_and(|c| c == "wal-consumer"))
        .map(|p| env(p, "WAL_CONSUMER_STACK"))
        .collect();
    for files in plan.config_maps.values() {
        for (file, text) in files {
            let Ok(config) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            let Some(name) = config["namespace"]
                .as_str()
                .filter(|_| file.ends_with(".json"))
            else {
                continue;
            };
            let storage = &config["persistence_configurations"]["persistence_configuration"][0];
            let stack = storage["config"]["consumer_stack"].as_str();
            if storage["physical_storage"]["type"] == "KAFKA"
                && stacks.iter().any(|s| s.is_none() || *s == stack)
            {
                return Ok(name.to_owned());
            }
        }
    }
    bail!(
        "no control plane, and no Kafka namespace among the chart's files that a launched consumer serves"
    )
}

fn grpc_port(pod: &Pod, ports: &BTreeMap<String, BTreeMap<u16, u16>>) -> Result<u16> {
    let port = pod
        .ports
        .get("grpc")
        .with_context(|| format!("{}: no port named grpc", pod.deployment))?;
    ports[&pod.deployment]
        .get(port)
        .copied()
        .with_context(|| format!("{}: port {port} has no local port", pod.deployment))
}

/// A channel to a pod's gRPC port: TLS when the pod serves it, with a client certificate naming
/// the first of its super users (the chart's principal rules read SPIFFE URIs).
fn channel(stack: &Stack, pod: &Pod, port: u16) -> Result<Channel> {
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    if env(pod, "WAL_TLS_CERT").is_none() {
        return Ok(Channel::from_shared(format!("http://{address}"))?.connect_lazy());
    }
    let principal = env(pod, "WAL_SUPER_USERS")
        .and_then(|users| users.split(',').next())
        .unwrap_or("platform/chart-launch");
    Ok(stack.tls_channel(address, principal))
}
