//! The delayed-deletes demo: a burst of deletes written in one go with a 60 s jitter window
//! reaches the target as a flat rate across the window, not as a spike.
//!
//! An in-process producer and consumer on the local stack deliver DEMO_ENTRIES (100,000)
//! deletes to a real HTTP server on loopback standing for the service that deletes; the demo
//! prints how many arrived in each second after the burst, as a bar chart, and writes the
//! counts to `$TMPDIR/delayed-deletes.csv` (`/tmp` by default) for plotting. Run with:
//!     scripts/stack up && cargo run --release -p wal-consumer --example delayed_deletes
//! Tunables (environment): DEMO_ENTRIES (100000), DEMO_JITTER_S (60), DEMO_BACKEND (kafka|sqs).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, SystemTime};

use wal_namespaces::Backend;
use wal_proto::v1::{Lifecycle, WriteToLogRequest};
use wal_testkit::{TestProducer, namespace_with_target, write_all_durably};
use wal_testkit::{Upstream, eventually, start_consumer};

#[tokio::main]
async fn main() {
    let entries = wal_testkit::env_u64("DEMO_ENTRIES", 100_000);
    let jitter_s = wal_testkit::env_u64("DEMO_JITTER_S", 60);
    let backend = match std::env::var("DEMO_BACKEND").as_deref() {
        Ok("sqs") => Backend::Sqs,
        _ => Backend::Kafka,
    };
    let upstream = Upstream::start(|_| 200).await;
    // The delayed-deletes persona: every delete takes the namespace's default jitter window.
    let namespace = namespace_with_target(
        backend,
        1,
        &upstream.target(),
        &format!(
            r#""rate_limit": {{"writes_per_second": 200000, "burst": 200000, "max_in_flight": 20000}},
                "delay_limits": {{"default_jitter_ms": {}}}"#,
            jitter_s * 1000
        ),
    );
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;

    println!(
        "writing {entries} deletes to namespace '{}' ({backend:?}), jitter window {jitter_s} s",
        namespace.name
    );
    let burst = SystemTime::now();
    let writes: Vec<WriteToLogRequest> = (0..entries)
        .map(|i| WriteToLogRequest {
            namespace: namespace.name.clone(),
            key: format!("object-{i}"),
            payload: format!("delete object-{i}").into_bytes(),
            lifecycle: Some(Lifecycle::default()),
            ..WriteToLogRequest::default()
        })
        .collect();
    // Eight batches at a time: 8,000 writes in flight, under the namespace's admission limit.
    write_all_durably(&producer.client, writes, 1000, 8).await;
    let wrote_in = burst.elapsed().unwrap();
    println!("burst written in {:.1} s", wrote_in.as_secs_f64());

    let limit = Duration::from_secs(jitter_s + 120);
    eventually(limit, "every delete to arrive", || async {
        (upstream.count() >= entries as usize).then_some(())
    })
    .await;
    let received = upstream.received();
    consumer.shutdown().await;
    producer.shutdown().await;

    let mut per_second = vec![0usize; usize::try_from(jitter_s).unwrap() + 30];
    for r in &received {
        let second = r.at.duration_since(burst).unwrap_or_default().as_secs() as usize;
        if let Some(count) = per_second.get_mut(second) {
            *count += 1;
        }
    }
    while per_second.last() == Some(&0) {
        per_second.pop();
    }
    let peak = per_second.iter().copied().max().unwrap_or(1).max(1);
    println!(
        "\narrivals per second after the burst (each # is {:.0} deletes)",
        peak as f64 / 60.0
    );
    for (second, count) in per_second.iter().enumerate() {
        let bar = "#".repeat(count * 60 / peak);
        println!("{second:>4} s {count:>6} {bar}");
    }
    // The window's inner seconds: from the first whole second after the burst was written
    // (deletes due before they were written arrive when they are) to the last full second.
    let first = (wrote_in.as_secs_f64().ceil() as usize).max(1);
    let window = &per_second[..per_second.len().min(usize::try_from(jitter_s).unwrap())];
    let inner = &window[first.min(window.len())..window.len().saturating_sub(1)];
    let mean = inner.iter().sum::<usize>() as f64 / inner.len().max(1) as f64;
    let spread = inner
        .iter()
        .map(|&c| (c as f64 - mean).powi(2))
        .sum::<f64>()
        / inner.len().max(1) as f64;
    println!(
        "\n{} deletes arrived; seconds {first} to {} of the window: {:.0}/s on average, min {}, max {}, coefficient of variation {:.1} %",
        received.len(),
        window.len().saturating_sub(2),
        mean,
        inner.iter().min().unwrap_or(&0),
        inner.iter().max().unwrap_or(&0),
        100.0 * spread.sqrt() / mean.max(1.0)
    );
    if let Some(peak) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_owned)
        })
    {
        println!(
            "peak resident memory of this process (producer, consumer and target): {}",
            peak.trim_start_matches("VmHWM:").trim()
        );
    }
    let csv: String = std::iter::once("second,deletes\n".to_owned())
        .chain(
            per_second
                .iter()
                .enumerate()
                .map(|(s, c)| format!("{s},{c}\n")),
        )
        .collect();
    let path = std::env::temp_dir().join("delayed-deletes.csv");
    if std::fs::write(&path, csv).is_ok() {
        println!("counts written to {}", path.display());
    }
}
