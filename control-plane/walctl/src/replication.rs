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
    /// Sends one destination region everything written since a time again (a reset to that
    /// time): the control plane puts the namespace's entries written since then back on its
    /// queues for that region's reader alone, as a replay (`walctl replay --destination
    /// region-REGION`), authorized, audited and followed here; its other destinations take
    /// nothing. Kafka will not move a group's offsets while it has members, so there is no
    /// skipping ahead. Through the control plane only (not with --direct).
    Reset {
        namespace: String,
        /// The destination region, as the namespace's region target names it.
        region: String,
        /// Resend entries written at or after this: a time ago ("6h") or an RFC 3339 time.
        #[arg(long)]
        since: String,
        /// Entries put back per second at most (default 1,000).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        rate: Option<u32>,
        /// Count what would be sent again; send nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

pub async fn run(command: Replication, control_plane: &str, format: Format) -> Result<(), Failure> {
    let source = &command.source;
    let (namespace, region) = match command.command {
        Command::Status { namespace, region } => (namespace, region),
        Command::Reset {
            namespace,
            region,
            since,
            rate,
            dry_run,
        } => {
            if source.direct() {
                return Err(Failure::usage(
                    "replication reset runs through the control plane; --direct cannot",
                ));
            }
            return reset(
                control_plane,
                (namespace, region),
                (since, rate, dry_run),
                format,
            )
            .await;
        }
    };
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

/// `replication reset`: a replay of everything written since `since` to region `region`'s
/// destination alone.
async fn reset(
    control_plane: &str,
    (namespace, region): (String, String),
    (since, rate, dry_run): (String, Option<u32>, bool),
    format: Format,
) -> Result<(), Failure> {
    let from_micros = crate::time::instant("--since", &since, std::time::SystemTime::now())?;
    let again = if humantime::parse_duration(&since).is_ok() {
        format!(" with --since {}", crate::output::when(from_micros))
    } else {
        String::new()
    };
    let request = wal_proto::v1::StartReplayRequest {
        namespace,
        from_micros,
        destination: wal_namespaces::region_destination(&region),
        rate: rate.unwrap_or(0),
        dry_run,
        operator: std::env::var("USER").unwrap_or_else(|_| "walctl".to_owned()),
        ..Default::default()
    };
    crate::replay::api::start_and_follow(control_plane, request, &again, format).await
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
