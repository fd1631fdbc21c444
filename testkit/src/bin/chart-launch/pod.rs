//! One pod of a plan: its files and environment made local, its process started and probed as
//! the kubelet would, and stopped as a rollout would.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic_health::pb::health_check_response::ServingStatus;

use crate::local::{Stack, rewrite_paths, say};
use crate::{Pod, Probe};

/// How long a pod may take to pass its readiness probe: the chart's probes give a process a
/// minute of failures before its liveness probe restarts it; debug builds on a busy machine
/// get half as much again.
const READY_LIMIT: Duration = Duration::from_secs(90);

/// A free loopback port for each container port of each pod, by Deployment.
pub fn free_ports(pods: &[Pod]) -> Result<BTreeMap<String, BTreeMap<u16, u16>>> {
    Ok(pods
        .iter()
        .map(|pod| {
            let ports = pod
                .ports
                .values()
                .map(|&port| (port, wal_testkit::refusing_address().port()))
                .collect();
            (pod.deployment.clone(), ports)
        })
        .collect())
}

/// What to run: the binary, its arguments and its whole environment.
pub struct Spec {
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

/// Makes the pod's folders and environment local, and checks each variable is one its binary
/// reads.
pub fn prepare(
    stack: &Stack,
    pod: &Pod,
    config_maps: &BTreeMap<String, BTreeMap<String, String>>,
    services: &BTreeMap<String, u16>,
    ports: &BTreeMap<u16, u16>,
    dir: &Path,
) -> Result<Spec> {
    let program = binary(pod)?;
    let mounts: Vec<(String, PathBuf)> = pod
        .mounts
        .iter()
        .map(|m| {
            (
                m.path.clone(),
                dir.join("fs").join(m.path.trim_start_matches('/')),
            )
        })
        .collect();
    for (mount, (_, local)) in pod.mounts.iter().zip(&mounts) {
        std::fs::create_dir_all(local).with_context(|| format!("making {}", local.display()))?;
        let files = if let Some(name) = &mount.config_map {
            let data = config_maps.get(name).with_context(|| {
                format!(
                    "mount {}: the chart renders no ConfigMap {name}",
                    mount.path
                )
            })?;
            let mut files = Vec::new();
            for (key, text) in data {
                files.push((key.clone(), rewrite_paths(text, &mounts)));
            }
            files
        } else if let Some(name) = &mount.secret {
            stack.secret(name)?
        } else if mount.empty_dir {
            Vec::new()
        } else {
            bail!(
                "mount {}: neither a ConfigMap, a Secret nor an emptyDir",
                mount.path
            );
        };
        for (key, text) in files {
            std::fs::write(local.join(&key), text)
                .with_context(|| format!("writing {key} under {}", local.display()))?;
        }
    }
    let read = known_variables(&program)?;
    let mut env = Vec::new();
    for variable in &pod.env {
        let name = &variable.name;
        if name.starts_with("WAL_") && !read.contains(name) {
            bail!(
                "the chart sets {name}, which {} does not read (its --help names no such variable)",
                program.display()
            );
        }
        let value = if let Some(value) = &variable.value {
            value.clone()
        } else if let Some(secret) = &variable.secret {
            stack
                .secret(&secret.name)?
                .into_iter()
                .find(|(key, _)| *key == secret.key)
                .map(|(_, value)| value)
                .with_context(|| {
                    format!("{name}: Secret {} has no key {}", secret.name, secret.key)
                })?
        } else if let Some(map) = &variable.config_map {
            config_maps
                .get(&map.name)
                .and_then(|data| data.get(&map.key))
                .cloned()
                .with_context(|| {
                    format!(
                        "{name}: the chart renders no ConfigMap key {}/{}",
                        map.name, map.key
                    )
                })?
        } else {
            bail!("{name}: no value, Secret or ConfigMap");
        };
        let local = local_value(stack, name, &value, services, ports, &mounts)?;
        if local != value {
            say(&format!("{}: {name}={value} -> {local}", pod.deployment));
        }
        env.push((name.clone(), local));
    }
    Ok(Spec {
        program,
        args: pod.command[1..]
            .iter()
            .chain(pod.args.iter().flatten())
            .cloned()
            .collect(),
        env,
    })
}

/// A variable's value with the stack's addresses, free ports and the pod's folders.
fn local_value(
    stack: &Stack,
    name: &str,
    value: &str,
    services: &BTreeMap<String, u16>,
    ports: &BTreeMap<u16, u16>,
    mounts: &[(String, PathBuf)],
) -> Result<String> {
    if let Some(addresses) = stack.address_variable(name)? {
        return Ok(addresses);
    }
    if let Some(port) = value.strip_prefix("0.0.0.0:") {
        let port: u16 = port
            .parse()
            .with_context(|| format!("{name}={value}: not a port"))?;
        let local = ports
            .get(&port)
            .with_context(|| format!("{name}={value}: the container declares no port {port}"))?;
        return Ok(format!("127.0.0.1:{local}"));
    }
    let mut value = value.to_owned();
    for (service, port) in services {
        value = replace_address(&value, service, &format!("127.0.0.1:{port}"));
    }
    Ok(rewrite_paths(&value, mounts))
}

/// `value` with each URL authority `//ADDRESS` (not followed by more digits) made `//LOCAL`.
fn replace_address(value: &str, address: &str, local: &str) -> String {
    let needle = format!("//{address}");
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find(&needle) {
        let after = &rest[at + needle.len()..];
        out.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            out.push_str(&needle);
        } else {
            out.push_str("//");
            out.push_str(local);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The binary the pod's command names, from this build.
fn binary(pod: &Pod) -> Result<PathBuf> {
    let command = pod.command.first().context("no command")?;
    let beside = std::env::current_exe()?
        .parent()
        .context("the runner's folder")?
        .join(command);
    if !beside.exists() {
        bail!(
            "the chart runs {command}, which this build has no binary of (looked for {})",
            beside.display()
        );
    }
    Ok(beside)
}

/// The variables a binary reads: those its --help lists as `[env: NAME=`.
fn known_variables(program: &Path) -> Result<BTreeSet<String>> {
    let help = Command::new(program)
        .arg("--help")
        .output()
        .with_context(|| format!("running {} --help", program.display()))?;
    let text = String::from_utf8_lossy(&help.stdout);
    Ok(text
        .split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next())
        .map(str::to_owned)
        .collect())
}

/// A running pod.
pub struct Started {
    deployment: String,
    child: Child,
    log: PathBuf,
    /// What the kubelet would give it after SIGTERM: the grace period less the preStop sleep.
    grace: Duration,
}

/// Starts the pod and waits for its readiness probe, then asks its metrics ports for
/// /metrics.
pub async fn start(
    pod: &Pod,
    spec: Spec,
    ports: &BTreeMap<u16, u16>,
    dir: &Path,
) -> Result<Started> {
    let log = dir.join("log");
    let out = std::fs::File::create(&log)?;
    let started = Instant::now();
    let child = Command::new(&spec.program)
        .args(&spec.args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(spec.env)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", spec.program.display()))?;
    let mut running = Started {
        deployment: pod.deployment.clone(),
        child,
        log,
        grace: Duration::from_secs(
            pod.grace_seconds
                .saturating_sub(pod.pre_stop_sleep_seconds)
                .max(1),
        ),
    };
    let probe_port = |port: u16| {
        ports.get(&port).copied().with_context(|| {
            format!("the readiness probe names port {port}, which the container does not declare")
        })
    };
    let (what, port) = match pod.readiness {
        Probe {
            grpc: Some(port), ..
        } => ("gRPC health SERVING", probe_port(port)?),
        Probe {
            tcp: Some(port), ..
        } => ("a TCP connect", probe_port(port)?),
        _ => bail!("{}: a readiness probe of no kind", pod.deployment),
    };
    loop {
        if let Some(status) = running.child.try_wait()? {
            bail!(
                "{} exited ({status}) before it was ready:\n{}",
                pod.deployment,
                running.tail()
            );
        }
        if ready(pod.readiness, port).await {
            break;
        }
        if started.elapsed() > READY_LIMIT {
            bail!(
                "{} was not ready ({what} on 127.0.0.1:{port}) within {READY_LIMIT:?}:\n{}",
                pod.deployment,
                running.tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    say(&format!(
        "{}: ready in {:.1} s ({what} on 127.0.0.1:{port})",
        pod.deployment,
        started.elapsed().as_secs_f64()
    ));
    if let Some(metrics) = pod.ports.get("metrics") {
        let port = probe_port(*metrics)?;
        let answer = get_metrics(port).await;
        if !answer.starts_with("HTTP/1.1 200") {
            bail!(
                "{}: GET /metrics on its metrics port 127.0.0.1:{port} answered {answer:?}",
                pod.deployment
            );
        }
        say(&format!(
            "{}: /metrics answers on its metrics port",
            pod.deployment
        ));
    }
    Ok(running)
}

async fn ready(probe: Probe, port: u16) -> bool {
    if probe.grpc.is_some() {
        let Ok(channel) =
            tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
                .map(|e| e.connect_timeout(Duration::from_secs(1)))
        else {
            return false;
        };
        let Ok(channel) = channel.connect().await else {
            return false;
        };
        let check = tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        };
        matches!(
            tonic_health::pb::health_client::HealthClient::new(channel).check(check).await,
            Ok(answer) if answer.get_ref().status() == ServingStatus::Serving
        )
    } else {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    }
}

/// The status line of GET /metrics, or what went wrong.
async fn get_metrics(port: u16) -> String {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(
            String::from_utf8_lossy(&answer)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    match tokio::time::timeout(Duration::from_secs(10), exchange).await {
        Ok(Ok(line)) => line,
        Ok(Err(e)) => e.to_string(),
        Err(_) => "no answer within 10 s".into(),
    }
}

impl Started {
    /// SIGTERM, then the exit within the grace period, with status 0.
    pub async fn stop(mut self) -> Result<()> {
        let stopping = Instant::now();
        // kill(1), as testkit's terminate does: the workspace forbids unsafe code.
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        if !sent.success() {
            bail!(
                "SIGTERM to {} (process {}) failed",
                self.deployment,
                self.child.id()
            );
        }
        loop {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    bail!(
                        "{} exited with {status} after SIGTERM:\n{}",
                        self.deployment,
                        self.tail()
                    );
                }
                say(&format!(
                    "{}: stopped in {:.1} s after SIGTERM, exit 0",
                    self.deployment,
                    stopping.elapsed().as_secs_f64()
                ));
                return Ok(());
            }
            if stopping.elapsed() > self.grace {
                bail!(
                    "{} was still running {:?} after SIGTERM, when the kubelet would kill it:\n{}",
                    self.deployment,
                    self.grace,
                    self.tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The last lines of the pod's log.
    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "  (log {})\n{}",
            self.log.display(),
            lines[lines.len().saturating_sub(20)..].join("\n")
        )
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
