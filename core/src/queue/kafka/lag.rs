//! Consumer-group lag: how far the group's committed offsets trail the partitions' ends.

use std::time::Duration;

use rdkafka::Offset;
use rdkafka::consumer::{Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::KafkaError;

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
    let committed = consumer.committed_offsets(assignment, LAG_TIMEOUT)?;
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
