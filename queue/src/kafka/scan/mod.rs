//! Reading a topic's records straight from its partitions, without a consumer group: for the
//! operator's DLQ tools, which must neither disturb the namespace's consumers nor depend on a
//! group's position. A scan reads each partition from a given offset up to its end as it was
//! when the scan began, so records added meanwhile wait for the next scan.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;

use super::KafkaSettings;
use super::lag::partition_ids;
use crate::entry::{self, CodecError, Entry};

mod delete;
mod retention;
pub use delete::delete_before;
pub use retention::{Trimmed, offsets_at, trimmed};

/// How long each broker call of a scan may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Records are handed over in batches of this many at most, or fewer holding this many bytes:
/// one hand-over per record made the reading thread and the caller wake each other for every
/// record once the caller was the slower one.
const BATCH_RECORDS: usize = 256;
const BATCH_BYTES: usize = 4 * 1024 * 1024;
/// Batches read ahead of the caller.
const READ_AHEAD: usize = 2;
/// A scan that receives nothing this long, short of its ends, fails rather than hang.
const STALL_LIMIT: Duration = Duration::from_secs(30);

/// One record of a scan.
#[derive(Debug)]
pub struct Scanned {
    pub partition: i32,
    pub offset: i64,
    pub entry: Result<Entry, CodecError>,
}

/// A scan under way: where it starts and stops, and its records in offset order per partition.
#[derive(Debug)]
pub struct Scan {
    /// Where each partition is read from: the offset asked for, or the partition's first record
    /// when none was asked or the one asked is no longer retained.
    pub starts: BTreeMap<i32, i64>,
    /// Each partition's end when the scan began: the offset after its last record.
    pub ends: BTreeMap<i32, i64>,
    /// Partitions where the offset asked for was past the end: the topic was deleted and made
    /// again, so they are read from their first record instead.
    pub reset: Vec<i32>,
    pub records: Records,
}

impl Scan {
    /// How many records the scan has to read: from each partition's start to its end.
    pub fn unread(&self) -> u64 {
        let unread: i64 = self
            .ends
            .iter()
            .map(|(p, end)| end - self.starts.get(p).copied().unwrap_or(*end).min(*end))
            .sum();
        u64::try_from(unread).unwrap_or(0)
    }
}

/// A scan's records, in offset order per partition; after an error, none.
#[derive(Debug)]
pub struct Records {
    batches: mpsc::Receiver<Vec<Result<Scanned, KafkaError>>>,
    batch: std::vec::IntoIter<Result<Scanned, KafkaError>>,
}

impl Records {
    /// The next record, or None after the last one (or after an error).
    pub async fn recv(&mut self) -> Option<Result<Scanned, KafkaError>> {
        loop {
            if let Some(record) = self.batch.next() {
                return Some(record);
            }
            self.batch = self.batches.recv().await?.into_iter();
        }
    }
}

/// Records read and not yet handed over.
#[derive(Default)]
struct Batch {
    records: Vec<Result<Scanned, KafkaError>>,
    bytes: usize,
}

impl Batch {
    fn full(&self) -> bool {
        self.records.len() >= BATCH_RECORDS || self.bytes >= BATCH_BYTES
    }

    /// Hands the records over (waiting while the caller is behind); false when the caller
    /// stopped reading.
    fn hand_over(&mut self, sender: &mpsc::Sender<Vec<Result<Scanned, KafkaError>>>) -> bool {
        self.bytes = 0;
        let records = std::mem::take(&mut self.records);
        records.is_empty() || sender.blocking_send(records).is_ok()
    }
}

/// What a scan does when records it is to read are removed (by retention) while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gaps {
    /// Go on from the first record left (listing a DLQ).
    Skip,
    /// Fail (a replay, which must not leave out what it was asked for).
    Fail,
}

/// Starts reading `topic` from `from[partition]` (a partition's first record when absent) up
/// to `upto[partition]` or, when absent or further, its current end. A topic that does not
/// exist scans as empty.
pub async fn scan(
    settings: &KafkaSettings,
    topic: &str,
    from: BTreeMap<i32, i64>,
    upto: BTreeMap<i32, i64>,
    gaps: Gaps,
) -> Result<Scan, KafkaError> {
    let settings = settings.clone();
    let topic = topic.to_owned();
    let (sender, batches) = mpsc::channel(READ_AHEAD);
    let (ready, started) = tokio::sync::oneshot::channel();
    // rdkafka's BaseConsumer blocks: the reading runs on a thread of its own, handing records
    // over as the caller takes them.
    tokio::task::spawn_blocking(move || {
        let opened = open(&settings, &topic, &from, &upto, gaps);
        let Opened {
            consumer,
            starts,
            ends,
            reset,
        } = match opened {
            Ok(opened) => opened,
            Err(error) => {
                let _ = ready.send(Err(error));
                return;
            }
        };
        let next = starts.clone();
        if ready.send(Ok((starts, ends.clone(), reset))).is_err() {
            return;
        }
        read(&consumer, next, &ends, &sender);
    });
    let (starts, ends, reset) = started
        .await
        .map_err(|_| KafkaError::MessageConsumption(RDKafkaErrorCode::Fail))??;
    Ok(Scan {
        starts,
        ends,
        reset,
        records: Records {
            batches,
            batch: Vec::new().into_iter(),
        },
    })
}

/// Reads the assigned partitions from `next` up to their `ends`, handing records to `sender` in
/// batches; it returns at the ends, when the caller stops taking, or after handing over an
/// error (a failed poll, or no record for [`STALL_LIMIT`]).
fn read(
    consumer: &BaseConsumer,
    mut next: BTreeMap<i32, i64>,
    ends: &BTreeMap<i32, i64>,
    sender: &mpsc::Sender<Vec<Result<Scanned, KafkaError>>>,
) {
    let mut batch = Batch::default();
    let mut last_record = Instant::now();
    while next.iter().any(|(p, offset)| *offset < ends[p]) {
        // Wait only with nothing in hand: what is held goes to the caller first.
        let wait = if batch.records.is_empty() {
            Duration::from_millis(500)
        } else {
            Duration::ZERO
        };
        let Some(polled) = consumer.poll(wait) else {
            if !batch.records.is_empty() {
                if !batch.hand_over(sender) {
                    return; // The caller stopped reading.
                }
                // After the hand-over, which waits as long as the caller takes.
                last_record = Instant::now();
            } else if last_record.elapsed() > STALL_LIMIT {
                batch.records.push(Err(KafkaError::MessageConsumption(
                    RDKafkaErrorCode::OperationTimedOut,
                )));
                batch.hand_over(sender);
                return;
            }
            continue;
        };
        let message = match polled {
            Ok(message) => message,
            Err(error) => {
                batch.records.push(Err(error));
                batch.hand_over(sender);
                return;
            }
        };
        let (partition, offset) = (message.partition(), message.offset());
        let Some(end) = ends.get(&partition) else {
            continue;
        };
        if offset >= *end {
            continue;
        }
        next.insert(partition, offset + 1);
        let payload = message.payload().unwrap_or_default();
        batch.bytes += payload.len();
        batch.records.push(Ok(Scanned {
            partition,
            offset,
            entry: entry::decode(payload),
        }));
        if batch.full() {
            if !batch.hand_over(sender) {
                return;
            }
            last_record = Instant::now();
        }
    }
    batch.hand_over(sender);
}

/// A consumer assigned to each partition that has records to read, where each is read from,
/// the partitions' ends, and the partitions whose asked offset was past the end.
struct Opened {
    consumer: BaseConsumer,
    starts: BTreeMap<i32, i64>,
    ends: BTreeMap<i32, i64>,
    reset: Vec<i32>,
}

fn open(
    settings: &KafkaSettings,
    topic: &str,
    from: &BTreeMap<i32, i64>,
    upto: &BTreeMap<i32, i64>,
    gaps: Gaps,
) -> Result<Opened, KafkaError> {
    let consumer = reader(settings, gaps)?;
    let mut ends = BTreeMap::new();
    let mut starts = BTreeMap::new();
    let mut reset = Vec::new();
    let mut assignment = TopicPartitionList::new();
    for id in partition_ids(&consumer, topic)? {
        let (low, watermark) = consumer.fetch_watermarks(topic, id, CALL_TIMEOUT)?;
        let high = upto
            .get(&id)
            .map_or(watermark, |upto| (*upto).min(watermark));
        let asked = from.get(&id).copied().unwrap_or(low);
        // Past the partition's real end (not the asked upper bound): the topic was made again.
        let start = if asked > watermark {
            reset.push(id);
            low
        } else {
            asked.max(low)
        };
        ends.insert(id, high);
        starts.insert(id, start);
        if start < high {
            assignment.add_partition_offset(topic, id, Offset::Offset(start))?;
        }
    }
    consumer.assign(&assignment)?;
    Ok(Opened {
        consumer,
        starts,
        ends,
        reset,
    })
}

/// A consumer that reads assigned partitions: never joins a group, never commits.
fn reader(settings: &KafkaSettings, gaps: Gaps) -> Result<BaseConsumer, KafkaError> {
    settings
        .client_config()
        // Required by librdkafka; never joined (partitions are assigned) nor committed to.
        .set("group.id", "wal-scan")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        // An offset retention removed while the scan runs: "earliest" goes on from the first
        // record left; "error" makes the poll fail.
        .set(
            "auto.offset.reset",
            match gaps {
                Gaps::Skip => "earliest",
                Gaps::Fail => "error",
            },
        )
        .create()
}

/// Runs a blocking broker call on the blocking pool.
async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, KafkaError> + Send + 'static,
) -> Result<T, KafkaError> {
    tokio::task::spawn_blocking(call)
        .await
        .map_err(|_| KafkaError::MessageConsumption(RDKafkaErrorCode::Fail))?
}
