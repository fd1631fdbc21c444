//! The backend clients one process shares across all its queues: a Kafka producer and admin
//! client per Kafka cluster of the cluster map, an SQS client. Made once, and only for the
//! clusters and backends the process's namespaces use.

use std::collections::BTreeMap;
use std::sync::Arc;

use rdkafka::error::KafkaError;

use crate::ClusterMap;
use wal_namespaces::{Namespace, QueueConfig};
use wal_queue::kafka::{KafkaBackend, Refused, TooFewBrokers};
use wal_queue::sqs::SqsBackend;

use wal_queue::{Backend, Queue, QueueSpec};

/// Why a process could not make its backend clients.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// librdkafka refused a setting of the cluster's (a secret's value is not shown).
    #[error("Kafka cluster '{cluster}': {reason}")]
    Settings { cluster: String, reason: String },
    /// The brokers refused the credentials or the TLS handshake.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The cluster has fewer brokers than the copies the map asks for.
    #[error(transparent)]
    TooFewBrokers(#[from] TooFewBrokers),
}

#[derive(Debug, Default, Clone)]
pub struct Backends {
    /// By cluster name, as the cluster map resolves it.
    kafka: BTreeMap<String, Arc<KafkaBackend>>,
    /// The name a queue that names no cluster is on.
    default_kafka: String,
    sqs: Option<Arc<SqsBackend>>,
}

impl Backends {
    /// Clients for what `namespaces` use of `map`: the Kafka clusters their Kafka queues name,
    /// SQS if a queue is on it. The clients connect lazily, so only a malformed Kafka setting
    /// fails here, or a secured cluster whose brokers refuse its credentials (see
    /// `KafkaBackend::check_credentials`). A cluster the map does not have is left out; its
    /// queues have no handle.
    pub async fn connect(map: &ClusterMap, namespaces: &[Namespace]) -> Result<Self, ConnectError> {
        Self::default().with_missing(map, namespaces).await
    }

    /// Clients for every cluster of `map`, and SQS: for a process that may touch any queue
    /// (the control plane, walctl).
    pub async fn connect_all(map: &ClusterMap) -> Result<Self, ConnectError> {
        let mut backends = Self {
            default_kafka: map.kafka_name(None).to_owned(),
            ..Self::default()
        };
        for (name, settings) in map.kafka_clusters() {
            let backend = kafka_backend(name, settings).await?;
            backends.kafka.insert(name.to_owned(), backend);
        }
        backends.sqs = Some(SqsBackend::new(map.sqs().clone()).await);
        Ok(backends)
    }

    /// These backends plus the clients `namespaces` need that are not connected yet: a
    /// namespace added at run time may be the first on a cluster. Connected clients are shared,
    /// not remade.
    pub async fn with_missing(
        &self,
        map: &ClusterMap,
        namespaces: &[Namespace],
    ) -> Result<Self, ConnectError> {
        let mut backends = self.clone();
        backends.default_kafka = map.kafka_name(None).to_owned();
        let queues = || namespaces.iter().flat_map(|ns| ns.queues.iter());
        for queue in queues().filter(|q| q.backend == Backend::Kafka) {
            let name = map.kafka_name(queue.cluster.as_deref());
            if let Some(settings) = map.kafka(Some(name))
                && !backends.kafka.contains_key(name)
            {
                let backend = kafka_backend(name, settings).await?;
                backends.kafka.insert(name.to_owned(), backend);
            }
        }
        if backends.sqs.is_none() && queues().any(|q| q.backend == Backend::Sqs) {
            backends.sqs = Some(SqsBackend::new(map.sqs().clone()).await);
        }
        Ok(backends)
    }

    /// A handle on one of a namespace's queues ([`QueueSpec::of`]), or `None` when its backend
    /// or cluster was not connected.
    pub fn namespace_queue(
        &self,
        namespace: &Namespace,
        queue: &QueueConfig,
    ) -> Option<Arc<dyn Queue>> {
        self.queue(queue.backend, QueueSpec::of(namespace, queue))
    }

    /// A handle on one queue (on Kafka, on its spec's cluster), or `None` when its backend or
    /// cluster was not connected.
    pub fn queue(&self, backend: Backend, spec: QueueSpec) -> Option<Arc<dyn Queue>> {
        match backend {
            Backend::Kafka => {
                let cluster = spec.cluster.as_deref().unwrap_or(&self.default_kafka);
                Some(Arc::new(self.kafka.get(cluster)?.queue(spec)))
            }
            Backend::Sqs => Some(Arc::new(self.sqs.as_ref()?.queue(spec))),
        }
    }
}

/// The clients of one Kafka cluster, made, let in when secured, and able to hold the copies
/// the map asks for.
async fn kafka_backend(
    cluster: &str,
    settings: &wal_queue::kafka::KafkaSettings,
) -> Result<Arc<KafkaBackend>, ConnectError> {
    let backend = KafkaBackend::new(settings.clone()).map_err(|error| ConnectError::Settings {
        cluster: cluster.to_owned(),
        reason: settings_error(&error),
    })?;
    backend.check_credentials(cluster).await?;
    backend.check_replication(cluster).await?;
    Ok(backend)
}

/// librdkafka's refusal of a property, without the value when the property is a secret: its
/// own message quotes the value (a password inside `sasl.jaas.config`, say).
fn settings_error(error: &KafkaError) -> String {
    match error {
        KafkaError::ClientConfig(_, description, key, _) if wal_runtime::secret::is_secret(key) => {
            format!("librdkafka refused the property {key} (its value is not shown): {description}")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wal_queue::kafka::KafkaSettings;

    #[tokio::test]
    async fn a_refused_secret_property_is_named_without_its_value() {
        let mut raw = BTreeMap::new();
        raw.insert(
            "sasl.jaas.config".to_owned(),
            "PlainLoginModule required password=\"hunter2\";".to_owned(),
        );
        let mut settings = KafkaSettings::new("127.0.0.1:1");
        settings.client = wal_runtime::secret::ClientProperties::resolved(
            raw,
            wal_runtime::secret::Secrets::Read,
        )
        .unwrap();
        let error = kafka_backend("main", &settings)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("sasl.jaas.config"), "{error}");
        assert!(!error.contains("hunter2"), "the secret is in: {error}");
    }
}
