//! The namespace store's conformance suite: every check runs against the embedded SQLite store
//! and against the real PostgreSQL that `scripts/stack up` starts (WAL_POSTGRES_URL).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use wal_control_plane::operations::audit::AuditRecord;
use wal_control_plane::operations::cancellations::{
    CancellationRecord, Cancelled, MAX_PER_NAMESPACE,
};
use wal_control_plane::operations::pauses::PauseRecord;
use wal_control_plane::operations::redrives::{
    RedriveAsk, RedriveProgress, RedriveRecord, STALE_AFTER, SavedPositions,
};
use wal_control_plane::store::{NamespaceStore, NewVersion, StoreError, schema_version};

/// A fresh, empty store of the named engine.
async fn fresh(engine: &str) -> NamespaceStore {
    NamespaceStore::connect(&fresh_url(engine).await)
        .await
        .unwrap()
}

/// The URL of a fresh, empty database of the named engine.
async fn fresh_url(engine: &str) -> String {
    let unique = wal_testkit::unique("store").replace('-', "_");
    match engine {
        "sqlite" => {
            let path = std::env::temp_dir().join(format!("wal-store-{unique}.db"));
            format!("sqlite://{}", path.display())
        }
        _ => {
            let admin_url = std::env::var("WAL_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://wal@127.0.0.1:15432/postgres".into());
            // A database per test, so tests run in parallel without seeing each other's rows.
            let database = format!("store_{unique}");
            sqlx::any::install_default_drivers();
            let admin = sqlx::AnyPool::connect(&admin_url)
                .await
                .unwrap_or_else(|e| {
                    panic!("PostgreSQL at {admin_url} (is the stack up? scripts/stack up): {e}")
                });
            // The name is made here, of hex digits: nothing to inject.
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
                .execute(&admin)
                .await
                .unwrap();
            admin.close().await;
            let base = admin_url.rsplit_once('/').unwrap().0;
            format!("{base}/{database}")
        }
    }
}

fn version<'a>(
    name: &'a str,
    version: i64,
    config: Option<&'a str>,
    changes: &'a [String],
) -> NewVersion<'a> {
    NewVersion {
        name,
        version,
        config,
        author: "alice",
        created_at_micros: 1_000 * version,
        changes,
    }
}

/// Adds version `version` of `name`, which must be accepted, naming no changes.
async fn add(store: &NamespaceStore, name: &str, version: i64, config: Option<&str>) {
    let none: [String; 0] = [];
    let new = NewVersion {
        name,
        version,
        config,
        author: "alice",
        created_at_micros: 1_000 * version,
        changes: &none,
    };
    store.add(new).await.unwrap();
}

async fn versions_are_kept_and_read_back(store: NamespaceStore) {
    let created = ["created".to_owned()];
    let changed = ["rate_limit.writes_per_second".to_owned()];
    assert!(store.latest("orders").await.unwrap().is_none());
    store
        .add(version("orders", 1, Some("{\"v\":1}"), &created))
        .await
        .unwrap();
    let second = store
        .add(version("orders", 2, Some("{\"v\":2}"), &changed))
        .await
        .unwrap();

    assert_eq!(store.latest("orders").await.unwrap(), Some(second.clone()));
    let first = store.version("orders", 1).await.unwrap().unwrap();
    assert_eq!(first.config.as_deref(), Some("{\"v\":1}"));
    assert_eq!(first.author, "alice");
    assert_eq!(first.created_at_micros, 1_000);
    assert_eq!(first.changes, created);
    let history = store.history("orders").await.unwrap();
    assert_eq!(
        history.iter().map(|v| v.version).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(history[1], second);
    assert!(store.version("orders", 3).await.unwrap().is_none());
}

async fn a_taken_or_skipped_version_is_a_conflict(store: NamespaceStore) {
    let none: [String; 0] = [];
    add(&store, "orders", 1, Some("{}")).await;
    // Another writer already stored version 1: this one read before it.
    let taken = store
        .add(version("orders", 1, Some("{\"x\":1}"), &none))
        .await;
    assert!(
        matches!(taken, Err(StoreError::Conflict { .. })),
        "{taken:?}"
    );
    let skipped = store.add(version("orders", 3, Some("{}"), &none)).await;
    assert!(
        matches!(skipped, Err(StoreError::Conflict { .. })),
        "{skipped:?}"
    );
    // What was stored is what the first writer wrote.
    assert_eq!(
        store
            .latest("orders")
            .await
            .unwrap()
            .unwrap()
            .config
            .as_deref(),
        Some("{}")
    );
}

async fn current_lists_the_latest_of_each_and_skips_deleted(store: NamespaceStore) {
    add(&store, "b-ns", 1, Some("{\"b\":1}")).await;
    add(&store, "a-ns", 1, Some("{\"a\":1}")).await;
    add(&store, "a-ns", 2, Some("{\"a\":2}")).await;
    add(&store, "gone", 1, Some("{}")).await;
    add(&store, "gone", 2, None).await;

    let current = store.current().await.unwrap();
    let listed: Vec<(&str, i64)> = current
        .iter()
        .map(|v| (v.name.as_str(), v.version))
        .collect();
    assert_eq!(listed, [("a-ns", 2), ("b-ns", 1)]);
    // A deletion is a version like any other, and the versions before it stay readable.
    let gone = store.latest("gone").await.unwrap().unwrap();
    assert!(gone.is_deleted());
    assert_eq!(store.history("gone").await.unwrap().len(), 2);
}

async fn concurrent_writers_of_one_version_leave_one_winner(store: NamespaceStore) {
    add(&store, "orders", 1, Some("{}")).await;
    let writers = (0..8).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            let config = format!("{{\"writer\":{i}}}");
            let none: [String; 0] = [];
            match store.add(version("orders", 2, Some(&config), &none)).await {
                Ok(_) => true,
                // A loser learns of the race as a conflict, never as a database failure.
                Err(StoreError::Conflict { .. }) => false,
                Err(other) => panic!("a losing writer got {other:?}"),
            }
        })
    });
    let wins = futures_count(writers).await;
    assert_eq!(wins, 1, "exactly one writer may store version 2");
    assert_eq!(store.history("orders").await.unwrap().len(), 2);
}

async fn futures_count(tasks: impl Iterator<Item = tokio::task::JoinHandle<bool>>) -> usize {
    let mut wins = 0;
    for task in tasks.collect::<Vec<_>>() {
        wins += usize::from(task.await.unwrap());
    }
    wins
}

fn pause(namespace: &str, destination: &str, by: &str) -> PauseRecord {
    PauseRecord {
        namespace: namespace.to_owned(),
        destination: destination.to_owned(),
        paused_by: by.to_owned(),
        paused_at_micros: 1_000,
        reason: format!("{by}'s incident"),
    }
}

/// A pause is kept until resumed; pausing again keeps the first one; resuming twice ends it once.
async fn a_pause_holds_until_resumed_and_the_first_one_stays(store: NamespaceStore) {
    let (first, changed) = store.pause(&pause("orders", "", "alice")).await.unwrap();
    assert!(changed);
    assert_eq!(first, pause("orders", "", "alice"));
    let (kept, changed) = store.pause(&pause("orders", "", "bob")).await.unwrap();
    assert!(!changed, "paused already");
    assert_eq!(kept.paused_by, "alice", "the first pause stays");
    store
        .pause(&pause("orders", "events", "bob"))
        .await
        .unwrap();
    store.pause(&pause("users", "", "carol")).await.unwrap();
    let of_orders = store.pauses(Some("orders")).await.unwrap();
    assert_eq!(
        of_orders
            .iter()
            .map(|p| p.destination.as_str())
            .collect::<Vec<_>>(),
        ["", "events"]
    );
    assert_eq!(store.pauses(None).await.unwrap().len(), 3);

    let ended = store.resume("orders", "").await.unwrap();
    assert_eq!(ended.map(|p| p.paused_by), Some("alice".to_owned()));
    assert_eq!(
        store.resume("orders", "").await.unwrap(),
        None,
        "resumed once"
    );
    let left = store.pauses(Some("orders")).await.unwrap();
    assert_eq!(left, [pause("orders", "events", "bob")]);
}

fn cancellation(namespace: &str, id: &str, by: &str, at: i64) -> CancellationRecord {
    CancellationRecord {
        namespace: namespace.to_owned(),
        entry_id: id.to_owned(),
        cancelled_by: by.to_owned(),
        cancelled_at_micros: at,
        reason: format!("{by}'s reason"),
        expires_at_micros: at + 10_000,
    }
}

/// A cancellation is kept until it expires, the first one of an entry stays, a namespace holds
/// at most [`MAX_PER_NAMESPACE`] in force, and expired ones make room again.
async fn a_cancellation_holds_until_it_expires_and_a_namespace_has_a_cap(store: NamespaceStore) {
    let first = cancellation("orders", "e1", "alice", 1_000);
    assert_eq!(
        store.cancel(&first).await.unwrap(),
        Cancelled::New(first.clone())
    );
    let again = cancellation("orders", "e1", "bob", 2_000);
    assert_eq!(
        store.cancel(&again).await.unwrap(),
        Cancelled::Already(first.clone()),
        "the first cancellation stays"
    );
    let other = cancellation("users", "e1", "carol", 3_000);
    assert!(matches!(
        store.cancel(&other).await.unwrap(),
        Cancelled::New(_)
    ));
    // Newest first; of one namespace or of all; none past its expiry.
    let all = store.cancellations(None, 3_000).await.unwrap();
    assert_eq!(all, [other.clone(), first.clone()]);
    assert_eq!(
        store.cancellations(Some("orders"), 3_000).await.unwrap(),
        std::slice::from_ref(&first)
    );
    assert_eq!(store.cancellations(None, 11_000).await.unwrap(), [other]);

    // A namespace full of cancellations in force refuses one more, naming the oldest expiry.
    for i in 1..MAX_PER_NAMESPACE {
        let fill = cancellation("orders", &format!("fill-{i}"), "dave", 5_000);
        assert!(matches!(
            store.cancel(&fill).await.unwrap(),
            Cancelled::New(_)
        ));
    }
    let refused = store
        .cancel(&cancellation("orders", "one-more", "erin", 6_000))
        .await
        .unwrap();
    assert_eq!(
        refused,
        Cancelled::Full {
            of_namespace: true,
            oldest_expires_at_micros: 11_000
        }
    );
    // Once the first has expired, its room is free again (and it is gone).
    let later = cancellation("orders", "one-more", "erin", 11_000);
    assert_eq!(
        store.cancel(&later).await.unwrap(),
        Cancelled::New(later.clone())
    );
    let orders = store.cancellations(Some("orders"), 11_000).await.unwrap();
    assert_eq!(orders.len() as u64, MAX_PER_NAMESPACE);
    assert!(!orders.iter().any(|c| c.entry_id == "e1"));
}

/// Audit records come back newest first, by namespace or all, at most the limit.
async fn audit_records_are_kept_and_read_newest_first(store: NamespaceStore) {
    for (i, namespace) in ["orders", "users", "orders"].iter().enumerate() {
        let at = 1_000 * (i as i64 + 1);
        store
            .record(&AuditRecord {
                id: format!("id-{i}"),
                at_micros: at,
                actor: "alice".into(),
                verb: "pause".into(),
                namespace: (*namespace).to_owned(),
                subject: String::new(),
                detail: format!("reason {i}"),
                result: "done".into(),
            })
            .await
            .unwrap();
    }
    let orders = store.audit(Some("orders"), 100).await.unwrap();
    assert_eq!(
        orders.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["id-2", "id-0"]
    );
    assert_eq!(orders[0].detail, "reason 2");
    let newest = store.audit(None, 1).await.unwrap();
    assert_eq!(newest.len(), 1);
    assert_eq!(newest[0].id, "id-2");
}

fn redrive(namespace: &str, id: &str, started_at_micros: i64) -> RedriveRecord {
    RedriveRecord {
        namespace: namespace.to_owned(),
        id: id.to_owned(),
        state: "running".to_owned(),
        started_by: "alice".to_owned(),
        started_at_micros,
        updated_at_micros: started_at_micros,
        finished_at_micros: 0,
        ask: RedriveAsk::default(),
        progress: RedriveProgress::default(),
    }
}

/// One redrive of a namespace runs at a time: a second claim is refused while the first
/// reports, succeeds once it ended or went silent; a taken-over redrive can neither update its
/// row nor keep its progress.
async fn one_redrive_runs_at_a_time_and_a_silent_one_is_taken_over(store: NamespaceStore) {
    let second = 1_000_000;
    let first = redrive("orders", "first", 100 * second);
    assert_eq!(store.claim_redrive(&first).await.unwrap(), None);
    let refused = store
        .claim_redrive(&redrive("orders", "second", 110 * second))
        .await
        .unwrap();
    assert_eq!(refused.map(|r| r.id), Some("first".to_owned()));
    assert_eq!(
        store
            .claim_redrive(&redrive("users", "other", 110 * second))
            .await
            .unwrap(),
        None,
        "another namespace's redrive is its own"
    );

    // The first keeps its progress, with no time bounds (NULLs) to begin with.
    let saved = SavedPositions {
        positions: [("orders-dlq".to_owned(), [(0, 7)].into())].into(),
        redriven: 3,
        ..SavedPositions::default()
    };
    assert!(
        store
            .save_redrive_positions("orders", "any", &saved, "first")
            .await
            .unwrap()
    );
    let read = store.redrive_positions("orders", "any").await.unwrap();
    assert_eq!(read, Some(saved.clone()));

    // Silent for longer than the bound: taken over. The first may no longer write.
    let taker = redrive(
        "orders",
        "taker",
        100 * second + STALE_AFTER.as_micros() as i64 + second,
    );
    assert_eq!(store.claim_redrive(&taker).await.unwrap(), None);
    let mut late = first.clone();
    late.progress.read = 99;
    assert!(!store.update_redrive(&late).await.unwrap());
    let stale = SavedPositions {
        redriven: 1,
        ..saved.clone()
    };
    assert!(
        !store
            .save_redrive_positions("orders", "any", &stale, "first")
            .await
            .unwrap()
    );
    assert_eq!(
        store.redrive_positions("orders", "any").await.unwrap(),
        Some(saved)
    );

    // Ended: the next claim succeeds at once; the row reads back as written.
    let mut done = taker.clone();
    done.state = "done".to_owned();
    done.progress.redriven = 5;
    done.ask.filter.since_micros = Some(42);
    assert!(store.update_redrive(&done).await.unwrap());
    assert_eq!(store.redrive("orders").await.unwrap(), Some(done));
    let next = redrive("orders", "next", 200 * second);
    assert_eq!(store.claim_redrive(&next).await.unwrap(), None);
    assert_eq!(store.redrive("orders").await.unwrap(), Some(next));
}

/// A pool on the database at `url` itself, as a build before this one or an operator reaches
/// it (SQLite's file created if missing).
async fn raw(url: &str) -> sqlx::AnyPool {
    sqlx::any::install_default_drivers();
    let url = if url.starts_with("sqlite://") {
        format!("{url}?mode=rwc")
    } else {
        url.to_owned()
    };
    sqlx::AnyPool::connect(&url).await.unwrap()
}

/// A store made before migrations (its table made by the control plane at start-up, no
/// `_sqlx_migrations`) is taken over with its rows.
async fn a_store_from_before_migrations_is_taken_over(engine: &str) {
    let url = fresh_url(engine).await;
    let pool = raw(&url).await;
    sqlx::query(
        "CREATE TABLE namespace_versions (name TEXT NOT NULL, version BIGINT NOT NULL, \
         config TEXT, author TEXT NOT NULL, created_at_micros BIGINT NOT NULL, \
         changes TEXT NOT NULL, PRIMARY KEY (name, version))",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO namespace_versions VALUES ('orders', 1, '{}', 'alice', 1000, '[\"created\"]')",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = NamespaceStore::connect(&url).await.unwrap();
    let kept = store.latest("orders").await.unwrap().expect("the row kept");
    assert_eq!((kept.version, kept.author.as_str()), (1, "alice"));
    let pool = raw(&url).await;
    let applied: i64 = sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(applied, schema_version());
}

/// A store a newer control plane migrated (a migration this build does not know) is refused,
/// named, and left as it is.
async fn a_store_a_newer_build_migrated_is_refused(engine: &str) {
    let url = fresh_url(engine).await;
    NamespaceStore::connect(&url).await.unwrap();
    let newer = schema_version() + 1;
    let pool = raw(&url).await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, 'from a newer build', TRUE, $2, 1)",
    )
    .bind(newer)
    .bind(vec![0u8; 48])
    .execute(&pool)
    .await
    .unwrap();

    let refused = NamespaceStore::connect(&url).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::NewerSchema { applied, known, .. }
            if applied == newer && known == schema_version()),
        "{refused:?}"
    );
    let message = refused.to_string();
    assert!(
        message.contains(&format!("migration {newer}")) && message.contains("newer control plane"),
        "{message}"
    );
}

/// Each check against both engines: `stores` take a fresh store, `databases` the engine's name
/// (they make the database themselves, as a build before this one left it).
macro_rules! conformance {
    (stores: $($check:ident),* ; databases: $($database:ident),* $(,)?) => {
        conformance!(@engine sqlite, "sqlite"; $($check),*; $($database),*);
        conformance!(@engine postgres, "postgres"; $($check),*; $($database),*);
    };
    (@engine $module:ident, $engine:literal; $($check:ident),*; $($database:ident),*) => {
        mod $module {
            $(#[tokio::test]
            async fn $check() {
                super::$check(super::fresh($engine).await).await;
            })*

            $(#[tokio::test]
            async fn $database() {
                super::$database($engine).await;
            })*
        }
    };
}

conformance!(
    stores:
    versions_are_kept_and_read_back,
    a_taken_or_skipped_version_is_a_conflict,
    current_lists_the_latest_of_each_and_skips_deleted,
    concurrent_writers_of_one_version_leave_one_winner,
    a_pause_holds_until_resumed_and_the_first_one_stays,
    a_cancellation_holds_until_it_expires_and_a_namespace_has_a_cap,
    audit_records_are_kept_and_read_newest_first,
    one_redrive_runs_at_a_time_and_a_silent_one_is_taken_over;
    databases:
    a_store_from_before_migrations_is_taken_over,
    a_store_a_newer_build_migrated_is_refused,
);

#[tokio::test]
async fn a_store_url_of_another_kind_is_refused_with_the_expected_forms() {
    let refused = NamespaceStore::connect("mysql://localhost/db")
        .await
        .unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("mysql://localhost/db") && message.contains("sqlite://PATH"),
        "{message}"
    );
}
