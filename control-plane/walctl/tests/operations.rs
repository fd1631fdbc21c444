//! `walctl pause`, `resume`, `pauses`, `audit`, `cancel` and `cancellations` against a control
//! plane on the real stack: what each prints, and the exit codes scripts rely on.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use wal_namespaces::Backend;
use wal_testkit::walctl_at as walctl;
use wal_testkit::{Upstream, apply_config, control_plane_at, json_of, namespace_json};

#[tokio::test]
async fn an_operator_pauses_lists_resumes_and_reads_the_audit() {
    let (mut registry, url) = control_plane_at().await;
    let upstream = Upstream::start(|_| 200).await;
    let config = namespace_json(Backend::Kafka, 1, &upstream.target(), "");
    let name = apply_config(&mut registry, &config).await.name;
    let operator = ["--operator", "night-shift"];

    let paused = walctl(
        &url,
        &[
            &["pause", &name, "--reason", "target migrating", "-o", "json"],
            &operator[..],
        ]
        .concat(),
    )
    .await;
    let paused = json_of(&paused);
    assert_eq!(paused["changed"], true);
    assert_eq!(paused["pause"]["paused_by"], "night-shift");

    // A table for people, saying it was paused already and by whom.
    let again = walctl(&url, &["pause", &name, "--reason", "again"]).await;
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{again:?}");
    assert!(
        text.contains("paused already")
            && text.contains("night-shift")
            && text.contains("target migrating"),
        "{text}"
    );

    // Bad arguments and unknown namespaces exit as documented (2 and 4), naming the problem.
    let wrong = walctl(&url, &["pause", &name, "nowhere", "--reason", "x"]).await;
    assert_eq!(wrong.status.code(), Some(2), "{wrong:?}");
    let said = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        said.contains("no destination 'nowhere'") && said.contains("default"),
        "{said}"
    );
    let missing = walctl(&url, &["pause", "no-such-namespace", "--reason", "x"]).await;
    assert_eq!(missing.status.code(), Some(4), "{missing:?}");
    let no_reason = walctl(&url, &["pause", &name]).await;
    assert_eq!(no_reason.status.code(), Some(2), "{no_reason:?}");

    let listed = json_of(&walctl(&url, &["pauses", &name, "-o", "json"]).await);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["reason"], "target migrating");

    let resumed = walctl(
        &url,
        &[&["resume", &name, "-o", "json"], &operator[..]].concat(),
    )
    .await;
    let resumed = json_of(&resumed);
    assert_eq!(resumed["changed"], true);
    assert_eq!(resumed["ended"]["reason"], "target migrating");
    let none = walctl(&url, &["pauses", &name]).await;
    assert!(String::from_utf8_lossy(&none.stdout).contains("nothing is paused"));

    let audit = json_of(&walctl(&url, &["audit", &name, "-o", "json"]).await);
    let trail: Vec<(String, String, String)> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (text("actor"), text("verb"), text("result"))
        })
        .collect();
    let user = std::env::var("USER").unwrap_or_else(|_| "walctl".to_owned());
    let row = |actor: &str, verb: &str, result: &str| {
        (actor.to_owned(), verb.to_owned(), result.to_owned())
    };
    assert_eq!(
        trail,
        [
            row("night-shift", "resume", "done"),
            row(&user, "pause", "unchanged"),
            row("night-shift", "pause", "done"),
        ]
    );
}

/// `walctl cancel` on a namespace that records no receipts: the entry is cancelled if not yet
/// delivered, and the answer says why delivery is not known; `walctl cancellations` lists it.
#[tokio::test]
async fn an_operator_cancels_an_entry_and_lists_the_cancellations() {
    let (mut registry, url) = control_plane_at().await;
    let upstream = Upstream::start(|_| 200).await;
    let config = namespace_json(Backend::Kafka, 1, &upstream.target(), "");
    let name = apply_config(&mut registry, &config).await.name;

    let cancel = ["cancel", &name, "entry-1", "--reason", "customer asked"];
    let cancelled = walctl(
        &url,
        &[&cancel[..], &["--operator", "night-shift"]].concat(),
    )
    .await;
    let text = String::from_utf8_lossy(&cancelled.stdout);
    assert_eq!(cancelled.status.code(), Some(0), "{cancelled:?}");
    assert!(
        text.contains("entry 'entry-1' is cancelled if it is not delivered yet")
            && text.contains("has no durable_storage"),
        "{text}"
    );
    let again = json_of(&walctl(&url, &[&cancel[..], &["-o", "json"]].concat()).await);
    assert_eq!(again["changed"], false);
    assert_eq!(again["delivery_known"], false);
    assert_eq!(again["cancellation"]["cancelled_by"], "night-shift");

    let listed = json_of(&walctl(&url, &["cancellations", &name, "-o", "json"]).await);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["entry_id"], "entry-1");
    assert_eq!(listed[0]["reason"], "customer asked");

    let no_reason = walctl(&url, &["cancel", &name, "entry-2"]).await;
    assert_eq!(no_reason.status.code(), Some(2), "{no_reason:?}");
    let missing = walctl(&url, &["cancel", "no-such-namespace", "e", "--reason", "x"]).await;
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(4), "{missing:?}");
    assert!(stderr.contains("no-such-namespace"), "{stderr}");
}
