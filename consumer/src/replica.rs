//! One destination region of a replicated namespace (a `region` target), as the reader that
//! replicates to it sees it. Each destination reads the namespace's topic with a consumer group
//! of its own (`<prefix><topic>.region-<name>`), so a region that is down for hours holds back
//! nobody else: its backlog waits on the topic and drains when it is back.
//!
//! What differs from plain delivery, and why:
//! - every entry goes to this region's writer, whatever the entry's own target says (the
//!   producer accepts no other target on a replicated namespace);
//! - the entries of one key go one at a time, in queue order ([`KeyLanes`]), and a retryable
//!   failure is retried in place, after its backoff, instead of being put back on the topic
//!   behind later writes of its key (and in front of every other region's reader);
//! - a DLQ copy names its region (`destination_region`), and an entry naming another region (a
//!   redriven copy) is acknowledged here without being applied;
//! - entries wait for their deliver-at in memory, never parked on a delay tier (a parked copy
//!   would come back to every region's reader).

use std::sync::Arc;

use wal_core::entry::{Entry, Target as TargetSpec};
use wal_core::queue::Reader;
use wal_namespaces::Namespace;
use wal_targets::Kind;
use wal_targets::region::{RegionSettings, StartFrom, same_region};

use crate::lanes::KeyLanes;

#[derive(Debug)]
pub struct Replica {
    pub region: String,
    /// The namespace's region target narrowed to this region alone.
    pub target: TargetSpec,
    pub start_from: StartFrom,
    pub lanes: Arc<KeyLanes>,
}

impl Replica {
    /// The destinations `namespace` replicates to from region `local`; empty when its default
    /// target is not a region target.
    pub fn of(namespace: &Namespace, local: &str) -> Vec<Replica> {
        let Some(target) = namespace
            .default_target
            .as_ref()
            .filter(|_| Self::replicated(namespace))
        else {
            return Vec::new();
        };
        // Checked when the namespace was loaded.
        let Ok(settings) = wal_targets::parse::<RegionSettings>(&target.settings_json) else {
            return Vec::new();
        };
        settings
            .destinations_from(local)
            .into_iter()
            .map(|(region, destination)| Replica {
                target: TargetSpec {
                    kind: Kind::Region.name().to_owned(),
                    settings_json: RegionSettings::only(&region, &destination, settings.start_from)
                        .to_json(),
                },
                region,
                start_from: settings.start_from,
                lanes: Arc::default(),
            })
            .collect()
    }

    /// Whether `namespace` replicates: its default target is a region target.
    pub fn replicated(namespace: &Namespace) -> bool {
        namespace
            .default_target
            .as_ref()
            .is_some_and(|target| target.kind == Kind::Region)
    }

    /// The reader of the namespace's queues that replicates to this region.
    pub fn reader(&self) -> Reader {
        Reader {
            name: format!("region-{}", self.region),
            from_oldest: self.start_from == StartFrom::Earliest,
        }
    }

    /// Whether this region applies `entry`: every entry, unless it is a copy for another
    /// region alone.
    pub fn applies(&self, entry: &Entry) -> bool {
        entry.destination_region.is_empty() || same_region(&entry.destination_region, &self.region)
    }
}
