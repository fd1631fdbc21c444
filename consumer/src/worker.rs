//! A worker: one namespace queue's (or delay tier's) receive loop. It takes entries while it has
//! room (a free in-flight slot), hands each to its own task, and on shutdown stops receiving,
//! lets the tasks finish or hand their entries back, and closes the queue (a final commit).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use wal_queue::{Delivery, QueueError};
use wal_runtime::outage::REMINDER_EVERY;

use crate::delivery::{Deliverer, QueueContext};
use crate::tier::{self, TierRoute};

/// The pause after a failed receive, so an outage or a missing queue is not a busy loop. (A
/// Kafka queue's receive never fails for its brokers' absence: librdkafka reconnects by itself,
/// and the queue reads on through its errors.)
const RECEIVE_RETRY: Duration = Duration::from_secs(1);
/// How often the queue's backlog (Kafka lag, SQS visible messages) is read for the metric.
const BACKLOG_EVERY: Duration = Duration::from_secs(15);

#[derive(Debug)]
pub struct Worker {
    pub context: QueueContext,
    pub deliverer: Arc<Deliverer>,
    /// How long shutdown waits for in-flight entries before closing the queue regardless.
    pub grace: Duration,
    pub role: Role,
}

/// What a worker does with what it receives.
#[derive(Debug, Clone)]
pub enum Role {
    /// A namespace queue: deliver each entry to its target.
    Deliver,
    /// A delay tier: move each entry on when the tier's wait is over.
    Forward(TierRoute),
}

/// Reads the queue's backlog into its gauge until shutdown, and into its destination's own
/// gauges (see `Destination::report`).
async fn report_backlog(
    context: QueueContext,
    deliverer: Arc<Deliverer>,
    shutdown: CancellationToken,
) {
    let (queue, metrics) = (context.queue, context.metrics);
    loop {
        tokio::select! {
            () = tokio::time::sleep(BACKLOG_EVERY) => {}
            () = shutdown.cancelled() => return,
        }
        match queue.backlog().await {
            Ok(Some(backlog)) => {
                metrics.backlog.set(backlog as f64);
                context
                    .destination
                    .report(backlog, context.started_micros, deliverer.targets());
            }
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, "reading the backlog failed"),
        }
        match queue.parked().await {
            Ok(Some(parked)) => metrics.parked.set(parked as f64),
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, "reading the parked count failed"),
        }
    }
}

/// Receives the service refused in a row (a missing queue, a denied credential). They fail the
/// same way every second until someone acts, so the first is a WARN, then one every
/// [`REMINDER_EVERY`], and the end of the streak an INFO; the rest are counted.
#[derive(Debug, Default)]
struct Refusals {
    count: u64,
    warned: Option<Instant>,
}

impl Refusals {
    fn refused(&mut self, error: &QueueError) {
        self.count += 1;
        match self.warned {
            Some(warned) if warned.elapsed() < REMINDER_EVERY => {
                tracing::debug!(%error, failures = self.count, "receive refused");
            }
            _ => {
                self.warned = Some(Instant::now());
                tracing::warn!(%error, failures = self.count, "receive refused; trying again every second");
            }
        }
    }

    fn received(&mut self, queue: &str) {
        if self.count > 0 {
            tracing::info!(queue, failures = self.count, "receive works again");
            *self = Self::default();
        }
    }
}

/// Pauses the queue until no entry of it waits for an unavailable target and no operator's
/// pause holds its destination, then resumes it. False at shutdown.
async fn hold_queue(context: &QueueContext, shutdown: &CancellationToken) -> bool {
    let queue = &context.queue;
    match context.pause.holding() {
        Some(pause) => {
            tracing::info!(queue = %queue.spec().name, destination = %context.destination.name(), paused_by = %pause.paused_by, reason = %pause.reason, "holding the queue: an operator paused its delivery");
        }
        None => {
            tracing::info!(queue = %queue.spec().name, "holding the queue: its entries wait for an unavailable target");
        }
    }
    if let Err(error) = queue.pause().await {
        tracing::warn!(%error, "pausing the queue failed; it reads ahead while held");
    }
    let released = loop {
        if !context.holds.released(shutdown).await || !context.pause.resumed(shutdown).await {
            break false;
        }
        // Both at once: a new hold or pause may have come while waiting for the other.
        if !context.holds.any() && !context.pause.paused() {
            break true;
        }
    };
    if let Err(error) = queue.resume().await {
        tracing::warn!(%error, "resuming the queue failed");
    }
    if released {
        tracing::info!(queue = %queue.spec().name, "the queue reads on");
    }
    released
}

impl Worker {
    pub async fn run(self, shutdown: CancellationToken) {
        let queue = Arc::clone(&self.context.queue);
        let namespace = &self.context.namespace;
        let metrics = Arc::clone(&self.context.metrics);
        let permits = Arc::clone(&self.context.in_flight);
        let tasks = TaskTracker::new();
        let per_poll =
            usize::try_from(namespace.consumer.max_messages_per_poll).unwrap_or(usize::MAX);
        tracing::info!(namespace = %namespace.name, queue = %queue.spec().name, backend = %queue.backend(), "worker started");
        tasks.spawn(report_backlog(
            self.context.clone(),
            Arc::clone(&self.deliverer),
            shutdown.clone(),
        ));
        tasks.spawn(
            Arc::clone(&self.context.destination).beside(Arc::clone(&queue), shutdown.clone()),
        );
        let mut refusals = Refusals::default();
        loop {
            // While entries wait for an unavailable target, take no more (see `hold`).
            let held = self.context.holds.any() || self.context.pause.paused();
            if held && !hold_queue(&self.context, &shutdown).await {
                break;
            }
            // Wait for room before receiving, so nothing is taken that cannot be started.
            let first = tokio::select! {
                permit = Arc::clone(&permits).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
                () = shutdown.cancelled() => break,
            };
            // At saturation every finished entry frees one slot and wakes this loop. One yield
            // first lets the entries finishing alongside it free theirs too, so one receive
            // takes several entries rather than one each.
            if permits.available_permits() == 0 {
                tokio::task::yield_now().await;
            }
            let room = (permits.available_permits() + 1).min(per_poll).max(1);
            let received = tokio::select! {
                received = queue.receive(room, namespace.consumer.poll_wait) => received,
                () = shutdown.cancelled() => break,
            };
            let deliveries = match received {
                Ok(deliveries) => {
                    refusals.received(&queue.spec().name);
                    deliveries
                }
                Err(error) => {
                    metrics.queue_errors.increment(1);
                    drop(first);
                    if error.retryable {
                        // The queue's outage logs the loss and the return once each.
                        tracing::debug!(%error, "receive failed; the service is away");
                    } else {
                        refusals.refused(&error);
                    }
                    tokio::select! {
                        () = tokio::time::sleep(RECEIVE_RETRY) => continue,
                        () = shutdown.cancelled() => break,
                    }
                }
            };
            let mut first = Some(first);
            for delivery in deliveries {
                let permit = match first.take() {
                    Some(permit) => permit,
                    // Room was counted before receiving; a held entry taking its slot back may
                    // have used it since, so this may wait (for at most `room` deliveries).
                    None => match Arc::clone(&permits).acquire_owned().await {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                };
                self.start(&tasks, delivery, permit, &shutdown);
            }
        }
        self.stop(tasks).await;
        tracing::info!(namespace = %namespace.name, queue = %queue.spec().name, "worker stopped");
    }

    /// Starts one received delivery as a task of its own, holding its in-flight slot until it
    /// ends.
    fn start(
        &self,
        tasks: &TaskTracker,
        delivery: Delivery,
        permit: OwnedSemaphorePermit,
        shutdown: &CancellationToken,
    ) {
        let deliverer = Arc::clone(&self.deliverer);
        let context = self.context.clone();
        let shutdown = shutdown.clone();
        let in_flight = self.context.metrics.in_flight.clone();
        let role = self.role.clone();
        // Where the destination wants it, a key's entries go one at a time, in the order
        // received here.
        let turn = match &delivery.entry {
            Ok(entry) => self.context.destination.turn(entry),
            Err(_) => None,
        };
        in_flight.increment(1.0);
        // Boxed once here, so spawning moves a pointer rather than the whole future.
        tasks.spawn(Box::pin(async move {
            let mut turn = turn;
            if let Some(turn) = &mut turn {
                turn.wait().await;
            }
            match role {
                Role::Deliver => {
                    deliverer
                        .deliver(&context, delivery, Some(permit), &shutdown)
                        .await;
                }
                Role::Forward(route) => {
                    // Boxed, so a held entry's task (the other branch) stays small.
                    Box::pin(tier::forward(&context, &route, delivery, permit, &shutdown)).await;
                }
            }
            in_flight.decrement(1.0);
            drop(turn);
        }));
    }

    /// Lets the entries in progress finish within the grace period, then closes the queue
    /// (committing what was acknowledged).
    async fn stop(&self, tasks: TaskTracker) {
        let queue = &self.context.queue;
        tasks.close();
        if tokio::time::timeout(self.grace, tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(queue = %queue.spec().name, left = tasks.len(), "shutdown grace ran out; unfinished entries will be received again");
        }
        if let Err(error) = queue.close().await {
            tracing::warn!(%error, "closing the queue failed; entries acknowledged since the last commit will be received again");
        }
    }
}
