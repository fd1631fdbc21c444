//! walctl as an operator's shell sees it: exit codes scripts can rely on, and messages that say
//! what was wrong, for bad arguments, bad files, an unreachable control plane and refusals.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Output;

use wal_testkit::{config, control_plane_at, unique};

async fn walctl(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_walctl"))
        .args(&args)
        .env_remove("WAL_CONTROL_PLANE")
        .output()
        .await
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn write_file(text: &str) -> String {
    let path = std::env::temp_dir().join(format!("{}.json", unique("walctl")));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[tokio::test]
async fn bad_arguments_and_bad_files_exit_2_naming_the_problem() {
    let unknown = walctl(&["namespace", "frobnicate"]).await;
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("frobnicate"),
        "{}",
        stderr(&unknown)
    );

    let missing = walctl(&["namespace", "apply", "-f", "/no/such/file.json"]).await;
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("cannot read /no/such/file.json"),
        "{}",
        stderr(&missing)
    );

    let name = unique("cp");
    let bad = write_file(&config(
        &name,
        "KAFKA",
        &["q"],
        r#", "rate_limit": {"burst": -1}"#,
    ));
    let invalid = walctl(&["namespace", "validate", "-f", &bad]).await;
    assert_eq!(invalid.status.code(), Some(2));
    let message = stderr(&invalid);
    assert!(
        message.contains(&bad) && message.contains("rate_limit.burst"),
        "{message}"
    );

    // A default target its kind would refuse: every entry would be dead-lettered, so the file
    // is refused, naming the file and the field (issue 17's case).
    let typo = r#", "default_target": {"kind": "cql", "settings": {"keyspace": "shop", "tabel": "orders"}}"#;
    let bad_target = write_file(&config(&name, "KAFKA", &["q"], typo));
    for command in ["validate", "apply"] {
        let refused = walctl(&["namespace", command, "-f", &bad_target]).await;
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        let message = stderr(&refused);
        assert!(
            message.contains(&format!(
                "{bad_target}: default_target.settings.tabel: cql target settings: unknown field `tabel`"
            )),
            "{message}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_control_plane_exits_1_and_says_where_it_looked() {
    let name = unique("cp");
    let file = write_file(&config(&name, "KAFKA", &[&format!("{name}-q0")], ""));
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("http://127.0.0.1:{port}");
    let output = walctl(&[
        "--control-plane",
        &address,
        "namespace",
        "apply",
        "-f",
        &file,
    ])
    .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(&format!("cannot reach the control plane at {address}")),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn apply_get_and_refusals_exit_with_their_codes() {
    let (_client, address) = control_plane_at().await;
    let name = unique("cp");
    let queue = format!("{name}-q0");
    let file = write_file(&config(&name, "KAFKA", &[&queue], ""));
    let cp = ["--control-plane", address.as_str()];

    let applied =
        walctl(&[&cp[..], &["-o", "json", "namespace", "apply", "-f", &file]].concat()).await;
    assert_eq!(applied.status.code(), Some(0), "{}", stderr(&applied));
    let answer: serde_json::Value = serde_json::from_slice(&applied.stdout).unwrap();
    assert_eq!(answer["changed"], true);
    assert_eq!(answer["version"]["version"], 1);

    let listed = walctl(&[&cp[..], &["namespace", "list"]].concat()).await;
    assert_eq!(listed.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&name));

    let moved = write_file(&config(&name, "SQS", &[&queue], ""));
    let refused = walctl(&[&cp[..], &["namespace", "apply", "-f", &moved]].concat()).await;
    assert_eq!(refused.status.code(), Some(3));
    assert!(
        stderr(&refused).contains("is on kafka"),
        "{}",
        stderr(&refused)
    );

    let diff = walctl(&[&cp[..], &["namespace", "diff", "-f", &moved]].concat()).await;
    assert_eq!(diff.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&diff.stdout).contains("persistence_configurations"));

    let absent = walctl(&[&cp[..], &["namespace", "get", "no-such-namespace"]].concat()).await;
    assert_eq!(absent.status.code(), Some(4));
    assert!(
        stderr(&absent).contains("no namespace 'no-such-namespace'"),
        "{}",
        stderr(&absent)
    );
}

/// A producer on a free port serving one new Kafka namespace; returns it, its address and the
/// name. The producer serves until it is dropped.
async fn producer() -> (wal_testkit::TestProducer, String, String) {
    let name = unique("cp");
    let target =
        r#", "default_target": {"kind": "cql", "settings": {"keyspace": "app", "table": "t"}}"#;
    let text = config(&name, "KAFKA", &[&format!("{name}-q0")], target);
    let namespace = wal_namespaces::parse(&text, "test").unwrap();
    let producer = wal_testkit::TestProducer::start(vec![namespace]).await;
    let address = format!("http://{}", producer.address);
    (producer, address, name)
}

#[tokio::test]
async fn write_prints_the_durable_answer_and_exits_by_it() {
    let (_producer, address, name) = producer().await;
    let producer = ["--producer", address.as_str()];

    let written = walctl(
        &[
            &[
                "-o",
                "json",
                "write",
                &name,
                "hello",
                "--idempotency-id",
                "w-1",
                "--delay",
                "2s",
            ][..],
            &producer[..],
        ]
        .concat(),
    )
    .await;
    assert_eq!(written.status.code(), Some(0), "{}", stderr(&written));
    let answer: serde_json::Value = serde_json::from_slice(&written.stdout).unwrap();
    assert_eq!(answer["durable"], "TRUE");
    assert_eq!(answer["entry_id"], "w-1");

    // The caller's trace goes on with the entry, as it came (the producer exports no spans here).
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = format!("00-{trace}-00f067aa0ba902b7-01");
    let args = [
        "write",
        &name,
        "traced",
        "--idempotency-id",
        "w-2",
        "--traceparent",
        &parent,
    ];
    let traced = walctl(&[&args[..], &producer[..]].concat()).await;
    assert_eq!(traced.status.code(), Some(0), "{}", stderr(&traced));
    let entries = wal_testkit::kafka_log(&format!("{name}-q0")).await;
    let entry = entries
        .iter()
        .find(|e| e.id == "w-2")
        .expect("the traced entry");
    assert_eq!(entry.trace_context["traceparent"], parent);

    let file = write_file("{\"payload\": \"from a file\"}");
    let from_file = walctl(&[&["write", &name, "--file", &file][..], &producer[..]].concat()).await;
    assert_eq!(from_file.status.code(), Some(0), "{}", stderr(&from_file));
    assert!(String::from_utf8_lossy(&from_file.stdout).starts_with("TRUE entry "));

    let unknown = walctl(&[&["write", "no-such-namespace", "x"][..], &producer[..]].concat()).await;
    assert_eq!(unknown.status.code(), Some(4), "{}", stderr(&unknown));
    assert!(
        stderr(&unknown).contains("no-such-namespace"),
        "{}",
        stderr(&unknown)
    );

    // Past the namespace's delay limit (30 days by default): refused before anything is stored.
    let too_far = walctl(
        &[
            &["write", &name, "x", "--delay", "40days"][..],
            &producer[..],
        ]
        .concat(),
    )
    .await;
    assert_eq!(too_far.status.code(), Some(2), "{}", stderr(&too_far));
    assert!(stderr(&too_far).contains("delay"), "{}", stderr(&too_far));
}

#[tokio::test]
async fn write_arguments_are_checked_before_anything_is_sent() {
    // (arguments after `write`, what stderr names)
    let cases: [(&[&str], &str); 5] = [
        (&["ns", "x", "--delay", "soon"], "--delay"),
        // A payload and --file both.
        (&["ns", "x", "--file", "/tmp/p"], "--file"),
        // Neither.
        (&["ns"], "PAYLOAD"),
        (&["ns", "x", "--target-kind", "cql"], "--target-settings"),
        (&["ns", "x", "--traceparent", "00-abc-01"], "--traceparent"),
    ];
    for (args, needle) in cases {
        let output = walctl(&[&["write"], args].concat()).await;
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&output).contains(needle),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

/// `walctl clusters MAP NAMESPACE...` reads a map as the processes do, lists its names, and
/// refuses namespaces naming what it lacks, before anything is rolled out.
#[tokio::test]
async fn a_cluster_map_is_checked_with_the_namespaces_that_will_use_it() {
    let map = write_file(
        r#"{"kafka": {"default": "main", "clusters": {
             "main": {"bootstrap_servers": "a:9092", "replication_factor": 3, "min_insync_replicas": 2},
             "events": {"bootstrap_servers": "b:9092"}}},
           "cql": {"default": "s", "shards": {"s": {"contact_points": ["c:9042"], "replication_factor": 3}}}}"#,
    );
    let on = |cluster: &str| {
        let name = unique("ns");
        let text = config(&name, "KAFKA", &[&name], "").replace(
            r#""wal-kafka-topics""#,
            &format!(r#""wal.kafka.bootstrap.servers.prefix": "{cluster}", "wal-kafka-topics""#),
        );
        write_file(&text)
    };
    let (events, nowhere) = (on("events"), on("nowhere"));

    let listed = walctl(&["-o", "json", "clusters", &map, &events]).await;
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["kafka"][0]["name"], "events", "{listed:#}");
    assert_eq!(listed["kafka"][1]["default"], true, "{listed:#}");
    // The copies of what the platform will create there: the map's, else one.
    assert_eq!(listed["kafka"][1]["replication_factor"], 3, "{listed:#}");
    assert_eq!(listed["kafka"][1]["min_insync_replicas"], 2, "{listed:#}");
    assert_eq!(listed["kafka"][0]["replication_factor"], 1, "{listed:#}");
    assert_eq!(listed["cql"][0]["replication_factor"], 3, "{listed:#}");

    let refused = walctl(&["clusters", &map, &events, &nowhere]).await;
    assert_eq!(refused.status.code(), Some(2));
    let said = stderr(&refused);
    assert!(
        said.contains("Kafka cluster 'nowhere'") && said.contains("known: events, main"),
        "{said}"
    );
    assert!(!said.contains(&events), "{said}");

    let bad = write_file(
        r#"{"kafka": {"default": "x", "clusters": {"main": {"bootstrap_servers": "a:1"}}}}"#,
    );
    let invalid = walctl(&["clusters", &bad]).await;
    assert_eq!(invalid.status.code(), Some(2));
    assert!(
        stderr(&invalid).contains("invalid at kafka.default"),
        "{}",
        stderr(&invalid)
    );
}
