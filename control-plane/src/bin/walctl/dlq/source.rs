//! Where a namespace's dead letters are: its queues' DLQs on Kafka or SQS, and how to reach them
//! without disturbing the namespace's consumers. Kafka DLQs are read straight from their
//! partitions; SQS DLQ messages are received and, unless redriven, made visible again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use wal_core::entry::Entry;
use wal_core::queue::kafka::KafkaSettings;
use wal_core::queue::kafka::scan::{self, Scan};
use wal_core::queue::sqs::SqsSettings;
use wal_core::queue::{Backend as QueueBackend, Backends, Delivery, Queue, QueueSpec};
use wal_namespaces::{Backend, Namespace};

use crate::Failure;

/// How long a received SQS dead letter stays hidden from others while walctl holds it: longer
/// than a run takes, so a message passed over is not received twice by the same run. One held
/// when walctl is killed is visible again after this.
pub const SQS_HOLD: Duration = Duration::from_secs(600);
/// The most SQS dead letters one run holds at once (each is hidden until released).
pub const SQS_MAX_HELD: usize = 10_000;

/// The brokers' addresses: walctl reads the DLQs itself.
#[derive(Debug, Clone, clap::Args)]
pub struct BrokerArgs {
    /// Kafka bootstrap servers, for namespaces on Kafka.
    #[arg(long, env = "WAL_KAFKA_BOOTSTRAP", default_value = "127.0.0.1:19092")]
    kafka_bootstrap: String,
    /// SQS endpoint (ElasticMQ locally); unset means AWS.
    #[arg(long, env = "WAL_SQS_ENDPOINT")]
    sqs_endpoint: Option<String>,
    /// AWS region for SQS.
    #[arg(long, env = "WAL_SQS_REGION", default_value = "us-east-1")]
    sqs_region: String,
}

/// One queue of the namespace: its handle (where redrives go) and its DLQ's.
#[derive(Debug)]
pub struct QueuePair {
    pub home: Arc<dyn Queue>,
    pub dlq: Arc<dyn Queue>,
    pub dlq_name: String,
    pub backend: Backend,
}

/// A namespace's queues, connected.
#[derive(Debug)]
pub struct DeadLetters {
    pub kafka: KafkaSettings,
    pub queues: Vec<QueuePair>,
}

/// A dead letter as read: which queue's DLQ, where in it, and the entry.
#[derive(Debug)]
pub struct Found {
    pub queue: usize,
    pub locator: String,
    pub entry: Entry,
}

impl DeadLetters {
    pub async fn connect(brokers: &BrokerArgs, namespace: &Namespace) -> Result<Self, Failure> {
        let kafka = KafkaSettings::new(&brokers.kafka_bootstrap);
        let sqs = SqsSettings {
            visibility_timeout: SQS_HOLD,
            ..match &brokers.sqs_endpoint {
                Some(endpoint) => SqsSettings::local(endpoint),
                None => SqsSettings::aws(&brokers.sqs_region),
            }
        };
        let backends = Backends::connect(Some(kafka.clone()), Some(sqs))
            .await
            .map_err(|e| Failure::broker(format!("configuring Kafka: {e}")))?;
        let mut queues = Vec::new();
        for queue in &namespace.queues {
            let spec = QueueSpec::new(&namespace.name, &queue.name, &queue.dlq)
                .with_longest_wait(namespace.longest_wait());
            let backend = match queue.backend {
                Backend::Kafka => QueueBackend::Kafka,
                Backend::Sqs => QueueBackend::Sqs,
            };
            let dlq_spec = spec
                .dead_letters()
                .ok_or_else(|| Failure::broker("a namespace queue without a DLQ"))?;
            let (Some(home), Some(dlq)) = (
                backends.queue(backend, spec),
                backends.queue(backend, dlq_spec),
            ) else {
                return Err(Failure::broker("no client for the queue's backend"));
            };
            queues.push(QueuePair {
                home,
                dlq,
                dlq_name: queue.dlq.clone(),
                backend: queue.backend,
            });
        }
        Ok(Self { kafka, queues })
    }

    /// Every dead letter of every queue (up to [`SQS_MAX_HELD`] per SQS DLQ), handed to `visit`
    /// in order; SQS messages are made visible again afterwards.
    pub async fn read_all(&self, mut visit: impl FnMut(Found)) -> Result<(), Failure> {
        for (index, pair) in self.queues.iter().enumerate() {
            match pair.backend {
                Backend::Kafka => {
                    let mut scan = self.scan(&pair.dlq_name, BTreeMap::new()).await?;
                    while let Some(record) = scan.records.recv().await {
                        let record = record.map_err(|e| {
                            Failure::broker(format!("reading DLQ '{}': {e}", pair.dlq_name))
                        })?;
                        if let Ok(entry) = record.entry {
                            visit(Found {
                                queue: index,
                                locator: format!(
                                    "partition {} offset {}",
                                    record.partition, record.offset
                                ),
                                entry,
                            });
                        }
                    }
                }
                Backend::Sqs => {
                    let held = receive_all(pair).await?;
                    for delivery in &held {
                        if let Ok(entry) = &delivery.entry {
                            visit(Found {
                                queue: index,
                                locator: delivery.receipt.to_string(),
                                entry: entry.clone(),
                            });
                        }
                    }
                    release(pair, &held).await;
                }
            }
        }
        Ok(())
    }

    pub async fn scan(&self, dlq: &str, from: BTreeMap<i32, i64>) -> Result<Scan, Failure> {
        scan::scan(&self.kafka, dlq, from)
            .await
            .map_err(|e| Failure::broker(format!("reading DLQ '{dlq}': {e}")))
    }
}

/// Receives every message of an SQS DLQ (up to [`SQS_MAX_HELD`]), each hidden for
/// [`SQS_HOLD`] until released or deleted.
pub async fn receive_all(pair: &QueuePair) -> Result<Vec<Delivery>, Failure> {
    let mut held = Vec::new();
    while held.len() < SQS_MAX_HELD {
        let batch = pair
            .dlq
            .receive(10, Duration::from_secs(1))
            .await
            .map_err(|e| Failure::broker(format!("reading DLQ '{}': {e}", pair.dlq_name)))?;
        if batch.is_empty() {
            break;
        }
        held.extend(batch);
    }
    Ok(held)
}

/// Makes held SQS dead letters visible again. A failure only delays them (until [`SQS_HOLD`]
/// ends), so it is reported, not fatal.
pub async fn release(pair: &QueuePair, held: &[Delivery]) {
    for delivery in held {
        if let Err(error) = pair.dlq.extend(delivery, Duration::ZERO).await {
            eprintln!(
                "walctl: could not make a message of DLQ '{}' visible again ({error}); it will be after {SQS_HOLD:?}",
                pair.dlq_name
            );
        }
    }
}
