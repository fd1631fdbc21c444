//! What the consumer's tests share: the producer's test support (an in-process producer on the
//! real stack), an in-process consumer, a CQL table to read rows back from, a real HTTP upstream
//! that records what it received, and polling helpers.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

#[path = "../../../producer/tests/support/mod.rs"]
pub mod producer;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use wal_consumer::{Consumer, ConsumerHandle, ConsumerOptions};
use wal_namespaces::Namespace;

pub use producer::unique;

pub const KEYSPACE: &str = "wal_consumer_test";

/// The local stack's addresses (from `scripts/stack env`), as the consumer takes them.
pub fn local_stack() -> ConsumerOptions {
    ConsumerOptions::for_local_stack(PathBuf::new())
}

pub fn cql_nodes() -> Vec<String> {
    local_stack().cql_nodes
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
    Consumer::start(&options, namespaces)
        .await
        .unwrap_or_else(|e| panic!("consumer start (is the stack up? scripts/stack up): {e:#}"))
        .spawn()
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
    Consumer::start(&local_stack(), feed.namespaces().to_vec())
        .await
        .unwrap_or_else(|e| panic!("consumer start (is the stack up? scripts/stack up): {e:#}"))
        .spawn_following(Some(feed))
}

/// A `wal-consumer` process on the local stack reading the namespace files in `namespaces`, its
/// metrics on `metrics_listen` (`127.0.0.1:0` when nobody reads them). Only integration tests and
/// benches know where cargo built the binary.
pub fn consumer_process(namespaces: &std::path::Path, metrics_listen: &str) -> std::process::Child {
    let Some(binary) = option_env!("CARGO_BIN_EXE_wal-consumer") else {
        panic!("the wal-consumer binary is known to integration tests and benches only");
    };
    let stack = local_stack();
    std::process::Command::new(binary)
        .env("WAL_NAMESPACES", namespaces)
        .env("WAL_KAFKA_BOOTSTRAP", &stack.kafka_bootstrap)
        .env("WAL_SQS_ENDPOINT", stack.sqs_endpoint.unwrap_or_default())
        .env("WAL_CQL_NODES", cql_nodes().join(","))
        .env("WAL_CONSUMER_METRICS_LISTEN", metrics_listen)
        .env("WAL_CONSUMER_HEALTH_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start wal-consumer")
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

/// A cql payload putting one row of a [`Cql::table`].
pub fn put(id: &str, value: &str) -> Vec<u8> {
    format!(r#"{{"mutations":[{{"put":{{"row":{{"id":"{id}","value":"{value}"}}}}}}]}}"#)
        .into_bytes()
}

/// A cql payload deleting one row of a [`Cql::table`].
pub fn delete(id: &str) -> Vec<u8> {
    format!(r#"{{"mutations":[{{"delete":{{"key":{{"id":"{id}"}}}}}}]}}"#).into_bytes()
}

/// A cql target on `table` as namespace-config JSON.
pub fn cql_target(table: &str) -> String {
    format!(r#"{{"kind": "cql", "settings": {{"keyspace": "{KEYSPACE}", "table": "{table}"}}}}"#)
}

/// A session on the local Cassandra, for creating tables and reading rows back.
pub struct Cql {
    pub session: Session,
}

impl Cql {
    pub async fn connect() -> Self {
        let session = SessionBuilder::new()
            .known_nodes(cql_nodes())
            .build()
            .await
            .expect("connect to Cassandra (scripts/stack up)");
        session
            .query_unpaged(
                format!("CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
                &[],
            )
            .await
            .unwrap();
        Self { session }
    }

    /// A new table `(id text PRIMARY KEY, value text)`.
    pub async fn table(&self) -> String {
        let name = unique("t").replace('-', "_");
        self.session
            .query_unpaged(
                format!("CREATE TABLE {KEYSPACE}.{name} (id text PRIMARY KEY, value text)"),
                &[],
            )
            .await
            .unwrap();
        name
    }

    /// Every row of a [`Cql::table`] as id -> value.
    pub async fn rows(&self, table: &str) -> BTreeMap<String, Option<String>> {
        let result = self
            .session
            .query_unpaged(format!("SELECT id, value FROM {KEYSPACE}.{table}"), &[])
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        result
            .rows::<(String, Option<String>)>()
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// The write time of a row's value.
    pub async fn writetime(&self, table: &str, id: &str) -> Option<i64> {
        let result = self
            .session
            .query_unpaged(
                format!("SELECT WRITETIME(value) FROM {KEYSPACE}.{table} WHERE id = ?"),
                (id,),
            )
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        result
            .maybe_first_row::<(Option<i64>,)>()
            .unwrap()
            .and_then(|(t,)| t)
    }
}

/// One request an [`Upstream`] received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    pub at: std::time::SystemTime,
}

/// A real HTTP server on loopback standing for an upstream service: it records every request and
/// answers with the status `respond` picks for it.
pub struct Upstream {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Upstream {
    pub async fn start(respond: fn(&Received) -> u16) -> Self {
        Self::serve("127.0.0.1:0", respond, Duration::ZERO).await
    }

    /// An upstream at `address` (say, one that refused connections until now), answering each
    /// request after `delay`.
    pub async fn serve(address: &str, respond: fn(&Received) -> u16, delay: Duration) -> Self {
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let address: SocketAddr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&received);
        let server = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let service =
                        service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                            let log = Arc::clone(&log);
                            async move {
                                let headers = request
                                    .headers()
                                    .iter()
                                    .map(|(k, v)| {
                                        (
                                            k.as_str().to_owned(),
                                            v.to_str().unwrap_or_default().to_owned(),
                                        )
                                    })
                                    .collect();
                                let body = request
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes().to_vec())
                                    .unwrap_or_default();
                                let record = Received {
                                    headers,
                                    body,
                                    at: std::time::SystemTime::now(),
                                };
                                tokio::time::sleep(delay).await;
                                let status = respond(&record);
                                log.lock().unwrap().push(record);
                                let response = hyper::Response::builder()
                                    .status(status)
                                    .body(Full::new(Bytes::from_static(b"recorded")))
                                    .unwrap();
                                Ok::<_, std::convert::Infallible>(response)
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            url: format!("http://{address}/hook"),
            received,
            server,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// How many requests arrived so far: cheap enough to poll while thousands arrive, where
    /// cloning every one (`received`) would take the CPU the run is measuring.
    pub fn count(&self) -> usize {
        self.received.lock().unwrap().len()
    }

    /// An http target posting here, as namespace-config JSON.
    pub fn target(&self) -> String {
        format!(
            r#"{{"kind": "http", "settings": {{"url": "{}"}}}}"#,
            self.url
        )
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// A handle on the DLQ of a namespace's first queue, for reading what was dead-lettered.
pub async fn dlq_reader(namespace: &Namespace) -> Arc<dyn wal_core::queue::Queue> {
    let mut dlq = namespace.clone();
    let queue = &mut dlq.queues[0];
    queue.name = queue.dlq.clone();
    producer::reader(&dlq, 0).await
}

/// Reads the queue until an entry matching `wanted` arrives (60 s at most), acknowledging what
/// it reads.
pub async fn find_entry(
    queue: &dyn wal_core::queue::Queue,
    wanted: impl Fn(&wal_core::entry::Entry) -> bool,
) -> wal_core::entry::Entry {
    find_entries(queue, 1, wanted).await.remove(0)
}

/// Reads the queue until `count` entries matching `wanted` arrived (60 s at most), acknowledging
/// what it reads.
pub async fn find_entries(
    queue: &dyn wal_core::queue::Queue,
    count: usize,
    wanted: impl Fn(&wal_core::entry::Entry) -> bool,
) -> Vec<wal_core::entry::Entry> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut found = Vec::new();
    while found.len() < count {
        assert!(
            Instant::now() < deadline,
            "{} of {count} matching entries on {} within 60s",
            found.len(),
            queue.spec().name
        );
        for delivery in queue
            .receive(10, Duration::from_secs(1))
            .await
            .expect("receive")
        {
            queue.acknowledge(&delivery).await.expect("ack");
            if let Ok(entry) = delivery.entry
                && wanted(&entry)
            {
                found.push(entry);
            }
        }
    }
    found
}

/// An address on loopback where nothing listens: connections to it are refused.
pub fn refusing_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
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
pub struct Restart(pub &'static str);

impl Drop for Restart {
    fn drop(&mut self) {
        stack("up", self.0);
    }
}

impl Cql {
    /// How many rows a table holds (cheaper than reading them while a test polls).
    pub async fn count(&self, table: &str) -> i64 {
        let result = self
            .session
            .query_unpaged(format!("SELECT COUNT(*) FROM {KEYSPACE}.{table}"), &[])
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        result.first_row::<(i64,)>().unwrap().0
    }
}
