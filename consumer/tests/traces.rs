//! One write, one trace: the producer, consumer and writer binaries export their spans to the
//! stack's Jaeger (`scripts/stack up jaeger`), as OpenTelemetry's environment tells them, and
//! log JSON. Jaeger's query API then holds each write whole under its caller's trace id:
//! - a write its upstream refuses once: the producer's call and its enqueue, the consumer's
//!   delivery and both attempts, each a child of the one before;
//! - a replicated write: the writer's apply, a child of the sending attempt;
//! - a transaction: its commit, the marker's delivery and attempt, and each item applied.
//!
//! Every line each process logged is a JSON object, the control plane's included.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rand::Rng as _;
use serde_json::Value;
use wal_namespaces::Backend;
use wal_proto::v1::transactions_client::TransactionsClient;
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::{TransactionItem, Trilean, WriteTransactionRequest};
use wal_testkit::{
    KilledWhenDropped, ProducerProcess, Upstream, cache_set, cached, cargo_bin,
    consumer_process_logging_with_env, eventually, jaeger, namespace_json, region_caches,
    terminate, unique, write, write_true,
};

const LIMIT: Duration = Duration::from_secs(60);

/// A span as Jaeger's query API gives it: its name, its service, its parent and its tags.
#[derive(Debug, Clone)]
struct Span {
    id: String,
    name: String,
    service: String,
    parent: Option<String>,
    /// The spans this one links to (Jaeger's FOLLOWS_FROM references).
    links: Vec<String>,
    tags: BTreeMap<String, String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_retried_once_is_one_trace_in_jaeger_and_every_log_line_is_json() {
    // The upstream refuses the first delivery (a 500: retryable) and takes the second.
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let upstream = Upstream::start(move |_| match counted.fetch_add(1, Ordering::SeqCst) {
        0 => 500,
        _ => 200,
    })
    .await;
    let retry = r#""retry_policy": {"max_attempts": 3, "initial_backoff_ms": 100, "jitter": 0.0}"#;
    let config = namespace_json(Backend::Kafka, 1, &upstream.target(), retry);
    let traced = Traced::start(&config).await;
    let (name, producer) = (&traced.name, &traced.producer);
    let (producer_log, consumer_log) = (&traced.producer_log, &traced.consumer_log);

    let trace_id = new_trace_id();
    let mut request = tonic::Request::new(write(name, b"traced"));
    request
        .metadata_mut()
        .insert("traceparent", caller(&trace_id).parse().unwrap());
    request
        .metadata_mut()
        .insert("tracestate", "wal=test".parse().unwrap());
    let client = WriteAheadLogClient::new(producer.channel.clone());
    let entry_id = write_true(&client, request).await;
    eventually(
        LIMIT,
        "the upstream to take the second delivery",
        || async { (upstream.received().len() >= 2).then_some(()) },
    )
    .await;
    let sent = upstream.received()[1].headers["traceparent"].clone();
    assert_eq!(
        upstream.received()[1]
            .headers
            .get("tracestate")
            .map(String::as_str),
        Some("wal=test"),
        "the caller's tracestate reaches the target"
    );

    let spans = trace_with(&trace_id, |spans| {
        let attempts = spans.iter().filter(|s| s.name == "attempt").count();
        attempts >= 2 && spans.iter().any(|s| s.name == "enqueue")
    })
    .await;
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    let [call] = named("write_to_log")[..] else {
        panic!("one producer call: {spans:#?}");
    };
    assert_eq!(call.service, "wal-producer");
    assert_eq!(
        call.parent.as_deref(),
        Some(CALLER_SPAN),
        "the caller's span"
    );
    assert_eq!(call.tags.get("entry_id"), Some(&entry_id));
    assert_eq!(call.tags.get("outcome").map(String::as_str), Some("true"));
    let [enqueue] = named("enqueue")[..] else {
        panic!("one enqueue: {spans:#?}");
    };
    assert_eq!(enqueue.parent.as_ref(), Some(&call.id));
    let deliveries = named("deliver");
    assert!(!deliveries.is_empty(), "{spans:#?}");
    for delivery in &deliveries {
        assert_eq!(delivery.service, "wal-consumer");
        assert_eq!(
            delivery.parent.as_ref(),
            Some(&call.id),
            "a child of the write"
        );
        assert_eq!(delivery.tags.get("entry_id"), Some(&entry_id));
    }
    let mut attempts = named("attempt");
    attempts.sort_by_key(|s| s.tags.get("attempt").cloned());
    let outcomes: Vec<(&str, &str)> = attempts
        .iter()
        .map(|s| (s.tags["attempt"].as_str(), s.tags["outcome"].as_str()))
        .collect();
    assert_eq!(
        outcomes,
        [("1", "retryable"), ("2", "applied")],
        "{spans:#?}"
    );
    for attempt in &attempts {
        assert!(
            deliveries
                .iter()
                .any(|d| attempt.parent.as_ref() == Some(&d.id)),
            "an attempt is a child of a delivery: {attempt:?}"
        );
    }
    // The retry copy's delivery links to the delivery whose failure made it.
    let delivery_of = |attempt: &Span| {
        deliveries
            .iter()
            .find(|d| attempt.parent.as_ref() == Some(&d.id))
            .map(|d| (*d).clone())
    };
    let (failed, retried) = (
        delivery_of(attempts[0]).unwrap(),
        delivery_of(attempts[1]).unwrap(),
    );
    assert_ne!(failed.id, retried.id, "two deliveries: {spans:#?}");
    assert_eq!(
        retried.links,
        std::slice::from_ref(&failed.id),
        "{spans:#?}"
    );
    assert!(failed.links.is_empty(), "{spans:#?}");
    // The upstream's request is the applied attempt's child.
    assert_eq!(
        sent,
        format!("00-{trace_id}-{}-01", attempts[1].id),
        "the traceparent the upstream received"
    );

    let mut consumer = traced.consumer;
    terminate(&consumer.0);
    consumer.0.wait().unwrap();
    let trace_lines = every_line_is_json(consumer_log, &trace_id);
    assert!(trace_lines > 0, "a consumer line names the write's trace");
    every_line_is_json(producer_log, &trace_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_write_is_applied_by_the_writer_in_its_trace() {
    let cache = region_caches()[1].clone();
    let address = wal_testkit::refusing_address();
    let log = std::env::temp_dir().join(unique("writer.log"));
    let mut writer = KilledWhenDropped(
        Command::new(cargo_bin("wal-writer"))
            .env("WAL_WRITER_LISTEN", address.to_string())
            .env("WAL_WRITER_METRICS_LISTEN", "127.0.0.1:0")
            .env("WAL_REGION", "regionb")
            .env("WAL_MEMCACHED", &cache)
            .envs(exporting("wal-writer"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start wal-writer"),
    );
    let target = format!(
        r#"{{"kind": "region", "settings": {{"regions": {{"regionb": {{"writer": "{address}"}}}}}}}}"#
    );
    let traced = Traced::start(&namespace_json(Backend::Kafka, 1, &target, "")).await;
    let key = unique("traced");
    let trace_id = new_trace_id();
    let mut request = tonic::Request::new(write(&traced.name, cache_set(&key, "v").as_bytes()));
    request
        .metadata_mut()
        .insert("traceparent", caller(&trace_id).parse().unwrap());
    let client = WriteAheadLogClient::new(traced.producer.channel.clone());
    write_true(&client, request).await;
    let memcached = memcache::exp::AsyncMetaClient::connect(cache.as_str())
        .await
        .unwrap();
    eventually(LIMIT, "the write replicated to regionb's cache", || async {
        cached(&memcached, &key)
            .await
            .filter(|v| v == "v")
            .map(drop)
    })
    .await;

    let spans = trace_with(&trace_id, |spans| {
        spans.iter().any(|s| s.name == "replicated_apply")
    })
    .await;
    let [apply] = &spans
        .iter()
        .filter(|s| s.name == "replicated_apply")
        .collect::<Vec<_>>()[..]
    else {
        panic!("one apply in regionb: {spans:#?}");
    };
    assert_eq!(apply.service, "wal-writer");
    let parent = spans.iter().find(|s| apply.parent.as_ref() == Some(&s.id));
    assert!(
        parent.is_some_and(|p| p.name == "attempt" && p.service == "wal-consumer"),
        "the writer's apply is the sending attempt's child: {spans:#?}"
    );
    terminate(&writer.0);
    writer.0.wait().unwrap();
    every_line_is_json(&log, &trace_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_is_one_trace_from_its_commit_to_each_item_applied() {
    let upstream = Upstream::start(|_| 200).await;
    let name = unique("ns");
    let config = format!(
        r#"{{"namespace": "{name}",
            "persistence_configurations": {{"persistence_configuration": [
              {{"physical_storage": {{"type": "KAFKA"}}, "config": {{"wal-kafka-topics": ["{name}-q0"],
                "durable_storage": {{"namespace": "wal_txn_test", "type": "cql"}}}}}}]}},
            "default_target": {}}}"#,
        upstream.target()
    );
    let traced = Traced::start(&config).await;
    let trace_id = new_trace_id();
    let items = (0..2)
        .map(|sequence| TransactionItem {
            sequence,
            target: None,
            payload: format!("item {sequence}").into_bytes(),
        })
        .collect();
    let mut request = tonic::Request::new(WriteTransactionRequest {
        namespace: name.clone(),
        transaction_id: unique("txn"),
        items,
    });
    request
        .metadata_mut()
        .insert("traceparent", caller(&trace_id).parse().unwrap());
    let answer = TransactionsClient::new(traced.producer.channel.clone())
        .write_transaction(request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);

    let spans = trace_with(&trace_id, |spans| {
        spans.iter().filter(|s| s.name == "apply_item").count() >= 2
    })
    .await;
    let [commit] = &spans
        .iter()
        .filter(|s| s.name == "commit_transaction")
        .collect::<Vec<_>>()[..]
    else {
        panic!("one commit: {spans:#?}");
    };
    assert_eq!(commit.service, "wal-producer");
    let parent_of = |span: &Span| spans.iter().find(|s| span.parent.as_ref() == Some(&s.id));
    for item in spans.iter().filter(|s| s.name == "apply_item") {
        let attempt = parent_of(item).expect("an item's parent");
        assert_eq!(attempt.name, "attempt", "{spans:#?}");
        let delivery = parent_of(attempt).expect("an attempt's parent");
        assert_eq!(delivery.name, "deliver", "{spans:#?}");
        assert_eq!(
            delivery.parent.as_ref(),
            Some(&commit.id),
            "the marker's delivery is the commit's child"
        );
    }
    let sequences: std::collections::BTreeSet<&str> = spans
        .iter()
        .filter(|s| s.name == "apply_item")
        .map(|s| s.tags["sequence"].as_str())
        .collect();
    assert_eq!(sequences, ["0", "1"].into(), "{spans:#?}");
    // The item's request carries its own span of the trace.
    let received = upstream.received();
    assert!(
        received
            .iter()
            .all(|r| r.headers["traceparent"].starts_with(&format!("00-{trace_id}-"))),
        "{received:?}"
    );
}

/// The control plane logs JSON too: every line of a start, a served call and a stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_plane_logs_every_line_as_json() {
    let dir = std::env::temp_dir().join(unique("control-plane"));
    std::fs::create_dir_all(&dir).unwrap();
    let (address, log) = (
        wal_testkit::refusing_address(),
        dir.join("control-plane.log"),
    );
    let mut control_plane = KilledWhenDropped(
        Command::new(cargo_bin("wal-control-plane"))
            .args(["--listen", &address.to_string(), "--log-format", "json"])
            .arg("--store")
            .arg(format!("sqlite://{}", dir.join("registry.db").display()))
            .env("WAL_KAFKA_BOOTSTRAP", wal_testkit::kafka_bootstrap())
            .env("RUST_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start wal-control-plane"),
    );
    let channel = eventually(LIMIT, "the control plane to listen", || async {
        let endpoint = tonic::transport::Channel::from_shared(format!("http://{address}")).ok()?;
        endpoint.connect().await.ok()
    })
    .await;
    // Answered only once it serves, and so handles SIGTERM: sent while it is still starting,
    // the signal would end it as any process's default does.
    let serving = wal_testkit::health_status(&channel, "wal.v1.NamespaceRegistry").await;
    assert_eq!(
        serving,
        tonic_health::pb::health_check_response::ServingStatus::Serving
    );
    terminate(&control_plane.0);
    assert!(control_plane.0.wait().unwrap().success());
    every_line_is_json(&log, "");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("wal-control-plane ready"), "{text}");
}

/// A producer and a consumer process serving one namespace, exporting spans to the stack's
/// Jaeger and logging JSON to files of their own.
struct Traced {
    name: String,
    producer: ProducerProcess,
    consumer: KilledWhenDropped,
    producer_log: PathBuf,
    consumer_log: PathBuf,
}

impl Traced {
    async fn start(config: &str) -> Self {
        let name = serde_json::from_str::<Value>(config).unwrap()["namespace"]
            .as_str()
            .unwrap()
            .to_owned();
        let dir = std::env::temp_dir().join(unique("traces"));
        let namespaces = dir.join("namespaces");
        std::fs::create_dir_all(&namespaces).unwrap();
        std::fs::write(namespaces.join("ns.json"), config).unwrap();
        let (producer_log, consumer_log) = (dir.join("producer.log"), dir.join("consumer.log"));
        let producer = ProducerProcess::start_logging_with_env(
            &namespaces,
            Duration::from_secs(10),
            &producer_log,
            &exporting("wal-producer"),
        )
        .await;
        let consumer = consumer_process_logging_with_env(
            &namespaces,
            &consumer_log,
            &exporting("wal-consumer"),
        );
        Self {
            name,
            producer,
            consumer,
            producer_log,
            consumer_log,
        }
    }
}

/// A process's environment for exporting its spans to the stack's Jaeger as `service`, and
/// logging JSON (the consumer's debug lines too).
fn exporting(service: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", jaeger().0),
        ("OTEL_SERVICE_NAME", service.to_owned()),
        // Spans leave in a fifth of a second, not the SDK's default five.
        ("OTEL_BSP_SCHEDULE_DELAY", "200".to_owned()),
        ("WAL_LOG_FORMAT", "json".to_owned()),
        ("RUST_LOG", "info,wal_consumer=debug".to_owned()),
    ]
}

/// A trace id no earlier run used.
fn new_trace_id() -> String {
    format!("{:032x}", rand::rng().random::<u128>() | 1)
}

/// The caller's own span, the parent of a traced write's first span.
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// The caller's traceparent: a span of its own in the trace `trace_id`.
fn caller(trace_id: &str) -> String {
    format!("00-{trace_id}-{CALLER_SPAN}-01")
}

/// Whether every span's parent has arrived too (or is the caller's): a span is exported when
/// it ends, so a child reaches Jaeger before the parent it ran in.
fn whole(spans: &[Span]) -> bool {
    spans.iter().all(|span| {
        span.parent
            .as_deref()
            .is_none_or(|parent| parent == CALLER_SPAN || spans.iter().any(|s| s.id == parent))
    })
}

/// The trace's spans once Jaeger holds what `complete` asks for, every parent included.
async fn trace_with(trace_id: &str, complete: impl Fn(&[Span]) -> bool) -> Vec<Span> {
    let url = format!("{}/api/traces/{trace_id}", jaeger().1);
    eventually(LIMIT, "the whole trace in Jaeger", || {
        let (url, complete) = (url.clone(), &complete);
        async move {
            let spans = trace(&url).await?;
            (complete(&spans) && whole(&spans)).then_some(spans)
        }
    })
    .await
}

/// The spans Jaeger holds under one trace id; `None` until it has the trace.
async fn trace(url: &str) -> Option<Vec<Span>> {
    let text = reqwest::get(url).await.ok()?.text().await.ok()?;
    let body: Value = serde_json::from_str(&text).ok()?;
    let trace = body["data"].as_array()?.first()?;
    let services: BTreeMap<&str, &str> = trace["processes"]
        .as_object()?
        .iter()
        .filter_map(|(id, process)| Some((id.as_str(), process["serviceName"].as_str()?)))
        .collect();
    let spans = trace["spans"].as_array()?.iter().filter_map(|span| {
        let parent = span["references"]
            .as_array()?
            .iter()
            .find(|r| r["refType"] == "CHILD_OF")
            .and_then(|r| r["spanID"].as_str())
            .map(str::to_owned);
        let links = span["references"]
            .as_array()?
            .iter()
            .filter(|r| r["refType"] == "FOLLOWS_FROM")
            .filter_map(|r| Some(r["spanID"].as_str()?.to_owned()))
            .collect();
        let tags = span["tags"]
            .as_array()?
            .iter()
            .filter_map(|tag| {
                let value = match &tag["value"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                Some((tag["key"].as_str()?.to_owned(), value))
            })
            .collect();
        Some(Span {
            id: span["spanID"].as_str()?.to_owned(),
            name: span["operationName"].as_str()?.to_owned(),
            service: services.get(span["processID"].as_str()?)?.to_string(),
            parent,
            links,
            tags,
        })
    });
    Some(spans.collect())
}

/// Asserts every line of `log` is one JSON object with a time, a level, a target and the
/// event's fields; returns how many name the trace `trace_id` in one of their spans.
fn every_line_is_json(log: &std::path::Path, trace_id: &str) -> usize {
    let text = std::fs::read_to_string(log).unwrap();
    assert!(!text.trim().is_empty(), "{} is empty", log.display());
    let mut traced = 0;
    for line in text.lines() {
        let object: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {line}", log.display()));
        for key in ["timestamp", "level", "target", "fields"] {
            assert!(object.get(key).is_some(), "no {key}: {line}");
        }
        let spans = object["spans"].as_array().cloned().unwrap_or_default();
        if spans.iter().any(|span| span["trace_id"] == trace_id) {
            traced += 1;
        }
    }
    traced
}
