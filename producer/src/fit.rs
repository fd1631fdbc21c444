//! A write made to fit its queue: as it is, or with its payload moved to the namespace's durable
//! storage and a claim check in its place.

use std::time::Duration;

use tonic::Status;
use wal_durable::CLAIM_CHECK_MARGIN;
use wal_queue::Produce;
use wal_queue::entry::{Body, Entry, now_micros};

use crate::registry::NamespaceRuntime;
use crate::{request, status};

pub(crate) enum Fitted {
    Entry(Box<Entry>),
    /// The claim check could not be written, so nothing went on the queue.
    NotStored(String),
}

/// Makes the entry fit its queue: as it is, or with its payload moved to durable storage and a
/// claim check in its place.
pub(crate) async fn fit(
    runtime: &NamespaceRuntime,
    queue: &dyn Produce,
    write: request::Write,
) -> Result<Fitted, Status> {
    let mut entry = write.entry;
    let size = prost::Message::encoded_len(&entry);
    let limit = queue.max_entry_bytes();
    if size <= limit {
        return Ok(Fitted::Entry(Box::new(entry)));
    }
    let Some(durable) = &runtime.durable else {
        let envelope = size - write.payload_len;
        return Err(status::too_large_for_queue(
            &runtime.config.name,
            &queue.spec().name,
            write.payload_len,
            limit.saturating_sub(envelope),
        ));
    };
    let Some(Body::Payload(payload)) = entry.body.take() else {
        return Ok(Fitted::Entry(Box::new(entry)));
    };
    // The body must outlive the entry: its delay, every retry, then time to inspect the DLQ.
    let until_due = entry.deliver_at_micros.saturating_sub(now_micros()).max(0);
    let keep = Duration::from_micros(until_due.unsigned_abs())
        + runtime.config.retry.horizon()
        + CLAIM_CHECK_MARGIN;
    // Boxed: the driver's request future is kilobytes, and inline it would be carried and copied
    // with every write's future, though few writes need a claim check.
    match Box::pin(durable.put_claim_check(&entry.namespace, &entry.id, &payload, keep)).await {
        Ok(check) => {
            runtime.metrics.claim_check();
            entry.body = Some(Body::ClaimCheck(check));
            Ok(Fitted::Entry(Box::new(entry)))
        }
        Err(error) => Ok(Fitted::NotStored(format!(
            "storing the payload in durable storage failed: {error}"
        ))),
    }
}
