//! `walctl replication status NAMESPACE`: a row per destination region of a replicated
//! namespace: how far its reader trails (entries and seconds), the newest entry it applied, its
//! dead letters, and any gap (entries the topic dropped before the reader read them). Read from
//! the brokers without joining the readers' groups, so running consumers are not disturbed.

use serde_json::json;
use wal_clusters::flags::BrokerFlags;
use wal_namespaces::Namespace;
use wal_queue::Reader;
use wal_targets::region::{RegionSettings, StartFrom, same_region};

use crate::Failure;
use crate::lag::{COLUMNS, Lag};
use crate::output::{Format, print_json, table};

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
    lag: Lag,
    dead_lettered: u64,
}

pub async fn run(command: Replication, control_plane: &str, format: Format) -> Result<(), Failure> {
    let Command::Status { namespace, region } = command.command;
    let namespace = crate::namespace::current(control_plane, &namespace).await?;
    let settings = region_settings(&namespace)?;
    let backends = crate::lag::backends(&command.brokers, &namespace).await?;
    let dead_lettered = crate::lag::dead_letters_by(&command.brokers, &namespace, |entry| {
        (!entry.destination_region.is_empty()).then(|| entry.destination_region.clone())
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
        row.lag = Lag::of_reader(&backends, &namespace, Some(&reader)).await?;
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

fn print(rows: &[Row], format: Format) {
    match format {
        Format::Json => print_json(&json!(
            rows.iter()
                .map(|row| {
                    let mut fields = row.lag.json(row.dead_lettered);
                    fields.insert("region".to_owned(), json!(row.region));
                    fields.insert("writer".to_owned(), json!(row.writer));
                    serde_json::Value::Object(fields)
                })
                .collect::<Vec<_>>()
        )),
        Format::Table => {
            let mut out = table(&[["REGION"].as_slice(), &COLUMNS].concat());
            for row in rows {
                out.add_row([vec![row.region.clone()], row.lag.cells(row.dead_lettered)].concat());
            }
            println!("{out}");
        }
    }
}
