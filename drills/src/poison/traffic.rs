//! The poison drill's traffic runs: healthy writes at a steady rate, with poison beside them and
//! without, each healthy entry timed from its write to its delivery.

use tonic::transport::Channel;
use wal_testkit::Received;

use super::*;

/// A run of steady traffic: healthy writes at `rate` a second for `secs`, and with poison one
/// poison write beside every `POISON_SHARE`th healthy one.
struct Steady {
    /// Healthy entries delivered per second, from the first to the last.
    healthy_rate: f64,
    /// The healthy entries' latency from write to delivery, p50 and p99, in ms.
    p50_ms: f64,
    p99_ms: f64,
}

/// One run of steady traffic, on a namespace and processes of its own, stopped at its end.
async fn steady(rate: f64, secs: f64, with_poison: bool) -> Steady {
    let (upstream, namespace, mut processes) = start(Arc::default()).await;
    processes.start_consumer();
    let channel = processes.channel.read().unwrap().clone();
    warm_up(&channel, &namespace.name, &upstream).await;
    let (answers, sent) = write_steady(&channel, &namespace.name, (rate, secs), with_poison).await;
    let expected = answers
        .with(Answer::True)
        .into_iter()
        .filter(|id| id.starts_with("healthy-"))
        .count();
    let healthy = healthy_received(&upstream, expected).await;
    processes.stop();
    Steady::of(&healthy, &sent.lock().unwrap())
}

/// When each write was sent, by id.
type Sent = Arc<std::sync::Mutex<HashMap<String, SystemTime>>>;

/// Waits (up to 60 s) for the consumer to join its group: a write it delivers says it is
/// reading.
async fn warm_up(channel: &Channel, namespace: &str, upstream: &Upstream) {
    let warm = Answers::default();
    let id = "warm-up";
    crate::load::send(channel.clone(), namespace, id.into(), body(id), &warm).await;
    let ready = Instant::now() + Duration::from_secs(60);
    while !upstream.received().iter().any(|r| r.body == b"warm-up") && Instant::now() < ready {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Writes healthy ids at `rate` a second for `secs`, and with poison a poison id beside every
/// `POISON_SHARE`th, open loop (each write at its scheduled time, whatever the answers before
/// it took, at most 1,024 at once): their answers, and when each was sent.
async fn write_steady(
    channel: &Channel,
    namespace: &str,
    (rate, secs): (f64, f64),
    with_poison: bool,
) -> (Arc<Answers>, Sent) {
    let answers = Arc::new(Answers::default());
    let sent: Sent = Arc::default();
    let count = (rate * secs) as usize;
    let started = Instant::now();
    let bound = Arc::new(tokio::sync::Semaphore::new(1024));
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        tokio::time::sleep_until((started + Duration::from_secs_f64(i as f64 / rate)).into()).await;
        let mut ids = vec![format!("healthy-{i}")];
        if with_poison && i % POISON_SHARE == 0 {
            ids.push(format!("poison-{i}"));
        }
        for id in ids {
            let permit = Arc::clone(&bound).acquire_owned().await.unwrap();
            let (channel, answers, sent) =
                (channel.clone(), Arc::clone(&answers), Arc::clone(&sent));
            let name = namespace.to_owned();
            tasks.push(tokio::spawn(async move {
                sent.lock().unwrap().insert(id.clone(), SystemTime::now());
                let bytes = body(&id);
                crate::load::send(channel, &name, id, bytes, &answers).await;
                drop(permit);
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    (answers, sent)
}

/// The healthy entries the upstream received, once `expected` of them have (or 120 s passed).
async fn healthy_received(upstream: &Upstream, expected: usize) -> Vec<Received> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let received: Vec<_> = upstream
            .received()
            .into_iter()
            .filter(|r| r.body.starts_with(b"healthy-"))
            .collect();
        if received.len() >= expected || Instant::now() > deadline {
            break received;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl Steady {
    /// The run's figures from the `healthy` entries delivered and when each write was `sent`.
    fn of(healthy: &[Received], sent: &HashMap<String, SystemTime>) -> Self {
        let mut latencies: Vec<f64> = healthy
            .iter()
            .filter_map(|r| {
                let at = sent.get(std::str::from_utf8(&r.body).ok()?)?;
                Some(r.at.duration_since(*at).unwrap_or_default().as_secs_f64() * 1e3)
            })
            .collect();
        latencies.sort_by(f64::total_cmp);
        let quantile = |q: f64| {
            latencies
                .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
                .copied()
                .unwrap_or(f64::NAN)
        };
        let times: Vec<_> = healthy.iter().map(|r| r.at).collect();
        let window = match (times.iter().min(), times.iter().max()) {
            (Some(first), Some(last)) => last
                .duration_since(*first)
                .unwrap_or_default()
                .as_secs_f64(),
            _ => 0.0,
        };
        Self {
            healthy_rate: healthy.len() as f64 / window.max(1e-3),
            p50_ms: quantile(0.5),
            p99_ms: quantile(0.99),
        }
    }
}

/// The traffic rounds: each round's healthy rate delivered with poison over without, and the
/// healthy p99 write to delivery with poison and without, in ms.
pub(super) struct Traffic {
    pub(super) ratios: Vec<f64>,
    pub(super) p99s: Vec<(f64, f64)>,
}

/// Rounds of steady traffic, a clean run and a poisoned one each.
pub(super) async fn traffic_rounds(rounds: usize, rate: f64, secs: f64) -> Traffic {
    let (mut ratios, mut p99s) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        println!(
            "  poison: round {round} of {rounds}: traffic at {rate:.0} writes/s for {secs:.0} s, without poison and with"
        );
        let clean = steady(rate, secs, false).await;
        let poisoned = steady(rate, secs, true).await;
        println!(
            "  poison: healthy delivered {:.0}/s vs {:.0}/s without poison; healthy write-to-delivery p50 {:.1} vs {:.1} ms, p99 {:.1} vs {:.1} ms",
            poisoned.healthy_rate,
            clean.healthy_rate,
            poisoned.p50_ms,
            clean.p50_ms,
            poisoned.p99_ms,
            clean.p99_ms
        );
        ratios.push(poisoned.healthy_rate / clean.healthy_rate);
        p99s.push((poisoned.p99_ms, clean.p99_ms));
    }
    Traffic { ratios, p99s }
}
