//! The console's view of the consumers, against a real `wal-consumer` process on the real
//! stack: what the page shows per destination is what the consumer's own metrics endpoint
//! counted, and a consumer that cannot be read says where it was looked for.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpListener;
use wal_namespaces::Backend;
use wal_testkit::{Cql, TestProducer, cql_target, eventually, namespace_json, put, unique};
use wal_testkit::{write, write_true};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_shows_what_each_consumer_delivered_per_destination() {
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let config = namespace_json(Backend::Kafka, 1, &cql_target(&table), "");
    let namespace = wal_namespaces::parse(&config, "test").unwrap();
    let dir = std::env::temp_dir().join(unique("console-namespaces"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{}.json", namespace.name)), &config).unwrap();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let metrics = format!("127.0.0.1:{}", free_port().await);
    let mut consumer = wal_testkit::consumer_process(&dir, &metrics);
    for i in 0..3 {
        let put = put(&format!("k{i}"), "v");
        write_true(&producer.client, write(&namespace.name, &put)).await;
    }

    let (read, unreachable) = (format!("http://{metrics}"), "http://127.0.0.1:1".to_owned());
    let consumers = wal_console::Consumers::new(vec![read.clone(), unreachable]).unwrap();
    let console = serve(consumers).await;
    let url = format!("{console}/api/namespaces/{}/consumers", namespace.name);
    let shown = eventually(
        Duration::from_secs(60),
        "the consumer's three deliveries, on the console",
        || async {
            let shown = get(&url).await?;
            (shown[0]["destinations"][0]["delivered"] == 3.0).then_some(shown)
        },
    )
    .await;
    assert_eq!(shown[0]["address"], read.as_str());
    let default = &shown[0]["destinations"][0];
    assert_eq!(default["name"], "default", "{shown}");
    assert_eq!(default["dead_lettered"], 0.0, "{shown}");
    assert_eq!(shown[0]["breakers"], serde_json::json!([]), "{shown}");
    let error = shown[1]["error"].as_str().unwrap_or_default();
    assert!(error.contains("http://127.0.0.1:1/metrics"), "{shown}");
    // Another namespace's page shows none of it.
    let other = get(&format!("{console}/api/namespaces/another/consumers"))
        .await
        .unwrap();
    assert_eq!(other[0]["destinations"], serde_json::json!([]), "{other}");

    consumer.kill().unwrap();
    consumer.wait().unwrap();
    producer.shutdown().await;
}

/// A console reading `consumers`; its URL. Its control plane is never called here (what the
/// consumers show comes from them alone), so none runs.
async fn serve(consumers: wal_console::Consumers) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let control_plane = wal_console::ControlPlane::new("http://127.0.0.1:1", None).unwrap();
    let settings = wal_console::Settings {
        consumers,
        ..Default::default()
    };
    tokio::spawn(async move {
        wal_console::serve(listener, control_plane, settings, std::future::pending()).await
    });
    url
}

/// The console API's JSON at `url`; none while it does not answer.
async fn get(url: &str) -> Option<Value> {
    let text = reqwest::get(url).await.ok()?.text().await.ok()?;
    serde_json::from_str(&text).ok()
}

async fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}
