//! The namespaces this producer serves, each with its queue handles, its admission control and
//! its durable storage. Backend clients are made once and shared by all namespaces on them.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, bail};
use wal_clusters::Backends;
use wal_durable::{DurableSettings, DurableStorage};
use wal_namespaces::feed::SetChanges;
use wal_namespaces::{Backend, Namespace};
use wal_queue::kafka::PRODUCER_BUFFER_MESSAGES;
use wal_queue::{Produce, ProvisionReport};

use crate::admission::Admission;
use crate::metrics::NamespaceMetrics;
use crate::settings::ProducerSettings;

/// One namespace, ready to take writes.
#[derive(Debug)]
pub struct NamespaceRuntime {
    pub config: Namespace,
    /// In the order of `config.queues`; the producer only writes to them (and provisions).
    pub queues: Vec<Arc<dyn Produce>>,
    pub admission: Admission,
    pub durable: Option<Arc<DurableStorage>>,
    pub metrics: NamespaceMetrics,
}

impl NamespaceRuntime {
    /// The queue a key's entries go to (see [`Namespace::queue_index`]).
    pub fn queue_for(&self, key: &str) -> &Arc<dyn Produce> {
        &self.queues[self.config.queue_index(key)]
    }
}

#[derive(Debug, Default)]
pub struct Registry {
    namespaces: BTreeMap<String, Arc<NamespaceRuntime>>,
    /// The backend clients and CQL sessions, kept for the next set of namespaces to share.
    backends: Backends,
    /// By CQL shard (`None`: the map's default) and keyspace.
    storages: BTreeMap<(Option<String>, String), Arc<DurableStorage>>,
}

impl Registry {
    /// Connects what the namespaces need: a Kafka producer if any is on Kafka, an SQS client if
    /// any is on SQS, a CQL session per durable-storage keyspace.
    pub async fn build(
        settings: &ProducerSettings,
        namespaces: Vec<Namespace>,
    ) -> anyhow::Result<Self> {
        let (registry, _) = Self::default().next(settings, namespaces).await?;
        Ok(registry)
    }

    /// The registry for a new set of namespaces. A namespace whose config is unchanged keeps its
    /// runtime (admission state, queue handles); clients and CQL sessions are shared with this
    /// registry, and only what is missing is connected.
    pub async fn next(
        &self,
        settings: &ProducerSettings,
        namespaces: Vec<Namespace>,
    ) -> anyhow::Result<(Self, SetChanges)> {
        settings.clusters.check(&namespaces)?;
        check_kafka_buffer(&namespaces)?;
        let changes = SetChanges::between(self.namespaces.values().map(|r| &r.config), &namespaces);
        let fresh: Vec<Namespace> = namespaces
            .iter()
            .filter(|ns| changes.is_fresh(&ns.name))
            .cloned()
            .collect();
        log_placement(settings, &fresh);
        let backends = self
            .backends
            .with_missing(&settings.clusters, &namespaces)
            .await
            .context("configuring the Kafka producer")?;
        let mut storages = self.storages.clone();
        let mut registry = Self::default();
        for config in namespaces {
            if let Some(same) = self.namespaces.get(&config.name)
                && same.config == config
            {
                registry
                    .namespaces
                    .insert(config.name.clone(), Arc::clone(same));
                continue;
            }
            let durable = match &config.durable_storage {
                None => None,
                Some(durable) => {
                    let place = (durable.shard.clone(), durable.keyspace.clone());
                    Some(match storages.get(&place) {
                        Some(storage) => Arc::clone(storage),
                        None => {
                            let storage = Arc::new(connect_durable(settings, &config).await?);
                            storages.insert(place, Arc::clone(&storage));
                            storage
                        }
                    })
                }
            };
            let queues = config
                .queues
                .iter()
                .map(|queue| {
                    let handle = backends
                        .namespace_queue(&config, queue)
                        .context("no client for the queue's backend")?;
                    Ok(handle as Arc<dyn Produce>)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let runtime = NamespaceRuntime {
                admission: Admission::new(&config.name, &config.rate_limit),
                metrics: NamespaceMetrics::new(&config.name),
                queues,
                durable,
                config,
            };
            registry
                .namespaces
                .insert(runtime.config.name.clone(), Arc::new(runtime));
        }
        registry.backends = backends;
        registry.storages = storages;
        Ok((registry, changes))
    }

    pub fn names(&self) -> Vec<String> {
        self.namespaces.keys().cloned().collect()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<NamespaceRuntime>> {
        self.namespaces.get(name)
    }

    /// The largest payload any namespace here accepts.
    pub fn largest_payload_limit(&self) -> usize {
        self.namespaces
            .values()
            .map(|ns| ns.config.payload_limit_bytes)
            .max()
            .unwrap_or(0)
    }

    /// Creates every queue and DLQ that does not exist yet.
    pub async fn provision(&self) -> anyhow::Result<Vec<ProvisionReport>> {
        self.provision_only(&self.names()).await
    }

    /// Creates the missing queues and DLQs of the named namespaces.
    pub async fn provision_only(&self, names: &[String]) -> anyhow::Result<Vec<ProvisionReport>> {
        let mut reports = Vec::new();
        let chosen = self
            .namespaces
            .values()
            .filter(|runtime| names.contains(&runtime.config.name));
        for runtime in chosen {
            for queue in &runtime.queues {
                let report = queue
                    .provision()
                    .await
                    .with_context(|| format!("provisioning namespace '{}'", runtime.config.name))?;
                reports.push(report);
            }
        }
        Ok(reports)
    }
}

/// The durable storage of `namespace`, on the CQL shard it names (checked against the map).
async fn connect_durable(
    settings: &ProducerSettings,
    namespace: &Namespace,
) -> anyhow::Result<DurableStorage> {
    let name = &namespace.name;
    let durable = namespace
        .durable_storage
        .as_ref()
        .context("a namespace without durable storage")?;
    let shard = settings
        .clusters
        .cql(durable.shard.as_deref())
        .context("a CQL shard the cluster map does not have")?;
    let keyspace = &durable.keyspace;
    if shard.contact_points.is_empty() {
        bail!(
            "namespace '{name}' has durable storage (keyspace '{keyspace}') but its CQL shard has no contact points; pass --cql-nodes or WAL_CQL_NODES, or name them in the cluster map"
        );
    }
    DurableStorage::connect(&DurableSettings::on_shard(shard, keyspace))
        .await
        .with_context(|| format!("durable storage of namespace '{name}'"))
}

/// Writes in flight on Kafka share one producer buffer; if the namespaces' caps together exceed
/// it, one namespace's burst could fill it and make another's writes fail.
fn check_kafka_buffer(namespaces: &[Namespace]) -> anyhow::Result<()> {
    let total: usize = namespaces
        .iter()
        .filter(|ns| ns.queues.iter().any(|q| q.backend == Backend::Kafka))
        .map(|ns| ns.rate_limit.max_in_flight as usize)
        .sum();
    if total > PRODUCER_BUFFER_MESSAGES {
        bail!(
            "the Kafka namespaces' rate_limit.max_in_flight add up to {total}, more than the {PRODUCER_BUFFER_MESSAGES} writes one producer buffers; lower them or spread the namespaces over more producers"
        );
    }
    Ok(())
}

/// Says where each namespace new to this producer writes: its Kafka clusters by name and
/// address, so nobody mistakes where the writes go.
fn log_placement(settings: &ProducerSettings, namespaces: &[Namespace]) {
    let map = &settings.clusters;
    for ns in namespaces {
        let clusters: std::collections::BTreeSet<&str> = ns
            .queues
            .iter()
            .filter(|q| q.backend == Backend::Kafka)
            .map(|q| map.kafka_name(q.cluster.as_deref()))
            .collect();
        for cluster in clusters {
            let bootstrap = map
                .kafka(Some(cluster))
                .map(|k| k.bootstrap_servers.as_str());
            tracing::info!(namespace = %ns.name, cluster, bootstrap, "namespace's Kafka queues are on this cluster");
        }
    }
}
