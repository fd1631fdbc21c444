//! The index kind on the real Cassandra: a secondary index fed by a table's own entries equals
//! the index computed from the table, exactly, after retries, reordering and a replay.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt as _;
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use wal_apply::clients::{ClientSettings, Clients};
use wal_apply::index::IndexTarget;
use wal_apply::{Mutation, TargetRegistry};
use wal_queue::entry::{self, Body, Entry, Target as TargetSpec};
use wal_testkit::{Cql, KEYSPACE, delete, put};

const KEYS: usize = 1_000;
const WRITES_PER_KEY: usize = 5;
/// Few distinct values, so an index partition holds many rows and a value moves between them.
const VALUES: u32 = 20;

fn spec(kind: &str, settings: String) -> TargetSpec {
    TargetSpec {
        kind: kind.into(),
        settings_json: settings,
    }
}

fn entry_for(key: &str, payload: Vec<u8>, written_micros: i64) -> Entry {
    Entry {
        version: entry::ENTRY_VERSION,
        id: entry::new_entry_id(),
        namespace: "index-test".into(),
        key: key.into(),
        body: Some(Body::Payload(payload)),
        original_write_time_micros: written_micros,
        ..Entry::default()
    }
}

fn put_row(id: &str, value: &str) -> String {
    format!(r#"{{"put": {{"row": {{"id": "{id}", "value": "{value}"}}}}}}"#)
}

fn two(first: &str, second: &str) -> Vec<u8> {
    format!(r#"{{"mutations": [{first}, {second}]}}"#).into_bytes()
}

async fn apply_all(registry: &TargetRegistry, target: &TargetSpec, entries: &[&Entry]) {
    let target = registry.resolve(target).await.unwrap();
    for entry in entries {
        let Some(Body::Payload(payload)) = &entry.body else {
            unreachable!()
        };
        let mutation = Mutation {
            entry,
            payload,
            trace: None,
        };
        target.apply(mutation).await.unwrap();
    }
}

/// 1,000 rows, each written five times (puts that move the indexed value, deletes, and entries
/// writing the row twice at one write time), applied to
/// the table and its index with repeats (retries) and then all again (a replay), each row's
/// writes in a shuffled order: the index holds exactly one row per live base row, under its
/// current value, and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_fed_by_shuffled_retries_and_a_replay_equals_the_index_of_its_table() {
    let cql = Cql::connect().await;
    let base = cql.table().await;
    let index = format!("{base}_by_value");
    let rebuilt = format!("{base}_rebuilt");
    for table in [&index, &rebuilt] {
        let create = format!(
            "CREATE TABLE {KEYSPACE}.{table} (value text, id text, PRIMARY KEY ((value), id))"
        );
        cql.session.query_unpaged(create, &[]).await.unwrap();
    }
    let clients = Arc::new(
        Clients::new(ClientSettings {
            cql_nodes: wal_testkit::cql_nodes(),
            ..ClientSettings::none(std::time::Duration::from_secs(3))
        })
        .unwrap(),
    );
    let registry = TargetRegistry::builtin(Arc::clone(&clients));
    let table = spec(
        "cql",
        format!(r#"{{"keyspace": "{KEYSPACE}", "table": "{base}"}}"#),
    );
    let settings_of = |index: &str| {
        format!(
            r#"{{"keyspace": "{KEYSPACE}", "table": "{index}", "base_table": "{base}", "key": ["id"], "columns": ["value"]}}"#
        )
    };
    let indexed = spec("index", settings_of(&index));

    let mut rng = rand::rngs::StdRng::seed_from_u64(43);
    let start = entry::now_micros() - 3_600_000_000;
    let mut rows: Vec<Vec<Entry>> = Vec::new();
    for key in 0..KEYS {
        let id = format!("row{key}");
        let writes = (0..WRITES_PER_KEY)
            .map(|n| {
                let pick = rng.random_range(0..10);
                let (a, b) = (
                    format!("v{}", rng.random_range(0..VALUES)),
                    format!("v{}", rng.random_range(0..VALUES)),
                );
                let payload = match pick {
                    0 | 1 => delete(&id),
                    // Two mutations of the row in one entry, at one write time: CQL's tie
                    // rules decide (a delete beats a put; of two puts the larger value stays).
                    2 => {
                        let whole = format!(r#"{{"delete": {{"key": {{"id": "{id}"}}}}}}"#);
                        two(&whole, &put_row(&id, &a))
                    }
                    3 => two(&put_row(&id, &a), &put_row(&id, &b)),
                    _ => put(&id, &a),
                };
                // Distinct write times, a row's in the order written.
                let written = start + i64::try_from(n * KEYS + key).unwrap();
                entry_for(&id, payload, written)
            })
            .collect();
        rows.push(writes);
    }
    // Each row's writes: once each, some again (retries), then all again (a replay), shuffled.
    let orders: Vec<Vec<&Entry>> = rows
        .iter()
        .map(|writes| {
            let mut order: Vec<&Entry> = writes.iter().collect();
            order.extend(writes.iter().filter(|_| rng.random_bool(0.3)));
            order.extend(writes.iter());
            order.shuffle(&mut rng);
            order
        })
        .collect();
    // Rows at once, a row's writes one at a time: as a destination applies a key's entries.
    futures::stream::iter(&orders)
        .for_each_concurrent(32, |order| {
            let (registry, table, indexed) = (&registry, &table, &indexed);
            async move {
                apply_all(registry, table, order).await;
                apply_all(registry, indexed, order).await;
            }
        })
        .await;

    let expected: BTreeSet<(String, String)> = cql
        .rows(&base)
        .await
        .into_iter()
        .filter_map(|(id, value)| value.map(|value| (value, id)))
        .collect();
    let actual = index_rows(&cql, &index).await;
    let live = expected.len();
    assert!(
        live > KEYS / 2 && live < KEYS,
        "the check covers live rows and deleted ones: {live} of {KEYS} live"
    );
    assert_same(&actual, &expected, "fed by the entries");

    // The same index built from the table alone, as `walctl index rebuild` does.
    let settings = wal_targets::parse(&settings_of(&rebuilt)).unwrap();
    let target = IndexTarget::connect(settings, &clients).await.unwrap();
    let (read, indexed_rows) = target.rebuild(|_| {}).await.unwrap();
    // Deleted rows are gone from the table; every row left has its value set.
    assert_eq!((read, indexed_rows), (live as u64, live as u64));
    assert_same(
        &index_rows(&cql, &rebuilt).await,
        &expected,
        "rebuilt from the table",
    );
}

async fn index_rows(cql: &Cql, table: &str) -> BTreeSet<(String, String)> {
    let select = format!("SELECT value, id FROM {KEYSPACE}.{table}");
    wal_testkit::cql_rows::select(&cql.session, select, ())
        .await
        .rows::<(String, String)>()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn assert_same(
    actual: &BTreeSet<(String, String)>,
    expected: &BTreeSet<(String, String)>,
    how: &str,
) {
    let stale: Vec<_> = actual.difference(expected).take(5).collect();
    let missing: Vec<_> = expected.difference(actual).take(5).collect();
    assert!(
        stale.is_empty() && missing.is_empty(),
        "the index {how} equals its table's: stale {stale:?}, missing {missing:?} (of {} live rows)",
        expected.len()
    );
}
