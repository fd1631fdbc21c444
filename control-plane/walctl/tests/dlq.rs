//! `walctl dlq` on the real stack: entries a broken target refused are listed with their reason
//! and shown in full (through the control plane); after the target is fixed, a redrive walctl
//! runs itself (--direct) puts every one back exactly once to the target's effect, at the rate
//! asked for, and resumes where it stopped when walctl is killed halfway; on SQS, a redrive the
//! control plane runs, followed by walctl, honours filters and the cap.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use wal_namespaces::Backend;
use wal_proto::v1::WriteToLogRequest;
use wal_testkit::{TestProducer, namespace_json, write, write_true};
use wal_testkit::{Upstream, eventually, start_consumer};
use wal_testkit::{apply_config, control_plane_at, json_of, walctl_at as walctl};

const ENTRIES: usize = 30;
const RATE: u32 = 10;

/// A control plane, a namespace on `backend` delivering to an upstream that refuses everything
/// (400: permanent, so straight to the DLQ) until it is mended, and a producer and a consumer
/// serving the namespace.
pub(super) struct Fleet {
    pub(super) url: String,
    pub(super) name: String,
    pub(super) upstream: Upstream,
    pub(super) producer: TestProducer,
    consumer: wal_testkit::ConsumerHandle,
}

impl Fleet {
    pub(super) async fn start(backend: Backend) -> Self {
        let upstream = Upstream::broken(400).await;
        let (mut registry, url) = control_plane_at().await;
        let config = namespace_json(backend, 1, &upstream.target(), "");
        let namespace = apply_config(&mut registry, &config).await;
        Self {
            url,
            name: namespace.name.clone(),
            upstream,
            producer: TestProducer::start(vec![namespace.clone()]).await,
            consumer: start_consumer(vec![namespace]).await,
        }
    }

    /// `walctl dlq ARGS -o json` on the namespace's control plane, as JSON.
    pub(super) async fn dlq(&self, args: &[&str]) -> Value {
        let args = [&["dlq"], args, &["-o", "json"]].concat();
        json_of(&walctl(&self.url, &args).await)
    }

    pub(super) async fn stop(mut self) {
        self.consumer.shutdown().await;
        self.producer.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_after_the_fix_delivers_every_dead_letter_once_at_the_rate_and_resumes() {
    let fleet = Fleet::start(Backend::Kafka).await;
    let (url, name) = (&fleet.url, &fleet.name);

    let mut ids = BTreeSet::new();
    for i in 0..ENTRIES {
        let request = WriteToLogRequest {
            key: format!("key-{i}"),
            ..write(name, format!("mutation {i}").as_bytes())
        };
        let answer_id = write_true(&fleet.producer.client, request).await;
        ids.insert(answer_id);
    }

    // Listed: every entry, under one reason naming the target's answer.
    let listed = eventually(
        Duration::from_secs(60),
        "every entry dead-lettered",
        || async {
            let listed = fleet.dlq(&["list", name]).await;
            (listed["total"] == ENTRIES).then_some(listed)
        },
    )
    .await;
    let reasons = listed["reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 1, "{listed:#}");
    assert_eq!(reasons[0]["class"], "permanent", "{listed:#}");
    assert_eq!(reasons[0]["entries"], ENTRIES, "{listed:#}");
    assert!(
        reasons[0]["reason"].as_str().unwrap().contains("400"),
        "{listed:#}"
    );
    let listed_ids: BTreeSet<String> = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed_ids, ids);

    // Shown in full.
    let one = ids.first().unwrap().clone();
    let shown = fleet.dlq(&["show", name, &one]).await;
    assert_eq!(shown[0]["id"], one.as_str(), "{shown:#}");
    assert!(
        shown[0]["payload"]
            .as_str()
            .unwrap()
            .starts_with("mutation "),
        "{shown:#}"
    );
    let missing = walctl(url, &["dlq", "show", name, "no-such-entry"]).await;
    assert_eq!(missing.status.code(), Some(4));

    // A dry run changes nothing and writes no checkpoint.
    let checkpoint = std::env::temp_dir().join(format!("{}.json", wal_testkit::unique("redrive")));
    let checkpoint_arg = checkpoint.display().to_string();
    let dry = fleet
        .dlq(&[
            "redrive",
            name,
            "--dry-run",
            "--direct",
            "--checkpoint",
            &checkpoint_arg,
        ])
        .await;
    assert_eq!(dry["redriven"], 0, "{dry:#}");
    assert_eq!(dry["left"]["would be redriven"], ENTRIES, "{dry:#}");
    assert!(!checkpoint.exists());

    // The target is fixed. A redrive is killed part of the way through, then run again.
    fleet.upstream.mend();
    let fixed_at = SystemTime::now();
    let rate = RATE.to_string();
    // walctl running the redrive itself (--direct), with a relative --since: its bounds are
    // kept in the checkpoint, so the rerun resumes.
    let redrive_args = [
        "dlq",
        "redrive",
        "--direct",
        name,
        "--since",
        "1h",
        "--rate",
        &rate,
        "--checkpoint",
        &checkpoint_arg,
        "-o",
        "json",
    ];
    let started = Instant::now();
    let mut first = tokio::process::Command::new(env!("CARGO_BIN_EXE_walctl"))
        .arg("--control-plane")
        .arg(url)
        .args(redrive_args)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let redriven_before_kill = eventually(
        Duration::from_secs(30),
        "the first run to redrive some",
        || async {
            let saved: Value = serde_json::from_slice(&std::fs::read(&checkpoint).ok()?).ok()?;
            let redriven = saved["done"].as_u64()?;
            (redriven >= 5).then_some(redriven)
        },
    )
    .await;
    first.start_kill().unwrap();
    first.wait().await.unwrap();
    let first_took = started.elapsed();
    assert!(
        redriven_before_kill < ENTRIES as u64,
        "the first run was to be killed halfway, but it redrove {redriven_before_kill}"
    );

    let started = Instant::now();
    let second = json_of(&walctl(url, &redrive_args).await);
    let second_took = started.elapsed();
    let saved: Value = serde_json::from_slice(&std::fs::read(&checkpoint).unwrap()).unwrap();
    assert_eq!(saved["done"], ENTRIES, "{saved:#}");
    let resumed = second["redriven"].as_u64().unwrap();
    assert!(
        resumed + redriven_before_kill >= ENTRIES as u64 && resumed < ENTRIES as u64,
        "{second:#}"
    );

    // Every entry reaches the fixed target; a kill may repeat the one entry in flight at the
    // time (same id, which the target's idempotency absorbs), never more.
    let successes = eventually(
        Duration::from_secs(60),
        "every redriven entry delivered",
        || async {
            let mut per_id: BTreeMap<String, usize> = BTreeMap::new();
            for received in fleet
                .upstream
                .received()
                .iter()
                .filter(|r| r.at >= fixed_at)
            {
                let id = received
                    .headers
                    .get("idempotency-key")
                    .cloned()
                    .unwrap_or_default();
                *per_id.entry(id).or_default() += 1;
            }
            let delivered: BTreeSet<String> = per_id.keys().cloned().collect();
            (delivered == ids).then_some(per_id)
        },
    )
    .await;
    // Copies still on their way would arrive within a few seconds.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let total = fleet
        .upstream
        .received()
        .iter()
        .filter(|r| r.at >= fixed_at)
        .count();
    assert!(total <= ENTRIES + 1, "{total} deliveries: {successes:?}");

    // The rate held: after the first, no redrive came sooner than 1/RATE s after the one before.
    let floor = Duration::from_secs_f64((ENTRIES - 2) as f64 / f64::from(RATE));
    assert!(
        first_took + second_took >= floor,
        "{first_took:?} + {second_took:?} < {floor:?}"
    );

    // Run again: nothing left to redrive.
    let third = json_of(&walctl(url, &redrive_args).await);
    assert_eq!(third["redriven"], 0, "{third:#}");

    fleet.stop().await;
    std::fs::remove_file(&checkpoint).unwrap();
}

#[tokio::test]
async fn on_sqs_filters_and_the_redrive_cap_leave_entries_in_the_dlq_and_a_redrive_deletes_them() {
    let fleet = Fleet::start(Backend::Sqs).await;
    let name = &fleet.name;
    let mut ids = BTreeSet::new();
    for i in 0..6 {
        let answer_id = write_true(
            &fleet.producer.client,
            write(name, format!("sqs mutation {i}").as_bytes()),
        )
        .await;
        ids.insert(answer_id);
    }
    let total = |listed: &Value| listed["total"].as_u64().unwrap();
    eventually(
        Duration::from_secs(60),
        "every entry dead-lettered",
        || async {
            let listed = fleet.dlq(&["list", name]).await;
            (total(&listed) == 6).then_some(())
        },
    )
    .await;

    fleet.upstream.mend();
    // Neither of these takes anything: the failures were permanent, and none may be redriven.
    let other_class = fleet.dlq(&["redrive", name, "--class", "retryable"]).await;
    assert_eq!(other_class["redriven"], 0, "{other_class:#}");
    assert_eq!(
        other_class["left"]["another error class"], 6,
        "{other_class:#}"
    );
    let capped = fleet.dlq(&["redrive", name, "--max-redrives", "0"]).await;
    assert_eq!(capped["redriven"], 0, "{capped:#}");
    assert_eq!(
        capped["left"]["redriven --max-redrives times already"], 6,
        "{capped:#}"
    );
    // Passed-over messages were made visible again.
    let listed = fleet.dlq(&["list", name]).await;
    assert_eq!(total(&listed), 6, "{listed:#}");

    let redriven = fleet
        .dlq(&["redrive", name, "--class", "permanent", "--since", "1h"])
        .await;
    assert_eq!(redriven["redriven"], 6, "{redriven:#}");
    eventually(
        Duration::from_secs(60),
        "every redriven entry delivered",
        || async {
            let delivered: BTreeSet<String> = fleet
                .upstream
                .received()
                .iter()
                .filter_map(|r| r.headers.get("idempotency-key").cloned())
                .collect();
            (delivered == ids).then_some(())
        },
    )
    .await;
    let listed = fleet.dlq(&["list", name]).await;
    assert_eq!(
        total(&listed),
        0,
        "redriven messages leave an SQS DLQ: {listed:#}"
    );

    fleet.stop().await;
}

/// With OpenTelemetry's environment set, walctl exports a span per entry it redrives itself
/// (--direct; the control plane's redrives run the same code, exporting when it does), linked
/// to the write it repeats, and the redriven copy carries that span on to its delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_is_a_span_linked_to_the_write_it_repeats() {
    let fleet = Fleet::start(Backend::Kafka).await;
    let (url, name) = (&fleet.url, &fleet.name);
    let written = format!("{:032x}", rand::random::<u128>() | 1);
    let mut request = tonic::Request::new(write(name, b"traced"));
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{written}-00f067aa0ba902b7-01").parse().unwrap(),
    );
    let id = write_true(&fleet.producer.client, request).await;
    eventually(Duration::from_secs(60), "the entry in the DLQ", || async {
        (fleet.dlq(&["list", name]).await["total"] == 1).then_some(())
    })
    .await;

    fleet.upstream.mend();
    let (otlp, query) = wal_testkit::jaeger();
    let redrive = tokio::process::Command::new(env!("CARGO_BIN_EXE_walctl"))
        .args([
            "--control-plane",
            url,
            "dlq",
            "redrive",
            "--direct",
            name,
            "-o",
            "json",
        ])
        .env("WAL_CQL_NODES", wal_testkit::cql_nodes().join(","))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
        .env("OTEL_BSP_SCHEDULE_DELAY", "200")
        .output()
        .await
        .unwrap();
    assert_eq!(json_of(&redrive)["redriven"], 1);
    let delivered = eventually(
        Duration::from_secs(60),
        "the redriven copy upstream",
        || async {
            fleet
                .upstream
                .received()
                .into_iter()
                .find(|r| r.status == 200)
        },
    )
    .await;
    // The copy's delivery is in the redrive's trace, not the write's.
    let parent = &delivered.headers["traceparent"];
    let redrive_trace = parent.split('-').nth(1).unwrap().to_owned();
    assert_ne!(redrive_trace, written, "{parent}");

    let url = format!("{query}/api/traces/{redrive_trace}");
    let span = eventually(
        Duration::from_secs(60),
        "the redrive's span in Jaeger",
        || {
            let url = url.clone();
            async move {
                let text = reqwest::get(&url).await.ok()?.text().await.ok()?;
                let body: Value = serde_json::from_str(&text).ok()?;
                let spans = body["data"][0]["spans"].as_array()?.clone();
                spans.into_iter().find(|s| s["operationName"] == "redrive")
            }
        },
    )
    .await;
    let tags: BTreeMap<String, Value> = span["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["key"].as_str().unwrap().to_owned(), t["value"].clone()))
        .collect();
    assert_eq!(tags["entry_id"], id.as_str(), "{span:#}");
    let linked = span["references"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["refType"] == "FOLLOWS_FROM" && r["traceID"] == written.as_str());
    assert!(linked, "the redrive links to the write's trace: {span:#}");
    fleet.stop().await;
}
