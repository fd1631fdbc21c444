//! Applying a replay's entries: in lanes by key, so the entries of one key are applied one after
//! another in the order their partition holds them (the order they were written), while other
//! keys go in parallel; at a bounded rate; a retryable failure tried again a few times. Tracks,
//! per partition (or archive shard), the offset (or write time) below which everything was
//! applied, for the checkpoint: an entry that failed stays unfinished, so running the replay
//! again starts at it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use governor::DefaultDirectRateLimiter;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::Instrument as _;
use wal_namespaces::Namespace;
use wal_queue::entry::{Body, Entry, Target as TargetSpec};
use wal_runtime::trace_context;

/// Tries of one entry whose failures are retryable.
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// Entries queued per lane ahead of its applier.
const LANE_DEPTH: usize = 64;
/// Failed ids the report names (the counts cover them all).
const FAILED_IDS_SHOWN: usize = 20;

/// How a replay applies one entry.
#[derive(Debug)]
pub struct Applier {
    /// The consumer's apply side: payload, target, timeout.
    pub apply: wal_apply::applier::Applier,
    pub namespace: Namespace,
    /// --target-kind/--target-settings: every entry goes there instead of its own target.
    pub target: Option<TargetSpec>,
    /// The namespace's default target, for entries that name none (as the consumer does).
    pub default_target: Option<TargetSpec>,
    pub limiter: DefaultDirectRateLimiter,
}

/// One entry to apply, and where it sits.
#[derive(Debug)]
pub struct Job {
    pub entry: Entry,
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    /// Where reading stands with this record: everything before it was read. A topic's next
    /// offset; in an archive shard, the record's own write time, as more rows may share it.
    pub read_to: i64,
}

/// What the lanes did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub applied: u64,
    /// Entries that failed, or were lost with a lane that stopped.
    pub failures: u64,
    /// Failure reasons and how many entries each.
    pub failed: BTreeMap<String, u64>,
    pub failed_ids: Vec<String>,
    pub keys: foldhash::HashSet<String>,
}

#[derive(Debug, Default)]
struct Partition {
    /// Offsets handed to a lane and not finished, with how many records hold each: an archive
    /// shard's positions are write times, which two entries may share.
    pending: BTreeMap<i64, u32>,
    /// The offset after the last record read.
    read_to: i64,
}

type Progress = Mutex<BTreeMap<(Arc<str>, i32), Partition>>;

#[derive(Debug)]
pub struct Lanes {
    senders: Vec<mpsc::Sender<Job>>,
    tasks: JoinSet<()>,
    progress: Arc<Progress>,
    outcome: Arc<Mutex<Outcome>>,
}

impl Lanes {
    pub fn start(count: usize, applier: Arc<Applier>) -> Self {
        let progress: Arc<Progress> = Arc::default();
        let outcome: Arc<Mutex<Outcome>> = Arc::default();
        let mut senders = Vec::new();
        let mut tasks = JoinSet::new();
        for _ in 0..count.max(1) {
            let (sender, mut jobs) = mpsc::channel::<Job>(LANE_DEPTH);
            senders.push(sender);
            let applier = Arc::clone(&applier);
            let progress = Arc::clone(&progress);
            let outcome = Arc::clone(&outcome);
            tasks.spawn(async move {
                while let Some(job) = jobs.recv().await {
                    let result = applier.apply(&job.entry).await;
                    let applied = result.is_ok();
                    record(&outcome, &job.entry, result);
                    // A failed entry stays pending: the checkpoint does not pass it.
                    if applied {
                        let mut progress = progress.lock().unwrap_or_else(PoisonError::into_inner);
                        if let Some(partition) = progress.get_mut(&(job.topic, job.partition))
                            && let Some(count) = partition.pending.get_mut(&job.offset)
                        {
                            *count -= 1;
                            if *count == 0 {
                                partition.pending.remove(&job.offset);
                            }
                        }
                    }
                }
            });
        }
        Self {
            senders,
            tasks,
            progress,
            outcome,
        }
    }

    /// Hands the entry to its key's lane (waiting while the lane is full).
    pub async fn submit(&self, job: Job) {
        self.read(&job.topic, job.partition, job.read_to, Some(job.offset));
        let lane = lane_of(&job.entry.key, self.senders.len());
        // A lane ends only when its task panicked: the entry fails (and stays pending).
        if let Err(lost) = self.senders[lane].send(job).await {
            record(
                &self.outcome,
                &lost.0.entry,
                Err("its lane stopped (a bug: please report it)".to_owned()),
            );
        }
    }

    /// Reading went past `read_to` with nothing to apply there: a record left out by the
    /// selection, or the end of an archive shard.
    pub fn passed(&self, topic: &Arc<str>, partition: i32, read_to: i64) {
        self.read(topic, partition, read_to, None);
    }

    fn read(&self, topic: &Arc<str>, partition: i32, read_to: i64, pending: Option<i64>) {
        let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = progress.entry((Arc::clone(topic), partition)).or_default();
        entry.read_to = entry.read_to.max(read_to);
        if let Some(offset) = pending {
            *entry.pending.entry(offset).or_default() += 1;
        }
    }

    /// A view of the progress, for saving it while the lanes work.
    pub fn watcher(&self) -> Watcher {
        Watcher {
            progress: Arc::clone(&self.progress),
            outcome: Arc::clone(&self.outcome),
        }
    }

    /// Waits for every lane to finish what it was given. A lane that panicked counts as a
    /// failure, so the run does not pass for complete.
    pub async fn finish(mut self) -> Outcome {
        self.senders.clear();
        while let Some(joined) = self.tasks.join_next().await {
            if let Err(error) = joined {
                let mut outcome = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
                outcome.failures += 1;
                *outcome
                    .failed
                    .entry(format!("a lane stopped: {error}"))
                    .or_default() += 1;
            }
        }
        std::mem::take(&mut *self.outcome.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn record(outcome: &Mutex<Outcome>, entry: &Entry, result: Result<(), String>) {
    let mut outcome = outcome.lock().unwrap_or_else(PoisonError::into_inner);
    match result {
        Ok(()) => {
            outcome.applied += 1;
            if !outcome.keys.contains(&entry.key) {
                outcome.keys.insert(entry.key.clone());
            }
        }
        Err(reason) => {
            outcome.failures += 1;
            *outcome.failed.entry(reason).or_default() += 1;
            if outcome.failed_ids.len() < FAILED_IDS_SHOWN {
                outcome.failed_ids.push(entry.id.clone());
            }
        }
    }
}

/// The lanes' progress, readable from another task.
#[derive(Debug, Clone)]
pub struct Watcher {
    progress: Arc<Progress>,
    outcome: Arc<Mutex<Outcome>>,
}

impl Watcher {
    /// Per topic and partition touched so far, the offset below which every record is done.
    pub fn positions(&self) -> Vec<(String, i32, i64)> {
        let progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        progress
            .iter()
            .map(|((topic, partition), state)| {
                let done = state
                    .pending
                    .first_key_value()
                    .map_or(state.read_to, |(offset, _)| *offset);
                (topic.to_string(), *partition, done)
            })
            .collect()
    }

    pub fn applied(&self) -> u64 {
        self.outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .applied
    }
}

impl Applier {
    /// Applies the entry through the consumer's target code, trying a retryable failure again.
    async fn apply(&self, entry: &Entry) -> Result<(), String> {
        // As the consumer: --target, else the entry's own, else the namespace's default.
        let spec = self
            .target
            .as_ref()
            .or(entry.target.as_ref())
            .or(self.default_target.as_ref());
        let mut backoff = FIRST_BACKOFF;
        self.limiter.until_ready().await;
        for attempt in 1..=ATTEMPTS {
            let applied = match &entry.body {
                // A commit marker: its staged items again, each to its own target (or --target).
                Some(Body::Transaction(marker)) => {
                    let over = self.target.as_ref();
                    self.apply
                        .replay_transaction(&self.namespace, entry, marker, over)
                        .await
                }
                _ => {
                    let span = replay_span(entry);
                    let onward = trace_context::onward(&span, &Default::default());
                    let trace = Some(&onward).filter(|onward| !onward.is_empty());
                    self.apply
                        .apply(&self.namespace, entry, spec, trace)
                        .instrument(span)
                        .await
                }
            };
            match applied {
                Ok(()) => return Ok(()),
                Err(error) if error.is_retryable() && attempt < ATTEMPTS => {
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
                Err(error) => return Err(error.to_string()),
            }
        }
        Err("no attempt was made".to_owned())
    }
}

/// The lane of a key, so one key always goes to one lane.
fn lane_of(key: &str, lanes: usize) -> usize {
    let hash = wal_queue::entry::key_hash(key.as_bytes());
    usize::try_from(hash % lanes.max(1) as u64).unwrap_or(0)
}

/// An entry re-applied by a replay, as a span linked to the write it repeats, when walctl
/// exports spans; none otherwise.
fn replay_span(entry: &Entry) -> tracing::Span {
    let span = wal_runtime::process::trace_span(
        || tracing::info_span!("replay_apply", namespace = %entry.namespace, entry_id = %entry.id),
    );
    trace_context::link(&span, &entry.trace_context);
    span
}
