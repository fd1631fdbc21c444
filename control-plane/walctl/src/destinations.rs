//! `walctl destinations status NAMESPACE`: a row per destination of a namespace (its own target,
//! and each store of its `destinations`): its kind, how far its reader trails, the newest entry
//! it applied, its dead letters and any gap, and whether an operator paused it (`walctl pause`).
//! Read from the brokers without joining the readers' groups. A replicated namespace's regions
//! are `walctl replication status`'s.

use serde_json::json;
use wal_clusters::flags::BrokerFlags;
use wal_namespaces::DEFAULT_DESTINATION;
use wal_queue::Reader;

use crate::Failure;
use crate::lag::{COLUMNS, Lag};
use crate::output::{Format, print_json, table};

#[derive(Debug, clap::Args)]
pub struct Destinations {
    #[command(flatten)]
    brokers: BrokerFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// A row per destination: kind, state, lag (entries and seconds), the newest entry applied,
    /// dead letters and gaps.
    Status { namespace: String },
}

#[derive(Debug)]
struct Row {
    name: String,
    kind: String,
    lag: Lag,
    dead_lettered: u64,
    /// The operator's pause holding it, if any.
    paused: Option<wal_proto::v1::Pause>,
}

pub async fn run(
    command: Destinations,
    control_plane: &str,
    format: Format,
) -> Result<(), Failure> {
    let Command::Status { namespace } = command.command;
    let namespace = crate::namespace::current(control_plane, &namespace).await?;
    let backends = crate::lag::backends(&command.brokers, &namespace).await?;
    // Dead letters by the destination their copy names; a copy from before destinations names
    // none and is the namespace's own target's; a region's are `walctl replication`'s.
    let dead_lettered = crate::lag::dead_letters_by(&command.brokers, &namespace, |entry| {
        let name = match entry.destination.as_str() {
            "" => DEFAULT_DESTINATION,
            name => name,
        };
        entry.destination_region.is_empty().then(|| name.to_owned())
    })
    .await?;
    let mut rows = Vec::new();
    if !namespace.replicated() {
        let kind = namespace
            .default_target
            .as_ref()
            .map_or("(the write's)", |t| t.kind.name());
        rows.push(Row {
            name: DEFAULT_DESTINATION.to_owned(),
            kind: kind.to_owned(),
            lag: Lag::of_reader(&backends, &namespace, None).await?,
            dead_lettered: dead_lettered.get(DEFAULT_DESTINATION).copied().unwrap_or(0),
            paused: None,
        });
    }
    for destination in &namespace.destinations {
        let reader = Reader::of_destination(destination);
        rows.push(Row {
            name: destination.name.clone(),
            kind: destination.target.kind.name().to_owned(),
            lag: Lag::of_reader(&backends, &namespace, Some(&reader)).await?,
            dead_lettered: dead_lettered.get(&destination.name).copied().unwrap_or(0),
            paused: None,
        });
    }
    let pauses = crate::operations::pauses_of(control_plane, &namespace.name).await?;
    for row in &mut rows {
        // The namespace's own pause first, as a consumer reads them.
        row.paused = ["", row.name.as_str()]
            .iter()
            .find_map(|d| pauses.iter().find(|p| p.destination == *d))
            .cloned();
    }
    print(&rows, format);
    Ok(())
}

fn print(rows: &[Row], format: Format) {
    match format {
        Format::Json => print_json(&json!(
            rows.iter()
                .map(|row| {
                    let mut fields = row.lag.json(row.dead_lettered);
                    fields.insert("destination".to_owned(), json!(row.name));
                    fields.insert("kind".to_owned(), json!(row.kind));
                    if let Some(pause) = &row.paused {
                        fields.insert("state".to_owned(), json!("paused"));
                        fields.insert("paused_by".to_owned(), json!(pause.paused_by));
                        fields.insert("pause_reason".to_owned(), json!(pause.reason));
                    }
                    serde_json::Value::Object(fields)
                })
                .collect::<Vec<_>>()
        )),
        Format::Table => {
            let mut out = table(&[["DESTINATION", "KIND"].as_slice(), &COLUMNS].concat());
            for row in rows {
                let named = vec![row.name.clone(), row.kind.clone()];
                let mut cells = row.lag.cells(row.dead_lettered);
                if let Some(pause) = &row.paused {
                    cells[0] = format!("paused by {}: {}", pause.paused_by, pause.reason);
                }
                out.add_row([named, cells].concat());
            }
            println!("{out}");
        }
    }
}
