//! Writing one record: the idempotent producer's send, and the resend of a record librdkafka
//! reported delivered without an offset.

use rdkafka::producer::FutureRecord;

use super::{Backend, Durability, EnqueueError};
use super::{KEY_LIMIT_BYTES, KafkaQueue, classify};
use crate::EnqueueTo;
use crate::entry::{self, Entry};

/// How often `produce` sends a record again after librdkafka reported it delivered without an
/// offset, before answering that it may not be stored.
const UNCONFIRMED_RESENDS: u32 = 2;

impl KafkaQueue {
    pub(super) async fn produce(
        &self,
        topic: &str,
        entry: &Entry,
        limit: usize,
    ) -> Result<(), EnqueueError> {
        let value = entry::encode(entry);
        let key = if entry.key.is_empty() {
            &entry.id
        } else {
            &entry.key
        };
        let size = value.len();
        let to = EnqueueTo {
            backend: Backend::Kafka,
            queue: topic,
        };
        refuse_oversized(to, size, limit, key)?;
        let (not_stored, unknown) = (|r| to.not_stored(r), |r| to.unknown(r));
        for attempt in 0..=UNCONFIRMED_RESENDS {
            // Once a send was reported delivered without an offset, the record may be stored,
            // so no later failure can be answered as "not stored".
            let refused = |reason: String| match attempt {
                0 => not_stored(reason),
                _ => unknown(reason),
            };
            let record = FutureRecord::to(topic).key(key).payload(&value);
            // send_result fails only when librdkafka refuses the record outright (its queue is
            // full, for example): then this send did not leave the process.
            let producer = self.backend.producer();
            let delivery = producer.send_result(record).map_err(|(error, _)| {
                self.backend.replace_if_fatal(&producer);
                refused(error.to_string()).caused_by(error)
            })?;
            match delivery.await {
                Ok(Ok(delivered)) if delivered.offset >= 0 => {
                    self.backend.producer_outage.answered();
                    return Ok(());
                }
                // No offset: librdkafka acknowledged the record implicitly, because a later
                // batch of its partition succeeded. That later batch proves nothing when it was
                // the producer's first on the partition to reach the broker, which then accepts
                // any sequence number: after a "not leader" error on a new topic the earlier
                // batch was never written (confluentinc/confluent-kafka-go#921, seen here as
                // TRUE answers for entries missing from the topic). Sending again costs a
                // duplicate at worst, which targets absorb: they apply idempotently by the
                // entry's id (DESIGN §4.2). The copy may land after a later entry of its key.
                Ok(Ok(_)) => {
                    tracing::warn!(
                        topic,
                        entry_id = %entry.id,
                        attempt,
                        "the broker's acknowledgement carried no offset; sending the entry again"
                    );
                }
                Ok(Err((error, _))) => {
                    self.backend.replace_if_fatal(&producer);
                    let failure = match classify::durability_of(&error) {
                        Durability::NotStored => refused(error.to_string()),
                        Durability::Unknown => unknown(error.to_string()),
                    };
                    return Err(failure.caused_by(error));
                }
                Err(_canceled) => {
                    return Err(unknown(
                        "the producer shut down before the broker answered".to_owned(),
                    ));
                }
            }
        }
        Err(unknown(format!(
            "the broker acknowledged the entry {} times without an offset, so it may not be stored",
            UNCONFIRMED_RESENDS + 1
        )))
    }
}

/// Refuses, before anything is sent, a record or a partition key larger than the topic takes:
/// certainly not stored.
fn refuse_oversized(
    to: EnqueueTo<'_>,
    size: usize,
    limit: usize,
    key: &str,
) -> Result<(), EnqueueError> {
    if size > limit {
        return Err(to.too_large(size, limit));
    }
    if key.len() > KEY_LIMIT_BYTES {
        return Err(to.not_stored(format!(
            "partition key of {} bytes is longer than {KEY_LIMIT_BYTES} bytes",
            key.len()
        )));
    }
    Ok(())
}
