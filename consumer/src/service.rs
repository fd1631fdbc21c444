//! The consumer as a whole: one worker per namespace queue, sharing the target clients, run
//! until shutdown.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use wal_core::entry::Target as TargetSpec;
use wal_core::queue::kafka::KafkaSettings;
use wal_core::queue::sqs::SqsSettings;
use wal_core::queue::{Backend as QueueBackend, Backends, Queue, QueueSpec};
use wal_namespaces::{Backend, Namespace};

use crate::clients::Clients;
use crate::delivery::{Deliverer, DeliverySettings, QueueContext};
use crate::metrics::QueueMetrics;
use crate::options::ConsumerOptions;
use crate::target::TargetRegistry;
use crate::tier::TierRoute;
use crate::worker::{Role, Worker};

#[derive(Debug)]
pub struct Consumer {
    workers: Vec<Worker>,
    deliverer: Arc<Deliverer>,
}

impl Consumer {
    /// Connects the namespaces' queues. A namespace whose default target kind this build does not
    /// deliver is left alone (its entries stay on the queue), with a warning.
    pub async fn start(
        options: &ConsumerOptions,
        namespaces: Vec<Namespace>,
    ) -> anyhow::Result<Self> {
        check_clusters(options, &namespaces)?;
        let clients = Arc::new(Clients::new(options.client_settings())?);
        let targets = TargetRegistry::builtin(Arc::clone(&clients));
        let namespaces: Vec<Namespace> = namespaces
            .into_iter()
            .filter(|ns| match &ns.default_target {
                Some(target) if !targets.knows(&target.kind) => {
                    tracing::warn!(namespace = %ns.name, kind = %target.kind, "this consumer does not deliver the namespace's target kind; its queues are not consumed");
                    false
                }
                _ => true,
            })
            .collect();
        let settings = DeliverySettings {
            apply_timeout: options.apply_timeout(),
        };
        let deliverer = Arc::new(Deliverer::new(targets, clients, settings));
        let backends = connect_backends(options, &namespaces).await?;
        let mut workers = Vec::new();
        for namespace in namespaces {
            let namespace = Arc::new(namespace);
            let default_target = namespace.default_target.as_ref().map(|t| TargetSpec {
                kind: t.kind.clone(),
                settings_json: t.settings_json.clone(),
            });
            for config in &namespace.queues {
                let spec = QueueSpec::new(&namespace.name, &config.name, &config.dlq)
                    .with_longest_wait(namespace.longest_wait());
                let queue = backends
                    .queue(queue_backend(config.backend), spec)
                    .context("no client for the queue's backend")?;
                if options.provision {
                    queue
                        .provision()
                        .await
                        .with_context(|| format!("provisioning namespace '{}'", namespace.name))?;
                }
                let context = |queue: Arc<dyn Queue>| QueueContext {
                    namespace: Arc::clone(&namespace),
                    metrics: Arc::new(QueueMetrics::new(&namespace.name, &queue.spec().name)),
                    queue,
                    default_target: default_target.clone(),
                    in_flight: Arc::new(Semaphore::new(options.max_in_flight as usize)),
                    held: Arc::new(Semaphore::new(options.max_held as usize)),
                };
                let worker = |context, role| Worker {
                    context,
                    deliverer: Arc::clone(&deliverer),
                    grace: options.shutdown_grace(),
                    role,
                };
                // A Kafka queue's delay tiers are read alongside it, each by a worker that
                // moves entries on as they come due.
                for tier in queue.delay_tiers() {
                    let route = TierRoute {
                        home: Arc::clone(&queue),
                        wait: tier.wait,
                    };
                    workers.push(worker(context(tier.queue), Role::Forward(route)));
                }
                workers.push(worker(context(Arc::clone(&queue)), Role::Deliver));
            }
        }
        Ok(Self { workers, deliverer })
    }

    /// The queues this consumer reads, as `namespace/queue`.
    pub fn queues(&self) -> Vec<String> {
        self.workers
            .iter()
            .map(|w| {
                format!(
                    "{}/{}",
                    w.context.namespace.name,
                    w.context.queue.spec().name
                )
            })
            .collect()
    }

    pub fn deliverer(&self) -> &Arc<Deliverer> {
        &self.deliverer
    }

    /// Runs every worker until `shutdown` is cancelled, then waits for each to finish its
    /// entries in progress (or hand them back) and close its queue.
    pub async fn run(self, shutdown: CancellationToken) {
        let tasks = TaskTracker::new();
        for worker in self.workers {
            tasks.spawn(worker.run(shutdown.clone()));
        }
        tasks.close();
        tasks.wait().await;
    }

    /// Runs in the background; the handle stops it.
    pub fn spawn(self) -> ConsumerHandle {
        let shutdown = CancellationToken::new();
        let deliverer = Arc::clone(&self.deliverer);
        let task = tokio::spawn(self.run(shutdown.clone()));
        ConsumerHandle {
            shutdown,
            task,
            deliverer,
        }
    }
}

/// A consumer running in the background.
#[derive(Debug)]
pub struct ConsumerHandle {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    deliverer: Arc<Deliverer>,
}

impl ConsumerHandle {
    /// The running consumer's deliverer, for its totals.
    pub fn deliverer(&self) -> &Arc<Deliverer> {
        &self.deliverer
    }

    /// Stops receiving, finishes or hands back the entries in progress, and waits until done.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        let _ = self.task.await;
    }
}

/// A namespace that delivers to CQL or keeps claim checks there needs CQL nodes: better refused
/// at start-up than found out entry by entry.
fn check_clusters(options: &ConsumerOptions, namespaces: &[Namespace]) -> anyhow::Result<()> {
    if !options.cql_nodes.is_empty() {
        return Ok(());
    }
    for ns in namespaces {
        let cql_target = ns.default_target.as_ref().is_some_and(|t| t.kind == "cql");
        if cql_target || ns.durable_storage.is_some() {
            anyhow::bail!(
                "namespace '{}' needs CQL (a cql default target or durable storage) but no CQL nodes are set; pass --cql-nodes or WAL_CQL_NODES",
                ns.name
            );
        }
    }
    Ok(())
}

/// The backend clients the namespaces' queues need, with the consumer's settings.
async fn connect_backends(
    options: &ConsumerOptions,
    namespaces: &[Namespace],
) -> anyhow::Result<Backends> {
    let uses = |backend| {
        namespaces
            .iter()
            .any(|ns| ns.queues.iter().any(|q| q.backend == backend))
    };
    let kafka = uses(Backend::Kafka).then(|| KafkaSettings::new(&options.kafka_bootstrap));
    let sqs = uses(Backend::Sqs).then(|| SqsSettings {
        delay_step: Duration::from_secs(options.sqs_delay_step_secs),
        ..match &options.sqs_endpoint {
            Some(endpoint) => SqsSettings::local(endpoint),
            None => SqsSettings::aws(&options.sqs_region),
        }
    });
    Backends::connect(kafka, sqs)
        .await
        .context("configuring Kafka")
}

/// The queue layer's name for a namespace's backend.
fn queue_backend(backend: Backend) -> QueueBackend {
    match backend {
        Backend::Kafka => QueueBackend::Kafka,
        Backend::Sqs => QueueBackend::Sqs,
    }
}
