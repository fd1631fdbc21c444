//! The consumer as a whole: a crew of workers per namespace, sharing the target clients, run
//! until shutdown. Following a feed, it adds, replaces and stops crews as namespaces are added,
//! changed and removed, without touching the others.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wal_clusters::Backends;
use wal_namespaces::Namespace;
use wal_namespaces::feed::{Directives, Feed, SetChanges};
use wal_queue::kafka::{self, CloseMark};
use wal_targets::Kind;

use crate::crew::{Crew, Plan, RunningCrew};
use crate::delivery::Deliverer;
use crate::settings::ConsumerSettings;
use wal_apply::TargetRegistry;
use wal_apply::applier::Applier;
use wal_apply::clients::Clients;

/// How long a consumer that stops waits for its Kafka consumers to leave their groups. Leaving
/// takes a broker round trip; the bound is for brokers that do not answer.
const LEAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug)]
pub struct Consumer {
    settings: ConsumerSettings,
    deliverer: Arc<Deliverer>,
    /// Grows as namespaces on another backend arrive; clients are never remade.
    backends: Backends,
    /// Built by `start`, started by `run`.
    crews: Vec<Crew>,
    /// The namespaces served since the last start or reload, as configured.
    served: Vec<Namespace>,
    /// An operator's pauses and cancellations, from the control plane's feed (none from a
    /// folder).
    directives: watch::Sender<Directives>,
}

impl Consumer {
    /// Whether this consumer serves `namespace`: every one, or those naming its stack.
    fn serves_stack(&self, namespace: &Namespace) -> bool {
        match &self.settings.stack {
            None => true,
            Some(stack) => namespace.consumer.stack.as_ref() == Some(stack),
        }
    }

    /// Connects the namespaces' queues. A namespace whose default target kind this build does not
    /// deliver is left alone (its entries stay on the queue), with a warning.
    pub async fn start(
        settings: &ConsumerSettings,
        namespaces: Vec<Namespace>,
    ) -> anyhow::Result<Self> {
        let clients = Clients::new(settings.clients.clone())?;
        let clients = Arc::new(clients.with_clusters(settings.clusters.clone()));
        let targets = TargetRegistry::builtin(Arc::clone(&clients));
        let applier = Applier::new(targets, clients, settings.apply_timeout);
        let mut consumer = Self {
            settings: settings.clone(),
            deliverer: Arc::new(Deliverer::new(applier)),
            backends: Backends::default(),
            crews: Vec::new(),
            served: Vec::new(),
            directives: watch::Sender::new(Directives::default()),
        };
        let (crews, _, _) = consumer.build(&BTreeMap::new(), namespaces).await?;
        consumer.crews = crews;
        Ok(consumer)
    }

    /// Crews for what `next` needs that is not running as it is (`running`: each running
    /// crew's key and namespace), how `next` differs from the namespaces running, and the keys of
    /// the running crews to stop. Fails, changing nothing that runs, when a namespace cannot be
    /// served here.
    async fn build(
        &mut self,
        running: &BTreeMap<String, Arc<Namespace>>,
        next: Vec<Namespace>,
    ) -> anyhow::Result<(Vec<Crew>, SetChanges, Vec<String>)> {
        // Only this consumer's namespaces: another stack's may name clusters its map lacks.
        let mine: Vec<Namespace> = next
            .into_iter()
            .filter(|ns| self.serves_stack(ns))
            .collect();
        self.settings.clusters.check(&mine)?;
        check_cql(&self.settings, &mine)?;
        let next: Vec<Namespace> = mine
            .into_iter()
            .filter_map(|mut ns| {
                let knows = |kind: Kind| self.deliverer.targets().knows(kind.name());
                if let Some(target) = ns.default_target.as_ref().filter(|t| !knows(t.kind)) {
                    tracing::warn!(namespace = %ns.name, kind = %target.kind, "this consumer does not deliver the namespace's target kind; its queues are not consumed");
                    return None;
                }
                // A store of a kind this build lacks is left out alone; the others read on.
                ns.destinations.retain(|d| {
                    let known = knows(d.target.kind);
                    if !known {
                        tracing::warn!(namespace = %ns.name, destination = %d.name, kind = %d.target.kind, "this consumer does not deliver the destination's target kind; it is not read");
                    }
                    known
                });
                Some(ns)
            })
            .collect();
        // By namespace, for the feed's report; crews are compared by their own plans below.
        let changes = SetChanges::between(&self.served, &next);
        self.backends = connect_backends(&self.settings, &self.backends, &next).await?;
        let next_namespaces = next.clone();
        let plans: Vec<Plan> = next
            .into_iter()
            .flat_map(|ns| Plan::of(ns, &self.settings.region, &self.settings.replicate_to))
            .filter(|plan| {
                let only = &self.settings.destinations;
                only.is_empty() || only.contains(&plan.destination.name())
            })
            .collect();
        for only in &self.settings.destinations {
            if !plans.iter().any(|p| &p.destination.name() == only) {
                tracing::warn!(destination = %only, "--destinations names a destination no namespace of this consumer has; nothing is read for it");
            }
        }
        let unchanged = |plan: &Plan| running.get(&plan.key) == Some(&plan.namespace);
        let leaving = running
            .keys()
            .filter(|key| !plans.iter().any(|p| p.key == **key && unchanged(p)))
            .cloned()
            .collect();
        let mut crews = Vec::new();
        for plan in plans {
            if !unchanged(&plan) {
                let directives = self.directives.subscribe();
                let crew = Crew::build(
                    &self.settings,
                    &self.backends,
                    &self.deliverer,
                    plan,
                    &directives,
                );
                crews.push(crew.await?);
            }
        }
        self.served = next_namespaces;
        Ok((crews, changes, leaving))
    }

    /// The queues this consumer reads, as `namespace/queue` (`namespace/queue to region` for a
    /// destination region's reader).
    pub fn queues(&self) -> Vec<String> {
        self.crews
            .iter()
            .flat_map(|crew| &crew.workers)
            .map(|w| {
                let queue = w.context.destination.label(&w.context.queue.spec().name);
                format!("{}/{queue}", w.context.namespace.name)
            })
            .collect()
    }

    pub fn deliverer(&self) -> &Arc<Deliverer> {
        &self.deliverer
    }

    /// Runs every worker until `shutdown` is cancelled, then waits for each to finish its
    /// entries in progress (or hand them back) and close its queue.
    pub async fn run(self, shutdown: CancellationToken) {
        self.run_following(None, shutdown).await;
    }

    /// As [`Consumer::run`], applying each new set of namespaces from `feed` while it runs.
    pub async fn run_following(mut self, mut feed: Option<Feed>, shutdown: CancellationToken) {
        // The pauses and cancellations in force when the feed was opened hold from the first
        // entry: no crew starts before it has them.
        if let Some(feed) = &feed {
            self.directives
                .send_replace(feed.directives().borrow().clone());
        }
        let mut running: BTreeMap<String, RunningCrew> = std::mem::take(&mut self.crews)
            .into_iter()
            .map(|crew| (crew.key.clone(), crew.start(&shutdown)))
            .collect();
        if let Some(feed) = feed.as_mut() {
            // Pauses and cancellations change apart from the namespaces: the crews follow them
            // as they are, with no crew rebuilt.
            let mut from = feed.directives();
            let into = self.directives.clone();
            let following = shutdown.clone();
            tokio::spawn(async move {
                loop {
                    into.send_replace(from.borrow_and_update().clone());
                    tokio::select! {
                        changed = from.changed() => if changed.is_err() { break },
                        () = following.cancelled() => break,
                    }
                }
            });
            loop {
                let next = tokio::select! {
                    () = shutdown.cancelled() => break,
                    next = feed.next() => next,
                };
                match self.reload(&mut running, next.clone(), &shutdown).await {
                    Ok(changes) => feed.applied(next, &changes.to_string()),
                    Err(error) => feed.refused(&format!("{error:#}")),
                }
            }
        }
        shutdown.cancelled().await;
        for crew in running.values() {
            crew.stopped().await;
        }
        // The workers' queues are gone, their Kafka consumers closing apart: time for those to
        // leave their groups, so the next consumer of a group need not wait out a session.
        kafka::closes_finished(CloseMark::ALL, LEAVE_WAIT).await;
    }

    /// Replaces the crews of changed namespaces, stops those of removed ones and starts those of
    /// added ones. A replaced crew stops first (its entries in progress finish or go back, its
    /// acknowledgements are committed), so its queue's new reader picks up where it left off.
    async fn reload(
        &mut self,
        running: &mut BTreeMap<String, RunningCrew>,
        next: Vec<Namespace>,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<SetChanges> {
        let current: BTreeMap<String, Arc<Namespace>> = running
            .iter()
            .map(|(key, crew)| (key.clone(), Arc::clone(&crew.namespace)))
            .collect();
        // Building (provisioning, connecting) may wait on a broker; shutdown does not wait for
        // it. Nothing runs yet, so a build cut short changes nothing.
        let (crews, changes, leaving) = tokio::select! {
            () = shutdown.cancelled() => anyhow::bail!("shutting down"),
            built = self.build(&current, next) => built?,
        };
        let leaving: Vec<RunningCrew> = leaving
            .iter()
            .filter_map(|key| running.remove(key))
            .collect();
        if !leaving.is_empty() || !crews.is_empty() {
            let stopped: Vec<&str> = leaving.iter().map(|c| c.key.as_str()).collect();
            let started: Vec<&str> = crews.iter().map(|c| c.key.as_str()).collect();
            tracing::info!(?stopped, ?started, "crews replaced");
        }
        // The replaced readers leave their groups before their successors join them: those
        // whose entries finished within the grace (a reader still holding one closes when its
        // entry ends). Shutdown does not wait for this: it waits for every close itself.
        let closing = CloseMark::now();
        futures::future::join_all(leaving.into_iter().map(RunningCrew::stop)).await;
        tokio::select! {
            () = kafka::closes_finished(closing, LEAVE_WAIT) => {}
            () = shutdown.cancelled() => {}
        }
        for crew in crews {
            running.insert(crew.key.clone(), crew.start(shutdown));
        }
        Ok(changes)
    }

    /// Runs in the background; the handle stops it.
    pub fn spawn(self) -> ConsumerHandle {
        self.spawn_following(None)
    }

    /// Runs in the background following `feed`; the handle stops it.
    pub fn spawn_following(self, feed: Option<Feed>) -> ConsumerHandle {
        let shutdown = CancellationToken::new();
        let deliverer = Arc::clone(&self.deliverer);
        let directives = self.directives.subscribe();
        let task = tokio::spawn(self.run_following(feed, shutdown.clone()));
        ConsumerHandle {
            shutdown,
            task,
            deliverer,
            directives,
        }
    }
}

/// A consumer running in the background.
#[derive(Debug)]
pub struct ConsumerHandle {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    deliverer: Arc<Deliverer>,
    directives: watch::Receiver<Directives>,
}

impl ConsumerHandle {
    /// The running consumer's deliverer, for its totals.
    pub fn deliverer(&self) -> &Arc<Deliverer> {
        &self.deliverer
    }

    /// The operator's pauses and cancellations the running consumer acts on, as it last heard
    /// them.
    pub fn directives(&self) -> watch::Receiver<Directives> {
        self.directives.clone()
    }

    /// Stops receiving, finishes or hands back the entries in progress, and waits until done.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        let _ = self.task.await;
    }
}

/// A namespace that delivers to CQL or keeps claim checks there needs CQL nodes: better refused
/// at start-up (or reload) than found out entry by entry.
fn check_cql(settings: &ConsumerSettings, namespaces: &[Namespace]) -> anyhow::Result<()> {
    for ns in namespaces {
        let stores = ns.destinations.iter().map(|d| &d.target);
        let cql_target = ns
            .default_target
            .iter()
            .chain(stores)
            .any(|t| matches!(t.kind, Kind::Cql | Kind::Index));
        let shard = ns.durable_storage.as_ref().map(|d| d.shard.as_deref());
        let shard_nodes = shard.and_then(|shard| settings.clusters.cql(shard));
        let no_shard_nodes =
            shard.is_some() && shard_nodes.is_none_or(|s| s.contact_points.is_empty());
        // cql targets write on the map's default shard (the --cql-nodes flag's, without a file).
        let target_nodes = settings
            .clusters
            .cql(None)
            .is_some_and(|s| !s.contact_points.is_empty());
        if (cql_target && !target_nodes) || no_shard_nodes {
            anyhow::bail!(
                "namespace '{}' needs CQL (a cql default target, a cql or index destination, or durable storage) but no CQL nodes are set; pass --cql-nodes or WAL_CQL_NODES, or name its shard's contact points in the cluster map",
                ns.name
            );
        }
    }
    Ok(())
}

/// `connected` plus the backend clients the namespaces' queues need that it lacks.
async fn connect_backends(
    settings: &ConsumerSettings,
    connected: &Backends,
    namespaces: &[Namespace],
) -> anyhow::Result<Backends> {
    connected
        .with_missing(&settings.clusters, namespaces)
        .await
        .context("configuring Kafka")
}
