//! kills: kill -9 of the producer, the consumer and the backend's broker (the Kafka broker, or
//! ElasticMQ) at random moments under load, each restarted at once, in a shuffled order.
//!
//! Conditions: the brokers are killed as processes, not as machines. Kafka's single broker
//! answers once a write is in its page cache, and ElasticMQ (H2, WRITE_DELAY=0) once the write is
//! in its database file; neither fsyncs each write, so what they acknowledged survives a process
//! kill, not a power loss.

use std::time::Instant;

use rand::SeedableRng as _;
use rand::rngs::StdRng;
use wal_namespaces::Backend;
use wal_testkit::Upstream;

use crate::load::{Applied, Load, Outcome, settle, start_under_load};
use crate::processes::{Kill, Processes, dealt, kill_at_random};
use crate::table::Row;

/// The broker a backend's drill kills.
pub fn broker(backend: Backend) -> &'static str {
    match backend {
        Backend::Kafka => "kafka",
        Backend::Sqs => "elasticmq",
    }
}

pub async fn drill(backend: Backend, kills_each: usize, writers: usize, seed: u64) -> Row {
    let mut rng = StdRng::seed_from_u64(seed);
    let broker = broker(backend);
    let applied = Applied::Http(Upstream::start(|_| 200).await);
    let prefix = format!("kills-{}", backend.to_string().to_lowercase());
    let (processes, load) = start_under_load(backend, &applied, Vec::new(), &prefix, writers).await;
    let kinds = [Kill::Producer, Kill::Consumer, Kill::Broker(broker)];
    let (outcome, faults) =
        kills_under_load(processes, load, &applied, &kinds, kills_each, &mut rng).await;
    Row {
        drill: "kills",
        backend,
        faults,
        outcome,
        notes: String::new(),
        broken: Vec::new(),
    }
}

/// Deals `each` kills of every kind in `kinds` under `load`, then stops the load and waits for
/// delivery: what the writes came to, and the kills dealt as a row's faults.
pub async fn kills_under_load(
    mut processes: Processes,
    load: Load,
    applied: &Applied,
    kinds: &[Kill],
    each: usize,
    rng: &mut StdRng,
) -> (Outcome, String) {
    let kills = kill_at_random(&mut processes, kinds, each, rng, || {
        format!("{} writes answered so far", load.answers.len())
    })
    .await;
    let last_kill = Instant::now();
    let answers = load.stop().await;
    let outcome = settle(&answers, applied, last_kill).await;
    processes.stop();
    (outcome, dealt(kinds, &kills))
}
