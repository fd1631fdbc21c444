//! Whether a Kafka cluster can hold the copies the cluster map asks of the topics the platform
//! creates, asked once when its clients are made.
//!
//! Kafka refuses to create a topic with more replicas than it has brokers, but only when a topic
//! is created: a map that asks three copies of a one-broker cluster would start, then fail each
//! namespace's provisioning, and a map asking `min_insync_replicas` beyond the copies would
//! answer every write FALSE. A process refuses such a map at start-up instead, naming it.
//!
//! The brokers counted are the ones the cluster's metadata names: those serving, and those that
//! hold a replica of any topic. A broker that is down but holds replicas still counts, so a
//! process restarted while one broker of three is away starts (that is the outage a replicated
//! cluster is made to ride out); a cluster that never had three brokers is refused. Brokers
//! that do not answer are an outage, not a mistake: the process starts and holds its writes.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::producer::Producer as _;

use super::KafkaBackend;

/// How long the metadata request may take before the check gives up (with a warning).
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// A cluster with fewer brokers than the copies the map asks for.
#[derive(Debug, thiserror::Error)]
#[error(
    "Kafka cluster '{cluster}' at {servers} has {brokers} broker(s) (ids {ids}), fewer than the \
     {replication_factor} copies of each topic the cluster map asks for; lower \
     kafka.clusters.{cluster}.replication_factor (or --kafka-replication-factor) to at most \
     {brokers}, or point the map at the cluster that has them"
)]
pub struct TooFewBrokers {
    pub cluster: String,
    pub servers: String,
    pub brokers: usize,
    pub ids: String,
    pub replication_factor: i32,
}

impl KafkaBackend {
    /// Asks the cluster's metadata for its brokers and refuses ([`TooFewBrokers`]) when there
    /// are fewer than the replication factor. A factor of 1 has nothing to check; a cluster
    /// that does not answer within [`CHECK_TIMEOUT`] is let through with a warning.
    pub async fn check_replication(self: &Arc<Self>, cluster: &str) -> Result<(), TooFewBrokers> {
        let wanted = self.settings.replication_factor;
        if wanted <= 1 {
            return Ok(());
        }
        let backend = Arc::clone(self);
        // fetch_metadata blocks on the network; keep it off the async workers.
        let known = tokio::task::spawn_blocking(move || {
            let metadata = backend
                .producer()
                .client()
                .fetch_metadata(None, CHECK_TIMEOUT)?;
            let serving = metadata.brokers().iter().map(|b| b.id());
            let holding = metadata
                .topics()
                .iter()
                .flat_map(|t| t.partitions())
                .flat_map(|p| p.replicas().iter().copied());
            Ok::<_, rdkafka::error::KafkaError>(serving.chain(holding).collect::<BTreeSet<i32>>())
        })
        .await;
        let known = match known {
            Ok(Ok(known)) => known,
            Ok(Err(error)) => {
                tracing::warn!(
                    cluster,
                    servers = %self.settings.bootstrap_servers,
                    %error,
                    "Kafka cluster did not tell its brokers, so replication_factor {wanted} \
                     could not be checked against them; starting anyway"
                );
                return Ok(());
            }
            Err(_) => return Ok(()),
        };
        if known.len() >= usize::try_from(wanted).unwrap_or(usize::MAX) {
            return Ok(());
        }
        let ids: Vec<String> = known.iter().map(i32::to_string).collect();
        Err(TooFewBrokers {
            cluster: cluster.to_owned(),
            servers: self.settings.bootstrap_servers.clone(),
            brokers: known.len(),
            ids: ids.join(", "),
            replication_factor: wanted,
        })
    }
}
