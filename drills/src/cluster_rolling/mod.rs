//! cluster-rolling: a rolling restart of every tier on the clustered stack, one process at a
//! time, as an upgrade would: the control plane, the three brokers, the three Cassandra nodes,
//! the two producers and the three consumers. Each is stopped the way it stops cleanly
//! (SIGTERM: a broker hands over its leaderships first, a producer answers what it took, a
//! consumer finishes its entries and leaves its groups, the control plane closes its watchers'
//! streams) and started again; the next only once it is back as an operator would check (a
//! broker: every partition of the namespace in sync again; a Cassandra node: answering, and
//! 10 s for the others' gossip to see it; a consumer: its groups stable with three members).
//! The producers and consumers follow the control plane for their namespaces; the writers
//! spread over the producers and retry on the other one, as the retry rules say.
//!
//! With DRILL_PREVIOUS_BIN, a folder holding another build's `wal-producer`, `wal-consumer` and
//! `wal-control-plane` (say, the last release's), the fleet starts on those and each restart
//! starts this build's: a rolling upgrade, old and new side by side until the last one is
//! replaced.
//!
//! What it shows: **no write answered FALSE** (goal: graceful stops drain first, so an upgrade
//! refuses nothing), 0 TRUE lost, the attempts that were not TRUE (a stopped producer's refused
//! connections, which the client retries on the other), and how long each restart took.

mod tiers;

use self::tiers::Tiers;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use tonic::transport::Channel;
use wal_namespaces::Backend;
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;
use wal_testkit::{
    KilledWhenDropped, ProducerProcess, cargo_bin, consumer_process_from, group_state,
    kafka_bootstrap, refusing_address, stack, terminate, unique,
};

use crate::cluster::{
    Attempts, CONSUMERS, PRODUCERS, WRITE_TIMEOUT, Writers, not_on_the_clustered_stack,
    on_the_clustered_stack,
};
use crate::load::{Answer, Answers, Applied, Outcome, settle};
use crate::processes::{STOP_LIMIT, reap_within};
use crate::table::Row;

/// How long one tier's process may take to be back before the drill gives up on it.
const BACK_LIMIT: Duration = Duration::from_secs(180);
/// The brokers and Cassandra nodes of the clustered stack.
const MEMBERS: usize = 3;

/// Which build a process runs.
#[derive(Debug, Clone)]
struct Builds {
    /// The first processes' build: another build's folder, or this build's.
    first: Option<PathBuf>,
}

impl Builds {
    fn binary(&self, name: &str, first: bool) -> PathBuf {
        match (&self.first, first) {
            (Some(folder), true) => folder.join(name),
            _ => cargo_bin(name),
        }
    }
}

/// A process that has exited (and been reaped), standing in while the real one is replaced.
fn placeholder() -> std::process::Child {
    let mut child = Command::new("true").spawn().expect("run true");
    let _ = child.wait();
    child
}

/// Starts a control plane on `listen` with the SQLite store `store`, and waits for its port.
async fn start_control_plane(
    binary: &Path,
    store: &Path,
    listen: std::net::SocketAddr,
) -> KilledWhenDropped {
    let mut child = Command::new(binary)
        .env("WAL_CONTROL_LISTEN", listen.to_string())
        .env("WAL_CONTROL_STORE", format!("sqlite://{}", store.display()))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .map(KilledWhenDropped)
        .expect("start wal-control-plane");
    let started = Instant::now();
    while tokio::net::TcpStream::connect(listen).await.is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("wal-control-plane exited at start-up with {status} (its error is above)");
        }
        assert!(
            started.elapsed() < BACK_LIMIT,
            "wal-control-plane did not listen"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child
}

/// Waits until `ready` says so, or panics naming `what` after [`BACK_LIMIT`]. Not the test
/// kit's `eventually`: that asks every 100 ms, and each check here makes a Kafka client and
/// asks the brokers for metadata, beside the load the drill measures.
async fn back<F, Fut>(what: &str, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !ready().await {
        assert!(
            started.elapsed() < BACK_LIMIT,
            "{what}: not within {BACK_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether every partition of the topics whose names start with `prefix` has all its replicas
/// in sync, as the brokers report it: the check before the next broker of a rolling restart.
fn in_sync(prefix: &str) -> bool {
    let client: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_bootstrap())
        .create()
        .expect("a client for the metadata");
    let Ok(metadata) = client.fetch_metadata(None, Duration::from_secs(5)) else {
        return false;
    };
    let topics: Vec<_> = metadata
        .topics()
        .iter()
        .filter(|t| t.name().starts_with(prefix))
        .collect();
    !topics.is_empty()
        && topics.iter().all(|t| {
            t.error().is_none()
                && t.partitions()
                    .iter()
                    .all(|p| p.leader() >= 0 && p.isr().len() == p.replicas().len())
        })
}

async fn roll_service(service: String, namespace: &str) {
    let down = service.clone();
    tokio::task::spawn_blocking(move || stack("down", &down))
        .await
        .unwrap();
    let up = service.clone();
    tokio::task::spawn_blocking(move || stack("up", &up))
        .await
        .unwrap();
    if service.starts_with("kafka") {
        let prefix = namespace.to_owned();
        back(&format!("{service}'s partitions in sync"), || {
            let prefix = prefix.clone();
            async move {
                tokio::task::spawn_blocking(move || in_sync(&prefix))
                    .await
                    .unwrap()
            }
        })
        .await;
    } else {
        // The node answers; its peers' gossip marks it up within seconds.
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
}

pub async fn drill(writers: usize, steady: Duration) -> Row {
    if !on_the_clustered_stack() {
        return not_on_the_clustered_stack("cluster-rolling");
    }
    let builds = Builds {
        first: std::env::var_os("DRILL_PREVIOUS_BIN").map(PathBuf::from),
    };
    let upgrade = builds.first.clone();
    let (mut tiers, applied, namespace, groups) = start(builds).await;
    let load = Writers::start(
        &tiers.channels,
        &namespace,
        (writers, "rolling"),
        applied.payload(),
    );
    let started = Instant::now();
    tokio::time::sleep(steady).await;
    let took = roll_every_tier(&mut tiers, &namespace, &groups, &load).await;
    tokio::time::sleep(steady).await;
    let last = Instant::now();
    let (answers, _, attempts) = load.stop().await;
    let outcome = settle(&answers, &applied, last).await;
    let rolled = Rolled {
        tiers,
        started,
        upgrade,
        took,
    };
    row(rolled, &answers, &attempts, outcome)
}

/// The tiers on the first build, following a control plane that holds the drill's namespace
/// (its target Cassandra): the tiers, the target, the namespace's name and its consumer groups.
async fn start(builds: Builds) -> (Tiers, Applied, String, Vec<String>) {
    let mut tiers = Tiers::start(builds).await;
    let applied = Applied::cql().await;
    let text = wal_testkit::namespace_json(Backend::Kafka, 2, &applied.target(), "");
    let namespace = wal_namespaces::parse(&text, "drill").unwrap();
    let mut registry = NamespaceRegistryClient::connect(format!("http://{}", tiers.control_listen))
        .await
        .expect("the control plane");
    wal_testkit::apply_config(&mut registry, &text).await;
    tiers.start_fleet().await;
    let groups: Vec<String> = namespace
        .queues
        .iter()
        .map(|q| format!("wal-consumer.{}", q.name))
        .collect();
    (tiers, applied, namespace.name, groups)
}

/// Restarts every tier's processes one at a time, in an upgrade's order, each once the one
/// before is back: how long each took, as the row's notes name it.
async fn roll_every_tier(
    tiers: &mut Tiers,
    namespace: &str,
    groups: &[String],
    load: &Writers,
) -> Vec<String> {
    let mut took = Vec::new();
    let mut step = |what: String, since: Instant| {
        println!(
            "  {what} restarted and back after {:.1} s; {} writes answered so far",
            since.elapsed().as_secs_f64(),
            load.answered()
        );
        took.push(format!("{what} {:.0} s", since.elapsed().as_secs_f64()));
    };
    let since = Instant::now();
    tiers.roll_control_plane().await;
    step("control plane".into(), since);
    for n in 1..=MEMBERS {
        let since = Instant::now();
        roll_service(format!("kafka-{n}"), namespace).await;
        step(format!("kafka-{n}"), since);
    }
    for n in 1..=MEMBERS {
        let since = Instant::now();
        roll_service(format!("cassandra-{n}"), namespace).await;
        step(format!("cassandra-{n}"), since);
    }
    for i in 0..PRODUCERS {
        let since = Instant::now();
        tiers.roll_producer(i).await;
        step(format!("producer {i}"), since);
    }
    for i in 0..CONSUMERS {
        let since = Instant::now();
        tiers.roll_consumer(i, groups).await;
        step(format!("consumer {i}"), since);
    }
    took
}

/// What the rolling restart left for the row: the tiers (their stops), when the load started,
/// the build upgraded from, and what each restart took.
struct Rolled {
    tiers: Tiers,
    started: Instant,
    upgrade: Option<PathBuf>,
    took: Vec<String>,
}

/// The drill's row: attempts answered FALSE (the goal: none), the stops that needed SIGKILL,
/// and what the restarts took. Stops the tiers.
fn row(rolled: Rolled, answers: &Answers, attempts: &Attempts, outcome: Outcome) -> Row {
    let Rolled {
        tiers,
        started,
        upgrade,
        took,
    } = rolled;
    let false_attempts: usize = answers
        .top_reasons(usize::MAX)
        .iter()
        .filter(|(answer, _, _)| *answer == Answer::False)
        .map(|(_, _, n)| n)
        .sum();
    let written = outcome.written.max(1) as f64;
    let first = attempts.first_not_true();
    let mut broken = Vec::new();
    if false_attempts > 0 {
        broken.push(format!(
            "{false_attempts} attempts were answered FALSE during the rolling restart"
        ));
    }
    if tiers.killed > 0 {
        broken.push(format!(
            "{} processes did not stop within {STOP_LIMIT:?} of SIGTERM",
            tiers.killed
        ));
    }
    let stops = tiers.stops.join(", ");
    drop(tiers);
    Row {
        drill: "cluster-rolling",
        backend: Backend::Kafka,
        faults: format!(
            "a rolling restart over {:.0} s{}: control plane, 3 brokers, 3 Cassandra nodes, \
             {PRODUCERS} producers, {CONSUMERS} consumers, one at a time, SIGTERM",
            started.elapsed().as_secs_f64(),
            upgrade.map_or_else(String::new, |from| format!(
                ", from the build in {} to this one",
                from.display()
            ))
        ),
        notes: format!(
            "attempts answered FALSE: {false_attempts} (goal 0); first attempts not TRUE: \
             {first} ({:.3}%, retried on the other producer); restarted and back: {}; \
             stops: {stops}",
            100.0 * first as f64 / written,
            took.join(", ")
        ),
        outcome,
        broken,
    }
}
