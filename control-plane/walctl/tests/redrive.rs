//! A redrive the control plane runs: one per namespace at a time (a second is refused, naming
//! the first), its progress in the store, stopped with the control plane that runs it and
//! continued by another on the same store, every dead letter delivered once, and each step
//! audited. Then `walctl dlq redrive` follows one to its end.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use tonic::Code;
use tonic::transport::Channel;
use wal_namespaces::Backend;
use wal_proto::v1::operations_client::OperationsClient;
use wal_proto::v1::{
    AuditRequest, GetRedriveRequest, ListDeadLettersRequest, Redrive, StartRedriveRequest,
};
use wal_testkit::{TestProducer, Upstream, apply_config, control_plane_on, eventually};
use wal_testkit::{json_of, namespace_json, start_consumer, walctl_at, write, write_true};

const ENTRIES: usize = 30;

fn start(namespace: &str, rate: u32) -> StartRedriveRequest {
    StartRedriveRequest {
        namespace: namespace.to_owned(),
        rate,
        operator: "redrive-test".to_owned(),
        ..StartRedriveRequest::default()
    }
}

async fn current(operations: &mut OperationsClient<Channel>, namespace: &str) -> Redrive {
    let request = GetRedriveRequest {
        namespace: namespace.to_owned(),
    };
    operations.get_redrive(request).await.unwrap().into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_runs_alone_stops_with_its_control_plane_and_another_continues_it() {
    let store = std::env::temp_dir().join(format!("{}.db", wal_testkit::unique("redrives")));
    let (stop_first, stopped) = tokio::sync::oneshot::channel::<()>();
    let (url, first) = control_plane_on(&store, async move {
        let _ = stopped.await;
    })
    .await;
    let mut registry =
        wal_proto::v1::namespace_registry_client::NamespaceRegistryClient::connect(url.clone())
            .await
            .unwrap();
    let upstream = Upstream::broken(400).await;
    let config = namespace_json(Backend::Kafka, 1, &upstream.target(), "");
    let namespace = apply_config(&mut registry, &config).await;
    let name = namespace.name.clone();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace]).await;
    let mut ids = BTreeSet::new();
    for i in 0..ENTRIES {
        ids.insert(write_true(&producer.client, write(&name, format!("m{i}").as_bytes())).await);
    }
    let mut operations = OperationsClient::connect(url.clone()).await.unwrap();
    eventually(Duration::from_secs(60), "every entry dead-lettered", || {
        let mut operations = operations.clone();
        let request = ListDeadLettersRequest {
            namespace: name.clone(),
            ..ListDeadLettersRequest::default()
        };
        async move {
            let listed = operations
                .list_dead_letters(request)
                .await
                .ok()?
                .into_inner();
            (listed.total == ENTRIES as u64).then_some(())
        }
    })
    .await;

    // A dry run counts and changes nothing.
    let dry = StartRedriveRequest {
        dry_run: true,
        ..start(&name, 0)
    };
    let dry = operations.start_redrive(dry).await.unwrap().into_inner();
    assert_eq!(dry.state, "dry run");
    assert_eq!(dry.left["would be redriven"], ENTRIES as u64, "{dry:?}");

    // The fix lands; a slow redrive starts, and a second one is refused, naming it.
    upstream.mend();
    let fixed_at = SystemTime::now();
    let running = operations
        .start_redrive(start(&name, 5))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(running.state, "running");
    let refused = operations
        .start_redrive(start(&name, 50))
        .await
        .unwrap_err();
    wal_testkit::assert_refused(
        &refused,
        Code::FailedPrecondition,
        &["is running", &running.id, "redrive-test"],
    );

    // Its control plane shuts down part of the way: the redrive stops, its progress kept.
    eventually(Duration::from_secs(30), "some entries redriven", || {
        let (mut operations, name) = (operations.clone(), name.clone());
        async move { (current(&mut operations, &name).await.redriven >= 5).then_some(()) }
    })
    .await;
    stop_first.send(()).unwrap();
    first.await.unwrap();

    // Another control plane on the same store reads it as stopped, and continues it.
    let (url, _second) = control_plane_on(&store, std::future::pending()).await;
    let mut operations = OperationsClient::connect(url.clone()).await.unwrap();
    let stopped = current(&mut operations, &name).await;
    assert_eq!(
        (stopped.id.as_str(), stopped.state.as_str()),
        (running.id.as_str(), "stopped")
    );
    let before = stopped.redriven;
    assert!((5..ENTRIES as u64).contains(&before), "{stopped:?}");
    let continued = operations
        .start_redrive(start(&name, 50))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(continued.redriven_before, before, "{continued:?}");
    let done = eventually(Duration::from_secs(60), "the redrive to end", || {
        let (mut operations, name) = (operations.clone(), name.clone());
        async move {
            let now = current(&mut operations, &name).await;
            (now.state != "running").then_some(now)
        }
    })
    .await;
    assert_eq!(done.state, "done", "{done:?}");
    assert_eq!(done.redriven + before, ENTRIES as u64, "{done:?}");

    // Every dead letter reached the fixed target once: the stop repeated none.
    let per_id = eventually(Duration::from_secs(60), "every entry delivered", || async {
        let mut per_id: BTreeMap<String, usize> = BTreeMap::new();
        for received in upstream.received().iter().filter(|r| r.at >= fixed_at) {
            let id = received
                .headers
                .get("idempotency-key")
                .cloned()
                .unwrap_or_default();
            *per_id.entry(id).or_default() += 1;
        }
        (per_id.keys().cloned().collect::<BTreeSet<_>>() == ids).then_some(per_id)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deliveries = upstream
        .received()
        .iter()
        .filter(|r| r.at >= fixed_at)
        .count();
    assert_eq!(deliveries, ENTRIES, "{per_id:?}");

    // Each step is in the audit, newest first; the dry run is not.
    let audit = operations
        .audit(AuditRequest {
            namespace: name.clone(),
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let results: Vec<String> = audit
        .records
        .iter()
        .map(|r| {
            r.result
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        results,
        ["done", "started", "stopped", "refused:", "started"],
        "{audit:?}"
    );
    assert!(
        audit
            .records
            .iter()
            .all(|r| r.verb == "redrive" && r.actor == "redrive-test")
    );

    // walctl follows a redrive to its end; with nothing left, it redrives none.
    let output = walctl_at(&url, &["dlq", "redrive", &name, "-o", "json"]).await;
    let followed = json_of(&output);
    assert_eq!(followed["state"], "done", "{followed:#}");
    assert_eq!(followed["redriven"], 0, "{followed:#}");
    let status = json_of(&walctl_at(&url, &["dlq", "status", &name, "-o", "json"]).await);
    assert_eq!(status["id"], followed["id"]);

    consumer.shutdown().await;
    producer.shutdown().await;
}
