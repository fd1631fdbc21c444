//! `walctl dlq` through the control plane's Operations service: list, show, redrive (started
//! there, followed from here), status and purge.

use std::time::{Duration, SystemTime};

use serde_json::json;
use tonic::transport::Channel;
use wal_proto::v1::operations_client::OperationsClient;
use wal_proto::v1::{
    GetRedriveRequest, ListDeadLettersRequest, PurgeDeadLettersRequest, Redrive,
    ShowDeadLetterRequest, StartRedriveRequest,
};

use super::filter::FilterArgs;
use super::print;
use super::redrive::RedriveArgs;
use crate::Failure;
use crate::namespace::refused;
use crate::operations::client;
use crate::output::{Format, print_json, progress, table, when};

/// How often a followed redrive is asked how far it is.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);
/// A running redrive silent this long may be dead (the control plane's own bound).
const STALE_AFTER: Duration = wal_control_plane::operations::redrives::STALE_AFTER;

pub async fn list(
    address: &str,
    namespace: &str,
    filter: &FilterArgs,
    limit: u32,
    format: Format,
) -> Result<(), Failure> {
    let filter = filter.filter(SystemTime::now())?;
    let listed = client(address)
        .await?
        .list_dead_letters(ListDeadLettersRequest {
            namespace: namespace.to_owned(),
            filter: Some(filter.to_proto()),
            limit,
        })
        .await
        .map_err(|status| refused(&status, &format!("listing the DLQs of '{namespace}'")))?
        .into_inner();
    print::list(&listed, format);
    Ok(())
}

pub async fn show(address: &str, namespace: &str, id: &str, format: Format) -> Result<(), Failure> {
    let shown = client(address)
        .await?
        .show_dead_letter(ShowDeadLetterRequest {
            namespace: namespace.to_owned(),
            id: id.to_owned(),
        })
        .await;
    let copies = match shown {
        Ok(shown) => shown.into_inner().copies,
        // Either the namespace or the entry is not there (exit 4); the message says which.
        Err(status) => {
            return Err(refused(
                &status,
                &format!("reading the DLQs of '{namespace}'"),
            ));
        }
    };
    print::show(&copies, format);
    Ok(())
}

pub async fn redrive(address: &str, args: RedriveArgs, format: Format) -> Result<(), Failure> {
    if args.checkpoint.is_some() {
        return Err(Failure::usage(
            "--checkpoint is for a redrive walctl runs itself (--direct); the control plane keeps its redrives' progress in its store",
        ));
    }
    let filter = args.filter.filter(SystemTime::now())?;
    let mut client = client(address).await?;
    let asked = format!("redriving the DLQs of '{}'", args.namespace);
    let started = client
        .start_redrive(StartRedriveRequest {
            namespace: args.namespace.clone(),
            filter: Some(filter.to_proto()),
            rate: args.rate,
            max_redrives: Some(args.max_redrives),
            dry_run: args.dry_run,
            // Only a time ago needs its words kept: other bounds resolve the same each run,
            // and the control plane names their progress by them, as for any client.
            filter_text: if args.filter.relative() {
                args.filter.typed()
            } else {
                String::new()
            },
            from_start: args.from_start,
            operator: std::env::var("USER").unwrap_or_else(|_| "walctl".to_owned()),
        })
        .await
        .map_err(|status| refused(&status, &asked))?
        .into_inner();
    if args.dry_run || args.detach {
        report(&started, format);
        return Ok(());
    }
    if format == Format::Table {
        eprintln!(
            "walctl: redrive {} started on the control plane; following it (Ctrl-C leaves it running: `walctl dlq status {}`)",
            started.id, args.namespace
        );
    }
    let last = follow(&mut client, &started, format).await?;
    report(&last, format);
    match last.state.as_str() {
        _ if last.id != started.id => Err(Failure::broker(format!(
            "redrive {} was taken over by another ({}) before it ended",
            started.id, last.id
        ))),
        "done" => Ok(()),
        "stopped" => Err(Failure::broker(
            "the redrive stopped before the end (its control plane shut down); its progress is kept: redrive again with the same filter to continue",
        )),
        _ => Err(Failure::broker(format!(
            "the redrive failed: {}",
            last.error
        ))),
    }
}

pub async fn status(address: &str, namespace: &str, format: Format) -> Result<(), Failure> {
    let current = client(address)
        .await?
        .get_redrive(GetRedriveRequest {
            namespace: namespace.to_owned(),
        })
        .await
        .map_err(|status| refused(&status, &format!("reading the redrive of '{namespace}'")))?
        .into_inner();
    report(&current, format);
    Ok(())
}

/// Asks how far the redrive (or replay) `started` is until it ends, with a progress bar.
pub(crate) async fn follow(
    client: &mut OperationsClient<Channel>,
    started: &Redrive,
    format: Format,
) -> Result<Redrive, Failure> {
    let bar = progress(
        format,
        if started.replay.is_some() {
            "{spinner} replaying [{bar:30}] {pos}/{len} read, {per_sec}"
        } else {
            "{spinner} redriving [{bar:30}] {pos}/{len} read, {per_sec}"
        },
    );
    // A control plane restarting (or another replica taking over) answers again within
    // seconds; one that stays silent for longer leaves the redrive to be taken over.
    let mut unanswered_since: Option<std::time::Instant> = None;
    let last = loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        let asked = client
            .get_redrive(GetRedriveRequest {
                namespace: started.namespace.clone(),
            })
            .await;
        let now = match asked {
            Ok(now) => now.into_inner(),
            Err(status) => {
                let since = *unanswered_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() < STALE_AFTER {
                    continue;
                }
                return Err(refused(&status, "following the redrive"));
            }
        };
        unanswered_since = None;
        bar.set_length(now.found.max(now.read));
        bar.set_position(now.read);
        if now.id != started.id || now.state != "running" {
            break now;
        }
        let silent = wal_queue::entry::now_micros().saturating_sub(now.updated_at_micros);
        if silent > i64::try_from(STALE_AFTER.as_micros()).unwrap_or(i64::MAX) {
            bar.finish_and_clear();
            report(&now, format);
            let (what, again) = if now.replay.is_some() {
                ("replay", "`walctl replay` with the same range")
            } else {
                ("redrive", "`walctl dlq redrive` with the same filter")
            };
            return Err(Failure::broker(format!(
                "{what} {} has not reported for {} s: the control plane running it may have died; {again} takes it over and continues",
                now.id,
                silent / 1_000_000
            )));
        }
    };
    bar.finish_and_clear();
    Ok(last)
}

/// A redrive (or replay) as the control plane reports it.
pub(crate) fn report(redrive: &Redrive, format: Format) {
    let (what, done, left_in) = match redrive.replay {
        Some(_) => ("replay", "replayed", "left out"),
        None => ("redrive", "redriven", "left in the DLQ"),
    };
    match format {
        Format::Json => {
            let mut out = json!({
                "namespace": redrive.namespace,
                "id": redrive.id,
                "state": redrive.state,
                "dry_run": redrive.state == "dry run",
                "started_by": redrive.started_by,
                "started_at": when(redrive.started_at_micros),
                "found": redrive.found,
                "read": redrive.read,
                "left": redrive.left,
                "error": redrive.error,
            });
            out[done] = json!(redrive.redriven);
            out[format!("{done}_before")] = json!(redrive.redriven_before);
            if let Some(range) = &redrive.replay {
                out["range"] = json!({
                    "from": when(range.from_micros),
                    "to": when(range.to_micros),
                    "excluded_ids": range.excluded,
                    "key": range.key,
                    "origin_region": range.origin_region,
                    "excluded_not_read": range.excluded_not_read,
                    "destination": range.destination,
                });
            }
            print_json(&out);
        }
        Format::Table => {
            let mut out = table(&["", "ENTRIES"]);
            out.add_row(vec!["read".to_owned(), redrive.read.to_string()]);
            out.add_row(vec![done.to_owned(), redrive.redriven.to_string()]);
            for (reason, count) in &redrive.left {
                let label = if reason.starts_with("would be") {
                    reason.clone()
                } else {
                    format!("{left_in}: {reason}")
                };
                out.add_row(vec![label, count.to_string()]);
            }
            println!("{out}");
            match redrive.state.as_str() {
                "dry run" => println!("dry run: nothing was {done}"),
                state => println!(
                    "{what} {} {state}, started by {} at {}{}",
                    redrive.id,
                    redrive.started_by,
                    when(redrive.started_at_micros),
                    if redrive.redriven_before > 0 {
                        format!(
                            "; {} {done} by earlier runs of the same request",
                            redrive.redriven_before
                        )
                    } else {
                        String::new()
                    }
                ),
            }
            if let Some(range) = redrive
                .replay
                .as_ref()
                .filter(|r| !r.destination.is_empty())
            {
                println!("to destination {} alone", range.destination);
            }
            if let Some(range) = redrive
                .replay
                .as_ref()
                .filter(|r| !r.excluded_not_read.is_empty())
            {
                println!(
                    "excluded ids it never read (a typo, or an entry outside the range): {}",
                    range.excluded_not_read.join(", ")
                );
            }
            if !redrive.error.is_empty() {
                println!("why it failed: {}", redrive.error);
            }
        }
    }
}

/// A purge: without `expect` a dry run, which prints the command that removes what it counted
/// (its --until fixed to now when none was given, so "everything" means what is there now).
pub async fn purge(
    address: &str,
    namespace: &str,
    filter: &FilterArgs,
    expect: Option<u64>,
    format: Format,
) -> Result<(), Failure> {
    let now = humantime::format_rfc3339_micros(SystemTime::now()).to_string();
    let flags = filter.until_if_none(now);
    let resolved = flags.filter(SystemTime::now())?;
    let dry_run = expect.is_none();
    let purged = client(address)
        .await?
        .purge_dead_letters(PurgeDeadLettersRequest {
            namespace: namespace.to_owned(),
            filter: Some(resolved.to_proto()),
            dry_run,
            expect,
            operator: std::env::var("USER").unwrap_or_else(|_| "walctl".to_owned()),
        })
        .await
        .map_err(|status| refused(&status, &format!("purging the DLQs of '{namespace}'")))?
        .into_inner();
    // The bounds as they resolved, not as typed: "--since 2h" would mean another window when
    // the command runs.
    let command = format!(
        "walctl dlq purge {namespace}{} --expect {}",
        resolved_flags(&resolved),
        purged.purged
    );
    match format {
        Format::Json => print_json(&json!({
            "namespace": namespace,
            "dry_run": dry_run,
            "purged": purged.purged,
            "by_dlq": purged.by_dlq,
            "command": if dry_run { Some(command) } else { None },
        })),
        Format::Table if dry_run => {
            println!(
                "dry run: {} dead letters would be purged; nothing was removed. To remove exactly those:",
                purged.purged
            );
            println!("  {command}");
        }
        Format::Table => println!("purged {} dead letters", purged.purged),
    }
    Ok(())
}

/// A filter's flags with its bounds as absolute times (RFC 3339, to the microsecond).
fn resolved_flags(filter: &wal_control_plane::operations::dlq::Filter) -> String {
    use wal_control_plane::operations::dlq::Class;
    let at = |micros: i64| {
        let at = std::time::UNIX_EPOCH + Duration::from_micros(u64::try_from(micros).unwrap_or(0));
        humantime::format_rfc3339_micros(at).to_string()
    };
    let mut flags = String::new();
    if let Some(since) = filter.since_micros {
        flags.push_str(&format!(" --since {}", at(since)));
    }
    if let Some(until) = filter.until_micros {
        flags.push_str(&format!(" --until {}", at(until)));
    }
    match filter.class {
        Some(Class::Retryable) => flags.push_str(" --class retryable"),
        Some(Class::Permanent) => flags.push_str(" --class permanent"),
        None => {}
    }
    flags
}
