//! The platform under drill: a producer and a consumer as processes serving one folder of
//! namespace files, and the kills a drill deals them (and the broker) at random moments.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rand::Rng as _;
use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use std::net::SocketAddr;

use tonic::transport::Channel;
use wal_testkit::{
    KilledWhenDropped, ProducerProcess, cargo_bin, consumer_process_with_env, refusing_address,
    stack,
};

/// How long the producer waits for the broker before it answers UNKNOWN.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub struct Processes {
    dir: PathBuf,
    /// Set over the stack's defaults for both processes (a fault proxy's addresses, say).
    env: Vec<(&'static str, String)>,
    producer: ProducerProcess,
    /// None until started, for a drill that writes a backlog first.
    consumer: Option<KilledWhenDropped>,
    /// Regions' writers (the replication drill): each restarted on its own address.
    writers: Vec<RegionWriter>,
    /// The running producer: writers read it for each write, a restart swaps it.
    pub channel: Arc<RwLock<Channel>>,
}

/// A `wal-writer` process for a region, applying to that region's memcached.
#[derive(Debug)]
struct RegionWriter {
    region: &'static str,
    address: SocketAddr,
    memcached: String,
    child: std::process::Child,
}

fn writer_process(region: &str, address: SocketAddr, memcached: &str) -> std::process::Child {
    std::process::Command::new(cargo_bin("wal-writer"))
        .env("WAL_WRITER_LISTEN", address.to_string())
        .env("WAL_WRITER_METRICS_LISTEN", "127.0.0.1:0")
        .env("WAL_REGION", region)
        .env("WAL_MEMCACHED", memcached)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start wal-writer (cargo build -p wal-writer)")
}

/// Starts a `wal-writer` for `region`, applying to `memcached`; returns its address. Killed with
/// [`Processes::stop`].
pub fn start_writer(region: &'static str, memcached: &str) -> (SocketAddr, WriterHandle) {
    let address = refusing_address();
    let child = writer_process(region, address, memcached);
    (
        address,
        WriterHandle(RegionWriter {
            region,
            address,
            memcached: memcached.to_owned(),
            child,
        }),
    )
}

/// A started writer, for [`Processes::adopt_writer`].
#[derive(Debug)]
pub struct WriterHandle(RegionWriter);

impl Processes {
    pub async fn start(dir: PathBuf) -> Self {
        Self::start_with_env(dir, Vec::new()).await
    }

    pub async fn start_with_env(dir: PathBuf, env: Vec<(&'static str, String)>) -> Self {
        let mut processes = Self::start_producer(dir, env).await;
        processes.start_consumer();
        processes
    }

    /// The producer alone; [`start_consumer`](Self::start_consumer) adds the consumer.
    pub async fn start_producer(dir: PathBuf, env: Vec<(&'static str, String)>) -> Self {
        let producer = ProducerProcess::start_with_env(&dir, WRITE_TIMEOUT, &env).await;
        Self {
            channel: Arc::new(RwLock::new(producer.channel.clone())),
            dir,
            env,
            producer,
            consumer: None,
            writers: Vec::new(),
        }
    }

    /// Kills of `Kill::Writer(region)` restart this writer; [`stop`](Self::stop) kills it.
    pub fn adopt_writer(&mut self, writer: WriterHandle) {
        self.writers.push(writer.0);
    }

    pub fn start_consumer(&mut self) {
        self.stop_consumer();
        self.consumer = Some(consumer_process_with_env(&self.dir, &self.env));
    }

    fn stop_consumer(&mut self) {
        if let Some(mut consumer) = self.consumer.take() {
            stop_child(&mut consumer);
        }
    }

    pub fn producer_pid(&self) -> u32 {
        self.producer.child.id()
    }

    /// The consumer's pid; 0 when none runs.
    pub fn consumer_pid(&self) -> u32 {
        self.consumer.as_ref().map_or(0, |consumer| consumer.id())
    }

    /// kill -9 of `kill`'s process, then starts it again at once.
    pub async fn kill(&mut self, kill: Kill) {
        match kill {
            Kill::Producer => {
                self.producer.kill();
                self.producer =
                    ProducerProcess::start_with_env(&self.dir, WRITE_TIMEOUT, &self.env).await;
                *self.channel.write().unwrap() = self.producer.channel.clone();
            }
            Kill::Consumer => self.start_consumer(),
            Kill::Writer(region) => {
                for writer in self.writers.iter_mut().filter(|w| w.region == region) {
                    stop_child(&mut writer.child);
                    writer.child = writer_process(region, writer.address, &writer.memcached);
                }
            }
            Kill::Broker(service) => tokio::task::spawn_blocking(move || {
                stack("kill", service);
                stack("up", service);
            })
            .await
            .unwrap(),
        }
    }

    pub fn stop(mut self) {
        self.producer.kill();
        self.stop_consumer();
        for writer in &mut self.writers {
            stop_child(&mut writer.child);
        }
    }
}

/// How long a process sent SIGTERM has to exit before it is killed.
pub const STOP_LIMIT: Duration = Duration::from_secs(60);

/// Waits for `child`, sent SIGTERM at `since`, to exit, and kills it once [`STOP_LIMIT`] has
/// passed since then; reaps it either way. Whether it exited by itself.
pub async fn reap_within(mut child: KilledWhenDropped, since: std::time::Instant) -> bool {
    tokio::task::spawn_blocking(move || {
        while matches!(child.try_wait(), Ok(None)) {
            if since.elapsed() > STOP_LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    })
    .await
    .unwrap()
}

/// Kills a child process and reaps it.
pub fn stop_child(child: &mut std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kill {
    Producer,
    Consumer,
    /// A service of the stack (`kafka`, `elasticmq`).
    Broker(&'static str),
    /// A region's writer.
    Writer(&'static str),
}

impl Kill {
    fn label(self) -> String {
        match self {
            Self::Producer => "producer".to_owned(),
            Self::Consumer => "consumer".to_owned(),
            Self::Broker(service) => service.to_owned(),
            Self::Writer(region) => format!("{region} writer"),
        }
    }
}

/// The kills dealt, as a row's faults: "kill -9: 20 producer, 20 consumer, 20 kafka".
pub fn dealt(kinds: &[Kill], kills: &HashMap<Kill, usize>) -> String {
    let each: Vec<String> = kinds
        .iter()
        .map(|k| format!("{} {}", kills.get(k).copied().unwrap_or(0), k.label()))
        .collect();
    format!("kill -9: {}", each.join(", "))
}

/// `each` kills of every kind, shuffled, dealt 0.5 to 3 s apart; `progress` says how far the load
/// has come, for the log line after each kill. Returns how many of each were dealt.
pub async fn kill_at_random(
    processes: &mut Processes,
    kinds: &[Kill],
    each: usize,
    rng: &mut StdRng,
    progress: impl Fn() -> String,
) -> HashMap<Kill, usize> {
    let mut plan = kinds.repeat(each);
    plan.shuffle(rng);
    let mut dealt: HashMap<Kill, usize> = HashMap::new();
    for (i, kill) in plan.iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(rng.random_range(500..3_000))).await;
        processes.kill(*kill).await;
        *dealt.entry(*kill).or_default() += 1;
        println!(
            "  kill {} of {} ({kill:?}); {}",
            i + 1,
            plan.len(),
            progress()
        );
    }
    dealt
}
