//! Where the local stack's services are, and what tests do with the stack itself. Addresses come
//! from the environment `scripts/stack env` prints, with the stack's defaults, as the services'
//! own `for_local_stack` options take them (`wal_runtime::process`).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wal_clusters::ClusterMap;
use wal_clusters::flags::{BrokerFlags, CqlFlags};

pub fn kafka_bootstrap() -> String {
    BrokerFlags::local_stack().kafka_bootstrap
}

/// The local stack's second Kafka cluster (`scripts/stack up kafka2`).
pub fn kafka2_bootstrap() -> String {
    std::env::var("WAL_KAFKA2_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:19192".to_owned())
}

/// The name the test kit's processes know the second Kafka cluster by.
pub const SECOND_CLUSTER: &str = "kafka2";

/// `map` with the stack's second Kafka cluster in it, as [`SECOND_CLUSTER`].
pub fn with_second_cluster(map: ClusterMap) -> ClusterMap {
    map.with_kafka_cluster(SECOND_CLUSTER, &kafka2_bootstrap())
}

pub fn sqs_endpoint() -> String {
    BrokerFlags::local_stack()
        .sqs_endpoint
        .expect("the local stack has an SQS endpoint")
}

pub fn cql_nodes() -> Vec<String> {
    CqlFlags::local_stack().cql_nodes
}

/// The copies the stack's keyspaces keep: the clustered stack's (`scripts/stack env` sets it),
/// else one.
pub fn cql_replication_factor() -> u8 {
    CqlFlags::local_stack().cql_replication_factor.unwrap_or(1)
}

/// `CREATE KEYSPACE IF NOT EXISTS keyspace` with the stack's replication.
pub fn create_keyspace(keyspace: &str) -> String {
    format!(
        "CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = \
         {{'class': 'SimpleStrategy', 'replication_factor': {}}}",
        cql_replication_factor()
    )
}

pub fn memcached() -> Vec<String> {
    wal_clusters::flags::local_memcached()
}

/// A name no earlier run used, so tests never see each other's leftovers on a long-lived stack.
pub fn unique(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &id[..12])
}

/// A number from the environment, for the benches' and demos' tunables.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Polls `check` until it returns `Some`, for at most `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Where cargo put the binary `name` of the package under test: beside the `deps` folder that
/// holds this test or bench. Cargo builds a package's binaries for its integration tests and
/// benches, so a test finds its own package's binaries here.
pub fn cargo_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("tests run from <target>/<profile>/deps");
    let binary = profile.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.exists(),
        "{} is not built: cargo builds a package's binaries for that package's own tests and \
         benches only; build it first (cargo build [--release] -p PACKAGE)",
        binary.display()
    );
    binary
}

/// An address on loopback where nothing listens: connections to it are refused until a test
/// starts something there, which is how tests give a child process its port.
///
/// The port lies below Linux's default ephemeral range (32768 and up,
/// /proc/sys/net/ipv4/ip_local_port_range): one from `bind(0)` was free when checked, but the
/// kernel hands the same ports out as connections' local ports and to other `bind(0)`s, and in
/// CI one was taken before the producer bound it, so the test talked to whatever held it. Below
/// the range only an explicit bind can take a port (on a machine whose range starts lower,
/// this protection is gone); the stack's own ports are below 20000, and the process id and a
/// counter spread tests running side by side.
pub fn refusing_address() -> SocketAddr {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(7_919);
    for _ in 0..SPAN {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = FIRST + start.wrapping_add(step) % SPAN;
        let address = SocketAddr::from(([127, 0, 0, 1], port as u16));
        if std::net::TcpListener::bind(address).is_ok() {
            return address;
        }
    }
    panic!(
        "no free port on loopback from {FIRST} to {}",
        FIRST + SPAN - 1
    );
}

/// The stack's Jaeger (`scripts/stack up jaeger`): where processes send spans over OTLP/gRPC,
/// and its query API.
pub fn jaeger() -> (String, String) {
    let var =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    (
        var("WAL_JAEGER_OTLP", "http://127.0.0.1:19317"),
        var("WAL_JAEGER_QUERY", "http://127.0.0.1:19686"),
    )
}

/// A child process killed and reaped when dropped, so a test that fails halfway leaves none
/// running (a `Child` dropped is left to run).
#[derive(Debug)]
pub struct KilledWhenDropped(pub std::process::Child);

impl std::ops::Deref for KilledWhenDropped {
    type Target = std::process::Child;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for KilledWhenDropped {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for KilledWhenDropped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where the stack named by `WAL_STACK_NAME` (main unless set) keeps its services' files, as
/// `scripts/stack` lays them out under `WAL_STACK_HOME`.
pub fn run_dir() -> PathBuf {
    let home = std::env::var("WAL_STACK_HOME").map_or_else(
        |_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/wal/stack"),
        PathBuf::from,
    );
    match std::env::var("WAL_STACK_NAME").as_deref() {
        Err(_) | Ok("" | "main") => home.join("run"),
        Ok(name) => home.join(format!("run-{name}")),
    }
}

/// The pid `scripts/stack` recorded for `service` (`cassandra`, `kafka`, ...: a Java service,
/// whose command line names its run directory), when it runs: benchmarks count the CPU a shared
/// service spends on each side. As the script's own `alive` does, the process's command line
/// must name that directory, so a pid reused since is not taken for the service.
pub fn service_pid(service: &str) -> Option<u32> {
    let dir = run_dir().join(service);
    let text = std::fs::read_to_string(dir.join("pid")).ok()?;
    let pid: u32 = text.trim().parse().ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    cmdline
        .contains(&format!("{}/", dir.display()))
        .then_some(pid)
}

/// Runs `scripts/stack ACTION SERVICE`.
pub fn stack(action: &str, service: &str) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/stack");
    let status = std::process::Command::new("bash")
        .arg(script)
        .args([action, service])
        .status()
        .expect("run scripts/stack");
    assert!(status.success(), "scripts/stack {action} {service} failed");
}

/// Brings a stopped service back when dropped, even when an assertion failed halfway, so later
/// tests find the stack whole.
#[derive(Debug)]
pub struct Restart(pub &'static str);

impl Drop for Restart {
    fn drop(&mut self) {
        stack("up", self.0);
    }
}

/// Stops `service` for `down` while the test's tasks go on running, then starts it again
/// (waiting until it answers). The service comes back even when the test fails meanwhile.
pub async fn outage(service: &'static str, down: Duration) {
    stack("down", service);
    let restart = Restart(service);
    tokio::time::sleep(down).await;
    drop(restart);
}

/// When entries written at `since` arrived: polls `arrived` (how many of them have) every
/// 100 ms until all `expected` have, and panics naming `what` past `bound`. Returns how long
/// after `since` the first arrived, and the last.
pub async fn arrival<F, Fut>(
    since: std::time::Instant,
    expected: usize,
    bound: Duration,
    what: &str,
    mut arrived: F,
) -> (Duration, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let mut first = None;
    loop {
        let count = arrived().await;
        if count > 0 && first.is_none() {
            first = Some(since.elapsed());
        }
        if count >= expected {
            let all = since.elapsed();
            return (first.unwrap_or(all), all);
        }
        assert!(
            since.elapsed() < bound,
            "{count} of {expected} {what} arrived within {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops the Kafka broker for `down`, then starts it again (waiting until it answers), `times`
/// times: the broker restarts of the fault tests. Blocking: run it off the test's runtime.
pub fn restart_kafka(times: usize, down: Duration) {
    for _ in 0..times {
        let restart = Restart("kafka");
        stack("down", "kafka");
        std::thread::sleep(down);
        drop(restart);
    }
}

/// Asserts that a process's log file `log`, written through broker restarts, is quiet: the
/// outage's WARN and INFO are there (so a log that stayed empty does not pass), and fewer than
/// `most` lines at WARN or above in all, which it prints.
pub fn assert_quiet(log: &Path, most: usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    assert!(
        text.contains("lost the service") && text.contains("the service answers again"),
        "the outage's WARN and INFO are missing from {}:\n{text}",
        log.display()
    );
    let lines = warnings(log);
    let shown = lines.join("\n");
    println!("{} lines at WARN or above:\n{shown}", lines.len());
    assert!(
        lines.len() < most,
        "{} lines at WARN or above in {}:\n{shown}",
        lines.len(),
        log.display()
    );
}

/// Prints the last lines of a process's log file `log` if the test fails while this is alive:
/// a child process's log is where a failure through an outage is explained, and CI shows the
/// test's output, not the files it left in the temporary folder.
#[derive(Debug)]
#[must_use = "the log is shown when this guard is dropped by a failing test"]
pub struct ShowLogOnFailure<'a>(pub &'a Path);

impl Drop for ShowLogOnFailure<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let text = std::fs::read_to_string(self.0).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(without_colours).collect();
        let shown = &lines[lines.len().saturating_sub(LOG_TAIL)..];
        eprintln!(
            "the last {} of {} lines of {}:\n{}",
            shown.len(),
            lines.len(),
            self.0.display(),
            shown.join("\n")
        );
    }
}

/// How many lines of a child's log a failed test shows.
const LOG_TAIL: usize = 80;

/// The lines at WARN or above in a process's log file, their colours removed.
pub fn warnings(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .map(without_colours)
        .filter(|line| line.contains(" WARN ") || line.contains(" ERROR "))
        .collect()
}

/// `line` without its ANSI colour sequences (ESC [ ... m).
fn without_colours(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            plain.push(c);
        }
    }
    plain
}
