//! The load every drill puts on the platform: writers sending unique, checkable writes through
//! WriteToLog, each answer recorded by id, and the count of what was applied at the end.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::{Trilean, WriteToLogResponse};
use wal_testkit::{Cql, KEYSPACE, Upstream, unique, write};

mod answers;
mod applied;

pub use self::answers::{Answer, Answers};
pub use self::applied::{Applied, Outcome, set_stragglers, settle, settle_where, stragglers};

/// How long one write may wait for the producer: past it, the client gives up (no answer).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a drill waits for its TRUE writes to be applied once its faults are over.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(600);

/// Sends one write with `id` and records its answer.
pub async fn send(
    channel: Channel,
    namespace: &str,
    id: String,
    payload: Vec<u8>,
    answers: &Answers,
) -> Answer {
    let mut request = write(namespace, &payload);
    request.idempotency_id = id.clone();
    let mut client = WriteAheadLogClient::new(channel);
    answers.call(id, client.write_to_log(request)).await
}

/// Writes each of `ids` once, `concurrency` at a time (a backlog for the consumer to work off).
pub async fn write_all(
    channel: &Channel,
    namespace: &str,
    ids: Vec<String>,
    payload: Payload,
    concurrency: usize,
) -> Arc<Answers> {
    use futures::StreamExt as _;
    let answers = Arc::new(Answers::default());
    futures::stream::iter(ids)
        .map(|id| {
            let (channel, answers) = (channel.clone(), Arc::clone(&answers));
            async move {
                let bytes = payload(&id);
                send(channel, namespace, id, bytes, &answers).await
            }
        })
        .buffer_unordered(concurrency)
        .collect::<Vec<_>>()
        .await;
    answers
}

/// How the payload of a write is made from its id: the body an http target posts, or a cql put.
pub type Payload = fn(&str) -> Vec<u8>;

pub fn body(id: &str) -> Vec<u8> {
    id.as_bytes().to_vec()
}

pub fn row(id: &str) -> Vec<u8> {
    wal_testkit::put(id, "v")
}

/// Closed-loop writers: each sends a write, waits for its answer, pauses `pace`, and goes on,
/// through whichever producer `channel` names now (a drill swaps it when it restarts one).
#[derive(Debug)]
pub struct Load {
    pub answers: Arc<Answers>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    pub fn start(
        namespace: &str,
        prefix: &str,
        writers: usize,
        pace: Duration,
        channel: &Arc<RwLock<Channel>>,
        payload: Payload,
    ) -> Self {
        let answers = Arc::new(Answers::default());
        let stop = CancellationToken::new();
        let tasks = (0..writers)
            .map(|w| {
                let (namespace, prefix) = (namespace.to_owned(), format!("{prefix}-w{w}"));
                let (channel, answers, stop) =
                    (Arc::clone(channel), Arc::clone(&answers), stop.clone());
                tokio::spawn(async move {
                    let mut n = 0u64;
                    while !stop.is_cancelled() {
                        let id = format!("{prefix}-{n}");
                        n += 1;
                        let current = channel.read().unwrap().clone();
                        let answer =
                            send(current, &namespace, id.clone(), payload(&id), &answers).await;
                        // A refused write means the producer is away: wait a little longer.
                        let pause = if answer == Answer::Refused {
                            Duration::from_millis(200)
                        } else {
                            pace
                        };
                        tokio::time::sleep(pause).await;
                    }
                })
            })
            .collect();
        Self {
            answers,
            stop,
            tasks,
        }
    }

    /// Stops the writers once their writes in flight are answered.
    pub async fn stop(self) -> Arc<Answers> {
        self.stop.cancel();
        for task in self.tasks {
            task.await.unwrap();
        }
        self.answers
    }
}

/// A drill's usual start: a namespace on `backend` (two queues) whose target is `applied`, a
/// producer and a consumer serving it (with `env` over the stack's defaults), and `writers`
/// writers at a 5 ms pace, their ids starting `prefix`.
pub async fn start_under_load(
    backend: wal_namespaces::Backend,
    applied: &Applied,
    env: Vec<(&'static str, String)>,
    prefix: &str,
    writers: usize,
) -> (crate::processes::Processes, Load) {
    let pace = Duration::from_millis(5);
    start_paced(backend, applied, env, prefix, writers, pace).await
}

/// As [`start_under_load`], each writer waiting `pace` after each answer before its next write.
pub async fn start_paced(
    backend: wal_namespaces::Backend,
    applied: &Applied,
    env: Vec<(&'static str, String)>,
    prefix: &str,
    writers: usize,
    pace: Duration,
) -> (crate::processes::Processes, Load) {
    let text = wal_testkit::namespace_json(backend, 2, &applied.target(), "");
    let name = wal_namespaces::parse(&text, "drill").unwrap().name;
    let processes =
        crate::processes::Processes::start_with_env(namespace_dir(&[(&name, &text)]), env).await;
    let load = Load::start(
        &name,
        prefix,
        writers,
        pace,
        &processes.channel,
        applied.payload(),
    );
    (processes, load)
}

/// A folder with one namespace file, for the producer and consumer processes to read.
pub fn namespace_dir(files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(unique("drill"));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(format!("{name}.json")), text).unwrap();
    }
    dir
}

/// The peak resident memory of a child process, in MiB. A process /proc cannot tell of fails the
/// drill: a 0 would pass every memory bound.
pub fn peak_mib(pid: u32) -> f64 {
    let bytes = wal_testkit::measure::peak_rss(pid).unwrap_or_else(|| {
        panic!("/proc/{pid}/status has no peak resident memory (VmHWM): is process {pid} running?")
    });
    bytes as f64 / (1024.0 * 1024.0)
}
