//! The brokers' side of a namespace: its queues, DLQs and (on Kafka) delay tiers created, and
//! how many entries a queue still holds before it may be dropped.

use std::sync::Arc;

use anyhow::Context as _;
use wal_core::queue::kafka::KafkaError;
use wal_core::queue::kafka::KafkaSettings;
use wal_core::queue::sqs::SqsSettings;
use wal_core::queue::{Backend, Backends, Queue, QueueSpec};
use wal_namespaces::{Namespace, QueueConfig};

#[derive(Debug)]
pub struct Provisioner {
    backends: Backends,
}

impl Provisioner {
    /// Clients for the brokers (connected lazily: a broker that is down fails the applies that
    /// need it, not the start).
    pub async fn connect(kafka: &KafkaSettings, sqs: &SqsSettings) -> Result<Self, KafkaError> {
        let backends = Backends::connect(Some(kafka.clone()), Some(sqs.clone())).await?;
        Ok(Self { backends })
    }

    fn queue(&self, namespace: &Namespace, queue: &QueueConfig) -> anyhow::Result<Arc<dyn Queue>> {
        self.handle(queue, QueueSpec::of(namespace, queue))
    }

    fn handle(&self, queue: &QueueConfig, spec: QueueSpec) -> anyhow::Result<Arc<dyn Queue>> {
        self.backends.queue(queue.backend, spec).with_context(|| {
            format!(
                "queue '{}' is on {}, which this control plane has no address for",
                queue.name, queue.backend
            )
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

    /// How many unfinished entries a Kafka delay tier topic of `namespace` holds.
    pub async fn unfinished_tier(&self, namespace: &Namespace, tier: &str) -> anyhow::Result<u64> {
        let spec = QueueSpec {
            namespace: namespace.name.clone(),
            name: tier.to_owned(),
            dlq: None,
            longest_wait: std::time::Duration::ZERO,
        };
        let queue = self
            .backends
            .queue(Backend::Kafka, spec)
            .context("no Kafka client")?;
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
}
