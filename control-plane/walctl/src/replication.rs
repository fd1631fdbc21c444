//! `walctl replication status NAMESPACE`: a row per destination region of a replicated
//! namespace: how far its reader trails (entries and seconds), the newest entry it applied, its
//! dead letters, and any gap (entries the topic dropped before the reader read them). Read from
//! the brokers without joining the readers' groups, so running consumers are not disturbed.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use wal_clusters::Backends;
use wal_clusters::flags::BrokerFlags;
use wal_namespaces::Namespace;
use wal_queue::entry;
use wal_queue::{Position, Queue, QueueSpec, Reader};
use wal_targets::region::{RegionSettings, StartFrom, same_region};

use crate::Failure;
use crate::dlq::source::DeadLetters;
use crate::output::{Format, print_json, table, when};

#[derive(Debug, clap::Args)]
pub struct Replication {
    #[command(flatten)]
    brokers: BrokerFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// A row per destination region: state, lag (entries and seconds), the newest entry
    /// applied, dead letters and gaps.
    Status {
        namespace: String,
        /// The region the namespace replicates from (the consumers' --region); it is not a
        /// destination.
        #[arg(long, env = "WAL_REGION", default_value = "local")]
        region: String,
    },
}

/// One destination region's reader, as the brokers show it.
#[derive(Debug, Default, Clone, PartialEq)]
struct Row {
    region: String,
    writer: String,
    state: &'static str,
    lag_entries: u64,
    lag_seconds: f64,
    /// The original write time of the newest entry the reader applied.
    last_applied_micros: Option<i64>,
    dead_lettered: u64,
    lost: u64,
    /// `topic/partition:from..to` per gap.
    gaps: Vec<String>,
}

pub async fn run(command: Replication, control_plane: &str, format: Format) -> Result<(), Failure> {
    let Command::Status { namespace, region } = command.command;
    let namespace = crate::namespace::current(control_plane, &namespace).await?;
    let settings = region_settings(&namespace)?;
    let clusters = command
        .brokers
        .cluster_map(command.brokers.kafka(), &Default::default())
        .map_err(|e| Failure::usage(e.to_string()))?;
    let backends = Backends::connect(&clusters, std::slice::from_ref(&namespace))
        .await
        .map_err(|e| Failure::broker(format!("configuring Kafka: {e}")))?;
    let mut dead_lettered: BTreeMap<String, u64> = BTreeMap::new();
    DeadLetters::connect(&command.brokers, &namespace)
        .await?
        .read_all(|found| {
            if !found.entry.destination_region.is_empty() {
                *dead_lettered
                    .entry(found.entry.destination_region.clone())
                    .or_default() += 1;
            }
        })
        .await?;
    let mut rows = Vec::new();
    for (name, destination) in settings.destinations_from(&region) {
        let reader = Reader {
            name: format!("region-{name}"),
            from_oldest: settings.start_from == StartFrom::Earliest,
        };
        let mut row = Row {
            writer: destination.writer_uri(),
            dead_lettered: dead_lettered
                .iter()
                .filter(|(r, _)| same_region(r, &name))
                .map(|(_, n)| n)
                .sum(),
            region: name,
            ..Row::default()
        };
        let mut started = false;
        for config in &namespace.queues {
            let spec = QueueSpec::of(&namespace, config).read_by(reader.clone());
            let queue = backends
                .queue(config.backend, spec)
                .ok_or_else(|| Failure::broker("no client for the queue's backend"))?;
            let positions = queue
                .positions()
                .await
                .map_err(|e| Failure::broker(e.to_string()))?
                .unwrap_or_default();
            started |= positions.iter().any(|p| p.committed.is_some());
            read_queue(&mut row, &queue, &positions).await?;
        }
        row.state = if row.lost > 0 {
            "gap"
        } else if !started {
            "not started"
        } else if row.lag_entries > 0 {
            "behind"
        } else {
            "caught up"
        };
        rows.push(row);
    }
    print(&rows, format);
    Ok(())
}

/// The namespace's region settings, or why it does not replicate.
fn region_settings(namespace: &Namespace) -> Result<RegionSettings, Failure> {
    let target = namespace
        .default_target
        .as_ref()
        .filter(|_| namespace.replicated())
        .ok_or_else(|| {
            Failure::usage(format!(
                "namespace '{}' does not replicate: its default target is not a region target",
                namespace.name
            ))
        })?;
    wal_targets::parse(&target.settings_json).map_err(|e| Failure::usage(e.to_string()))
}

/// Adds one queue's partitions to the row: lag, gaps, the oldest entry waiting and the newest
/// applied.
async fn read_queue(
    row: &mut Row,
    queue: &Arc<dyn Queue>,
    positions: &[Position],
) -> Result<(), Failure> {
    let topic = &queue.spec().name;
    let now = entry::now_micros();
    for position in positions {
        row.lag_entries += position.lag();
        if let Some(lost) = position.lost() {
            row.lost += u64::try_from(lost.end - lost.start).unwrap_or(0);
            row.gaps.push(format!(
                "{topic}/{}:{}..{}",
                position.partition, lost.start, lost.end
            ));
        }
        let written_at = async |offset: i64| -> Result<Option<i64>, Failure> {
            let found = queue
                .entry_at(position.partition, offset)
                .await
                .map_err(|e| Failure::broker(e.to_string()))?;
            Ok(found
                .and_then(Result::ok)
                .map(|e| e.original_write_time_micros))
        };
        let Some(next) = position.committed else {
            continue;
        };
        if position.lag() > 0
            && let Some(written) = written_at(next.max(position.low)).await?
        {
            let waited = (now.saturating_sub(written)).max(0) as f64 / 1e6;
            row.lag_seconds = row.lag_seconds.max(waited);
        }
        if next > position.low
            && let Some(written) = written_at(next - 1).await?
        {
            row.last_applied_micros = row.last_applied_micros.max(Some(written));
        }
    }
    Ok(())
}

fn print(rows: &[Row], format: Format) {
    match format {
        Format::Json => print_json(&json!(
            rows.iter()
                .map(|row| json!({
                    "region": row.region,
                    "writer": row.writer,
                    "state": row.state,
                    "lag_entries": row.lag_entries,
                    "lag_seconds": row.lag_seconds,
                    "last_applied": row.last_applied_micros.map(when),
                    "dead_lettered": row.dead_lettered,
                    "lost": row.lost,
                    "gaps": row.gaps,
                }))
                .collect::<Vec<_>>()
        )),
        Format::Table => {
            let mut out = table(&[
                "REGION",
                "STATE",
                "LAG",
                "LAG SECONDS",
                "LAST APPLIED",
                "DEAD LETTERS",
                "LOST",
                "GAPS",
            ]);
            for row in rows {
                out.add_row(vec![
                    row.region.clone(),
                    row.state.to_owned(),
                    row.lag_entries.to_string(),
                    format!("{:.1}", row.lag_seconds),
                    row.last_applied_micros.map_or("-".to_owned(), when),
                    row.dead_lettered.to_string(),
                    row.lost.to_string(),
                    if row.gaps.is_empty() {
                        "-".to_owned()
                    } else {
                        row.gaps.join(" ")
                    },
                ]);
            }
            println!("{out}");
        }
    }
}
