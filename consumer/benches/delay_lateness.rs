//! How late delayed entries arrive, on Kafka and on SQS side by side in one run, against a
//! baseline: a plain tokio timer in one process firing the same HTTP POST at each deliver-at
//! (what no durable system can beat, as it keeps nothing and survives nothing).
//!
//! Each side gets BENCH_ENTRIES entries (10,000) with delays drawn uniformly from 1 to 120 s
//! (fixed seed), written through an in-process producer in batches and delivered by an
//! in-process consumer to a real HTTP server on loopback, which records when each arrived. The
//! http target sends the entry's deliver-at, so lateness is arrival minus deliver-at, measured
//! on one clock. Waits over the hold limit take the real way: SQS delay steps, Kafka delay tiers.
//!
//! The sides run one after another, and every delay counts from a common start a head start
//! (BENCH_HEAD_S, 20 s) ahead, set as the entries' original write time: the writes are done
//! before the first entry comes due, so what is measured is delivery on an otherwise idle
//! machine, not the write burst competing with it for two cores.
//! Run with:
//!     scripts/stack up && cargo bench -p wal-consumer --bench delay_lateness
//! Tunables (environment): BENCH_ENTRIES (10000), BENCH_MAX_DELAY_S (120), BENCH_HEAD_S (20),
//! BENCH_SIDES (kafka,sqs,timer).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use wal_namespaces::Backend;
use wal_proto::v1::{Lifecycle, WriteToLogRequest};
use wal_testkit::{Received, Upstream, start_consumer_with};
use wal_testkit::{TestProducer, namespace_with_target, write_all_durably};

fn now_micros() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros(),
    )
    .unwrap()
}

/// Lateness figures of one side, in milliseconds.
#[derive(Debug)]
struct Lateness {
    p50: f64,
    p99: f64,
    max: f64,
    early: usize,
    delivered: usize,
    duplicates: usize,
}

/// The first arrival of each entry, against its deliver-at.
fn lateness(received: &[Received]) -> Lateness {
    let mut first: BTreeMap<&str, f64> = BTreeMap::new();
    let mut early = 0;
    for r in received {
        let due: i64 = r.headers["x-wal-deliver-at-micros"].parse().unwrap();
        let arrived = i64::try_from(r.at.duration_since(UNIX_EPOCH).unwrap().as_micros()).unwrap();
        if arrived < due {
            early += 1;
        }
        first
            .entry(r.headers["idempotency-key"].as_str())
            .or_insert((arrived - due) as f64 / 1000.0);
    }
    let mut late: Vec<f64> = first.values().copied().collect();
    late.sort_by(f64::total_cmp);
    let at = |q: f64| late[((late.len() as f64 * q) as usize).min(late.len() - 1)];
    Lateness {
        p50: at(0.50),
        p99: at(0.99),
        max: late.last().copied().unwrap_or(0.0),
        early,
        delivered: late.len(),
        duplicates: received.len() - late.len(),
    }
}

fn delays(entries: u64, max_delay_s: u64, seed: u64) -> Vec<i64> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..entries)
        .map(|_| rng.random_range(1_000..=i64::try_from(max_delay_s * 1000).unwrap()))
        .collect()
}

/// Writes every entry through the platform and waits until each has arrived. Each is due
/// `head` plus its delay after now, however long the writes take.
async fn platform(backend: Backend, delays: Vec<i64>, head: Duration) -> Lateness {
    let start = now_micros();
    let head_millis = i64::try_from(head.as_millis()).unwrap();
    let upstream = Upstream::start(|_| 200).await;
    let namespace = namespace_with_target(
        backend,
        1,
        &upstream.target(),
        r#""rate_limit": {"writes_per_second": 100000, "burst": 100000}"#,
    );
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer_with(vec![namespace.clone()], |_| {}).await;
    let total = delays.len();
    let writes: Vec<WriteToLogRequest> = delays
        .into_iter()
        .enumerate()
        .map(|(i, delay_millis)| WriteToLogRequest {
            namespace: namespace.name.clone(),
            key: format!("k{i}"),
            payload: b"delete".to_vec(),
            lifecycle: Some(Lifecycle {
                delay_millis: head_millis + delay_millis,
                original_write_time_micros: start,
                ..Lifecycle::default()
            }),
            ..WriteToLogRequest::default()
        })
        .collect();
    write_all_durably(&producer.client, writes, 500, 1).await;
    let wrote = Duration::from_micros(u64::try_from(now_micros() - start).unwrap());
    println!(
        "{backend:?}: {total} entries written in {:.1} s{}",
        wrote.as_secs_f64(),
        if wrote > head {
            " (past the head start: the first ones came due during the writes)"
        } else {
            ""
        }
    );
    wait_for(&upstream, total).await;
    consumer.shutdown().await;
    producer.shutdown().await;
    lateness(&upstream.received())
}

/// The baseline: a timer per entry, posting the same request to the same kind of server.
async fn timers(delays: Vec<i64>, head: Duration) -> Lateness {
    let upstream = Upstream::start(|_| 200).await;
    let client = Arc::new(reqwest::Client::new());
    let total = delays.len();
    let start = tokio::time::Instant::now() + head;
    let written = now_micros() + i64::try_from(head.as_micros()).unwrap();
    for (i, delay_millis) in delays.into_iter().enumerate() {
        let client = Arc::clone(&client);
        let url = upstream.url.clone();
        tokio::spawn(async move {
            let delay = Duration::from_millis(u64::try_from(delay_millis).unwrap());
            tokio::time::sleep_until(start + delay).await;
            let due = written + delay_millis * 1000;
            let _ = client
                .post(url)
                .header("idempotency-key", format!("timer-{i}"))
                .header("x-wal-deliver-at-micros", due.to_string())
                .body("delete")
                .send()
                .await;
        });
    }
    wait_for(&upstream, total).await;
    lateness(&upstream.received())
}

async fn wait_for(upstream: &Upstream, total: usize) {
    let max = Duration::from_secs(wal_testkit::env_u64("BENCH_MAX_DELAY_S", 120) + 120);
    wal_testkit::eventually(max, "every entry to arrive", || async {
        // Counting first: the distinct ids are worth collecting only once enough arrived.
        if upstream.count() < total {
            return None;
        }
        let mut ids: Vec<String> = upstream
            .received()
            .iter()
            .map(|r| r.headers["idempotency-key"].clone())
            .collect();
        ids.sort();
        ids.dedup();
        (ids.len() >= total).then_some(())
    })
    .await;
}

#[tokio::main]
async fn main() {
    let entries = wal_testkit::env_u64("BENCH_ENTRIES", 10_000);
    let max_delay_s = wal_testkit::env_u64("BENCH_MAX_DELAY_S", 120);
    let head = Duration::from_secs(wal_testkit::env_u64("BENCH_HEAD_S", 20));
    let sides = std::env::var("BENCH_SIDES").unwrap_or_else(|_| "kafka,sqs,timer".to_owned());
    println!(
        "delay lateness: {entries} entries per side, delays uniform over 1-{max_delay_s} s after a {} s head start; sides run one after another",
        head.as_secs()
    );
    let mut results = Vec::new();
    for side in sides.split(',') {
        let lateness = match side.trim() {
            "kafka" => platform(Backend::Kafka, delays(entries, max_delay_s, 1), head).await,
            "sqs" => platform(Backend::Sqs, delays(entries, max_delay_s, 2), head).await,
            "timer" => timers(delays(entries, max_delay_s, 3), head).await,
            other => panic!("BENCH_SIDES names '{other}'; expected kafka, sqs or timer"),
        };
        results.push((side.trim(), lateness));
    }
    println!(
        "{:<16} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10}",
        "side", "p50 ms", "p99 ms", "max ms", "early", "delivered", "duplicates"
    );
    for (name, l) in &results {
        println!(
            "{name:<16} {:>10.1} {:>10.1} {:>10.1} {:>7} {:>10} {:>10}",
            l.p50, l.p99, l.max, l.early, l.delivered, l.duplicates
        );
    }
    if let Some((_, baseline)) = results.iter().find(|(name, _)| *name == "timer") {
        for (name, l) in results.iter().filter(|(name, _)| *name != "timer") {
            println!(
                "{name}: p99 {:.1} ms over the timer baseline's {:.1} ms",
                l.p99 - baseline.p99,
                baseline.p99
            );
        }
    }
}
