//! What waiting costs the consumer: its resident memory with a thousand entries delayed by a day,
//! then with a hundred times as many. Far entries wait on the broker (SQS delayed messages,
//! Kafka delay tiers), so the two figures should be about the same.
//!
//! A real `wal-consumer` process reads one namespace; an in-process producer writes
//! PARKED_SMALL (1,000) entries delayed by a day, and once the consumer has parked them all
//! (`wal_consumer_parks_total` on its metrics endpoint) and settled for a few seconds, the
//! process's VmRSS is read; then up to PARKED_LARGE (100,000) in all, and again. Run with:
//!     scripts/stack up && cargo bench -p wal-consumer --bench parked_memory
//! Tunables (environment): PARKED_SMALL, PARKED_LARGE, PARKED_BACKENDS (kafka,sqs).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Child;
use std::time::Duration;

use wal_namespaces::Backend;
use wal_proto::v1::{Lifecycle, WriteToLogRequest};
use wal_testkit::{TestProducer, namespace_json, unique, write_all_durably};
use wal_testkit::{Upstream, eventually};

const DAY_MILLIS: i64 = 86_400_000;
/// How long the consumer is left alone before its memory is read, once everything is parked.
const SETTLE: Duration = Duration::from_secs(5);

fn free_port() -> u16 {
    wal_testkit::refusing_address().port()
}

/// The sum of one counter over all its label sets, from the consumer's metrics page.
async fn counter(metrics_port: u16, name: &str) -> Option<f64> {
    let page = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    Some(
        page.lines()
            .filter(|line| line.starts_with(name))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum(),
    )
}

fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Writes entries `from..to` delayed by a day, waits until the consumer parked them all, lets it
/// settle and returns its resident memory in KiB.
async fn park(
    producer: &TestProducer,
    namespace: &str,
    consumer: &Child,
    metrics_port: u16,
    from: u64,
    to: u64,
) -> u64 {
    let writes: Vec<WriteToLogRequest> = (from..to)
        .map(|i| WriteToLogRequest {
            namespace: namespace.to_owned(),
            key: format!("k{i}"),
            payload: b"delete".to_vec(),
            lifecycle: Some(Lifecycle {
                delay_millis: DAY_MILLIS,
                ..Lifecycle::default()
            }),
            ..WriteToLogRequest::default()
        })
        .collect();
    // 750 writes in flight, under the namespace's default admission limit of 1,024.
    write_all_durably(&producer.client, writes, 250, 3).await;
    let total = to as f64;
    eventually(
        Duration::from_secs(600),
        "every entry to be parked",
        || async {
            let parked = counter(metrics_port, "wal_consumer_parks_total").await?;
            (parked >= total).then_some(())
        },
    )
    .await;
    tokio::time::sleep(SETTLE).await;
    resident_kib(consumer.id())
}

async fn measure(backend: Backend, small: u64, large: u64) -> (u64, u64) {
    let upstream = Upstream::start(|_| 200).await;
    let config = namespace_json(
        backend,
        1,
        &upstream.target(),
        r#""rate_limit": {"writes_per_second": 100000, "burst": 100000}"#,
    );
    let namespace = wal_namespaces::parse(&config, "bench").unwrap();
    let dir = std::env::temp_dir().join(unique("parked-namespaces"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{}.json", namespace.name)), &config).unwrap();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let metrics_port = free_port();
    let mut consumer = wal_testkit::consumer_process(&dir, &format!("127.0.0.1:{metrics_port}"));
    let with_small = park(
        &producer,
        &namespace.name,
        &consumer,
        metrics_port,
        0,
        small,
    )
    .await;
    let with_large = park(
        &producer,
        &namespace.name,
        &consumer,
        metrics_port,
        small,
        large,
    )
    .await;
    assert_eq!(upstream.count(), 0, "nothing is due for a day");
    consumer.kill().unwrap();
    consumer.wait().unwrap();
    producer.shutdown().await;
    (with_small, with_large)
}

#[tokio::main]
async fn main() {
    let small = wal_testkit::env_u64("PARKED_SMALL", 1_000);
    let large = wal_testkit::env_u64("PARKED_LARGE", 100_000).max(small);
    let backends = std::env::var("PARKED_BACKENDS").unwrap_or_else(|_| "kafka,sqs".to_owned());
    println!("consumer resident memory with entries delayed by a day, parked on the broker");
    println!(
        "{:<8} {:>16} {:>16} {:>8}",
        "backend",
        format!("{small} parked"),
        format!("{large} parked"),
        "ratio"
    );
    for name in backends.split(',') {
        let backend = match name.trim() {
            "kafka" => Backend::Kafka,
            "sqs" => Backend::Sqs,
            other => panic!("PARKED_BACKENDS names '{other}'; expected kafka or sqs"),
        };
        let (with_small, with_large) = measure(backend, small, large).await;
        println!(
            "{:<8} {:>13} KiB {:>13} KiB {:>8.2}",
            name.trim(),
            with_small,
            with_large,
            with_large as f64 / with_small as f64
        );
    }
}
