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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn namespace(name: &str, queues: &[(&str, &str)]) -> Namespace {
        let list: Vec<String> = queues
            .iter()
            .filter(|(_, kind)| *kind == "kafka")
            .map(|(q, _)| format!("\"{q}\""))
            .collect();
        let sqs: Vec<String> = queues
            .iter()
            .filter(|(_, kind)| *kind == "sqs")
            .map(|(q, _)| format!("\"{q}\""))
            .collect();
        let (kind, key, names) = if sqs.is_empty() {
            ("KAFKA", "wal-kafka-topics", list)
        } else {
            ("SQS", "wal-queue", sqs)
        };
        let text = format!(
            r#"{{"namespace": "{name}", "persistence_configurations": {{"persistence_configuration": [
                {{"physical_storage": {{"type": "{kind}"}}, "config": {{"{key}": [{}]}}}}]}}}}"#,
            names.join(", ")
        );
        wal_namespaces::parse(&text, "test").unwrap()
    }

    #[test]
    fn lowering_the_delay_limit_drops_the_tiers_it_no_longer_needs() {
        let old = namespace("ns", &[("q0", "kafka"), ("q1", "kafka")]);
        let mut new = namespace("ns", &[("q0", "kafka")]);
        new.delay.max_delay = std::time::Duration::from_secs(600);
        new.delay.max_jitter = std::time::Duration::ZERO;
        new.retry.max_backoff = std::time::Duration::from_secs(1);
        // q1 is dropped whole (its tiers are counted with it); q0 loses the 15 m and 4 h tiers.
        let tiers: Vec<String> = dropped_tiers(&old, &new)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        assert_eq!(tiers, ["q0.delay-15m", "q0.delay-4h"]);
        assert!(dropped_tiers(&new, &old).is_empty());
        assert!(dropped_tiers(&old, &old).is_empty());
    }

    #[test]
    fn paths_name_each_changed_leaf() {
        let old = json!({"a": 1, "b": {"c": [1, 2], "d": "x"}, "gone": true});
        let new = json!({"a": 1, "b": {"c": [1, 3], "d": "y"}, "added": 0});
        assert_eq!(
            changed_paths(&old, &new),
            vec!["added", "b.c[1]", "b.d", "gone"]
        );
        assert!(changed_paths(&old, &old).is_empty());
    }

    #[test]
    fn pointers_keep_dotted_keys_whole() {
        let old = json!({"config": {"a.b": 1}});
        let new = json!({"config": {"a.b": 2}});
        let fields = changed_fields(&old, &new);
        assert_eq!(fields[0].path, "config.a.b");
        assert_eq!(new.pointer(&fields[0].pointer), Some(&json!(2)));
    }

    #[test]
    fn same_names_on_two_backends_are_two_queues() {
        let kafka = namespace("orders", &[("x", "kafka")]);
        let sqs = namespace("payments", &[("x", "sqs")]);
        assert!(check_update(None, &sqs, std::slice::from_ref(&kafka)).is_ok());
    }

    #[test]
    fn a_queue_keeps_its_backend() {
        let old = namespace("orders", &[("orders-q", "kafka")]);
        let new = namespace("orders", &[("orders-q", "sqs")]);
        let refused = check_update(Some(&old), &new, &[]).unwrap_err();
        assert!(matches!(refused, Forbidden::BackendChanged { .. }));
        assert!(refused.to_string().contains("'orders-q' is on kafka"));
    }

    /// A Kafka queue owns its delay tiers' names too.
    #[test]
    fn a_namespace_cannot_take_another_ones_queue_or_delay_tier() {
        let owner = namespace("orders", &[("orders-q", "kafka")]);
        for queue in ["orders-q", "orders-q.delay-1m"] {
            let taker = namespace("orders-v2", &[(queue, "kafka")]);
            let refused = check_update(None, &taker, std::slice::from_ref(&owner)).unwrap_err();
            let owned = Forbidden::QueueOwned {
                queue: queue.into(),
                owner: "orders".into(),
            };
            assert_eq!(refused, owned);
        }
        // Its own earlier version is no other namespace.
        assert!(check_update(Some(&owner), &owner, std::slice::from_ref(&owner)).is_ok());
    }

    #[test]
    fn a_queue_put_on_another_kafka_cluster_is_moved_with_its_dlq() {
        let old = namespace("orders", &[("a", "kafka")]);
        let mut new = old.clone();
        new.queues[0].cluster = Some("events".into());
        let moved = dropped(&old, &new);
        let names: Vec<(&str, Option<&str>)> = moved
            .iter()
            .map(|d| (d.name(), d.moved_to.as_deref()))
            .collect();
        assert_eq!(names, [("a", Some("events")), ("a-dlq", Some("events"))]);
        // Its tiers are counted with it, not as tiers the new limits dropped.
        assert!(dropped_tiers(&old, &new).is_empty());
    }

    #[test]
    fn dropping_a_queue_lists_it_and_its_dlq() {
        let old = namespace("orders", &[("a", "kafka"), ("b", "kafka")]);
        let new = namespace("orders", &[("a", "kafka")]);
        let dropped = dropped(&old, &new);
        let names: Vec<(&str, &str)> = dropped.iter().map(|d| (d.what(), d.name())).collect();
        assert_eq!(names, [("queue", "b"), ("DLQ", "b-dlq")]);
        assert!(super::dropped(&old, &old).is_empty());
    }
}
