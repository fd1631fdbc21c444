//! A producer started in-process on the real local stack, a client for it, and the requests
//! tests send it.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::stack::with_second_cluster;
use tonic::transport::Channel;
use wal_namespaces::Namespace;
use wal_producer::registry::Registry;
use wal_producer::{Producer, ProducerOptions};
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::{Lifecycle, WriteToLogRequest};

/// The write timeout of a test's producer, unless the test sets its own: three times the
/// flags' 5 s. The suite runs tests, drills and three stacks' JVMs at once on two cores, where a
/// broker stalled by its neighbours for more than 5 s answers a write UNKNOWN, rightly, while
/// the test checks something else (a CI run saw it: a first write over SASL_SSL, 2026-11-27).
/// The tests of the timeout itself (`kafka_outage`) set theirs.
pub const TEST_WRITE_TIMEOUT_MS: u64 = 15_000;

#[derive(Debug)]
pub struct TestProducer {
    pub client: WriteAheadLogClient<Channel>,
    pub channel: Channel,
    pub address: std::net::SocketAddr,
    pub registry: Arc<Registry>,
    /// Where reloads go; `live.current()` is the set served now.
    pub live: Arc<wal_producer::live::LiveRegistry>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<Result<(), wal_runtime::process::ServeError>>>,
}

impl TestProducer {
    pub async fn start(namespaces: Vec<Namespace>) -> Self {
        Self::start_with(namespaces, |_| {}).await
    }

    pub async fn start_with(
        namespaces: Vec<Namespace>,
        adjust: impl FnOnce(&mut ProducerOptions),
    ) -> Self {
        Self::launch(namespaces, adjust, None).await
    }

    /// A producer serving `feed`'s namespaces and applying its changes until shut down.
    pub async fn start_following(feed: wal_namespaces::feed::Feed) -> Self {
        Self::launch(feed.namespaces().to_vec(), |_| {}, Some(feed)).await
    }

    async fn launch(
        namespaces: Vec<Namespace>,
        adjust: impl FnOnce(&mut ProducerOptions),
        feed: Option<wal_namespaces::feed::Feed>,
    ) -> Self {
        let mut options = ProducerOptions::for_local_stack(PathBuf::new());
        options.write_timeout_ms = TEST_WRITE_TIMEOUT_MS;
        adjust(&mut options);
        let mut settings = options.settings().expect("the local stack's cluster map");
        settings.clusters = with_second_cluster(settings.clusters);
        let producer = Producer::start(&settings, namespaces)
            .await
            .unwrap_or_else(|e| {
                panic!("producer start (is the stack up? scripts/stack up): {e:#}")
            });
        if let Some(feed) = feed {
            // Ends with the test's runtime.
            let never = tokio_util::sync::CancellationToken::new();
            tokio::spawn(producer.live().follow(feed, never));
        }
        let registry = producer.registry();
        let live = producer.live();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(producer.serve(listener, async {
            let _ = stopped.await;
        }));
        // A TLS port refuses this plaintext client's handshake; tests of TLS make their own
        // clients (`pki::tls_channel`).
        let plaintext = Channel::from_shared(format!("http://{address}")).unwrap();
        let channel = if options.security.tls.tls_cert.is_some() {
            plaintext.connect_lazy()
        } else {
            plaintext.connect().await.unwrap()
        };
        Self {
            client: WriteAheadLogClient::new(channel.clone()),
            channel,
            address,
            registry,
            live,
            stop: Some(stop),
            server: Some(server),
        }
    }

    /// Starts a graceful shutdown and waits until the server has answered everything in flight.
    pub async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.unwrap().unwrap();
        }
    }
}

/// Sends one write and asserts it was answered TRUE; returns the entry's id.
pub async fn write_true(
    client: &WriteAheadLogClient<Channel>,
    request: impl tonic::IntoRequest<WriteToLogRequest>,
) -> String {
    let answer = client
        .clone()
        .write_to_log(request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        answer.durable(),
        wal_proto::v1::Trilean::True,
        "{}",
        answer.message
    );
    answer.entry_id
}

/// Sends `request()` until one write is answered TRUE (a service returning from an outage may
/// refuse the first ones, FALSE or UNKNOWN), and panics naming `what` past `limit`.
pub async fn write_until_true(
    client: &WriteAheadLogClient<Channel>,
    limit: std::time::Duration,
    what: &str,
    request: impl Fn() -> WriteToLogRequest,
) {
    crate::eventually(limit, what, || {
        let (mut client, request) = (client.clone(), request());
        async move {
            let answer = client.write_to_log(request).await.ok()?.into_inner();
            (answer.durable() == wal_proto::v1::Trilean::True).then_some(())
        }
    })
    .await;
}

/// Writes `requests` in batches of `batch`, `concurrency` batches at a time, and asserts every
/// write is durable (TRUE).
pub async fn write_all_durably(
    client: &WriteAheadLogClient<Channel>,
    requests: Vec<WriteToLogRequest>,
    batch: usize,
    concurrency: usize,
) {
    use futures::StreamExt as _;
    use wal_proto::v1::{Trilean, WriteToLogBatchRequest};

    let batches = requests.chunks(batch).map(|chunk| {
        let mut client = client.clone();
        let writes = chunk.to_vec();
        async move {
            let answers = client
                .write_to_log_batch(WriteToLogBatchRequest { writes })
                .await
                .unwrap()
                .into_inner();
            for result in answers.results {
                let durable = result.response.as_ref().map(|a| a.durable());
                assert_eq!(
                    durable,
                    Some(Trilean::True),
                    "every write is stored: {result:?}"
                );
            }
        }
    });
    futures::stream::iter(batches)
        .buffer_unordered(concurrency)
        .collect::<Vec<()>>()
        .await;
}

pub fn write(namespace: &str, payload: &[u8]) -> WriteToLogRequest {
    WriteToLogRequest {
        namespace: namespace.to_owned(),
        payload: payload.to_vec(),
        ..WriteToLogRequest::default()
    }
}

pub fn delayed(
    namespace: &str,
    payload: &[u8],
    delay_millis: i64,
    original_micros: i64,
) -> WriteToLogRequest {
    WriteToLogRequest {
        lifecycle: Some(Lifecycle {
            delay_millis,
            jitter_millis: 0,
            original_write_time_micros: original_micros,
        }),
        ..write(namespace, payload)
    }
}

/// Writes to `namespace` through `client` every 20 ms while the Kafka broker is restarted three
/// times (down 5 s each), as the quiet-logs tests need: load on every client while the broker
/// comes and goes. Returns the ids answered TRUE; other answers are expected meanwhile.
pub async fn write_through_kafka_restarts(
    client: WriteAheadLogClient<Channel>,
    namespace: &str,
) -> Vec<String> {
    let stop = tokio_util::sync::CancellationToken::new();
    let writer = tokio::spawn({
        let (stop, namespace) = (stop.clone(), namespace.to_owned());
        async move {
            let mut written = Vec::new();
            let mut i = 0;
            while !stop.is_cancelled() {
                i += 1;
                let request = write(&namespace, format!("w{i}").as_bytes());
                if let Ok(answer) = client.clone().write_to_log(request).await {
                    let answer = answer.into_inner();
                    if answer.durable() == wal_proto::v1::Trilean::True {
                        written.push(answer.entry_id);
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            written
        }
    });
    tokio::task::spawn_blocking(|| crate::restart_kafka(3, std::time::Duration::from_secs(5)))
        .await
        .unwrap();
    // Writes answered TRUE after the last return, too.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    stop.cancel();
    writer.await.unwrap()
}
