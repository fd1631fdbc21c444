//! The consumer's gRPC health service, as a probe sees it: SERVING under "wal.consumer" while it
//! runs, and reflection (v1 and v1alpha) listing the health service, like every server of the
//! platform.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use tonic_health::pb::health_check_response::ServingStatus;
use wal_namespaces::Backend;
use wal_testkit::{consumer_process_at, eventually, namespace_json, refusing_address, unique};

#[tokio::test]
async fn health_reports_serving_and_reflection_lists_the_health_service() {
    let dir = std::env::temp_dir().join(unique("consumer-health"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = namespace_json(
        Backend::Kafka,
        1,
        r#"{"kind": "http", "settings": {"url": "http://127.0.0.1:9/hook"}}"#,
        "",
    );
    std::fs::write(dir.join("ns.json"), config).unwrap();
    let health = refusing_address();
    let mut consumer = consumer_process_at(&dir, "127.0.0.1:0", &health.to_string());

    let channel = eventually(
        Duration::from_secs(60),
        "the consumer's health port",
        || async {
            tonic::transport::Channel::from_shared(format!("http://{health}"))
                .unwrap()
                .connect()
                .await
                .ok()
        },
    )
    .await;
    let status = wal_testkit::health_status(&channel, "wal.consumer").await;
    let (v1, v1alpha) = wal_testkit::reflected_services(&channel).await;
    consumer.kill().unwrap();
    consumer.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();

    assert_eq!(status, ServingStatus::Serving);
    for services in [v1, v1alpha] {
        assert!(
            services.contains(&"grpc.health.v1.Health".to_owned()),
            "{services:?}"
        );
    }
}
