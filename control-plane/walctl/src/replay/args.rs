//! `walctl replay`'s flags.

use std::path::PathBuf;
use std::time::Duration;

use super::source::Wanted;
use wal_clusters::flags::{BrokerFlags, CqlFlags};

#[derive(Debug, clap::Args)]
pub struct Replay {
    /// The namespace whose mutations to replay.
    #[arg(long)]
    pub(super) namespace: String,
    /// Replay mutations written at or after this: a time ago ("6h") or an RFC 3339 time (the
    /// backup's).
    #[arg(long)]
    pub(super) from: String,
    /// ... and before this (default: now).
    #[arg(long)]
    pub(super) to: Option<String>,
    /// Apply to this target kind instead of each entry's own (with --target-settings), e.g. a
    /// scratch table to inspect first.
    #[arg(long, requires = "target_settings")]
    pub(super) target_kind: Option<String>,
    /// The target's settings as a JSON object.
    #[arg(long, requires = "target_kind")]
    pub(super) target_settings: Option<String>,
    /// Leave out the entry with this id (repeatable): the offending writes.
    #[arg(long = "exclude-id")]
    pub(super) exclude_ids: Vec<String>,
    /// Leave out the entries whose ids this file lists, one a line (# comments allowed).
    #[arg(long = "exclude-file")]
    pub(super) exclude_files: Vec<PathBuf>,
    /// Where to read the namespace's history: its Kafka topics, or its archive (needed for
    /// SQS queues). auto: Kafka while it still holds the range, else the archive.
    #[arg(long, value_enum, default_value_t = Wanted::Auto)]
    pub(super) source: Wanted,
    /// Only entries of this key.
    #[arg(long)]
    pub(super) key: Option<String>,
    /// Only entries first written in this region.
    #[arg(long)]
    pub(super) origin_region: Option<String>,
    /// Entries applied per second at most.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(super) rate: u32,
    /// Entries applied at once (keys in parallel; one key's entries one after another).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(super) concurrency: u32,
    /// Count what would be applied and show a sample; write nothing.
    #[arg(long)]
    pub(super) dry_run: bool,
    /// Where progress is kept (default: one file per namespace and flags, under
    /// $XDG_STATE_HOME/walctl or ~/.local/state/walctl).
    #[arg(long)]
    pub(super) checkpoint: Option<PathBuf>,
    /// Ignore the checkpoint and start the range over.
    #[arg(long)]
    pub(super) from_start: bool,
    #[command(flatten)]
    pub(super) brokers: BrokerFlags,
    #[command(flatten)]
    pub(super) cql: CqlFlags,
    /// memcached servers for cache targets that name none.
    #[arg(long, env = "WAL_MEMCACHED", value_delimiter = ',')]
    pub(super) memcached: Vec<String>,
    /// The longest one apply may take before it counts as a retryable failure.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub(super) apply_timeout: Duration,
}

impl Replay {
    /// The flags that define the run, as typed: the same command resumes the same replay.
    pub(super) fn typed(&self) -> String {
        format!(
            "from={:?} to={:?} source={:?} target={:?}/{:?} exclude={:?}/{:?} key={:?} region={:?}",
            self.from,
            self.to,
            self.source,
            self.target_kind,
            self.target_settings,
            self.exclude_ids,
            self.exclude_files,
            self.key,
            self.origin_region
        )
    }
}
