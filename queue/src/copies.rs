//! The copies a consumer or an operator puts on a queue in an entry's place: the retry copy,
//! the DLQ copy (an undecodable message kept as an entry holding its bytes) and the redrive copy.

use crate::entry::{self, Entry};
use crate::{Delivery, Failure, MAX_ERROR_BYTES, MAX_UNDECODABLE_BYTES, QueueSpec};

/// The retry copy a consumer puts back ([`crate::Consume::requeue`]): attempt + 1, the new
/// deliver-at, the failure recorded.
/// Public so a caller can write the copy and acknowledge the original as separate steps, each
/// retried on its own.
pub fn retry_copy(original: &Entry, deliver_at_micros: i64, failure: &Failure) -> Entry {
    let mut retry = original.clone();
    retry.attempt = original.attempt.saturating_add(1);
    retry.deliver_at_micros = deliver_at_micros;
    retry.enqueued_at_micros = entry::now_micros();
    record_failure(&mut retry, failure);
    retry
}

/// The copy a redrive puts back on the entry's queue from its DLQ: due now, with a fresh attempt
/// count (the namespace's retry policy applies again in full) and its redrive count + 1. The id,
/// key and payload stay, so an idempotent target applies a repeated redrive once; the last error
/// stays too, for whoever reads the entry later.
pub fn redrive_copy(dead: &Entry) -> Entry {
    let mut copy = replay_copy(dead);
    copy.redrives = dead.redrives.saturating_add(1);
    copy
}

/// The copy a replay puts back on the entry's queue from the queue's history: the write again,
/// due now, no attempt used, with its id and write time (so an idempotent target applies it
/// once, and CQL by its write time) and its redrive count (a replay is no redrive).
pub fn replay_copy(entry: &Entry) -> Entry {
    let now = entry::now_micros();
    let mut copy = entry.clone();
    copy.attempt = 0;
    copy.deliver_at_micros = now;
    copy.enqueued_at_micros = now;
    copy.dead_lettered_at_micros = 0;
    copy
}

/// The copy a consumer puts on the DLQ ([`crate::Consume::enqueue_dead_letter`]): the entry (or, for an undecodable message,
/// an entry holding its first bytes) with the reason, class and time recorded.
pub fn dead_letter_copy(spec: &QueueSpec, delivery: &Delivery, failure: &Failure) -> Entry {
    let mut dead = match &delivery.entry {
        Ok(entry) => entry.clone(),
        Err(_) => undecodable_entry(spec, delivery),
    };
    let reason = match &delivery.entry {
        Ok(_) => failure.reason.clone(),
        Err(codec) if delivery.raw.len() > MAX_UNDECODABLE_BYTES => format!(
            "{} (undecodable: {codec}; the payload holds the first {MAX_UNDECODABLE_BYTES} of {} bytes)",
            failure.reason,
            delivery.raw.len()
        ),
        Err(codec) => format!("{} (undecodable: {codec})", failure.reason),
    };
    record_failure(
        &mut dead,
        &Failure {
            class: failure.class,
            reason,
        },
    );
    dead.dead_lettered_at_micros = entry::now_micros();
    dead
}

fn record_failure(entry: &mut Entry, failure: &Failure) {
    entry.last_error = truncate(&failure.reason, MAX_ERROR_BYTES);
    entry.last_error_class = failure.class as i32;
}

fn undecodable_entry(spec: &QueueSpec, delivery: &Delivery) -> Entry {
    let now = entry::now_micros();
    Entry {
        version: entry::ENTRY_VERSION,
        id: format!("undecodable:{}:{}", spec.name, delivery.receipt),
        namespace: spec.namespace.clone(),
        // Only the first bytes of a huge message, so it always fits the DLQ; the reason says so.
        body: Some(entry::Body::Payload(
            delivery.raw[..delivery.raw.len().min(MAX_UNDECODABLE_BYTES)].to_vec(),
        )),
        enqueued_at_micros: now,
        ..Entry::default()
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}…", prefix(text, max))
}

/// The longest start of `text` of at most `max` bytes that ends on a character boundary.
pub fn prefix(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_copy_is_due_now_with_its_id_write_time_and_redrives_kept() {
        let entry = Entry {
            id: "e-1".into(),
            attempt: 4,
            redrives: 1,
            original_write_time_micros: 1_000,
            deliver_at_micros: 2_000,
            dead_lettered_at_micros: 3_000,
            ..Entry::default()
        };
        let copy = replay_copy(&entry);
        assert_eq!(
            (copy.id.as_str(), copy.attempt, copy.redrives),
            ("e-1", 0, 1)
        );
        assert_eq!(copy.original_write_time_micros, 1_000);
        assert_eq!(copy.dead_lettered_at_micros, 0);
        assert!(
            copy.deliver_at_micros > 2_000 && copy.deliver_at_micros == copy.enqueued_at_micros
        );
    }

    #[test]
    fn a_redrive_copy_is_due_now_with_fresh_attempts_and_one_more_redrive() {
        let dead = Entry {
            id: "e-1".into(),
            key: "k".into(),
            attempt: 7,
            redrives: 1,
            last_error: "HTTP 400".into(),
            deliver_at_micros: 1,
            dead_lettered_at_micros: 2,
            ..Entry::default()
        };
        let before = entry::now_micros();
        let copy = redrive_copy(&dead);
        assert_eq!((copy.id.as_str(), copy.key.as_str()), ("e-1", "k"));
        assert_eq!((copy.attempt, copy.redrives), (0, 2));
        assert_eq!(copy.dead_lettered_at_micros, 0);
        assert!(copy.deliver_at_micros >= before && copy.enqueued_at_micros >= before);
        assert_eq!(copy.last_error, "HTTP 400");
    }
}
