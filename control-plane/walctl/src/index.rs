//! `walctl index rebuild`: fills an index destination's table from its base table, for a
//! namespace that adds an index over a table that already holds rows. The target reads a row's
//! state before it writes, so the rebuild is exact while nothing else writes the index: run it
//! from the config about to be applied (`--file`), before the destination's readers start, and
//! give the destination `start_from: earliest`: its readers then go over what the topics hold,
//! the writes made during the rebuild included, and converge with it by their write times.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use wal_apply::clients::{ClientSettings, Clients};
use wal_apply::index::IndexTarget;
use wal_clusters::flags::{BrokerFlags, CqlFlags};
use wal_targets::Kind;
use wal_targets::index::IndexSettings;

use crate::Failure;
use crate::output::{Format, print_json};

#[derive(Debug, clap::Args)]
pub struct Index {
    #[command(flatten)]
    brokers: BrokerFlags,
    #[command(flatten)]
    cql: CqlFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Index every row of an index destination's base table with the write time of its
    /// indexed columns; prints the rows read and indexed. Exact while nothing else writes the
    /// index: run it with --file before applying the config that adds the destination (with
    /// start_from earliest), not while the destination's readers deliver.
    Rebuild {
        namespace: String,
        /// The destination's name in the namespace's `destinations` (an `index` target).
        destination: String,
        /// Read the namespace from this config file (the one about to be applied) instead of
        /// the control plane.
        #[arg(short, long)]
        file: Option<std::path::PathBuf>,
    },
}

/// How long one CQL request of the rebuild may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn run(command: Index, control_plane: &str, format: Format) -> Result<(), Failure> {
    let Command::Rebuild {
        namespace,
        destination,
        file,
    } = command.command;
    let namespace = match file {
        Some(path) => {
            let found = crate::namespace::from_file(&path)?;
            if found.name != namespace {
                return Err(Failure::usage(format!(
                    "{} defines namespace '{}', not '{namespace}'",
                    path.display(),
                    found.name
                )));
            }
            found
        }
        None => crate::namespace::current(control_plane, &namespace).await?,
    };
    let indexes: Vec<&str> = namespace
        .destinations
        .iter()
        .filter(|d| d.target.kind == Kind::Index)
        .map(|d| d.name.as_str())
        .collect();
    let found = namespace
        .destinations
        .iter()
        .find(|d| d.name == destination && d.target.kind == Kind::Index)
        .ok_or_else(|| {
            Failure::usage(format!(
                "namespace '{}' has no index destination '{destination}'; its index destinations: {indexes:?}",
                namespace.name
            ))
        })?;
    let settings: IndexSettings = wal_targets::parse(&found.target.settings_json)
        .map_err(|e| Failure::usage(format!("destination '{destination}': {e}")))?;
    let clusters = command
        .brokers
        .cluster_map(command.brokers.kafka(), &command.cql)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let client_settings = ClientSettings {
        cql_nodes: command.cql.cql_nodes.clone(),
        ..ClientSettings::none(REQUEST_TIMEOUT)
    };
    let clients = Clients::new(client_settings)
        .map(|clients| Arc::new(clients.with_clusters(clusters)))
        .map_err(|e| Failure::usage(format!("CQL client: {e}")))?;
    let target = IndexTarget::connect(settings.clone(), &clients)
        .await
        .map_err(|e| Failure::broker(format!("index '{}': {e}", settings.table)))?;
    let progress = |rows: u64| {
        if format == Format::Table {
            eprintln!("{rows} rows of {} read", settings.base_table);
        }
    };
    let (read, indexed) = target
        .rebuild(progress)
        .await
        .map_err(|e| Failure::broker(format!("rebuilding index '{}': {e}", settings.table)))?;
    match format {
        Format::Json => print_json(&json!({
            "namespace": namespace.name,
            "destination": destination,
            "base_table": settings.base_table,
            "table": settings.table,
            "read": read,
            "indexed": indexed,
        })),
        Format::Table => println!(
            "{read} rows of {}.{} read, {indexed} indexed into {}",
            settings.keyspace, settings.base_table, settings.table
        ),
    }
    Ok(())
}
