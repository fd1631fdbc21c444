#![allow(clippy::expect_used, clippy::unwrap_used)]

//! A simulation of delivery: the consumer's own worker, delivery and settle code, run over the
//! in-memory queue twin and a simulated target, under tokio's paused clock, with failures,
//! latency, crashes and restarts drawn from a seed. No broker and no network: a seed runs in
//! milliseconds of real time however many simulated minutes it covers.
//!
//! Checked at every step:
//! - nothing is acknowledged before its effect, its retry copy or its DLQ copy is written;
//! - nothing is applied before its deliver-at (by the simulated clock);
//! - no more entries are being applied at once than the in-flight bound;
//! - in the end every entry is applied or dead-lettered, and the queue's commit has passed them
//!   all, across every crash (a commit that passed an entry still in progress would lose it at
//!   the next crash, and this would fail).
//!
//! A crash stops a consumer dead: its queue handle is dropped (the twin hands its unfinished
//! entries to the next handle, as Kafka's group does), and nothing it had in flight takes effect
//! or is acknowledged after the crash. An apply under way may or may not have taken effect.
//!
//! `WAL_SIM_SEEDS` seeds run (300 unless set: what CI runs; 10,000 have run), from
//! `WAL_SIM_FIRST_SEED` (0). A failing seed is printed with its violations; run it alone with
//! `WAL_SIM_FIRST_SEED=<seed> WAL_SIM_SEEDS=1`. The draws are the seed's; the order tokio picks
//! among futures ready at the same simulated instant is tokio's own (its `select!` starts at a
//! random branch), so a seed replays its faults and inputs exactly, not always every
//! interleaving.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use wal_apply::applier::Applier;
use wal_apply::clients::{ClientSettings, Clients};
use wal_apply::{Mutation, Target, TargetError, TargetKind, TargetRegistry};
use wal_consumer::delivery::{Deliverer, QueueContext};
use wal_consumer::destination::Destination;
use wal_consumer::metrics::QueueMetrics;
use wal_consumer::worker::{Role, Worker};
use wal_namespaces::{Namespace, TargetConfig};
use wal_queue::entry::{Body, ENTRY_VERSION, Entry};
use wal_queue::memory::{MemoryBroker, MemoryQueue};
use wal_queue::{
    Backend, Consume, Delivery, EnqueueError, Inspect, Produce, ProvisionReport, Queue, QueueError,
    QueueSpec,
};

/// Entries written per seed.
const ENTRIES: usize = 30;
/// The consumer's in-flight bound in the simulation: small, so it is reached.
const IN_FLIGHT: usize = 4;
/// Entries waiting in memory for their deliver-at.
const HELD: usize = 8;
/// The most crashes a seed injects.
const CRASHES: usize = 3;
/// Simulated time after which a seed that has not settled is a violation (a stuck entry).
const HORIZON: Duration = Duration::from_secs(3600);
/// Where the simulated clock starts: 2026-05-28, in microseconds.
const EPOCH_MICROS: i64 = 1_780_000_000_000_000;

thread_local! {
    /// The world of the seed running on this thread (each seed runs on a current-thread runtime).
    static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
    /// When the seed's simulated clock started.
    static START: RefCell<Option<tokio::time::Instant>> = const { RefCell::new(None) };
}

/// The simulated clock, in the entries' unit: tokio's paused clock since the seed started.
fn simulated_micros() -> i64 {
    START.with(|start| match *start.borrow() {
        Some(start) => {
            EPOCH_MICROS + i64::try_from(start.elapsed().as_micros()).unwrap_or(i64::MAX)
        }
        None => EPOCH_MICROS,
    })
}

/// What happened in one seed, and the draws it makes.
struct World {
    rng: StdRng,
    /// The consumer incarnation now running; older ones crashed.
    generation: u64,
    /// Effects: entry id -> times applied.
    applied: HashMap<String, u32>,
    /// Ids whose DLQ copy was written.
    dead: HashSet<String>,
    /// What settled each delivery, by (id, attempt): a retry copy keeps its original's id, so
    /// an acknowledgement is checked against its own delivery's effect, retry copy or DLQ copy
    /// (both count one attempt more than their delivery), not against another copy's.
    settled: HashSet<(String, u32)>,
    /// How many retry copies were written.
    retries: usize,
    /// Ids that always fail for good (poison).
    poison: HashSet<String>,
    /// Applies under way now, by consumer incarnation (a crashed one's end with it).
    applying: HashMap<u64, usize>,
    /// The target answers Unavailable until then (simulated micros); how often it went down.
    down_until: i64,
    downs: usize,
    /// Pauses and resumes of the queue by the consumer (holding it while the target is down),
    /// passed through to the twin: a queue left paused hands out nothing more.
    pauses: usize,
    resumes: usize,
    violations: Vec<String>,
    /// What happened, in order: printed with a failing seed's violations.
    trace: Vec<String>,
}

fn world<T>(f: impl FnOnce(&mut World) -> T) -> T {
    WORLD.with(|w| f(w.borrow_mut().as_mut().expect("a seed is running")))
}

fn violation(what: String) {
    world(|w| w.violations.push(what));
}

/// Never completes: what a crashed consumer's calls do.
async fn dead() -> ! {
    std::future::pending().await
}

/// The simulated target, registered under the http kind (its settings name it).
#[derive(Debug)]
struct SimTarget {
    generation: u64,
}

#[async_trait]
impl Target for SimTarget {
    async fn apply(&self, mutation: Mutation<'_>) -> Result<(), TargetError> {
        let entry = mutation.entry;
        let now = simulated_micros();
        if world(|w| w.generation) != self.generation {
            dead().await;
        }
        if now < entry.deliver_at_micros {
            violation(format!(
                "{} applied {} µs before its deliver-at",
                entry.id,
                entry.deliver_at_micros - now
            ));
        }
        let generation = self.generation;
        let (latency, roll) = world(|w| {
            let applying = w.applying.entry(generation).or_default();
            *applying += 1;
            let line = format!(
                "{now} g{generation} apply {} (attempt {}) [{applying} applying]",
                entry.id, entry.attempt
            );
            w.trace.push(line);
            if *applying > IN_FLIGHT {
                let applying = *applying;
                w.violations.push(format!(
                    "{applying} entries applying at once; the bound is {IN_FLIGHT}"
                ));
            }
            (
                Duration::from_millis(w.rng.random_range(0..200)),
                w.rng.random_range(0..100u32),
            )
        });
        tokio::time::sleep(latency).await;
        let crashed = world(|w| w.generation) != self.generation;
        let outcome = world(|w| {
            *w.applying.entry(generation).or_default() -= 1;
            w.trace.push(format!(
                "{} g{generation} done {}",
                simulated_micros(),
                entry.id
            ));
            if crashed {
                // Killed mid-apply: the effect may or may not have happened.
                if roll % 2 == 0 {
                    *w.applied.entry(entry.id.clone()).or_default() += 1;
                    w.settled.insert((entry.id.clone(), entry.attempt));
                }
                return None;
            }
            Some(if w.poison.contains(&entry.id) {
                Err(TargetError::permanent("poison"))
            } else if simulated_micros() < w.down_until {
                Err(TargetError::unavailable("the simulated target is down"))
            } else if roll < 15 {
                Err(TargetError::retryable("a simulated timeout"))
            } else if roll < 18 {
                // Down for a while: the breaker opens and entries wait in place.
                w.down_until = simulated_micros() + w.rng.random_range(1_000_000..20_000_000);
                w.downs += 1;
                Err(TargetError::unavailable("the simulated target went down"))
            } else {
                *w.applied.entry(entry.id.clone()).or_default() += 1;
                w.settled.insert((entry.id.clone(), entry.attempt));
                Ok(())
            })
        });
        world(|w| {
            let line = format!(
                "{} g{generation} outcome {} {outcome:?}",
                simulated_micros(),
                entry.id
            );
            w.trace.push(line);
        });
        match outcome {
            Some(outcome) => outcome,
            None => dead().await,
        }
    }
}

#[derive(Debug)]
struct Sim;

impl TargetKind for Sim {
    type Settings = wal_targets::http::HttpSettings;

    fn endpoint(_: &Self::Settings, _: &Clients) -> String {
        "simulated".into()
    }

    fn build(
        _: Self::Settings,
        clients: Arc<Clients>,
    ) -> impl Future<Output = Result<Arc<dyn Target>, TargetError>> + Send {
        // The incarnation whose registry builds it, not the one running now: a crashed
        // consumer's delivery may build its target after the crash, and must stay dead.
        let generation = generation_of(&clients);
        async move { Ok(Arc::new(SimTarget { generation }) as Arc<dyn Target>) }
    }
}

/// Each incarnation's clients name it where a real consumer names its Kafka brokers (the
/// simulated target reaches none), so a target built by a crashed incarnation knows it is dead.
fn generation_of(clients: &Clients) -> u64 {
    let named = &clients.settings().kafka_bootstrap;
    named
        .strip_prefix("generation-")
        .and_then(|g| g.parse().ok())
        .expect("the simulation names each incarnation's clients")
}

/// One consumer incarnation's queue handle: the twin's, checked at every call, and dead after a
/// crash (its handle dropped, every later call never answering).
#[derive(Debug)]
struct SimQueue {
    generation: u64,
    spec: QueueSpec,
    inner: Mutex<Option<Arc<MemoryQueue>>>,
}

impl SimQueue {
    /// The twin's handle, or never, once this incarnation crashed.
    async fn live(&self) -> Arc<MemoryQueue> {
        let inner = self.inner.lock().unwrap().clone();
        match inner {
            Some(inner) if world(|w| w.generation) == self.generation => inner,
            _ => dead().await,
        }
    }

    fn crash(&self) {
        self.inner.lock().unwrap().take();
    }
}

fn id_of(delivery: &Delivery) -> String {
    delivery
        .entry
        .as_ref()
        .map(|e| e.id.clone())
        .unwrap_or_default()
}

#[async_trait]
impl Produce for SimQueue {
    fn spec(&self) -> &QueueSpec {
        &self.spec
    }

    fn backend(&self) -> Backend {
        Backend::Kafka
    }

    fn max_entry_bytes(&self) -> usize {
        1 << 20
    }

    async fn provision(&self) -> Result<ProvisionReport, QueueError> {
        self.live().await.provision().await
    }

    async fn enqueue(&self, entry: &Entry) -> Result<(), EnqueueError> {
        self.live().await.enqueue(entry).await
    }
}

#[async_trait]
impl Consume for SimQueue {
    async fn enqueue_dead_letter(&self, entry: &Entry) -> Result<(), EnqueueError> {
        let inner = self.live().await;
        inner.enqueue_dead_letter(entry).await?;
        world(|w| {
            w.dead.insert(entry.id.clone());
            // The DLQ copy counts every attempt made: its delivery's, plus one.
            w.settled
                .insert((entry.id.clone(), entry.attempt.saturating_sub(1)))
        });
        Ok(())
    }

    async fn requeue(&self, entry: &Entry) -> Result<(), EnqueueError> {
        let inner = self.live().await;
        inner.requeue(entry).await?;
        // In the simulation only retries requeue (nothing is parked: the hold limit is
        // unbounded), and a retry copy counts one attempt more than its delivery.
        world(|w| {
            w.retries += 1;
            w.settled
                .insert((entry.id.clone(), entry.attempt.saturating_sub(1)))
        });
        Ok(())
    }

    fn hold_limit(&self) -> Duration {
        Duration::MAX
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let received = self.live().await.receive(max, wait).await?;
        let ids: Vec<String> = received.iter().map(id_of).collect();
        let generation = self.generation;
        world(|w| {
            let line = format!("{} g{generation} received {ids:?}", simulated_micros());
            w.trace.push(line);
        });
        Ok(received)
    }

    async fn acknowledge(&self, delivery: &Delivery) -> Result<(), QueueError> {
        let inner = self.live().await;
        let id = id_of(delivery);
        let attempt = delivery.entry.as_ref().map_or(0, |e| e.attempt);
        let settled = world(|w| w.settled.contains(&(id.clone(), attempt)));
        if !settled {
            violation(format!(
                "{id} (attempt {attempt}) acknowledged before its effect, retry copy or DLQ copy was written"
            ));
        }
        inner.acknowledge(delivery).await?;
        let generation = self.generation;
        world(|w| {
            w.trace.push(format!(
                "{} g{generation} acknowledged {id}",
                simulated_micros()
            ));
        });
        Ok(())
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), QueueError> {
        self.live().await.extend(delivery, by).await
    }

    // Through to the twin, which then hands out nothing until resumed: a consumer that forgot to
    // resume after a hold would leave entries unsettled at the horizon.
    async fn pause(&self) -> Result<(), QueueError> {
        self.live().await.pause().await?;
        world(|w| w.pauses += 1);
        Ok(())
    }

    async fn resume(&self) -> Result<(), QueueError> {
        self.live().await.resume().await?;
        world(|w| w.resumes += 1);
        Ok(())
    }

    async fn close(&self) -> Result<(), QueueError> {
        self.live().await.close().await
    }
}

#[async_trait]
impl Inspect for SimQueue {
    async fn parked(&self) -> Result<Option<u64>, QueueError> {
        Ok(None)
    }

    async fn backlog(&self) -> Result<Option<u64>, QueueError> {
        self.live().await.backlog().await
    }

    async fn unfinished(&self) -> Result<u64, QueueError> {
        self.live().await.unfinished().await
    }
}

fn namespace() -> Arc<Namespace> {
    let text = r#"{"namespace": "sim",
        "persistence_configurations": {"persistence_configuration": [{
            "physical_storage": {"type": "KAFKA"},
            "config": {"wal-kafka-topics": ["sim"], "queue.max-messages-per-poll": 3}
        }]},
        "retry_policy": {"max_attempts": 4, "initial_backoff_ms": 200, "multiplier": 2.0,
                         "max_backoff_ms": 5000, "jitter": 0.0},
        "default_target": {"kind": "http", "settings": {"url": "http://simulated/"}}}"#;
    Arc::new(wal_namespaces::parse(text, "simulation").unwrap())
}

/// A consumer incarnation reading `broker`'s topic: its queue handle and its shutdown.
struct Incarnation {
    queue: Arc<SimQueue>,
    shutdown: CancellationToken,
}

fn start(broker: &MemoryBroker, namespace: &Arc<Namespace>, generation: u64) -> Incarnation {
    let spec = QueueSpec::of(namespace, &namespace.queues[0]);
    let queue = Arc::new(SimQueue {
        generation,
        spec: spec.clone(),
        inner: Mutex::new(Some(Arc::new(broker.queue(spec)))),
    });
    let clients = Arc::new(
        Clients::new(ClientSettings {
            kafka_bootstrap: format!("generation-{generation}"),
            ..ClientSettings::none(Duration::from_secs(5))
        })
        .unwrap(),
    );
    let registry = TargetRegistry::empty(Arc::clone(&clients)).with::<Sim>();
    let deliverer = Arc::new(Deliverer::new(Applier::new(
        registry,
        clients,
        Duration::from_secs(5),
    )));
    let context = QueueContext {
        namespace: Arc::clone(namespace),
        queue: Arc::clone(&queue) as Arc<dyn Queue>,
        default_target: namespace
            .default_target
            .as_ref()
            .map(TargetConfig::entry_target),
        metrics: Arc::new(QueueMetrics::new("sim", "sim", None)),
        in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
        held: Arc::new(Semaphore::new(HELD)),
        started_micros: 0,
        archive_recorded: Arc::default(),
        holds: Arc::default(),
        destination: Arc::new(Destination::Targets),
        pause: wal_consumer::pause::PauseSwitch::never(),
        directives: tokio::sync::watch::channel(Default::default()).1,
    };
    let worker = Worker {
        context,
        deliverer,
        grace: Duration::from_secs(5),
        role: Role::Deliver,
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(worker.run(shutdown.clone()));
    Incarnation { queue, shutdown }
}

/// What a seed exercised, added up over the run and printed, so a simulation that stopped
/// exercising something shows.
/// How many kinds of event [`Exercised::kinds`] names.
const KINDS: usize = 6;

#[derive(Debug, Default)]
struct Exercised {
    crashes: usize,
    applied: usize,
    retried: usize,
    dead_lettered: usize,
    applied_again: usize,
    target_down: usize,
    paused: usize,
    resumed: usize,
}

impl Exercised {
    /// Each thing a seed may exercise, by name, and whether this seed did.
    fn kinds(&self) -> [(&'static str, bool); KINDS] {
        [
            ("crashed", self.crashes > 0),
            ("retried", self.retried > 0),
            ("dead-lettered", self.dead_lettered > 0),
            ("held (the target down)", self.target_down > 0),
            ("paused the queue", self.paused > 0),
            ("resumed the queue", self.resumed > 0),
        ]
    }
}

/// Runs one seed; its violations (none when every invariant held), and what it exercised.
async fn simulate(seed: u64) -> (Vec<String>, Exercised) {
    START.with(|s| *s.borrow_mut() = Some(tokio::time::Instant::now()));
    let mut rng = StdRng::seed_from_u64(seed);
    let poison: HashSet<String> = (0..ENTRIES)
        .filter(|_| rng.random_range(0..10) == 0)
        .map(|i| format!("e{i}"))
        .collect();
    WORLD.with(|w| {
        *w.borrow_mut() = Some(World {
            rng: StdRng::seed_from_u64(seed ^ 0x5eed),
            generation: 0,
            applied: HashMap::new(),
            dead: HashSet::new(),
            settled: HashSet::new(),
            retries: 0,
            poison,
            applying: HashMap::new(),
            down_until: 0,
            downs: 0,
            pauses: 0,
            resumes: 0,
            violations: Vec::new(),
            trace: Vec::new(),
        });
    });
    let namespace = namespace();
    let broker = MemoryBroker::new();
    let spec = QueueSpec::of(&namespace, &namespace.queues[0]);
    let writer = broker.queue(spec.clone());
    for i in 0..ENTRIES {
        let now = simulated_micros();
        let entry = Entry {
            version: ENTRY_VERSION,
            id: format!("e{i}"),
            namespace: "sim".into(),
            key: format!("k{}", i % 7),
            body: Some(Body::Payload(b"{}".to_vec())),
            original_write_time_micros: now,
            deliver_at_micros: now + rng.random_range(0..10_000_000),
            enqueued_at_micros: now,
            origin_region: "local".into(),
            ..Entry::default()
        };
        writer.enqueue(&entry).await.unwrap();
    }
    let mut current = start(&broker, &namespace, 0);
    let mut crashes = 0;
    let ids: Vec<String> = (0..ENTRIES).map(|i| format!("e{i}")).collect();
    // A handle that never receives, to read how much of the topic is not done: the written
    // entries, their retry copies and redeliveries after crashes.
    let observer = broker.queue(spec.clone());
    let began = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..3_000))).await;
        if observer.unfinished().await.unwrap() == 0 {
            break;
        }
        if began.elapsed() > HORIZON {
            violation(format!(
                "not settled after {} s of simulated time",
                HORIZON.as_secs()
            ));
            break;
        }
        if crashes < CRASHES && rng.random_range(0..8) == 0 {
            crashes += 1;
            let generation = world(|w| {
                w.generation += 1;
                w.generation
            });
            current.queue.crash();
            current = start(&broker, &namespace, generation);
        }
    }
    // Drained: every record of the topic is done and the commit has passed it. Each entry must
    // have ended applied or dead-lettered, however often it was delivered.
    current.shutdown.cancel();
    let mut violations = world(|w| std::mem::take(&mut w.violations));
    if !violations.is_empty() && std::env::var_os("WAL_SIM_TRACE").is_some() {
        world(|w| println!("{}", w.trace.join("\n")));
    }
    for id in &ids {
        let (applied, dead) = world(|w| (w.applied.contains_key(id), w.dead.contains(id)));
        if !applied && !dead {
            violations.push(format!("{id} neither applied nor dead-lettered"));
        }
    }
    let exercised = world(|w| Exercised {
        crashes,
        applied: w.applied.len(),
        retried: w.retries,
        dead_lettered: w.dead.len(),
        applied_again: w.applied.values().filter(|n| **n > 1).count(),
        target_down: w.downs,
        paused: w.pauses,
        resumed: w.resumes,
    });
    (violations, exercised)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn delivery_keeps_its_invariants_through_failures_crashes_and_restarts() {
    assert!(
        wal_queue::entry::set_clock(simulated_micros),
        "the simulated clock is the only one set in this binary"
    );
    let first = env_u64("WAL_SIM_FIRST_SEED", 0);
    let seeds = env_u64("WAL_SIM_SEEDS", 300);
    let mut failed = Vec::new();
    let mut total = Exercised::default();
    // How many seeds exercised each kind of event.
    let mut seeds_that = [0_usize; KINDS];
    for seed in first..first + seeds {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let (violations, exercised) = runtime.block_on(simulate(seed));
        drop(runtime);
        for (count, (_, did)) in seeds_that.iter_mut().zip(exercised.kinds()) {
            *count += usize::from(did);
        }
        total.crashes += exercised.crashes;
        total.applied += exercised.applied;
        total.retried += exercised.retried;
        total.dead_lettered += exercised.dead_lettered;
        total.applied_again += exercised.applied_again;
        total.target_down += exercised.target_down;
        total.paused += exercised.paused;
        total.resumed += exercised.resumed;
        if !violations.is_empty() {
            println!("seed {seed}: {}", violations.join("; "));
            failed.push(seed);
        }
    }
    println!("{seeds} seeds from {first}: {} failed", failed.len());
    println!(
        "exercised: {} crashes, {} entries applied, {} retry copies, {} dead-lettered, {} applied more than once, the target down {} times, the queue paused {} and resumed {} times",
        total.crashes,
        total.applied,
        total.retried,
        total.dead_lettered,
        total.applied_again,
        total.target_down,
        total.paused,
        total.resumed
    );
    let kinds = Exercised::default().kinds().map(|(name, _)| name);
    for (name, count) in kinds.iter().zip(seeds_that) {
        println!("  seeds that {name}: {count} of {seeds}");
    }
    // Violations first: a seed replayed alone (WAL_SIM_SEEDS=1) shows what it broke.
    assert!(
        failed.is_empty(),
        "seeds that broke an invariant: {failed:?}"
    );
    // A simulation that stopped exercising something would pass while checking nothing: the
    // target no longer reached (everything dead-lettered), or no seed class crashing, retrying,
    // dead-lettering, holding or pausing and resuming. Each must happen in a third of the
    // seeds, not once across all of them. (Judged on runs of 30 seeds or more.)
    if seeds < 30 {
        return;
    }
    let written = usize::try_from(seeds).unwrap() * ENTRIES;
    assert!(
        total.applied > written * 3 / 4,
        "only {} of {written} entries applied: the simulated target is not being reached",
        total.applied
    );
    let share = usize::try_from(seeds).unwrap() / 3;
    for (name, count) in kinds.iter().zip(seeds_that) {
        assert!(
            count >= share,
            "only {count} of {seeds} seeds {name}; at least a third must: {total:?}"
        );
    }
    assert!(
        total.applied_again > 0,
        "no entry was applied more than once: no crash landed mid-apply: {total:?}"
    );
}
