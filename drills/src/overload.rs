//! overload: namespace A, limited to `rate` writes a second, is offered three times that (open
//! loop: a write every 1/(3 x rate) s whatever the answers), while namespace B keeps a steady
//! closed-loop load through the same producer. A's surplus must be shed with RESOURCE_EXHAUSTED
//! (nothing stored), the producer's memory must stay bounded, and B's p99 and error count are
//! printed for a phase without the overload and one with it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tonic::transport::Channel;
use wal_namespaces::Backend;
use wal_testkit::measure::percentile;
use wal_testkit::{Upstream, namespace_json};

use crate::load::{
    Answer, Answers, Applied, Load, Outcome, Payload, namespace_dir, peak_mib, send, settle,
};
use crate::processes::Processes;
use crate::table::Row;

/// How much the producer's peak RSS may grow under the overload, in MiB.
const RSS_GROWTH_MIB: f64 = 64.0;

/// Writes of A at once, at most: beyond it the client itself would be the bottleneck.
const MOST_IN_FLIGHT: usize = 2_048;

/// B's errors: every answer but TRUE.
fn errors(answers: &Answers) -> usize {
    answers.count(Answer::False)
        + answers.count(Answer::Unknown)
        + answers.count(Answer::Shed)
        + answers.count(Answer::Refused)
}

/// What B saw and the producer held over one phase.
struct Phase {
    /// B's latencies in the phase, in ms.
    latencies: Vec<f64>,
    /// B's errors in the phase.
    errors: usize,
    /// The producer's peak RSS by the phase's end, in MiB.
    rss: f64,
}

impl Phase {
    /// The phase just over: B's latencies since the last phase, its errors beyond `before`,
    /// the producer's peak RSS.
    fn measure(b: &Answers, processes: &Processes, before: usize) -> Self {
        Self {
            latencies: b.take_latencies(),
            errors: errors(b) - before,
            rss: peak_mib(processes.producer_pid()),
        }
    }
}

/// A's writes, offered at three times its limit.
struct Offered {
    answers: Arc<Answers>,
    /// How long the offer took, its last answers included.
    took: Duration,
    /// The writes the drill could not send: [`MOST_IN_FLIGHT`] were in flight at their time.
    not_sent: usize,
}

/// Offers namespace `a` three times its `rate` for `phase`, open loop (a write every
/// 1/(3 x rate) s whatever the answers), and waits for every answer.
async fn offer(
    channel: &Channel,
    a: &str,
    payload: Payload,
    rate: u32,
    phase: Duration,
) -> Offered {
    let answers_a = Arc::new(Answers::default());
    let in_flight = Arc::new(Semaphore::new(MOST_IN_FLIGHT));
    let mut tick = tokio::time::interval(Duration::from_secs(1) / (3 * rate));
    let started = Instant::now();
    let mut n = 0u64;
    let mut not_sent = 0usize;
    while started.elapsed() < phase {
        tick.tick().await;
        let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else {
            not_sent += 1;
            continue;
        };
        let id = format!("overload-a-{n}");
        n += 1;
        let (channel, answers, a) = (channel.clone(), Arc::clone(&answers_a), a.to_owned());
        let payload = payload(&id);
        tokio::spawn(async move {
            send(channel, &a, id, payload, &answers).await;
            drop(permit);
        });
    }
    let _ = in_flight.acquire_many(MOST_IN_FLIGHT as u32).await;
    Offered {
        answers: answers_a,
        took: started.elapsed(),
        not_sent,
    }
}

pub async fn drill(rate: u32, phase: Duration) -> Row {
    let backend = Backend::Kafka;
    let applied = Applied::Http(Upstream::start(|_| 200).await);
    let limit = format!(r#""rate_limit": {{"writes_per_second": {rate}, "burst": {rate}}}"#);
    let text_a = namespace_json(backend, 2, &applied.target(), &limit);
    let text_b = namespace_json(backend, 2, &applied.target(), "");
    let a = wal_namespaces::parse(&text_a, "drill").unwrap().name;
    let b = wal_namespaces::parse(&text_b, "drill").unwrap().name;
    let processes = Processes::start(namespace_dir(&[(&a, &text_a), (&b, &text_b)])).await;
    let channel = processes.channel.read().unwrap().clone();

    // B: 2 writers, a write each every 10 ms or so.
    let load_b = Load::start(
        &b,
        "overload-b",
        2,
        Duration::from_millis(10),
        &processes.channel,
        applied.payload(),
    );
    println!("  overload: B alone for {} s", phase.as_secs());
    tokio::time::sleep(phase).await;
    let calm = Phase::measure(&load_b.answers, &processes, 0);

    println!(
        "  overload: A offered {} writes/s (3 x its limit) for {} s",
        3 * rate,
        phase.as_secs()
    );
    let offered = offer(&channel, &a, applied.payload(), rate, phase).await;
    let loaded = Phase::measure(&load_b.answers, &processes, calm.errors);
    let answers_b = load_b.stop().await;
    let answers = Answers::merged(&[&offered.answers, &answers_b]);
    let outcome = settle(&answers, &applied, Instant::now()).await;
    processes.stop();
    row(rate, phase, &offered, (calm, loaded), outcome)
}

/// The drill's row: A's writes against its limit, the producer's memory and B's answers
/// without the overload and beside it.
fn row(
    rate: u32,
    phase: Duration,
    offered: &Offered,
    (mut calm, mut loaded): (Phase, Phase),
    outcome: Outcome,
) -> Row {
    let admitted = offered.answers.count(Answer::True);
    let shed = offered.answers.count(Answer::Shed);
    let (rss_calm, rss_loaded) = (calm.rss, loaded.rss);
    let (calm_errors, loaded_errors) = (calm.errors, loaded.errors);
    let mut broken = Vec::new();
    // The limiter admits its rate and one burst; 10% more is the timing's slack.
    let most = (f64::from(rate) * offered.took.as_secs_f64() + f64::from(rate)) * 1.1;
    if admitted as f64 > most {
        broken.push(format!(
            "A was admitted {admitted} writes, more than its limit allows ({most:.0})"
        ));
    }
    // What the producer holds must not grow with what it refuses: 17,000 shed writes leaking a
    // few KiB each would pass this line.
    if rss_loaded > rss_calm + RSS_GROWTH_MIB {
        broken.push(format!(
            "the producer's peak RSS grew from {rss_calm:.0} MiB to {rss_loaded:.0} MiB under the overload"
        ));
    }
    if shed == 0 {
        broken.push("A was offered 3x its limit and nothing was shed".to_owned());
    }
    if offered.not_sent > 0 {
        broken.push(format!(
            "the drill could not send {} of A's writes (its own limit)",
            offered.not_sent
        ));
    }
    if loaded_errors > calm_errors {
        broken.push(format!(
            "B had {loaded_errors} errors under A's overload against {calm_errors} without"
        ));
    }
    Row {
        drill: "overload",
        backend: Backend::Kafka,
        faults: format!(
            "A offered {} w/s for {} s, limit {rate} w/s",
            3 * rate,
            phase.as_secs()
        ),
        outcome,
        notes: format!(
            "A admitted {admitted} ({:.0}/s), shed {shed}; producer peak RSS {rss_calm:.0} MiB before, {rss_loaded:.0} MiB after; B p99 {:.1} ms alone, {:.1} ms beside A; B errors {calm_errors} alone, {loaded_errors} beside A",
            admitted as f64 / offered.took.as_secs_f64(),
            percentile(&mut calm.latencies, 0.99),
            percentile(&mut loaded.latencies, 0.99),
        ),
        broken,
    }
}
