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

/// How long one write may wait for the producer: past it, the client gives up (no answer).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a drill waits for its TRUE writes to be applied once its faults are over.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(600);

/// What a write was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    True,
    False,
    Unknown,
    /// RESOURCE_EXHAUSTED: the namespace was over its limits; nothing was stored.
    Shed,
    /// Another error, or no answer within [`CALL_TIMEOUT`].
    Refused,
}

/// Each write's answer by its id, and the latency of every answered call.
#[derive(Debug, Default)]
pub struct Answers {
    by_id: Mutex<HashMap<String, Answer>>,
    latencies_ms: Mutex<Vec<f64>>,
    /// Why writes were not answered TRUE: the answer and its message, counted.
    reasons: Mutex<HashMap<(Answer, String), usize>>,
}

impl Answers {
    pub fn record(&self, id: String, answer: Answer, took: Duration) {
        self.by_id.lock().unwrap().insert(id, answer);
        if answer != Answer::Refused {
            self.latencies_ms
                .lock()
                .unwrap()
                .push(took.as_secs_f64() * 1e3);
        }
    }

    pub fn reason(&self, answer: Answer, message: &str) {
        // Digits vary from write to write (ids, counts); without them alike reasons add up.
        let message: String = message
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .take(160)
            .collect();
        *self
            .reasons
            .lock()
            .unwrap()
            .entry((answer, message))
            .or_default() += 1;
    }

    /// The most frequent reasons writes were not answered TRUE, most frequent first.
    pub fn top_reasons(&self, most: usize) -> Vec<(Answer, String, usize)> {
        let mut reasons: Vec<_> = self
            .reasons
            .lock()
            .unwrap()
            .iter()
            .map(|((answer, message), n)| (*answer, message.clone(), *n))
            .collect();
        reasons.sort_by_key(|r| std::cmp::Reverse(r.2));
        reasons.truncate(most);
        reasons
    }

    /// Makes `call` (WriteToLog, or a call answering as it does), giving up after
    /// [`CALL_TIMEOUT`], and records its answer under `id`.
    pub async fn call(
        &self,
        id: String,
        call: impl Future<Output = Result<tonic::Response<WriteToLogResponse>, tonic::Status>>,
    ) -> Answer {
        let started = Instant::now();
        let (answer, message) = match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(response)) => {
                let response = response.into_inner();
                let answer = match response.durable() {
                    Trilean::True => Answer::True,
                    Trilean::False => Answer::False,
                    _ => Answer::Unknown,
                };
                (answer, response.message)
            }
            Ok(Err(status)) if status.code() == tonic::Code::ResourceExhausted => {
                (Answer::Shed, status.message().to_owned())
            }
            Ok(Err(status)) => (
                Answer::Refused,
                format!("{}: {}", status.code(), status.message()),
            ),
            Err(_) => (
                Answer::Refused,
                format!("no answer within {CALL_TIMEOUT:?}"),
            ),
        };
        if answer != Answer::True {
            self.reason(answer, &message);
        }
        self.record(id, answer, started.elapsed());
        answer
    }

    pub fn with(&self, answer: Answer) -> Vec<String> {
        let by_id = self.by_id.lock().unwrap();
        by_id
            .iter()
            .filter(|(_, a)| **a == answer)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// How many writes got each answer, by the table's column names.
    pub fn tally(&self) -> HashMap<&'static str, usize> {
        [
            ("true", Answer::True),
            ("false", Answer::False),
            ("unknown", Answer::Unknown),
            ("shed", Answer::Shed),
            ("refused", Answer::Refused),
        ]
        .into_iter()
        .map(|(name, answer)| (name, self.count(answer)))
        .collect()
    }

    pub fn ids(&self) -> Vec<String> {
        self.by_id.lock().unwrap().keys().cloned().collect()
    }

    pub fn count(&self, answer: Answer) -> usize {
        self.by_id
            .lock()
            .unwrap()
            .values()
            .filter(|a| **a == answer)
            .count()
    }

    pub fn len(&self) -> usize {
        self.by_id.lock().unwrap().len()
    }

    /// The answers of `all`, together (ids are unique across drills' writers).
    pub fn merged(all: &[&Self]) -> Self {
        let merged = Self::default();
        for answers in all {
            let theirs = answers.by_id.lock().unwrap().clone();
            merged.by_id.lock().unwrap().extend(theirs);
            for ((answer, message), n) in answers.reasons.lock().unwrap().iter() {
                *merged
                    .reasons
                    .lock()
                    .unwrap()
                    .entry((*answer, message.clone()))
                    .or_default() += n;
            }
        }
        merged
    }

    /// The latencies recorded so far, taken out (the next call starts a new sample).
    pub fn take_latencies(&self) -> Vec<f64> {
        std::mem::take(&mut *self.latencies_ms.lock().unwrap())
    }
}

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

/// Where a drill reads back what was applied.
pub enum Applied {
    /// An http target: every delivery, so duplicates are counted.
    Http(Upstream),
    /// A cql table `(id, value)`: a row per id, so duplicates cannot be told (an upsert).
    Cql { cql: Box<Cql>, table: String },
    /// Regions' caches (cross-region replication): an id is applied once every region's
    /// memcached holds its key; memcached lists nothing, so only the ids asked about are known.
    Regions {
        caches: Vec<memcache::exp::AsyncMetaClient>,
        target: String,
    },
}

impl Applied {
    pub async fn cql() -> Self {
        let cql = Cql::connect().await;
        let table = cql.table().await;
        Self::Cql {
            cql: Box::new(cql),
            table,
        }
    }

    /// The target config JSON that writes here.
    pub fn target(&self) -> String {
        match self {
            Self::Http(upstream) => upstream.target(),
            Self::Cql { table, .. } => wal_testkit::cql_target(table),
            Self::Regions { target, .. } => target.clone(),
        }
    }

    pub fn payload(&self) -> Payload {
        match self {
            Self::Http(_) => body,
            Self::Cql { .. } => row,
            Self::Regions { .. } => |id| wal_testkit::cache_set(id, "v").into_bytes(),
        }
    }

    /// How many times each id was applied (of `asked`, where the target cannot list them); for
    /// regions, in how many regions. Err when the target cannot be read now.
    pub async fn counts(&self, asked: &[String]) -> Result<HashMap<String, usize>, String> {
        match self {
            Self::Regions { caches, .. } => {
                use futures::StreamExt as _;
                Ok(futures::stream::iter(asked)
                    .map(|id| async move {
                        let mut regions = 0;
                        for cache in caches {
                            if wal_testkit::cached(cache, id).await.is_some() {
                                regions += 1;
                            }
                        }
                        (regions > 0).then(|| (id.clone(), regions))
                    })
                    .buffer_unordered(64)
                    .filter_map(|applied| async move { applied })
                    .collect()
                    .await)
            }
            Self::Http(upstream) => {
                let mut counts = HashMap::new();
                for body in upstream.bodies() {
                    *counts.entry(body).or_default() += 1;
                }
                Ok(counts)
            }
            Self::Cql { cql, table } => {
                use futures::TryStreamExt as _;
                // Cassandra may be away (the outage drill reads while it comes back).
                let select = format!("SELECT id FROM {KEYSPACE}.{table}");
                let pager = cql
                    .session
                    .query_iter(select, ())
                    .await
                    .map_err(|e| e.to_string())?;
                pager
                    .rows_stream::<(String,)>()
                    .map_err(|e| e.to_string())?
                    .map_ok(|(id,)| (id, 1))
                    .try_collect()
                    .await
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Whether an id [`counts`](Self::counts) gave `n` is applied whole: in every region, or
    /// delivered at least once.
    pub fn whole(&self, n: usize) -> bool {
        match self {
            Self::Regions { caches, .. } => n >= caches.len(),
            _ => n >= 1,
        }
    }

    /// Whether [`counts`](Self::counts) sees each delivery, so duplicates can be told.
    pub fn counts_duplicates(&self) -> bool {
        matches!(self, Self::Http(_))
    }
}

/// What a drill's writes came to, once delivery is over.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The most frequent reasons writes were not answered TRUE.
    pub reasons: Vec<(Answer, String, usize)>,
    pub written: usize,
    pub answered: HashMap<&'static str, usize>,
    pub true_lost: usize,
    /// Writes answered FALSE or shed (both: nothing stored) that were applied all the same.
    pub false_applied: usize,
    pub duplicates: Option<usize>,
    /// From the end of the faults to the last TRUE write applied; None if not within the limit.
    pub recovered: Option<Duration>,
}

/// How long a drill waits, once every TRUE write is applied, for what may still come: writes
/// answered otherwise but stored after all, an SQS message seen again after its visibility
/// timeout (30 s), a marker a producer's sweep sends again (every 30 s). 35 s; 5 s in a smoke run.
static STRAGGLERS: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

pub fn set_stragglers(wait: Duration) {
    let _ = STRAGGLERS.set(wait);
}

pub fn stragglers() -> Duration {
    STRAGGLERS.get().copied().unwrap_or(Duration::from_secs(35))
}

/// What the target holds for `asked`, read until it answers (60 s at most: then the drill
/// cannot tell, and stops).
async fn read_back(applied: &Applied, asked: &[String]) -> HashMap<String, usize> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match applied.counts(asked).await {
            Ok(counts) => return counts,
            Err(e) if Instant::now() > deadline => {
                panic!("the drill could not read back what was applied: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// Waits (up to [`DRAIN_LIMIT`] after `since`) until every write answered TRUE is applied, waits
/// [`stragglers`] more, and counts.
pub async fn settle(answers: &Answers, applied: &Applied, since: Instant) -> Outcome {
    settle_where(answers, applied, since, |_| true).await
}

/// Like [`settle`], where only the TRUE writes whose id `must_apply` picks must be applied (the
/// others end elsewhere, on a DLQ say, which the drill checks itself).
pub async fn settle_where(
    answers: &Answers,
    applied: &Applied,
    since: Instant,
    must_apply: impl Fn(&str) -> bool,
) -> Outcome {
    let true_ids: Vec<String> = answers
        .with(Answer::True)
        .into_iter()
        .filter(|id| must_apply(id))
        .collect();
    let whole = |counts: &HashMap<String, usize>, id: &String| {
        counts.get(id).is_some_and(|n| applied.whole(*n))
    };
    let mut recovered = None;
    while since.elapsed() < DRAIN_LIMIT {
        if let Ok(counts) = applied.counts(&true_ids).await
            && true_ids.iter().all(|id| whole(&counts, id))
        {
            recovered = Some(since.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(stragglers()).await;
    let counts = read_back(applied, &answers.ids()).await;
    // FALSE and shed (RESOURCE_EXHAUSTED) both promise that nothing was stored.
    let not_stored: Vec<String> = [Answer::False, Answer::Shed]
        .iter()
        .flat_map(|a| answers.with(*a))
        .collect();
    Outcome {
        reasons: answers.top_reasons(3),
        written: answers.len(),
        answered: answers.tally(),
        true_lost: true_ids.iter().filter(|id| !whole(&counts, id)).count(),
        false_applied: not_stored
            .iter()
            .filter(|id| counts.contains_key(*id))
            .count(),
        duplicates: applied.counts_duplicates().then(|| {
            counts
                .iter()
                .filter(|(id, _)| must_apply(id))
                .map(|(_, n)| n - 1)
                .sum()
        }),
        recovered,
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
