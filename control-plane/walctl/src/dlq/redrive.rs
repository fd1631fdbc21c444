//! `walctl dlq redrive --direct`: the redrive (see the control plane's `operations::dlq::
//! redrive`) run by walctl itself against the brokers, its progress kept in a checkpoint file,
//! resumable after an interruption by running the same command again.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use indicatif::ProgressBar;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use wal_control_plane::operations::dlq::redrive::{
    Positions, Progress, RedriveSettings, Report, WOULD_REDRIVE, redrive,
};
use wal_control_plane::operations::dlq::{DeadLetters, DlqError};

use super::filter::{Filter, FilterArgs};
use crate::Failure;
use crate::checkpoint::Checkpoint;
use crate::output::{Format, print_json, progress, table};

#[derive(Debug, clap::Args)]
pub struct RedriveArgs {
    /// The namespace whose DLQs to redrive.
    pub(super) namespace: String,
    #[command(flatten)]
    pub(super) filter: FilterArgs,
    /// Entries redriven per second at most, so a recovering target is not flooded.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(super) rate: u32,
    /// Entries already redriven this many times stay in the DLQ: one that keeps failing is not
    /// sent round for ever.
    #[arg(long, default_value_t = 3)]
    pub(super) max_redrives: u32,
    /// Report what would be redriven; change nothing.
    #[arg(long)]
    pub(super) dry_run: bool,
    /// With --direct: where the progress on Kafka DLQs is kept (default: one file per namespace
    /// and filter, under $XDG_STATE_HOME/walctl or ~/.local/state/walctl). The control plane
    /// keeps its redrives' progress in its store.
    #[arg(long)]
    pub(super) checkpoint: Option<PathBuf>,
    /// Ignore the progress kept by earlier redrives with this filter and read the Kafka DLQs
    /// from their start. Dead letters redriven before are redriven again: --max-redrives counts
    /// the redrives of an entry that failed again after one, not how often one DLQ record was
    /// redriven.
    #[arg(long)]
    pub(super) from_start: bool,
    /// Start the redrive on the control plane and return at once, without following it
    /// (`walctl dlq status` does).
    #[arg(long)]
    pub(super) detach: bool,
}

impl RedriveArgs {
    pub fn namespace(&self) -> &str {
        &self.namespace
    }
}

/// Where a run's progress goes when walctl runs it: a progress bar, and the checkpoint file.
struct FileProgress<'a> {
    bar: ProgressBar,
    checkpoint: &'a mut Checkpoint,
    path: &'a Path,
    /// The checkpoint's count when this run began.
    done_before: u64,
}

impl Progress for FileProgress<'_> {
    fn found(&mut self, more: u64) {
        self.bar.inc_length(more);
    }

    fn read(&mut self, _report: &Report) {
        self.bar.inc(1);
    }

    async fn save(&mut self, positions: &Positions, redriven: u64) -> Result<(), DlqError> {
        self.checkpoint.positions = positions.clone();
        self.checkpoint.done = self.done_before + redriven;
        self.checkpoint
            .save(self.path)
            .map_err(|failure| DlqError::Usage(failure.message))
    }

    fn warn(&mut self, message: String) {
        self.bar.suspend(|| eprintln!("walctl: {message}"));
    }
}

pub async fn run(args: RedriveArgs, dead: DeadLetters, format: Format) -> Result<(), Failure> {
    if args.detach {
        return Err(Failure::usage(
            "--detach is for a redrive the control plane runs; with --direct, walctl runs it",
        ));
    }
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
    let settings = RedriveSettings {
        filter,
        rate: NonZeroU32::new(args.rate).unwrap_or(NonZeroU32::MIN),
        max_redrives: args.max_redrives,
        dry_run: args.dry_run,
        replay: None,
    };
    let mut positions = checkpoint.positions.clone();
    let done_before = checkpoint.done;
    let mut progress = FileProgress {
        bar: progress(
            format,
            "{spinner} redriving [{bar:30}] {pos}/{len} read, {per_sec}",
        ),
        checkpoint: &mut checkpoint,
        path: &path,
        done_before,
    };
    // Ctrl-C stops walctl at once; what was saved is where the next run continues.
    let never = CancellationToken::new();
    let report = redrive(&dead, &settings, &mut positions, &mut progress, &never).await;
    progress.bar.finish_and_clear();
    let report = report.map_err(|error| match error {
        DlqError::Usage(message) => Failure::usage(message),
        other => Failure::broker(other.to_string()),
    })?;
    print(&args, &report, &path, format);
    Ok(())
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
