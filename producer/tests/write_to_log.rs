#![allow(clippy::expect_used, clippy::unwrap_used)]

//! WriteToLog end to end on real Kafka, ElasticMQ and Cassandra: what TRUE promises, what bad
//! input gets, admission control, spreading by key, claim checks, health and reflection, and
//! graceful shutdown.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::Code;
use wal_namespaces::Backend;
use wal_proto::v1::{Lifecycle, Target, Trilean, WriteToLogRequest};
use wal_queue::entry::{Body, now_micros};
use wal_testkit::{
    TestProducer, delayed, kafka_log, namespace, read_back, read_entry, reader, refused_field,
    write, write_true,
};

async fn true_means_the_entry_is_on_the_queue_intact(backend: Backend) {
    let ns = namespace(backend, 1, "");
    let mut producer = TestProducer::start(vec![ns.clone()]).await;
    let original = now_micros() - 2_000_000;
    let mut request = delayed(
        &ns.name,
        b"put users/7 {\"name\":\"grace\"}",
        1500,
        original,
    );
    request.idempotency_id = "order-7-v1".into();
    request.key = "user-7".into();

    let response = producer
        .client
        .write_to_log(request)
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(response.durable(), Trilean::True, "{}", response.message);
    assert_eq!(response.entry_id, "order-7-v1");

    let entry = read_entry(reader(&ns, 0).await.as_ref(), "order-7-v1").await;
    assert_eq!(entry.namespace, ns.name);
    assert_eq!(entry.key, "user-7");
    assert_eq!(
        entry.body,
        Some(Body::Payload(b"put users/7 {\"name\":\"grace\"}".to_vec()))
    );
    assert_eq!(entry.original_write_time_micros, original);
    assert_eq!(
        entry.deliver_at_micros,
        original + 1_500_000,
        "delay counts from the original write time"
    );
    assert!(entry.enqueued_at_micros >= original + 2_000_000);
    assert_eq!(entry.target.expect("default target").kind, "cql");
    assert_eq!(entry.origin_region, "local");
    assert_eq!(entry.attempt, 0);
    producer.shutdown().await;
}

#[tokio::test]
async fn kafka_true_means_the_entry_is_on_the_queue_intact() {
    true_means_the_entry_is_on_the_queue_intact(Backend::Kafka).await;
}

#[tokio::test]
async fn sqs_true_means_the_entry_is_on_the_queue_intact() {
    true_means_the_entry_is_on_the_queue_intact(Backend::Sqs).await;
}

#[tokio::test]
async fn without_an_idempotency_id_the_producer_makes_one_and_returns_it() {
    let ns = namespace(Backend::Kafka, 1, "");
    let mut producer = TestProducer::start(vec![ns.clone()]).await;
    let mut request = write(&ns.name, b"x");
    request.target = Some(Target {
        kind: "http".into(),
        settings_json: r#"{"url":"http://svc/hook"}"#.into(),
    });
    let response_id = write_true(&producer.client, request).await;
    assert_eq!(response_id.len(), 36, "a UUID: {}", response_id);

    let entry = read_entry(reader(&ns, 0).await.as_ref(), &response_id).await;
    assert_eq!(entry.key, response_id, "no key given: the id is the key");
    let target = entry.target.unwrap();
    assert_eq!(
        (target.kind.as_str(), target.settings_json.as_str()),
        ("http", r#"{"url":"http://svc/hook"}"#)
    );
    producer.shutdown().await;
}

#[tokio::test]
async fn bad_input_gets_its_status_and_message_and_nothing_reaches_the_queue() {
    let ns = namespace(
        Backend::Kafka,
        1,
        r#""payload_limit_bytes": 64, "delay_limits": {"max_delay_ms": 1000, "max_jitter_ms": 500}"#,
    );
    let mut producer = TestProducer::start(vec![ns.clone()]).await;
    let name = ns.name.as_str();
    let cases: Vec<(WriteToLogRequest, Code, String)> = vec![
        (
            write("no-such-namespace", b"x"),
            Code::NotFound,
            "namespace 'no-such-namespace' is not configured on this producer".into(),
        ),
        (
            write("", b"x"),
            Code::InvalidArgument,
            "namespace is empty; name the namespace to write to".into(),
        ),
        (
            write(name, b""),
            Code::InvalidArgument,
            "payload is empty; a write must carry the mutation".into(),
        ),
        (
            write(name, &[7; 65]),
            Code::InvalidArgument,
            format!("payload of 65 bytes exceeds namespace '{name}''s limit of 64 bytes"),
        ),
        (
            delayed(name, b"x", -5, 0),
            Code::InvalidArgument,
            "lifecycle.delay_millis is -5; expected 0 to 1000 (the namespace's limit)".into(),
        ),
        (
            delayed(name, b"x", 1001, 0),
            Code::InvalidArgument,
            "lifecycle.delay_millis is 1001; expected 0 to 1000 (the namespace's limit)".into(),
        ),
        (
            WriteToLogRequest {
                lifecycle: Some(Lifecycle {
                    jitter_millis: 501,
                    ..Lifecycle::default()
                }),
                ..write(name, b"x")
            },
            Code::InvalidArgument,
            "lifecycle.jitter_millis is 501; expected 0 to 500 (the namespace's limit)".into(),
        ),
        (
            WriteToLogRequest {
                target: Some(Target {
                    kind: "cql".into(),
                    settings_json: "not json".into(),
                }),
                ..write(name, b"x")
            },
            Code::InvalidArgument,
            "target.settings_json: cql target settings are invalid at '.': expected a JSON object of settings".into(),
        ),
        (
            WriteToLogRequest {
                target: Some(Target {
                    kind: "ftp".into(),
                    settings_json: String::new(),
                }),
                ..write(name, b"x")
            },
            Code::InvalidArgument,
            "target.kind: \"ftp\" is not a target kind; expected one of cache, cql, http, index, kafka, region"
                .into(),
        ),
    ];
    let mut cases = cases;
    // Issue 17's cases: targets their kind would refuse are refused before anything is stored.
    let target = |kind: &str, settings: &str| WriteToLogRequest {
        target: Some(Target {
            kind: kind.into(),
            settings_json: settings.into(),
        }),
        ..write(name, b"x")
    };
    cases.push((
        target("cql", r#"{"keyspace":"a"}"#),
        Code::InvalidArgument,
        "target.settings_json: cql target settings are invalid at '.': missing field `table`"
            .into(),
    ));
    cases.push((
        target("http", r#"{"url":"not a url"}"#),
        Code::InvalidArgument,
        "target.settings_json: http target settings are invalid at 'url': \"not a url\" is not a URL: relative URL without a base".into(),
    ));
    cases.push((
        target("region", r#"{"useast1":"writer"}"#),
        Code::InvalidArgument,
        format!("target: namespace '{name}' does not replicate (its default target is not 'region'); expected a write that names no target"),
    ));
    cases.push((
        write(&"n".repeat(70), b"x"),
        Code::InvalidArgument,
        "namespace is 70 bytes long; expected a name of at most 64".into(),
    ));
    cases.push((
        WriteToLogRequest {
            target: Some(Target {
                kind: "http".into(),
                settings_json: format!("{{\"pad\":\"{}\"}}", "x".repeat(20_000)),
            }),
            ..write(name, b"x")
        },
        Code::InvalidArgument,
        "target.settings_json: the settings are 20010 bytes long; expected at most 16384".into(),
    ));
    for (request, code, message) in cases {
        let status = producer
            .client
            .write_to_log(request)
            .await
            .expect_err("refused");
        assert_eq!((status.code(), status.message()), (code, message.as_str()));
        // The field a client library types the refusal by is the one the message starts with.
        let field = refused_field(&status);
        let after = message.strip_prefix(field.as_str()).unwrap_or("-");
        assert!(
            !field.is_empty() && (after.starts_with(' ') || after.starts_with(':')),
            "the refusal {message:?} names field {field:?} in its details"
        );
    }

    // The whole log, read from its partitions after a write answered TRUE: a refused request
    // that reached the queue is there before the marker or after it.
    let marker_id = write_true(&producer.client, write(name, b"marker")).await;
    let on_queue: Vec<String> = kafka_log(&ns.queues[0].name)
        .await
        .into_iter()
        .map(|entry| entry.id)
        .collect();
    assert_eq!(
        on_queue,
        vec![marker_id],
        "the queue holds entries besides the marker: refused requests reached it"
    );
    producer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_far_over_one_namespace_is_shed_while_another_keeps_writing() {
    let busy = namespace(
        Backend::Kafka,
        1,
        r#""rate_limit": {"writes_per_second": 5, "burst": 5}"#,
    );
    let calm = namespace(Backend::Kafka, 1, "");
    let mut producer = TestProducer::start(vec![busy.clone(), calm.clone()]).await;

    let started = Instant::now();
    let burst: Vec<_> = (0..300)
        .map(|i| {
            let mut client = producer.client.clone();
            let request = write(&busy.name, format!("burst {i}").as_bytes());
            tokio::spawn(async move {
                let answer = client.write_to_log(request).await;
                (answer, Instant::now())
            })
        })
        .collect();
    let mut calm_answers = Vec::new();
    for i in 0..20 {
        let response = producer
            .client
            .write_to_log(write(&calm.name, format!("calm {i}").as_bytes()))
            .await;
        calm_answers.push(
            response
                .map(|r| r.into_inner().durable())
                .map_err(|s| s.code()),
        );
    }
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    let mut last_answer = started;
    for task in burst {
        let (answer, answered) = task.await.unwrap();
        last_answer = last_answer.max(answered);
        let key = match answer {
            Ok(response) => format!("{:?}", response.into_inner().durable()),
            Err(status) => {
                // The wait is machine-readable: google.rpc.RetryInfo, within the limit's second.
                use tonic_types::StatusExt as _;
                let wait = status.get_details_retry_info().and_then(|r| r.retry_delay);
                assert!(
                    wait.is_some_and(|w| w <= Duration::from_secs(1)),
                    "a shed write's RetryInfo: {wait:?} ({status:?})"
                );
                format!("{:?}", status.code())
            }
        };
        *tally.entry(key).or_default() += 1;
    }
    // The limit admits its burst at once and its rate after that, for as long as the burst took
    // to be answered: on a machine busy with other tests that is seconds, not one.
    let elapsed = last_answer - started;
    let allowed = 5 + (5.0 * elapsed.as_secs_f64()).ceil() as usize;
    assert!(
        calm_answers.iter().all(|a| *a == Ok(Trilean::True)),
        "the calm namespace suffered: {calm_answers:?}"
    );
    assert!(
        tally.get("True").copied().unwrap_or(0) >= 5,
        "the burst of 5 was not admitted: {tally:?}"
    );
    assert!(
        tally.get("True").copied().unwrap_or(0) <= allowed,
        "more admitted than 5 a second after a burst of 5 allows in {elapsed:?}: {tally:?}"
    );
    assert!(
        tally.get("ResourceExhausted").copied().unwrap_or(0) >= 300 - allowed,
        "too little shed in {elapsed:?}: {tally:?}"
    );
    assert_eq!(
        tally
            .keys()
            .filter(|k| !["True", "ResourceExhausted"].contains(&k.as_str()))
            .count(),
        0,
        "{tally:?}"
    );
    producer.shutdown().await;
}

#[tokio::test]
async fn several_queues_spread_writes_by_key_and_keep_a_key_on_one_queue() {
    let ns = namespace(Backend::Kafka, 3, "");
    let mut producer = TestProducer::start(vec![ns.clone()]).await;
    for i in 0..30 {
        let request = WriteToLogRequest {
            key: format!("user-{i}"),
            ..write(&ns.name, b"spread")
        };
        assert_eq!(
            producer
                .client
                .write_to_log(request)
                .await
                .unwrap()
                .into_inner()
                .durable(),
            Trilean::True
        );
    }
    for _ in 0..5 {
        let request = WriteToLogRequest {
            key: "hot-key".into(),
            ..write(&ns.name, b"same")
        };
        producer.client.write_to_log(request).await.unwrap();
    }
    let mut per_queue = Vec::new();
    let keys: Vec<String> = (0..30)
        .map(|i| format!("user-{i}"))
        .chain(std::iter::repeat_n("hot-key".to_owned(), 5))
        .collect();
    for queue in 0..3 {
        let expected = keys.iter().filter(|k| ns.queue_index(k) == queue).count();
        let entries = read_back(reader(&ns, queue).await.as_ref(), |got| {
            got.len() >= expected
        })
        .await;
        per_queue.push(entries);
    }
    let counts: Vec<usize> = per_queue.iter().map(Vec::len).collect();
    assert_eq!(counts.iter().sum::<usize>(), 35, "{counts:?}");
    assert!(
        counts.iter().all(|c| *c > 0),
        "a queue got nothing: {counts:?}"
    );
    let hot: Vec<usize> = per_queue
        .iter()
        .map(|q| q.iter().filter(|e| e.key == "hot-key").count())
        .collect();
    assert!(hot.contains(&5), "one key was split across queues: {hot:?}");
    for (queue, entries) in per_queue.iter().enumerate() {
        for entry in entries {
            assert_eq!(
                ns.queue_index(&entry.key),
                queue,
                "key {} on the wrong queue",
                entry.key
            );
        }
    }
    producer.shutdown().await;
}

#[tokio::test]
async fn a_payload_too_large_for_sqs_is_claim_checked_or_refused_with_the_limit() {
    let mut with_storage = namespace(Backend::Sqs, 1, "");
    with_storage.durable_storage = Some(wal_namespaces::DurableStorageConfig::keyspace("wal_test"));
    let without = namespace(Backend::Sqs, 1, "");
    let mut producer = TestProducer::start(vec![with_storage.clone(), without.clone()]).await;
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();

    let status = producer
        .client
        .write_to_log(write(&without.name, &payload))
        .await
        .expect_err("too large");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status
            .message()
            .starts_with("payload of 300000 bytes does not fit queue")
            && status.message().contains("bytes at most"),
        "{}",
        status.message()
    );

    let response_id = write_true(&producer.client, write(&with_storage.name, &payload)).await;
    let entry = read_entry(reader(&with_storage, 0).await.as_ref(), &response_id).await;
    let Some(Body::ClaimCheck(check)) = entry.body else {
        panic!("expected a claim check, got {:?}", entry.body)
    };
    assert_eq!(check.size, 300_000);
    let nodes = std::env::var("WAL_CQL_NODES").unwrap_or_else(|_| "127.0.0.1:19042".into());
    let storage = wal_durable::DurableStorage::connect(&wal_durable::DurableSettings::new(
        &[nodes.as_str()],
        "wal_test",
    ))
    .await
    .unwrap();
    assert_eq!(
        storage
            .get_claim_check(&with_storage.name, &check)
            .await
            .unwrap(),
        payload
    );
    producer.shutdown().await;
}

#[tokio::test]
async fn health_reports_serving_and_reflection_lists_the_service() {
    use tonic_health::pb::health_check_response::ServingStatus;

    let ns = namespace(Backend::Kafka, 1, "");
    let mut producer = TestProducer::start(vec![ns]).await;
    let status = wal_testkit::health_status(&producer.channel, "wal.v1.WriteAheadLog").await;
    assert_eq!(status, ServingStatus::Serving);
    let (v1, v1alpha) = wal_testkit::reflected_services(&producer.channel).await;
    for services in [v1, v1alpha] {
        assert!(
            services.contains(&"wal.v1.WriteAheadLog".to_owned()),
            "{services:?}"
        );
    }
    producer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_answers_every_write_in_flight_truthfully() {
    let ns = namespace(Backend::Kafka, 1, "");
    let mut producer = TestProducer::start(vec![ns.clone()]).await;
    let writes: Vec<_> = (0..100)
        .map(|i| {
            let mut client = producer.client.clone();
            let request = WriteToLogRequest {
                idempotency_id: format!("w{i}"),
                ..write(&ns.name, b"in flight")
            };
            tokio::spawn(async move { client.write_to_log(request).await })
        })
        .collect();
    // Shut down once the producer holds writes, whatever the machine's load: a fixed pause
    // sometimes ended before any request had arrived.
    let runtime = Arc::clone(producer.registry.get(&ns.name).unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    while runtime.admission.in_flight() == 0 {
        assert!(Instant::now() < deadline, "no write reached the producer");
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let started = Instant::now();
    producer.shutdown().await;
    let drained_in = started.elapsed();

    let mut answered_true = Vec::new();
    for (i, task) in writes.into_iter().enumerate() {
        match task.await.unwrap() {
            Ok(response) => {
                let response = response.into_inner();
                assert_eq!(
                    response.durable(),
                    Trilean::True,
                    "write {i} answered {:?}: {}",
                    response.durable(),
                    response.message
                );
                answered_true.push(response.entry_id);
            }
            // Sent as the server stopped accepting: refused by HTTP/2 (connection refused, or a
            // GOAWAY for a stream the server never processed), never answered by the producer.
            Err(status) => {
                let from_transport = std::error::Error::source(&status).is_some_and(|source| {
                    source.downcast_ref::<tonic::transport::Error>().is_some()
                });
                assert!(
                    from_transport || status.code() == Code::Unavailable,
                    "write {i}: {status:?}"
                );
            }
        }
    }
    assert!(
        !answered_true.is_empty(),
        "no write was in flight at shutdown"
    );
    // Read straight from the topic's partitions, so what is checked is what the broker holds.
    let on_queue: Vec<String> = kafka_log(&ns.queues[0].name)
        .await
        .into_iter()
        .map(|e| e.id)
        .collect();
    for id in &answered_true {
        assert!(
            on_queue.contains(id),
            "{id} was answered TRUE but is not on the queue ({} of {} answered entries read back)",
            answered_true
                .iter()
                .filter(|id| on_queue.contains(id))
                .count(),
            answered_true.len()
        );
    }
    println!(
        "shutdown drained {} writes in {drained_in:?}",
        answered_true.len()
    );
}

#[tokio::test]
async fn a_batch_answers_each_write_in_order_as_write_to_log_would() {
    use wal_proto::v1::WriteToLogBatchRequest;

    let ns = namespace(Backend::Kafka, 1, r#""payload_limit_bytes": 16"#);
    let mut producer = TestProducer::start(vec![ns.clone()]).await;
    let writes = vec![
        WriteToLogRequest {
            idempotency_id: "b1".into(),
            ..write(&ns.name, b"first")
        },
        write(&ns.name, b"far too long for this namespace"),
        write("elsewhere", b"x"),
        WriteToLogRequest {
            idempotency_id: "b2".into(),
            ..write(&ns.name, b"second")
        },
    ];
    let results = producer
        .client
        .write_to_log_batch(WriteToLogBatchRequest { writes })
        .await
        .unwrap()
        .into_inner()
        .results;
    type Summary = (i32, String, String, Option<(Trilean, String)>);
    let summary: Vec<Summary> = results
        .into_iter()
        .map(|r| {
            (
                r.code,
                r.error,
                r.field,
                r.response.map(|a| (a.durable(), a.entry_id)),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                0,
                String::new(),
                String::new(),
                Some((Trilean::True, "b1".into()))
            ),
            (
                Code::InvalidArgument as i32,
                format!(
                    "payload of 31 bytes exceeds namespace '{}''s limit of 16 bytes",
                    ns.name
                ),
                "payload".to_owned(),
                None
            ),
            (
                Code::NotFound as i32,
                "namespace 'elsewhere' is not configured on this producer".to_owned(),
                "namespace".to_owned(),
                None
            ),
            (
                0,
                String::new(),
                String::new(),
                Some((Trilean::True, "b2".into()))
            ),
        ]
    );
    let mut ids: Vec<String> = read_back(reader(&ns, 0).await.as_ref(), |got| got.len() >= 2)
        .await
        .into_iter()
        .map(|e| e.id)
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        ["b1", "b2"],
        "only the accepted writes reach the queue"
    );

    for size in [0, 1001] {
        let writes = vec![write(&ns.name, b"x"); size];
        let status = producer
            .client
            .write_to_log_batch(WriteToLogBatchRequest { writes })
            .await
            .expect_err("refused");
        assert_eq!(
            (status.code(), status.message()),
            (
                Code::InvalidArgument,
                format!("a batch holds {size} writes; expected 1 to 1000").as_str()
            )
        );
    }
    producer.shutdown().await;
}
