//! Consumer-group lag: how far the group's committed offsets trail the partitions' ends.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};

use super::KafkaSettings;
use super::context::OutageContext;
use crate::Position;

/// How long each broker call of a lag reading may take.
const LAG_TIMEOUT: Duration = Duration::from_secs(5);

/// The group's lag on the partitions of `topic` assigned to this consumer: each partition's high
/// watermark minus the group's committed offset there (its low watermark when nothing is
/// committed yet). Blocks on the broker.
pub(super) fn group_lag<C: ConsumerContext>(
    consumer: &StreamConsumer<C>,
    topic: &str,
) -> Result<u64, KafkaError> {
    let assignment = consumer.assignment()?;
    lag_of(consumer, topic, assignment)
}

/// The namespace consumer group's lag on every partition of `topic`, read without joining the
/// group (an offset fetch only, so running consumers are not disturbed). Blocks on the broker.
pub(super) fn unfinished(settings: &KafkaSettings, topic: &str) -> Result<u64, KafkaError> {
    let group = format!("{}{topic}", settings.group_prefix);
    let (consumer, partitions) = group_view(settings, &group, topic)?;
    if partitions.count() == 0 {
        return Ok(0);
    }
    lag_of(&consumer, topic, partitions)
}

/// A client that reads `group`'s offsets without joining it, and every partition of `topic`.
fn group_view(
    settings: &KafkaSettings,
    group: &str,
    topic: &str,
) -> Result<(BaseConsumer<OutageContext>, TopicPartitionList), KafkaError> {
    // Its connection failures are folded into an outage, as every client's.
    let consumer = settings
        .client_config()
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create_with_context(OutageContext::new("lag"))?;
    let mut partitions = TopicPartitionList::new();
    for id in partition_ids(&consumer, topic)? {
        partitions.add_partition(topic, id);
    }
    Ok((consumer, partitions))
}

fn lag_of<C: Consumer<X>, X: ConsumerContext>(
    consumer: &C,
    topic: &str,
    partitions: TopicPartitionList,
) -> Result<u64, KafkaError> {
    let committed = consumer.committed_offsets(partitions, LAG_TIMEOUT)?;
    let mut lag = 0u64;
    for partition in committed.elements_for_topic(topic) {
        let (low, high) = consumer.fetch_watermarks(topic, partition.partition(), LAG_TIMEOUT)?;
        let from = match partition.offset() {
            Offset::Offset(offset) => offset.max(low),
            _ => low,
        };
        lag += u64::try_from(high - from).unwrap_or(0);
    }
    Ok(lag)
}

/// The partitions of `topic`; none when the topic does not exist (it holds nothing). Blocks on
/// the broker.
pub(super) fn partition_ids<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
) -> Result<Vec<i32>, KafkaError> {
    let metadata = consumer.fetch_metadata(Some(topic), LAG_TIMEOUT)?;
    let mut ids = Vec::new();
    for described in metadata.topics() {
        match described.error() {
            None => {}
            Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) => continue,
            Some(error) => return Err(KafkaError::MetadataFetch(error.into())),
        }
        ids.extend(described.partitions().iter().map(|p| p.id()));
    }
    Ok(ids)
}

/// Where `group` stands on each partition of `topic`, read without joining the group (an offset
/// fetch only). Blocks on the broker.
pub(super) fn positions(
    settings: &KafkaSettings,
    group: &str,
    topic: &str,
) -> Result<Vec<Position>, KafkaError> {
    let (consumer, partitions) = group_view(settings, group, topic)?;
    if partitions.count() == 0 {
        return Ok(Vec::new());
    }
    let committed = consumer.committed_offsets(partitions, LAG_TIMEOUT)?;
    let mut positions = Vec::new();
    for partition in committed.elements_for_topic(topic) {
        let (low, high) = consumer.fetch_watermarks(topic, partition.partition(), LAG_TIMEOUT)?;
        positions.push(Position {
            partition: partition.partition(),
            committed: match partition.offset() {
                Offset::Offset(offset) => Some(offset),
                _ => None,
            },
            low,
            high,
        });
    }
    positions.sort_by_key(|p| p.partition);
    Ok(positions)
}

/// The entry at `offset` of `partition` of `topic`, read without a consumer group; `None` when
/// the partition no longer (or does not yet) hold it. Blocks on the broker.
pub(super) fn entry_at(
    settings: &KafkaSettings,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Option<Result<crate::entry::Entry, crate::entry::CodecError>>, KafkaError> {
    use rdkafka::message::Message as _;
    let consumer: BaseConsumer<OutageContext> = settings
        .client_config()
        .set("enable.auto.commit", "false")
        .set("group.id", "wal-peek")
        .create_with_context(OutageContext::new("peek"))?;
    let (low, high) = consumer.fetch_watermarks(topic, partition, LAG_TIMEOUT)?;
    if offset < low || offset >= high {
        return Ok(None);
    }
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, partition, Offset::Offset(offset))?;
    consumer.assign(&assignment)?;
    let deadline = std::time::Instant::now() + LAG_TIMEOUT;
    while std::time::Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) if message.offset() == offset => {
                return Ok(Some(crate::entry::decode(
                    message.payload().unwrap_or_default(),
                )));
            }
            Some(Ok(_)) | None => {}
            Some(Err(error)) => return Err(error),
        }
    }
    Ok(None)
}
