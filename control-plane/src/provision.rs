//! The brokers' side of a namespace: its queues, DLQs and (on Kafka) delay tiers created, and
//! how many entries a queue still holds before it may be dropped.

use std::sync::Arc;

use anyhow::Context as _;
use wal_clusters::ClusterMap;
use wal_clusters::{Backends, ConnectError};
use wal_namespaces::{DestinationConfig, Namespace, QueueConfig};
use wal_queue::{Queue, QueueSpec, Reader};

#[derive(Debug)]
pub struct Provisioner {
    backends: Backends,
    clusters: ClusterMap,
}

impl Provisioner {
    /// Clients for every cluster of the map (connected lazily: a broker that is down fails the
    /// applies that need it, not the start; brokers that refuse the credentials fail it).
    pub async fn connect(clusters: &ClusterMap) -> Result<Self, ConnectError> {
        let backends = Backends::connect_all(clusters).await?;
        Ok(Self {
            backends,
            clusters: clusters.clone(),
        })
    }

    /// The cluster map the namespaces' names are checked against.
    pub fn clusters(&self) -> &ClusterMap {
        &self.clusters
    }

    fn queue(&self, namespace: &Namespace, queue: &QueueConfig) -> anyhow::Result<Arc<dyn Queue>> {
        self.handle(queue, QueueSpec::of(namespace, queue))
    }

    fn handle(&self, queue: &QueueConfig, spec: QueueSpec) -> anyhow::Result<Arc<dyn Queue>> {
        let cluster = spec.cluster.clone();
        self.backends.queue(queue.backend, spec).with_context(|| match cluster {
            Some(cluster) => format!(
                "queue '{}' is on Kafka cluster '{cluster}', which this control plane's cluster map ({}) does not have",
                queue.name,
                self.clusters.origin()
            ),
            None => format!(
                "queue '{}' is on {}, which this control plane has no address for",
                queue.name, queue.backend
            ),
        })
    }

    /// Creates what is missing of every queue's queue, DLQ and delay tiers. Idempotent; returns
    /// the names created.
    pub async fn provision(&self, namespace: &Namespace) -> anyhow::Result<Vec<String>> {
        let mut created = Vec::new();
        for config in &namespace.queues {
            let queue = self.queue(namespace, config)?;
            let report = queue
                .provision()
                .await
                .with_context(|| format!("provisioning queue '{}'", config.name))?;
            created.extend(report.created);
        }
        Ok(created)
    }

    /// How many unfinished entries a Kafka delay tier topic of `namespace`'s queue `config`
    /// holds.
    pub async fn unfinished_tier(
        &self,
        namespace: &Namespace,
        config: &QueueConfig,
        tier: &str,
    ) -> anyhow::Result<u64> {
        let spec = QueueSpec {
            namespace: namespace.name.clone(),
            name: tier.to_owned(),
            dlq: None,
            longest_wait: std::time::Duration::ZERO,
            cluster: config.cluster.clone(),
            reader: None,
        };
        let queue = self.handle(config, spec)?;
        queue
            .unfinished()
            .await
            .with_context(|| format!("counting the entries on '{tier}'"))
    }

    /// How many unfinished entries the queue (or, with `dlq`, its DLQ) of `namespace` holds.
    pub async fn unfinished(
        &self,
        namespace: &Namespace,
        config: &QueueConfig,
        dlq: bool,
    ) -> anyhow::Result<u64> {
        // With the longest wait, so a Kafka queue's count includes its delay tiers.
        let spec = QueueSpec::of(namespace, config);
        let (name, spec) = match spec.dead_letters() {
            Some(dead_letters) if dlq => (&config.dlq, dead_letters),
            _ => (&config.name, spec),
        };
        let queue = self.handle(config, spec)?;
        queue
            .unfinished()
            .await
            .with_context(|| format!("counting the entries on '{name}'"))
    }

    /// How many entries of the queue `config` of `namespace` are still owed to `destination`:
    /// its reader's lag, counted from the oldest entry held when it has read nothing yet and
    /// starts there (nothing, when it starts from what is written next).
    pub async fn owed(
        &self,
        namespace: &Namespace,
        config: &QueueConfig,
        destination: &DestinationConfig,
    ) -> anyhow::Result<u64> {
        let reader = Reader::of_destination(destination);
        let spec = QueueSpec::of(namespace, config).read_by(reader.clone());
        let queue = self.handle(config, spec)?;
        let positions = queue.positions().await.with_context(|| {
            format!(
                "reading destination '{}''s position on '{}'",
                destination.name, config.name
            )
        })?;
        Ok(positions
            .unwrap_or_default()
            .iter()
            .filter(|p| p.committed.is_some() || reader.from_oldest)
            .map(wal_queue::Position::lag)
            .sum())
    }
}
