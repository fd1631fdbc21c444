//! The brokers' side of a namespace: its queues, DLQs and (on Kafka) delay tiers created, and
//! how many entries a queue still holds before it may be dropped.

use std::sync::Arc;

use anyhow::Context as _;
use wal_core::queue::kafka::KafkaSettings;
use wal_core::queue::sqs::SqsSettings;
use wal_core::queue::{Backend as QueueBackend, Backends, Queue, QueueSpec};
use wal_namespaces::{Backend, Namespace, QueueConfig};

/// Where the brokers are; a namespace on a backend left unset here cannot be applied.
#[derive(Debug, Clone)]
pub struct BrokerSettings {
    pub kafka_bootstrap: Option<String>,
    /// An SQS endpoint (ElasticMQ locally); `None` with `sqs_region` set means AWS.
    pub sqs_endpoint: Option<String>,
    pub sqs_region: Option<String>,
}

#[derive(Debug)]
pub struct Provisioner {
    backends: Backends,
}

impl Provisioner {
    pub async fn connect(settings: &BrokerSettings) -> anyhow::Result<Self> {
        let kafka = settings.kafka_bootstrap.as_deref().map(KafkaSettings::new);
        let sqs = match (&settings.sqs_endpoint, &settings.sqs_region) {
            (Some(endpoint), _) => Some(SqsSettings::local(endpoint)),
            (None, Some(region)) => Some(SqsSettings::aws(region)),
            (None, None) => None,
        };
        let backends = Backends::connect(kafka, sqs)
            .await
            .context("configuring the Kafka clients")?;
        Ok(Self { backends })
    }

    fn queue(&self, namespace: &Namespace, queue: &QueueConfig) -> anyhow::Result<Arc<dyn Queue>> {
        // With the namespace's longest wait, so a Kafka queue gets the delay tiers it needs.
        let spec = QueueSpec::new(&namespace.name, &queue.name, &queue.dlq)
            .with_longest_wait(namespace.longest_wait());
        self.handle(queue, spec)
    }

    fn handle(&self, queue: &QueueConfig, spec: QueueSpec) -> anyhow::Result<Arc<dyn Queue>> {
        let backend = match queue.backend {
            Backend::Kafka => QueueBackend::Kafka,
            Backend::Sqs => QueueBackend::Sqs,
        };
        self.backends.queue(backend, spec).with_context(|| {
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
            .queue(QueueBackend::Kafka, spec)
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
        let spec = QueueSpec::new(&namespace.name, &config.name, &config.dlq)
            .with_longest_wait(namespace.longest_wait());
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
