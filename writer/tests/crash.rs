//! A region's writer killed with SIGKILL mid-stream: the sending consumer holds the region's
//! entries in place while it is away (its calls fail; nothing is acknowledged without its
//! answer), and once a new writer answers on the same address the region ends equal to the
//! source.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use memcache::exp::AsyncMetaClient;
use wal_testkit::{
    Backend, TestProducer, cache_converges, cache_outstanding, cached, cargo_bin, eventually,
    namespace_with_target, region_caches, start_consumer, unique, write_cache_rounds_until,
};

const KEYS: usize = 1_000;

/// A `wal-writer` process for `region` on `address`, applying to `memcached`.
fn writer_process(region: &str, address: SocketAddr, memcached: &str) -> Child {
    Command::new(cargo_bin("wal-writer"))
        .env("WAL_WRITER_LISTEN", address.to_string())
        .env("WAL_WRITER_METRICS_LISTEN", "127.0.0.1:0")
        .env("WAL_REGION", region)
        .env("WAL_MEMCACHED", memcached)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start wal-writer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_mid_stream_loses_nothing_once_it_is_back() {
    let cache_at = region_caches()[0].clone();
    let address = wal_testkit::refusing_address();
    let mut writer = writer_process("regionb", address, &cache_at);
    let target = format!(
        r#"{{"kind": "region", "settings": {{"regions": {{"regionb": {{"writer": "{address}"}}}}}}}}"#
    );
    let unlimited = r#""rate_limit": {"writes_per_second": 100000, "burst": 100000}"#;
    let namespace = namespace_with_target(Backend::Kafka, 1, &target, unlimited);
    let name = namespace.name.clone();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let prefix = unique("writer-crash");
    let consumer = start_consumer(vec![namespace]).await;

    // Writes go on while the writer dies: the kill lands mid-stream however fast it applies.
    let killed = std::sync::atomic::AtomicBool::new(false);
    let writing = write_cache_rounds_until(&producer.client, &name, &prefix, KEYS, &killed);
    let cache = AsyncMetaClient::connect(cache_at.as_str()).await.unwrap();
    let killing = async {
        eventually(
            Duration::from_secs(120),
            "the writer to apply some entries",
            || async { cached(&cache, &format!("{prefix}-0")).await.map(drop) },
        )
        .await;
        writer.kill().unwrap(); // SIGKILL mid-stream.
        writer.wait().unwrap();
        killed.store(true, Ordering::Relaxed);
    };
    let (expected, ()) = tokio::join!(writing, killing);
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The region is behind the source while its writer is away: the kill left work to recover.
    let outstanding = cache_outstanding(&cache_at, &expected).await;
    assert!(
        outstanding > 0,
        "the region held every write before the new writer started: the kill tested no recovery"
    );

    // Held in place for the region's absence, none given up on.
    let stats = consumer.deliverer().stats();
    eventually(
        Duration::from_secs(30),
        "the consumer holding entries for the absent writer",
        || async { (stats.held.load(Ordering::Relaxed) > 0).then_some(()) },
    )
    .await;
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 0);

    let mut back = writer_process("regionb", address, &cache_at);
    cache_converges(&cache_at, &expected).await;
    assert_eq!(
        stats.dead_lettered.load(Ordering::Relaxed),
        0,
        "an entry was dead-lettered for the writer's absence"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    back.kill().unwrap();
    back.wait().unwrap();
}
