//! A redrive: dead letters back onto their namespace queue, at a bounded rate, each at most
//! `max_redrives` times over its life, resumable after an interruption. Whoever runs it (the
//! control plane's Operations service, or `walctl dlq redrive --direct`) keeps its progress
//! through [`Progress`].
//!
//! Every redrive writes the copy to the queue first and records it as done second (Kafka: the
//! saved positions; SQS: deleting the DLQ message), so an interruption between the two redrives
//! that entry once more, never loses it. The copy keeps the entry's id, which an idempotent
//! target (CQL with the entry's write time, an http target honouring Idempotency-Key) applies
//! once.

use std::collections::BTreeMap;
use std::future::Future;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::{Quota, RateLimiter};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use wal_namespaces::Backend;
use wal_queue::kafka::scan;
use wal_queue::{Delivery, redrive_copy, replay_copy};

use super::DlqError;
use super::filter::{Filter, Verdict};
use super::history::{self, ReplaySettings};
use super::source::{DeadLetters, DlqHandle, SQS_MAX_HELD, release};
use crate::operations::selection::Selection;

/// How a dry run counts the entries it would redrive.
pub const WOULD_REDRIVE: &str = "would be redriven";
/// How a replay's dry run counts the entries it would put back.
pub const WOULD_REPLAY: &str = "would be replayed";

/// Topic -> partition -> the next offset to read, of each Kafka DLQ.
pub type Positions = BTreeMap<String, BTreeMap<i32, i64>>;

/// What a redrive is asked to do.
#[derive(Debug, Clone)]
pub struct RedriveSettings {
    pub filter: Filter,
    /// Entries redriven per second at most, so a recovering target is not flooded.
    pub rate: NonZeroU32,
    /// Entries already redriven this many times stay in the DLQ.
    pub max_redrives: u32,
    /// Count what would be redriven; change nothing.
    pub dry_run: bool,
    /// A replay instead: the namespace's own queues read over a range of write times, and the
    /// entries it takes put back (see `history`). `filter` and `max_redrives` then go unused.
    pub replay: Option<ReplaySettings>,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub read: u64,
    pub redriven: u64,
    /// Entries left in the DLQs, by reason (and in a dry run, those that would be redriven).
    pub passed: BTreeMap<&'static str, u64>,
    /// A replay's excluded ids it never read (a typo, or an entry outside the range), sorted,
    /// at most [`UNSEEN_LISTED`].
    pub excluded_unseen: Vec<String>,
}

/// How many excluded ids never read a report names.
pub const UNSEEN_LISTED: usize = 100;

/// Where a run's progress goes: a progress bar and a checkpoint file for walctl, the store for
/// the control plane.
pub trait Progress: Send {
    /// `more` entries to read were found (a Kafka DLQ's unread records, an SQS DLQ's backlog).
    fn found(&mut self, more: u64);
    /// One entry was read; `report` is the run's so far.
    fn read(&mut self, report: &Report);
    /// Where the Kafka DLQs are read to, to continue from after an interruption; `redriven`:
    /// entries this run has redriven. Called after each redrive, every 100 entries passed
    /// over, and at each DLQ's end (never in a dry run).
    fn save(
        &mut self,
        positions: &Positions,
        redriven: u64,
    ) -> impl Future<Output = Result<(), DlqError>> + Send;
    /// Something the operator should know that does not stop the run.
    fn warn(&mut self, message: String);
}

type Limiter = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    governor::clock::DefaultClock,
>;

struct Run<'a, P> {
    settings: &'a RedriveSettings,
    dead: &'a DeadLetters,
    /// When the run began: an SQS entry dead-lettered since (say, a redriven one that failed
    /// again) waits for the next run, as Kafka's records past the scan's ends do.
    started_micros: i64,
    limiter: Limiter,
    report: Report,
    progress: &'a mut P,
    stop: &'a CancellationToken,
    /// A replay's judge of which entries to take (none in a redrive).
    selection: Option<Selection>,
}

/// Redrives the DLQs of `dead` from `positions` (Kafka; advanced as it goes) until every DLQ is
/// read to its end as of the start, or `stop` (then [`DlqError::Stopped`], progress saved).
pub async fn redrive<P: Progress>(
    dead: &DeadLetters,
    settings: &RedriveSettings,
    positions: &mut Positions,
    progress: &mut P,
    stop: &CancellationToken,
) -> Result<Report, DlqError> {
    let mut run = Run {
        settings,
        dead,
        started_micros: wal_queue::entry::now_micros(),
        // A burst of one: the rate holds from the first entry, not after a burst.
        limiter: RateLimiter::direct(Quota::per_second(settings.rate).allow_burst(NonZeroU32::MIN)),
        report: Report::default(),
        progress,
        stop,
        selection: settings.replay.as_ref().map(ReplaySettings::selection),
    };
    if let Some(replay) = &settings.replay {
        let streams = dead.history();
        // Every stream's range checked before anything is put back.
        let mut bounds = Vec::new();
        for stream in &streams {
            bounds.push(history::prepare(dead, stream, replay, positions).await?);
        }
        for (stream, bounds) in streams.iter().zip(bounds) {
            run.replay(stream, bounds, positions).await?;
        }
        if let Some(selection) = &run.selection {
            run.report.excluded_unseen = selection
                .excluded_unseen()
                .into_iter()
                .take(UNSEEN_LISTED)
                .cloned()
                .collect();
        }
        return Ok(run.report);
    }
    for dlq in &dead.dlqs {
        match dlq.backend {
            Backend::Kafka => run.kafka(dlq, positions).await?,
            Backend::Sqs => run.sqs(dlq).await?,
        }
    }
    Ok(run.report)
}

impl<P: Progress> Run<'_, P> {
    async fn kafka(&mut self, dlq: &DlqHandle, positions: &mut Positions) -> Result<(), DlqError> {
        let from = positions.get(&dlq.name).cloned().unwrap_or_default();
        let bounds = history::Bounds {
            starts: from,
            ends: BTreeMap::new(),
            done: BTreeMap::new(),
        };
        self.read(dlq, bounds, positions).await
    }

    /// A replay's read of one of the namespace's queues: its range, never more (a DLQ's reader
    /// goes on from what is left when retention removes records; a replay must not).
    async fn replay(
        &mut self,
        stream: &DlqHandle,
        bounds: history::Bounds,
        positions: &mut Positions,
    ) -> Result<(), DlqError> {
        self.read(stream, bounds, positions).await
    }

    async fn read(
        &mut self,
        dlq: &DlqHandle,
        bounds: history::Bounds,
        positions: &mut Positions,
    ) -> Result<(), DlqError> {
        let history::Bounds { starts, ends, done } = bounds;
        let gaps = if self.selection.is_some() {
            scan::Gaps::Fail
        } else {
            scan::Gaps::Skip
        };
        let mut scan = self.dead.scan(dlq, starts, ends, gaps).await?;
        if self.selection.is_some() {
            let reading = self.report.read + scan.unread();
            if reading > history::MOST_ENTRIES {
                return Err(DlqError::Usage(format!(
                    "the range holds more than {} entries ({reading} to read); replay it in parts (--from and --to), or with walctl replay --direct",
                    history::MOST_ENTRIES
                )));
            }
            if !self.settings.dry_run {
                history::keep_ends(dlq, &scan.ends, positions);
            }
        }
        let what = if self.selection.is_some() {
            "queue"
        } else {
            "DLQ"
        };
        for partition in &scan.reset {
            self.progress.warn(format!(
                "{what} '{}' partition {partition} is shorter than the saved progress says (the topic was made again?); reading it from its start",
                dlq.name
            ));
        }
        self.progress.found(scan.unread());
        // Where each partition has been read to, by this run.
        let mut read_to = scan.starts.clone();
        let mut unsaved = 0;
        loop {
            let record = tokio::select! {
                record = scan.records.recv() => record,
                () = self.stop.cancelled() => None,
            };
            let Some(record) = record else { break };
            let record = record
                .map_err(|e| DlqError::Broker(format!("reading {what} '{}': {e}", dlq.name)))?;
            // Taken by an earlier run of this replay: only noted, so its later copies are not
            // taken again.
            if done
                .get(&record.partition)
                .is_some_and(|done| record.offset < *done)
            {
                if let (Some(selection), Ok(entry)) = (&mut self.selection, &record.entry) {
                    selection.remember(entry);
                }
                read_to.insert(record.partition, record.offset + 1);
                continue;
            }
            let verdict = match &record.entry {
                Ok(entry) => self.judge(entry),
                Err(_) => Verdict::Pass("undecodable"),
            };
            let redriven = match (&verdict, &record.entry) {
                (Verdict::Take, Ok(entry)) => self.redrive(entry).await?,
                _ => false,
            };
            self.count(&verdict);
            read_to.insert(record.partition, record.offset + 1);
            if self.settings.dry_run {
                continue;
            }
            positions
                .entry(dlq.name.clone())
                .or_default()
                .insert(record.partition, record.offset + 1);
            unsaved += 1;
            // Saved after each redrive, so a kill repeats at most one; passed-over entries
            // are only read again, so those are saved in batches.
            if redriven || unsaved >= 100 {
                self.progress.save(positions, self.report.redriven).await?;
                unsaved = 0;
            }
        }
        if self.stop.is_cancelled() {
            if !self.settings.dry_run {
                self.progress.save(positions, self.report.redriven).await?;
            }
            return Err(DlqError::Stopped);
        }
        // The scan ends only when every partition reached its end, or after an error sent
        // first; anything else would leave dead letters unread, so it is checked, not assumed.
        for (partition, end) in &scan.ends {
            if read_to.get(partition).copied().unwrap_or(0) < *end {
                return Err(DlqError::Broker(format!(
                    "reading {what} '{}' stopped before the end of partition {partition}; start it again to continue",
                    dlq.name
                )));
            }
        }
        if !self.settings.dry_run {
            // Also records partitions that had nothing to read, and those read from the start.
            positions.insert(dlq.name.clone(), scan.ends.clone());
            self.progress.save(positions, self.report.redriven).await?;
        }
        Ok(())
    }

    async fn sqs(&mut self, dlq: &DlqHandle) -> Result<(), DlqError> {
        let backlog = dlq.queue.backlog().await.ok().flatten().unwrap_or(0);
        self.progress.found(backlog);
        // Passed-over messages stay hidden until the end, so this run does not read them twice;
        // they are made visible again however the run ends.
        let mut passed = Vec::new();
        let result = self.sqs_receiving(dlq, &mut passed).await;
        release(dlq, &passed).await;
        result
    }

    async fn sqs_receiving(
        &mut self,
        dlq: &DlqHandle,
        passed: &mut Vec<Delivery>,
    ) -> Result<(), DlqError> {
        loop {
            if self.stop.is_cancelled() {
                return Err(DlqError::Stopped);
            }
            let batch = dlq
                .queue
                .receive(10, Duration::from_secs(1))
                .await
                .map_err(|e| DlqError::Broker(format!("reading DLQ '{}': {e}", dlq.name)))?;
            if batch.is_empty() {
                return Ok(());
            }
            for delivery in batch {
                let verdict = match &delivery.entry {
                    Ok(entry) if entry.dead_lettered_at_micros >= self.started_micros => {
                        Verdict::Pass("dead-lettered during this run (the next run takes it)")
                    }
                    Ok(entry) => self
                        .settings
                        .filter
                        .judge_redrive(entry, self.settings.max_redrives),
                    Err(_) => Verdict::Pass("undecodable"),
                };
                self.count(&verdict);
                let redriven = match (&verdict, &delivery.entry) {
                    (Verdict::Take, Ok(entry)) => self.redrive(entry).await?,
                    _ => false,
                };
                if redriven {
                    dlq.queue.acknowledge(&delivery).await.map_err(|e| {
                        DlqError::Broker(format!(
                            "an entry was redriven but could not be deleted from DLQ '{}' ({e}); it will be redriven again by the next run",
                            dlq.name
                        ))
                    })?;
                } else {
                    passed.push(delivery);
                }
                if passed.len() >= SQS_MAX_HELD {
                    self.progress.warn(format!(
                        "{SQS_MAX_HELD} messages of DLQ '{}' passed over; redrive again for the rest",
                        dlq.name
                    ));
                    return Ok(());
                }
            }
        }
    }

    /// Whether to take `entry`: a replay's selection, else the redrive's filter.
    fn judge(&mut self, entry: &wal_queue::entry::Entry) -> Verdict {
        match &mut self.selection {
            Some(selection) => match selection.judge(entry) {
                Some(left) => Verdict::Pass(left.label()),
                None => Verdict::Take,
            },
            None => self
                .settings
                .filter
                .judge_redrive(entry, self.settings.max_redrives),
        }
    }

    /// Puts the entry's redrive (or replay) copy on its queue (not in a dry run); whether it
    /// did.
    async fn redrive(&mut self, entry: &wal_queue::entry::Entry) -> Result<bool, DlqError> {
        if self.settings.dry_run {
            return Ok(false);
        }
        self.limiter.until_ready().await;
        let home = self.dead.home_of(entry);
        // The copy is the write again: a span linked to it, whose context the copy carries on
        // so the next delivery's spans are the redrive's children, when spans are exported.
        let replay = self.selection.is_some();
        let mut copy = match &self.settings.replay {
            Some(asked) => {
                let mut copy = replay_copy(entry);
                history::address(&mut copy, asked.destination.as_deref());
                copy
            }
            None => redrive_copy(entry),
        };
        let verb = if replay { "replay" } else { "redrive" };
        let span = wal_runtime::process::trace_span(
            || tracing::info_span!("redrive", verb, namespace = %entry.namespace, entry_id = %entry.id),
        );
        if !span.is_none() {
            wal_runtime::trace_context::link(&span, &entry.trace_context);
            copy.trace_context = wal_runtime::trace_context::onward(&span, &entry.trace_context);
            // Its delivery still links to the one that dead-lettered it.
            wal_runtime::trace_context::keep_retry_mark(
                &entry.trace_context,
                &mut copy.trace_context,
            );
        }
        home.requeue(&copy).instrument(span).await.map_err(|e| {
            DlqError::Broker(format!(
                "putting entry {} back on queue '{}' ({verb}): {e}; nothing was lost, start the {verb} again",
                entry.id,
                home.spec().name
            ))
        })?;
        self.report.redriven += 1;
        Ok(true)
    }

    fn count(&mut self, verdict: &Verdict) {
        self.report.read += 1;
        match verdict {
            Verdict::Take if self.settings.dry_run => {
                let would = if self.selection.is_some() {
                    WOULD_REPLAY
                } else {
                    WOULD_REDRIVE
                };
                *self.report.passed.entry(would).or_default() += 1;
            }
            Verdict::Take => {}
            Verdict::Pass(reason) => *self.report.passed.entry(reason).or_default() += 1,
        }
        self.progress.read(&self.report);
    }
}
