//! `walctl replay` through the control plane: StartReplay puts the range back on the
//! namespace's queues for its consumers to apply; walctl follows it as it follows a redrive.

use std::time::SystemTime;

use wal_proto::v1::StartReplayRequest;

use super::args::Replay;
use super::select::excluded_ids;
use super::source::Wanted;
use crate::Failure;
use crate::dlq::api::{follow, report};
use crate::namespace::refused;
use crate::operations::client;
use crate::output::{Format, when};
use crate::time::instant;

pub async fn run(replay: &Replay, address: &str, format: Format) -> Result<(), Failure> {
    direct_only(replay)?;
    let now = SystemTime::now();
    let from_micros = instant("--from", &replay.from, now)?;
    let to_micros = match &replay.to {
        Some(to) => instant("--to", to, now)?,
        None => 0,
    };
    let mut exclude_ids: Vec<String> = excluded_ids(&replay.exclude_ids, &replay.exclude_files)?
        .into_iter()
        .collect();
    exclude_ids.sort();
    // A time ago names another range each run: to continue, the times it meant.
    let mut again = String::new();
    if humantime::parse_duration(&replay.from).is_ok() {
        again.push_str(&format!(" with --from {}", when(from_micros)));
    }
    let to_ago = replay.to.as_deref().map(humantime::parse_duration);
    if to_ago.is_some_and(|ago| ago.is_ok()) {
        again.push_str(&format!(" --to {}", when(to_micros)));
    }
    let request = StartReplayRequest {
        namespace: replay.namespace.clone(),
        from_micros,
        to_micros,
        exclude_ids,
        key: replay.key.clone().unwrap_or_default(),
        origin_region: replay.origin_region.clone().unwrap_or_default(),
        rate: replay.rate.unwrap_or(0),
        dry_run: replay.dry_run,
        from_start: replay.from_start,
        operator: std::env::var("USER").unwrap_or_else(|_| "walctl".to_owned()),
        destination: replay.destination.clone().unwrap_or_default(),
    };
    start_and_follow(address, request, &again, format).await
}

/// Starts the replay `request` on the control plane and follows it to its end (a dry run:
/// reports it at once). `again`: what to add to "run the same replay again" to continue it.
pub(crate) async fn start_and_follow(
    address: &str,
    request: StartReplayRequest,
    again: &str,
    format: Format,
) -> Result<(), Failure> {
    let mut client = client(address).await?;
    let asked = format!("replaying namespace '{}'", request.namespace);
    let (namespace, dry_run) = (request.namespace.clone(), request.dry_run);
    let started = client
        .start_replay(request)
        .await
        .map_err(|status| refused(&status, &asked))?
        .into_inner();
    if dry_run {
        report(&started, format);
        return Ok(());
    }
    if format == Format::Table {
        eprintln!(
            "walctl: replay {} started on the control plane; its consumers apply what it puts back. Following it (Ctrl-C leaves it running: `walctl dlq status {namespace}`)",
            started.id
        );
    }
    let last = follow(&mut client, &started, format).await?;
    report(&last, format);
    match last.state.as_str() {
        _ if last.id != started.id => Err(Failure::broker(format!(
            "replay {} was taken over by another ({}) before it ended",
            started.id, last.id
        ))),
        "done" => Ok(()),
        "stopped" => Err(Failure::broker(format!(
            "the replay stopped before the end (its control plane shut down); its progress is kept: run the same replay again{again} to continue"
        ))),
        _ => Err(Failure::broker(format!(
            "the replay failed: {}; fix the cause and run the same replay again{again} to continue",
            last.error
        ))),
    }
}

/// The flags only walctl's own replay has, refused through the control plane, saying why.
fn direct_only(replay: &Replay) -> Result<(), Failure> {
    let refusal = if replay.target_kind.is_some() {
        Some(
            "--target-kind: the control plane puts entries back on the namespace's queues, and its consumers apply them to the entries' own targets",
        )
    } else if replay.source != Wanted::Auto {
        Some("--source: the control plane replays from the namespace's Kafka queues")
    } else if replay.checkpoint.is_some() {
        Some("--checkpoint: the control plane keeps a replay's progress in its store")
    } else if replay.concurrency.is_some() || replay.apply_timeout.is_some() {
        Some(
            "--concurrency and --apply-timeout: the namespace's consumers apply what the control plane puts back, with their own settings",
        )
    } else {
        None
    };
    match refusal {
        Some(why) => Err(Failure::usage(format!(
            "{why}; pass --direct for walctl to replay itself"
        ))),
        None => Ok(()),
    }
}
