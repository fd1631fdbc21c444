//! mTLS and authorization on the producer, against real Kafka: each principal writes where its
//! namespace's `access.write` grants it and nowhere else; clients without a trusted, current
//! certificate that maps to a principal are refused; a refused write is never on the queue; a
//! revoked grant takes effect by reload; rotated certificates are used without a failed write.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use tonic::Code;
use tonic::transport::Channel;
use wal_namespaces::{Backend, Namespace};
use wal_proto::v1::transactions_client::TransactionsClient;
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::{Trilean, WriteTransactionRequest};
use wal_queue::entry::Body;
use wal_testkit::pki::{ClientCert, Named, Pki, tls_channel};
use wal_testkit::{TestProducer, kafka_log, namespace, write};

/// Principals from SPIFFE IDs (`spiffe://wal.test/<name>` is `<name>`), anything else by name.
const RULES: &str = r"RULE:^spiffe:\/\/wal\.test\/([a-z0-9-]+)$/$1/,RULE:^([a-z0-9.-]+)\.clients\.wal\.test$/$1/,DEFAULT";

struct Secured {
    producer: TestProducer,
    pki: Pki,
}

impl Secured {
    async fn start(namespaces: Vec<Namespace>) -> Self {
        let pki = Pki::new("wal test CA");
        let (cert, key) = pki.server("producer");
        let ca = pki.ca_path();
        let producer = TestProducer::start_with(namespaces, |o| {
            o.security.tls.tls_cert = Some(cert);
            o.security.tls.tls_key = Some(key);
            o.security.tls.tls_client_ca = Some(ca);
            o.security.tls.tls_reload_secs = 1;
            o.security.tls.principal_rules = RULES.to_owned();
            o.security.authorize = true;
            o.security.super_users = vec!["root".to_owned()];
        })
        .await;
        Self { producer, pki }
    }

    fn address(&self) -> SocketAddr {
        self.producer.address
    }

    fn client(&self, cert: Option<&ClientCert>) -> WriteAheadLogClient<Channel> {
        WriteAheadLogClient::new(tls_channel(self.address(), &self.pki.ca_pem(), cert))
    }
}

fn with_access(access: &str) -> Namespace {
    namespace(Backend::Kafka, 1, &format!(r#""access": {access}"#))
}

/// The payloads on the namespace's queue.
async fn on_queue(namespace: &Namespace) -> Vec<String> {
    kafka_log(&namespace.queues[0].name)
        .await
        .into_iter()
        .map(|entry| match entry.body {
            Some(Body::Payload(payload)) => String::from_utf8_lossy(&payload).into_owned(),
            other => format!("{other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn each_principal_writes_exactly_where_it_is_granted() {
    let alice_only = with_access(r#"{"write": ["alice"]}"#);
    let team = with_access(r#"{"write": ["bob", "team-*"], "admin": ["alice"]}"#);
    let nobody = namespace(Backend::Kafka, 1, "");
    let secured = Secured::start(vec![alice_only.clone(), team.clone(), nobody.clone()]).await;
    let pki = &secured.pki;
    let principals = [
        ("alice", pki.client(Named::Uri("spiffe://wal.test/alice"))),
        ("bob", pki.client(Named::Dns("bob.clients.wal.test"))),
        ("team-x", pki.client(Named::Cn("team-x"))),
        ("carol", pki.client(Named::Uri("spiffe://wal.test/carol"))),
        ("root", pki.client(Named::Cn("root"))),
    ];
    let granted = |principal: &str, ns: &Namespace| -> bool {
        principal == "root"
            || (ns.name == alice_only.name && principal == "alice")
            || (ns.name == team.name && (principal == "bob" || principal == "team-x"))
    };

    for (principal, cert) in &principals {
        let mut client = secured.client(Some(cert));
        for ns in [&alice_only, &team, &nobody] {
            let payload = format!("{principal} to {}", ns.name);
            let answer = client
                .write_to_log(write(&ns.name, payload.as_bytes()))
                .await;
            if granted(principal, ns) {
                let answer = answer.unwrap_or_else(|e| panic!("{payload}: {e}"));
                assert_eq!(answer.get_ref().durable(), Trilean::True, "{payload}");
            } else {
                let denied = answer.expect_err(&payload);
                assert_eq!(denied.code(), Code::PermissionDenied, "{payload}: {denied}");
                let message = denied.message();
                assert!(
                    message.contains(&format!("{principal:?}"))
                        && message.contains("write")
                        && message.contains(&ns.name),
                    "the denial names the principal, the action and the namespace: {message}"
                );
            }
        }
    }

    // What was granted is on each queue, and nothing that was denied.
    for ns in [&alice_only, &team, &nobody] {
        let mut stored = on_queue(ns).await;
        stored.sort();
        let mut expected: Vec<String> = principals
            .iter()
            .filter(|(p, _)| granted(p, ns))
            .map(|(p, _)| format!("{p} to {}", ns.name))
            .collect();
        expected.sort();
        assert_eq!(stored, expected, "on {}", ns.name);
    }

    // The two-phase calls are writes too.
    let carol = &principals[3].1;
    let channel = tls_channel(secured.address(), &pki.ca_pem(), Some(carol));
    let denied = TransactionsClient::new(channel)
        .write_transaction(WriteTransactionRequest {
            namespace: team.name.clone(),
            transaction_id: "t1".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied}");
}

#[tokio::test]
async fn clients_without_a_usable_certificate_are_refused_and_store_nothing() {
    let open = with_access(r#"{"write": ["*"]}"#);
    let mut secured = Secured::start(vec![open.clone()]).await;
    let strangers = Pki::new("a CA nobody here trusts");
    let pki = &secured.pki;
    let cases: Vec<(&str, WriteAheadLogClient<Channel>)> = vec![
        ("no certificate", secured.client(None)),
        (
            "an untrusted CA",
            WriteAheadLogClient::new(tls_channel(
                secured.address(),
                &pki.ca_pem(),
                Some(&strangers.client(Named::Cn("alice"))),
            )),
        ),
        (
            "an expired certificate",
            secured.client(Some(&pki.expired_client(Named::Cn("alice")))),
        ),
        (
            "plaintext to the TLS port",
            WriteAheadLogClient::new(
                Channel::from_shared(format!("http://{}", secured.address()))
                    .unwrap()
                    .connect_lazy(),
            ),
        ),
    ];
    for (case, mut client) in cases {
        let refused = client
            .write_to_log(write(&open.name, case.as_bytes()))
            .await
            .expect_err(case);
        // Refused at the handshake: the client sees a transport error (the server's alert, or
        // a closed connection), never an answer.
        assert!(
            matches!(refused.code(), Code::Unavailable | Code::Unknown),
            "{case}: {refused}"
        );
    }

    // A certificate the CA signed whose name no rule maps: known to TLS, no one to the platform.
    let spiffe_only = r"RULE:^spiffe:\/\/wal\.test\/(.*)$/$1/";
    secured.producer.shutdown().await;
    let (cert, key) = secured.pki.server("strict");
    let ca = secured.pki.ca_path();
    let strict = TestProducer::start_with(vec![open.clone()], |o| {
        o.security.tls.tls_cert = Some(cert);
        o.security.tls.tls_key = Some(key);
        o.security.tls.tls_client_ca = Some(ca);
        o.security.tls.principal_rules = spiffe_only.to_owned();
        o.security.authorize = true;
    })
    .await;
    let orphan = secured.pki.client(Named::Cn("orphan"));
    let refused = WriteAheadLogClient::new(tls_channel(
        strict.address,
        &secured.pki.ca_pem(),
        Some(&orphan),
    ))
    .write_to_log(write(&open.name, b"orphan"))
    .await
    .unwrap_err();
    wal_testkit::assert_refused(&refused, Code::Unauthenticated, &["\"orphan\""]);

    assert!(
        on_queue(&open).await.is_empty(),
        "a refused write was stored"
    );
}

#[tokio::test]
async fn a_revoked_grant_takes_effect_by_reload() {
    let ns = with_access(r#"{"write": ["alice", "bob"]}"#);
    let secured = Secured::start(vec![ns.clone()]).await;
    let alice = secured.pki.client(Named::Cn("alice"));
    let mut client = secured.client(Some(&alice));
    let answer = client
        .write_to_log(write(&ns.name, b"before"))
        .await
        .unwrap();
    assert_eq!(answer.get_ref().durable(), Trilean::True);

    let mut revoked = ns.clone();
    revoked
        .access
        .write
        .retain(|g| g != &wal_namespaces::Grant::parse("alice"));
    let changes = secured.producer.live.reload(vec![revoked]).await.unwrap();
    assert_eq!(changes.changed, vec![ns.name.clone()], "{changes}");

    let denied = client
        .write_to_log(write(&ns.name, b"after"))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied}");
    assert_eq!(on_queue(&ns).await, vec!["before".to_owned()]);
}

#[tokio::test]
async fn rotated_certificates_are_used_without_a_failed_write() {
    let ns = with_access(r#"{"write": ["alice"]}"#);
    let secured = Secured::start(vec![ns.clone()]).await;
    let alice = secured.pki.client(Named::Cn("alice"));
    let address = secured.address();
    let ca = secured.pki.ca_pem();

    // Writes flow on fresh connections (each client connects anew) while the server's files
    // are replaced twice, the key briefly not matching the certificate in between.
    let writer = tokio::spawn({
        let (alice, ca, name) = (alice.clone(), ca.clone(), ns.name.clone());
        async move {
            let mut answered = 0;
            let until = tokio::time::Instant::now() + Duration::from_secs(6);
            while tokio::time::Instant::now() < until {
                let mut client = WriteAheadLogClient::new(tls_channel(address, &ca, Some(&alice)));
                let answer = client
                    .write_to_log(write(&name, format!("w{answered}").as_bytes()))
                    .await
                    .unwrap_or_else(|e| panic!("write {answered} failed during rotation: {e}"));
                assert_eq!(answer.get_ref().durable(), Trilean::True);
                answered += 1;
            }
            answered
        }
    });
    let (cert, key) = (
        secured.pki.dir.join("producer.pem"),
        secured.pki.dir.join("producer.key"),
    );
    for round in 0..2 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (new_cert, new_key) = secured.pki.server(&format!("next{round}"));
        // The certificate first, the key a reload period later: the pair does not match in
        // between, and the server keeps the last good pair meanwhile.
        std::fs::copy(&new_cert, &cert).unwrap();
        tokio::time::sleep(Duration::from_millis(1200)).await;
        std::fs::copy(&new_key, &key).unwrap();
    }
    let answered = writer.await.unwrap();
    assert!(answered > 0);

    // The rotated certificate is the one served now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let served = served_certificate(address).await;
    let on_disk = {
        use rustls::pki_types::pem::PemObject as _;
        rustls::pki_types::CertificateDer::from_pem_file(&cert).unwrap()
    };
    assert_eq!(served, on_disk.as_ref());
}

/// The leaf certificate a TLS server at `address` presents.
async fn served_certificate(address: SocketAddr) -> Vec<u8> {
    use rustls::pki_types::ServerName;
    #[derive(Debug)]
    struct Any;
    impl rustls::client::danger::ServerCertVerifier for Any {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            signature: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            self.verify_tls12_signature(message, cert, signature)
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            wal_runtime::tls::provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(wal_runtime::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(Any))
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    // The server asks for a client certificate; the handshake's first flight already carries
    // the server's, which is all this needs.
    let stream = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await;
    match stream {
        Ok(stream) => stream.get_ref().1.peer_certificates().unwrap()[0].to_vec(),
        Err(error) => panic!("handshake for the server's certificate: {error}"),
    }
}

#[tokio::test]
async fn a_producer_follows_a_control_plane_that_requires_client_certificates() {
    use wal_namespaces::feed::{ClientTls, Feed, Source};
    use wal_proto::v1::ApplyRequest;
    use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;

    let pki = Pki::new("wal test CA");
    let tls =
        wal_runtime::tls::ServerTls::load(&pki.server_flags("control-plane", "DEFAULT")).unwrap();
    let address = wal_testkit::control_plane_serving(
        tls,
        wal_runtime::authorize::Authorizer::on(vec!["root".into()]),
    )
    .await;
    let name = wal_testkit::unique("followed");
    let config = wal_testkit::config(
        &name,
        "KAFKA",
        &[&wal_testkit::unique("followed-q")],
        r#", "default_target": {"kind": "http", "settings": {"url": "http://127.0.0.1:9/x"}}, "access": {"admin": ["root"]}"#,
    );
    let root = pki.client(Named::Cn("root"));
    NamespaceRegistryClient::new(tls_channel(address, &pki.ca_pem(), Some(&root)))
        .apply(ApplyRequest {
            config_json: config,
            author: "test".into(),
            ..Default::default()
        })
        .await
        .unwrap();

    // The follower's certificate, as a deployment mounts it.
    let follower = pki.client(Named::Cn("producer"));
    let (cert, key) = (pki.dir.join("follower.pem"), pki.dir.join("follower.key"));
    std::fs::write(&cert, &follower.cert).unwrap();
    std::fs::write(&key, &follower.key).unwrap();
    let source = Source::ControlPlane(
        format!("https://localhost:{}", address.port()),
        Some(ClientTls {
            ca: pki.ca_path(),
            cert: Some(cert),
            key: Some(key),
        }),
    );
    let mut producer = TestProducer::start_following(Feed::open(source).await.unwrap()).await;
    let answer = producer
        .client
        .write_to_log(write(&name, b"followed"))
        .await
        .unwrap();
    assert_eq!(answer.get_ref().durable(), Trilean::True);
    producer.shutdown().await;
}
