//! Removing a topic's oldest records (Kafka's DeleteRecords): a DLQ purge. Kafka keeps a log,
//! so only a prefix of each partition can go: the records before an offset.

use std::collections::BTreeMap;

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};

use super::{CALL_TIMEOUT, KafkaSettings};

/// Deletes the records of `topic` before each partition's offset in `before` (exclusive).
/// Returns each partition's first offset after the deletion.
pub async fn delete_before(
    settings: &KafkaSettings,
    topic: &str,
    before: &BTreeMap<i32, i64>,
) -> Result<BTreeMap<i32, i64>, KafkaError> {
    let admin: AdminClient<DefaultClientContext> = settings.client_config().create()?;
    let mut offsets = TopicPartitionList::new();
    for (partition, offset) in before {
        offsets.add_partition_offset(topic, *partition, Offset::Offset(*offset))?;
    }
    let options = AdminOptions::new().operation_timeout(Some(CALL_TIMEOUT));
    let deleted = admin.delete_records(&offsets, &options).await?;
    let mut firsts = BTreeMap::new();
    for element in deleted.elements() {
        element.error()?;
        if let Offset::Offset(first) = element.offset() {
            firsts.insert(element.partition(), first);
        }
    }
    Ok(firsts)
}
