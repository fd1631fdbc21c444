//! A replay through the control plane: the namespace's own Kafka queues read over a range of
//! write times, and the entries a [`Selection`] takes put back on their queue for the
//! consumers to apply again. The redrive's reader, rate and progress do the rest (`redrive`).
//!
//! Where each partition's range starts is the broker's offset for the range's start less
//! [`FUTURE_WRITE_TIME`] (a caller's write time may run ahead of its append by that much);
//! the reading goes on to each partition's end as of the start, since an entry written before
//! the range's end may have been appended long after it (a delay, a retry). What retention has
//! removed of the range is refused before anything is put back.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use wal_queue::entry::Entry;
use wal_queue::kafka::scan;

use super::DlqError;
use super::redrive::Positions;
use super::source::{DeadLetters, DlqHandle};
use crate::operations::selection::Selection;
use crate::operations::when;

/// How far ahead of its append an entry's write time may be: the producer takes a caller's
/// original write time up to this far in the future.
pub const FUTURE_WRITE_TIME: Duration = Duration::from_secs(300);

/// What a replay takes: entries written in `[from_micros, to_micros)`, but those named in
/// `excluded`, and only of `key` and `origin_region` when given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplaySettings {
    pub from_micros: i64,
    pub to_micros: i64,
    pub excluded: HashSet<String>,
    pub key: Option<String>,
    pub origin_region: Option<String>,
    /// When the replay began: entries due later are their consumer's to deliver.
    pub now_micros: i64,
    /// The one destination the copies are for; none: every destination.
    pub destination: Option<String>,
}

/// Names the destination `copy` is for: a replay reaches every destination of its namespace
/// (the copy taken may be a retry copy another destination made, marked for it alone), or the
/// one asked for. A region is named in `destination_region`, which only that region's reader
/// takes; another destination in `destination`.
pub fn address(copy: &mut Entry, destination: Option<&str>) {
    copy.destination.clear();
    copy.destination_region.clear();
    match destination {
        None => {}
        Some(name) => match name.strip_prefix("region-") {
            Some(region) => copy.destination_region = region.to_owned(),
            None => copy.destination = name.to_owned(),
        },
    }
}

impl ReplaySettings {
    pub fn selection(&self) -> Selection {
        Selection::new(
            (self.from_micros, self.to_micros, self.now_micros),
            self.excluded.clone(),
            self.key.clone(),
            self.origin_region.clone(),
        )
    }
}

/// Where a stream's range started and ended when the replay first read it, kept in its
/// progress beside the stream's own position under the stream's name and these suffixes (a
/// Kafka topic's name has no '#'): a resumed run reads the same range, no further (its own
/// copies lie past the ends), and takes nothing again that an earlier run took.
const STARTS: &str = "#starts";
const ENDS: &str = "#ends";

/// The most entries one replay through the control plane reads: it keeps every id it took
/// (about 40 bytes each), in the process that also serves the registry. A longer range is
/// replayed in parts, or by walctl (`--direct`).
pub const MOST_ENTRIES: u64 = 5_000_000;

/// What a replay reads of one stream: from `starts` to `ends` (empty: the ends when it opens),
/// taking only what lies at or past `done` (the rest an earlier run took).
#[derive(Debug)]
pub struct Bounds {
    pub starts: BTreeMap<i32, i64>,
    pub ends: BTreeMap<i32, i64>,
    pub done: BTreeMap<i32, i64>,
}

/// Readies `stream` for reading: on a first run, where its range starts (the broker's
/// offsets for the range's start, less [`FUTURE_WRITE_TIME`]), kept in `positions`; on a
/// resumed one, what it kept. Refuses when retention removed part of what is left to read,
/// naming each partition and what it holds.
pub async fn prepare(
    dead: &DeadLetters,
    stream: &DlqHandle,
    replay: &ReplaySettings,
    positions: &mut Positions,
) -> Result<Bounds, DlqError> {
    let topic = &stream.name;
    let kafka = dead.kafka_of(stream)?;
    let broker = |e: &dyn std::fmt::Display| DlqError::Broker(format!("reading '{topic}': {e}"));
    let starts_key = format!("{topic}{STARTS}");
    let resumed = positions.contains_key(&starts_key);
    if !resumed {
        check_range(dead, stream, replay).await?;
        let from = scan::offsets_at(kafka, topic, scan_from(replay))
            .await
            .map_err(|e| broker(&e))?;
        positions.insert(starts_key.clone(), from.clone());
        positions.insert(topic.clone(), from);
    }
    let done = positions.get(topic).cloned().unwrap_or_default();
    if resumed {
        let mut gone = Vec::new();
        for trimmed in scan::trimmed(kafka, topic).await.map_err(|e| broker(&e))? {
            let needed = done.get(&trimmed.partition).copied().unwrap_or(0);
            if trimmed.first_offset > needed {
                gone.push(format!(
                    "partition {} still needed offsets from {needed}, and holds them from {}",
                    trimmed.partition, trimmed.first_offset
                ));
            }
        }
        refuse_gone(
            topic,
            &gone,
            "retention removed records this replay had not read yet",
        )?;
    }
    Ok(Bounds {
        starts: positions.get(&starts_key).cloned().unwrap_or_default(),
        ends: positions
            .get(&format!("{topic}{ENDS}"))
            .cloned()
            .unwrap_or_default(),
        done,
    })
}

/// Keeps the ends a stream's first read found, so a resumed run stops there too.
pub fn keep_ends(stream: &DlqHandle, ends: &BTreeMap<i32, i64>, positions: &mut Positions) {
    positions
        .entry(format!("{}{ENDS}", stream.name))
        .or_insert_with(|| ends.clone());
}

/// Refuses a range that starts before what `stream` still holds: a partition whose first
/// record left is younger than where the range is read from lost records of the range. One
/// with no record left cannot say when it lost them (most likely long before), and passes.
pub async fn check_range(
    dead: &DeadLetters,
    stream: &DlqHandle,
    replay: &ReplaySettings,
) -> Result<(), DlqError> {
    let topic = &stream.name;
    let kafka = dead.kafka_of(stream)?;
    let trimmed = scan::trimmed(kafka, topic)
        .await
        .map_err(|e| DlqError::Broker(format!("reading '{topic}': {e}")))?;
    let gone: Vec<String> = trimmed
        .iter()
        .filter_map(|trimmed| {
            let first = trimmed.first_micros?;
            (first > scan_from(replay)).then(|| {
                format!(
                    "partition {} holds records from offset {} on, appended from {} on",
                    trimmed.partition,
                    trimmed.first_offset,
                    when(first)
                )
            })
        })
        .collect();
    refuse_gone(
        topic,
        &gone,
        &format!(
            "the range from {} cannot be replayed in full, retention removed part of it",
            when(replay.from_micros)
        ),
    )
}

/// Where a range is read from: its start, less what a write time may run ahead.
fn scan_from(replay: &ReplaySettings) -> i64 {
    let ahead = i64::try_from(FUTURE_WRITE_TIME.as_micros()).unwrap_or(0);
    replay.from_micros.saturating_sub(ahead)
}

fn refuse_gone(topic: &str, gone: &[String], headline: &str) -> Result<(), DlqError> {
    if gone.is_empty() {
        return Ok(());
    }
    Err(DlqError::Usage(format!(
        "{headline}: topic '{topic}' {}; restore a backup taken after those times and replay from its time, or replay from the namespace's archive (walctl replay --direct)",
        gone.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_addressed_to_every_destination_or_the_one_asked_for() {
        // A retry copy one store made, marked for it alone.
        let taken = Entry {
            destination: "cache".into(),
            destination_region: "eu".into(),
            ..Entry::default()
        };
        let mut copy = taken.clone();
        address(&mut copy, None);
        assert_eq!(
            (copy.destination.as_str(), copy.destination_region.as_str()),
            ("", "")
        );
        let mut copy = taken.clone();
        address(&mut copy, Some("region-useast1"));
        assert_eq!(
            (copy.destination.as_str(), copy.destination_region.as_str()),
            ("", "useast1"),
            "a region's reader takes a copy named in destination_region, and no other"
        );
        let mut copy = taken;
        address(&mut copy, Some("events"));
        assert_eq!(
            (copy.destination.as_str(), copy.destination_region.as_str()),
            ("events", "")
        );
    }
}
