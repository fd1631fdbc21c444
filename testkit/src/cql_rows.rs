//! What the benchmarks that write rows to Cassandra share: their tunables, the rows (one
//! `(id, value)` row per entry, `row{i}`), the entries that put them, and fresh tables to count
//! them in (`apply_to_cql`, `replay_to_cql`).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::response::query_result::QueryRowsResult;
use scylla::serialize::row::SerializeRow;
use scylla::statement::prepared::PreparedStatement;
use wal_queue::Produce;
use wal_queue::entry::{self, Body, Entry, Target};

use crate::stack::cql_nodes;

pub const KEYSPACE: &str = "wal_bench";

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A session on the local stack's Cassandra, with the benches' keyspace made.
pub async fn session() -> Arc<Session> {
    let session = scylla::client::session_builder::SessionBuilder::new()
        .known_nodes(cql_nodes())
        .build()
        .await
        .expect("Cassandra (scripts/stack up)");
    session
        .query_unpaged(crate::stack::create_keyspace(KEYSPACE), &[])
        .await
        .expect("the benches' keyspace");
    Arc::new(session)
}

/// Row `i`'s value: 64 characters.
pub fn value(i: usize) -> String {
    format!("{i:064}")
}

/// The cql entry that puts row `i` into `table`, written `written + i` microseconds.
pub fn row_entry(namespace: &str, table: &str, i: usize, written: i64) -> Entry {
    let payload = format!(
        r#"{{"mutations":[{{"put":{{"row":{{"id":"row{i}","value":"{}"}}}}}}]}}"#,
        value(i)
    );
    Entry {
        version: entry::ENTRY_VERSION,
        id: entry::new_entry_id(),
        namespace: namespace.to_owned(),
        key: format!("row{i}"),
        body: Some(Body::Payload(payload.into_bytes())),
        target: Some(Target {
            kind: "cql".into(),
            settings_json: format!(r#"{{"keyspace": "{KEYSPACE}", "table": "{table}"}}"#),
        }),
        original_write_time_micros: written + i as i64,
        deliver_at_micros: written,
        enqueued_at_micros: written,
        origin_region: "local".into(),
        ..Entry::default()
    }
}

/// One round of a benchmark against CQL: its number, how many entries it writes and how many of
/// them at a time.
#[derive(Debug, Clone, Copy)]
pub struct Round {
    pub index: usize,
    pub entries: usize,
    pub concurrency: usize,
}

impl Round {
    /// How many timed rounds to run, and the round after the last of them, as BENCH_ROUNDS,
    /// BENCH_ENTRIES and BENCH_CONCURRENCY (64 unless set) say, else the defaults given.
    pub fn from_env(rounds: usize, entries: usize) -> (usize, Self) {
        let rounds = env_usize("BENCH_ROUNDS", rounds).max(1);
        let last = Self {
            index: rounds,
            entries: env_usize("BENCH_ENTRIES", entries),
            concurrency: env_usize("BENCH_CONCURRENCY", 64),
        };
        (rounds, last)
    }

    /// A fresh table for `side` of this round, named `{side}_{index}`.
    pub async fn table(&self, session: &Session, side: &str) -> String {
        let name = format!("{side}_{}", self.index);
        table(session, &name).await;
        name
    }
}

impl std::fmt::Display for Round {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} entries, {} at once", self.entries, self.concurrency)
    }
}

/// A fresh table `(id text PRIMARY KEY, value text)`, dropped first if a run left one.
pub async fn table(session: &Session, name: &str) {
    session
        .query_unpaged(format!("DROP TABLE IF EXISTS {KEYSPACE}.{name}"), &[])
        .await
        .unwrap();
    session
        .query_unpaged(
            format!("CREATE TABLE {KEYSPACE}.{name} (id text PRIMARY KEY, value text)"),
            &[],
        )
        .await
        .unwrap();
}

pub async fn count(session: &Session, name: &str) -> i64 {
    let query = format!("SELECT COUNT(*) FROM {KEYSPACE}.{name}");
    select(session, query, ())
        .await
        .first_row::<(i64,)>()
        .unwrap()
        .0
}

/// How many times [`select`] sends a read the cluster could not serve.
const READ_ATTEMPTS: u64 = 5;

/// The rows `query` selects with `values`. A read the cluster could not serve this time (timed
/// out, overloaded, short of replicas, or failed by a replica) is sent again, up to
/// [`READ_ATTEMPTS`] times, each failure printed: tests poll tables while three stacks share
/// two cores, and one failed read is not the answer they wait for (a poll's `COUNT(*)` failed
/// so in CI, 2026-11-30, with a `ReadFailure` from the only replica).
pub async fn select(
    session: &Session,
    query: String,
    values: impl SerializeRow,
) -> QueryRowsResult {
    let mut attempt = 1;
    loop {
        match session.query_unpaged(query.as_str(), &values).await {
            Ok(result) => return result.into_rows_result().unwrap(),
            Err(error) if attempt < READ_ATTEMPTS && unserved(&error) => {
                eprintln!("`{query}` failed (attempt {attempt} of {READ_ATTEMPTS}): {error}");
                tokio::time::sleep(Duration::from_millis(500 * attempt)).await;
                attempt += 1;
            }
            Err(error) => panic!("`{query}` failed (attempt {attempt}): {error}"),
        }
    }
}

/// A failure that says the cluster could not serve the read now, not that the read is wrong.
fn unserved(error: &ExecutionError) -> bool {
    match error {
        ExecutionError::RequestTimeout(_) => true,
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, _)) => matches!(
            db,
            DbError::ReadTimeout { .. }
                | DbError::ReadFailure { .. }
                | DbError::Unavailable { .. }
                | DbError::Overloaded
        ),
        _ => false,
    }
}

/// Writes rows `0..entries` with `insert`, `concurrency` at a time, each with write time
/// `written + i`: typed (`(id, value) VALUES (?, ?) USING TIMESTAMP ?`), or with `json` as the
/// cql target sends them (`JSON ? ... USING TIMESTAMP ?`).
pub async fn insert_rows(
    session: &Arc<Session>,
    insert: &PreparedStatement,
    entries: usize,
    concurrency: usize,
    written: i64,
    json: bool,
) {
    futures::stream::iter(0..entries)
        .for_each_concurrent(concurrency, |i| {
            let (session, insert) = (Arc::clone(session), insert.clone());
            async move {
                let at = written + i as i64;
                if json {
                    let row = format!(r#"{{"id":"row{i}","value":"{}"}}"#, value(i));
                    session.execute_unpaged(&insert, (row, at)).await.unwrap();
                } else {
                    session
                        .execute_unpaged(&insert, (format!("row{i}"), value(i), at))
                        .await
                        .unwrap();
                }
            }
        })
        .await;
}

/// Puts rows `0..entries` of `table` on the Kafka topic `topic` (of namespace `namespace`) as
/// cql entries, written now, 2,000 enqueues at a time; provisions the topic first when asked.
pub async fn fill_topic(
    namespace: &str,
    topic: &str,
    table: &str,
    entries: usize,
    provision: bool,
) {
    use wal_queue::QueueSpec;
    use wal_queue::kafka::{KafkaBackend, KafkaSettings};

    let backend = KafkaBackend::new(KafkaSettings::new(&crate::stack::kafka_bootstrap()))
        .expect("Kafka settings");
    let spec = QueueSpec::new(namespace, topic, &format!("{topic}-dlq"));
    let queue = Arc::new(backend.queue(spec));
    if provision {
        queue.provision().await.expect("provision the topic");
    }
    let written = entry::now_micros();
    let limit = Arc::new(tokio::sync::Semaphore::new(2000));
    let mut tasks = Vec::with_capacity(entries);
    for i in 0..entries {
        let permit = Arc::clone(&limit).acquire_owned().await.expect("open");
        let queue = Arc::clone(&queue);
        let entry = row_entry(namespace, table, i, written);
        tasks.push(tokio::spawn(async move {
            queue.enqueue(&entry).await.expect("enqueue");
            drop(permit);
        }));
    }
    for task in tasks {
        task.await.expect("enqueued");
    }
}
