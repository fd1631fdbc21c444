//! `walctl destinations status NAMESPACE`: a row per destination of a namespace (its own target,
//! and each store of its `destinations`): its kind, how far its reader trails, the newest entry
//! it applied, its dead letters and any gap, and whether an operator paused it (`walctl pause`).
//! Asked of the control plane (ListDestinations), or read from the brokers here with
//! `--direct`. A replicated namespace's regions are `walctl replication status`'s.

use serde_json::json;
use wal_proto::v1::DestinationStatus;

use crate::Failure;
use crate::lag::{COLUMNS, Source};
use crate::output::{Format, print_json, table};

#[derive(Debug, clap::Args)]
pub struct Destinations {
    #[command(flatten)]
    source: Source,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// A row per destination: kind, state (paused, gap, not started, behind, caught up), lag
    /// (entries and seconds), the newest entry applied, dead letters and gaps.
    Status { namespace: String },
}

pub async fn run(
    command: Destinations,
    control_plane: &str,
    format: Format,
) -> Result<(), Failure> {
    let Command::Status { namespace } = command.command;
    let rows = crate::lag::rows(&command.source, control_plane, (&namespace, None), "").await?;
    // A replicated namespace's regions are `walctl replication status`'s.
    let rows: Vec<_> = rows.into_iter().filter(|r| r.kind != "region").collect();
    print(&rows, format);
    Ok(())
}

fn print(rows: &[DestinationStatus], format: Format) {
    match format {
        Format::Json => print_json(&json!(
            rows.iter()
                .map(|row| {
                    let mut fields = crate::lag::json(row);
                    fields.insert("destination".to_owned(), json!(row.name));
                    fields.insert("kind".to_owned(), json!(row.kind));
                    serde_json::Value::Object(fields)
                })
                .collect::<Vec<_>>()
        )),
        Format::Table => {
            let mut out = table(&[["DESTINATION", "KIND"].as_slice(), &COLUMNS].concat());
            for row in rows {
                let named = vec![row.name.clone(), row.kind.clone()];
                out.add_row([named, crate::lag::cells(row)].concat());
            }
            println!("{out}");
        }
    }
}
