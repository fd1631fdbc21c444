//! What an update changes, and which updates are refused because they would strand data.
//!
//! A queue's entries live on the broker that holds it, so the rules protect them: a queue keeps
//! its backend for life, a queue or DLQ that still holds entries cannot be dropped from its
//! namespace, and a queue belongs to one namespace (so a namespace cannot be renamed by applying
//! its queues under a new name: the old one's entries would be read by nobody).

use std::collections::BTreeSet;

use serde_json::Value;
use wal_namespaces::Namespace;

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
}

/// The JSON paths whose values differ between two configs, in order (`queues[1].name`, ...).
/// Arrays are compared element by element.
pub fn changed_paths(old: &Value, new: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    walk("", old, new, &mut paths);
    paths
}

fn walk(path: &str, old: &Value, new: &Value, paths: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => walk(&child, x, y, paths),
                    _ => paths.push(child),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                walk(&format!("{path}[{i}]"), x, y, paths);
            }
        }
        _ if old != new => paths.push(if path.is_empty() {
            "(whole config)".to_owned()
        } else {
            path.to_owned()
        }),
        _ => {}
    }
}

/// Every queue and DLQ name a namespace uses.
pub fn queue_names(namespace: &Namespace) -> BTreeSet<&str> {
    namespace
        .queues
        .iter()
        .flat_map(|q| [q.name.as_str(), q.dlq.as_str()])
        .collect()
}

/// The checks that need only the configs: backends kept, and no queue taken from another
/// namespace (`others` are the other namespaces' current configs).
pub fn check_update(
    old: Option<&Namespace>,
    new: &Namespace,
    others: &[Namespace],
) -> Result<(), Forbidden> {
    if let Some(old) = old {
        for queue in &new.queues {
            if let Some(before) = old.queues.iter().find(|q| q.name == queue.name)
                && before.backend != queue.backend
            {
                return Err(Forbidden::BackendChanged {
                    queue: queue.name.clone(),
                    from: before.backend.to_string(),
                    to: queue.backend.to_string(),
                });
            }
        }
    }
    let mine = queue_names(new);
    for other in others.iter().filter(|o| o.name != new.name) {
        if let Some(queue) = queue_names(other).intersection(&mine).next() {
            return Err(Forbidden::QueueOwned {
                queue: (*queue).to_owned(),
                owner: other.name.clone(),
            });
        }
    }
    Ok(())
}

/// The queues and DLQs the update drops, with whether each is a queue or a DLQ: each must be
/// empty before the update is stored.
pub fn dropped(old: &Namespace, new: &Namespace) -> Vec<(&'static str, String)> {
    let kept = queue_names(new);
    let mut dropped = Vec::new();
    for queue in &old.queues {
        if !kept.contains(queue.name.as_str()) {
            dropped.push(("queue", queue.name.clone()));
        }
        if !kept.contains(queue.dlq.as_str()) {
            dropped.push(("DLQ", queue.dlq.clone()));
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
    fn a_queue_keeps_its_backend() {
        let old = namespace("orders", &[("orders-q", "kafka")]);
        let new = namespace("orders", &[("orders-q", "sqs")]);
        let refused = check_update(Some(&old), &new, &[]).unwrap_err();
        assert!(matches!(refused, Forbidden::BackendChanged { .. }));
        assert!(refused.to_string().contains("'orders-q' is on kafka"));
    }

    #[test]
    fn a_namespace_cannot_take_another_ones_queue() {
        let owner = namespace("orders", &[("orders-q", "kafka")]);
        let renamed = namespace("orders-v2", &[("orders-q", "kafka")]);
        let refused = check_update(None, &renamed, std::slice::from_ref(&owner)).unwrap_err();
        assert_eq!(
            refused,
            Forbidden::QueueOwned {
                queue: "orders-q".into(),
                owner: "orders".into()
            }
        );
        // Its own earlier version is no other namespace.
        assert!(check_update(Some(&owner), &owner, std::slice::from_ref(&owner)).is_ok());
    }

    #[test]
    fn dropping_a_queue_lists_it_and_its_dlq() {
        let old = namespace("orders", &[("a", "kafka"), ("b", "kafka")]);
        let new = namespace("orders", &[("a", "kafka")]);
        assert_eq!(
            dropped(&old, &new),
            vec![("queue", "b".to_owned()), ("DLQ", "b-dlq".to_owned())]
        );
        assert!(dropped(&old, &old).is_empty());
    }
}
