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

pub(crate) mod api;
mod args;
mod lanes;
mod progress;
mod read;
mod report;
mod select;
mod source;

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use governor::{Quota, RateLimiter};
use wal_apply::TargetRegistry;
use wal_apply::clients::{ClientSettings, Clients};
use wal_clusters::ClusterMap;
use wal_durable::DurableStorage;
use wal_namespaces::Namespace;
use wal_queue::entry::Target as TargetSpec;
use wal_queue::kafka::KafkaSettings;

pub use self::args::Replay;
use self::lanes::{Applier, Lanes, Outcome};
use self::progress::{lock, start_saving};
use self::read::{Ends, Reader, kafka_starts, read_archive, read_topics};
use self::report::{Report, print};
pub use self::select::parse_ids;
use self::select::{Selection, excluded_ids};
use self::source::{ARCHIVE, Source};
use crate::checkpoint::Checkpoint;
use crate::namespace::ArchiveHistory;
use crate::output::{Format, progress, when};
use crate::time::instant;
use crate::{Exit, Failure};

pub async fn run(replay: Replay, control_plane: &str, format: Format) -> Result<(), Failure> {
    if !replay.direct {
        return api::run(&replay, control_plane, format).await;
    }
    if replay.destination.is_some() {
        return Err(Failure::usage(
            "--destination: walctl's own replay applies to the entries' own targets; a replay to one destination runs through the control plane (without --direct)",
        ));
    }
    let namespace = crate::namespace::current(control_plane, &replay.namespace).await?;
    let typed = replay.typed();
    let path = replay
        .checkpoint
        .clone()
        .unwrap_or_else(|| Checkpoint::default_path("replay", &namespace.name, &typed));
    let saved = resumable(&replay, &path, &namespace.name, &typed)?;
    let (from_micros, to_micros) = range(&replay, saved.as_ref())?;
    let target = target_override(&replay)?;
    let (kafka, clients) = connections(&replay, &namespace)?;
    let history = crate::namespace::archive_history(control_plane, &namespace.name).await?;
    let source = source::choose(
        replay.source,
        (&namespace, history),
        (&kafka, &clients),
        saved.as_ref(),
        from_micros,
    )
    .await?;
    let mut selection = Selection::new(
        (from_micros, to_micros, wal_queue::entry::now_micros()),
        excluded_ids(&replay.exclude_ids, &replay.exclude_files)?,
        replay.key.clone(),
        replay.origin_region.clone(),
    );
    let resumed = saved.clone();
    let range = (from_micros, to_micros);
    let mut checkpoint = starting_checkpoint(saved, &namespace.name, typed, range, &path, format);
    let lanes = (!replay.dry_run).then(|| {
        Lanes::start(
            replay.direct_concurrency(),
            Arc::new(applier(&replay, &namespace, target, clients)),
        )
    });
    let bar = progress(format, progress_template(&source));
    let started = Instant::now();
    let mut report = Report::default();
    let done_before = checkpoint.done;
    mark_starts(&source, &kafka, from_micros, &mut checkpoint).await?;
    if !replay.dry_run {
        checkpoint.save(&path)?;
    }
    let checkpoint = Arc::new(Mutex::new(checkpoint));
    let saver = lanes
        .as_ref()
        .map(|lanes| start_saving(lanes, &checkpoint, &path, done_before));
    let mut reader = Reader {
        selection: &mut selection,
        lanes: lanes.as_ref(),
        report: &mut report,
        bar: &bar,
    };
    let range_ends = match &source {
        Source::Kafka { topics } => read_topics(&kafka, topics, &checkpoint, &mut reader).await?,
        Source::Archive { storage } => {
            let read = read_archive(storage, &namespace.name, range, &checkpoint, &mut reader);
            let ends = read.await?;
            let archive = (&namespace, history);
            still_retained(storage, archive, resumed.as_ref(), from_micros).await?;
            ends
        }
    };
    let outcome = match lanes {
        Some(lanes) => {
            let saver = saver.map(|saver| saver.abort_handle());
            Some(finish(lanes, saver, &checkpoint, done_before, range_ends, &path).await?)
        }
        None => None,
    };
    bar.finish_and_clear();
    let took = started.elapsed();
    print(&replay, &selection, &report, outcome.as_ref(), took, format);
    match outcome {
        Some(outcome) if !outcome.failed.is_empty() => Err(Failure::quiet(Exit::Failed)),
        _ => Ok(()),
    }
}

/// The namespace's Kafka cluster and the clients the replay applies with, from the cluster map
/// the operator's flags make.
fn connections(
    replay: &Replay,
    namespace: &Namespace,
) -> Result<(KafkaSettings, Arc<Clients>), Failure> {
    let clusters = replay
        .brokers
        .cluster_map(replay.brokers.kafka(), &replay.cql)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let kafka = namespace_kafka(&clusters, namespace)?;
    Ok((kafka, clients(replay, clusters)?))
}

/// Where the run starts: the checkpoint of an earlier run (said so on a terminal's table), or a
/// new one for `namespace`, `filter` and the time `range`.
fn starting_checkpoint(
    saved: Option<Checkpoint>,
    namespace: &str,
    filter: String,
    range: (i64, i64),
    path: &std::path::Path,
    format: Format,
) -> Checkpoint {
    let checkpoint = saved.unwrap_or_else(|| Checkpoint {
        namespace: namespace.to_owned(),
        filter,
        since_micros: Some(range.0),
        until_micros: Some(range.1),
        ..Checkpoint::default()
    });
    if checkpoint.done > 0 && format == Format::Table {
        eprintln!(
            "walctl: continuing the replay in {} ({} applied before)",
            path.display(),
            checkpoint.done
        );
    }
    checkpoint
}

/// The checkpoint of an earlier run of the same command, unless told to start over (or a dry
/// run, which saves none). One that belongs to another run is refused.
fn resumable(
    replay: &Replay,
    path: &std::path::Path,
    namespace: &str,
    typed: &str,
) -> Result<Option<Checkpoint>, Failure> {
    if replay.from_start || replay.dry_run {
        return Ok(None);
    }
    match Checkpoint::load(path)? {
        Some(saved) if saved.namespace != namespace || saved.filter != typed => {
            Err(Failure::usage(format!(
                "the checkpoint {} belongs to another run (namespace '{}', {}); pass another --checkpoint or --from-start",
                path.display(),
                saved.namespace,
                saved.filter
            )))
        }
        saved => Ok(saved),
    }
}

/// The write-time range in microseconds: a resumed run's own, else --from to --to (now).
fn range(replay: &Replay, saved: Option<&Checkpoint>) -> Result<(i64, i64), Failure> {
    let now = SystemTime::now();
    let (from_micros, to_micros) = match saved {
        Some(saved) => (
            saved.since_micros.unwrap_or(0),
            saved.until_micros.unwrap_or(i64::MAX),
        ),
        None => (
            instant("--from", &replay.from, now)?,
            match &replay.to {
                Some(to) => instant("--to", to, now)?,
                None => wal_queue::entry::now_micros(),
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
    Ok((from_micros, to_micros))
}

/// The target given by --target-kind and --target-settings, checked by the kind's own rules
/// (as the producer checks a write's) before anything is read.
fn target_override(replay: &Replay) -> Result<Option<TargetSpec>, Failure> {
    let (Some(kind), Some(settings)) = (&replay.target_kind, &replay.target_settings) else {
        return Ok(None);
    };
    wal_targets::check(kind, settings)
        .map_err(|refusal| Failure::usage(format!("--target-kind/--target-settings: {refusal}")))?;
    Ok(Some(TargetSpec {
        kind: kind.clone(),
        settings_json: settings.clone(),
    }))
}

fn progress_template(source: &Source) -> &'static str {
    match source {
        Source::Kafka { .. } => {
            "{spinner} {msg} [{bar:30}] {pos}/{len} read ({per_sec}, {eta} left)"
        }
        Source::Archive { .. } => "{spinner} {msg}: {pos} read ({per_sec})",
    }
}

/// Where the range starts on each stream, saved before anything is applied.
async fn mark_starts(
    source: &Source,
    kafka: &KafkaSettings,
    from_micros: i64,
    checkpoint: &mut Checkpoint,
) -> Result<(), Failure> {
    match source {
        Source::Kafka { topics } => kafka_starts(kafka, topics, from_micros, checkpoint).await,
        // The archive is read by write time: a shard's position is the write time below which
        // it is done, and the range's start is --from.
        Source::Archive { .. } => {
            checkpoint.starts.entry(ARCHIVE.to_owned()).or_default();
            Ok(())
        }
    }
}

/// Rows expire by TTL while the replay reads shard after shard: what it needed must still have
/// been there at the end, or part of the range was never read.
async fn still_retained(
    storage: &DurableStorage,
    namespace: (&Namespace, Option<ArchiveHistory>),
    resumed: Option<&Checkpoint>,
    from_micros: i64,
) -> Result<(), Failure> {
    source::check_archive(storage, namespace, resumed, from_micros)
        .await
        .map_err(|gone| {
            Failure::broker(format!(
                "while the replay read the archive, retention removed entries it had not read: {}",
                gone.message
            ))
        })
}

/// Waits for the lanes (their progress saved meanwhile) and saves where the run ended: the whole range when every entry was
/// applied, else each partition's first unfinished entry, so the same command resumes there.
async fn finish(
    lanes: Lanes,
    saver: Option<tokio::task::AbortHandle>,
    checkpoint: &Mutex<Checkpoint>,
    done_before: u64,
    range_ends: Ends,
    path: &std::path::Path,
) -> Result<Outcome, Failure> {
    let watcher = lanes.watcher();
    let outcome = lanes.finish().await;
    // Saved every second until every lane is done: what a kill meanwhile would leave.
    if let Some(saver) = saver {
        saver.abort();
    }
    let mut checkpoint = lock(checkpoint);
    checkpoint.done = done_before + outcome.applied;
    if outcome.failures == 0 {
        for (topic, ends) in range_ends {
            let saved = checkpoint.positions.entry(topic).or_default();
            for (partition, end) in ends {
                let at = saved.entry(partition).or_insert(end);
                *at = (*at).max(end);
            }
        }
    } else {
        checkpoint.advance(watcher.positions());
    }
    checkpoint.save(path)?;
    Ok(outcome)
}

/// The connections a replay reads the archive (on its shard of `clusters`) and applies with,
/// made once.
fn clients(replay: &Replay, clusters: ClusterMap) -> Result<Arc<Clients>, Failure> {
    let settings = ClientSettings {
        cql_nodes: replay.cql.cql_nodes.clone(),
        kafka_client: clusters.default_kafka().client.clone(),
        memcached: replay.memcached.clone(),
        kafka_bootstrap: clusters.default_kafka().bootstrap_servers.clone(),
        ..ClientSettings::none(replay.direct_apply_timeout())
    };
    Clients::new(settings)
        .map(|clients| Arc::new(clients.with_clusters(clusters)))
        .map_err(|e| Failure::usage(format!("target clients: {e}")))
}

/// The Kafka cluster of the namespace's Kafka queues (the map's default when it has none). A
/// replay reads one cluster: queues on several are refused.
fn namespace_kafka(clusters: &ClusterMap, namespace: &Namespace) -> Result<KafkaSettings, Failure> {
    clusters
        .check(std::slice::from_ref(namespace))
        .map_err(|e| Failure::usage(e.to_string()))?;
    let names: std::collections::BTreeSet<&str> = namespace
        .queues
        .iter()
        .filter(|q| q.backend == wal_namespaces::Backend::Kafka)
        .map(|q| clusters.kafka_name(q.cluster.as_deref()))
        .collect();
    if names.len() > 1 {
        let names: Vec<&str> = names.into_iter().collect();
        return Err(Failure::usage(format!(
            "namespace '{}' has Kafka queues on several clusters ({}); walctl replays one cluster's queues, which this build cannot choose yet",
            namespace.name,
            names.join(", ")
        )));
    }
    let name = names.into_iter().next();
    let kafka = name.and_then(|name| clusters.kafka(Some(name)));
    Ok(kafka.unwrap_or_else(|| clusters.default_kafka()).clone())
}

fn applier(
    replay: &Replay,
    namespace: &Namespace,
    target: Option<TargetSpec>,
    clients: Arc<Clients>,
) -> Applier {
    let targets = TargetRegistry::builtin(Arc::clone(&clients));
    let per_second = NonZeroU32::new(replay.direct_rate()).unwrap_or(NonZeroU32::MIN);
    Applier {
        apply: wal_apply::applier::Applier::new(targets, clients, replay.direct_apply_timeout()),
        namespace: namespace.clone(),
        target,
        default_target: namespace
            .default_target
            .as_ref()
            .map(wal_namespaces::TargetConfig::entry_target),
        limiter: RateLimiter::direct(Quota::per_second(per_second)),
    }
}
