//! A pod's process: started with exactly its environment, probed as the kubelet would, asked for
//! its metrics, and stopped as a rollout would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic_health::pb::health_check_response::ServingStatus;

use crate::local::say;
use crate::pod::Spec;
use crate::{Pod, Probe};

/// How long a pod may take to pass its readiness probe: the chart's probes give a process a
/// minute of failures before its liveness probe restarts it; debug builds on a busy machine
/// get half as much again.
const READY_LIMIT: Duration = Duration::from_secs(90);
/// How long one probe may take: a health check that hangs must not stall the check past its
/// limits (no watchdog watches this program).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

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
    let mut running = Started::spawn(pod, spec, dir, log, out)?;
    let (what, port) = match pod.readiness {
        Probe {
            grpc: Some(port), ..
        } => ("gRPC health SERVING", probe_port(ports, port)?),
        Probe {
            tcp: Some(port), ..
        } => ("a TCP connect", probe_port(ports, port)?),
        _ => bail!("{}: a readiness probe of no kind", pod.deployment),
    };
    running
        .await_ready(pod.readiness, what, port, started)
        .await?;
    if let Some(metrics) = pod.ports.get("metrics") {
        let port = probe_port(ports, *metrics)?;
        let answer = get_metrics(port).await;
        let status = answer.lines().next().unwrap_or_default();
        if !status.starts_with("HTTP/1.1 200") {
            bail!(
                "{}: GET /metrics on its metrics port 127.0.0.1:{port} answered {status:?}",
                pod.deployment
            );
        }
        // Which build answers, and the process's own resources: every scrape has both.
        for wanted in ["wal_build_info{", "process_resident_memory_bytes "] {
            if !answer.lines().any(|line| line.starts_with(wanted)) {
                bail!(
                    "{}: the scrape on 127.0.0.1:{port} has no {}",
                    pod.deployment,
                    wanted.trim_end_matches(['{', ' '])
                );
            }
        }
        say(&format!(
            "{}: /metrics answers on its metrics port, wal_build_info and process_* in it",
            pod.deployment
        ));
    }
    Ok(running)
}

/// The local port of a container port the pod is probed on, which its container must declare.
fn probe_port(ports: &BTreeMap<u16, u16>, port: u16) -> Result<u16> {
    ports.get(&port).copied().with_context(|| {
        format!("the readiness probe names port {port}, which the container does not declare")
    })
}

async fn ready(probe: Probe, port: u16) -> bool {
    tokio::time::timeout(PROBE_TIMEOUT, probe_once(probe, port))
        .await
        .unwrap_or(false)
}

async fn probe_once(probe: Probe, port: u16) -> bool {
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

/// The answer to GET /metrics (its status line first), or what went wrong.
async fn get_metrics(port: u16) -> String {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&answer).into_owned())
    };
    match tokio::time::timeout(Duration::from_secs(10), exchange).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => e.to_string(),
        Err(_) => "no answer within 10 s".into(),
    }
}

impl Started {
    /// Runs the pod's binary with exactly its environment (PATH aside), its output to `log`.
    fn spawn(pod: &Pod, spec: Spec, dir: &Path, log: PathBuf, out: std::fs::File) -> Result<Self> {
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
        Ok(Started {
            deployment: pod.deployment.clone(),
            child,
            log,
            grace: Duration::from_secs(
                pod.grace_seconds
                    .saturating_sub(pod.pre_stop_sleep_seconds)
                    .max(1),
            ),
        })
    }

    /// Probes until ready, as the kubelet would, failing early if the process exits meanwhile.
    async fn await_ready(
        &mut self,
        probe: Probe,
        what: &str,
        port: u16,
        started: Instant,
    ) -> Result<()> {
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} exited ({status}) before it was ready:\n{}",
                    self.deployment,
                    self.tail()
                );
            }
            if ready(probe, port).await {
                break;
            }
            if started.elapsed() > READY_LIMIT {
                bail!(
                    "{} was not ready ({what} on 127.0.0.1:{port}) within {READY_LIMIT:?}:\n{}",
                    self.deployment,
                    self.tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        say(&format!(
            "{}: ready in {:.1} s ({what} on 127.0.0.1:{port})",
            self.deployment,
            started.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    /// SIGTERM, then the exit within the grace period, with status 0.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} had exited ({status}) before it was stopped:\n{}",
                self.deployment,
                self.tail()
            );
        }
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
