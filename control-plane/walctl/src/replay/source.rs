//! Where a replay reads the namespace's history: its Kafka topics, or its archive (a CQL table
//! every consumed entry is kept in). Each is checked to hold the whole range before anything is
//! applied; a range partly gone is refused, naming what is gone.

use std::sync::Arc;
use std::time::Duration;

use wal_apply::clients::Clients;
use wal_durable::{ARCHIVE_SHARDS, DurableStorage};
use wal_namespaces::{Backend, Namespace};
use wal_queue::entry::now_micros;
use wal_queue::kafka::{KafkaSettings, scan};

use crate::checkpoint::Checkpoint;
use crate::namespace::ArchiveHistory;
use crate::output::when;
use crate::{Exit, Failure};

/// The checkpoint's name for the archive in place of a topic (no topic can be named so).
pub const ARCHIVE: &str = "(archive)";
/// How long after a config turning the archive on is stored every consumer is taken to have
/// loaded it: the Watch stream tells them at once and a poll every 2 s, and the crew it
/// replaces gets at most the 30 s shutdown grace. Entries written before that may have been
/// consumed by a crew that did not archive.
const RELOAD_MARGIN_MICROS: i64 = 120_000_000;

/// What `--source` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Wanted {
    /// Kafka when its topics still hold the range, else the archive.
    Auto,
    Kafka,
    Archive,
}

/// The chosen source, checked to hold the range.
#[derive(Debug)]
pub enum Source {
    Kafka { topics: Vec<String> },
    Archive { storage: Arc<DurableStorage> },
}

/// Chooses the source and checks it holds what the run needs: the range from `from_micros` on a
/// first run; on a resume, what the saved positions have not passed yet (and the source the
/// first run chose).
pub async fn choose(
    wanted: Wanted,
    (namespace, history): (&Namespace, Option<ArchiveHistory>),
    (kafka, clients): (&KafkaSettings, &Clients),
    saved: Option<&Checkpoint>,
    from_micros: i64,
) -> Result<Source, Failure> {
    let wanted = match saved {
        Some(saved) if saved.starts.contains_key(ARCHIVE) => Wanted::Archive,
        Some(_) => Wanted::Kafka,
        None => wanted,
    };
    let sqs = namespace.queues.iter().find(|q| q.backend == Backend::Sqs);
    match (wanted, sqs) {
        (Wanted::Kafka, Some(queue)) => Err(Failure::usage(format!(
            "namespace '{}' has SQS queue '{}', and SQS deletes what was consumed: replay it from its archive (--source archive)",
            namespace.name, queue.name
        ))),
        (Wanted::Archive, _) | (Wanted::Auto, Some(_)) => {
            let storage = archive(namespace, clients).await?;
            check_archive(&storage, (namespace, history), saved, from_micros).await?;
            Ok(Source::Archive { storage })
        }
        (Wanted::Kafka | Wanted::Auto, None) => {
            let topics: Vec<String> = namespace.queues.iter().map(|q| q.name.clone()).collect();
            let kept = match saved {
                Some(saved) => check_resumable(kafka, &topics, saved).await,
                None => check_retention(kafka, &topics, from_micros).await,
            };
            match kept {
                Ok(()) => Ok(Source::Kafka { topics }),
                // Only for what retention removed (a usage refusal), not for a broker that
                // did not answer: the archive lacks what is still waiting on the queue.
                Err(gone)
                    if gone.exit == Exit::Usage
                        && wanted == Wanted::Auto
                        && has_archive(namespace) =>
                {
                    let storage = archive(namespace, clients).await?;
                    check_archive(&storage, (namespace, history), saved, from_micros)
                        .await
                        .map_err(|also| {
                            Failure::usage(format!(
                                "{}\nNor can the archive: {}",
                                gone.message, also.message
                            ))
                        })?;
                    eprintln!(
                        "walctl: Kafka no longer holds the whole range; replaying from the archive"
                    );
                    Ok(Source::Archive { storage })
                }
                Err(gone) => Err(gone),
            }
        }
    }
}

fn has_archive(namespace: &Namespace) -> bool {
    namespace
        .durable_storage
        .as_ref()
        .is_some_and(|d| d.archive.is_some())
}

/// Connects to the namespace's archive, or says how to turn it on. Through the clients the
/// replay applies with, so a claim check read later shares the session.
async fn archive(namespace: &Namespace, clients: &Clients) -> Result<Arc<DurableStorage>, Failure> {
    let durable = namespace
        .durable_storage
        .as_ref()
        .filter(|d| d.archive.is_some())
        .ok_or_else(|| {
            Failure::usage(format!(
                "namespace '{}' keeps no archive; turn it on with durable_storage.archive in its config (only entries consumed after that can be replayed from it)",
                namespace.name
            ))
        })?;
    let settings = clients
        .durable_settings(durable)
        .map_err(|e| Failure::usage(e.to_string()))?;
    if settings.nodes.is_empty() {
        return Err(Failure::usage(
            "the archive is in CQL; pass --cql-nodes (or set WAL_CQL_NODES), or name its shard's contact points in the cluster map",
        ));
    }
    clients.durable(durable).await.map_err(|e| {
        Failure::broker(format!(
            "the archive in keyspace '{}': {e}",
            durable.keyspace
        ))
    })
}

/// Refuses a range the archive does not hold in full: entries written before it was turned on
/// were never archived (unless consumed after), and entries older than its retention expired.
/// `history`: what the namespace's versions say of the archive.
pub async fn check_archive(
    storage: &DurableStorage,
    (namespace, history): (&Namespace, Option<ArchiveHistory>),
    saved: Option<&Checkpoint>,
    from_micros: i64,
) -> Result<(), Failure> {
    // Rows keep the TTL they were written with: the shortest retention since it was turned on.
    let retention = history.map_or(Duration::ZERO, |h| h.shortest_retention);
    let since = storage
        .archive_started(&namespace.name)
        .await
        .map_err(|e| Failure::broker(format!("reading the archive's start: {e}")))?
        .ok_or_else(|| {
            Failure::usage(format!(
                "namespace '{}' has an archive, but no consumer has archived an entry yet",
                namespace.name
            ))
        })?;
    // The recorded start is the first ever: an archive turned off and on again holds nothing
    // from before the config that turned it on last, and, unless that config created the
    // namespace, nothing until every consumer has loaded it.
    let turned_on = history.map_or(i64::MAX, |h| {
        let margin = if h.from_creation {
            0
        } else {
            RELOAD_MARGIN_MICROS
        };
        h.turned_on_micros.saturating_add(margin)
    });
    let since = since.max(turned_on);
    // On a resume only what is not applied yet must still be there.
    let needed = match saved.and_then(|s| s.positions.get(ARCHIVE)) {
        Some(positions) => (0..ARCHIVE_SHARDS)
            .map(|shard| positions.get(&shard).copied().unwrap_or(from_micros))
            .min()
            .unwrap_or(from_micros)
            .max(from_micros),
        None => from_micros,
    };
    match archive_gap(&namespace.name, (since, retention), now_micros(), needed) {
        Some(gap) => Err(Failure::usage(gap)),
        None => Ok(()),
    }
}

/// What of the entries written from `needed` on the archive no longer (or never) held, if any:
/// those written before it was turned on (`since`), and those older than its retention.
fn archive_gap(
    namespace: &str,
    (since, retention): (i64, Duration),
    now: i64,
    needed: i64,
) -> Option<String> {
    let expired_before =
        now.saturating_sub(i64::try_from(retention.as_micros()).unwrap_or(i64::MAX));
    if needed < since {
        return Some(format!(
            "the archive of namespace '{namespace}' holds entries from {} on, when it was turned on; entries written from {} to {} are not in it. Restore a backup taken after {}, and replay from that backup's time",
            when(since),
            when(needed),
            when(since),
            when(since)
        ));
    }
    if needed < expired_before {
        return Some(format!(
            "the archive of namespace '{namespace}' keeps entries {} days: those written from {} to {} have expired. Restore a backup taken after {}, and replay from that backup's time",
            retention.as_secs() / 86_400,
            when(needed),
            when(expired_before),
            when(expired_before)
        ));
    }
    None
}

/// Refuses a range that starts before what the topics still hold, naming what is gone. A
/// partition with nothing left is warned about instead (its removed records cannot be dated).
async fn check_retention(
    kafka: &KafkaSettings,
    topics: &[String],
    from_micros: i64,
) -> Result<(), Failure> {
    let mut gone = Vec::new();
    for topic in topics {
        for trimmed in scan::trimmed(kafka, topic)
            .await
            .map_err(|e| broker(topic, &e))?
        {
            match trimmed.first_micros {
                Some(first) if first > from_micros => gone.push(format!(
                    "topic '{topic}' partition {} holds records from {} on (offset {}); older ones were removed",
                    trimmed.partition,
                    when(first),
                    trimmed.first_offset
                )),
                Some(_) => {}
                // Nothing left to date the removed records by: usually a quiet partition whose
                // records all expired long before the range. Said, not refused.
                None => eprintln!(
                    "walctl: topic '{topic}' partition {} holds none of its {} records any more; any written after --from cannot be replayed from Kafka",
                    trimmed.partition, trimmed.first_offset
                ),
            }
        }
    }
    none_gone(
        &gone,
        &format!(
            "the range from {} cannot be replayed in full from Kafka, whose retention has removed part of it",
            when(from_micros)
        ),
        "Restore a backup taken after the latest of those times, and replay from that backup's time",
    )
}

/// On a resume: refuses when retention has removed records the replay has not finished.
async fn check_resumable(
    kafka: &KafkaSettings,
    topics: &[String],
    saved: &Checkpoint,
) -> Result<(), Failure> {
    let mut gone = Vec::new();
    for topic in topics {
        let Some(positions) = saved.positions.get(topic) else {
            continue;
        };
        for trimmed in scan::trimmed(kafka, topic)
            .await
            .map_err(|e| broker(topic, &e))?
        {
            let needed = positions.get(&trimmed.partition).copied().unwrap_or(0);
            if trimmed.first_offset > needed {
                gone.push(format!(
                    "topic '{topic}' partition {}: the replay still needs offsets from {needed}, the topic holds them from {}",
                    trimmed.partition, trimmed.first_offset
                ));
            }
        }
    }
    none_gone(
        &gone,
        "retention removed records this replay has not applied yet",
        "Restore a backup taken after them, and replay from its time with --from-start",
    )
}

/// Ok when nothing is `gone`; else a refusal: `headline`, each part gone on a line of its own,
/// then `advice`.
fn none_gone(gone: &[String], headline: &str, advice: &str) -> Result<(), Failure> {
    if gone.is_empty() {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "{headline}:\n  {}\n{advice}",
        gone.join("\n  ")
    )))
}

pub fn broker(topic: &str, error: &impl std::fmt::Display) -> Failure {
    Failure::broker(format!(
        "reading topic '{topic}': {error}; run the replay again to continue"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000_000;

    #[test]
    fn the_archive_holds_from_its_start_until_its_retention_expires() {
        let week = Duration::from_secs(7 * 86_400);
        let now = 1_000 * HOUR;
        let since = now - 48 * HOUR;
        assert_eq!(archive_gap("ns", (since, week), now, since), None);
        assert_eq!(archive_gap("ns", (since, week), now, now - HOUR), None);
        let before = archive_gap("ns", (since, week), now, since - 1).unwrap();
        assert!(before.contains("when it was turned on"), "{before}");
        // Turned on long ago: retention is what bounds it.
        let old = now - 30 * 24 * HOUR;
        assert_eq!(
            archive_gap("ns", (old, week), now, now - 6 * 24 * HOUR),
            None
        );
        let expired = archive_gap("ns", (old, week), now, now - 8 * 24 * HOUR).unwrap();
        assert!(expired.contains("keeps entries 7 days"), "{expired}");
        assert!(expired.contains("have expired"), "{expired}");
    }
}
