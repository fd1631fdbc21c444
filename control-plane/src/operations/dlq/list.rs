//! What is in a namespace's DLQs: a count per failure class and reason, the oldest entries
//! (without their payload), and every copy of one entry in full. In the proto's messages, which
//! the Operations service answers with and `walctl dlq --direct` prints.

use std::collections::{BTreeMap, BinaryHeap};

use wal_proto::v1::{DeadLetter, DeadLetterReason, ListDeadLettersResponse};

use super::source::{DeadLetters, Found};
use super::{DlqError, Filter, Verdict};

/// The dead letters `filter` takes: all counted, the `limit` oldest listed, oldest first, each
/// without its payload (a long list would not fit one message, and ShowDeadLetter has it).
pub async fn list(
    dead: &DeadLetters,
    filter: &Filter,
    limit: usize,
) -> Result<ListDeadLettersResponse, DlqError> {
    let mut reasons: BTreeMap<(i32, String), DeadLetterReason> = BTreeMap::new();
    // The `limit` oldest, kept as they are found: a DLQ may hold millions.
    let mut oldest: BinaryHeap<Oldest> = BinaryHeap::new();
    let mut total = 0;
    dead.read_all(|mut found| {
        if filter.judge(&found.entry) != Verdict::Take {
            return;
        }
        total += 1;
        let entry = &found.entry;
        let at = entry.dead_lettered_at_micros;
        let reason = reasons
            .entry((entry.last_error_class, entry.last_error.clone()))
            .or_insert_with(|| DeadLetterReason {
                class: entry.last_error_class,
                reason: entry.last_error.clone(),
                first_micros: at,
                last_micros: at,
                ..DeadLetterReason::default()
            });
        reason.entries += 1;
        reason.first_micros = reason.first_micros.min(at);
        reason.last_micros = reason.last_micros.max(at);
        found.entry.body = None;
        oldest.push(Oldest(found));
        if oldest.len() > limit {
            oldest.pop();
        }
    })
    .await?;
    let entries = oldest.into_sorted_vec().into_iter();
    Ok(ListDeadLettersResponse {
        total,
        reasons: reasons.into_values().collect(),
        entries: entries.map(|o| dead_letter(dead, o.0)).collect(),
    })
}

/// Every copy of the dead letter `id`, in full (none: it is not there).
pub async fn show(dead: &DeadLetters, id: &str) -> Result<Vec<DeadLetter>, DlqError> {
    let mut copies = Vec::new();
    dead.read_all(|found| {
        if found.entry.id == id {
            copies.push(found);
        }
    })
    .await?;
    Ok(copies.into_iter().map(|f| dead_letter(dead, f)).collect())
}

fn dead_letter(dead: &DeadLetters, found: Found) -> DeadLetter {
    DeadLetter {
        dlq: dead.dlqs[found.dlq].name.clone(),
        position: found.locator,
        entry: Some(found.entry),
    }
}

/// A dead letter ordered by when it was dead-lettered, for keeping the oldest.
struct Oldest(Found);

impl Oldest {
    fn key(&self) -> (i64, &str, &str) {
        let entry = &self.0.entry;
        (entry.dead_lettered_at_micros, &entry.id, &self.0.locator)
    }
}

impl PartialEq for Oldest {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Oldest {}

impl PartialOrd for Oldest {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Oldest {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}
