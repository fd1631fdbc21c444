//! mTLS and authorization on the writer: a source region's consumer that presents a listed
//! certificate replicates into it; a principal the writer does not list, a client without a
//! certificate and a plaintext client are refused, and nothing they send is applied.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;

use memcache::exp::AsyncMetaClient;
use tonic::Code;
use wal_proto::v1::ApplyReplicatedRequest;
use wal_proto::v1::region_writer_client::RegionWriterClient;
use wal_queue::entry::{self, Body, Entry, Target};
use wal_testkit::pki::{ClientCert, Named, Pki, tls_channel};
use wal_testkit::{
    Backend, TestProducer, TestWriter, cache_converges, cache_set, cached, keyed,
    namespace_with_target, region_caches, region_target, start_consumer_with, unique, write_true,
};

/// `spiffe://wal.test/<name>` is the principal `<name>`.
const RULES: &str = r"RULE:^spiffe:\/\/wal\.test\/([a-z0-9-]+)$/$1/";
/// The principal of the source region's consumers, the only one the writer lets in.
const REPLICATOR: &str = "regiona-consumer";

async fn secured_writer(pki: &Pki, cache: &str) -> TestWriter {
    let flags = pki.server_flags("writer", RULES);
    TestWriter::start_with("regionb", cache, |o| {
        o.security.tls = flags;
        o.security.authorize = true;
        o.security.super_users = vec![REPLICATOR.to_owned()];
    })
    .await
}

fn certificate_of(pki: &Pki, name: &str) -> ClientCert {
    pki.client(Named::Uri(&format!("spiffe://wal.test/{name}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_with_a_listed_certificate_replicates_over_mtls() {
    let pki = Pki::new("wal test CA");
    let caches = region_caches();
    let writer = secured_writer(&pki, &caches[0]).await;
    let client = certificate_of(&pki, REPLICATOR);
    let (cert, key) = (pki.dir.join("consumer.pem"), pki.dir.join("consumer.key"));
    std::fs::write(&cert, &client.cert).unwrap();
    std::fs::write(&key, &client.key).unwrap();

    let namespace = namespace_with_target(Backend::Kafka, 1, &region_target(&[&writer]), "");
    let mut producer = TestProducer::start_with(vec![namespace.clone()], |o| {
        o.region = "regiona".to_owned();
    })
    .await;
    let ca = pki.ca_path();
    let consumer = start_consumer_with(vec![namespace.clone()], |o| {
        o.region = "regiona".to_owned();
        o.writer_ca = Some(ca);
        o.writer_cert = Some(cert);
        o.writer_key = Some(key);
    })
    .await;
    let key = unique("mtls");
    let set = cache_set(&key, "over mtls");
    write_true(&producer.client, keyed(&namespace.name, &key, &set)).await;
    let expected = BTreeMap::from([(key, Some("over mtls".to_owned()))]);
    cache_converges(&caches[0], &expected).await;
    consumer.shutdown().await;
    producer.shutdown().await;
}

/// A call replicating one cache set of `key` into the writer's region.
fn call_setting(key: &str) -> ApplyReplicatedRequest {
    let now = entry::now_micros();
    ApplyReplicatedRequest {
        source_region: "regiona".to_owned(),
        entries: vec![Entry {
            version: entry::ENTRY_VERSION,
            id: entry::new_entry_id(),
            namespace: "ns".to_owned(),
            key: key.to_owned(),
            body: Some(Body::Payload(cache_set(key, "intruded").into_bytes())),
            target: Some(Target {
                kind: "cache".to_owned(),
                settings_json: "{}".to_owned(),
            }),
            original_write_time_micros: now,
            deliver_at_micros: now,
            enqueued_at_micros: now,
            origin_region: "regiona".to_owned(),
            destination_region: "regionb".to_owned(),
            ..Entry::default()
        }],
    }
}

#[tokio::test]
async fn unlisted_principals_clients_without_certificates_and_plaintext_are_refused() {
    let pki = Pki::new("wal test CA");
    let caches = region_caches();
    let writer = secured_writer(&pki, &caches[0]).await;
    let key = unique("refused");

    let intruder = certificate_of(&pki, "intruder");
    let channel = tls_channel(writer.address, &pki.ca_pem(), Some(&intruder));
    let denied = RegionWriterClient::new(channel)
        .apply_replicated(call_setting(&key))
        .await
        .unwrap_err();
    wal_testkit::assert_refused(
        &denied,
        Code::PermissionDenied,
        &["\"intruder\"", "replicate"],
    );

    let anonymous = tls_channel(writer.address, &pki.ca_pem(), None);
    let refused = RegionWriterClient::new(anonymous)
        .apply_replicated(call_setting(&key))
        .await;
    assert!(refused.is_err(), "a client without a certificate got in");

    let plaintext = tonic::transport::Channel::from_shared(format!("http://{}", writer.address))
        .unwrap()
        .connect_lazy();
    let refused = RegionWriterClient::new(plaintext)
        .apply_replicated(call_setting(&key))
        .await;
    assert!(refused.is_err(), "a plaintext client got in");

    // A listed principal is let in: the refusals above were about who called, not the call.
    let listed = tls_channel(
        writer.address,
        &pki.ca_pem(),
        Some(&certificate_of(&pki, REPLICATOR)),
    );
    let other_key = unique("allowed");
    RegionWriterClient::new(listed)
        .apply_replicated(call_setting(&other_key))
        .await
        .unwrap();
    let cache = AsyncMetaClient::connect(caches[0].as_str()).await.unwrap();
    assert_eq!(
        cached(&cache, &other_key).await.as_deref(),
        Some("intruded")
    );
    assert_eq!(
        cached(&cache, &key).await,
        None,
        "a refused call was applied"
    );
}

#[tokio::test]
async fn a_writer_logs_in_to_a_cql_cluster_with_authentication_and_tls() {
    use wal_testkit::secured::{cql_auth_ca, cql_auth_login, cql_auth_nodes, cql_auth_place};
    let (user, password) = cql_auth_login();
    let cql = wal_testkit::Cql::connect_to(cql_auth_place(&password)).await;
    let table = cql.table().await;
    let writer = TestWriter::start_with("regionb", &region_caches()[0], |o| {
        o.cql.cql_nodes = cql_auth_nodes();
        o.cql_username = Some(user);
        o.cql_password = Some(wal_runtime::secret::Secret::new(password));
        o.cql_tls_ca = Some(cql_auth_ca());
    })
    .await;
    let mut call = call_setting("unused");
    call.entries[0].body = Some(Body::Payload(wal_testkit::put("row", "over tls")));
    call.entries[0].target = Some(Target {
        kind: "cql".to_owned(),
        settings_json: format!(
            r#"{{"keyspace": "{}", "table": "{table}"}}"#,
            wal_testkit::KEYSPACE
        ),
    });
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", writer.address))
        .unwrap()
        .connect_lazy();
    let answer = RegionWriterClient::new(channel)
        .apply_replicated(call)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        answer.outcomes[0].result(),
        wal_proto::v1::ApplyResult::Applied,
        "{}",
        answer.outcomes[0].reason
    );
    assert_eq!(cql.rows(&table).await["row"].as_deref(), Some("over tls"));
}
