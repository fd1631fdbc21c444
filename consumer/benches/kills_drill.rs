//! The kills drill, run like the benchmarks: a producer and a consumer as processes on the local
//! stack, writers sending unique, checkable writes through the producer, and kill -9 of the
//! producer, the consumer and (on Kafka) the Kafka broker at random moments under load, each
//! restarted at once. It then waits for delivery and prints a table per backend:
//! the writes answered TRUE / FALSE / UNKNOWN / refused or unanswered, the TRUE writes never applied (must be
//! 0), the FALSE writes applied (must be 0), duplicates applied, and the time from the last kill
//! to the last TRUE write applied. A client the drill writes for does not retry: an UNKNOWN
//! write may or may not be applied, and is only counted.
//!
//! Run with:
//!     scripts/stack up && cargo build --release -p wal-producer &&
//!         cargo bench -p wal-consumer --bench kills_drill
//! (the producer binary is another package's, which `cargo bench -p wal-consumer` does not build).
//! Tunables (environment): DRILL_KILLS (20: kills of each kind per backend), DRILL_WRITERS (8),
//! DRILL_SEED (1: the kill order and moments), DRILL_BACKENDS (kafka,sqs).
//!
//! Conditions: the stack's single Kafka broker is killed as a process, not as a machine: what it
//! acknowledged is in the page cache and survives (Kafka does not fsync each write). ElasticMQ
//! is not killed: its in-memory queues would lose everything (the ElasticMQ drill needs
//! its persistence configured first).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use wal_namespaces::Backend;
use wal_proto::v1::Trilean;
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_testkit::{
    ProducerProcess, Upstream, consumer_process, env_u64, namespace_json, stack, unique, write,
};

/// How long one write may wait for the producer: past it, the client gives up (refused).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the drill waits for the TRUE writes to be applied after the last kill.
const DRAIN_LIMIT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kill {
    Producer,
    Consumer,
    Kafka,
}

/// Each write's answer, by its id.
#[derive(Debug, Default)]
struct Answers {
    by_id: Mutex<HashMap<String, &'static str>>,
}

impl Answers {
    fn record(&self, id: String, answer: &'static str) {
        self.by_id.lock().unwrap().insert(id, answer);
    }

    fn with(&self, answer: &str) -> Vec<String> {
        let by_id = self.by_id.lock().unwrap();
        by_id
            .iter()
            .filter(|(_, a)| **a == answer)
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// One writer: unique ids, one write each, through whichever producer is running now.
async fn writer(
    name: String,
    prefix: String,
    channel: Arc<RwLock<Channel>>,
    answers: Arc<Answers>,
    stop: CancellationToken,
) {
    let mut n = 0u64;
    while !stop.is_cancelled() {
        let id = format!("{prefix}-{n}");
        n += 1;
        let mut request = write(&name, id.as_bytes());
        request.idempotency_id = id.clone();
        let mut client = WriteAheadLogClient::new(channel.read().unwrap().clone());
        let answer = match tokio::time::timeout(CALL_TIMEOUT, client.write_to_log(request)).await {
            Ok(Ok(response)) => match response.into_inner().durable() {
                Trilean::True => "true",
                Trilean::False => "false",
                _ => "unknown",
            },
            Ok(Err(_)) | Err(_) => "refused",
        };
        answers.record(id, answer);
        if answer == "refused" {
            // The producer is being restarted: try the next write shortly.
            tokio::time::sleep(Duration::from_millis(200)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[derive(Debug)]
struct Row {
    backend: Backend,
    kills: HashMap<&'static str, usize>,
    written: usize,
    answered: [usize; 4],
    true_lost: usize,
    false_applied: usize,
    duplicates: usize,
    recovered: Option<Duration>,
}

async fn drill(backend: Backend, kills_each: usize, writers: usize, seed: u64) -> Row {
    let mut rng = StdRng::seed_from_u64(seed);
    let upstream = Upstream::start(|_| 200).await;
    let text = namespace_json(backend, 2, &upstream.target(), "");
    let namespace = wal_namespaces::parse(&text, "drill").unwrap();
    let name = namespace.name.clone();
    let dir = std::env::temp_dir().join(unique("kills-drill"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), &text).unwrap();

    let mut producer = ProducerProcess::start(&dir, Duration::from_secs(5)).await;
    let channel = Arc::new(RwLock::new(producer.channel.clone()));
    let mut consumer = consumer_process(&dir, "127.0.0.1:0");
    let answers = Arc::new(Answers::default());
    let stop = CancellationToken::new();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            tokio::spawn(writer(
                name.clone(),
                format!("{}-w{w}", backend.to_string().to_lowercase()),
                Arc::clone(&channel),
                Arc::clone(&answers),
                stop.clone(),
            ))
        })
        .collect();

    let mut plan = vec![Kill::Producer; kills_each];
    plan.extend(vec![Kill::Consumer; kills_each]);
    if backend == Backend::Kafka {
        plan.extend(vec![Kill::Kafka; kills_each]);
    }
    plan.shuffle(&mut rng);
    let mut kills: HashMap<&'static str, usize> = HashMap::new();
    for (i, kill) in plan.iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(rng.random_range(500..3_000))).await;
        match kill {
            Kill::Producer => {
                producer.kill();
                producer = ProducerProcess::start(&dir, Duration::from_secs(5)).await;
                *channel.write().unwrap() = producer.channel.clone();
                *kills.entry("producer").or_default() += 1;
            }
            Kill::Consumer => {
                let _ = consumer.kill();
                let _ = consumer.wait();
                consumer = consumer_process(&dir, "127.0.0.1:0");
                *kills.entry("consumer").or_default() += 1;
            }
            Kill::Kafka => {
                tokio::task::spawn_blocking(|| {
                    stack("kill", "kafka");
                    stack("up", "kafka");
                })
                .await
                .unwrap();
                *kills.entry("kafka").or_default() += 1;
            }
        }
        println!(
            "  {backend}: kill {} of {} ({kill:?}); {} writes answered so far",
            i + 1,
            plan.len(),
            answers.by_id.lock().unwrap().len()
        );
    }
    let last_kill = Instant::now();
    stop.cancel();
    for task in tasks {
        task.await.unwrap();
    }

    let true_ids = answers.with("true");
    let mut recovered = None;
    while last_kill.elapsed() < DRAIN_LIMIT {
        let bodies: std::collections::HashSet<String> = upstream.bodies().into_iter().collect();
        if true_ids.iter().all(|id| bodies.contains(id)) {
            recovered = Some(last_kill.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Stragglers: duplicates and UNKNOWN writes still on their way.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut applied: HashMap<String, usize> = HashMap::new();
    for body in upstream.bodies() {
        *applied.entry(body).or_default() += 1;
    }
    producer.kill();
    let _ = consumer.kill();
    let _ = consumer.wait();

    let written = answers.by_id.lock().unwrap().len();
    Row {
        backend,
        kills,
        written,
        answered: ["true", "false", "unknown", "refused"].map(|a| answers.with(a).len()),
        true_lost: true_ids
            .iter()
            .filter(|id| !applied.contains_key(*id))
            .count(),
        false_applied: answers
            .with("false")
            .iter()
            .filter(|id| applied.contains_key(*id))
            .count(),
        duplicates: applied.values().map(|n| n - 1).sum(),
        recovered,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let kills = usize::try_from(env_u64("DRILL_KILLS", 20)).unwrap();
    let writers = usize::try_from(env_u64("DRILL_WRITERS", 8)).unwrap();
    let seed = env_u64("DRILL_SEED", 1);
    let backends = std::env::var("DRILL_BACKENDS").unwrap_or_else(|_| "kafka,sqs".into());
    let mut rows = Vec::new();
    for backend in backends.split(',') {
        let backend = match backend.trim() {
            "kafka" => Backend::Kafka,
            "sqs" => Backend::Sqs,
            other => panic!("DRILL_BACKENDS: '{other}' is not a backend; expected kafka or sqs"),
        };
        println!("kills drill on {backend}: {kills} kills of each kind, {writers} writers");
        rows.push(drill(backend, kills, writers, seed).await);
    }
    println!();
    println!(
        "| backend | kills (producer / consumer / kafka) | writes | TRUE | FALSE | UNKNOWN | refused or no answer | TRUE never applied | FALSE applied | duplicates applied | last kill to all TRUE applied |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in &rows {
        let kills = |kind| row.kills.get(kind).copied().unwrap_or(0);
        println!(
            "| {} | {} / {} / {} | {} | {} | {} | {} | {} | **{}** | **{}** | {} | {} |",
            row.backend,
            kills("producer"),
            kills("consumer"),
            kills("kafka"),
            row.written,
            row.answered[0],
            row.answered[1],
            row.answered[2],
            row.answered[3],
            row.true_lost,
            row.false_applied,
            row.duplicates,
            row.recovered
                .map_or("not within 600 s".to_owned(), |d| format!(
                    "{:.1} s",
                    d.as_secs_f64()
                )),
        );
    }
    let broken: usize = rows.iter().map(|r| r.true_lost + r.false_applied).sum();
    if broken > 0 {
        eprintln!("kills drill: {broken} writes broke the promise (TRUE lost or FALSE applied)");
        std::process::exit(1);
    }
}
