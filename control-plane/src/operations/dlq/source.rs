//! Where a namespace's dead letters are: its queues' DLQs on Kafka or SQS, and how to reach them
//! without disturbing the namespace's consumers. Kafka DLQs are read straight from their
//! partitions; SQS DLQ messages are received and, unless redriven, made visible again. Used by
//! the control plane's Operations service and by `walctl dlq --direct`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use wal_clusters::Backends;
use wal_clusters::ClusterMap;
use wal_namespaces::{Backend, Namespace};
use wal_queue::entry::Entry;
use wal_queue::kafka::scan::{self, Scan};
use wal_queue::{Delivery, Queue, QueueSpec};

use super::DlqError;

/// How long a received SQS dead letter stays hidden from others while a reader holds it: longer
/// than a run takes, so a message passed over is not received twice by the same run. One held
/// by a reader that was killed is visible again after this.
pub const SQS_HOLD: Duration = Duration::from_secs(600);
/// The most SQS dead letters one run holds at once (each is hidden until released).
pub const SQS_MAX_HELD: usize = 10_000;

/// One DLQ of the namespace (several queues may share one).
#[derive(Debug)]
pub struct DlqHandle {
    pub queue: Arc<dyn Queue>,
    pub name: String,
    pub backend: Backend,
    /// The Kafka cluster it is on, as the cluster map names it (`None`: the default).
    pub cluster: Option<String>,
}

/// A namespace's DLQs, and its queues, where redriven entries go.
#[derive(Debug)]
pub struct DeadLetters {
    clusters: ClusterMap,
    namespace: Namespace,
    /// Each DLQ once, in the order the config first names it.
    pub dlqs: Vec<DlqHandle>,
    /// In the order of the namespace's queues.
    homes: Vec<Arc<dyn Queue>>,
}

/// A dead letter as read: which DLQ (an index into [`DeadLetters::dlqs`]), where in it, and the
/// entry.
#[derive(Debug)]
pub struct Found {
    pub dlq: usize,
    pub locator: String,
    pub entry: Entry,
}

impl DeadLetters {
    pub async fn connect(clusters: &ClusterMap, namespace: &Namespace) -> Result<Self, DlqError> {
        let clusters = clusters
            .clone()
            .tune_sqs(|sqs| sqs.visibility_timeout = SQS_HOLD);
        clusters
            .check(std::slice::from_ref(namespace))
            .map_err(|e| DlqError::Usage(e.to_string()))?;
        let backends = Backends::connect(&clusters, std::slice::from_ref(namespace))
            .await
            .map_err(|e| DlqError::Broker(format!("configuring Kafka: {e}")))?;
        let mut dlqs: Vec<DlqHandle> = Vec::new();
        let mut homes = Vec::new();
        for queue in &namespace.queues {
            let spec = QueueSpec::of(namespace, queue);
            let backend = queue.backend;
            let dlq_spec = spec
                .dead_letters()
                .ok_or_else(|| DlqError::Broker("a namespace queue without a DLQ".to_owned()))?;
            let (Some(home), Some(dlq)) = (
                backends.queue(backend, spec),
                backends.queue(backend, dlq_spec),
            ) else {
                return Err(DlqError::Broker(
                    "no client for the queue's backend".to_owned(),
                ));
            };
            homes.push(home);
            if !dlqs
                .iter()
                .any(|d| d.name == queue.dlq && d.backend == queue.backend)
            {
                dlqs.push(DlqHandle {
                    queue: dlq,
                    name: queue.dlq.clone(),
                    backend: queue.backend,
                    cluster: queue.cluster.clone(),
                });
            }
        }
        Ok(Self {
            clusters,
            namespace: namespace.clone(),
            dlqs,
            homes,
        })
    }

    /// The queue a redriven entry goes back to: the one its key goes to, as the producer sends it.
    pub fn home_of(&self, entry: &Entry) -> &Arc<dyn Queue> {
        &self.homes[self.namespace.queue_index(&entry.key)]
    }

    /// Every dead letter of every DLQ (up to [`SQS_MAX_HELD`] per SQS DLQ), handed to `visit`
    /// in order; SQS messages are made visible again afterwards.
    pub async fn read_all(&self, mut visit: impl FnMut(Found)) -> Result<(), DlqError> {
        let (sink, mut found) = tokio::sync::mpsc::channel(256);
        let sending = self.send_all(sink);
        let visiting = async {
            while let Some(one) = found.recv().await {
                visit(one);
            }
        };
        let (sent, ()) = tokio::join!(sending, visiting);
        sent
    }

    /// As [`read_all`](Self::read_all), each dead letter sent to `sink` as the reader takes
    /// them (a slow reader slows the reading, so nothing piles up). Stops early, without an
    /// error, when the reader goes away.
    pub async fn send_all(&self, sink: tokio::sync::mpsc::Sender<Found>) -> Result<(), DlqError> {
        for (index, dlq) in self.dlqs.iter().enumerate() {
            match dlq.backend {
                Backend::Kafka => {
                    let mut scan = self
                        .scan(dlq, BTreeMap::new(), BTreeMap::new(), scan::Gaps::Skip)
                        .await?;
                    while let Some(record) = scan.records.recv().await {
                        let record = record.map_err(|e| {
                            DlqError::Broker(format!("reading DLQ '{}': {e}", dlq.name))
                        })?;
                        let Ok(entry) = record.entry else { continue };
                        let locator =
                            format!("partition {} offset {}", record.partition, record.offset);
                        let found = Found {
                            dlq: index,
                            locator,
                            entry,
                        };
                        if sink.send(found).await.is_err() {
                            return Ok(());
                        }
                    }
                }
                Backend::Sqs => {
                    let held = match receive_all(dlq).await {
                        Ok(held) => held,
                        Err((held, failure)) => {
                            release(dlq, &held).await;
                            return Err(failure);
                        }
                    };
                    let mut gone = false;
                    for delivery in &held {
                        if let (Ok(entry), false) = (&delivery.entry, gone) {
                            let found = Found {
                                dlq: index,
                                locator: delivery.receipt.to_string(),
                                entry: entry.clone(),
                            };
                            gone = sink.send(found).await.is_err();
                        }
                    }
                    release(dlq, &held).await;
                    if gone {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// The Kafka cluster a DLQ is on.
    pub fn kafka_of(&self, dlq: &DlqHandle) -> Result<&wal_queue::kafka::KafkaSettings, DlqError> {
        self.clusters.kafka(dlq.cluster.as_deref()).ok_or_else(|| {
            DlqError::Usage(format!(
                "DLQ '{}' is on a Kafka cluster the cluster map does not have",
                dlq.name
            ))
        })
    }

    pub async fn scan(
        &self,
        dlq: &DlqHandle,
        from: BTreeMap<i32, i64>,
        upto: BTreeMap<i32, i64>,
        gaps: scan::Gaps,
    ) -> Result<Scan, DlqError> {
        let name = &dlq.name;
        let kafka = self.kafka_of(dlq)?;
        scan::scan(kafka, name, from, upto, gaps)
            .await
            .map_err(|e| DlqError::Broker(format!("reading '{name}': {e}")))
    }

    /// The namespace's own Kafka queues (each once), which a replay reads: handles as a DLQ's
    /// are, so one reader serves both.
    pub fn history(&self) -> Vec<DlqHandle> {
        let mut streams: Vec<DlqHandle> = Vec::new();
        for (queue, home) in self.namespace.queues.iter().zip(&self.homes) {
            if queue.backend != Backend::Kafka || streams.iter().any(|s| s.name == queue.name) {
                continue;
            }
            streams.push(DlqHandle {
                queue: Arc::clone(home),
                name: queue.name.clone(),
                backend: queue.backend,
                cluster: queue.cluster.clone(),
            });
        }
        streams
    }
}

/// Receives every message of an SQS DLQ (up to [`SQS_MAX_HELD`]), each hidden for
/// [`SQS_HOLD`] until released or deleted. On a failure, what was received so far comes back
/// with it, to be released.
pub(crate) async fn receive_all(
    dlq: &DlqHandle,
) -> Result<Vec<Delivery>, (Vec<Delivery>, DlqError)> {
    let mut held = Vec::new();
    while held.len() < SQS_MAX_HELD {
        let batch = match dlq.queue.receive(10, Duration::from_secs(1)).await {
            Ok(batch) => batch,
            Err(e) => {
                let failure = DlqError::Broker(format!("reading DLQ '{}': {e}", dlq.name));
                return Err((held, failure));
            }
        };
        if batch.is_empty() {
            break;
        }
        held.extend(batch);
    }
    Ok(held)
}

/// Makes held SQS dead letters visible again. A failure only delays them (until [`SQS_HOLD`]
/// ends), so it is logged, not fatal.
pub async fn release(dlq: &DlqHandle, held: &[Delivery]) {
    for delivery in held {
        if let Err(error) = dlq.queue.extend(delivery, Duration::ZERO).await {
            tracing::warn!(dlq = %dlq.name, %error, hold = ?SQS_HOLD, "could not make a dead letter visible again; it will be when its hold ends");
        }
    }
}
