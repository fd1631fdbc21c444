//! poison: entries the target always fails (HTTP 500, a retryable failure) mixed into healthy
//! traffic. Every poison entry must reach the DLQ after its attempts. The healthy entries' rate is
//! printed beside a run without poison's, against the goal of 0.9 (a timing on a shared machine:
//! printed, not a failure).
//!
//! Each run writes a backlog first (healthy ids, and in the poison run one poison id in
//! `1 / POISON_SHARE` of them), then starts a consumer and times the healthy entries from the
//! first applied to the last: the consumer's rate, not the writers'.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_testkit::measure::median;
use wal_testkit::{Upstream, kafka_log, namespace_json};

use crate::load::{Answer, Answers, Applied, body, namespace_dir, settle_where, write_all};
use crate::processes::Processes;
use crate::table::Row;

const MAX_ATTEMPTS: u32 = 3;
/// One write in this many is poison.
const POISON_SHARE: usize = 10;
const POLICY: &str = r#""retry_policy": {"max_attempts": 3, "initial_backoff_ms": 200, "multiplier": 2.0, "max_backoff_ms": 2000, "jitter": 0.2}"#;

struct Run {
    /// Healthy entries applied per second, from the first delivery to the last healthy one.
    healthy_rate: f64,
    /// Deliveries of any kind (healthy, and poison attempts) per second, over the same window.
    delivery_rate: f64,
    answers: Arc<Answers>,
    upstream_applied: Applied,
    namespace: wal_namespaces::Namespace,
    since: Instant,
    processes: Processes,
}

async fn run(healthy: usize, with_poison: bool) -> Run {
    // Counted as they arrive: cloning every request to count them would take the CPU the
    // run is measuring.
    let healthy_seen = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&healthy_seen);
    let upstream = Upstream::start(move |r| {
        if r.body.starts_with(b"poison-") {
            500
        } else {
            seen.fetch_add(1, Ordering::Relaxed);
            200
        }
    })
    .await;
    let text = namespace_json(Backend::Kafka, 2, &upstream.target(), POLICY);
    let namespace = wal_namespaces::parse(&text, "drill").unwrap();
    let dir = namespace_dir(&[(&namespace.name, &text)]);
    let mut processes = Processes::start_producer(dir, Vec::new()).await;
    let mut ids = Vec::new();
    for i in 0..healthy {
        ids.push(format!("healthy-{i}"));
        if with_poison && i % POISON_SHARE == 0 {
            ids.push(format!("poison-{i}"));
        }
    }
    let channel = processes.channel.read().unwrap().clone();
    let answers = write_all(&channel, &namespace.name, ids, body, 32).await;

    let since = Instant::now();
    processes.start_consumer();
    let healthy_true: HashSet<String> = answers
        .with(Answer::True)
        .into_iter()
        .filter(|id| id.starts_with("healthy-"))
        .collect();
    while healthy_seen.load(Ordering::Relaxed) < healthy_true.len()
        && since.elapsed() < Duration::from_secs(600)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let received = upstream.received();
    let times: Vec<_> = received
        .iter()
        .filter(|r| r.body.starts_with(b"healthy-"))
        .map(|r| r.at)
        .collect();
    let first = received
        .iter()
        .map(|r| r.at)
        .min()
        .unwrap_or_else(std::time::SystemTime::now);
    let last = times.iter().max().copied().unwrap_or(first);
    let window = last.duration_since(first).unwrap_or_default().as_secs_f64();
    let deliveries = received.iter().filter(|r| r.at <= last).count();
    Run {
        healthy_rate: times.len() as f64 / window.max(1e-3),
        delivery_rate: deliveries as f64 / window.max(1e-3),
        answers,
        upstream_applied: Applied::Http(upstream),
        namespace,
        since,
        processes,
    }
}

/// The poison ids on the namespace's DLQs, waiting up to 120 s for all of `expected`.
async fn dead_lettered(
    namespace: &wal_namespaces::Namespace,
    expected: &HashSet<String>,
) -> HashSet<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut found = HashSet::new();
        for queue in &namespace.queues {
            for entry in kafka_log(&queue.dlq).await {
                found.insert(entry.id);
            }
        }
        if expected.is_subset(&found) || Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

pub async fn drill(healthy: usize, rounds: usize) -> Row {
    // Rates on a shared machine swing from run to run: rounds of a clean run and a poisoned one,
    // and the medians of their ratios. The last poisoned run is also checked for its promises.
    let (mut healthy_ratios, mut delivery_ratios) = (Vec::new(), Vec::new());
    let mut last = None;
    for round in 1..=rounds {
        println!("  poison: round {round} of {rounds}: a run without poison ({healthy} entries)");
        let clean = run(healthy, false).await;
        clean.processes.stop();
        println!(
            "  poison: round {round} of {rounds}: a run with one poison entry in {POISON_SHARE}"
        );
        let poisoned = run(healthy, true).await;
        healthy_ratios.push(poisoned.healthy_rate / clean.healthy_rate);
        delivery_ratios.push(poisoned.delivery_rate / clean.delivery_rate);
        println!(
            "  poison: healthy {:.0}/s vs {:.0}/s without poison; all deliveries {:.0}/s vs {:.0}/s",
            poisoned.healthy_rate, clean.healthy_rate, poisoned.delivery_rate, clean.delivery_rate
        );
        if round == rounds {
            last = Some(poisoned);
        } else {
            poisoned.processes.stop();
        }
    }
    let poisoned = last.expect("at least one round");
    let poison_true: HashSet<String> = poisoned
        .answers
        .with(Answer::True)
        .into_iter()
        .filter(|id| id.starts_with("poison-"))
        .collect();
    let in_dlq = dead_lettered(&poisoned.namespace, &poison_true).await;
    let mut attempts: HashMap<String, u32> = HashMap::new();
    if let Applied::Http(upstream) = &poisoned.upstream_applied {
        for body in upstream.bodies() {
            if body.starts_with("poison-") {
                *attempts.entry(body).or_default() += 1;
            }
        }
    }
    // Only the healthy writes must be applied; the poison ones must be dead-lettered instead.
    let outcome = settle_where(
        &poisoned.answers,
        &poisoned.upstream_applied,
        poisoned.since,
        |id| id.starts_with("healthy-"),
    )
    .await;
    poisoned.processes.stop();

    let missing = poison_true.difference(&in_dlq).count();
    let too_few = poison_true
        .iter()
        .filter(|id| attempts.get(*id).copied().unwrap_or(0) < MAX_ATTEMPTS)
        .count();
    let ratio = median(&mut healthy_ratios);
    let deliveries = median(&mut delivery_ratios);
    let mut broken = Vec::new();
    if missing > 0 {
        broken.push(format!("{missing} poison entries are not on the DLQ"));
    }
    if too_few > 0 {
        broken.push(format!(
            "{too_few} poison entries were dead-lettered before {MAX_ATTEMPTS} attempts"
        ));
    }
    Row {
        drill: "poison",
        backend: Backend::Kafka,
        faults: format!("1 in {POISON_SHARE} entries fails every attempt (HTTP 500)"),
        outcome,
        notes: format!(
            "poison on the DLQ after >= {MAX_ATTEMPTS} attempts: {}/{}; healthy rate with poison / without, median of {rounds}: **{ratio:.2}** (goal >= 0.9); all deliveries (poison attempts too) with / without: {deliveries:.2}",
            poison_true.len() - missing,
            poison_true.len(),
        ),
        broken,
    }
}
