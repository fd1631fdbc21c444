//! chart-launch: starts the Helm chart's processes as its rendered manifests wire them, against
//! the local stack, and fails on the first that does not come up or go down as Kubernetes
//! would ask it to.
//!
//!   chart-launch PLAN.json...   (plans: charts/check with CHARTCHECK_PLANS_OUT; scripts/chart-check)
//!
//! For each Deployment of a plan, one pod (replicas are copies of one wiring): its command and
//! arguments; exactly its environment (nothing inherited but PATH), each `WAL_*` variable one
//! its binary reads (its `--help` lists it), or the check fails; its mounted ConfigMaps,
//! Secrets and emptyDirs as folders of its own; its ports on free loopback ports, and a
//! Service's name in a variable as the address of the pod it selects. Then its readiness probe
//! (gRPC health SERVING, or a TCP connect) within 90 s, and each metrics port answering
//! GET /metrics. Then one write through the producer, into a namespace made through the chart's
//! control plane (or one of the chart's own namespace files), answered TRUE within 60 s and
//! delivered by the consumers to an upstream here within 60 s more. Last, SIGTERM in reverse
//! order of start: each must exit 0 within its terminationGracePeriodSeconds less its preStop
//! sleep.
//!
//! This is the closest check to a cluster this machine allows: no Kubernetes API server or
//! kubelet runs here, so RBAC, probes' timing, DNS, NetworkPolicies and the image itself are
//! not exercised; the processes and their wiring are.

mod local;
mod pod;
mod running;
mod write;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use local::Stack;
use running::Started;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Plan {
    config_maps: BTreeMap<String, BTreeMap<String, String>>,
    services: BTreeMap<String, PlannedService>,
    pods: Vec<Pod>,
}

#[derive(Debug, Deserialize)]
struct PlannedService {
    deployment: String,
    ports: BTreeMap<String, u16>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    deployment: String,
    command: Vec<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Vec<Env>,
    #[serde(default)]
    mounts: Vec<Mount>,
    ports: BTreeMap<String, u16>,
    readiness: Probe,
    grace_seconds: u64,
    pre_stop_sleep_seconds: u64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Env {
    name: String,
    value: Option<String>,
    secret: Option<KeyRef>,
    config_map: Option<KeyRef>,
}

#[derive(Debug, Deserialize)]
struct KeyRef {
    name: String,
    key: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Mount {
    path: String,
    config_map: Option<String>,
    secret: Option<String>,
    #[serde(default)]
    empty_dir: bool,
}

#[derive(Debug, Deserialize, Clone, Copy)]
pub struct Probe {
    grpc: Option<u16>,
    tcp: Option<u16>,
}

#[tokio::main]
async fn main() {
    let plans: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if plans.is_empty() {
        eprintln!(
            "usage: chart-launch PLAN.json... (written by charts/check with CHARTCHECK_PLANS_OUT)"
        );
        std::process::exit(2);
    }
    let stack = Stack::new();
    let root = std::env::temp_dir().join(wal_testkit::unique("chart-launch"));
    for plan in &plans {
        if let Err(e) = launch(&stack, plan, &root).await {
            eprintln!("chart-launch: {}: {e:#}", plan.display());
            eprintln!(
                "chart-launch: the pods' folders and logs are kept under {}",
                root.display()
            );
            std::process::exit(1);
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    println!(
        "chart-launch: every pod of {} plans came up and went down as the chart wires it",
        plans.len()
    );
}

/// Starts every pod of one plan in the order their addresses need, checks each, stops all.
async fn launch(stack: &Stack, path: &Path, root: &Path) -> Result<()> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .map(|n| n.trim_end_matches(".json").trim_end_matches(".plan"))
        .unwrap_or("plan");
    println!("chart-launch: {name}");
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut plan: Plan = serde_json::from_str(&text).context("not a launch plan")?;
    for data in plan.config_maps.values_mut() {
        if let Some(map) = data.get_mut("clusters.json") {
            *map = stack.cluster_map(map)?;
        }
    }
    let ports = pod::free_ports(&plan.pods)?;
    let order = start_order(&plan)?;
    let mut started: Vec<Started> = Vec::new();
    let result = async {
        for index in order {
            let pod = &plan.pods[index];
            let dir = root.join(name).join(&pod.deployment);
            let services = service_addresses(&plan, &ports);
            let spec = pod::prepare(
                stack,
                pod,
                &plan.config_maps,
                &services,
                &ports[&pod.deployment],
                &dir,
            )?;
            started.push(running::start(pod, spec, &ports[&pod.deployment], &dir).await?);
        }
        write::write_through(stack, &plan, &ports).await
    }
    .await;
    // Stopped whatever happened, last started first: a consumer before the control plane it
    // follows, as a rollout that removes a release would.
    let mut stopped = Ok(());
    while let Some(pod) = started.pop() {
        let outcome = pod.stop().await;
        if stopped.is_ok() {
            stopped = outcome;
        }
    }
    result?;
    stopped
}

/// The host:port each Service's name and port stands for: the loopback port of the pod it
/// selects.
fn service_addresses(
    plan: &Plan,
    ports: &BTreeMap<String, BTreeMap<u16, u16>>,
) -> BTreeMap<String, u16> {
    let mut addresses = BTreeMap::new();
    for (name, service) in &plan.services {
        let Some(local) = ports.get(&service.deployment) else {
            continue;
        };
        for (port, target) in &service.ports {
            if let Some(local_port) = local.get(target) {
                addresses.insert(format!("{name}:{port}"), *local_port);
            }
        }
    }
    addresses
}

/// Pods in an order where each starts after the pods whose Services its variables name.
fn start_order(plan: &Plan) -> Result<Vec<usize>> {
    let needs = |pod: &Pod| -> Vec<String> {
        plan.services
            .iter()
            .filter(|(service, target)| {
                target.deployment != pod.deployment
                    && pod.env.iter().any(|e| {
                        e.value
                            .as_deref()
                            .is_some_and(|v| v.contains(&format!("//{service}:")))
                    })
            })
            .map(|(_, target)| target.deployment.clone())
            .collect()
    };
    let mut order = Vec::new();
    let mut placed = std::collections::BTreeSet::new();
    while order.len() < plan.pods.len() {
        let before = order.len();
        for (index, pod) in plan.pods.iter().enumerate() {
            if !placed.contains(&pod.deployment) && needs(pod).iter().all(|d| placed.contains(d)) {
                placed.insert(pod.deployment.clone());
                order.push(index);
            }
        }
        if order.len() == before {
            bail!("the pods' Services name each other in a cycle; no start order serves them");
        }
    }
    Ok(order)
}
