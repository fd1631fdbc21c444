//! `walctl replay`: the way back after corruption (a bad ALTER TABLE, a bad deploy writing
//! garbage). Restore the last good backup, then replay the namespace's mutations written since,
//! leaving out the offending ones, through the consumer's own target code: CQL writes carry
//! their original write time (`USING TIMESTAMP`), so replaying over rows that already hold the
//! data is harmless.
//!
//! Kafka namespaces replay from their topics: the broker's offsets-for-times find where the
//! range starts on every partition. Namespaces that keep an archive (durable_storage.archive)
//! can replay from it instead, and SQS namespaces, whose queues delete what was consumed, only
//! from it ([`source`]). A range the source no longer holds in full is refused, naming what is
//! gone.

mod lanes;
mod select;
mod source;

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use governor::{Quota, RateLimiter};
use serde_json::json;
use wal_consumer::clients::{ClientSettings, Clients};
use wal_consumer::delivery::{Deliverer, DeliverySettings};
use wal_consumer::target::TargetRegistry;
use wal_core::durable::{ARCHIVE_SHARDS, DurableStorage};
use wal_core::entry::{CodecError, Entry, Target as TargetSpec};
use wal_core::queue::kafka::{KafkaSettings, scan};
use wal_namespaces::Namespace;

use self::lanes::{Applier, Job, Lanes, Outcome};
use self::select::{Left, Selection, excluded_ids};
use self::source::{ARCHIVE, Source, Wanted, broker};
use crate::Failure;
use crate::checkpoint::Checkpoint;
use crate::output::{Format, print_json, progress, table, when};
use crate::time::instant;
use wal_core::process::{BrokerFlags, CqlFlags};

/// How far ahead of its append a write time may be: the producer accepts a caller's
/// original write time up to 300 s in the future, so the range's records may start that much
/// before --from. The write-time filter does the rest.
const FUTURE_WRITE_TIME: Duration = Duration::from_secs(300);
/// How often progress is saved while entries are applied.
const SAVE_EVERY: Duration = Duration::from_secs(1);
/// Entries a dry run shows.
const SAMPLE: usize = 5;

#[derive(Debug, clap::Args)]
pub struct Replay {
    /// The namespace whose mutations to replay.
    #[arg(long)]
    namespace: String,
    /// Replay mutations written at or after this: a time ago ("6h") or an RFC 3339 time (the
    /// backup's).
    #[arg(long)]
    from: String,
    /// ... and before this (default: now).
    #[arg(long)]
    to: Option<String>,
    /// Apply to this target kind instead of each entry's own (with --target-settings), e.g. a
    /// scratch table to inspect first.
    #[arg(long, requires = "target_settings")]
    target_kind: Option<String>,
    /// The target's settings as a JSON object.
    #[arg(long, requires = "target_kind")]
    target_settings: Option<String>,
    /// Leave out the entry with this id (repeatable): the offending writes.
    #[arg(long = "exclude-id")]
    exclude_ids: Vec<String>,
    /// Leave out the entries whose ids this file lists, one a line (# comments allowed).
    #[arg(long = "exclude-file")]
    exclude_files: Vec<PathBuf>,
    /// Where to read the namespace's history: its Kafka topics, or its archive (needed for
    /// SQS queues). auto: Kafka while it still holds the range, else the archive.
    #[arg(long, value_enum, default_value_t = Wanted::Auto)]
    source: Wanted,
    /// Only entries of this key.
    #[arg(long)]
    key: Option<String>,
    /// Only entries first written in this region.
    #[arg(long)]
    origin_region: Option<String>,
    /// Entries applied per second at most.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    rate: u32,
    /// Entries applied at once (keys in parallel; one key's entries one after another).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    concurrency: u32,
    /// Count what would be applied and show a sample; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Where progress is kept (default: one file per namespace and flags, under
    /// $XDG_STATE_HOME/walctl or ~/.local/state/walctl).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Ignore the checkpoint and start the range over.
    #[arg(long)]
    from_start: bool,
    #[command(flatten)]
    brokers: BrokerFlags,
    #[command(flatten)]
    cql: CqlFlags,
    /// memcached servers for cache targets that name none.
    #[arg(long, env = "WAL_MEMCACHED", value_delimiter = ',')]
    memcached: Vec<String>,
    /// The longest one apply may take before it counts as a retryable failure.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    apply_timeout: Duration,
}

impl Replay {
    /// The flags that define the run, as typed: the same command resumes the same replay.
    fn typed(&self) -> String {
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

/// What a run did, beyond the lanes' outcome.
#[derive(Debug, Default)]
struct Report {
    read: u64,
    would_apply: u64,
    sample: Vec<serde_json::Value>,
}

pub async fn run(replay: Replay, control_plane: &str, format: Format) -> Result<(), Failure> {
    let namespace = crate::namespace::current(control_plane, &replay.namespace).await?;
    let typed = replay.typed();
    let path = replay
        .checkpoint
        .clone()
        .unwrap_or_else(|| Checkpoint::default_path("replay", &namespace.name, &typed));
    let saved = if replay.from_start || replay.dry_run {
        None
    } else {
        match Checkpoint::load(&path)? {
            Some(saved) if saved.namespace != namespace.name || saved.filter != typed => {
                return Err(Failure::usage(format!(
                    "the checkpoint {} belongs to another run (namespace '{}', {}); pass another --checkpoint or --from-start",
                    path.display(),
                    saved.namespace,
                    saved.filter
                )));
            }
            saved => saved,
        }
    };
    let now = SystemTime::now();
    let (from_micros, to_micros) = match &saved {
        Some(saved) => (
            saved.since_micros.unwrap_or(0),
            saved.until_micros.unwrap_or(i64::MAX),
        ),
        None => (
            instant("--from", &replay.from, now)?,
            match &replay.to {
                Some(to) => instant("--to", to, now)?,
                None => wal_core::entry::now_micros(),
            },
        ),
    };
    if from_micros >= to_micros {
        return Err(Failure::usage(format!(
            "--from ({}) must be before --to ({}); nothing is in that range",
            when(from_micros),
            when(to_micros)
        )));
    }
    let kafka = replay.brokers.kafka();
    let history = crate::namespace::archive_history(control_plane, &namespace.name).await?;
    let clients = clients(&replay)?;
    let resumed = saved.clone();
    let source = source::choose(
        replay.source,
        (&namespace, history),
        (&kafka, &clients),
        saved.as_ref(),
        from_micros,
    )
    .await?;
    let target = match (&replay.target_kind, &replay.target_settings) {
        (Some(kind), Some(settings)) => {
            serde_json::from_str::<serde_json::Value>(settings)
                .map_err(|e| Failure::usage(format!("--target-settings is not JSON: {e}")))?;
            Some(TargetSpec {
                kind: kind.clone(),
                settings_json: settings.clone(),
            })
        }
        _ => None,
    };
    let excluded = excluded_ids(&replay.exclude_ids, &replay.exclude_files)?;
    let mut selection = Selection::new(
        (from_micros, to_micros, wal_core::entry::now_micros()),
        excluded,
        replay.key.clone(),
        replay.origin_region.clone(),
    );
    let mut checkpoint = saved.unwrap_or_else(|| Checkpoint {
        namespace: namespace.name.clone(),
        filter: typed,
        since_micros: Some(from_micros),
        until_micros: Some(to_micros),
        ..Checkpoint::default()
    });
    if checkpoint.done > 0 && format == Format::Table {
        eprintln!(
            "walctl: continuing the replay in {} ({} applied before)",
            path.display(),
            checkpoint.done
        );
    }
    let lanes = if replay.dry_run {
        None
    } else {
        Some(Lanes::start(
            replay.concurrency as usize,
            Arc::new(applier(&replay, &namespace, target, clients)),
        ))
    };
    let bar = progress(
        format,
        match source {
            Source::Kafka { .. } => {
                "{spinner} {msg} [{bar:30}] {pos}/{len} read ({per_sec}, {eta} left)"
            }
            Source::Archive { .. } => "{spinner} {msg}: {pos} read ({per_sec})",
        },
    );
    let started = Instant::now();
    let mut report = Report::default();
    let done_before = checkpoint.done;
    match &source {
        Source::Kafka { topics } => {
            kafka_starts(&kafka, topics, from_micros, &mut checkpoint).await?
        }
        // The archive is read by write time: a shard's position is the write time below which
        // it is done, and the range's start is --from.
        Source::Archive { .. } => {
            checkpoint.starts.entry(ARCHIVE.to_owned()).or_default();
        }
    }
    if !replay.dry_run {
        checkpoint.save(&path)?;
    }
    let checkpoint = Arc::new(Mutex::new(checkpoint));
    let saver = lanes.as_ref().map(|lanes| {
        tokio::spawn(save_while_applying(
            lanes.watcher(),
            Arc::clone(&checkpoint),
            path.clone(),
            done_before,
        ))
    });
    let mut reader = Reader {
        selection: &mut selection,
        lanes: lanes.as_ref(),
        report: &mut report,
        bar: &bar,
    };
    let range_ends = match &source {
        Source::Kafka { topics } => read_topics(&kafka, topics, &checkpoint, &mut reader).await?,
        Source::Archive { storage } => {
            let done_below = lock(&checkpoint)
                .positions
                .get(ARCHIVE)
                .cloned()
                .unwrap_or_default();
            let ends = read_archive(
                storage,
                &namespace.name,
                (from_micros, to_micros),
                &done_below,
                &mut reader,
            )
            .await?;
            // Rows expire by TTL while the replay reads shard after shard: what it needed must
            // still have been there at the end, or part of the range was never read.
            source::check_archive(storage, (&namespace, history), resumed.as_ref(), from_micros)
                .await
                .map_err(|gone| {
                    Failure::broker(format!(
                        "while the replay read the archive, retention removed entries it had not read: {}",
                        gone.message
                    ))
                })?;
            ends
        }
    };
    let outcome = match lanes {
        Some(lanes) => {
            let watcher = lanes.watcher();
            let outcome = lanes.finish().await;
            if let Some(saver) = saver {
                saver.abort();
            }
            let mut checkpoint = lock(&checkpoint);
            checkpoint.done = done_before + outcome.applied;
            if outcome.failures == 0 {
                // Every record was handed out and applied: the range is done.
                for (topic, ends) in range_ends {
                    let saved = checkpoint.positions.entry(topic).or_default();
                    for (partition, end) in ends {
                        let at = saved.entry(partition).or_insert(end);
                        *at = (*at).max(end);
                    }
                }
            } else {
                // Failed entries stay unfinished: running the same command again starts at
                // the first one of each partition.
                for (topic, partition, done) in watcher.positions() {
                    checkpoint
                        .positions
                        .entry(topic)
                        .or_default()
                        .insert(partition, done);
                }
            }
            checkpoint.save(&path)?;
            Some(outcome)
        }
        None => None,
    };
    bar.finish_and_clear();
    print(
        &replay,
        &selection,
        &report,
        outcome.as_ref(),
        started.elapsed(),
        format,
    );
    match outcome {
        Some(outcome) if !outcome.failed.is_empty() => Err(Failure::quiet(1)),
        _ => Ok(()),
    }
}

/// Where every partition's range starts, saved before anything is applied, so a resumed run
/// never falls back to a partition's first record.
async fn kafka_starts(
    kafka: &KafkaSettings,
    topics: &[String],
    from_micros: i64,
    checkpoint: &mut Checkpoint,
) -> Result<(), Failure> {
    let scan_from =
        from_micros.saturating_sub(i64::try_from(FUTURE_WRITE_TIME.as_micros()).unwrap_or(0));
    for topic in topics {
        if !checkpoint.starts.contains_key(topic) {
            let from = match checkpoint.positions.get(topic) {
                Some(positions) => positions.clone(),
                None => scan::offsets_at(kafka, topic, scan_from)
                    .await
                    .map_err(|e| broker(topic, &e))?,
            };
            checkpoint.starts.insert(topic.clone(), from.clone());
            checkpoint.positions.entry(topic.clone()).or_insert(from);
        }
    }
    Ok(())
}

/// Where the records read go: to the selection, then to the lanes (or, on a dry run, to the
/// count and the sample).
struct Reader<'a> {
    selection: &'a mut Selection,
    lanes: Option<&'a Lanes>,
    report: &'a mut Report,
    bar: &'a indicatif::ProgressBar,
}

impl Reader<'_> {
    /// A record an earlier run of this replay finished, read again on a resume: only noted, so
    /// its id stays taken and the report names the same excluded ids.
    fn done_before(&mut self, entry: &Result<Entry, CodecError>) {
        if let Ok(entry) = entry {
            self.selection.remember(entry);
        }
        self.bar.inc(1);
    }

    async fn read(
        &mut self,
        stream: &Arc<str>,
        (partition, offset, read_to): (i32, i64, i64),
        entry: Result<Entry, CodecError>,
    ) {
        self.report.read += 1;
        self.bar.inc(1);
        let entry = match entry {
            Ok(entry) if self.selection.take(&entry) => entry,
            left_out => {
                if left_out.is_err() {
                    self.selection.count(Left::Undecodable);
                }
                if let Some(lanes) = self.lanes {
                    lanes.passed(stream, partition, read_to);
                }
                return;
            }
        };
        let Some(lanes) = self.lanes else {
            self.report.would_apply += 1;
            if self.report.sample.len() < SAMPLE {
                self.report.sample.push(sample(&entry));
            }
            return;
        };
        lanes
            .submit(Job {
                entry,
                topic: Arc::clone(stream),
                partition,
                offset,
                read_to,
            })
            .await;
    }
}

/// Reads every topic from its range's start to its end. Returns each partition's end.
async fn read_topics(
    kafka: &KafkaSettings,
    topics: &[String],
    checkpoint: &Mutex<Checkpoint>,
    reader: &mut Reader<'_>,
) -> Result<Ends, Failure> {
    let mut range_ends = BTreeMap::new();
    for topic in topics {
        // Read from the range's start; what an earlier run finished (below the positions) is
        // only noted, so copies of the entries it applied are not applied again. Read to the
        // end: entries written before --to may have been appended long after (a caller's own
        // write time, a retry), and the write-time filter chooses.
        let (from, done_below) = {
            let saved = lock(checkpoint);
            (
                saved.starts.get(topic).cloned().unwrap_or_default(),
                saved.positions.get(topic).cloned().unwrap_or_default(),
            )
        };
        let mut records = scan::scan(kafka, topic, from, BTreeMap::new(), scan::Gaps::Fail)
            .await
            .map_err(|e| broker(topic, &e))?;
        let length: i64 = records
            .ends
            .iter()
            .map(|(p, end)| end - records.starts.get(p).copied().unwrap_or(*end).min(*end))
            .sum();
        reader.bar.inc_length(u64::try_from(length).unwrap_or(0));
        reader.bar.set_message(topic.clone());
        let topic_name: Arc<str> = Arc::from(topic.as_str());
        let mut read_to = records.starts.clone();
        while let Some(record) = records.records.recv().await {
            let record = record.map_err(|e| broker(topic, &e))?;
            read_to.insert(record.partition, record.offset + 1);
            if record.offset < done_below.get(&record.partition).copied().unwrap_or(0) {
                reader.done_before(&record.entry);
                continue;
            }
            reader
                .read(
                    &topic_name,
                    (record.partition, record.offset, record.offset + 1),
                    record.entry,
                )
                .await;
        }
        // The scan ends only at the ends or after sending an error: checked, not assumed.
        for (partition, end) in &records.ends {
            if read_to.get(partition).copied().unwrap_or(0) < *end {
                return Err(broker(
                    topic,
                    &format!("the read stopped before the end of partition {partition}"),
                ));
            }
        }
        range_ends.insert(topic.clone(), records.ends.clone());
    }
    Ok(range_ends)
}

/// Reads the archive's entries written in the range. As with a topic, what an earlier run
/// finished (below a shard's position) is read only to be noted, so the report names the same
/// excluded ids. A shard's position is exact: within a shard, reading stands at the write time
/// of the last row read (more rows may share it, a page may end between them), and at --to once
/// the shard is read to its end. Returns every shard's end: --to.
async fn read_archive(
    storage: &Arc<DurableStorage>,
    namespace: &str,
    (from_micros, to_micros): (i64, i64),
    done_below: &BTreeMap<i32, i64>,
    reader: &mut Reader<'_>,
) -> Result<Ends, Failure> {
    reader.bar.set_message("archive");
    let stream: Arc<str> = Arc::from(ARCHIVE);
    // Shards come one after another: every shard before the current row's is read to its end.
    let mut next_shard = 0;
    let ended = |reader: &Reader<'_>, shards: std::ops::Range<i32>| {
        if let Some(lanes) = reader.lanes {
            for shard in shards {
                lanes.passed(&stream, shard, to_micros);
            }
        }
    };
    let mut rows = storage.read_archive(namespace, from_micros, to_micros);
    while let Some(row) = rows.recv().await {
        let row = row.map_err(|e| {
            Failure::broker(format!(
                "reading the archive: {e}; run the replay again to continue"
            ))
        })?;
        ended(reader, next_shard..row.shard);
        next_shard = next_shard.max(row.shard);
        if row.written_at < done_below.get(&row.shard).copied().unwrap_or(i64::MIN) {
            reader.done_before(&row.entry);
            continue;
        }
        reader
            .read(
                &stream,
                (row.shard, row.written_at, row.written_at),
                row.entry,
            )
            .await;
    }
    ended(reader, next_shard..ARCHIVE_SHARDS);
    let ends = (0..ARCHIVE_SHARDS)
        .map(|shard| (shard, to_micros))
        .collect();
    Ok(BTreeMap::from([(ARCHIVE.to_owned(), ends)]))
}

/// Stream (topic or archive) -> partition (or shard) -> the position after the range.
type Ends = BTreeMap<String, BTreeMap<i32, i64>>;

/// Saves the lanes' progress every [`SAVE_EVERY`] until aborted. A save that fails is said once
/// and tried again; the run goes on (a later resume only repeats more).
async fn save_while_applying(
    lanes: lanes::Watcher,
    checkpoint: Arc<Mutex<Checkpoint>>,
    path: PathBuf,
    done_before: u64,
) {
    let mut warned = false;
    loop {
        tokio::time::sleep(SAVE_EVERY).await;
        let mut saved = lock(&checkpoint);
        for (topic, partition, done) in lanes.positions() {
            saved
                .positions
                .entry(topic)
                .or_default()
                .insert(partition, done);
        }
        saved.done = done_before + lanes.applied();
        if let Err(failure) = saved.save(&path)
            && !warned
        {
            eprintln!("walctl: {}", failure.message);
            warned = true;
        }
    }
}

fn lock(checkpoint: &Mutex<Checkpoint>) -> std::sync::MutexGuard<'_, Checkpoint> {
    checkpoint
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The connections a replay reads the archive and applies with, made once.
fn clients(replay: &Replay) -> Result<Arc<Clients>, Failure> {
    let settings = ClientSettings {
        cql_nodes: replay.cql.cql_nodes.clone(),
        memcached: replay.memcached.clone(),
        kafka_bootstrap: replay.brokers.kafka_bootstrap.clone(),
        request_timeout: replay.apply_timeout,
    };
    Clients::new(settings)
        .map(Arc::new)
        .map_err(|e| Failure::usage(format!("target clients: {e}")))
}

fn applier(
    replay: &Replay,
    namespace: &Namespace,
    target: Option<TargetSpec>,
    clients: Arc<Clients>,
) -> Applier {
    let targets = TargetRegistry::builtin(Arc::clone(&clients));
    let deliverer = Deliverer::new(
        targets,
        clients,
        DeliverySettings {
            apply_timeout: replay.apply_timeout,
        },
    );
    let per_second = NonZeroU32::new(replay.rate).unwrap_or(NonZeroU32::MIN);
    Applier {
        deliverer: Arc::new(deliverer),
        namespace: namespace.clone(),
        target,
        default_target: namespace
            .default_target
            .as_ref()
            .map(wal_namespaces::TargetConfig::entry_target),
        limiter: RateLimiter::direct(Quota::per_second(per_second)),
    }
}

fn sample(entry: &wal_core::entry::Entry) -> serde_json::Value {
    let payload = match &entry.body {
        Some(wal_core::entry::Body::Payload(bytes)) => {
            String::from_utf8_lossy(&bytes[..bytes.len().min(120)]).into_owned()
        }
        Some(wal_core::entry::Body::ClaimCheck(check)) => format!("claim check in {}", check.table),
        None => String::new(),
    };
    json!({
        "id": entry.id,
        "key": entry.key,
        "written_at": when(entry.original_write_time_micros),
        "payload": payload,
    })
}

fn print(
    replay: &Replay,
    selection: &Selection,
    report: &Report,
    outcome: Option<&Outcome>,
    took: Duration,
    format: Format,
) {
    let left: BTreeMap<&str, u64> = selection
        .left
        .iter()
        .map(|(left, count)| (left.label(), *count))
        .collect();
    let unseen = selection.excluded_unseen();
    match format {
        Format::Json => print_json(&json!({
            "namespace": replay.namespace,
            "dry_run": replay.dry_run,
            "from": when(selection.from_micros),
            "to": when(selection.to_micros),
            "read": report.read,
            "would_apply": report.would_apply,
            "sample": report.sample,
            "applied": outcome.map_or(0, |o| o.applied),
            "keys": outcome.map_or(0, |o| o.keys.len()),
            "left": left,
            "excluded_not_found": unseen,
            "failed": outcome.map(|o| &o.failed),
            "failed_ids": outcome.map(|o| &o.failed_ids),
            "seconds": took.as_secs_f64(),
        })),
        Format::Table => {
            let mut out = table(&["", "ENTRIES"]);
            out.add_row(vec!["read".to_owned(), report.read.to_string()]);
            if replay.dry_run {
                out.add_row(vec![
                    "would be applied".to_owned(),
                    report.would_apply.to_string(),
                ]);
            }
            if let Some(outcome) = outcome {
                out.add_row(vec!["applied".to_owned(), outcome.applied.to_string()]);
                out.add_row(vec![
                    "keys applied".to_owned(),
                    outcome.keys.len().to_string(),
                ]);
                for (reason, count) in &outcome.failed {
                    out.add_row(vec![format!("failed: {reason}"), count.to_string()]);
                }
            }
            for (label, count) in &left {
                out.add_row(vec![format!("left out: {label}"), count.to_string()]);
            }
            println!("{out}");
            println!(
                "range {} to {}, {:.1} s",
                when(selection.from_micros),
                when(selection.to_micros),
                took.as_secs_f64()
            );
            for entry in &report.sample {
                println!("would apply: {entry}");
            }
            if !unseen.is_empty() {
                println!("excluded ids not found in the range: {unseen:?}");
            }
            if let Some(outcome) = outcome
                && !outcome.failed_ids.is_empty()
            {
                println!(
                    "failed ids (first {}): {:?}",
                    outcome.failed_ids.len(),
                    outcome.failed_ids
                );
            }
            if replay.dry_run {
                println!("dry run: nothing was applied");
            }
        }
    }
}
