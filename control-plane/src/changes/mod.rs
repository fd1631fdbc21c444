//! What an update changes, and which updates are refused because they would strand data.
//!
//! A queue's entries live on the broker that holds it, so the rules protect them: a queue keeps
//! its backend for life, a queue or DLQ that still holds entries cannot be dropped from its
//! namespace nor moved to another Kafka cluster, and a queue belongs to one namespace (so a namespace cannot be renamed by applying
//! its queues under a new name: the old one's entries would be read by nobody).

use std::collections::BTreeSet;

use serde_json::Value;
use wal_namespaces::{Backend, Namespace, QueueConfig};
use wal_queue::delay::{KAFKA_TIERS, kafka_tiers, tier_topic};

/// An update refused, with the rule it breaks and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Forbidden {
    #[error(
        "queue '{queue}' is on {from}; moving it to {to} would strand the entries on {from}. Add a new queue on {to} instead, and drop '{queue}' once it is empty"
    )]
    BackendChanged {
        queue: String,
        from: String,
        to: String,
    },
    #[error(
        "queue '{queue}' belongs to namespace '{owner}'; a namespace cannot be renamed or take another's queues (their entries would be read by nobody). Give the queues new names"
    )]
    QueueOwned { queue: String, owner: String },
    #[error(
        "{what} '{queue}' still holds {entries} entries; removing it would strand them. Let it drain (or redrive its DLQ) and apply again"
    )]
    StillHolds {
        what: &'static str,
        queue: String,
        entries: u64,
    },
    #[error(
        "queue '{queue}' is on Kafka cluster '{from}' and still holds {entries} entries; moving it to cluster '{to}' would strand them on '{from}'. Let it drain first (stop writing to it, or add a new queue on '{to}'), then apply again"
    )]
    ClusterChanged {
        queue: String,
        from: String,
        to: String,
        entries: u64,
    },
    #[error(
        "destination '{destination}' is still owed {entries} entries on queue '{queue}'; removing it would leave them undelivered there. Its lag is wal_consumer_backlog with destination=\"{destination}\": a reader that keeps up with a namespace being written to is always owed a few in flight. Give them up with --drop-owed-destinations (drop_owed_destinations) once the count is as small as you accept, or let a stopped store catch up first"
    )]
    DestinationOwed {
        destination: String,
        queue: String,
        entries: u64,
    },
    #[error(
        "delay tier '{tier}' still holds {entries} entries parked for a later deliver-at; the new delay limits need no such tier, so it would no longer be read and they would be stranded. Keep the limits until the tier is empty (its entries come due within its wait), then apply again"
    )]
    TierHolds { tier: String, entries: u64 },
}

/// A field that differs between two configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedField {
    /// For people: `queues[1].name`.
    pub path: String,
    /// For `Value::pointer`: `/queues/1/name` (keys with dots or slashes stay one segment).
    pub pointer: String,
}

/// The JSON paths whose values differ between two configs, in order (`queues[1].name`, ...).
/// Arrays are compared element by element.
pub fn changed_paths(old: &Value, new: &Value) -> Vec<String> {
    changed_fields(old, new)
        .into_iter()
        .map(|f| f.path)
        .collect()
}

/// Like [`changed_paths`], with a JSON pointer to each field.
pub fn changed_fields(old: &Value, new: &Value) -> Vec<ChangedField> {
    let mut fields = Vec::new();
    let root = ChangedField {
        path: String::new(),
        pointer: String::new(),
    };
    walk(&root, old, new, &mut fields);
    fields
}

fn walk(at: &ChangedField, old: &Value, new: &Value, fields: &mut Vec<ChangedField>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let child = ChangedField {
                    path: if at.path.is_empty() {
                        key.clone()
                    } else {
                        format!("{}.{key}", at.path)
                    },
                    pointer: format!(
                        "{}/{}",
                        at.pointer,
                        key.replace('~', "~0").replace('/', "~1")
                    ),
                };
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => walk(&child, x, y, fields),
                    _ => fields.push(child),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let child = ChangedField {
                    path: format!("{}[{i}]", at.path),
                    pointer: format!("{}/{i}", at.pointer),
                };
                walk(&child, x, y, fields);
            }
        }
        _ if old != new => fields.push(if at.path.is_empty() {
            ChangedField {
                path: "(whole config)".to_owned(),
                pointer: String::new(),
            }
        } else {
            at.clone()
        }),
        _ => {}
    }
}

/// Every queue and DLQ a namespace uses, with its backend: a Kafka topic and an SQS queue of the
/// same name are different queues.
pub fn queue_names(namespace: &Namespace) -> BTreeSet<(Backend, &str)> {
    namespace
        .queues
        .iter()
        .flat_map(|q| [(q.backend, q.name.as_str()), (q.backend, q.dlq.as_str())])
        .collect()
}

/// Every name a namespace holds on the brokers: its queues and DLQs, and on Kafka each queue's
/// delay tiers, all four of them whether its limits need them yet or not, so that raising a
/// delay limit later never collides with another namespace's topic.
pub fn owned_names(namespace: &Namespace) -> BTreeSet<(Backend, String)> {
    let mut names: BTreeSet<(Backend, String)> = queue_names(namespace)
        .into_iter()
        .map(|(backend, name)| (backend, name.to_owned()))
        .collect();
    for queue in namespace
        .queues
        .iter()
        .filter(|q| q.backend == Backend::Kafka)
    {
        for tier in KAFKA_TIERS {
            names.insert((Backend::Kafka, tier_topic(&queue.name, tier)));
        }
    }
    names
}

/// The checks that need only the configs: backends kept, and no queue taken from another
/// namespace (`others` are the other namespaces' current configs).
pub fn check_update(
    old: Option<&Namespace>,
    new: &Namespace,
    others: &[Namespace],
) -> Result<(), Forbidden> {
    let mine = queue_names(new);
    if let Some(old) = old {
        // A queue that is gone from its backend but named on the other one has moved.
        for (backend, name) in queue_names(old).difference(&mine) {
            if let Some((to, _)) = mine.iter().find(|(b, n)| n == name && b != backend) {
                return Err(Forbidden::BackendChanged {
                    queue: (*name).to_owned(),
                    from: backend.to_string(),
                    to: to.to_string(),
                });
            }
        }
    }
    let claimed = owned_names(new);
    for other in others.iter().filter(|o| o.name != new.name) {
        if let Some((_, queue)) = owned_names(other).intersection(&claimed).next() {
            return Err(Forbidden::QueueOwned {
                queue: queue.clone(),
                owner: other.name.clone(),
            });
        }
    }
    Ok(())
}

/// A queue or DLQ an update drops, or moves to another Kafka cluster: it must be empty before
/// the update is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped<'a> {
    /// The old config's queue (for a dropped DLQ, the queue it served).
    pub queue: &'a QueueConfig,
    pub dlq: bool,
    /// The cluster the update puts it on, when it keeps the queue on another cluster.
    pub moved_to: Option<String>,
}

impl Dropped<'_> {
    pub fn what(&self) -> &'static str {
        if self.dlq { "DLQ" } else { "queue" }
    }

    pub fn name(&self) -> &str {
        if self.dlq {
            &self.queue.dlq
        } else {
            &self.queue.name
        }
    }
}

/// The queues and DLQs the update drops or moves to another Kafka cluster. A DLQ shared by
/// several queues is listed once. Both configs name their queues' clusters in full
/// (`ClusterMap::resolved`), so a queue that names the default cluster is not moved.
pub fn dropped<'a>(old: &'a Namespace, new: &Namespace) -> Vec<Dropped<'a>> {
    let kept = placed_names(new);
    let mut seen = BTreeSet::new();
    let mut dropped = Vec::new();
    for queue in &old.queues {
        for dlq in [false, true] {
            let name = if dlq { &queue.dlq } else { &queue.name };
            let place = (queue.backend, queue.cluster.as_deref(), name.as_str());
            if !kept.contains(&place) && seen.insert(place) {
                let moved_to = kept
                    .iter()
                    .find(|(b, _, n)| *b == queue.backend && n == name)
                    .and_then(|(_, cluster, _)| cluster.map(str::to_owned));
                dropped.push(Dropped {
                    queue,
                    dlq,
                    moved_to,
                });
            }
        }
    }
    dropped
}

/// Every queue and DLQ a namespace uses, with its backend and Kafka cluster.
fn placed_names(namespace: &Namespace) -> BTreeSet<(Backend, Option<&str>, &str)> {
    namespace
        .queues
        .iter()
        .flat_map(|q| {
            let (backend, cluster) = (q.backend, q.cluster.as_deref());
            [
                (backend, cluster, q.name.as_str()),
                (backend, cluster, q.dlq.as_str()),
            ]
        })
        .collect()
}

/// The delay tier topics of Kafka queues kept by the update that the new limits no longer need
/// (lower `delay_limits` or retry backoff), each with the old config's queue it serves: the
/// consumer stops reading them, so they must be empty. A dropped or moved queue's tiers are
/// counted with the queue.
pub fn dropped_tiers<'a>(old: &'a Namespace, new: &Namespace) -> Vec<(&'a QueueConfig, String)> {
    let needed = kafka_tiers(new.longest_wait());
    let kept = placed_names(new);
    let mut dropped = Vec::new();
    for queue in &old.queues {
        let place = (
            Backend::Kafka,
            queue.cluster.as_deref(),
            queue.name.as_str(),
        );
        if queue.backend != Backend::Kafka || !kept.contains(&place) {
            continue;
        }
        for tier in kafka_tiers(old.longest_wait()) {
            if !needed.contains(&tier) {
                dropped.push((queue, tier_topic(&queue.name, tier)));
            }
        }
    }
    dropped
}

/// The destinations `old` names and `new` does not: their readers stop, so whatever is still
/// owed to them is never delivered there.
pub fn dropped_destinations<'a>(
    old: &'a Namespace,
    new: &Namespace,
) -> Vec<&'a wal_namespaces::DestinationConfig> {
    old.destinations
        .iter()
        .filter(|d| !new.destinations.iter().any(|n| n.name == d.name))
        .collect()
}

#[cfg(test)]
mod tests;
