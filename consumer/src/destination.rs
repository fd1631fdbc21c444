//! A destination: where one crew delivers what it reads from a namespace's queues. A namespace
//! is read for each of its destinations with a position of its own, so a slow or dead one holds
//! back no other:
//! - [`Destination::Targets`], the namespace's own targets (each entry's, or the namespace's
//!   default), read by the namespace's consumer group. A failed entry's retry copy goes back on
//!   the queue, and entries due later wait on the queue's delay tiers.
//! - [`Destination::Region`], one region of a replicated namespace (see `replica`), read by a
//!   group of its own. A key's entries go one at a time, failures are retried in place, and
//!   entries wait for their deliver-at in memory.
//! - [`Destination::Store`], one further store of the namespace's `destinations` (see `store`),
//!   read by a group of its own, delivered to as a region is.
//!
//! Every copy a destination puts on the queue or its DLQ (a retry, a park, a dead letter) names
//! that destination, and every other destination's reader skips it: each had its own.
//!
//! Whatever differs between them is asked of the destination here, so the crew, the worker and
//! delivery hold no case of their own.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use wal_apply::TargetRegistry;
use wal_namespaces::{DEFAULT_DESTINATION, Namespace};
use wal_queue::entry::{Entry, Target as TargetSpec};
use wal_queue::{Queue, Reader};
use wal_targets::region::same_region;

use crate::lanes::Turn;
use crate::replica::Replica;
use crate::store::Store;

#[derive(Debug)]
pub enum Destination {
    Targets,
    Region(Box<Replica>),
    Store(Box<Store>),
}

impl Destination {
    /// The destinations of `namespace` that a consumer of region `local` delivers to, when it
    /// replicates only to the regions `only` (every region when empty).
    /// Its further stores come with them, on every consumer of the namespace.
    pub fn of(namespace: &Namespace, local: &str, only: &[String]) -> Vec<Destination> {
        let stores = Store::of(namespace)
            .into_iter()
            .map(|store| Destination::Store(Box::new(store)));
        if !namespace.replicated() {
            return std::iter::once(Destination::Targets)
                .chain(stores)
                .collect();
        }
        let regions: Vec<Destination> = Replica::of(namespace, local)
            .into_iter()
            .filter(|r| only.is_empty() || only.iter().any(|o| same_region(o, &r.region)))
            .map(|replica| Destination::Region(Box::new(replica)))
            .collect();
        if regions.is_empty() {
            tracing::warn!(namespace = %namespace.name, region = %local, ?only, "the namespace replicates to no region this consumer serves; only its further stores are read");
        }
        regions.into_iter().chain(stores).collect()
    }

    /// The destination region, for a region.
    pub fn region(&self) -> Option<&Replica> {
        match self {
            Self::Region(replica) => Some(replica),
            Self::Targets | Self::Store(_) => None,
        }
    }

    /// The store, for a further store.
    pub fn store(&self) -> Option<&Store> {
        match self {
            Self::Store(store) => Some(store),
            Self::Targets | Self::Region(_) => None,
        }
    }

    /// The destination's name, as copies made for it carry it: `default`, the store's name, or
    /// `region-<region>`.
    pub fn name(&self) -> String {
        match self {
            Self::Targets => DEFAULT_DESTINATION.to_owned(),
            Self::Region(replica) => wal_namespaces::region_destination(&replica.region),
            Self::Store(store) => store.name.clone(),
        }
    }

    /// The label a destination's series carry beside the namespace's (none for the namespace's
    /// own target): `("region", region)` or `("destination", store)`.
    pub fn series_label(&self) -> Option<(&'static str, &str)> {
        match self {
            Self::Targets => None,
            Self::Region(replica) => Some(("region", replica.region.as_str())),
            Self::Store(store) => Some(("destination", store.name.as_str())),
        }
    }

    /// How `name` (a namespace or a queue) is called when read for this destination: as it is,
    /// `<name> to <region>` or `<name> to store <store>`.
    pub fn label(&self, name: &str) -> String {
        match self {
            Self::Targets => name.to_owned(),
            Self::Region(replica) => format!("{name} to {}", replica.region),
            // Apart from a region's label, whatever the store is called.
            Self::Store(store) => format!("{name} to store {}", store.name),
        }
    }

    /// Who reads the queues: `None` is the namespace's own consumer group.
    pub fn reader(&self) -> Option<Reader> {
        match self {
            Self::Targets => None,
            Self::Region(replica) => Some(replica.reader()),
            Self::Store(store) => Some(store.reader.clone()),
        }
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
            Self::Store(store) => Some(&store.target),
        }
    }

    /// Whether `entry` is for this destination: every written entry, and the copies made for
    /// it (a retry, a park, a DLQ copy redriven); a copy for another destination alone is
    /// acknowledged without being applied.
    pub fn takes(&self, entry: &Entry) -> bool {
        match self {
            Self::Targets => {
                entry.destination.is_empty() || entry.destination == DEFAULT_DESTINATION
            }
            Self::Region(replica) => entry.destination.is_empty() && replica.applies(entry),
            Self::Store(store) => store.applies(entry),
        }
    }

    /// Whether the namespace's archive is written by this destination's reader: only by the
    /// namespace's own target's (or its regions'), so a further store adds no archive copy.
    pub fn archives(&self) -> bool {
        !matches!(self, Self::Store(_))
    }

    /// Whether a retryable failure is tried again in place, keeping the key's later entries
    /// behind it, instead of by a retry copy on the queue.
    pub fn retries_in_place(&self) -> bool {
        matches!(self, Self::Region(_) | Self::Store(_))
    }

    /// `entry`'s turn among its key's entries, for a destination that applies a key's entries
    /// one at a time in queue order.
    pub fn turn(&self, entry: &Entry) -> Option<Turn> {
        match self {
            Self::Targets => None,
            Self::Region(replica) => Some(replica.lanes.join(&entry.key)),
            Self::Store(store) => Some(store.lanes.join(&entry.key)),
        }
    }

    /// Records `entry` applied.
    pub fn applied(&self, entry: &Entry) {
        if let Some(replica) = self.region() {
            replica.applied(entry);
        }
    }

    /// Names this destination on a DLQ copy, so a redrive goes back to it alone.
    pub fn mark_dead_letter(&self, dead: &mut Entry) {
        match self {
            Self::Region(replica) => dead.destination_region = replica.region.clone(),
            Self::Targets | Self::Store(_) => self.mark(dead),
        }
    }

    /// Names this destination on a copy it puts back on the queue (a retry, a park), so the
    /// other destinations' readers skip it. A region's reader makes no such copies.
    pub fn mark(&self, copy: &mut Entry) {
        if !matches!(self, Self::Region(_)) {
            copy.destination = self.name();
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
