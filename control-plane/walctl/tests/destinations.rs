//! `walctl destinations status` against the real stack: a row per destination of a namespace,
//! its own target's and each store's, with how far its reader trails.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use wal_namespaces::Backend;
use wal_testkit::{Cql, TestProducer, apply_config, control_plane_at, cql_target, eventually};
use wal_testkit::{destinations, json_of, kafka_store, namespace_json, put, start_consumer};
use wal_testkit::{topic_records, unique};
use wal_testkit::{walctl_at as walctl, write, write_true};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_each_destination_behind_then_caught_up() {
    let (mut registry, url) = control_plane_at().await;
    let cql = Cql::connect().await;
    let (table, topic, config) = table_and_events(&cql).await;
    let namespace = apply_config(&mut registry, &config).await;
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    for i in 0..3 {
        let id = format!("o{i}");
        write_true(&producer.client, write(&namespace.name, &put(&id, "v"))).await;
    }
    let status = |url: String, name: String| async move {
        let args = ["destinations", "status", &name, "-o", "json"];
        let rows = json_of(&walctl(&url, &args).await);
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let text = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
                (
                    text("destination"),
                    text("kind"),
                    text("state"),
                    r["lag_entries"].as_u64(),
                )
            })
            .collect::<Vec<_>>()
    };
    let row = |name: &str, kind: &str, state: &str, lag| {
        (
            name.to_owned(),
            kind.to_owned(),
            state.to_owned(),
            Some(lag),
        )
    };
    assert_eq!(
        status(url.clone(), namespace.name.clone()).await,
        [
            row("default", "cql", "not started", 3),
            row("events", "kafka", "not started", 3)
        ],
        "nothing read yet: both owed the three writes"
    );

    let consumer = start_consumer(vec![namespace.clone()]).await;
    eventually(
        Duration::from_secs(60),
        "the table and the topic",
        || async {
            let done = cql.rows(&table).await.len() == 3 && topic_records(&topic).await == 3;
            done.then_some(())
        },
    )
    .await;
    // Stopping commits what was acknowledged.
    consumer.shutdown().await;
    assert_eq!(
        status(url.clone(), namespace.name.clone()).await,
        [
            row("default", "cql", "caught up", 0),
            row("events", "kafka", "caught up", 0)
        ]
    );
    // Read from the brokers here, from the config's file with no control plane to ask, the
    // rows are the control plane's.
    let file = std::env::temp_dir().join(format!("{}.json", namespace.name));
    std::fs::write(&file, &config).unwrap();
    let direct = [
        "destinations",
        "status",
        &namespace.name,
        "-o",
        "json",
        "--direct",
        "--namespace-file",
        file.to_str().unwrap(),
    ];
    let nowhere = "http://127.0.0.1:1";
    let asked = ["destinations", "status", &namespace.name, "-o", "json"];
    assert_eq!(
        json_of(&walctl(nowhere, &direct).await),
        json_of(&walctl(&url, &asked).await)
    );
    // An operator's pause shows on the destination it holds, and no other.
    let paused = walctl(
        &url,
        &[
            "pause",
            &namespace.name,
            "events",
            "--reason",
            "topic moving",
        ],
    )
    .await;
    assert!(paused.status.success(), "{paused:?}");
    assert_eq!(
        status(url, namespace.name.clone()).await,
        [
            row("default", "cql", "caught up", 0),
            row("events", "kafka", "paused", 0)
        ]
    );
    producer.shutdown().await;
}

/// `walctl entry` shows what each destination did with one entry of a namespace whose
/// destinations record receipts, its write awaiting nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entry_shows_what_each_destination_did_with_it() {
    let (mut registry, url) = control_plane_at().await;
    let cql = Cql::connect().await;
    let (_, _, config) = table_and_events(&cql).await;
    let config = wal_testkit::with_durable_storage(&config, "wal_stores_test");
    let mut config: serde_json::Value = serde_json::from_str(&config).unwrap();
    config["persistence_configurations"]["persistence_configuration"][0]["config"]["durable_storage"]
        ["receipts"] = serde_json::json!(true);
    let namespace = apply_config(&mut registry, &config.to_string()).await;
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;
    let id = write_true(&producer.client, write(&namespace.name, &put("o1", "v"))).await;

    let shown = eventually(
        Duration::from_secs(30),
        "both destinations' receipts",
        || {
            let (url, name, id) = (url.clone(), namespace.name.clone(), id.clone());
            async move {
                let shown = json_of(&walctl(&url, &["entry", &name, &id, "-o", "json"]).await);
                let states: Vec<(String, String)> = shown["destinations"]
                    .as_array()?
                    .iter()
                    .map(|d| {
                        let text = |k: &str| d[k].as_str().unwrap_or_default().to_owned();
                        (text("destination"), text("state"))
                    })
                    .collect();
                states
                    .iter()
                    .all(|(_, state)| state == "applied")
                    .then_some(states)
            }
        },
    )
    .await;
    let named: Vec<&str> = shown.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(named, ["default", "events"]);
    consumer.shutdown().await;
    producer.shutdown().await;
}

/// A fresh table and events topic, and a namespace config delivering to the table and to an
/// events store on the topic.
async fn table_and_events(cql: &Cql) -> (String, String, String) {
    let table = cql.table().await;
    let topic = unique("events");
    wal_testkit::provision_topic(&topic).await;
    let extra = destinations(&[kafka_store("events", &topic, "earliest")]);
    let config = namespace_json(Backend::Kafka, 1, &cql_target(&table), &extra);
    (table, topic, config)
}
