//! poison: entries the target always fails (HTTP 500, a retryable failure) mixed into healthy
//! traffic. Every poison entry must reach the DLQ after its attempts. Healthy throughput with
//! poison is printed beside a run without, against the goal of 0.9 (a timing on a shared machine:
//! printed, not a failure), two ways:
//!
//! - **traffic**: writers at a steady rate (healthy ids, and one poison id beside every
//!   `POISON_SHARE`th), the consumer running throughout: the healthy entries' delivered rate and
//!   their latency from write to delivery. This is what poison does to healthy traffic: a log that
//!   blocks behind a failing entry (retrying it in place, say) falls behind here.
//! - **backlog**: a backlog written first, then a consumer started and timed from the first entry
//!   applied to the last healthy one: the consumer's saturated rate. On a machine whose CPU the
//!   consumer saturates, every poison attempt (a delivery, a retry copy written and read back, a
//!   DLQ write) is work the healthy entries wait for, so this ratio is bounded by the poison's
//!   share of the work, not by blocking.

mod traffic;

use self::traffic::traffic_rounds;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

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
    /// The consumer's CPU time until the last healthy entry was applied, per healthy entry (µs).
    cpu_per_healthy_us: f64,
    answers: Arc<Answers>,
    upstream_applied: Applied,
    namespace: wal_namespaces::Namespace,
    since: Instant,
    processes: Processes,
}

/// An upstream failing every poison entry (counting the healthy ones it applies in
/// `healthy_seen`), a namespace delivering to it, and its producer.
async fn start(healthy_seen: Arc<AtomicUsize>) -> (Upstream, wal_namespaces::Namespace, Processes) {
    let upstream = Upstream::start(move |r| {
        if r.body.starts_with(b"poison-") {
            500
        } else {
            healthy_seen.fetch_add(1, Ordering::Relaxed);
            200
        }
    })
    .await;
    let text = namespace_json(Backend::Kafka, 2, &upstream.target(), POLICY);
    let namespace = wal_namespaces::parse(&text, "drill").unwrap();
    let dir = namespace_dir(&[(&namespace.name, &text)]);
    let processes = Processes::start_producer(dir, Vec::new()).await;
    (upstream, namespace, processes)
}

async fn run(healthy: usize, with_poison: bool) -> Run {
    // Counted as they arrive: cloning every request to count them would take the CPU the
    // run is measuring.
    let healthy_seen = Arc::new(AtomicUsize::new(0));
    let (upstream, namespace, mut processes) = start(Arc::clone(&healthy_seen)).await;
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
    let cpu = wal_testkit::measure::cpu_seconds_of(processes.consumer_pid());
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
        .unwrap_or_else(SystemTime::now);
    let last = times.iter().max().copied().unwrap_or(first);
    let window = last.duration_since(first).unwrap_or_default().as_secs_f64();
    let deliveries = received.iter().filter(|r| r.at <= last).count();
    Run {
        healthy_rate: times.len() as f64 / window.max(1e-3),
        delivery_rate: deliveries as f64 / window.max(1e-3),
        cpu_per_healthy_us: cpu * 1e6 / healthy_true.len().max(1) as f64,
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

/// The backlog rounds' ratios, poisoned over clean (CPU: clean over poisoned), and the last
/// poisoned run, still running, for its promises to be checked.
struct Backlog {
    healthy: Vec<f64>,
    deliveries: Vec<f64>,
    cpu: Vec<f64>,
    last: Run,
}

/// Rounds of a backlog drained, a clean run and a poisoned one each.
async fn backlog_rounds(healthy: usize, rounds: usize) -> Backlog {
    let (mut healthy_ratios, mut delivery_ratios, mut cpu_ratios) =
        (Vec::new(), Vec::new(), Vec::new());
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
        cpu_ratios.push(clean.cpu_per_healthy_us / poisoned.cpu_per_healthy_us);
        println!(
            "  poison: consumer CPU until the last healthy entry, per healthy entry: {:.1} µs vs {:.1} µs without poison",
            poisoned.cpu_per_healthy_us, clean.cpu_per_healthy_us
        );
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
    Backlog {
        healthy: healthy_ratios,
        deliveries: delivery_ratios,
        cpu: cpu_ratios,
        last: last.expect("at least one round"),
    }
}

/// How many times the upstream received each poison entry.
fn poison_attempts(applied: &Applied) -> HashMap<String, u32> {
    let mut attempts: HashMap<String, u32> = HashMap::new();
    if let Applied::Http(upstream) = applied {
        for body in upstream.bodies() {
            if body.starts_with("poison-") {
                *attempts.entry(body).or_default() += 1;
            }
        }
    }
    attempts
}

pub async fn drill(healthy: usize, rounds: usize, rate: f64, secs: f64) -> Row {
    // Steady traffic first: rounds of a clean run and a poisoned one.
    let mut traffic = traffic_rounds(rounds, rate, secs).await;
    // Rates on a shared machine swing from run to run: rounds of a clean run and a poisoned one,
    // and the medians of their ratios. The last poisoned run is also checked for its promises.
    let Backlog {
        healthy: mut healthy_ratios,
        deliveries: mut delivery_ratios,
        cpu: mut cpu_ratios,
        last: poisoned,
    } = backlog_rounds(healthy, rounds).await;
    let poison_true: HashSet<String> = poisoned
        .answers
        .with(Answer::True)
        .into_iter()
        .filter(|id| id.starts_with("poison-"))
        .collect();
    let in_dlq = dead_lettered(&poisoned.namespace, &poison_true).await;
    let attempts = poison_attempts(&poisoned.upstream_applied);
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
    let cpu = median(&mut cpu_ratios);
    let traffic_ratio = median(&mut traffic.ratios);
    let p99_with = median(&mut traffic.p99s.iter().map(|p| p.0).collect::<Vec<_>>());
    let p99_without = median(&mut traffic.p99s.iter().map(|p| p.1).collect::<Vec<_>>());
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
            "poison on the DLQ after >= {MAX_ATTEMPTS} attempts: {}/{}; healthy traffic at {rate:.0}/s, delivered with poison / without, median of {rounds}: **{traffic_ratio:.2}** (goal >= 0.9), healthy p99 write to delivery {p99_with:.0} vs {p99_without:.0} ms; a backlog drained at full speed, healthy rate with / without: {ratio:.2}, all deliveries (poison attempts too): {deliveries:.2}, consumer CPU per healthy entry without / with: {cpu:.2}",
            poison_true.len() - missing,
            poison_true.len(),
        ),
        broken,
    }
}
