//! The Operations service (proto/wal/v1/operations.proto): pauses kept and carried by the Watch
//! stream, resumes that name what stays paused, clear refusals, and the audit of each, by whom.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use tonic::Code;
use tonic::transport::Channel;
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;
use wal_proto::v1::operations_client::OperationsClient;
use wal_proto::v1::{
    ApplyRequest, AuditRequest, ListPausesRequest, PauseRequest, ResumeRequest,
    ShowDeadLetterRequest, WatchRequest,
};
use wal_runtime::authorize::Authorizer;
use wal_runtime::tls::ServerTls;
use wal_testkit::pki::{Named, Pki, tls_channel};
use wal_testkit::{assert_refused, config, control_plane_at, control_plane_serving, unique};

fn pause(namespace: &str, destination: &str, reason: &str) -> PauseRequest {
    PauseRequest {
        namespace: namespace.to_owned(),
        destination: destination.to_owned(),
        reason: reason.to_owned(),
        operator: "ops-test".to_owned(),
    }
}

fn resume(namespace: &str, destination: &str) -> ResumeRequest {
    ResumeRequest {
        namespace: namespace.to_owned(),
        destination: destination.to_owned(),
        operator: "ops-test".to_owned(),
    }
}

/// A Kafka namespace with one further destination, `events`, applied; its name.
async fn namespace_with_events(registry: &mut NamespaceRegistryClient<Channel>) -> String {
    let name = unique("ops");
    let destinations = r#", "destinations": [{"name": "events", "start_from": "now", "target": {"kind": "kafka", "settings": {"topic": "ops-events"}}}]"#;
    let text = config(&name, "KAFKA", &[&unique("ops-q")], destinations);
    registry
        .apply(ApplyRequest {
            config_json: text,
            author: "ops-test".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    name
}

#[tokio::test]
async fn a_pause_is_kept_watched_resumed_and_audited() {
    let (mut registry, url) = control_plane_at().await;
    let mut operations = OperationsClient::connect(url).await.unwrap();
    let name = namespace_with_events(&mut registry).await;

    // Refused, each naming what was wrong; nothing is paused by them.
    let refused = operations
        .pause(pause("no-such-namespace", "", "x"))
        .await
        .unwrap_err();
    assert_refused(&refused, Code::NotFound, &["no-such-namespace"]);
    let refused = operations
        .pause(pause(&name, "nowhere", "x"))
        .await
        .unwrap_err();
    assert_refused(
        &refused,
        Code::InvalidArgument,
        &["no destination 'nowhere'", "default, events"],
    );
    let refused = operations.pause(pause(&name, "", " ")).await.unwrap_err();
    assert_refused(&refused, Code::InvalidArgument, &["reason"]);

    let mut watch = registry.watch(WatchRequest {}).await.unwrap().into_inner();
    let first = watch.message().await.unwrap().unwrap();
    assert!(first.pauses.iter().all(|p| p.namespace != name));

    // Paused: stored, announced to the watch at once, and a second pause keeps the first.
    let paused = operations
        .pause(pause(&name, "", "disk full on the target"))
        .await
        .unwrap()
        .into_inner();
    assert!(paused.changed);
    let snapshot = watch.message().await.unwrap().unwrap();
    let carried: Vec<_> = snapshot
        .pauses
        .iter()
        .filter(|p| p.namespace == name)
        .collect();
    assert_eq!(carried.len(), 1, "{snapshot:?}");
    assert_eq!(carried[0].reason, "disk full on the target");
    assert_eq!(carried[0].paused_by, "ops-test");
    let again = operations
        .pause(pause(&name, "", "another reason"))
        .await
        .unwrap()
        .into_inner();
    assert!(!again.changed);
    assert_eq!(again.pause.unwrap().reason, "disk full on the target");
    operations
        .pause(pause(&name, "events", "the topic is being moved"))
        .await
        .unwrap();
    let listed = operations
        .list_pauses(ListPausesRequest {
            namespace: name.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let destinations: Vec<_> = listed
        .pauses
        .iter()
        .map(|p| p.destination.as_str())
        .collect();
    assert_eq!(destinations, ["", "events"]);

    // The namespace-wide resume ends that pause alone and names the one left.
    let resumed = operations
        .resume(resume(&name, ""))
        .await
        .unwrap()
        .into_inner();
    assert!(resumed.changed);
    assert_eq!(resumed.ended.unwrap().reason, "disk full on the target");
    assert_eq!(resumed.still_paused.len(), 1);
    assert_eq!(resumed.still_paused[0].destination, "events");
    let twice = operations
        .resume(resume(&name, ""))
        .await
        .unwrap()
        .into_inner();
    assert!(!twice.changed && twice.ended.is_none());

    // Every call that changed something, or tried to, newest first.
    let audit = operations
        .audit(AuditRequest {
            namespace: name.clone(),
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let trail: Vec<(&str, &str, &str)> = audit
        .records
        .iter()
        .map(|r| (r.verb.as_str(), r.subject.as_str(), r.result.as_str()))
        .collect();
    assert_eq!(
        trail,
        [
            ("resume", "", "unchanged"),
            ("resume", "", "done"),
            ("pause", "events", "done"),
            ("pause", "", "unchanged"),
            ("pause", "", "done"),
        ]
    );
    assert!(audit.records.iter().all(|r| r.actor == "ops-test"));
    assert_eq!(audit.records[4].detail, "disk full on the target");

    // A deleted namespace's pause stays, and its last admins may still end it.
    wal_testkit::delete_namespace(&mut registry, &name).await;
    let refused = operations
        .pause(pause(&name, "", "after the deletion"))
        .await
        .unwrap_err();
    assert_refused(&refused, Code::NotFound, &["deleted"]);
    let resumed = operations
        .resume(resume(&name, "events"))
        .await
        .unwrap()
        .into_inner();
    assert!(
        resumed.changed && resumed.still_paused.is_empty(),
        "{resumed:?}"
    );
}

#[tokio::test]
async fn only_a_namespaces_admins_pause_it_and_a_refusal_is_audited_with_the_principal() {
    // The recorder first: denials are counted on this process's metrics.
    wal_testkit::scrape();
    let pki = Pki::new("wal test CA");
    let tls = ServerTls::load(&pki.server_flags("control-plane", "DEFAULT")).unwrap();
    let address = control_plane_serving(tls, Authorizer::on(vec!["root".into()])).await;
    let channel =
        |name: &str| tls_channel(address, &pki.ca_pem(), Some(&pki.client(Named::Cn(name))));
    let mut root = NamespaceRegistryClient::new(channel("root"));
    let (mut alice, mut bob) = (
        OperationsClient::new(channel("alice")),
        OperationsClient::new(channel("bob")),
    );
    let name = unique("ops-secured");
    let access = r#", "access": {"admin": ["alice"], "write": ["svc"]}"#;
    root.apply(ApplyRequest {
        config_json: config(&name, "KAFKA", &[&unique("ops-secured-q")], access),
        author: "root".into(),
        ..Default::default()
    })
    .await
    .unwrap();

    // Asking what one may do is no attempt: answered, not audited.
    let access = |namespace: &str| wal_proto::v1::AccessRequest {
        namespace: namespace.to_owned(),
    };
    let of_alice = alice.access(access(&name)).await.unwrap().into_inner();
    assert!(
        of_alice.authorization && of_alice.admin && !of_alice.write,
        "{of_alice:?}"
    );
    assert_eq!(of_alice.principal, "alice");
    let of_bob = bob.access(access(&name)).await.unwrap().into_inner();
    assert!(!of_bob.admin && !of_bob.write, "{of_bob:?}");
    let missing = bob.access(access("no-such-namespace")).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "{missing}");
    assert_eq!(
        denials(&name),
        0.0,
        "bob asked and holds no admin grant: not counted as a denial"
    );

    let denied = bob.pause(pause(&name, "", "bob's idea")).await.unwrap_err();
    assert_refused(&denied, Code::PermissionDenied, &["\"bob\"", "admin"]);
    assert_eq!(denials(&name), 1.0, "bob's pause is counted");
    let paused = alice
        .pause(pause(&name, "", "alice's incident"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(paused.pause.unwrap().paused_by, r#"alice (as "ops-test")"#);
    let denied = bob.resume(resume(&name, "")).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied}");
    // A dead letter's payload is the admins' to read.
    let show = ShowDeadLetterRequest {
        namespace: name.clone(),
        id: "any".into(),
    };
    let denied = bob.show_dead_letter(show).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied}");
    let cancel = wal_proto::v1::CancelEntryRequest {
        namespace: name.clone(),
        entry_id: "an-entry".into(),
        reason: "bob's idea".into(),
        operator: "ops-test".into(),
    };
    let denied = bob.cancel_entry(cancel).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied}");
    let abort = wal_proto::v1::TransactionAbortRequest {
        namespace: name.clone(),
        transaction_id: "a-transaction".into(),
        reason: "bob's idea".into(),
        operator: "ops-test".into(),
    };
    let denied = bob.abort_transaction(abort).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied}");

    // Reads are open to any principal; they show the pause still in force, and who tried what.
    let listed = bob
        .list_pauses(ListPausesRequest {
            namespace: name.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.pauses.len(), 1);
    let audit = bob
        .audit(AuditRequest {
            namespace: name.clone(),
            limit: 10,
        })
        .await
        .unwrap()
        .into_inner();
    let trail: Vec<(&str, &str, bool)> = audit
        .records
        .iter()
        .map(|r| {
            (
                r.actor.as_str(),
                r.verb.as_str(),
                r.result.starts_with("refused"),
            )
        })
        .collect();
    assert_eq!(
        trail,
        [
            (r#"bob (as "ops-test")"#, "abort transaction", true),
            (r#"bob (as "ops-test")"#, "cancel", true),
            (r#"bob (as "ops-test")"#, "resume", true),
            (r#"alice (as "ops-test")"#, "pause", false),
            (r#"bob (as "ops-test")"#, "pause", true),
        ]
    );
}

/// The authorization denials this process counted for `namespace`.
fn denials(namespace: &str) -> f64 {
    let label = format!("namespace=\"{namespace}\"");
    wal_testkit::scrape()
        .lines()
        .filter(|line| line.starts_with(wal_runtime::authorize::DENIALS) && line.contains(&label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
