//! The corruption drill through the control plane: `walctl replay` without --direct starts
//! StartReplay, which puts the range back on the namespace's Kafka queue for its consumer to
//! apply; the table, truncated, comes back with every write but the excluded one. Also: its dry
//! run changes nothing and names an excluded id it never read, the same request run again puts
//! nothing back twice, it is audited, and what only walctl's own replay can do is refused with
//! the way to it.

use std::time::{Duration, SystemTime};

use wal_namespaces::Backend;
use wal_proto::v1::AuditRequest;
use wal_proto::v1::operations_client::OperationsClient;
use wal_testkit::{Cql, KEYSPACE, TestProducer, cql_target, namespace_json, start_consumer};
use wal_testkit::{apply_config, control_plane_at, json_of, kafka_log, put, walctl_at as walctl};

use super::replay::{Rows, applied, mutate, put_row};

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_through_the_control_plane_brings_a_truncated_table_back_but_the_excluded_write() {
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let (mut registry, url) = control_plane_at().await;
    let config = namespace_json(Backend::Kafka, 1, &cql_target(&table), "");
    let namespace = apply_config(&mut registry, &config).await;
    let name = namespace.name.clone();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;
    let from = humantime::format_rfc3339_micros(SystemTime::now() - Duration::from_secs(1));
    let from = from.to_string();

    // Four writes, all applied; one of them offending.
    let (mut all, mut replayed) = (Rows::new(), Rows::new());
    put_row(&mut producer, &name, "r1", "one", [&mut all, &mut replayed]).await;
    let offending = mutate(&mut producer, &name, "r2", put("r2", "garbage")).await;
    all.insert("r2".to_owned(), Some("garbage".to_owned()));
    put_row(
        &mut producer,
        &name,
        "r3",
        "three",
        [&mut all, &mut replayed],
    )
    .await;
    put_row(&mut producer, &name, "r1", "uno", [&mut all, &mut replayed]).await;
    applied(&cql, &table, &all).await;

    // The corruption: the table emptied.
    let truncate = format!("TRUNCATE {KEYSPACE}.{table}");
    cql.session.query_unpaged(truncate, &[]).await.unwrap();
    assert!(cql.rows(&table).await.is_empty());

    let replay = |more: &'static [&'static str]| {
        let mut args = vec![
            "-o",
            "json",
            "replay",
            "--namespace",
            name.as_str(),
            "--from",
            from.as_str(),
            "--exclude-id",
            offending.as_str(),
        ];
        args.extend_from_slice(more);
        args
    };
    // The dry run names an excluded id it never read: a typo would put the offending write back.
    let dry = json_of(&walctl(&url, &replay(&["--dry-run", "--exclude-id", "a-typo"])).await);
    assert_eq!(dry["state"], "dry run", "{dry:#}");
    assert_eq!(dry["left"]["would be replayed"], 3, "{dry:#}");
    assert_eq!(dry["left"]["excluded by id"], 1, "{dry:#}");
    assert_eq!(dry["range"]["excluded_ids"], 2, "{dry:#}");
    assert_eq!(
        dry["range"]["excluded_not_read"],
        serde_json::json!(["a-typo"]),
        "{dry:#}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        cql.rows(&table).await.is_empty(),
        "a dry run put nothing back"
    );

    let done = json_of(&walctl(&url, &replay(&[])).await);
    assert_eq!(done["state"], "done", "{done:#}");
    assert_eq!(done["replayed"], 3, "{done:#}");
    assert_eq!(done["read"], 4, "{done:#}");
    assert_eq!(
        done["range"]["excluded_not_read"],
        serde_json::json!([]),
        "{done:#}"
    );
    // The consumer applies the copies by their write times: r1 ends as its later write says.
    applied(&cql, &table, &replayed).await;
    let topic = &namespace.queues[0].name;
    assert_eq!(
        kafka_log(topic).await.len(),
        4 + 3,
        "the writes and the copies"
    );

    // The same request again: its range was read in full, and its own copies lie past it.
    let again = json_of(&walctl(&url, &replay(&[])).await);
    assert_eq!(again["state"], "done", "{again:#}");
    assert_eq!(
        (&again["replayed"], &again["replayed_before"]),
        (&serde_json::json!(0), &serde_json::json!(3)),
        "{again:#}"
    );
    assert_eq!(
        kafka_log(topic).await.len(),
        4 + 3,
        "nothing put back twice"
    );

    let mut operations = OperationsClient::connect(url.clone()).await.unwrap();
    let audit = operations
        .audit(AuditRequest {
            namespace: name.clone(),
            limit: 10,
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    let replays: Vec<&str> = audit
        .iter()
        .filter(|r| r.verb == "replay")
        .map(|r| r.result.as_str())
        .collect();
    // Newest first: the second run's start and end, then the first's.
    assert_eq!(replays.len(), 4, "each run started and ended: {replays:?}");
    assert!(
        replays[0].starts_with("done") && replays[0].contains("0 replayed"),
        "{replays:?}"
    );
    assert!(
        replays[2].starts_with("done") && replays[2].contains("3 replayed"),
        "{replays:?}"
    );
    assert!(
        replays[1].starts_with("started") && replays[3].starts_with("started"),
        "{replays:?}"
    );

    // What only walctl's own replay does is refused, naming the way to it.
    let scratch = walctl(
        &url,
        &[
            "replay",
            "--namespace",
            &name,
            "--from",
            &from,
            "--checkpoint",
            "/tmp/a-checkpoint.json",
        ],
    )
    .await;
    assert_eq!(scratch.status.code(), Some(2), "{}", stderr(&scratch));
    assert!(
        stderr(&scratch).contains("--direct"),
        "{}",
        stderr(&scratch)
    );
    let sqs = apply_config(
        &mut registry,
        &namespace_json(Backend::Sqs, 1, &cql_target(&table), ""),
    )
    .await;
    let on_sqs = walctl(&url, &["replay", "--namespace", &sqs.name, "--from", &from]).await;
    assert_eq!(on_sqs.status.code(), Some(3), "{}", stderr(&on_sqs));
    assert!(
        stderr(&on_sqs).contains("walctl replay --direct"),
        "{}",
        stderr(&on_sqs)
    );

    consumer.shutdown().await;
    producer.shutdown().await;
}

/// A replay to one destination (what `walctl replication reset` asks for a region): the store
/// named takes the copies again, the namespace's own target, caught up past them, nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_to_one_destination_reaches_it_alone() {
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let (mut registry, url) = control_plane_at().await;
    let events = wal_testkit::unique("replay-events");
    wal_testkit::provision_topic(&events).await;
    let stores =
        wal_testkit::destinations(&[wal_testkit::kafka_store("events", &events, "earliest")]);
    let config = namespace_json(Backend::Kafka, 1, &cql_target(&table), &stores);
    let namespace = apply_config(&mut registry, &config).await;
    let name = namespace.name.clone();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;
    let from = humantime::format_rfc3339_micros(SystemTime::now() - Duration::from_secs(1));
    let from = from.to_string();
    let mut rows = Rows::new();
    put_row(&mut producer, &name, "r1", "one", [&mut rows]).await;
    put_row(&mut producer, &name, "r2", "two", [&mut rows]).await;
    applied(&cql, &table, &rows).await;
    let published = |count: usize| {
        let events = events.clone();
        async move {
            wal_testkit::eventually(
                Duration::from_secs(60),
                "the store to publish the entries",
                || async { (wal_testkit::topic_records(&events).await >= count).then_some(()) },
            )
            .await;
        }
    };
    published(2).await;
    let truncate = format!("TRUNCATE {KEYSPACE}.{table}");
    cql.session.query_unpaged(truncate, &[]).await.unwrap();

    let unknown = walctl(
        &url,
        &[
            "replay",
            "--namespace",
            &name,
            "--from",
            &from,
            "--destination",
            "nowhere",
        ],
    )
    .await;
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
    assert!(
        stderr(&unknown).contains("default, events"),
        "names the destinations: {}",
        stderr(&unknown)
    );
    // `replication reset` is the same replay to a region: this namespace replicates to none.
    let reset = walctl(
        &url,
        &["replication", "reset", &name, "somewhere", "--since", "1h"],
    )
    .await;
    assert_eq!(reset.status.code(), Some(2), "{}", stderr(&reset));
    assert!(
        stderr(&reset).contains("no destination 'region-somewhere'"),
        "{}",
        stderr(&reset)
    );
    let args = [
        "-o",
        "json",
        "replay",
        "--namespace",
        &name,
        "--from",
        &from,
        "--destination",
        "events",
    ];
    let done = json_of(&walctl(&url, &args).await);
    assert_eq!(
        (&done["state"], &done["replayed"]),
        (&"done".into(), &2.into()),
        "{done:#}"
    );
    assert_eq!(done["range"]["destination"], "events", "{done:#}");
    published(4).await;
    // The namespace's own reader has read past the copies, and applied none of them.
    wal_testkit::eventually(
        Duration::from_secs(60),
        "the default destination caught up",
        || async {
            let rows =
                json_of(&walctl(&url, &["destinations", "status", &name, "-o", "json"]).await);
            let default = rows
                .as_array()?
                .iter()
                .find(|r| r["destination"] == "default")?
                .clone();
            (default["lag_entries"] == 0).then_some(())
        },
    )
    .await;
    assert!(
        cql.rows(&table).await.is_empty(),
        "the default destination applied copies meant for the store"
    );
    assert_eq!(
        wal_testkit::topic_records(&events).await,
        4,
        "the store took each copy once"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}
