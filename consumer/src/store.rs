//! One further store of a namespace (an entry of its `destinations`), as the reader that
//! delivers to it sees it. Each store reads the namespace's topics with a consumer group of its
//! own (`<prefix><topic>.destination-<name>`), so a store that is down holds back neither the
//! namespace's target nor another store: its entries wait on the topic, held by its breaker.
//!
//! What differs from the namespace's own target, and why (as for a region, see `replica`):
//! - every entry goes to the store's target, whatever target the write named;
//! - a key's entries go one at a time, in queue order, and a retryable failure is retried in
//!   place: a retry copy on the topic would reach every destination's reader, and a cache or a
//!   topic keeps no write times to put a late copy behind a newer write;
//! - entries wait for their deliver-at in memory, never parked on a delay tier (a parked copy
//!   would come back to every reader);
//! - a DLQ copy names the store (`Entry::destination`), so a redrive reaches it alone; a copy
//!   naming another destination, a region's heartbeat or copy, and a two-phase commit marker
//!   (its items name their own targets) are acknowledged here without being applied.

use std::sync::Arc;

use wal_namespaces::{DestinationConfig, Namespace};
use wal_queue::Reader;
use wal_queue::entry::{Body, Entry, Target as TargetSpec};

use crate::lanes::KeyLanes;

#[derive(Debug)]
pub struct Store {
    /// The destination's name in the namespace's config.
    pub name: String,
    pub target: TargetSpec,
    pub reader: Reader,
    pub lanes: Arc<KeyLanes>,
}

impl Store {
    /// The stores `namespace` delivers to besides its own target.
    pub fn of(namespace: &Namespace) -> Vec<Store> {
        namespace.destinations.iter().map(Store::new).collect()
    }

    pub fn new(config: &DestinationConfig) -> Self {
        Self {
            name: config.name.clone(),
            target: config.target.entry_target(),
            reader: Reader::of_destination(config),
            lanes: Arc::default(),
        }
    }

    /// Whether this store applies `entry`: every written entry and every copy made for it. An
    /// unmarked copy (a retry or a redrive, `attempt` or `redrives` above 0) was made by a
    /// build before destinations, for the namespace's own target: the store had the original.
    pub fn applies(&self, entry: &Entry) -> bool {
        let written = entry.destination.is_empty()
            && entry.destination_region.is_empty()
            && entry.attempt == 0
            && entry.redrives == 0;
        let platform_own = entry.heartbeat || matches!(entry.body, Some(Body::Transaction(_)));
        !platform_own && (written || entry.destination == self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Store {
        Store::new(&DestinationConfig {
            name: "cache".to_owned(),
            target: wal_namespaces::TargetConfig {
                kind: wal_targets::Kind::Cache,
                settings: serde_json::Map::new(),
                settings_json: "{}".to_owned(),
            },
            start_from: wal_targets::region::StartFrom::Now,
        })
    }

    #[test]
    fn a_store_applies_written_entries_and_its_own_copies_only() {
        let store = store();
        let written = Entry::default();
        assert!(store.applies(&written));
        let mine = Entry {
            destination: "cache".to_owned(),
            attempt: 5,
            redrives: 1,
            ..Entry::default()
        };
        assert!(store.applies(&mine), "its own DLQ copy, redriven");
        for other in [
            Entry {
                destination: "default".to_owned(),
                ..Entry::default()
            },
            Entry {
                destination: "events".to_owned(),
                ..Entry::default()
            },
            Entry {
                destination_region: "eu-west-1".to_owned(),
                ..Entry::default()
            },
            Entry {
                heartbeat: true,
                ..Entry::default()
            },
            // Unmarked copies, from a build before destinations: the namespace target's.
            Entry {
                attempt: 1,
                ..Entry::default()
            },
            Entry {
                redrives: 1,
                ..Entry::default()
            },
            Entry {
                body: Some(Body::Transaction(Default::default())),
                ..Entry::default()
            },
        ] {
            assert!(!store.applies(&other), "{other:?}");
        }
    }

    #[test]
    fn a_store_reads_with_a_group_of_its_own_from_where_it_says() {
        let reader = store().reader;
        assert_eq!(reader.name, "destination-cache");
        assert!(!reader.from_oldest);
    }
}
