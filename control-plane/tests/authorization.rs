//! mTLS and authorization on the control plane: a namespace is changed only by its stored
//! config's admins (or a super-user), created only by a super-user, never left without an admin
//! by anyone else, and every change records the authenticated principal as its author.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use tonic::Code;
use tonic::transport::Channel;
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;
use wal_proto::v1::{ApplyRequest, DeleteRequest, HistoryRequest, ListRequest};
use wal_runtime::authorize::Authorizer;
use wal_runtime::tls::ServerTls;
use wal_testkit::pki::{Named, Pki, tls_channel};
use wal_testkit::{config, control_plane_serving, unique};

fn apply(config_json: String) -> ApplyRequest {
    ApplyRequest {
        config_json,
        author: "laptop-user".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn only_a_namespaces_admins_change_it_and_the_author_is_the_principal() {
    let pki = Pki::new("wal test CA");
    let tls = ServerTls::load(&pki.server_flags("control-plane", "DEFAULT")).unwrap();
    let address = control_plane_serving(tls, Authorizer::on(vec!["root".into()])).await;
    let client = |name: &str| -> NamespaceRegistryClient<Channel> {
        let cert = pki.client(Named::Cn(name));
        NamespaceRegistryClient::new(tls_channel(address, &pki.ca_pem(), Some(&cert)))
    };
    let (mut root, mut alice, mut bob) = (client("root"), client("alice"), client("bob"));
    let name = unique("secured");
    let topic = unique("secured-q");
    let with_admins = |admins: &str| {
        config(
            &name,
            "KAFKA",
            &[&topic],
            &format!(r#", "access": {{"admin": [{admins}], "write": ["svc"]}}"#),
        )
    };

    // Only a super-user creates.
    let denied = alice
        .apply(apply(with_admins(r#""alice""#)))
        .await
        .unwrap_err();
    wal_testkit::assert_refused(
        &denied,
        Code::PermissionDenied,
        &["only super-users create"],
    );
    let created = root.apply(apply(with_admins(r#""alice""#))).await.unwrap();
    let version = created.into_inner().version.unwrap();
    assert_eq!(version.author, r#"root (as "laptop-user")"#);

    // Its admin changes it; someone else may not, and nothing is stored for them.
    let changed = alice
        .apply(apply(with_admins(r#""alice", "carol""#)))
        .await
        .unwrap();
    assert_eq!(
        changed.into_inner().version.unwrap().author,
        r#"alice (as "laptop-user")"#
    );
    let denied = bob.apply(apply(with_admins(r#""bob""#))).await.unwrap_err();
    wal_testkit::assert_refused(
        &denied,
        Code::PermissionDenied,
        &["\"bob\"", "admin", &name],
    );
    let denied = bob
        .delete(DeleteRequest {
            name: name.clone(),
            author: "bob".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied}");

    // Nobody but a super-user may leave it without an admin.
    let refused = alice.apply(apply(with_admins(""))).await.unwrap_err();
    wal_testkit::assert_refused(
        &refused,
        Code::FailedPrecondition,
        &["access.admin grants no one"],
    );

    // Reads are open to any client the CA vouches for.
    let listed = bob.list(ListRequest {}).await.unwrap().into_inner();
    assert!(listed.namespaces.iter().any(|v| v.name == name));
    let history = bob
        .history(HistoryRequest { name: name.clone() })
        .await
        .unwrap()
        .into_inner();
    let authors: Vec<_> = history.versions.iter().map(|v| v.author.as_str()).collect();
    assert_eq!(
        authors,
        [r#"root (as "laptop-user")"#, r#"alice (as "laptop-user")"#],
        "the refused changes stored nothing"
    );

    // Handing admin over takes it away.
    alice.apply(apply(with_admins(r#""bob""#))).await.unwrap();
    let denied = alice
        .delete(DeleteRequest {
            name: name.clone(),
            author: "alice".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied}");
    let deleted = bob
        .delete(DeleteRequest {
            name: name.clone(),
            author: "bob".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.author, "bob");
}
