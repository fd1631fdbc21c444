//! `walctl dlq` on the real stack: entries a broken target refused are listed with their reason
//! and shown in full; after the target is fixed, a redrive puts every one back exactly once to
//! the target's effect, at the rate asked for, and resumes where it stopped when walctl is
//! killed halfway.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use wal_namespaces::Backend;
use wal_proto::v1::WriteToLogRequest;
use wal_testkit::{TestProducer, namespace_json, write, write_true};
use wal_testkit::{Upstream, eventually, start_consumer};
use wal_testkit::{apply_config, control_plane_at, json_of, walctl_at as walctl};

/// Whether the upstream refuses everything (400: permanent, so straight to the DLQ).
static BROKEN: AtomicBool = AtomicBool::new(true);

const ENTRIES: usize = 30;
const RATE: u32 = 10;

/// A control plane, a namespace on `backend` delivering to `upstream` applied to it, and a
/// producer and a consumer serving it.
struct Fleet {
    url: String,
    name: String,
    producer: TestProducer,
    consumer: wal_consumer::ConsumerHandle,
}

async fn fleet_for(backend: Backend, upstream: &Upstream) -> Fleet {
    let (mut registry, url) = control_plane_at().await;
    let config = namespace_json(backend, 1, &upstream.target(), "");
    let namespace = apply_config(&mut registry, &config).await;
    Fleet {
        url,
        name: namespace.name.clone(),
        producer: TestProducer::start(vec![namespace.clone()]).await,
        consumer: start_consumer(vec![namespace]).await,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_after_the_fix_delivers_every_dead_letter_once_at_the_rate_and_resumes() {
    let upstream = Upstream::start(|_| {
        if BROKEN.load(Ordering::SeqCst) {
            400
        } else {
            200
        }
    })
    .await;
    let Fleet {
        url,
        name,
        mut producer,
        consumer,
    } = fleet_for(Backend::Kafka, &upstream).await;

    let mut ids = BTreeSet::new();
    for i in 0..ENTRIES {
        let request = WriteToLogRequest {
            key: format!("key-{i}"),
            ..write(&name, format!("mutation {i}").as_bytes())
        };
        let answer_id = write_true(&producer.client, request).await;
        ids.insert(answer_id);
    }

    // Listed: every entry, under one reason naming the target's answer.
    let listed = eventually(
        Duration::from_secs(60),
        "every entry dead-lettered",
        || async {
            let listed = json_of(&walctl(&url, &["dlq", "list", &name, "-o", "json"]).await);
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
    let shown = json_of(&walctl(&url, &["dlq", "show", &name, &one, "-o", "json"]).await);
    assert_eq!(shown[0]["id"], one.as_str(), "{shown:#}");
    assert!(
        shown[0]["payload"]
            .as_str()
            .unwrap()
            .starts_with("mutation "),
        "{shown:#}"
    );
    let missing = walctl(&url, &["dlq", "show", &name, "no-such-entry"]).await;
    assert_eq!(missing.status.code(), Some(4));

    // A dry run changes nothing and writes no checkpoint.
    let checkpoint = std::env::temp_dir().join(format!("{}.json", wal_testkit::unique("redrive")));
    let checkpoint_arg = checkpoint.display().to_string();
    let dry = json_of(
        &walctl(
            &url,
            &[
                "dlq",
                "redrive",
                &name,
                "--dry-run",
                "--checkpoint",
                &checkpoint_arg,
                "-o",
                "json",
            ],
        )
        .await,
    );
    assert_eq!(dry["redriven"], 0, "{dry:#}");
    assert_eq!(dry["left"]["would be redriven"], ENTRIES, "{dry:#}");
    assert!(!checkpoint.exists());

    // The target is fixed. A redrive is killed part of the way through, then run again.
    BROKEN.store(false, Ordering::SeqCst);
    let fixed_at = SystemTime::now();
    let rate = RATE.to_string();
    // With a relative --since: its bounds are kept in the checkpoint, so the rerun resumes.
    let redrive_args = [
        "dlq",
        "redrive",
        &name,
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
        .arg(&url)
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
    let second = json_of(&walctl(&url, &redrive_args).await);
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
            for received in upstream.received().iter().filter(|r| r.at >= fixed_at) {
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
    let total = upstream
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
    let third = json_of(&walctl(&url, &redrive_args).await);
    assert_eq!(third["redriven"], 0, "{third:#}");

    consumer.shutdown().await;
    producer.shutdown().await;
    std::fs::remove_file(&checkpoint).unwrap();
}

/// Whether the upstream of the SQS test refuses everything.
static SQS_BROKEN: AtomicBool = AtomicBool::new(true);

#[tokio::test]
async fn on_sqs_filters_and_the_redrive_cap_leave_entries_in_the_dlq_and_a_redrive_deletes_them() {
    let upstream = Upstream::start(|_| {
        if SQS_BROKEN.load(Ordering::SeqCst) {
            400
        } else {
            200
        }
    })
    .await;
    let Fleet {
        url,
        name,
        mut producer,
        consumer,
    } = fleet_for(Backend::Sqs, &upstream).await;
    let mut ids = BTreeSet::new();
    for i in 0..6 {
        let answer_id = write_true(
            &producer.client,
            write(&name, format!("sqs mutation {i}").as_bytes()),
        )
        .await;
        ids.insert(answer_id);
    }
    let total = |listed: &Value| listed["total"].as_u64().unwrap();
    eventually(
        Duration::from_secs(60),
        "every entry dead-lettered",
        || async {
            let listed = json_of(&walctl(&url, &["dlq", "list", &name, "-o", "json"]).await);
            (total(&listed) == 6).then_some(())
        },
    )
    .await;

    SQS_BROKEN.store(false, Ordering::SeqCst);
    // Neither of these takes anything: the failures were permanent, and none may be redriven.
    let other_class = json_of(
        &walctl(
            &url,
            &[
                "dlq",
                "redrive",
                &name,
                "--class",
                "retryable",
                "-o",
                "json",
            ],
        )
        .await,
    );
    assert_eq!(other_class["redriven"], 0, "{other_class:#}");
    assert_eq!(
        other_class["left"]["another error class"], 6,
        "{other_class:#}"
    );
    let capped = json_of(
        &walctl(
            &url,
            &["dlq", "redrive", &name, "--max-redrives", "0", "-o", "json"],
        )
        .await,
    );
    assert_eq!(capped["redriven"], 0, "{capped:#}");
    assert_eq!(
        capped["left"]["redriven --max-redrives times already"], 6,
        "{capped:#}"
    );
    // Passed-over messages were made visible again.
    let listed = json_of(&walctl(&url, &["dlq", "list", &name, "-o", "json"]).await);
    assert_eq!(total(&listed), 6, "{listed:#}");

    let redriven = json_of(
        &walctl(
            &url,
            &[
                "dlq",
                "redrive",
                &name,
                "--class",
                "permanent",
                "--since",
                "1h",
                "-o",
                "json",
            ],
        )
        .await,
    );
    assert_eq!(redriven["redriven"], 6, "{redriven:#}");
    eventually(
        Duration::from_secs(60),
        "every redriven entry delivered",
        || async {
            let delivered: BTreeSet<String> = upstream
                .received()
                .iter()
                .filter_map(|r| r.headers.get("idempotency-key").cloned())
                .collect();
            (delivered == ids).then_some(())
        },
    )
    .await;
    let listed = json_of(&walctl(&url, &["dlq", "list", &name, "-o", "json"]).await);
    assert_eq!(
        total(&listed),
        0,
        "redriven messages leave an SQS DLQ: {listed:#}"
    );

    consumer.shutdown().await;
    producer.shutdown().await;
}
