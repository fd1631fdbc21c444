//! cluster: production's shape, on the clustered stack (`scripts/stack up --cluster`: three
//! Kafka brokers, topics with three copies and two in sync; three Cassandra nodes, keyspaces
//! with three copies, written at LOCAL_QUORUM). Two producers and three consumers of one
//! namespace; writers spread their writes over the producers in turn and, as a client that
//! follows the retry rules would, retry a write not answered TRUE on the other producer with the
//! same idempotency id. One process at a time is killed with -9 (a broker, a Cassandra node, a
//! producer or a consumer, at random), kept down for a few seconds as a dead machine would be,
//! and started again; for DRILL_CLUSTER_SECS (1,800; 60 in a smoke run).
//!
//! What it shows: 0 TRUE writes lost, 0 FALSE applied, and the outage clients saw: the share of
//! writes whose first attempt was not TRUE (what a client without retries sees) and the share
//! that no attempt made TRUE within the client's deadline (the goal: under 0.1%).
//!
//! Conditions: as on every stack here, the brokers and nodes are processes on one machine, so a
//! kill is a process's death, not a machine's; nothing fsyncs each write (see scripts/stack).

mod writers;

pub use self::writers::{Attempts, Writers};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use rand::Rng as _;
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use wal_namespaces::Backend;
use wal_testkit::{KilledWhenDropped, ProducerProcess, consumer_process_with_env, stack};

use crate::load::{Answer, Answers, Applied, Outcome, Payload, namespace_dir, send, settle};
use crate::processes::stop_child;
use crate::table::Row;

/// How long the producer waits for the brokers before it answers UNKNOWN.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client keeps retrying one write before it gives up on it.
const CLIENT_DEADLINE: Duration = Duration::from_secs(30);
pub const PRODUCERS: usize = 2;
pub const CONSUMERS: usize = 3;
const MEMBERS: usize = 3;

/// The processes the drill kills, one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Victim {
    Broker(usize),
    Node(usize),
    Producer(usize),
    Consumer(usize),
}

impl Victim {
    fn kind(self) -> &'static str {
        match self {
            Self::Broker(_) => "broker",
            Self::Node(_) => "cassandra node",
            Self::Producer(_) => "producer",
            Self::Consumer(_) => "consumer",
        }
    }

    fn service(self) -> Option<String> {
        match self {
            Self::Broker(n) => Some(format!("kafka-{n}")),
            Self::Node(n) => Some(format!("cassandra-{n}")),
            _ => None,
        }
    }
}

/// Two producers and three consumers serving one folder of namespace files.
pub struct Fleet {
    pub dir: PathBuf,
    pub producers: Vec<ProducerProcess>,
    /// The producers' channels, which the writers read for each attempt; a restart swaps one.
    pub channels: Arc<Vec<RwLock<Channel>>>,
    pub consumers: Vec<KilledWhenDropped>,
    /// The consumers' environment over the stack's (a cluster map, say).
    pub consumer_env: Vec<(&'static str, String)>,
}

impl Fleet {
    pub async fn start(dir: PathBuf) -> Self {
        Self::start_with(dir, Vec::new()).await
    }

    pub async fn start_with(dir: PathBuf, consumer_env: Vec<(&'static str, String)>) -> Self {
        let mut producers = Vec::new();
        for _ in 0..PRODUCERS {
            producers.push(ProducerProcess::start_with_env(&dir, WRITE_TIMEOUT, &[]).await);
        }
        let channels = producers
            .iter()
            .map(|p| RwLock::new(p.channel.clone()))
            .collect();
        let consumers = (0..CONSUMERS)
            .map(|_| consumer_process_with_env(&dir, &consumer_env))
            .collect();
        Self {
            dir,
            producers,
            channels: Arc::new(channels),
            consumers,
            consumer_env,
        }
    }

    async fn kill(&mut self, victim: Victim) {
        match victim {
            Victim::Producer(i) => self.producers[i].kill(),
            Victim::Consumer(i) => stop_child(&mut self.consumers[i]),
            Victim::Broker(_) | Victim::Node(_) => {
                let service = victim.service().unwrap();
                tokio::task::spawn_blocking(move || stack("kill", &service))
                    .await
                    .unwrap();
            }
        }
    }

    async fn restart(&mut self, victim: Victim) {
        match victim {
            Victim::Producer(i) => {
                self.producers[i] =
                    ProducerProcess::start_with_env(&self.dir, WRITE_TIMEOUT, &[]).await;
                *self.channels[i].write().unwrap() = self.producers[i].channel.clone();
            }
            Victim::Consumer(i) => {
                self.consumers[i] = consumer_process_with_env(&self.dir, &self.consumer_env)
            }
            Victim::Broker(_) | Victim::Node(_) => {
                let service = victim.service().unwrap();
                tokio::task::spawn_blocking(move || stack("up", &service))
                    .await
                    .unwrap();
            }
        }
    }

    /// Each producer's and consumer's name and process id, for a soak's sampler.
    fn processes(&self) -> Vec<(String, u32)> {
        self.producers
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("producer {i}"), p.child.id()))
            .chain(
                self.consumers
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (format!("consumer {i}"), c.id())),
            )
            .collect()
    }

    /// Kills every process: the same as dropping the fleet, said where a drill ends.
    pub fn stop(self) {
        drop(self);
    }
}

/// A drill that panics halfway leaves no process behind on the shared machine (the producers
/// kill themselves when dropped).
impl Drop for Fleet {
    fn drop(&mut self) {
        for consumer in &mut self.consumers {
            stop_child(consumer);
        }
    }
}

/// Whether the drill runs with the clustered stack's environment, not only its name: without
/// its addresses the processes would run on another stack while the kills hit this one, and
/// prove nothing.
pub fn on_the_clustered_stack() -> bool {
    let brokers = std::env::var("WAL_KAFKA_BOOTSTRAP").unwrap_or_default();
    std::env::var("WAL_STACK_NAME").as_deref() == Ok("cluster")
        && brokers.split(',').count() >= MEMBERS
}

/// The row of a cluster drill started elsewhere than on the clustered stack.
pub fn not_on_the_clustered_stack(drill: &'static str) -> Row {
    Row {
        drill,
        backend: Backend::Kafka,
        faults: "none".into(),
        outcome: Default::default(),
        notes: String::new(),
        broken: vec![
            "the cluster drills run on the clustered stack: scripts/stack up --cluster && \
             eval \"$(scripts/stack --cluster env)\""
                .into(),
        ],
    }
}

/// The processes a run kills: the brokers and Cassandra nodes, and the producers and consumers
/// unless it is a soak.
fn victims(soak: bool) -> Vec<Victim> {
    let platform = if soak { 0 } else { 1 };
    (1..=MEMBERS)
        .map(Victim::Broker)
        .chain((1..=MEMBERS).map(Victim::Node))
        .chain((0..PRODUCERS * platform).map(Victim::Producer))
        .chain((0..CONSUMERS * platform).map(Victim::Consumer))
        .collect()
}

/// Kills one of `victims` at a time, at random, each kept down a few seconds and started again,
/// until `duration` after `started`: the kills dealt of each kind.
async fn kill_one_at_a_time(
    fleet: &mut Fleet,
    victims: &[Victim],
    rng: &mut StdRng,
    (started, duration): (Instant, Duration),
    load: &Writers,
) -> HashMap<&'static str, usize> {
    let mut dealt: HashMap<&'static str, usize> = HashMap::new();
    while started.elapsed() < duration {
        tokio::time::sleep(Duration::from_millis(rng.random_range(1_000..5_000))).await;
        let victim = victims[rng.random_range(0..victims.len())];
        let down = Duration::from_millis(rng.random_range(2_000..10_000));
        fleet.kill(victim).await;
        tokio::time::sleep(down).await;
        fleet.restart(victim).await;
        *dealt.entry(victim.kind()).or_default() += 1;
        println!(
            "  killed {victim:?} for {:.1} s; {} writes answered so far",
            down.as_secs_f64(),
            load.answered()
        );
    }
    dealt
}

/// With `soak` set (the cluster-soak drill), only brokers and Cassandra nodes are killed, so the
/// platform's processes live through the whole run, and their footprint is sampled every
/// `soak` (see soak.rs).
pub async fn drill(writers: usize, duration: Duration, seed: u64, soak: Option<Duration>) -> Row {
    let name = if soak.is_some() {
        "cluster-soak"
    } else {
        "cluster"
    };
    if !on_the_clustered_stack() {
        return not_on_the_clustered_stack(name);
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let applied = Applied::cql().await;
    let text = wal_testkit::namespace_json(Backend::Kafka, 2, &applied.target(), "");
    let namespace = wal_namespaces::parse(&text, "drill").unwrap().name;
    let mut fleet = Fleet::start(namespace_dir(&[(&namespace, &text)])).await;

    let load = Writers::start(
        &fleet.channels,
        &namespace,
        (writers, "cluster"),
        applied.payload(),
    );

    let victims = victims(soak.is_some());
    let sampler = soak.map(|every| crate::soak::Sampler::start(fleet.processes(), every));
    let started = Instant::now();
    let dealt =
        kill_one_at_a_time(&mut fleet, &victims, &mut rng, (started, duration), &load).await;
    let last_kill = Instant::now();
    let (answers, _, attempts) = load.stop().await;
    let (growth, soak_broken) = match sampler {
        Some(sampler) => sampler.finish().await,
        None => (String::new(), Vec::new()),
    };
    let outcome = settle(&answers, &applied, last_kill).await;
    fleet.stop();

    let faults = ["broker", "cassandra node", "producer", "consumer"]
        .iter()
        .map(|k| format!("{} {k}", dealt.get(k).copied().unwrap_or(0)))
        .collect::<Vec<_>>()
        .join(", ");
    Row {
        drill: name,
        backend: Backend::Kafka,
        faults: format!(
            "kill -9 over {:.0} s, one at a time: {faults}",
            started.elapsed().as_secs_f64()
        ),
        notes: notes(&outcome, &attempts, growth),
        outcome,
        broken: soak_broken,
    }
}

/// The row's notes: the fleet's shape, the outage clients saw before and after their retries,
/// and a soak's growth.
fn notes(outcome: &Outcome, attempts: &Attempts, growth: String) -> String {
    let written = outcome.written.max(1) as f64;
    let first = attempts.first_not_true.load(Ordering::Relaxed);
    let not_true = outcome.written - outcome.answered.get("true").copied().unwrap_or(0);
    let made = attempts.made.load(Ordering::Relaxed);
    let growth = if growth.is_empty() {
        growth
    } else {
        format!(
            "; growth past {} s: {growth}",
            crate::soak::SETTLED.as_secs()
        )
    };
    format!(
        "{PRODUCERS} producers, {CONSUMERS} consumers, 3 brokers (RF 3, min ISR 2), 3 \
         Cassandra nodes (RF 3, LOCAL_QUORUM); first attempt not TRUE: {first} ({:.3}%); \
         not TRUE after the client's retries on the other producer: {not_true} ({:.3}%, \
         goal < 0.1%); {:.2} attempts a write{growth}",
        100.0 * first as f64 / written,
        100.0 * not_true as f64 / written,
        made as f64 / written
    )
}
