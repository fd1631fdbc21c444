//! `walctl replay`'s flags.

use std::path::PathBuf;
use std::time::Duration;

use super::source::Wanted;
use wal_clusters::flags::{BrokerFlags, CqlFlags};

/// Without --direct, the control plane runs the replay (StartReplay): it puts the range's
/// entries back on the namespace's Kafka queues, for its consumers to apply, authorized by the
/// namespace's admin grant, audited, and one redrive or replay of a namespace at a time.
#[derive(Debug, clap::Args)]
pub struct Replay {
    /// The namespace whose mutations to replay.
    #[arg(long)]
    pub(super) namespace: String,
    /// Replay here, applying to the targets with walctl's own connections (--kafka-bootstrap,
    /// --cql-nodes, --memcached), not through the control plane: for a control plane that is
    /// down, a namespace with SQS queues (read from its archive), or a scratch target
    /// (--target-kind). Nothing is authorized or audited, and it may run beside a redrive.
    #[arg(long)]
    pub(super) direct: bool,
    /// Replay mutations written at or after this: a time ago ("6h") or an RFC 3339 time (the
    /// backup's).
    #[arg(long)]
    pub(super) from: String,
    /// ... and before this (default: now).
    #[arg(long)]
    pub(super) to: Option<String>,
    /// Apply to this target kind instead of each entry's own (with --target-settings), e.g. a
    /// scratch table to inspect first (--direct).
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
    /// SQS queues). auto: Kafka while it still holds the range, else the archive (--direct;
    /// the control plane reads Kafka).
    #[arg(long, value_enum, default_value_t = Wanted::Auto)]
    pub(super) source: Wanted,
    /// Only entries of this key.
    #[arg(long)]
    pub(super) key: Option<String>,
    /// Only entries first written in this region.
    #[arg(long)]
    pub(super) origin_region: Option<String>,
    /// Only this destination takes what is put back (as `walctl destinations status` names
    /// it: `default`, a store, or `region-<name>`); not with --direct.
    #[arg(long)]
    pub(super) destination: Option<String>,
    /// Entries put back per second at most (default 1,000; at most 100,000), or with --direct,
    /// applied (default 5,000; at most 1,000,000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(super) rate: Option<u32>,
    /// Entries applied at once (--direct; keys in parallel, one key's entries one after
    /// another; default 64).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(super) concurrency: Option<u32>,
    /// Count what would be applied (and with --direct, show a sample); write nothing.
    #[arg(long)]
    pub(super) dry_run: bool,
    /// Where progress is kept (--direct; default: one file per namespace and flags, under
    /// $XDG_STATE_HOME/walctl or ~/.local/state/walctl). The control plane keeps its own.
    #[arg(long)]
    pub(super) checkpoint: Option<PathBuf>,
    /// Ignore the checkpoint and start the range over.
    #[arg(long)]
    pub(super) from_start: bool,
    #[command(flatten)]
    pub(super) brokers: BrokerFlags,
    #[command(flatten)]
    pub(super) cql: CqlFlags,
    /// memcached servers for cache targets that name none (--direct).
    #[arg(long, env = "WAL_MEMCACHED", value_delimiter = ',')]
    pub(super) memcached: Vec<String>,
    /// The longest one apply may take before it counts as a retryable failure (--direct;
    /// default 10s).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(super) apply_timeout: Option<Duration>,
}

impl Replay {
    /// --direct's rate, concurrency and apply timeout, their defaults filled in.
    pub(super) fn direct_rate(&self) -> u32 {
        self.rate.unwrap_or(5_000)
    }

    pub(super) fn direct_concurrency(&self) -> usize {
        self.concurrency.unwrap_or(64) as usize
    }

    pub(super) fn direct_apply_timeout(&self) -> Duration {
        self.apply_timeout.unwrap_or(Duration::from_secs(10))
    }
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
