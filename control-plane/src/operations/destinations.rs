//! Where each destination of a namespace stands: ListDestinations, and the same rows read by
//! `walctl destinations status --direct` and `walctl replication status --direct` from the
//! operator's machine. Read from the brokers without joining the readers' groups.

use std::collections::BTreeMap;

use tonic::{Request, Response, Status};
use wal_clusters::{Backends, ClusterMap};
use wal_namespaces::{DEFAULT_DESTINATION, Namespace, region_destination};
use wal_proto::v1::{DestinationStatus, ListDestinationsRequest, ListDestinationsResponse, Pause};
use wal_queue::Reader;
use wal_runtime::tls::Peer;
use wal_targets::region::{RegionSettings, StartFrom, same_region};

use super::OperationsService;
use super::dlq::{DeadLetters, DlqError};
use super::lag::{Lag, LagError};
use crate::service::store_status;

/// What stopped the rows from being read.
#[derive(Debug, thiserror::Error)]
pub enum DestinationsError {
    /// The namespace or the cluster map cannot be served as asked.
    #[error("{0}")]
    Usage(String),
    /// A broker failed or could not be reached.
    #[error("{0}")]
    Broker(String),
}

impl From<LagError> for DestinationsError {
    fn from(error: LagError) -> Self {
        match error {
            // The namespace names a backend the cluster map has no client for: no retry helps.
            LagError::NoClient(_) => Self::Usage(error.to_string()),
            LagError::Queue(_) => Self::Broker(error.to_string()),
        }
    }
}

/// The longest one ListDestinations reads the brokers, connecting included.
const WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

impl From<DlqError> for DestinationsError {
    fn from(error: DlqError) -> Self {
        match error {
            DlqError::Usage(message) => Self::Usage(message),
            other => Self::Broker(other.to_string()),
        }
    }
}

/// A row per destination of `namespace` (its own target's, or for a replicated namespace each
/// region it replicates to from `region`; then each store), with the pauses of `pauses` that
/// hold them.
pub async fn statuses(
    clusters: &ClusterMap,
    namespace: &Namespace,
    region: &str,
    pauses: &[Pause],
) -> Result<Vec<DestinationStatus>, DestinationsError> {
    let backends = Backends::connect(clusters, std::slice::from_ref(namespace))
        .await
        .map_err(|e| DestinationsError::Broker(format!("configuring the brokers: {e}")))?;
    let dead_lettered = dead_letters_by_reader(clusters, namespace).await?;
    let mut rows = Vec::new();
    if namespace.replicated() {
        let settings = region_settings(namespace)?;
        for (name, destination) in settings.destinations_from(region) {
            let reader = Reader {
                name: region_destination(&name),
                from_oldest: settings.start_from == StartFrom::Earliest,
            };
            let lag = Lag::of_reader(&backends, namespace, Some(&reader)).await?;
            let dead = dead_lettered
                .iter()
                .filter(|(r, _)| matches!(r, Dead::Region(r) if same_region(r, &name)))
                .map(|(_, n)| n)
                .sum();
            let mut row = row(region_destination(&name), "region", &lag, dead);
            row.writer = destination.writer_uri();
            rows.push(row);
        }
    } else {
        let kind = namespace
            .default_target
            .as_ref()
            .map_or("(the write's)", |t| t.kind.name());
        let lag = Lag::of_reader(&backends, namespace, None).await?;
        let dead = dead_lettered.get(&Dead::Destination(DEFAULT_DESTINATION.to_owned()));
        rows.push(row(
            DEFAULT_DESTINATION.to_owned(),
            kind,
            &lag,
            dead.copied().unwrap_or(0),
        ));
    }
    for destination in &namespace.destinations {
        let reader = Reader::of_destination(destination);
        let lag = Lag::of_reader(&backends, namespace, Some(&reader)).await?;
        let dead = dead_lettered.get(&Dead::Destination(destination.name.clone()));
        rows.push(row(
            destination.name.clone(),
            destination.target.kind.name(),
            &lag,
            dead.copied().unwrap_or(0),
        ));
    }
    for row in &mut rows {
        // The namespace's own pause first, as a consumer reads them.
        row.paused = ["", row.name.as_str()]
            .iter()
            .find_map(|d| pauses.iter().find(|p| p.destination == *d))
            .cloned();
        if row.paused.is_some() {
            row.state = "paused".to_owned();
        }
    }
    Ok(rows)
}

fn row(name: String, kind: &str, lag: &Lag, dead_lettered: u64) -> DestinationStatus {
    DestinationStatus {
        name,
        kind: kind.to_owned(),
        writer: String::new(),
        state: lag.state().to_owned(),
        lag_entries: lag.entries,
        lag_seconds: lag.seconds,
        last_applied_micros: lag.last_applied_micros.unwrap_or(0),
        dead_lettered,
        lost: lag.lost,
        gaps: lag.gaps.clone(),
        paused: None,
    }
}

/// Whose a dead letter is: a region's (its copy names the region) or a destination's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Dead {
    Region(String),
    Destination(String),
}

/// The namespace's dead letters counted by whose they are; a copy from before destinations
/// names none and is the namespace's own target's.
async fn dead_letters_by_reader(
    clusters: &ClusterMap,
    namespace: &Namespace,
) -> Result<BTreeMap<Dead, u64>, DestinationsError> {
    let mut counts: BTreeMap<Dead, u64> = BTreeMap::new();
    DeadLetters::connect(clusters, namespace)
        .await?
        .read_all(|found| {
            let entry = &found.entry;
            let whose = match (
                entry.destination_region.as_str(),
                entry.destination.as_str(),
            ) {
                ("", "") => Dead::Destination(DEFAULT_DESTINATION.to_owned()),
                ("", name) => Dead::Destination(name.to_owned()),
                (region, _) => Dead::Region(region.to_owned()),
            };
            *counts.entry(whose).or_default() += 1;
        })
        .await?;
    Ok(counts)
}

/// A replicated namespace's region settings.
/// The names of `namespace`'s destinations, as pauses and ListDestinations name them: each
/// region it replicates to from `region` (`region-<name>`), or `default` when it does not
/// replicate; then each store.
pub fn names(namespace: &Namespace, region: &str) -> Result<Vec<String>, DestinationsError> {
    let mut names = Vec::new();
    if namespace.replicated() {
        let settings = region_settings(namespace)?;
        for (name, _) in settings.destinations_from(region) {
            names.push(region_destination(&name));
        }
    } else {
        names.push(DEFAULT_DESTINATION.to_owned());
    }
    names.extend(namespace.destinations.iter().map(|d| d.name.clone()));
    Ok(names)
}

fn region_settings(namespace: &Namespace) -> Result<RegionSettings, DestinationsError> {
    let target = namespace.default_target.as_ref().ok_or_else(|| {
        DestinationsError::Usage(format!(
            "namespace '{}' replicates but has no region target",
            namespace.name
        ))
    })?;
    wal_targets::parse(&target.settings_json).map_err(|e| {
        DestinationsError::Usage(format!(
            "namespace '{}': its region settings: {e}",
            namespace.name
        ))
    })
}

impl OperationsService {
    pub(super) async fn list_destinations_call(
        &self,
        request: Request<ListDestinationsRequest>,
    ) -> Result<Response<ListDestinationsResponse>, Status> {
        self.check_reader(request.extensions().get::<Peer>())?;
        let request = request.into_inner();
        let namespace = self.namespace(&request.namespace).await?;
        let pauses: Vec<Pause> = self
            .store
            .pauses(Some(&namespace.name))
            .await
            .map_err(store_status)?
            .iter()
            .map(super::pauses::PauseRecord::to_proto)
            .collect();
        let region = match request.region.as_str() {
            "" => self.region.as_str(),
            region => region,
        };
        let read = statuses(&self.clusters, &namespace, region, &pauses);
        let destinations = tokio::time::timeout(WITHIN, read)
            .await
            .map_err(|_| {
                Status::unavailable(format!(
                    "the brokers of namespace '{}' did not answer within {WITHIN:?}",
                    namespace.name
                ))
            })?
            .map_err(|e| match e {
                DestinationsError::Usage(m) => Status::failed_precondition(m),
                DestinationsError::Broker(m) => Status::unavailable(m),
            })?;
        Ok(Response::new(ListDestinationsResponse { destinations }))
    }
}
