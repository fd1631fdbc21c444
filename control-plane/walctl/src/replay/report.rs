//! What a replay says at its end: entries read, applied, left out and why, failures; a dry run's
//! sample.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

use super::Replay;
use super::lanes::Outcome;
use super::select::Selection;
use crate::output::{Format, print_json, table, when};

/// Entries a dry run shows.
pub(super) const SAMPLE: usize = 5;

/// What a run did, beyond the lanes' outcome.
#[derive(Debug, Default)]
pub(super) struct Report {
    pub(super) read: u64,
    pub(super) would_apply: u64,
    pub(super) sample: Vec<serde_json::Value>,
}

pub(super) fn sample(entry: &wal_queue::entry::Entry) -> serde_json::Value {
    let payload = match &entry.body {
        Some(wal_queue::entry::Body::Payload(bytes)) => {
            String::from_utf8_lossy(&bytes[..bytes.len().min(120)]).into_owned()
        }
        Some(wal_queue::entry::Body::ClaimCheck(check)) => {
            format!("claim check in {}", check.table)
        }
        Some(wal_queue::entry::Body::Transaction(marker)) => format!(
            "transaction {} of {} items",
            marker.transaction_id, marker.item_count
        ),
        None => String::new(),
    };
    json!({
        "id": entry.id,
        "key": entry.key,
        "written_at": when(entry.original_write_time_micros),
        "payload": payload,
    })
}

pub(super) fn print(
    replay: &Replay,
    selection: &Selection,
    report: &Report,
    outcome: Option<&Outcome>,
    took: Duration,
    format: Format,
) {
    let left: BTreeMap<&str, u64> = selection
        .left
        .iter()
        .map(|(left, count)| (left.label(), *count))
        .collect();
    let unseen = selection.excluded_unseen();
    match format {
        Format::Json => print_json(&json!({
            "namespace": replay.namespace,
            "dry_run": replay.dry_run,
            "from": when(selection.from_micros),
            "to": when(selection.to_micros),
            "read": report.read,
            "would_apply": report.would_apply,
            "sample": report.sample,
            "applied": outcome.map_or(0, |o| o.applied),
            "keys": outcome.map_or(0, |o| o.keys.len()),
            "left": left,
            "excluded_not_found": unseen,
            "failed": outcome.map(|o| &o.failed),
            "failed_ids": outcome.map(|o| &o.failed_ids),
            "seconds": took.as_secs_f64(),
        })),
        Format::Table => print_table(replay, selection, report, outcome, took, &left),
    }
}

/// The replay's counts as a table, then its range, sample, left-out and failed ids.
fn print_table(
    replay: &Replay,
    selection: &Selection,
    report: &Report,
    outcome: Option<&Outcome>,
    took: Duration,
    left: &BTreeMap<&str, u64>,
) {
    let unseen = selection.excluded_unseen();
    let mut out = table(&["", "ENTRIES"]);
    out.add_row(vec!["read".to_owned(), report.read.to_string()]);
    if replay.dry_run {
        out.add_row(vec![
            "would be applied".to_owned(),
            report.would_apply.to_string(),
        ]);
    }
    if let Some(outcome) = outcome {
        out.add_row(vec!["applied".to_owned(), outcome.applied.to_string()]);
        out.add_row(vec![
            "keys applied".to_owned(),
            outcome.keys.len().to_string(),
        ]);
        for (reason, count) in &outcome.failed {
            out.add_row(vec![format!("failed: {reason}"), count.to_string()]);
        }
    }
    for (label, count) in left {
        out.add_row(vec![format!("left out: {label}"), count.to_string()]);
    }
    println!("{out}");
    println!(
        "range {} to {}, {:.1} s",
        when(selection.from_micros),
        when(selection.to_micros),
        took.as_secs_f64()
    );
    for entry in &report.sample {
        println!("would apply: {entry}");
    }
    if !unseen.is_empty() {
        println!("excluded ids not found in the range: {unseen:?}");
    }
    if let Some(outcome) = outcome
        && !outcome.failed_ids.is_empty()
    {
        println!(
            "failed ids (first {}): {:?}",
            outcome.failed_ids.len(),
            outcome.failed_ids
        );
    }
    if replay.dry_run {
        println!("dry run: nothing was applied");
    }
}
