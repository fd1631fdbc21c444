#![allow(clippy::expect_used, clippy::unwrap_used)]

//! A two-phase write whose target fails permanently part of the way: the commit marker goes to
//! the DLQ saying how far it got, `walctl dlq show` says so too, and after the fix a redrive
//! applies the rest, from where it stopped, without applying the first part again; `walctl txn
//! list` shows it dead-lettered until then (and `walctl txn abort` is refused: it is committed),
//! and an open one until `walctl txn abort` aborts it through the control plane. And a replay
//! of a range holding a commit marker applies the transaction's items again, in order, from its
//! staging; once the staging is gone, the replay fails saying so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wal_proto::v1::transactions_client::TransactionsClient;
use wal_proto::v1::{AppendItemsRequest, TransactionItem, Trilean};
use wal_testkit::{
    Backend, TestProducer, Upstream, apply_config, control_plane_at, eventually, json_of,
    namespace_json, numbered_items, start_consumer, transaction_of, unique, walctl_at as walctl,
    with_durable_storage,
};

const ITEMS: u64 = 1000;
const FAILS_AT: u64 = 500;
const LIMIT: Duration = Duration::from_secs(120);

/// `numbered_items(count)` as payloads.
fn payloads(count: u64) -> impl Iterator<Item = Vec<u8>> {
    numbered_items(count).into_iter().map(String::into_bytes)
}

/// The ids `walctl txn list NAME --state STATE` prints.
async fn txn_list(url: &str, name: &str, state: &str) -> Vec<String> {
    let args = ["txn", "list", name, "--state", state, "-o", "json"];
    let listed = json_of(&walctl(url, &args).await);
    assert_eq!(listed["state"], state.replace('-', "_"), "{listed:#}");
    listed["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["transaction_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_failure_dead_letters_the_marker_and_a_redrive_resumes_where_it_stopped() {
    // The upstream refuses item 500 (400: permanent) until it is fixed, and keeps the bodies it
    // accepted, in order.
    let fixed = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(Mutex::new(Vec::<String>::new()));
    let upstream = {
        let (fixed, accepted) = (Arc::clone(&fixed), Arc::clone(&accepted));
        Upstream::start(move |request| {
            let body = String::from_utf8_lossy(&request.body).into_owned();
            if body == format!("item-{FAILS_AT}") && !fixed.load(Ordering::SeqCst) {
                return 400;
            }
            accepted.lock().unwrap().push(body);
            200
        })
        .await
    };
    let (mut registry, url) = control_plane_at().await;
    let config = with_durable_storage(
        &namespace_json(Backend::Kafka, 1, &upstream.target(), ""),
        "wal_txn_test",
    );
    let namespace = apply_config(&mut registry, &config).await;
    let name = namespace.name.clone();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace]).await;

    let id = unique("txn");
    let answer = TransactionsClient::new(producer.channel.clone())
        .write_transaction(transaction_of(&name, &id, payloads(ITEMS)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);

    // The marker is dead-lettered, naming the transaction and where it stopped.
    let dlq = |args: &'static [&'static str]| {
        let (url, name) = (url.clone(), name.clone());
        async move {
            let args = [
                &["dlq"],
                &args[..1],
                &[name.as_str()],
                &args[1..],
                &["-o", "json"],
            ]
            .concat();
            json_of(&walctl(&url, &args).await)
        }
    };
    let listed = eventually(LIMIT, "the marker in the DLQ", || async {
        let listed = dlq(&["list"]).await;
        (listed["total"] == 1).then_some(listed)
    })
    .await;
    let reason = listed["reasons"][0]["reason"].as_str().unwrap().to_owned();
    assert!(
        reason.contains(&format!("transaction {id}"))
            && reason.contains(&format!("stopped at item {FAILS_AT}")),
        "{listed:#}"
    );
    assert_eq!(listed["reasons"][0]["class"], "permanent", "{listed:#}");
    let marker = format!("txn:{id}");
    let shown = json_of(&walctl(&url, &["dlq", "show", &name, &marker, "-o", "json"]).await);
    assert_eq!(
        shown[0]["payload"]["transaction_id"],
        id.as_str(),
        "{shown:#}"
    );
    assert_eq!(shown[0]["payload"]["item_count"], ITEMS, "{shown:#}");
    let txn = json_of(&walctl(&url, &["txn", "show", &name, &id, "-o", "json"]).await);
    assert_eq!(txn["state"], "dead_lettered", "{txn:#}");
    assert_eq!(txn["applied_through"], FAILS_AT, "{txn:#}");
    assert_eq!(txn["item_count"], ITEMS, "{txn:#}");
    assert_eq!(txn["staged_items"], ITEMS, "{txn:#}");
    assert!(txn["reason"].as_str().unwrap().contains("400"), "{txn:#}");
    assert_eq!(txn_list(&url, &name, "dead-lettered").await, [id.as_str()]);
    assert!(txn_list(&url, &name, "applying").await.is_empty());
    // Read from here (--direct, for a control plane that is down), it is the same.
    let direct = ["txn", "show", &name, &id, "--direct", "-o", "json"];
    assert_eq!(json_of(&walctl(&url, &direct).await), txn);
    let listed = [
        "txn",
        "list",
        &name,
        "--state",
        "dead-lettered",
        "-o",
        "json",
    ];
    let direct = [&listed[..], &["--direct"]].concat();
    assert_eq!(
        json_of(&walctl(&url, &direct).await),
        json_of(&walctl(&url, &listed).await)
    );
    // Committed: an abort is refused, naming its state, and changes nothing.
    let abort = ["txn", "abort", &name, &id, "--reason", "too late"];
    let refused = walctl(&url, &abort).await;
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(3), "{said}");
    assert!(
        said.contains("is dead_lettered: its commit was accepted"),
        "{said}"
    );
    let before = numbered_items(FAILS_AT);
    assert_eq!(
        *accepted.lock().unwrap(),
        before,
        "items 0..500 applied, in order, once"
    );

    // Fixed, then redriven: items 500..999 follow, and 0..499 are not applied again.
    fixed.store(true, Ordering::SeqCst);
    let redriven = dlq(&["redrive", "--since", "1h"]).await;
    assert_eq!(redriven["redriven"], 1, "{redriven:#}");
    eventually(LIMIT, "the rest of the transaction applied", || async {
        (accepted.lock().unwrap().len() as u64 >= ITEMS).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let all = numbered_items(ITEMS);
    assert_eq!(
        *accepted.lock().unwrap(),
        all,
        "each item once, in sequence order"
    );
    let txn = json_of(&walctl(&url, &["txn", "show", &name, &id, "-o", "json"]).await);
    assert_eq!(txn["state"], "applied", "{txn:#}");
    assert_eq!(txn["applied_through"], ITEMS, "{txn:#}");
    assert!(txn_list(&url, &name, "dead-lettered").await.is_empty());
    assert!(txn_list(&url, &name, "applying").await.is_empty());

    // An open one is listed as open until it is aborted.
    let client = TransactionsClient::new(producer.channel.clone());
    let open = unique("open");
    client
        .clone()
        .append_items(AppendItemsRequest {
            namespace: name.clone(),
            transaction_id: open.clone(),
            items: vec![TransactionItem {
                sequence: 0,
                target: None,
                payload: b"later".to_vec(),
            }],
        })
        .await
        .unwrap();
    assert_eq!(txn_list(&url, &name, "open").await, [open.as_str()]);
    let abort = [
        "txn",
        "abort",
        &name,
        &open,
        "--reason",
        "stuck client",
        "-o",
        "json",
    ];
    let aborted = json_of(&walctl(&url, &abort).await);
    assert_eq!(aborted["changed"], true, "{aborted:#}");
    assert_eq!(aborted["transaction"]["state"], "aborted", "{aborted:#}");
    assert!(txn_list(&url, &name, "open").await.is_empty());
    let shown = json_of(&walctl(&url, &["txn", "show", &name, &open, "-o", "json"]).await);
    assert_eq!(shown["state"], "aborted", "{shown:#}");
    assert_eq!(shown["staged_items"], 0, "its items are dropped: {shown:#}");
    assert!(
        shown["reason"]
            .as_str()
            .unwrap()
            .ends_with(": stuck client"),
        "{shown:#}"
    );
    // Its client's next append is refused; a second abort changes nothing.
    let append = client
        .clone()
        .append_items(AppendItemsRequest {
            namespace: name.clone(),
            transaction_id: open.clone(),
            items: vec![TransactionItem {
                sequence: 1,
                target: None,
                payload: b"later still".to_vec(),
            }],
        })
        .await
        .unwrap_err();
    assert_eq!(append.code(), tonic::Code::FailedPrecondition, "{append:?}");
    let again = json_of(&walctl(&url, &abort).await);
    assert_eq!(again["changed"], false, "{again:#}");
    // An id never staged is recorded as aborted, so an append on its way cannot open it.
    let never = unique("never");
    let abort = [
        "txn",
        "abort",
        &name,
        &never,
        "--reason",
        "on its way",
        "-o",
        "json",
    ];
    let recorded = json_of(&walctl(&url, &abort).await);
    let summary = recorded["summary"].as_str().unwrap();
    assert!(summary.contains("recorded as aborted"), "{recorded:#}");
    let late = client
        .clone()
        .append_items(AppendItemsRequest {
            namespace: name.clone(),
            transaction_id: never.clone(),
            items: vec![TransactionItem {
                sequence: 0,
                target: None,
                payload: b"on its way".to_vec(),
            }],
        })
        .await
        .unwrap_err();
    assert_eq!(late.code(), tonic::Code::FailedPrecondition, "{late:?}");
    // Each abort is audited, the refused one too.
    let audit = json_of(&walctl(&url, &["audit", &name, "-o", "json"]).await);
    let aborts: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verb"] == "abort transaction")
        .map(|r| r["result"].as_str().unwrap().split(':').next().unwrap())
        .collect();
    assert_eq!(
        aborts,
        ["done", "unchanged", "done", "refused"],
        "{audit:#}"
    );
    let unknown = walctl(&url, &["txn", "show", &name, "no-such-txn"]).await;
    assert_eq!(unknown.status.code(), Some(4), "not found");

    consumer.shutdown().await;
    producer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_applies_a_committed_transaction_again_and_fails_loudly_once_its_staging_is_gone()
{
    const REPLAYED: u64 = 20;
    const KEYSPACE: &str = "wal_txn_test";
    let upstream = Upstream::start(|_| 200).await;
    let (mut registry, url) = control_plane_at().await;
    let config = with_durable_storage(
        &namespace_json(Backend::Kafka, 1, &upstream.target(), ""),
        KEYSPACE,
    );
    let namespace = apply_config(&mut registry, &config).await;
    let name = namespace.name.clone();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace]).await;

    let from = humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string();
    let id = unique("txn");
    let answer = TransactionsClient::new(producer.channel.clone())
        .write_transaction(transaction_of(&name, &id, payloads(REPLAYED)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);
    let once = numbered_items(REPLAYED);
    eventually(LIMIT, "the transaction applied", || async {
        (upstream.bodies() == once).then_some(())
    })
    .await;
    consumer.shutdown().await;
    producer.shutdown().await;

    // Applied already, and applied again by the replay: every item, in order.
    let replay = [
        "replay",
        "--direct",
        "--namespace",
        &name,
        "--from",
        &from,
        "-o",
        "json",
    ];
    let replayed = json_of(&walctl(&url, &replay).await);
    assert_eq!(replayed["applied"], 1, "one marker: {replayed:#}");
    let twice = [once.clone(), once.clone()].concat();
    assert_eq!(
        upstream.bodies(),
        twice,
        "the items again, in sequence order"
    );

    // The staging gone (as when its retention ran out), the items first (the row's TTL is
    // renewed by each of its updates), then the row: the replay fails and names why.
    let cql = wal_testkit::Cql::connect().await;
    for (table, why) in [
        ("transaction_items", "is gone from its staging"),
        ("transactions", "staging is gone"),
    ] {
        cql.session
            .query_unpaged(
                format!("DELETE FROM {KEYSPACE}.{table} WHERE namespace = ? AND id = ?"),
                (&name, &id),
            )
            .await
            .unwrap();
        // From the start of the range again, not from the first run's checkpoint.
        let again = [&replay[..], &["--from-start"]].concat();
        let failed = walctl(&url, &again).await;
        assert_eq!(failed.status.code(), Some(1), "{failed:?}");
        let report: serde_json::Value = serde_json::from_slice(&failed.stdout).unwrap();
        assert_eq!(report["applied"], 0, "{report:#}");
        assert!(report["failed"].to_string().contains(why), "{report:#}");
    }
    assert_eq!(upstream.bodies(), twice, "nothing applied in part");
}
