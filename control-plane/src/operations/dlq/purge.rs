//! Purging dead letters: removing them for good, counted first. An SQS DLQ's messages are
//! deleted one by one, so any filter works (up to [`SQS_MAX_HELD`] a run). A Kafka DLQ is a
//! log: only each partition's oldest records can go (Kafka's DeleteRecords), so a purge there
//! takes everything, or everything up to the first record dead-lettered at or after `until`;
//! `since` and a class cannot be purged from it.
//!
//! A purge counts what it would remove before it removes anything, and with `expect` removes
//! nothing unless that count is the one the operator saw in a dry run.

use std::collections::BTreeMap;

use wal_queue::kafka::scan;

use wal_namespaces::Backend;

use super::source::{DeadLetters, DlqHandle, SQS_MAX_HELD, receive_all, release};
use super::{DlqError, Filter, Verdict};

/// What a purge removed (or, dry, would remove), by DLQ.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Purged {
    pub by_dlq: BTreeMap<String, u64>,
}

impl Purged {
    pub fn total(&self) -> u64 {
        self.by_dlq.values().sum()
    }
}

/// Why a purge removed nothing: what it counted is not what was expected.
pub const COUNT_CHANGED: &str = "the dead letters to purge changed since the dry run";

/// How a purge ended early: what it had removed by then, and why it stopped.
#[derive(Debug)]
pub struct Stopped {
    pub purged: Purged,
    pub error: DlqError,
}

/// Purges what `filter` takes from every DLQ of `dead` (`dry_run`: counts only). With
/// `expect`, removes nothing unless the count is `expect` ([`DlqError::Usage`] naming both).
/// However it ends, every SQS message it held is removed or visible again.
pub async fn purge(
    dead: &DeadLetters,
    filter: &Filter,
    dry_run: bool,
    expect: Option<u64>,
) -> Result<Purged, Stopped> {
    let nothing = |error| Stopped {
        purged: Purged::default(),
        error,
    };
    let kafka_filter = filter.since_micros.is_none() && filter.class.is_none();
    if !kafka_filter && dead.dlqs.iter().any(|d| d.backend == Backend::Kafka) {
        return Err(nothing(DlqError::Usage(
            "a Kafka DLQ is a log: a purge removes its oldest records, all of them or those dead-lettered before --until; it cannot take --since or --class (redrive those, or let retention remove them)".to_owned(),
        )));
    }
    // Counted first, everywhere; SQS messages stay held (invisible) until removed or released.
    let mut plans = Vec::new();
    for dlq in &dead.dlqs {
        let plan = match dlq.backend {
            Backend::Kafka => kafka_cuts(dead, dlq, filter).await.map(Plan::Kafka),
            Backend::Sqs => sqs_split(dlq, filter).await.map(Plan::Sqs),
        };
        match plan {
            Ok(plan) => plans.push((dlq, plan)),
            Err(error) => {
                release_all(&plans).await;
                return Err(nothing(error));
            }
        }
    }
    let counted = Purged {
        by_dlq: named_counts(plans.iter().map(|(dlq, plan)| (*dlq, plan.count()))),
    };
    let changed = expect.is_some_and(|expected| expected != counted.total());
    if dry_run || changed {
        release_all(&plans).await;
        if changed {
            return Err(nothing(DlqError::Usage(format!(
                "{COUNT_CHANGED}: {} now, {} expected; nothing was purged (dry-run again)",
                counted.total(),
                expect.unwrap_or_default()
            ))));
        }
        return Ok(counted);
    }
    remove(dead, plans).await
}

/// Removes what the plans counted, DLQ by DLQ; on a failure, releases what is left held and
/// says what was removed before it.
async fn remove(dead: &DeadLetters, plans: Vec<(&DlqHandle, Plan)>) -> Result<Purged, Stopped> {
    let mut removed: Vec<(&DlqHandle, u64)> = Vec::new();
    let mut plans = plans.into_iter();
    while let Some((dlq, plan)) = plans.next() {
        let (count, failed) = match plan {
            Plan::Kafka(cuts) => match delete_prefix(dead, dlq, &cuts).await {
                Ok(count) => (count, None),
                Err(error) => (0, Some(error)),
            },
            Plan::Sqs((taken, passed)) => {
                release(dlq, &passed).await;
                let mut count = 0;
                let mut failed = None;
                for (at, delivery) in taken.iter().enumerate() {
                    if let Err(e) = dlq.queue.acknowledge(delivery).await {
                        failed = Some(DlqError::Broker(format!(
                            "purging DLQ '{}' after {count} messages: {e}",
                            dlq.name
                        )));
                        release(dlq, &taken[at..]).await;
                        break;
                    }
                    count += 1;
                }
                (count, failed)
            }
        };
        removed.push((dlq, count));
        if let Some(error) = failed {
            let left: Vec<(&DlqHandle, Plan)> = plans.collect();
            release_all(&left).await;
            let purged = Purged {
                by_dlq: named_counts(removed),
            };
            return Err(Stopped { purged, error });
        }
    }
    Ok(Purged {
        by_dlq: named_counts(removed),
    })
}

/// Deletes a Kafka DLQ's records before the cuts; how many went.
async fn delete_prefix(
    dead: &DeadLetters,
    dlq: &DlqHandle,
    cuts: &BTreeMap<i32, (i64, i64)>,
) -> Result<u64, DlqError> {
    let kafka = dead.kafka_of(dlq)?;
    let before: BTreeMap<i32, i64> = cuts.iter().map(|(p, (_, cut))| (*p, *cut)).collect();
    wal_queue::kafka::scan::delete_before(kafka, &dlq.name, &before)
        .await
        .map_err(|e| DlqError::Broker(format!("purging DLQ '{}': {e}", dlq.name)))?;
    Ok(cuts
        .values()
        .map(|(start, cut)| u64::try_from(cut - start).unwrap_or(0))
        .sum())
}

/// Makes every SQS message the plans hold visible again.
async fn release_all(plans: &[(&DlqHandle, Plan)]) {
    for (dlq, plan) in plans {
        if let Plan::Sqs((taken, passed)) = plan {
            release(dlq, taken).await;
            release(dlq, passed).await;
        }
    }
}

/// Counts by DLQ name; two DLQs of one name (a Kafka topic and an SQS queue) add up.
fn named_counts<'a>(
    counts: impl IntoIterator<Item = (&'a DlqHandle, u64)>,
) -> BTreeMap<String, u64> {
    let mut named = BTreeMap::new();
    for (dlq, count) in counts {
        *named.entry(dlq.name.clone()).or_default() += count;
    }
    named
}

enum Plan {
    /// Partition -> (its first offset, the offset before which records go).
    Kafka(BTreeMap<i32, (i64, i64)>),
    /// The messages taken and those passed over, all held.
    Sqs((Vec<wal_queue::Delivery>, Vec<wal_queue::Delivery>)),
}

impl Plan {
    fn count(&self) -> u64 {
        match self {
            Self::Kafka(cuts) => cuts
                .values()
                .map(|(start, cut)| u64::try_from(cut - start).unwrap_or(0))
                .sum(),
            Self::Sqs((taken, _)) => taken.len() as u64,
        }
    }
}

/// Where each partition's purge stops: its end, or its first record dead-lettered at or after
/// `until` (an undecodable one, whose time is unknown, stops it too).
async fn kafka_cuts(
    dead: &DeadLetters,
    dlq: &DlqHandle,
    filter: &Filter,
) -> Result<BTreeMap<i32, (i64, i64)>, DlqError> {
    let mut scan = dead
        .scan(dlq, BTreeMap::new(), BTreeMap::new(), scan::Gaps::Skip)
        .await?;
    let mut cuts: BTreeMap<i32, (i64, i64)> = scan
        .ends
        .iter()
        .map(|(p, end)| {
            let start = scan.starts.get(p).copied().unwrap_or(*end).min(*end);
            (*p, (start, *end))
        })
        .collect();
    let Some(until) = filter.until_micros else {
        return Ok(cuts);
    };
    let mut stopped: BTreeMap<i32, i64> = BTreeMap::new();
    while let Some(record) = scan.records.recv().await {
        let record =
            record.map_err(|e| DlqError::Broker(format!("reading DLQ '{}': {e}", dlq.name)))?;
        if stopped.contains_key(&record.partition) {
            continue;
        }
        let before = matches!(&record.entry, Ok(entry) if entry.dead_lettered_at_micros < until);
        if !before {
            stopped.insert(record.partition, record.offset);
        }
    }
    for (partition, at) in stopped {
        if let Some((_, cut)) = cuts.get_mut(&partition) {
            *cut = at;
        }
    }
    Ok(cuts)
}

/// An SQS DLQ's messages (up to [`SQS_MAX_HELD`]), split into those `filter` takes and the
/// others, all held invisible.
async fn sqs_split(
    dlq: &DlqHandle,
    filter: &Filter,
) -> Result<(Vec<wal_queue::Delivery>, Vec<wal_queue::Delivery>), DlqError> {
    let held = match receive_all(dlq).await {
        Ok(held) => held,
        Err((held, error)) => {
            release(dlq, &held).await;
            return Err(error);
        }
    };
    if held.len() >= SQS_MAX_HELD {
        tracing::warn!(dlq = %dlq.name, "an SQS DLQ of {SQS_MAX_HELD} messages or more: a purge takes that many at most; run it again for the rest");
    }
    Ok(held
        .into_iter()
        .partition(|delivery| match &delivery.entry {
            Ok(entry) => filter.judge(entry) == Verdict::Take,
            // An undecodable message is purged only by a purge of everything.
            Err(_) => *filter == Filter::default(),
        }))
}
