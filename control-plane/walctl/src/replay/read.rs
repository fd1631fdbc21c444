//! Reading the range: a Kafka namespace's topics from where each partition's range starts, or
//! the archive shard by shard, each entry selected (or left out, counted by why) and handed to
//! the lanes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wal_durable::{ARCHIVE_SHARDS, DurableStorage};
use wal_queue::entry::{CodecError, Entry};
use wal_queue::kafka::{KafkaSettings, scan};

use super::lanes::{Job, Lanes};
use super::progress::lock;
use super::report::Report;
use super::report::{SAMPLE, sample};
use super::select::{Left, Selection};
use super::source::{ARCHIVE, broker};
use crate::Failure;
use crate::checkpoint::Checkpoint;

/// How far ahead of its append a write time may be: the producer accepts a caller's
/// original write time up to 300 s in the future, so the range's records may start that much
/// before --from. The write-time filter does the rest.
pub(super) const FUTURE_WRITE_TIME: Duration = Duration::from_secs(300);
/// Where every partition's range starts, saved before anything is applied, so a resumed run
/// never falls back to a partition's first record.
pub(super) async fn kafka_starts(
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
pub(super) struct Reader<'a> {
    pub(super) selection: &'a mut Selection,
    pub(super) lanes: Option<&'a Lanes>,
    pub(super) report: &'a mut Report,
    pub(super) bar: &'a indicatif::ProgressBar,
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
pub(super) async fn read_topics(
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
        reader.bar.inc_length(records.unread());
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
pub(super) async fn read_archive(
    storage: &Arc<DurableStorage>,
    namespace: &str,
    (from_micros, to_micros): (i64, i64),
    checkpoint: &Mutex<Checkpoint>,
    reader: &mut Reader<'_>,
) -> Result<Ends, Failure> {
    let done_below = lock(checkpoint)
        .positions
        .get(ARCHIVE)
        .cloned()
        .unwrap_or_default();
    let done_below = &done_below;
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
pub(super) type Ends = BTreeMap<String, BTreeMap<i32, i64>>;
