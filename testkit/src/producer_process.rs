//! A `wal-producer` process on the local stack, for tests that kill it: an in-process producer
//! cannot be killed with SIGKILL without taking the test with it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tonic::transport::Channel;

use crate::consumer::local_stack;
use crate::stack::{cargo_bin, refusing_address};

/// How long a producer may take to listen.
const START_LIMIT: Duration = Duration::from_secs(180);

/// A running `wal-producer` and a channel to its gRPC server. Killed when dropped, so a test
/// that fails halfway leaves no process behind holding ports.
#[derive(Debug)]
pub struct ProducerProcess {
    pub child: Child,
    pub channel: Channel,
    /// Where its gRPC server listens (`host:port`).
    pub address: String,
}

impl ProducerProcess {
    /// Starts one serving the namespace files in `namespaces`, answering each write within
    /// `write_timeout`, and returns once it accepts connections. It logs WARN and above to
    /// the test's stderr.
    pub async fn start(namespaces: &Path, write_timeout: Duration) -> Self {
        Self::launch(namespaces, write_timeout, None, &[]).await
    }

    /// Like [`start`](Self::start), with `env` set over the stack's defaults: a drill points
    /// `WAL_KAFKA_BOOTSTRAP` and `WAL_CQL_NODES` at a fault proxy this way.
    pub async fn start_with_env(
        namespaces: &Path,
        write_timeout: Duration,
        env: &[(&str, String)],
    ) -> Self {
        Self::launch(namespaces, write_timeout, None, env).await
    }

    /// Like [`start`](Self::start), logging to the file `log` as an operator would see it: the
    /// binary's default log filter, not the test's.
    pub async fn start_logging_to(namespaces: &Path, write_timeout: Duration, log: &Path) -> Self {
        Self::launch(namespaces, write_timeout, Some(log), &[]).await
    }

    /// Like [`start_logging_to`](Self::start_logging_to), with `env` set over the stack's
    /// defaults.
    pub async fn start_logging_with_env(
        namespaces: &Path,
        write_timeout: Duration,
        log: &Path,
        env: &[(&str, String)],
    ) -> Self {
        Self::launch(namespaces, write_timeout, Some(log), env).await
    }

    /// Like [`start_with_env`](Self::start_with_env), running the binary `binary` (another
    /// build's, for an upgrade drill) rather than this build's.
    pub async fn start_from(
        binary: &Path,
        namespaces: &Path,
        write_timeout: Duration,
        env: &[(&str, String)],
    ) -> Self {
        Self::launch_binary(binary, namespaces, write_timeout, None, env, None).await
    }

    /// Like [`start_with_env`](Self::start_with_env), for a producer serving TLS (its flags in
    /// `env`): its readiness is checked, and its channel made, over `tls`.
    pub async fn start_secured(
        namespaces: &Path,
        write_timeout: Duration,
        env: &[(&str, String)],
        tls: tonic::transport::ClientTlsConfig,
    ) -> Self {
        let binary = cargo_bin("wal-producer");
        Self::launch_binary(&binary, namespaces, write_timeout, None, env, Some(tls)).await
    }

    async fn launch(
        namespaces: &Path,
        write_timeout: Duration,
        log: Option<&Path>,
        env: &[(&str, String)],
    ) -> Self {
        let binary = cargo_bin("wal-producer");
        Self::launch_binary(&binary, namespaces, write_timeout, log, env, None).await
    }

    async fn launch_binary(
        binary: &Path,
        namespaces: &Path,
        write_timeout: Duration,
        log: Option<&Path>,
        env: &[(&str, String)],
        tls: Option<tonic::transport::ClientTlsConfig>,
    ) -> Self {
        let stack = local_stack();
        let listen = refusing_address();
        let mut command = Command::new(binary);
        match log {
            Some(log) => {
                command
                    .env_remove("RUST_LOG")
                    .stderr(std::fs::File::create(log).expect("the log file"));
            }
            None => {
                command.env("RUST_LOG", "warn");
            }
        }
        let mut child = command
            .env("WAL_NAMESPACES", namespaces)
            .env("WAL_PRODUCER_LISTEN", listen.to_string())
            .env("WAL_PRODUCER_METRICS_LISTEN", "127.0.0.1:0")
            .env("WAL_KAFKA_BOOTSTRAP", &stack.brokers.kafka_bootstrap)
            .env(
                "WAL_SQS_ENDPOINT",
                stack.brokers.sqs_endpoint.unwrap_or_default(),
            )
            .env("WAL_CQL_NODES", stack.cql.cql_nodes.join(","))
            .env(
                "WAL_WRITE_TIMEOUT_MS",
                write_timeout.as_millis().to_string(),
            )
            .env("WAL_PROVISION", "true")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .spawn()
            .expect("start wal-producer");
        let endpoint = match tls {
            None => Channel::from_shared(format!("http://{listen}")).unwrap(),
            Some(tls) => Channel::from_shared(format!("https://{listen}"))
                .unwrap()
                .tls_config(tls)
                .unwrap(),
        };
        // Generous: a producer beside busy tests waits on a loaded Cassandra for its schema, and
        // says what it waits on every 10 s (warnings, above a failure).
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("wal-producer exited at start-up with {status} (its error is above)");
            }
            if let Ok(channel) = endpoint.connect().await {
                return Self {
                    child,
                    channel,
                    address: listen.to_string(),
                };
            }
            assert!(
                Instant::now() < deadline,
                "wal-producer did not start within {START_LIMIT:?} (its warnings, above or in its log file, say what it waited on)"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL: no shutdown, nothing flushed.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The process's peak resident memory so far (VmHWM), in bytes; `None` where /proc cannot tell.
    pub fn peak_rss(&self) -> Option<u64> {
        crate::measure::peak_rss(self.child.id())
    }
}

impl Drop for ProducerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
