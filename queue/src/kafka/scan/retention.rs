//! What time and retention say about a topic: where a time falls in each partition, and which
//! partitions lost their first records.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};

use super::super::KafkaSettings;
use super::super::lag::partition_ids;
use super::{CALL_TIMEOUT, Gaps, blocking, reader};

/// Each partition's first offset whose record was appended at or after `micros` (the broker's
/// offsets-for-times); a partition with none gets its end.
pub async fn offsets_at(
    settings: &KafkaSettings,
    topic: &str,
    micros: i64,
) -> Result<BTreeMap<i32, i64>, KafkaError> {
    let settings = settings.clone();
    let topic = topic.to_owned();
    blocking(move || {
        let consumer = reader(&settings, Gaps::Fail)?;
        let mut asked = TopicPartitionList::new();
        let ids = partition_ids(&consumer, &topic)?;
        for id in &ids {
            asked.add_partition_offset(&topic, *id, Offset::Offset(micros.div_euclid(1000)))?;
        }
        let found = consumer.offsets_for_times(asked, CALL_TIMEOUT)?;
        let mut offsets = BTreeMap::new();
        for id in ids {
            let Some(partition) = found.find_partition(&topic, id) else {
                return Err(KafkaError::OffsetFetch(RDKafkaErrorCode::UnknownPartition));
            };
            // An error on one partition comes back inside an answer that succeeded overall.
            partition.error()?;
            let offset = match partition.offset() {
                Offset::Offset(offset) => offset,
                // No record at or after the time: the partition's end.
                _ => consumer.fetch_watermarks(&topic, id, CALL_TIMEOUT)?.1,
            };
            offsets.insert(id, offset);
        }
        Ok(offsets)
    })
    .await
}

/// What retention left of a partition that lost records: its first offset, and when its first
/// remaining record was appended (microseconds since the Unix epoch); `None` when none is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trimmed {
    pub partition: i32,
    pub first_offset: i64,
    pub first_micros: Option<i64>,
}

/// The partitions of `topic` whose first records were removed (by retention or a deletion),
/// with the time of the first record left: nothing older can be read from the topic.
pub async fn trimmed(settings: &KafkaSettings, topic: &str) -> Result<Vec<Trimmed>, KafkaError> {
    let settings = settings.clone();
    let topic = topic.to_owned();
    blocking(move || {
        let consumer = reader(&settings, Gaps::Fail)?;
        let mut trimmed = Vec::new();
        for id in partition_ids(&consumer, &topic)? {
            let (low, high) = consumer.fetch_watermarks(&topic, id, CALL_TIMEOUT)?;
            if low == 0 {
                continue;
            }
            if low >= high {
                trimmed.push(Trimmed {
                    partition: id,
                    first_offset: low,
                    first_micros: None,
                });
                continue;
            }
            let mut one = TopicPartitionList::new();
            one.add_partition_offset(&topic, id, Offset::Offset(low))?;
            consumer.assign(&one)?;
            let deadline = Instant::now() + CALL_TIMEOUT;
            let first_micros = loop {
                match consumer.poll(Duration::from_millis(500)) {
                    // A record without a time cannot be dated: taken as newer than any range.
                    Some(Ok(message)) => {
                        break message
                            .timestamp()
                            .to_millis()
                            .map_or(i64::MAX, |millis| millis.saturating_mul(1000));
                    }
                    Some(Err(error)) => return Err(error),
                    None if Instant::now() > deadline => {
                        return Err(KafkaError::MessageConsumption(
                            RDKafkaErrorCode::OperationTimedOut,
                        ));
                    }
                    None => {}
                }
            };
            trimmed.push(Trimmed {
                partition: id,
                first_offset: low,
                first_micros: Some(first_micros),
            });
        }
        Ok(trimmed)
    })
    .await
}
