//! Regions on loopback for cross-region replication: an in-process `wal-writer` per region,
//! each applying to a cache of its own (the stack's memcached, memcached2, memcached3).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use memcache::exp::{AsyncMetaClient, GetStatus};

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wal_writer::WriterOptions;

/// The local stack's three caches, one per region of a test (`scripts/stack env`).
pub fn region_caches() -> [String; 3] {
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    [
        var("WAL_MEMCACHED", "127.0.0.1:19211"),
        var("WAL_MEMCACHED2", "127.0.0.1:19212"),
        var("WAL_MEMCACHED3", "127.0.0.1:19213"),
    ]
}

/// One region's writer, in-process.
#[derive(Debug)]
pub struct TestWriter {
    pub region: String,
    pub address: SocketAddr,
    pub memcached: String,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestWriter {
    /// A writer for `region` on any free port, applying cache entries to `memcached`.
    pub async fn start(region: &str, memcached: &str) -> Self {
        Self::start_at(region, memcached, "127.0.0.1:0".parse().unwrap()).await
    }

    /// Like [`TestWriter::start`], on `address` (a restarted writer keeps its address).
    pub async fn start_at(region: &str, memcached: &str, address: SocketAddr) -> Self {
        Self::launch(region, memcached, address, |_| {}).await
    }

    /// Like [`TestWriter::start`], with `adjust` applied to its options (TLS, say).
    pub async fn start_with(
        region: &str,
        memcached: &str,
        adjust: impl FnOnce(&mut WriterOptions),
    ) -> Self {
        Self::launch(region, memcached, "127.0.0.1:0".parse().unwrap(), adjust).await
    }

    async fn launch(
        region: &str,
        memcached: &str,
        address: SocketAddr,
        adjust: impl FnOnce(&mut WriterOptions),
    ) -> Self {
        let mut options = WriterOptions::for_local_stack(region, vec![memcached.to_owned()]);
        adjust(&mut options);
        let listener = TcpListener::bind(address)
            .await
            .unwrap_or_else(|e| panic!("binding a writer on {address}: {e}"));
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(wal_writer::service::serve(
            options
                .settings()
                .expect("the local stack's writer settings"),
            listener,
            async {
                let _ = stopped.await;
            },
        ));
        Self {
            region: region.to_owned(),
            address,
            memcached: memcached.to_owned(),
            stop: Some(stop),
            server: Some(server),
        }
    }

    /// The region's entry in a region target's `regions`.
    pub fn destination(&self) -> String {
        format!(r#""{}": {{"writer": "{}"}}"#, self.region, self.address)
    }

    /// Stops serving (calls in progress are answered) and waits until it has.
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.unwrap().unwrap();
        }
    }
}

/// A region target (namespace-config JSON) replicating to `writers`.
pub fn region_target(writers: &[&TestWriter]) -> String {
    let regions: Vec<String> = writers.iter().map(|w| w.destination()).collect();
    format!(
        r#"{{"kind": "region", "settings": {{"regions": {{{}}}}}}}"#,
        regions.join(", ")
    )
}

/// A cache target's payload setting `key` to `value`.
pub fn cache_set(key: &str, value: &str) -> String {
    format!(r#"{{"set": {{"key": "{key}", "value": "{value}"}}}}"#)
}

/// A cache target's payload deleting `key`.
pub fn cache_delete(key: &str) -> String {
    format!(r#"{{"delete": {{"key": "{key}"}}}}"#)
}

/// A write of `payload` with partition key `key`, so a key's writes keep their order.
pub fn keyed(namespace: &str, key: &str, payload: &str) -> wal_proto::v1::WriteToLogRequest {
    wal_proto::v1::WriteToLogRequest {
        key: key.to_owned(),
        ..crate::write(namespace, payload.as_bytes())
    }
}

/// What the memcached at `cache` holds under `key`: the value, or `None` for a miss.
pub async fn cached(cache: &AsyncMetaClient, key: &str) -> Option<String> {
    let got = cache.get(key).send().await.unwrap();
    match (got.status, got.value) {
        (GetStatus::Hit, Some(value)) => Some(String::from_utf8(value).unwrap()),
        _ => None,
    }
}

/// Waits (up to two minutes) until the memcached at `cache_at` holds exactly `expected`: a value
/// per key, `None` for a key that must be absent.
pub async fn cache_converges(cache_at: &str, expected: &BTreeMap<String, Option<String>>) {
    let cache = AsyncMetaClient::connect(cache_at).await.unwrap();
    let what = format!("the cache at {cache_at} holding the source's last writes");
    crate::eventually(Duration::from_secs(120), &what, || async {
        for (key, value) in expected {
            if cached(&cache, key).await != *value {
                return None;
            }
        }
        Some(())
    })
    .await;
}

/// How many keys of `expected` the memcached at `cache_at` does not hold as expected now: a
/// crash test's proof that its kill left work outstanding (none would test no recovery).
pub async fn cache_outstanding(
    cache_at: &str,
    expected: &BTreeMap<String, Option<String>>,
) -> usize {
    let cache = AsyncMetaClient::connect(cache_at).await.unwrap();
    let mut outstanding = 0;
    for (key, value) in expected {
        if cached(&cache, key).await != *value {
            outstanding += 1;
        }
    }
    outstanding
}

/// One round of [`write_cache_rounds_until`]: every key `{prefix}-{k}` set to `v{round}`,
/// recorded in `expected`.
async fn write_round(
    client: &wal_proto::v1::write_ahead_log_client::WriteAheadLogClient<tonic::transport::Channel>,
    namespace: &str,
    prefix: &str,
    keys: usize,
    round: usize,
    expected: &mut BTreeMap<String, Option<String>>,
) {
    let value = format!("v{round}");
    let writes = (0..keys)
        .map(|k| {
            let key = format!("{prefix}-{k}");
            expected.insert(key.clone(), Some(value.clone()));
            keyed(namespace, &key, &cache_set(&key, &value))
        })
        .collect();
    crate::write_all_durably(client, writes, 500, 2).await;
}

/// Writes `keys` keys (`{prefix}-{k}`) as cache sets through `client`, round after round (`v0`,
/// `v1`, ...; each round stored before the next begins, so each key's writes have one order)
/// until `stop` is set, and one round more: writes that go on before, while and after whatever
/// the caller does meanwhile (a kill). Returns each key's last value, as [`cache_converges`]
/// takes it.
pub async fn write_cache_rounds_until(
    client: &wal_proto::v1::write_ahead_log_client::WriteAheadLogClient<tonic::transport::Channel>,
    namespace: &str,
    prefix: &str,
    keys: usize,
    stop: &std::sync::atomic::AtomicBool,
) -> BTreeMap<String, Option<String>> {
    let mut expected = BTreeMap::new();
    for round in 0.. {
        let last = stop.load(std::sync::atomic::Ordering::Relaxed);
        write_round(client, namespace, prefix, keys, round, &mut expected).await;
        if last {
            break;
        }
    }
    expected
}
