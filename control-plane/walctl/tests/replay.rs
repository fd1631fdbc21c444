//! The corruption drill on the real stack: mutations written through WriteToLog and applied to
//! Cassandra; a backup taken; more writes, one of them offending; the table corrupted and the
//! backup restored; then `walctl replay` from the backup's time, leaving the offending write out,
//! interrupted once and resumed. The table must equal the oracle (every write but the offending
//! one), row by row. Also: a dry run writes nothing, and bad arguments get clear messages.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::process::Output;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use wal_namespaces::{Backend, Namespace};
use wal_proto::v1::WriteToLogRequest;
use wal_testkit::ConsumerHandle;
use wal_testkit::{Cql, KEYSPACE, cql_target, delete, eventually, put, start_consumer, write_true};
use wal_testkit::{TestProducer, namespace_json, write};
use wal_testkit::{apply_config, control_plane_at, json_of, walctl_at as walctl};

pub(super) type Rows = BTreeMap<String, Option<String>>;

/// `replay --direct --namespace NAME --from FROM`, then `more`: walctl replaying itself (the
/// control plane's replay: `replay_through`).
fn replay_args<'a>(name: &'a str, from: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    [
        &["replay", "--direct", "--namespace", name, "--from", from][..],
        more,
    ]
    .concat()
}

/// The entries of the drill's range that a replay applies: every write after the backup but the
/// offending one.
const RANGE: u64 = 15;

/// Writes one mutation of `key` and returns its entry id.
pub(super) async fn mutate(
    producer: &mut TestProducer,
    namespace: &str,
    key: &str,
    payload: Vec<u8>,
) -> String {
    let request = WriteToLogRequest {
        key: key.to_owned(),
        ..write(namespace, &payload)
    };
    write_true(&producer.client, request).await
}

/// Writes `value` to row `id` and records it in each of `rows`.
pub(super) async fn put_row<const N: usize>(
    producer: &mut TestProducer,
    namespace: &str,
    id: &str,
    value: &str,
    rows: [&mut Rows; N],
) {
    mutate(producer, namespace, id, put(id, value)).await;
    for rows in rows {
        rows.insert(id.to_owned(), Some(value.to_owned()));
    }
}

/// A checkpoint path of the test's own, and the same as an argument.
fn checkpoint_file() -> (std::path::PathBuf, String) {
    let path = std::env::temp_dir().join(format!("{}.json", wal_testkit::unique("replay")));
    let argument = path.display().to_string();
    (path, argument)
}

pub(super) async fn applied(cql: &Cql, table: &str, expected: &Rows) {
    eventually(
        Duration::from_secs(60),
        "the consumer to apply every write",
        || async { (cql.rows(table).await == *expected).then_some(()) },
    )
    .await;
}

/// A namespace that keeps an archive and delivers to `delivered`, applied to a control plane
/// at `url`, with a producer and a consumer running.
struct Archiving {
    url: String,
    namespace: Namespace,
    producer: TestProducer,
    consumer: ConsumerHandle,
    delivered: wal_testkit::Upstream,
}

impl Archiving {
    /// Returns once the consumer's archiving crew delivered a first entry: the archive holds
    /// what is written from then on.
    async fn start(backend: Backend) -> Self {
        let (mut registry, url) = control_plane_at().await;
        let delivered = wal_testkit::Upstream::start(|_| 200).await;
        let config = wal_testkit::with_archive(
            &namespace_json(backend, 1, &delivered.target(), ""),
            KEYSPACE,
        );
        let namespace = apply_config(&mut registry, &config).await;
        let mut producer = TestProducer::start(vec![namespace.clone()]).await;
        let consumer = start_consumer(vec![namespace.clone()]).await;
        mutate(&mut producer, &namespace.name, "warm-up", b"w".to_vec()).await;
        eventually(
            Duration::from_secs(60),
            "the consumer's first delivery",
            || async { (delivered.count() >= 1).then_some(()) },
        )
        .await;
        Self {
            url,
            namespace,
            producer,
            consumer,
            delivered,
        }
    }

    /// Waits until the upstream received `count` entries (the consumer acknowledges, and so
    /// archives, each only once it is delivered), then stops the producer and the consumer.
    async fn stop_once_delivered(mut self, count: usize) -> (String, Namespace) {
        eventually(
            Duration::from_secs(60),
            "the consumer to deliver (and archive) every entry",
            || async { (self.delivered.count() >= count).then_some(()) },
        )
        .await;
        self.consumer.shutdown().await;
        self.producer.shutdown().await;
        (self.url, self.namespace)
    }
}

/// An upstream recording what a replay sends it, and the http target settings that name it.
async fn replay_upstream() -> (wal_testkit::Upstream, String) {
    let upstream = wal_testkit::Upstream::start(|_| 200).await;
    let settings = format!(r#"{{"url": "{}"}}"#, upstream.url);
    (upstream, settings)
}

/// Runs walctl with `args` until its checkpoint says 3 or more were applied, kills it, and
/// returns how many the checkpoint says were applied.
async fn killed_after_three(url: &str, args: &[&str], checkpoint: &std::path::Path) -> u64 {
    let mut run = tokio::process::Command::new(env!("CARGO_BIN_EXE_walctl"))
        .args(["--control-plane", url])
        .args(args)
        .env("WAL_CQL_NODES", wal_testkit::cql_nodes().join(","))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let applied = || async {
        let saved: Value = serde_json::from_slice(&std::fs::read(checkpoint).ok()?).ok()?;
        saved["done"].as_u64()
    };
    eventually(
        Duration::from_secs(30),
        "the first run to apply some",
        || async { applied().await.filter(|done| *done >= 3) },
    )
    .await;
    run.start_kill().unwrap();
    run.wait().await.unwrap();
    applied().await.unwrap()
}

wal_testkit::on_each_backend! {
    /// The corruption drill restores every write but the offending one. On Kafka the replay reads
    /// the topic; SQS deletes what was consumed, so there the namespace keeps an archive, and the
    /// replay reads it.
    the_corruption_drill_restores_every_write_but_the_offending_one => corruption_drill;
}

async fn corruption_drill(backend: Backend) {
    let (mut registry, url) = control_plane_at().await;
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let plain = namespace_json(backend, 2, &cql_target(&table), "");
    let config = match backend {
        Backend::Kafka => plain.clone(),
        Backend::Sqs => wal_testkit::with_archive(&plain, KEYSPACE),
    };
    let namespace = apply_config(&mut registry, &config).await;
    let name = namespace.name.clone();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace]).await;

    // Before the backup.
    let mut oracle = Rows::new();
    for i in 0..20 {
        put_row(
            &mut producer,
            &name,
            &format!("row-{i}"),
            "first",
            [&mut oracle],
        )
        .await;
    }
    applied(&cql, &table, &oracle).await;

    // The backup: every row with its write time, as a snapshot keeps them.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let backup_at = humantime::format_rfc3339_micros(SystemTime::now()).to_string();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut backup = Vec::new();
    for (id, value) in cql.rows(&table).await {
        let written = cql.writetime(&table, &id).await.unwrap();
        backup.push((id, value, written));
    }

    // After it: updates, deletes, new rows, and one offending write. `scratch` is what the range
    // alone does to an empty table.
    let mut after = oracle.clone();
    let mut scratch = Rows::new();
    for i in 0..5 {
        let all = [&mut oracle, &mut after, &mut scratch];
        put_row(&mut producer, &name, &format!("row-{i}"), "second", all).await;
    }
    // A key written twice in the range: the later value wins.
    let all = [&mut oracle, &mut after, &mut scratch];
    put_row(&mut producer, &name, "row-0", "second-b", all).await;
    for i in 5..7 {
        let id = format!("row-{i}");
        mutate(&mut producer, &name, &id, delete(&id)).await;
        oracle.remove(&id);
        after.remove(&id);
    }
    for i in 20..25 {
        let all = [&mut oracle, &mut after, &mut scratch];
        put_row(&mut producer, &name, &format!("row-{i}"), "new", all).await;
    }
    let offending = mutate(&mut producer, &name, "row-9", put("row-9", "garbage")).await;
    after.insert("row-9".to_owned(), Some("garbage".to_owned()));
    let all = [&mut oracle, &mut after, &mut scratch];
    put_row(&mut producer, &name, "row-10", "third", all).await;
    // A later write of the offending key still counts: only the offending entry is left out.
    let all = [&mut oracle, &mut after, &mut scratch];
    put_row(&mut producer, &name, "row-9", "mended", all).await;
    applied(&cql, &table, &after).await;

    // Corrupted, then restored from the backup (with the backup's write times).
    let execute = |statement: String| {
        let session = &cql.session;
        async move { session.query_unpaged(statement, &[]).await.unwrap() }
    };
    execute(format!(
        "UPDATE {KEYSPACE}.{table} SET value = 'corrupt' WHERE id = 'row-1'"
    ))
    .await;
    execute(format!("TRUNCATE {KEYSPACE}.{table}")).await;
    for (id, value, written) in &backup {
        let value = value.clone().unwrap_or_default();
        execute(format!(
            "INSERT INTO {KEYSPACE}.{table} (id, value) VALUES ('{id}', '{value}') USING TIMESTAMP {written}"
        ))
        .await;
    }
    let restored = cql.rows(&table).await;
    assert_ne!(
        restored, oracle,
        "the restore put the table back before the later writes"
    );

    // A dry run counts what it would apply and writes nothing.
    let dry = json_of(
        &walctl(
            &url,
            &replay_args(
                &name,
                &backup_at,
                &["--exclude-id", &offending, "--dry-run", "-o", "json"],
            ),
        )
        .await,
    );
    assert_eq!(
        dry["would_apply"], RANGE,
        "6 updates, 2 deletes, 5 new rows, 2 later writes: {dry:#}"
    );
    assert_eq!(dry["left"]["excluded by id"], 1, "{dry:#}");
    assert_eq!(cql.rows(&table).await, restored);

    // The replay, interrupted once and run again.
    let (checkpoint, checkpoint_arg) = checkpoint_file();
    let args = replay_args(
        &name,
        &backup_at,
        &[
            "--exclude-id",
            &offending,
            "--rate",
            "4",
            "--concurrency",
            "2",
            "--checkpoint",
            &checkpoint_arg,
            "-o",
            "json",
        ],
    );
    let done_by_first = killed_after_three(&url, &args, &checkpoint).await;
    let second = json_of(&walctl(&url, &args).await);
    let resumed = second["applied"].as_u64().unwrap();
    assert_eq!(second["failed"], serde_json::json!({}), "{second:#}");
    // Resumed, not started over; and nothing the first run had not recorded was skipped.
    assert!(resumed > 0 && resumed < RANGE, "{second:#}");
    assert!(
        resumed + done_by_first >= RANGE,
        "first {done_by_first}, then {second:#}"
    );

    let rows = cql.rows(&table).await;
    assert_eq!(
        rows, oracle,
        "row by row, every write but the offending one"
    );

    // Into a scratch table that does not exist yet: every entry fails, and the run says so.
    // Once the table exists, the same command applies them all: failures are not passed over.
    let scratch_table = wal_testkit::unique("scratch").replace('-', "_");
    let settings = format!(r#"{{"keyspace": "{KEYSPACE}", "table": "{scratch_table}"}}"#);
    let scratch_args = replay_args(
        &name,
        &backup_at,
        &[
            "--exclude-id",
            &offending,
            "--target-kind",
            "cql",
            "--target-settings",
            &settings,
            "--checkpoint",
            &checkpoint_arg,
            "--from-start",
            "-o",
            "json",
        ],
    );
    let failed = walctl(&url, &scratch_args).await;
    assert_eq!(
        failed.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&failed.stderr)
    );
    let report: Value = serde_json::from_slice(&failed.stdout).unwrap();
    assert_eq!(report["applied"], 0, "{report:#}");
    assert!(
        report["failed"].to_string().contains("does not exist"),
        "{report:#}"
    );
    execute(format!(
        "CREATE TABLE {KEYSPACE}.{scratch_table} (id text PRIMARY KEY, value text)"
    ))
    .await;
    let again: Vec<&str> = scratch_args
        .iter()
        .copied()
        .filter(|a| *a != "--from-start")
        .collect();
    let fixed = json_of(&walctl(&url, &again).await);
    assert_eq!(fixed["applied"], RANGE, "{fixed:#}");
    assert_eq!(cql.rows(&scratch_table).await, scratch);

    // What the source cannot hold is refused, not skipped.
    let (wrong_source, expected) = match backend {
        Backend::Kafka => ("archive", "keeps no archive"),
        Backend::Sqs => ("kafka", "SQS deletes what was consumed"),
    };
    let wrong = walctl(
        &url,
        &replay_args(&name, &backup_at, &["--source", wrong_source]),
    )
    .await;
    assert_refused(&wrong, 2, expected);
    if backend == Backend::Sqs {
        // Before the archive was turned on (its first entry, in this test): named, refused.
        let before = walctl(&url, &replay_args(&name, "1h", &[])).await;
        assert_refused(&before, 2, "when it was turned on");
        // Turned off and on again: the archive holds nothing from before the last turn-on.
        apply_config(&mut registry, &plain).await;
        apply_config(&mut registry, &config).await;
        let gap = walctl(&url, &replay_args(&name, &backup_at, &["--dry-run"])).await;
        assert_refused(&gap, 2, "when it was turned on");
    }

    consumer.shutdown().await;
    producer.shutdown().await;
    std::fs::remove_file(&checkpoint).unwrap();
}

#[tokio::test]
async fn bad_arguments_are_refused_with_what_to_do() {
    let (mut registry, url) = control_plane_at().await;
    let config = namespace_json(Backend::Kafka, 1, &cql_target("t"), "");
    let name = apply_config(&mut registry, &config).await.name;

    // (arguments after `replay --namespace`, exit code, what stderr names)
    let settings = r#"{"keyspace": "scratch", "tabel": "t"}"#;
    let cases: [(&[&str], i32, &str); 5] = [
        (
            &[&name, "--from", "1h", "--to", "2h"],
            2,
            "must be before --to",
        ),
        (
            &["no-such-namespace", "--from", "1h"],
            4,
            "no-such-namespace",
        ),
        (
            &[&name, "--from", "last tuesday"],
            2,
            "--from 'last tuesday'",
        ),
        // A target the kind would refuse is refused before anything is read.
        (
            &[
                &name,
                "--from",
                "1h",
                "--target-kind",
                "cql",
                "--target-settings",
                settings,
            ],
            2,
            "cql target settings are invalid at 'tabel'",
        ),
        (
            &[
                &name,
                "--from",
                "1h",
                "--exclude-file",
                "/nonexistent/ids.txt",
            ],
            2,
            "--exclude-file /nonexistent/ids.txt",
        ),
    ];
    for (args, code, named) in cases {
        let output = walctl(
            &url,
            &[&["replay", "--direct", "--namespace"], args].concat(),
        )
        .await;
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(named),
            "{args:?}: {}",
            stderr(&output)
        );
    }

    let sqs = namespace_json(Backend::Sqs, 1, &cql_target("t"), "");
    let sqs_name = apply_config(&mut registry, &sqs).await.name;
    let on_sqs = walctl(&url, &replay_args(&sqs_name, "1h", &[])).await;
    assert_refused(&on_sqs, 2, "archive");
}

/// Retention stands in: the first record of every partition of `topic` goes.
async fn trim_first_records(topic: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::{Offset, TopicPartitionList};

    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", wal_testkit::kafka_bootstrap())
        .create()
        .unwrap();
    let mut first_records = TopicPartitionList::new();
    for partition in 0..4 {
        first_records
            .add_partition_offset(topic, partition, Offset::Offset(1))
            .unwrap();
    }
    admin
        .delete_records(&first_records, &AdminOptions::new())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_range_retention_trimmed_is_refused_naming_what_is_gone() {
    let (mut registry, url) = control_plane_at().await;
    let config = namespace_json(Backend::Kafka, 1, &cql_target("t"), "");
    let namespace = apply_config(&mut registry, &config).await;
    let topic = namespace.queues[0].name.clone();
    let before_writes = humantime::format_rfc3339_micros(SystemTime::now()).to_string();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    for i in 0..12 {
        mutate(
            &mut producer,
            &namespace.name,
            &format!("key-{i}"),
            put("x", "y"),
        )
        .await;
    }
    producer.shutdown().await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let after_writes = humantime::format_rfc3339_micros(SystemTime::now()).to_string();

    trim_first_records(&topic).await;

    let refused = walctl(
        &url,
        &replay_args(&namespace.name, &before_writes, &["--dry-run"]),
    )
    .await;
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains("cannot be replayed in full"), "{message}");
    assert!(
        message.contains(&format!("topic '{topic}' partition")),
        "{message}"
    );

    // From after what is gone, the range is whole.
    let later = walctl(
        &url,
        &replay_args(&namespace.name, &after_writes, &["--dry-run", "-o", "json"]),
    )
    .await;
    assert_eq!(json_of(&later)["would_apply"], 0);
}

#[tokio::test]
async fn one_keys_entries_reach_an_http_target_in_the_order_they_were_written() {
    let (mut registry, url) = control_plane_at().await;
    let upstream = wal_testkit::Upstream::start(|_| 200).await;
    let config = namespace_json(Backend::Kafka, 2, &upstream.target(), "");
    let namespace = apply_config(&mut registry, &config).await;
    // Only a producer: the entries reach the upstream through the replay alone.
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let from = humantime::format_rfc3339_micros(SystemTime::now()).to_string();
    let keys = ["alpha", "beta", "gamma", "delta"];
    write_keys_in_order(&mut producer, &namespace.name, &keys, 10).await;
    producer.shutdown().await;

    let report = json_of(
        &walctl(
            &url,
            &replay_args(
                &namespace.name,
                &from,
                &["--concurrency", "8", "--from-start", "-o", "json"],
            ),
        )
        .await,
    );
    assert_eq!(report["applied"], 40, "{report:#}");
    assert_eq!(report["keys"], 4, "{report:#}");
    each_key_once_in_order(&upstream, &keys, 10);
}

/// Writes `"KEY SEQ"` for each of `keys`, SEQ 0 to `per_key - 1`, each key under its own key.
async fn write_keys_in_order(
    producer: &mut TestProducer,
    namespace: &str,
    keys: &[&str],
    per_key: u32,
) {
    for seq in 0..per_key {
        for key in keys {
            mutate(
                producer,
                namespace,
                key,
                format!("{key} {seq}").into_bytes(),
            )
            .await;
        }
    }
}

/// `upstream` received each of `keys`' bodies `"KEY SEQ"` once, SEQ 0 to `per_key - 1` in order.
fn each_key_once_in_order(upstream: &wal_testkit::Upstream, keys: &[&str], per_key: u32) {
    let bodies = upstream.bodies();
    assert_eq!(
        bodies.len(),
        keys.len() * per_key as usize,
        "each entry once: {bodies:?}"
    );
    for key in keys {
        let order: Vec<u32> = bodies
            .iter()
            .filter_map(|body| body.strip_prefix(&format!("{key} ")))
            .map(|seq| seq.parse().unwrap())
            .collect();
        assert_eq!(
            order,
            (0..per_key).collect::<Vec<u32>>(),
            "key {key}: {bodies:?}"
        );
    }
}

/// A Kafka namespace that keeps an archive: once retention has trimmed its topic, the replay
/// reads the range from the archive instead, each key's entries still in their written order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_history_past_retention_is_replayed_from_the_archive_in_key_order() {
    let mut archiving = Archiving::start(Backend::Kafka).await;
    let name = archiving.namespace.name.clone();
    let from = humantime::format_rfc3339_micros(SystemTime::now()).to_string();
    let keys = ["alpha", "beta", "gamma", "delta"];
    write_keys_in_order(&mut archiving.producer, &name, &keys, 6).await;
    let (url, namespace) = archiving.stop_once_delivered(25).await;
    trim_first_records(&namespace.queues[0].name).await;

    let kafka_only = walctl(
        &url,
        &replay_args(&name, &from, &["--source", "kafka", "--dry-run"]),
    )
    .await;
    assert_refused(&kafka_only, 2, "cannot be replayed in full from Kafka");

    let (replayed, settings) = replay_upstream().await;
    let output = walctl(
        &url,
        &replay_args(
            &name,
            &from,
            &[
                "--concurrency",
                "8",
                "--target-kind",
                "http",
                "--target-settings",
                &settings,
                "--from-start",
                "-o",
                "json",
            ],
        ),
    )
    .await;
    assert!(
        stderr(&output).contains("replaying from the archive"),
        "{}",
        stderr(&output)
    );
    let report = json_of(&output);
    assert_eq!(report["applied"], 24, "{report:#}");
    assert_eq!(report["keys"], 4, "{report:#}");
    each_key_once_in_order(&replayed, &keys, 6);
}

/// Entries sharing one write time (a caller's own, here) in one archive shard: a replay killed
/// part way and run again applies every one of them, in order, and leaves none out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_archive_replay_leaves_out_none_of_the_entries_sharing_a_write_time() {
    let archiving = Archiving::start(Backend::Sqs).await;
    let name = archiving.namespace.name.clone();
    let written = wal_queue::entry::now_micros() + 1_000;
    for seq in 0..12 {
        let mut request = WriteToLogRequest {
            key: "k".to_owned(),
            ..write(&name, format!("k {seq}").as_bytes())
        };
        request
            .lifecycle
            .get_or_insert_default()
            .original_write_time_micros = written;
        write_true(&archiving.producer.client, request).await;
    }
    let (url, _) = archiving.stop_once_delivered(13).await;

    let (replayed, settings) = replay_upstream().await;
    let from = humantime::format_rfc3339_micros(
        SystemTime::UNIX_EPOCH + Duration::from_micros(u64::try_from(written).unwrap()),
    )
    .to_string();
    let (checkpoint, checkpoint_arg) = checkpoint_file();
    let args = replay_args(
        &name,
        &from,
        &[
            "--rate",
            "3",
            "--concurrency",
            "1",
            "--target-kind",
            "http",
            "--target-settings",
            &settings,
            "--checkpoint",
            &checkpoint_arg,
            "-o",
            "json",
        ],
    );
    killed_after_three(&url, &args, &checkpoint).await;
    let second = json_of(&walctl(&url, &args).await);
    assert_eq!(second["failed"], serde_json::json!({}), "{second:#}");
    assert!(second["applied"].as_u64().unwrap() > 0, "{second:#}");

    // Every entry arrived, and in the order written (ids of one write time sort by creation);
    // the ones in flight at the kill may arrive twice, which the target's idempotency absorbs.
    let bodies = replayed.bodies();
    let mut first_seen: Vec<u32> = Vec::new();
    for body in &bodies {
        let seq: u32 = body.strip_prefix("k ").unwrap().parse().unwrap();
        if !first_seen.contains(&seq) {
            first_seen.push(seq);
        }
    }
    assert_eq!(first_seen, (0..12).collect::<Vec<u32>>(), "{bodies:?}");
    std::fs::remove_file(&checkpoint).unwrap();
}

/// What walctl said on standard error.
fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// walctl exited with `code` and its error names `needle`.
fn assert_refused(output: &Output, code: i32, needle: &str) {
    let stderr = stderr(output);
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert!(stderr.contains(needle), "{stderr}");
}
