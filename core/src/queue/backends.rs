//! The backend clients one process shares across all its queues: a Kafka producer and admin
//! client, an SQS client. Made once, and only for the backends the process's namespaces use.

use std::sync::Arc;

use rdkafka::error::KafkaError;

use super::kafka::{KafkaBackend, KafkaSettings};
use super::sqs::{SqsBackend, SqsSettings};
use wal_namespaces::{Namespace, QueueConfig};

use super::{Backend, Queue, QueueSpec};

#[derive(Debug, Default, Clone)]
pub struct Backends {
    kafka: Option<Arc<KafkaBackend>>,
    sqs: Option<Arc<SqsBackend>>,
}

impl Backends {
    /// Connects the backends settings are given for; `None` means no queue here is on it. The
    /// clients connect lazily, so only a malformed Kafka setting fails here.
    pub async fn connect(
        kafka: Option<KafkaSettings>,
        sqs: Option<SqsSettings>,
    ) -> Result<Self, KafkaError> {
        let kafka = kafka.map(KafkaBackend::new).transpose()?;
        let sqs = match sqs {
            Some(settings) => Some(SqsBackend::new(settings).await),
            None => None,
        };
        Ok(Self { kafka, sqs })
    }

    /// These backends plus those settings are given for that are not connected yet: a namespace
    /// added at run time may be the first on a backend. Connected clients are shared, not remade.
    pub async fn with_missing(
        &self,
        kafka: Option<KafkaSettings>,
        sqs: Option<SqsSettings>,
    ) -> Result<Self, KafkaError> {
        let missing = Self::connect(
            kafka.filter(|_| self.kafka.is_none()),
            sqs.filter(|_| self.sqs.is_none()),
        )
        .await?;
        Ok(Self {
            kafka: self.kafka.clone().or(missing.kafka),
            sqs: self.sqs.clone().or(missing.sqs),
        })
    }

    /// A handle on one of a namespace's queues ([`QueueSpec::of`]), or `None` when its backend
    /// was not connected.
    pub fn namespace_queue(
        &self,
        namespace: &Namespace,
        queue: &QueueConfig,
    ) -> Option<Arc<dyn Queue>> {
        self.queue(queue.backend, QueueSpec::of(namespace, queue))
    }

    /// A handle on one queue, or `None` when its backend was not connected.
    pub fn queue(&self, backend: Backend, spec: QueueSpec) -> Option<Arc<dyn Queue>> {
        match backend {
            Backend::Kafka => Some(Arc::new(self.kafka.as_ref()?.queue(spec))),
            Backend::Sqs => Some(Arc::new(self.sqs.as_ref()?.queue(spec))),
        }
    }
}
