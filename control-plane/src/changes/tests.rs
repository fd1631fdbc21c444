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
