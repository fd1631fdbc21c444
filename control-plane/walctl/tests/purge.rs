//! `walctl dlq purge` through the control plane: a dry run counts and prints the command that
//! removes exactly those; that command removes that many and no more, and removes nothing when
//! the count changed; a Kafka DLQ refuses what a log cannot do; every purge is audited. An
//! export writes every dead letter in full first.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use serde_json::Value;
use wal_namespaces::Backend;
use wal_testkit::{eventually, json_of, walctl_at as walctl, write, write_true};

use super::dlq::Fleet;

/// Writes `count` entries, which the broken target dead-letters, and waits for them all.
/// `total`: how many the DLQs then hold in all.
async fn dead_letter(fleet: &Fleet, total: u64, tag: &str) {
    let listed = fleet.dlq(&["list", &fleet.name]).await;
    let count = total - listed["total"].as_u64().unwrap();
    for i in 0..count {
        let payload = format!("{tag} {i}");
        write_true(
            &fleet.producer.client,
            write(&fleet.name, payload.as_bytes()),
        )
        .await;
    }
    let wanted = total;
    eventually(
        Duration::from_secs(60),
        "the entries dead-lettered",
        || async {
            let listed = fleet.dlq(&["list", &fleet.name]).await;
            (listed["total"].as_u64() >= Some(wanted)).then_some(())
        },
    )
    .await;
}

/// The words of a printed `walctl ...` command, without `walctl`.
fn words(command: &Value) -> Vec<String> {
    let text = command.as_str().unwrap();
    text.split_whitespace().skip(1).map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_purge_removes_what_its_dry_run_counted_and_nothing_once_that_changed() {
    let fleet = Fleet::start(Backend::Kafka).await;
    let (url, name) = (&fleet.url, &fleet.name);
    dead_letter(&fleet, 10, "first").await;

    // Exported first, in full: one JSON line per dead letter, payload included.
    let file = std::env::temp_dir().join(format!("{}.jsonl", wal_testkit::unique("export")));
    let file_arg = file.display().to_string();
    let exported = fleet.dlq(&["export", name, "--file", &file_arg]).await;
    assert_eq!(exported["exported"], 10, "{exported:#}");
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let mut payloads: Vec<&str> = lines
        .iter()
        .map(|l| l["payload"].as_str().unwrap())
        .collect();
    payloads.sort_unstable();
    let expected: Vec<String> = (0..10).map(|i| format!("first {i}")).collect();
    assert_eq!(payloads, expected);
    std::fs::remove_file(&file).unwrap();

    let dry = fleet.dlq(&["purge", name]).await;
    assert_eq!(
        (dry["dry_run"].clone(), dry["purged"].clone()),
        (true.into(), 10.into()),
        "{dry:#}"
    );
    let command = words(&dry["command"]);
    assert!(command.iter().any(|w| w == "--until"), "{command:?}");
    assert_eq!(command.last().map(String::as_str), Some("10"));

    // What a log cannot do is refused, naming why (exit 3).
    let by_class = walctl(url, &["dlq", "purge", name, "--class", "permanent"]).await;
    assert_eq!(by_class.status.code(), Some(3), "{by_class:?}");
    assert!(String::from_utf8_lossy(&by_class.stderr).contains("a Kafka DLQ is a log"));
    // A count that is not the dry run's removes nothing.
    let mut wrong = command.clone();
    *wrong.last_mut().unwrap() = "9".to_owned();
    let wrong: Vec<&str> = wrong.iter().map(String::as_str).collect();
    let refused = walctl(url, &wrong).await;
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("changed since the dry run"));
    assert_eq!(fleet.dlq(&["list", name]).await["total"], 10);

    // Dead letters that arrive after the dry run are not the purge's: it removes the ten.
    dead_letter(&fleet, 13, "between").await;
    let exact: Vec<&str> = command.iter().map(String::as_str).collect();
    let purged = json_of(&walctl(url, &[&exact[..], &["-o", "json"]].concat()).await);
    assert_eq!(purged["purged"], 10, "{purged:#}");
    let left = fleet.dlq(&["list", name]).await;
    assert_eq!(left["total"], 3, "{left:#}");

    let audit = json_of(&walctl(url, &["audit", name, "-o", "json"]).await);
    let results = |verb: &str| -> Vec<String> {
        let records = audit.as_array().unwrap().iter();
        let mine = records.filter(|r| r["verb"] == verb);
        mine.map(|r| r["result"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(results("export"), ["done: 10 exported", "started"]);
    let purges = results("purge");
    // The dry runs are not in it; the refused purge and the one done are.
    assert_eq!(purges.len(), 2, "{audit:#}");
    assert!(purges[0].starts_with("done: 10 purged"), "{purges:?}");
    assert!(
        purges[1].contains("changed since the dry run"),
        "{purges:?}"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqs_purge_takes_its_filter_and_leaves_the_rest() {
    let fleet = Fleet::start(Backend::Sqs).await;
    let name = &fleet.name;
    dead_letter(&fleet, 4, "sqs").await;

    let other = fleet.dlq(&["purge", name, "--class", "retryable"]).await;
    assert_eq!(other["purged"], 0, "{other:#}");
    let dry = fleet.dlq(&["purge", name, "--class", "permanent"]).await;
    assert_eq!(dry["purged"], 4, "{dry:#}");
    // Counting hid nothing for good: the messages are listed again.
    assert_eq!(fleet.dlq(&["list", name]).await["total"], 4);
    // Two more arrive after the dry run: its --until leaves them.
    dead_letter(&fleet, 6, "sqs later").await;
    let command = words(&dry["command"]);
    let exact: Vec<&str> = command.iter().map(String::as_str).collect();
    let purged = json_of(&walctl(&fleet.url, &[&exact[..], &["-o", "json"]].concat()).await);
    assert_eq!(purged["purged"], 4, "{purged:#}");
    assert_eq!(fleet.dlq(&["list", name]).await["total"], 2);
    fleet.stop().await;
}
