//! Where each destination's reader stands (ListDestinations): what `walctl destinations status`
//! shows per destination and `walctl replication status` per region. Asked of the control
//! plane, or with `--direct` read from the brokers here, without joining the readers' groups.

use std::path::PathBuf;

use serde_json::{Map, Value, json};
use wal_clusters::flags::BrokerFlags;
use wal_control_plane::operations::destinations::{DestinationsError, statuses};
use wal_proto::v1::{DestinationStatus, ListDestinationsRequest};

use crate::Failure;
use crate::output::when;

/// The columns a row shows after the ones that name it.
pub const COLUMNS: [&str; 7] = [
    "STATE",
    "LAG",
    "LAG SECONDS",
    "LAST APPLIED",
    "DEAD LETTERS",
    "LOST",
    "GAPS",
];

/// Where the rows are read.
#[derive(Debug, clap::Args)]
pub struct Source {
    /// Read the brokers from here, with the broker flags below, rather than asking the control
    /// plane (for one that is down); without it the broker flags are not used: the control
    /// plane reads its own cluster map. Operators' pauses are then not shown: the control
    /// plane holds them. The namespace's config still comes from the control plane unless
    /// --namespace-file gives it.
    #[arg(long, global = true)]
    direct: bool,
    /// With --direct, the namespace's config file, when the control plane cannot give it.
    #[arg(long, global = true, requires = "direct")]
    namespace_file: Option<PathBuf>,
    #[command(flatten)]
    brokers: BrokerFlags,
}

impl Source {
    pub fn direct(&self) -> bool {
        self.direct
    }

    pub fn namespace_file(&self) -> Option<&std::path::Path> {
        self.namespace_file.as_deref()
    }
}

/// The rows of `namespace`'s destinations; a replicated namespace's regions are those it
/// replicates to from `region`. `loaded` is the namespace's config when the caller read it
/// already: `--direct` then reads it no second time.
pub async fn rows(
    source: &Source,
    control_plane: &str,
    (namespace, loaded): (&str, Option<&wal_namespaces::Namespace>),
    region: &str,
) -> Result<Vec<DestinationStatus>, Failure> {
    if !source.direct {
        let request = ListDestinationsRequest {
            namespace: namespace.to_owned(),
            region: region.to_owned(),
        };
        return Ok(crate::operations::client(control_plane)
            .await?
            .list_destinations(request)
            .await
            .map_err(|status| {
                let failure = crate::namespace::refused(
                    &status,
                    &format!("reading the destinations of '{namespace}'"),
                );
                if status.code() == tonic::Code::Unimplemented {
                    return Failure::broker(format!(
                        "{}; this control plane predates ListDestinations: pass --direct to read the brokers from here",
                        failure.message
                    ));
                }
                failure
            })?
            .into_inner()
            .destinations);
    }
    let fetched;
    let config = match loaded {
        Some(config) => config,
        None => {
            let file = source.namespace_file.as_deref();
            fetched = crate::namespace::named(control_plane, file, namespace).await?;
            &fetched
        }
    };
    let clusters = source
        .brokers
        .cluster_map(source.brokers.kafka(), &Default::default())
        .map_err(|e| Failure::usage(e.to_string()))?;
    statuses(&clusters, config, region, &[])
        .await
        .map_err(|e| match e {
            DestinationsError::Usage(message) => Failure::usage(message),
            DestinationsError::Broker(message) => Failure::broker(message),
        })
}

/// The cells of [`COLUMNS`]; a paused destination's state says by whom and why.
pub fn cells(row: &DestinationStatus) -> Vec<String> {
    let state = match &row.paused {
        Some(pause) => format!("paused by {}: {}", pause.paused_by, pause.reason),
        None => row.state.clone(),
    };
    vec![
        state,
        row.lag_entries.to_string(),
        format!("{:.1}", row.lag_seconds),
        applied(row).map_or("-".to_owned(), when),
        row.dead_lettered.to_string(),
        row.lost.to_string(),
        if row.gaps.is_empty() {
            "-".to_owned()
        } else {
            row.gaps.join(" ")
        },
    ]
}

/// The same as JSON fields, beside which a command adds the ones that name the row.
pub fn json(row: &DestinationStatus) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("state".to_owned(), json!(row.state));
    fields.insert("lag_entries".to_owned(), json!(row.lag_entries));
    fields.insert("lag_seconds".to_owned(), json!(row.lag_seconds));
    fields.insert("last_applied".to_owned(), json!(applied(row).map(when)));
    fields.insert("dead_lettered".to_owned(), json!(row.dead_lettered));
    fields.insert("lost".to_owned(), json!(row.lost));
    fields.insert("gaps".to_owned(), json!(row.gaps));
    if let Some(pause) = &row.paused {
        fields.insert("paused_by".to_owned(), json!(pause.paused_by));
        fields.insert("pause_reason".to_owned(), json!(pause.reason));
    }
    fields
}

fn applied(row: &DestinationStatus) -> Option<i64> {
    (row.last_applied_micros != 0).then_some(row.last_applied_micros)
}
