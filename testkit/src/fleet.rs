//! One namespace served end to end in-process: a producer taking its writes and a consumer
//! delivering them, started and stopped together.

use wal_consumer::{ConsumerHandle, ConsumerOptions};
use wal_namespaces::Namespace;

use crate::consumer::start_consumer_with;
use crate::producer::TestProducer;

/// A producer and a consumer serving one namespace on the local stack.
#[derive(Debug)]
pub struct Fleet {
    pub namespace: Namespace,
    pub producer: TestProducer,
    pub consumer: ConsumerHandle,
}

impl Fleet {
    pub async fn start(namespace: Namespace) -> Self {
        Self::start_with(namespace, |_| {}).await
    }

    /// Like [`Fleet::start`], with the consumer's options adjusted first.
    pub async fn start_with(
        namespace: Namespace,
        adjust: impl FnOnce(&mut ConsumerOptions),
    ) -> Self {
        let producer = TestProducer::start(vec![namespace.clone()]).await;
        let consumer = start_consumer_with(vec![namespace.clone()], adjust).await;
        Self {
            namespace,
            producer,
            consumer,
        }
    }

    /// Like [`Fleet::start`], both processes reading the cluster map at `clusters` (brokers and
    /// CQL that want credentials, say).
    pub async fn start_on_map(namespace: Namespace, clusters: &std::path::Path) -> Self {
        let producer = TestProducer::start_with(vec![namespace.clone()], |o| {
            o.brokers.clusters = Some(clusters.to_owned())
        })
        .await;
        let consumer = start_consumer_with(vec![namespace.clone()], |o| {
            o.brokers.clusters = Some(clusters.to_owned())
        })
        .await;
        Self {
            namespace,
            producer,
            consumer,
        }
    }

    pub fn name(&self) -> &str {
        &self.namespace.name
    }

    /// Stops the consumer (entries in progress finish), then the producer (writes in flight
    /// are answered).
    pub async fn stop(mut self) {
        self.consumer.shutdown().await;
        self.producer.shutdown().await;
    }
}
