//! `walctl index rebuild` against the real stack: an index destination about to be added over a
//! table that already has rows is filled from the table, from the config file, as its help says.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;

use wal_namespaces::Backend;
use wal_testkit::{Cql, KEYSPACE, apply_config, control_plane_at, cql_target, json_of};
use wal_testkit::{namespace_json, walctl_at as walctl};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_fills_an_index_destination_from_its_base_table() {
    let (mut registry, url) = control_plane_at().await;
    let cql = Cql::connect().await;
    let base = cql.table().await;
    let index = format!("{base}_by_value");
    let create =
        format!("CREATE TABLE {KEYSPACE}.{index} (value text, id text, PRIMARY KEY ((value), id))");
    cql.session.query_unpaged(create, &[]).await.unwrap();
    // Rows written before the index existed; one without the indexed value.
    for (id, value) in [
        ("a", Some("red")),
        ("b", Some("blue")),
        ("c", Some("red")),
        ("d", None),
    ] {
        let insert = format!("INSERT INTO {KEYSPACE}.{base} (id, value) VALUES (?, ?)");
        cql.session
            .query_unpaged(insert, (id, value))
            .await
            .unwrap();
    }
    let extra = format!(
        r#""destinations": [{{"name": "by-value", "start_from": "now", "target": {{"kind": "index",
            "settings": {{"keyspace": "{KEYSPACE}", "table": "{index}", "base_table": "{base}",
            "key": ["id"], "columns": ["value"]}}}}}}]"#
    );
    let config = namespace_json(Backend::Kafka, 1, &cql_target(&base), &extra);
    let namespace = wal_namespaces::parse(&config, "test").unwrap();
    // From the config about to be applied, before the destination's readers start.
    let file = std::env::temp_dir().join(format!("{}.json", namespace.name));
    std::fs::write(&file, &config).unwrap();
    let file = file.to_string_lossy().into_owned();

    let args = [
        "index",
        "rebuild",
        &namespace.name,
        "by-value",
        "--file",
        &file,
        "-o",
        "json",
    ];
    let report = json_of(&walctl(&url, &args).await);
    assert_eq!(
        (report["read"].as_u64(), report["indexed"].as_u64()),
        (Some(4), Some(3)),
        "{report}"
    );
    let select = format!("SELECT value, id FROM {KEYSPACE}.{index}");
    let rows: BTreeSet<(String, String)> = wal_testkit::cql_rows::select(&cql.session, select, ())
        .await
        .rows::<(String, String)>()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let expected =
        [("blue", "b"), ("red", "a"), ("red", "c")].map(|(v, id)| (v.to_owned(), id.to_owned()));
    assert_eq!(rows, BTreeSet::from(expected));

    // Applied, the control plane's config is read; a destination that is not an index is named
    // with the ones there are.
    apply_config(&mut registry, &config).await;
    let wrong = walctl(&url, &["index", "rebuild", &namespace.name, "nope"]).await;
    let said = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success());
    assert!(
        said.contains(r#"no index destination 'nope'; its index destinations: ["by-value"]"#),
        "{said}"
    );
}
