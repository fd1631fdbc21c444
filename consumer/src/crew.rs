//! A crew: the workers that read a namespace's queues for one destination (with their delay
//! tiers, where the destination parks entries), run under a token of their own so a reload can
//! stop one crew and leave the others reading.

use std::sync::Arc;

use anyhow::Context as _;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use wal_clusters::Backends;
use wal_namespaces::{Namespace, QueueConfig, TargetConfig};
use wal_queue::{Queue, QueueSpec};

use crate::delivery::{Deliverer, QueueContext};
use crate::destination::Destination;
use crate::metrics::QueueMetrics;
use crate::pause::PauseSwitch;
use crate::settings::ConsumerSettings;
use crate::tier::TierRoute;
use crate::worker::{Role, Worker};

/// What one crew reads and for which destination (each destination's crew starts and stops
/// alone, so adding or removing a region by hot reload touches no other region's reader).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The crew's name among the running crews: the namespace's, labelled by its destination.
    pub key: String,
    /// The namespace as the crew sees it: for a region's crew, its region target narrowed to
    /// that region, so a change elsewhere in the target leaves the crew as it is.
    pub namespace: Arc<Namespace>,
    pub destination: Arc<Destination>,
}

impl Plan {
    /// The crews `namespace` needs in a consumer of region `local` that replicates to the
    /// regions `only` (every destination when empty).
    pub fn of(namespace: Namespace, local: &str, only: &[String]) -> Vec<Plan> {
        Destination::of(&namespace, local, only)
            .into_iter()
            .map(|destination| {
                let mut view = namespace.clone();
                if let (Some(target), Some(replica)) =
                    (&mut view.default_target, destination.region())
                {
                    target.settings_json = replica.target.settings_json.clone();
                    target.settings =
                        serde_json::from_str(&target.settings_json).unwrap_or_default();
                }
                // Each crew sees its own destination alone, so adding or changing a store
                // restarts that store's reader and no other.
                view.destinations
                    .retain(|d| destination.store().is_some_and(|s| s.name == d.name));
                if destination.store().is_some() {
                    view.default_target = None;
                }
                Plan {
                    key: destination.label(&namespace.name),
                    namespace: Arc::new(view),
                    destination: Arc::new(destination),
                }
            })
            .collect()
    }
}

/// A crew's workers, built and not yet running.
#[derive(Debug)]
pub struct Crew {
    pub key: String,
    pub namespace: Arc<Namespace>,
    pub workers: Vec<Worker>,
}

/// The handle the destination reads `queue` (of `config`) with: the namespace's own, or one
/// with a position of its own for a destination with a reader of its own; one that does not
/// park never parks an entry on the delay tiers.
fn read_for(
    destination: &Destination,
    backends: &Backends,
    namespace: &Namespace,
    config: &QueueConfig,
    queue: &Arc<dyn Queue>,
) -> anyhow::Result<Arc<dyn Queue>> {
    let Some(reader) = destination.reader() else {
        return Ok(Arc::clone(queue));
    };
    let mut spec = QueueSpec::of(namespace, config).read_by(reader);
    if !destination.parks() {
        spec = spec.with_longest_wait(Duration::ZERO);
    }
    backends
        .queue(config.backend, spec)
        .context("no client for the queue's backend")
}

/// A crew at work.
#[derive(Debug)]
pub struct RunningCrew {
    pub key: String,
    pub namespace: Arc<Namespace>,
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl Crew {
    /// Handles on the namespace's queues (created first with `settings.provision`) and a worker
    /// for each queue, read as the destination reads it, and for each of its delay tiers where
    /// the destination parks entries. `directives`: an operator's pauses and cancellations, as
    /// the control plane says.
    pub async fn build(
        settings: &ConsumerSettings,
        backends: &Backends,
        deliverer: &Arc<Deliverer>,
        plan: Plan,
        directives: &tokio::sync::watch::Receiver<wal_namespaces::feed::Directives>,
    ) -> anyhow::Result<Self> {
        let Plan {
            key,
            namespace,
            destination,
        } = plan;
        let default_target = namespace
            .default_target
            .as_ref()
            .map(TargetConfig::entry_target);
        let mut workers = Vec::new();
        for config in &namespace.queues {
            let queue = backends
                .namespace_queue(&namespace, config)
                .context("no client for the queue's backend")?;
            if settings.provision {
                queue
                    .provision()
                    .await
                    .with_context(|| format!("provisioning namespace '{}'", namespace.name))?;
            }
            let context = |queue: Arc<dyn Queue>| QueueContext {
                namespace: Arc::clone(&namespace),
                metrics: Arc::new(QueueMetrics::new(
                    &namespace.name,
                    &destination.label(&queue.spec().name),
                    destination.series_label(),
                )),
                queue,
                default_target: default_target.clone(),
                in_flight: Arc::new(Semaphore::new(settings.max_in_flight as usize)),
                held: Arc::new(Semaphore::new(settings.max_held as usize)),
                started_micros: 0,
                archive_recorded: Arc::default(),
                holds: Arc::default(),
                destination: Arc::clone(&destination),
                pause: PauseSwitch::new(directives.clone(), &namespace.name, &destination.name()),
                directives: directives.clone(),
            };
            let worker = |context, role| Worker {
                context,
                deliverer: Arc::clone(deliverer),
                grace: settings.shutdown_grace,
                role,
            };
            let read = read_for(&destination, backends, &namespace, config, &queue)?;
            // A Kafka queue's delay tiers are read alongside it, each by a worker that moves
            // entries on as they come due.
            let tiers = if destination.parks() {
                read.delay_tiers()
            } else {
                Vec::new()
            };
            for tier in tiers {
                let route = TierRoute {
                    home: Arc::clone(&read),
                    wait: tier.wait,
                };
                workers.push(worker(context(tier.queue), Role::Forward(route)));
            }
            workers.push(worker(context(read), Role::Deliver));
        }
        Ok(Self {
            key,
            namespace,
            workers,
        })
    }

    /// Starts every worker; they stop when `shutdown` is cancelled or the crew is stopped.
    pub fn start(self, shutdown: &CancellationToken) -> RunningCrew {
        let stop = shutdown.child_token();
        let tasks = TaskTracker::new();
        // Taken now, not when built: a crew this one replaces is stopped before it starts, so
        // every entry written from here on is received by this crew or a later one.
        let started_micros = wal_queue::entry::now_micros();
        for mut worker in self.workers {
            worker.context.started_micros = started_micros;
            tasks.spawn(worker.run(stop.clone()));
        }
        tasks.close();
        RunningCrew {
            key: self.key,
            namespace: self.namespace,
            stop,
            tasks,
        }
    }
}

impl RunningCrew {
    /// Stops receiving, lets the entries in progress finish (or hands them back, within the
    /// shutdown grace) and closes the queues, committing what was acknowledged.
    pub async fn stop(self) {
        self.stop.cancel();
        self.tasks.wait().await;
    }

    /// Waits until every worker has stopped.
    pub async fn stopped(&self) {
        self.tasks.wait().await;
    }
}
