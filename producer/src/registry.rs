//! The namespaces this producer serves, each with its queue handles, its admission control and
//! its durable storage. Backend clients are made once and shared by all namespaces on them.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, bail};
use wal_core::durable::{DurableSettings, DurableStorage};
use wal_core::queue::kafka::{KafkaBackend, KafkaSettings};
use wal_core::queue::sqs::{SqsBackend, SqsSettings};
use wal_core::queue::{ProvisionReport, Queue, QueueSpec};
use wal_namespaces::{Backend, Namespace};

use crate::admission::Admission;
use crate::metrics::NamespaceMetrics;
use crate::options::ProducerOptions;

/// One namespace, ready to take writes.
#[derive(Debug)]
pub struct NamespaceRuntime {
    pub config: Namespace,
    /// In the order of `config.queues`.
    pub queues: Vec<Arc<dyn Queue>>,
    pub admission: Admission,
    pub durable: Option<Arc<DurableStorage>>,
    pub metrics: NamespaceMetrics,
}

impl NamespaceRuntime {
    /// The queue a key's entries go to (see [`Namespace::queue_index`]).
    pub fn queue_for(&self, key: &str) -> &Arc<dyn Queue> {
        &self.queues[self.config.queue_index(key)]
    }
}

#[derive(Debug, Default)]
pub struct Registry {
    namespaces: BTreeMap<String, Arc<NamespaceRuntime>>,
}

impl Registry {
    /// Connects what the namespaces need: a Kafka producer if any is on Kafka, an SQS client if
    /// any is on SQS, a CQL session per durable-storage keyspace.
    pub async fn build(
        options: &ProducerOptions,
        namespaces: Vec<Namespace>,
    ) -> anyhow::Result<Self> {
        let uses = |backend| {
            namespaces
                .iter()
                .any(|ns| ns.queues.iter().any(|q| q.backend == backend))
        };
        let kafka = if uses(Backend::Kafka) {
            let mut settings = KafkaSettings::new(&options.kafka_bootstrap);
            settings.delivery_timeout = options.write_timeout();
            Some(KafkaBackend::new(settings).context("configuring the Kafka producer")?)
        } else {
            None
        };
        let sqs = if uses(Backend::Sqs) {
            let mut settings = match &options.sqs_endpoint {
                Some(endpoint) => SqsSettings::local(endpoint),
                None => SqsSettings::aws(&options.sqs_region),
            };
            settings.send_timeout = options.write_timeout();
            Some(SqsBackend::new(settings).await)
        } else {
            None
        };
        let mut storages: BTreeMap<String, Arc<DurableStorage>> = BTreeMap::new();
        let mut registry = Self::default();
        for config in namespaces {
            let durable = match &config.durable_storage {
                None => None,
                Some(durable) => Some(match storages.get(&durable.keyspace) {
                    Some(storage) => Arc::clone(storage),
                    None => {
                        let storage = Arc::new(
                            connect_durable(options, &config.name, &durable.keyspace).await?,
                        );
                        storages.insert(durable.keyspace.clone(), Arc::clone(&storage));
                        storage
                    }
                }),
            };
            let queues = config
                .queues
                .iter()
                .map(|queue| {
                    let spec = QueueSpec::new(&config.name, &queue.name, &queue.dlq);
                    let handle: Arc<dyn Queue> = match queue.backend {
                        Backend::Kafka => Arc::new(
                            kafka
                                .as_ref()
                                .map(|k| k.queue(spec))
                                .context("kafka backend")?,
                        ),
                        Backend::Sqs => {
                            Arc::new(sqs.as_ref().map(|s| s.queue(spec)).context("sqs backend")?)
                        }
                    };
                    Ok(handle)
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
        Ok(registry)
    }

    pub fn get(&self, name: &str) -> Option<&Arc<NamespaceRuntime>> {
        self.namespaces.get(name)
    }

    pub fn names(&self) -> Vec<&str> {
        self.namespaces.keys().map(String::as_str).collect()
    }

    /// Creates every queue and DLQ that does not exist yet.
    pub async fn provision(&self) -> anyhow::Result<Vec<ProvisionReport>> {
        let mut reports = Vec::new();
        for runtime in self.namespaces.values() {
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

async fn connect_durable(
    options: &ProducerOptions,
    namespace: &str,
    keyspace: &str,
) -> anyhow::Result<DurableStorage> {
    if options.cql_nodes.is_empty() {
        bail!(
            "namespace '{namespace}' has durable storage (keyspace '{keyspace}') but no CQL nodes are set; pass --cql-nodes or WAL_CQL_NODES"
        );
    }
    let nodes: Vec<&str> = options.cql_nodes.iter().map(String::as_str).collect();
    DurableStorage::connect(&DurableSettings::new(&nodes, keyspace))
        .await
        .with_context(|| format!("durable storage of namespace '{namespace}'"))
}
