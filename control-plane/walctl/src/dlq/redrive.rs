//! `walctl dlq redrive`: dead letters back onto their namespace queue, at a bounded rate, each at
//! most `--max-redrives` times over its life, resumable after an interruption.
//!
//! Every redrive writes the copy to the queue first and records it as done second (Kafka: the
//! checkpoint; SQS: deleting the DLQ message), so an interruption between the two redrives that
//! entry once more, never loses it. The copy keeps the entry's id, which an idempotent target
//! (CQL with the entry's write time, an http target honouring Idempotency-Key) applies once.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use governor::{Quota, RateLimiter};
use indicatif::ProgressBar;
use serde_json::json;
use tracing::Instrument as _;
use wal_namespaces::Backend;
use wal_queue::redrive_copy;

use super::filter::{Filter, FilterArgs, Verdict};
use super::source::{DeadLetters, DlqHandle, SQS_MAX_HELD, release};
use crate::Failure;
use crate::checkpoint::Checkpoint;
use crate::output::{Format, print_json, progress, table};

#[derive(Debug, clap::Args)]
pub struct RedriveArgs {
    /// The namespace whose DLQs to redrive.
    namespace: String,
    #[command(flatten)]
    filter: FilterArgs,
    /// Entries redriven per second at most, so a recovering target is not flooded.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    rate: u32,
    /// Entries already redriven this many times stay in the DLQ: one that keeps failing is not
    /// sent round for ever.
    #[arg(long, default_value_t = 3)]
    max_redrives: u32,
    /// Report what would be redriven; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Where the progress on Kafka DLQs is kept (default: one file per namespace and filter,
    /// under $XDG_STATE_HOME/walctl or ~/.local/state/walctl).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Ignore the checkpoint and read the Kafka DLQs from their start. Dead letters redriven
    /// before are redriven again: --max-redrives counts the redrives of an entry that failed
    /// again after one, not how often one DLQ record was redriven.
    #[arg(long)]
    from_start: bool,
}

impl RedriveArgs {
    pub fn namespace(&self) -> &str {
        &self.namespace
    }
}

/// How a dry run counts the entries it would redrive.
const WOULD_REDRIVE: &str = "would be redriven";

type Limiter = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    governor::clock::DefaultClock,
>;

/// What a run did.
#[derive(Debug, Default)]
struct Report {
    read: u64,
    redriven: u64,
    passed: BTreeMap<&'static str, u64>,
}

struct Run<'a> {
    args: &'a RedriveArgs,
    dead: &'a DeadLetters,
    /// When the run began: an SQS entry dead-lettered since (say, a redriven one that failed
    /// again) waits for the next run, as Kafka's records past the scan's ends do.
    started_micros: i64,
    filter: Filter,
    limiter: Limiter,
    report: Report,
    bar: ProgressBar,
}

pub async fn run(args: RedriveArgs, dead: DeadLetters, format: Format) -> Result<(), Failure> {
    let typed = args.filter.typed();
    let path = args
        .checkpoint
        .clone()
        .unwrap_or_else(|| Checkpoint::default_path("redrive", &args.namespace, &typed));
    let saved = if args.from_start {
        None
    } else {
        Checkpoint::load(&path)?
    };
    let (mut checkpoint, filter) = match saved {
        Some(saved) => {
            if saved.filter != typed || saved.namespace != args.namespace {
                return Err(Failure::usage(format!(
                    "the checkpoint {} belongs to another redrive (namespace '{}', {}); pass another --checkpoint or --from-start",
                    path.display(),
                    saved.namespace,
                    saved.filter
                )));
            }
            if format == Format::Table {
                eprintln!(
                    "walctl: continuing the redrive in {} ({} redriven before)",
                    path.display(),
                    saved.done
                );
            }
            let filter = Filter {
                since_micros: saved.since_micros,
                until_micros: saved.until_micros,
                class: args.filter.filter(SystemTime::now())?.class,
            };
            (saved, filter)
        }
        None => {
            let filter = args.filter.filter(SystemTime::now())?;
            let fresh = Checkpoint {
                namespace: args.namespace.clone(),
                filter: typed,
                since_micros: filter.since_micros,
                until_micros: filter.until_micros,
                ..Checkpoint::default()
            };
            (fresh, filter)
        }
    };
    let per_second = NonZeroU32::new(args.rate).unwrap_or(NonZeroU32::MIN);
    let bar = progress(
        format,
        "{spinner} {msg} [{bar:30}] {pos}/{len} read, {per_sec}",
    );
    let mut run = Run {
        args: &args,
        dead: &dead,
        started_micros: wal_queue::entry::now_micros(),
        filter,
        // A burst of one: the rate holds from the first entry, not after a burst.
        limiter: RateLimiter::direct(Quota::per_second(per_second).allow_burst(NonZeroU32::MIN)),
        report: Report::default(),
        bar,
    };
    for dlq in &dead.dlqs {
        run.bar.set_message(dlq.name.clone());
        match dlq.backend {
            Backend::Kafka => run.kafka(dlq, &mut checkpoint, &path).await?,
            Backend::Sqs => run.sqs(dlq).await?,
        }
    }
    run.bar.finish_and_clear();
    print(&args, &run.report, &path, format);
    Ok(())
}

impl Run<'_> {
    async fn kafka(
        &mut self,
        dlq: &DlqHandle,
        checkpoint: &mut Checkpoint,
        path: &std::path::Path,
    ) -> Result<(), Failure> {
        let from = checkpoint
            .positions
            .get(&dlq.name)
            .cloned()
            .unwrap_or_default();
        let mut scan = self.dead.scan(dlq, from).await?;
        for partition in &scan.reset {
            eprintln!(
                "walctl: DLQ '{}' partition {partition} is shorter than the checkpoint says (the topic was made again?); reading it from its start",
                dlq.name
            );
        }
        self.bar.inc_length(scan.unread());
        // Where each partition has been read to, by this run.
        let mut read_to = scan.starts.clone();
        let mut unsaved = 0;
        while let Some(record) = scan.records.recv().await {
            let record =
                record.map_err(|e| Failure::broker(format!("reading DLQ '{}': {e}", dlq.name)))?;
            let verdict = match &record.entry {
                Ok(entry) => self.filter.judge_redrive(entry, self.args.max_redrives),
                Err(_) => Verdict::Pass("undecodable"),
            };
            let redriven = match (&verdict, &record.entry) {
                (Verdict::Take, Ok(entry)) => self.redrive(entry).await?,
                _ => false,
            };
            self.count(&verdict);
            read_to.insert(record.partition, record.offset + 1);
            if self.args.dry_run {
                continue;
            }
            checkpoint
                .positions
                .entry(dlq.name.clone())
                .or_default()
                .insert(record.partition, record.offset + 1);
            unsaved += 1;
            if redriven {
                checkpoint.done += 1;
            }
            // Saved after each redrive, so a kill repeats at most one; passed-over entries
            // are only read again, so those are saved in batches.
            if redriven || unsaved >= 100 {
                checkpoint.save(path)?;
                unsaved = 0;
            }
        }
        // The scan ends only when every partition reached its end, or after an error sent
        // first; anything else would leave dead letters unread, so it is checked, not assumed.
        for (partition, end) in &scan.ends {
            if read_to.get(partition).copied().unwrap_or(0) < *end {
                return Err(Failure::broker(format!(
                    "reading DLQ '{}' stopped before the end of partition {partition}; run the redrive again to continue",
                    dlq.name
                )));
            }
        }
        if !self.args.dry_run {
            // Also records partitions that had nothing to read, and those read from the start.
            checkpoint
                .positions
                .insert(dlq.name.clone(), scan.ends.clone());
            checkpoint.save(path)?;
        }
        Ok(())
    }

    async fn sqs(&mut self, dlq: &DlqHandle) -> Result<(), Failure> {
        let backlog = dlq.queue.backlog().await.ok().flatten().unwrap_or(0);
        self.bar.inc_length(backlog);
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
        passed: &mut Vec<wal_queue::Delivery>,
    ) -> Result<(), Failure> {
        loop {
            let batch = dlq
                .queue
                .receive(10, Duration::from_secs(1))
                .await
                .map_err(|e| Failure::broker(format!("reading DLQ '{}': {e}", dlq.name)))?;
            if batch.is_empty() {
                return Ok(());
            }
            for delivery in batch {
                let verdict = match &delivery.entry {
                    Ok(entry) if entry.dead_lettered_at_micros >= self.started_micros => {
                        Verdict::Pass("dead-lettered during this run (the next run takes it)")
                    }
                    Ok(entry) => self.filter.judge_redrive(entry, self.args.max_redrives),
                    Err(_) => Verdict::Pass("undecodable"),
                };
                self.count(&verdict);
                let redriven = match (&verdict, &delivery.entry) {
                    (Verdict::Take, Ok(entry)) => self.redrive(entry).await?,
                    _ => false,
                };
                if redriven {
                    dlq.queue.acknowledge(&delivery).await.map_err(|e| {
                        Failure::broker(format!(
                            "an entry was redriven but could not be deleted from DLQ '{}' ({e}); it will be redriven again by the next run",
                            dlq.name
                        ))
                    })?;
                } else {
                    passed.push(delivery);
                }
                if passed.len() >= SQS_MAX_HELD {
                    eprintln!(
                        "walctl: {SQS_MAX_HELD} messages of DLQ '{}' passed over; run again for the rest",
                        dlq.name
                    );
                    return Ok(());
                }
            }
        }
    }

    /// Puts the entry's redrive copy on its queue (not in a dry run); whether it did.
    async fn redrive(&mut self, entry: &wal_queue::entry::Entry) -> Result<bool, Failure> {
        if self.args.dry_run {
            return Ok(false);
        }
        self.limiter.until_ready().await;
        let home = self.dead.home_of(entry);
        // The copy is the write again: a span linked to it, whose context the copy carries on
        // so the next delivery's spans are the redrive's children, when walctl exports spans.
        let mut copy = redrive_copy(entry);
        let span = wal_runtime::process::trace_span(
            || tracing::info_span!("redrive", namespace = %entry.namespace, entry_id = %entry.id),
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
            Failure::broker(format!(
                "redriving entry {} to queue '{}': {e}; nothing was lost, run the redrive again",
                entry.id,
                home.spec().name
            ))
        })?;
        self.report.redriven += 1;
        Ok(true)
    }

    fn count(&mut self, verdict: &Verdict) {
        self.report.read += 1;
        self.bar.inc(1);
        match verdict {
            Verdict::Take if self.args.dry_run => {
                *self.report.passed.entry(WOULD_REDRIVE).or_default() += 1;
            }
            Verdict::Take => {}
            Verdict::Pass(reason) => *self.report.passed.entry(reason).or_default() += 1,
        }
    }
}

fn print(args: &RedriveArgs, report: &Report, checkpoint: &std::path::Path, format: Format) {
    match format {
        Format::Json => print_json(&json!({
            "namespace": args.namespace,
            "dry_run": args.dry_run,
            "read": report.read,
            "redriven": report.redriven,
            "left": report.passed,
            "checkpoint": checkpoint.display().to_string(),
        })),
        Format::Table => {
            let mut out = table(&["", "ENTRIES"]);
            out.add_row(vec!["read".to_owned(), report.read.to_string()]);
            out.add_row(vec!["redriven".to_owned(), report.redriven.to_string()]);
            for (reason, count) in &report.passed {
                let label = if *reason == WOULD_REDRIVE {
                    (*reason).to_owned()
                } else {
                    format!("left in the DLQ: {reason}")
                };
                out.add_row(vec![label, count.to_string()]);
            }
            println!("{out}");
            if args.dry_run {
                println!("dry run: nothing was redriven");
            } else if report.read == 0 {
                println!(
                    "nothing to redrive: no dead letters (on Kafka: none since the last redrive with this filter)"
                );
            }
        }
    }
}
