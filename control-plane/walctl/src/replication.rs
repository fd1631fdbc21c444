//! `walctl replication status NAMESPACE`: a row per destination region of a replicated
//! namespace: how far its reader trails (entries and seconds), the newest entry it applied, its
//! dead letters, any gap (entries the topic dropped before the reader read them), and an
//! operator's pause holding it. Asked of the control plane (ListDestinations), or read from the
//! brokers here with `--direct`; either way without joining the readers' groups, so running
//! consumers are not disturbed.

use serde_json::json;
use wal_proto::v1::DestinationStatus;

use crate::Failure;
use crate::lag::{COLUMNS, Source};
use crate::output::{Format, print_json, table};

#[derive(Debug, clap::Args)]
pub struct Replication {
    #[command(flatten)]
    source: Source,
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
        /// destination. By default the control plane's --region (with --direct: `local`).
        #[arg(long, env = "WAL_REGION")]
        region: Option<String>,
    },
}

pub async fn run(command: Replication, control_plane: &str, format: Format) -> Result<(), Failure> {
    let Command::Status { namespace, region } = command.command;
    let source = &command.source;
    // Before any broker is read: a namespace that does not replicate is a usage mistake.
    let config =
        crate::namespace::named(control_plane, source.namespace_file(), &namespace).await?;
    if !config.replicated() {
        return Err(Failure::usage(format!(
            "namespace '{namespace}' does not replicate: its default target is not a region target"
        )));
    }
    let region = region.unwrap_or_else(|| if source.direct() { "local" } else { "" }.to_owned());
    let named = (namespace.as_str(), Some(&config));
    let rows = crate::lag::rows(source, control_plane, named, &region).await?;
    let rows: Vec<_> = rows.into_iter().filter(|r| r.kind == "region").collect();
    print(&rows, format);
    Ok(())
}

/// A region's name without the destination's `region-` prefix.
fn region_of(row: &DestinationStatus) -> &str {
    row.name.strip_prefix("region-").unwrap_or(&row.name)
}

fn print(rows: &[DestinationStatus], format: Format) {
    match format {
        Format::Json => print_json(&json!(
            rows.iter()
                .map(|row| {
                    let mut fields = crate::lag::json(row);
                    fields.insert("region".to_owned(), json!(region_of(row)));
                    fields.insert("writer".to_owned(), json!(row.writer));
                    serde_json::Value::Object(fields)
                })
                .collect::<Vec<_>>()
        )),
        Format::Table => {
            let mut out = table(&[["REGION"].as_slice(), &COLUMNS].concat());
            for row in rows {
                out.add_row([vec![region_of(row).to_owned()], crate::lag::cells(row)].concat());
            }
            println!("{out}");
        }
    }
}
