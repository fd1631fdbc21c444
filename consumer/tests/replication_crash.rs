//! A replicating consumer killed with SIGKILL mid-stream (writes still coming): restarted, it
//! replays from its regions' committed positions, and every destination ends equal to the
//! source's last write of each key (a key's writes are applied again in their order, so a replay
//! cannot leave an older value behind).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use memcache::exp::AsyncMetaClient;
use wal_namespaces::Backend;
use wal_testkit::{
    TestProducer, TestWriter, cache_converges, cache_outstanding, cached, eventually,
    namespace_json, region_caches, region_target, unique, write_cache_rounds_until,
};

const KEYS: usize = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicating_consumer_killed_mid_stream_leaves_every_region_equal_to_the_source() {
    let caches = region_caches();
    let mut writers = [
        TestWriter::start("regionb", &caches[0]).await,
        TestWriter::start("regionc", &caches[1]).await,
    ];
    let unlimited = r#""rate_limit": {"writes_per_second": 100000, "burst": 100000}"#;
    let config = namespace_json(
        Backend::Kafka,
        1,
        &region_target(&[&writers[0], &writers[1]]),
        unlimited,
    );
    let namespace = wal_namespaces::parse(&config, "test").unwrap();
    let name = namespace.name.clone();
    let dir = std::env::temp_dir().join(unique("replication-crash"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), &config).unwrap();
    let mut producer = TestProducer::start(vec![namespace]).await;

    // Writes go on while the consumer dies: the kill lands mid-stream however fast it applies.
    let prefix = unique("crash");
    let killed = std::sync::atomic::AtomicBool::new(false);
    let writing = write_cache_rounds_until(&producer.client, &name, &prefix, KEYS, &killed);
    let mut first = wal_testkit::consumer_process(&dir, "127.0.0.1:0");
    let cache_b = AsyncMetaClient::connect(caches[0].as_str()).await.unwrap();
    let killing = async {
        eventually(
            Duration::from_secs(120),
            "the first consumer to replicate some entries",
            || async { cached(&cache_b, &format!("{prefix}-0")).await.map(drop) },
        )
        .await;
        first.kill().unwrap(); // SIGKILL: no commit, no cleanup.
        first.wait().unwrap();
        killed.store(true, std::sync::atomic::Ordering::Relaxed);
    };
    let (expected, ()) = tokio::join!(writing, killing);
    // The regions are behind the source while no consumer runs: the kill left work to recover.
    for cache in &caches[..2] {
        let outstanding = cache_outstanding(cache, &expected).await;
        assert!(
            outstanding > 0,
            "{cache} held every write before the restart: the kill tested no recovery"
        );
    }

    let mut second = wal_testkit::consumer_process(&dir, "127.0.0.1:0");
    for cache in &caches[..2] {
        cache_converges(cache, &expected).await;
    }
    second.kill().unwrap();
    second.wait().unwrap();
    producer.shutdown().await;
    for writer in &mut writers {
        writer.stop().await;
    }
    let _ = std::fs::remove_dir_all(dir);
}
