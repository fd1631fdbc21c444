//! cluster-isr: two brokers of the clustered stack's three killed at once, below the topics'
//! `min.insync.replicas` (2). A write answered TRUE promises two copies, so while one broker is
//! left no write may be answered TRUE: writes answer UNKNOWN or FALSE (or nothing), never TRUE.
//! When one broker returns (two copies possible again), writes are TRUE again: the drill prints
//! how soon after it answers. The third broker returns after.
//!
//! The writers here do not retry, so each answer is the platform's own; each write's answer is
//! timed, and a TRUE answered more than [`GRACE`] after the kill is a broken promise (a write
//! the brokers acknowledged just before the kill may be answered just after it).
//!
//! Conditions: with two of its three controllers gone, the KRaft quorum is lost too, so the
//! partitions keep the leaders and the in-sync sets they had; acks=all then waits for followers
//! that are dead, and the producer answers UNKNOWN at its write timeout.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wal_namespaces::Backend;
use wal_testkit::stack;

use crate::cluster::{Fleet, not_on_the_clustered_stack, on_the_clustered_stack};
use crate::load::{Answer, Answers, Applied, Outcome, Payload, namespace_dir, send, settle};
use crate::table::Row;

/// How long after the kill a TRUE may still be answered: one acknowledged just before it.
const GRACE: Duration = Duration::from_secs(1);

/// Each write's answer and when it came, for the windows.
type Timeline = Arc<Mutex<Vec<(Instant, Answer)>>>;

async fn stack_blocking(action: &'static str, service: &'static str) {
    tokio::task::spawn_blocking(move || stack(action, service))
        .await
        .unwrap();
}

/// Writers that do not retry, round robin over the producers, each answer timed.
struct Unretried {
    answers: Arc<Answers>,
    timeline: Timeline,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Unretried {
    /// Starts `writers` writers on `namespace`, each pausing 20 ms after each answer.
    fn start(fleet: &Fleet, namespace: &str, writers: usize, payload: Payload) -> Self {
        let answers = Arc::new(Answers::default());
        let timeline: Timeline = Arc::default();
        let stop = CancellationToken::new();
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let (channels, answers, timeline, stop, namespace) = (
                    Arc::clone(&fleet.channels),
                    Arc::clone(&answers),
                    Arc::clone(&timeline),
                    stop.clone(),
                    namespace.to_owned(),
                );
                tokio::spawn(async move {
                    let mut n = 0usize;
                    while !stop.is_cancelled() {
                        let id = format!("isr-w{w}-{n}");
                        let channel = channels[(w + n) % channels.len()].read().unwrap().clone();
                        n += 1;
                        let answer =
                            send(channel, &namespace, id.clone(), payload(&id), &answers).await;
                        timeline.lock().unwrap().push((Instant::now(), answer));
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                })
            })
            .collect();
        Self {
            answers,
            timeline,
            stop,
            tasks,
        }
    }

    /// Stops the writers once their writes in flight are answered: every write's answer, and
    /// each answer's time.
    async fn stop(self) -> (Arc<Answers>, Vec<(Instant, Answer)>) {
        self.stop.cancel();
        for task in self.tasks {
            task.await.unwrap();
        }
        let timeline = self.timeline.lock().unwrap().clone();
        (self.answers, timeline)
    }
}

/// When the brokers went and came back.
struct Window {
    /// kafka-2 and kafka-3 killed.
    killed: Instant,
    /// kafka-2 being started again.
    returning: Instant,
    /// kafka-2 started.
    returned: Instant,
}

/// Kills two brokers of three and keeps them away for `below`; then kafka-2 back, and 20 s
/// later kafka-3, and 5 s more.
async fn below_min_isr(below: Duration) -> Window {
    stack_blocking("kill", "kafka-2").await;
    stack_blocking("kill", "kafka-3").await;
    let killed = Instant::now();
    println!("  killed kafka-2 and kafka-3; one broker left, min.insync.replicas 2");
    tokio::time::sleep(below).await;
    let returning = Instant::now();
    stack_blocking("up", "kafka-2").await;
    let returned = Instant::now();
    println!(
        "  kafka-2 back after {:.1} s of start-up",
        (returned - returning).as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(20)).await;
    stack_blocking("up", "kafka-3").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    Window {
        killed,
        returning,
        returned,
    }
}

pub async fn drill(writers: usize, below: Duration) -> Row {
    if !on_the_clustered_stack() {
        return not_on_the_clustered_stack("cluster-isr");
    }
    let applied = Applied::cql().await;
    let text = wal_testkit::namespace_json(Backend::Kafka, 2, &applied.target(), "");
    let namespace = wal_namespaces::parse(&text, "drill").unwrap().name;
    let fleet = Fleet::start(namespace_dir(&[(&namespace, &text)])).await;
    let load = Unretried::start(&fleet, &namespace, writers, applied.payload());

    tokio::time::sleep(Duration::from_secs(10)).await;
    let window = below_min_isr(below).await;
    let last_fault = Instant::now();
    let (answers, timeline) = load.stop().await;

    let seen = Seen::of(&timeline, &window);
    let outcome = settle(&answers, &applied, last_fault).await;
    fleet.stop();
    row(below, &window, &seen, outcome)
}

/// What the writers were answered while below min ISR, and after.
struct Seen {
    /// Writes answered TRUE below min ISR, past [`GRACE`]: each a broken promise.
    true_below: usize,
    /// Writes answered at all below min ISR.
    answered_below: usize,
    /// The first TRUE once kafka-2 was being started again.
    first_true: Option<Instant>,
}

impl Seen {
    /// What the `timeline` of answers shows against the brokers' `window`.
    fn of(timeline: &[(Instant, Answer)], window: &Window) -> Self {
        let Window {
            killed, returning, ..
        } = *window;
        let below_window = |at: Instant| at > killed + GRACE && at < returning;
        Self {
            true_below: timeline
                .iter()
                .filter(|(at, a)| below_window(*at) && *a == Answer::True)
                .count(),
            answered_below: timeline.iter().filter(|(at, _)| below_window(*at)).count(),
            first_true: timeline
                .iter()
                .filter(|(at, a)| *at > returning && *a == Answer::True)
                .map(|(at, _)| *at)
                .min(),
        }
    }
}

/// The drill's row: no TRUE below min ISR, and TRUE again once a second broker is back.
fn row(below: Duration, window: &Window, seen: &Seen, outcome: Outcome) -> Row {
    let Window {
        returning,
        returned,
        ..
    } = *window;
    let Seen {
        true_below,
        answered_below,
        first_true,
    } = *seen;
    let mut broken = Vec::new();
    if true_below > 0 {
        broken.push(format!(
            "{true_below} writes were answered TRUE with one broker of three (min.insync.replicas 2)"
        ));
    }
    if answered_below == 0 {
        broken.push("no write was answered while below min ISR: the drill saw nothing".into());
    }
    if first_true.is_none() {
        broken.push("no write was answered TRUE after a second broker returned".into());
    }
    Row {
        drill: "cluster-isr",
        backend: Backend::Kafka,
        faults: format!(
            "kill -9 of 2 brokers of 3 for {:.0} s (below min ISR 2), then one back, then the other",
            below.as_secs_f64()
        ),
        notes: format!(
            "answered while below min ISR: {answered_below}, of them TRUE: **{true_below}** \
             (must be 0); the first TRUE after: {}",
            first_true.map_or("never".to_owned(), |at| format!(
                "{:.1} s after kafka-2 was started again, its start-up {:.1} s; {:.1} s after it \
                 answered",
                (at - returning).as_secs_f64(),
                (returned - returning).as_secs_f64(),
                at.saturating_duration_since(returned).as_secs_f64()
            ))
        ),
        outcome,
        broken,
    }
}
