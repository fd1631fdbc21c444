use rand::SeedableRng;
use rand::rngs::StdRng;
use wal_proto::v1::Lifecycle;

use super::*;

const NOW: i64 = 1_800_000_000_000_000;

fn namespace() -> Namespace {
    wal_namespaces::parse(
        r#"{"namespace": "orders",
            "persistence_configurations": {"persistence_configuration": [
              {"physical_storage": {"type": "KAFKA"}, "config": {"wal-kafka-topics": ["orders-wal"]}}]},
            "payload_limit_bytes": 100,
            "delay_limits": {"max_delay_ms": 60000, "default_jitter_ms": 1000, "max_jitter_ms": 5000},
            "default_target": {"kind": "cql", "settings": {"keyspace": "shop", "table": "orders"}}}"#,
        "test",
    )
    .expect("valid namespace")
}

fn request(payload: &[u8]) -> WriteToLogRequest {
    WriteToLogRequest {
        namespace: "orders".into(),
        payload: payload.to_vec(),
        ..WriteToLogRequest::default()
    }
}

fn run(request: WriteToLogRequest) -> Result<Write, Invalid> {
    check(
        &namespace(),
        request,
        NOW,
        "us-east-1",
        HashMap::new(),
        &mut StdRng::seed_from_u64(7),
    )
}

#[test]
fn a_minimal_request_gets_an_id_the_default_target_and_now() {
    let write = run(request(b"put 1")).expect("valid");
    let entry = write.entry;
    assert_eq!(entry.version, ENTRY_VERSION);
    assert!(uuid_like(&entry.id), "{}", entry.id);
    assert_eq!(entry.key, entry.id, "no key: the id is the key");
    assert_eq!(entry.original_write_time_micros, NOW);
    assert_eq!(entry.target.expect("target").kind, "cql");
    assert_eq!(entry.origin_region, "us-east-1");
    let jitter = entry.deliver_at_micros - NOW;
    assert!(
        (0..1_000_000).contains(&jitter),
        "default jitter window 1 s, got {jitter} µs"
    );
}

fn uuid_like(id: &str) -> bool {
    id.len() == 36 && id.chars().filter(|c| *c == '-').count() == 4
}

#[test]
fn deliver_at_is_original_time_plus_delay_plus_jitter_within_the_window() {
    let mut req = request(b"delete 1");
    req.idempotency_id = "caller-key-1".into();
    req.key = "user-1".into();
    req.lifecycle = Some(Lifecycle {
        delay_millis: 30_000,
        jitter_millis: 2_000,
        original_write_time_micros: NOW - 10_000_000,
    });
    let entry = run(req).expect("valid").entry;
    assert_eq!(entry.id, "caller-key-1");
    assert_eq!(entry.key, "user-1");
    assert_eq!(entry.original_write_time_micros, NOW - 10_000_000);
    let after = entry.deliver_at_micros - (NOW - 10_000_000 + 30_000_000);
    assert!(
        (0..2_000_000).contains(&after),
        "jitter {after} µs outside [0, 2 s)"
    );
}

/// An empty payload, or one over the namespace's limit, is refused with the limit it broke.
#[test]
fn a_bad_payload_is_refused_with_what_was_expected() {
    refuses_each(vec![
        (
            "empty payload",
            request(b""),
            "payload is empty; a write must carry the mutation",
        ),
        (
            "oversize payload",
            request(&[b'x'; 101]),
            "payload of 101 bytes exceeds namespace 'orders''s limit of 100 bytes",
        ),
    ]);
}

/// A delay, jitter or original write time outside the namespace's limits is refused with those.
#[test]
fn a_bad_lifecycle_is_refused_with_what_was_expected() {
    refuses_each(vec![
        (
            "negative delay",
            WriteToLogRequest {
                lifecycle: Some(Lifecycle {
                    delay_millis: -1,
                    ..Lifecycle::default()
                }),
                ..request(b"x")
            },
            "lifecycle.delay_millis is -1; expected 0 to 60000 (the namespace's limit)",
        ),
        (
            "delay over the limit",
            WriteToLogRequest {
                lifecycle: Some(Lifecycle {
                    delay_millis: 60_001,
                    ..Lifecycle::default()
                }),
                ..request(b"x")
            },
            "lifecycle.delay_millis is 60001; expected 0 to 60000 (the namespace's limit)",
        ),
        (
            "jitter over the limit",
            WriteToLogRequest {
                lifecycle: Some(Lifecycle {
                    jitter_millis: 5_001,
                    ..Lifecycle::default()
                }),
                ..request(b"x")
            },
            "lifecycle.jitter_millis is 5001; expected 0 to 5000 (the namespace's limit)",
        ),
        (
            "original time far in the future",
            WriteToLogRequest {
                lifecycle: Some(Lifecycle {
                    original_write_time_micros: NOW + 3_600_000_000,
                    ..Lifecycle::default()
                }),
                ..request(b"x")
            },
            "lifecycle.original_write_time_micros is 1800003600000000; expected microseconds since the Unix epoch, no later than 300s from now (0: now)",
        ),
    ]);
}

/// An unknown target kind, settings the kind cannot read, or a region target is refused.
#[test]
fn a_bad_target_is_refused_with_what_was_expected() {
    refuses_each(vec![
        (
            "unknown target kind",
            WriteToLogRequest {
                target: Some(Target {
                    kind: "mongo".into(),
                    settings_json: "{}".into(),
                }),
                ..request(b"x")
            },
            "target.kind: \"mongo\" is not a target kind; expected one of cache, cql, http, index, kafka, region",
        ),
        (
            "a cql target without its table",
            WriteToLogRequest {
                target: Some(Target {
                    kind: "cql".into(),
                    settings_json: r#"{"keyspace":"a"}"#.into(),
                }),
                ..request(b"x")
            },
            "target.settings_json: cql target settings are invalid at '.': missing field `table`",
        ),
        (
            "an http target whose url is not one",
            WriteToLogRequest {
                target: Some(Target {
                    kind: "http".into(),
                    settings_json: r#"{"url":"not a url"}"#.into(),
                }),
                ..request(b"x")
            },
            "target.settings_json: http target settings are invalid at 'url': \"not a url\" is not a URL: relative URL without a base",
        ),
        (
            "a region target, which only a namespace's config may name",
            WriteToLogRequest {
                target: Some(Target {
                    kind: "region".into(),
                    settings_json: r#"{"useast1":"writer"}"#.into(),
                }),
                ..request(b"x")
            },
            "target: namespace 'orders' does not replicate (its default target is not 'region'); expected a write that names no target",
        ),
        (
            "target settings not JSON",
            WriteToLogRequest {
                target: Some(Target {
                    kind: "http".into(),
                    settings_json: "{url:".into(),
                }),
                ..request(b"x")
            },
            "target.settings_json: http target settings are invalid at '.': key must be a string",
        ),
        (
            "target settings not an object",
            WriteToLogRequest {
                target: Some(Target {
                    kind: "http".into(),
                    settings_json: "[1]".into(),
                }),
                ..request(b"x")
            },
            "target.settings_json: http target settings are invalid at '.': expected a JSON object of settings",
        ),
    ]);
}

/// An idempotency id or key that is not short printable text is refused with what it must be.
#[test]
fn a_bad_id_or_key_is_refused_with_what_was_expected() {
    refuses_each(vec![
        (
            "control characters in the id",
            WriteToLogRequest {
                idempotency_id: "a\nb".into(),
                ..request(b"x")
            },
            "idempotency_id is holding control characters; expected at most 256 bytes of printable text",
        ),
        (
            "an overlong key",
            WriteToLogRequest {
                key: "k".repeat(1025),
                ..request(b"x")
            },
            "key is 1025 bytes long; expected at most 1024 bytes of printable text",
        ),
    ]);
}

/// Runs each case, named, and checks it is refused with exactly the expected message.
fn refuses_each(cases: Vec<(&str, WriteToLogRequest, &str)>) {
    for (case, req, expected) in cases {
        let error = run(req).expect_err(case);
        assert_eq!(error.to_string(), expected, "{case}");
    }
}

#[test]
fn a_namespace_without_default_target_needs_one_in_the_request() {
    let mut ns = namespace();
    ns.default_target = None;
    let error = check(
        &ns,
        request(b"x"),
        NOW,
        "r",
        HashMap::new(),
        &mut StdRng::seed_from_u64(1),
    )
    .expect_err("no target");
    assert_eq!(
        error,
        Invalid::NoTarget {
            namespace: "orders".into()
        }
    );

    let mut req = request(b"x");
    req.target = Some(Target {
        kind: "cache".into(),
        settings_json: String::new(),
    });
    let entry = check(
        &ns,
        req,
        NOW,
        "r",
        HashMap::new(),
        &mut StdRng::seed_from_u64(1),
    )
    .expect("the request's target")
    .entry;
    assert_eq!(entry.target.expect("target").settings_json, "{}");
}

/// A burst written in one instant spreads evenly over the jitter window: 10,000 deliver-at
/// times (fixed seed) fall into 20 equal slices of the window with counts a chi-square test
/// cannot tell from uniform (19 degrees of freedom; 43.8 is the 0.1 % critical value), and none
/// outside the window.
#[test]
fn jitter_spreads_a_burst_uniformly_across_the_window() {
    const WRITES: usize = 10_000;
    const SLICES: usize = 20;
    let window_micros: i64 = 60_000_000;
    let ns = wal_namespaces::parse(
        r#"{"namespace": "deletes",
            "persistence_configurations": {"persistence_configuration": [
              {"physical_storage": {"type": "SQS"}, "config": {"wal-queue": ["deletes"]}}]},
            "delay_limits": {"default_jitter_ms": 60000},
            "default_target": {"kind": "cql", "settings": {"keyspace": "pds", "table": "objects"}}}"#,
        "test",
    )
    .expect("valid namespace");
    let mut rng = StdRng::seed_from_u64(42);
    let mut counts = [0usize; SLICES];
    for _ in 0..WRITES {
        let mut req = request(b"delete");
        req.namespace = "deletes".into();
        let entry = check(&ns, req, NOW, "local", HashMap::new(), &mut rng)
            .expect("valid")
            .entry;
        let offset = entry.deliver_at_micros - NOW;
        assert!(
            (0..window_micros).contains(&offset),
            "{offset} µs outside the window"
        );
        let slice = usize::try_from(offset * SLICES as i64 / window_micros).expect("in range");
        counts[slice] += 1;
    }
    let expected = (WRITES / SLICES) as f64;
    let chi_square: f64 = counts
        .iter()
        .map(|&n| (n as f64 - expected).powi(2) / expected)
        .sum();
    assert!(
        chi_square < 43.8,
        "chi-square {chi_square:.1} over {SLICES} slices: {counts:?}"
    );
}

#[test]
fn a_replicated_namespace_takes_writes_without_a_target_of_their_own() {
    let replicated = wal_namespaces::parse(
        r#"{"namespace": "evcache_x",
            "persistence_configurations": {"persistence_configuration": [
              {"physical_storage": {"type": "KAFKA"},
               "config": {"wal-kafka-topics": ["evcache_x"],
                          "target": {"type": "evc-replication", "useast1": "writer.us-east-1.example"}}}]}}"#,
        "test",
    )
    .expect("valid namespace");
    let check = |request| {
        super::check(
            &replicated,
            request,
            NOW,
            "us-west-2",
            HashMap::new(),
            &mut StdRng::seed_from_u64(7),
        )
    };
    let plain = WriteToLogRequest {
        namespace: "evcache_x".into(),
        ..request(b"{}")
    };
    let written = check(plain.clone()).expect("accepted");
    assert_eq!(
        written.entry.target.map(|t| t.kind),
        Some("region".to_owned())
    );
    let with_target = WriteToLogRequest {
        target: Some(Target {
            kind: "cache".into(),
            settings_json: String::new(),
        }),
        ..plain
    };
    assert_eq!(
        check(with_target).map(drop).map_err(|e| e.to_string()),
        Err("target: namespace 'evcache_x' replicates every write to its regions; expected a write that names no target".to_owned())
    );
}

#[test]
fn awaiting_the_destinations_needs_durable_storage_and_a_bounded_wait() {
    let awaiting = |millis| WriteToLogRequest {
        await_destinations_millis: millis,
        ..request(b"put 1")
    };
    let refused = run(awaiting(2_000)).expect_err("no durable storage");
    assert_eq!(refused.field(), "await_destinations_millis");
    assert_eq!(
        refused.to_string(),
        "await_destinations_millis is 2000; namespace 'orders' has no durable_storage, where its destinations record what they applied; expected 0"
    );
    let write = run(awaiting(0)).expect("no wait asked");
    assert!(!write.entry.receipts, "no receipts asked for");

    let mut durable = namespace();
    durable.durable_storage = Some(wal_namespaces::DurableStorageConfig::keyspace("shop"));
    let check = |request| {
        check(
            &durable,
            request,
            NOW,
            "us-east-1",
            HashMap::new(),
            &mut StdRng::seed_from_u64(7),
        )
    };
    let write = check(awaiting(2_000)).expect("valid");
    assert_eq!(write.await_destinations, Duration::from_secs(2));
    assert!(
        write.entry.receipts,
        "its destinations record what they did"
    );
    let over = check(awaiting(60_001)).expect_err("over the bound");
    assert_eq!(
        over.to_string(),
        "await_destinations_millis is 60001; expected at most 60000"
    );
}
