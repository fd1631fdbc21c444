//! A destination: where one crew delivers what it reads from a namespace's queues. A namespace
//! is read for each of its destinations with a position of its own, so a slow or dead one holds
//! back no other:
//! - [`Destination::Targets`], the namespace's own targets (each entry's, or the namespace's
//!   default), read by the namespace's consumer group. A failed entry's retry copy goes back on
//!   the queue, and entries due later wait on the queue's delay tiers.
//! - [`Destination::Region`], one region of a replicated namespace (see `replica`), read by a
//!   group of its own. A key's entries go one at a time, failures are retried in place, and
//!   entries wait for their deliver-at in memory.
//!
//! Whatever differs between them is asked of the destination here, so the crew, the worker and
//! delivery hold no case of their own.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use wal_apply::TargetRegistry;
use wal_namespaces::Namespace;
use wal_queue::entry::{Entry, Target as TargetSpec};
use wal_queue::{Queue, Reader};
use wal_targets::region::same_region;

use crate::lanes::Turn;
use crate::replica::Replica;

#[derive(Debug)]
pub enum Destination {
    Targets,
    Region(Box<Replica>),
}

impl Destination {
    /// The destinations of `namespace` that a consumer of region `local` delivers to, when it
    /// replicates only to the regions `only` (every region when empty).
    pub fn of(namespace: &Namespace, local: &str, only: &[String]) -> Vec<Destination> {
        if !namespace.replicated() {
            return vec![Destination::Targets];
        }
        let regions: Vec<Destination> = Replica::of(namespace, local)
            .into_iter()
            .filter(|r| only.is_empty() || only.iter().any(|o| same_region(o, &r.region)))
            .map(|replica| Destination::Region(Box::new(replica)))
            .collect();
        if regions.is_empty() {
            tracing::warn!(namespace = %namespace.name, region = %local, ?only, "the namespace replicates to no region this consumer serves; nothing is read");
        }
        regions
    }

    /// The destination region, for a region.
    pub fn region(&self) -> Option<&Replica> {
        match self {
            Self::Targets => None,
            Self::Region(replica) => Some(replica),
        }
    }

    /// How `name` (a namespace or a queue) is called when read for this destination: as it is,
    /// or `<name> to <region>`.
    pub fn label(&self, name: &str) -> String {
        match self {
            Self::Targets => name.to_owned(),
            Self::Region(replica) => format!("{name} to {}", replica.region),
        }
    }

    /// Who reads the queues: `None` is the namespace's own consumer group.
    pub fn reader(&self) -> Option<Reader> {
        self.region().map(Replica::reader)
    }

    /// Whether the queues' delay tiers are read for this destination, so entries due later can
    /// be parked on them. A region's reader never parks: a parked copy would come back to every
    /// region's reader.
    pub fn parks(&self) -> bool {
        matches!(self, Self::Targets)
    }

    /// Where `entry` is applied: its own target or the namespace's `default`; for a region,
    /// that region's writer, whatever the entry names.
    pub fn target<'a>(
        &'a self,
        entry: &'a Entry,
        default: Option<&'a TargetSpec>,
    ) -> Option<&'a TargetSpec> {
        match self {
            Self::Targets => entry.target.as_ref().or(default),
            Self::Region(replica) => Some(&replica.target),
        }
    }

    /// Whether `entry` is for this destination: every entry, except a copy for one other
    /// region alone (a redriven DLQ copy), which is acknowledged without being applied.
    pub fn takes(&self, entry: &Entry) -> bool {
        self.region().is_none_or(|replica| replica.applies(entry))
    }

    /// Whether a retryable failure is tried again in place, keeping the key's later entries
    /// behind it, instead of by a retry copy on the queue.
    pub fn retries_in_place(&self) -> bool {
        matches!(self, Self::Region(_))
    }

    /// `entry`'s turn among its key's entries, for a destination that applies a key's entries
    /// one at a time in queue order.
    pub fn turn(&self, entry: &Entry) -> Option<Turn> {
        self.region().map(|replica| replica.lanes.join(&entry.key))
    }

    /// Records `entry` applied.
    pub fn applied(&self, entry: &Entry) {
        if let Some(replica) = self.region() {
            replica.applied(entry);
        }
    }

    /// Names this destination on a DLQ copy, so a redrive goes back to it alone.
    pub fn mark_dead_letter(&self, dead: &mut Entry) {
        if let Some(replica) = self.region() {
            dead.destination_region = replica.region.clone();
        }
    }

    /// Sets the destination's own gauges from the backlog of a queue read for it: a region's
    /// entries waiting, its lag, and whether its writer answers.
    pub fn report(&self, backlog: u64, started_micros: i64, targets: &TargetRegistry) {
        if let Some(replica) = self.region() {
            let connected = targets
                .breaker(&replica.target)
                .is_none_or(|b| !b.is_open());
            replica.report(backlog, started_micros, connected);
        }
    }

    /// What runs beside a worker of `queue` until `stop`: a region's heartbeats, which keep its
    /// lag readable while no write comes; nothing for the namespace's targets.
    pub async fn beside(self: Arc<Self>, queue: Arc<dyn Queue>, stop: CancellationToken) {
        if let Self::Region(replica) = &*self {
            replica.beat(queue, stop).await;
        }
    }
}
