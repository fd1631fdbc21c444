//! What a two-phase write costs the Cassandra it is staged in, step by step, beside a logged
//! batch of the same rows: the CPU the stack's Cassandra spends per transaction on each call the
//! producer and the consumer make (the real `DurableStorage` methods), so `two_phase`'s gap to
//! logged batches can be told apart by cause. Both sides share one Cassandra on the machine's
//! cores; where it is the limit (as on a 2-core machine), a side's rate follows its Cassandra
//! CPU per item.
//!
//! The steps, each over every transaction before the next (8 at once), in the order a
//! transaction written whole meets them:
//! - the producer: its read of the transaction (none yet); `stage_and_commit` (the items as one
//!   conditional batch, then the row inserted as committing, both compare-and-sets, and its
//!   listing twice); the move to committed once the marker is acknowledged;
//! - the consumer: its two reads of the row, the claim of the apply lease, the items read back,
//!   the finish (applied);
//! - the items' own rows, written as the cql target writes them (`INSERT ... JSON`, one request
//!   an item, 32 at once);
//! - the baseline: the same rows as one LOGGED batch a transaction;
//! - for comparison, on transactions of their own: the items' conditional batch alone
//!   (`stage_items`: the first half of `stage_and_commit`), and the same batch without its
//!   condition (no Paxos round).
//!
//! Each step waits half a second before its clock starts, so what Cassandra still does for the
//! step before (a flush) is less often counted in it; the order cannot rotate, since each step
//! needs the state the one before leaves.
//!
//! Run with:
//!     scripts/stack up && cargo bench -p wal-durable --bench staging_costs
//! Tunables (environment): BENCH_TRANSACTIONS (200), BENCH_TXN_ITEMS (100), BENCH_ROUNDS (3).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use scylla::client::session::Session;
use scylla::statement::batch::{Batch, BatchType};
use wal_durable::{DurableSettings, DurableStorage, OneCall, StagedItem, TxnState};
use wal_testkit::measure::{cpu_seconds_of, median};

const KEYSPACE: &str = "wal_bench_staging";
const NAMESPACE: &str = "bench";
const KEEP: Duration = Duration::from_secs(3600);

/// A tunable from the environment, as the other benchmarks read theirs.
fn env_usize(name: &str, default: usize) -> usize {
    usize::try_from(wal_testkit::env_u64(name, default as u64)).unwrap_or(default)
}

/// Item `i`: a put of one row, named as the cql target names its table.
fn items(count: usize) -> Vec<StagedItem> {
    (0..count)
        .map(|i| StagedItem {
            sequence: i as u64,
            target_kind: "cql".into(),
            target_settings: format!(
                r#"{{"keyspace":"{KEYSPACE}","table":"rows_{}","consistency":"LOCAL_QUORUM"}}"#,
                i % 3
            ),
            payload: format!(r#"{{"mutations":[{{"put":{{"row":{{"id":"{i}","value":"v"}}}}}}]}}"#)
                .into_bytes(),
        })
        .collect()
}

/// Runs `step` for each of `ids`, 8 at once, and gives Cassandra's CPU per transaction (µs).
async fn measured<F, Fut>(cassandra: u32, ids: &[String], step: F) -> f64
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = ()>,
{
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = cpu_seconds_of(cassandra);
    futures::stream::iter(ids.iter().cloned())
        .for_each_concurrent(8, step)
        .await;
    (cpu_seconds_of(cassandra) - before) * 1e6 / ids.len() as f64
}

/// The target's tables, the baseline's statements and the unconditional staging insert.
struct Rows {
    session: Arc<Session>,
    json: Vec<scylla::statement::prepared::PreparedStatement>,
    values: Vec<scylla::statement::prepared::PreparedStatement>,
    stage_plain: scylla::statement::prepared::PreparedStatement,
}

impl Rows {
    async fn new(session: Arc<Session>) -> Self {
        let (mut json, mut values) = (Vec::new(), Vec::new());
        for t in 0..3 {
            // Made afresh, so a run does not write into the rows of the runs before it.
            for text in [
                format!("DROP TABLE IF EXISTS {KEYSPACE}.rows_{t}"),
                format!("CREATE TABLE {KEYSPACE}.rows_{t} (id text PRIMARY KEY, value text)"),
            ] {
                session.query_unpaged(text, &[]).await.unwrap();
            }
            json.push(
                session
                    .prepare(format!(
                        "INSERT INTO {KEYSPACE}.rows_{t} JSON ? DEFAULT UNSET USING TIMESTAMP ?"
                    ))
                    .await
                    .unwrap(),
            );
            values.push(
                session
                    .prepare(format!(
                        "INSERT INTO {KEYSPACE}.rows_{t} (id, value) VALUES (?, ?) USING TIMESTAMP ?"
                    ))
                    .await
                    .unwrap(),
            );
        }
        let stage_plain = session
            .prepare(format!(
                "INSERT INTO {KEYSPACE}.transaction_items \
                 (namespace, id, sequence, target_kind, target_settings, payload) \
                 VALUES (?, ?, ?, ?, ?, ?) USING TTL ?"
            ))
            .await
            .unwrap();
        Self {
            session,
            json,
            values,
            stage_plain,
        }
    }
}

/// One round: every step over `transactions` fresh transactions; Cassandra's µs per
/// transaction by step, in the order of [`STEPS`].
async fn round(
    cassandra: u32,
    storage: &Arc<DurableStorage>,
    rows: &Arc<Rows>,
    transactions: usize,
    staged: &Arc<Vec<StagedItem>>,
) -> Vec<f64> {
    let prefix = format!("t{}", wal_queue::entry::new_entry_id());
    let ids: Vec<String> = (0..transactions).map(|t| format!("{prefix}-{t}")).collect();
    let conditional_ids: Vec<String> = ids.iter().map(|id| format!("{id}-conditional")).collect();
    let plain_ids: Vec<String> = ids.iter().map(|id| format!("{id}-plain")).collect();
    let applier = "bench-applier";
    let lease_until = || wal_queue::entry::now_micros() + 30_000_000;
    let mut costs = Vec::new();
    // The producer.
    costs.push(
        measured(cassandra, &ids, |id| async move {
            assert!(storage.transaction(NAMESPACE, &id).await.unwrap().is_none());
        })
        .await,
    );
    costs.push(
        measured(cassandra, &ids, |id| async move {
            let one_call = storage
                .stage_and_commit(NAMESPACE, &id, staged, KEEP)
                .await
                .unwrap();
            assert!(matches!(one_call, OneCall::Committed(_)));
        })
        .await,
    );
    costs.push(
        measured(cassandra, &ids, |id| async move {
            let (from, to) = (TxnState::Committing, TxnState::Committed);
            let moved = storage.move_transaction(NAMESPACE, &id, from, to, None, KEEP);
            assert!(moved.await.unwrap());
        })
        .await,
    );
    // The consumer.
    costs.push(
        measured(cassandra, &ids, |id| async move {
            storage.transaction(NAMESPACE, &id).await.unwrap().unwrap();
            storage.transaction(NAMESPACE, &id).await.unwrap().unwrap();
        })
        .await,
    );
    costs.push(
        measured(cassandra, &ids, |id| async move {
            let claimed = storage.claim_apply(NAMESPACE, &id, applier, lease_until(), KEEP);
            assert!(claimed.await.unwrap());
        })
        .await,
    );
    costs.push(
        measured(cassandra, &ids, |id| async move {
            let read: Vec<StagedItem> = storage
                .items_from(NAMESPACE, &id, 0)
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            assert_eq!(read.len(), staged.len());
        })
        .await,
    );
    let items = staged.len() as u64;
    costs.push(
        measured(cassandra, &ids, |id| async move {
            let finished = storage.finish_transaction(
                NAMESPACE,
                &id,
                applier,
                TxnState::Applied,
                items,
                None,
                KEEP,
            );
            assert!(finished.await.unwrap());
        })
        .await,
    );
    // The items' rows, as the cql target writes them: one request an item, 32 at once.
    costs.push(
        measured(cassandra, &ids, |id| async move {
            futures::stream::iter(0..staged.len())
                .for_each_concurrent(32, |i| {
                    let row = format!(r#"{{"id":"{id}-{i}","value":"v"}}"#);
                    async move {
                        rows.session
                            .execute_unpaged(&rows.json[i % 3], (row, 1 + i as i64))
                            .await
                            .unwrap();
                    }
                })
                .await;
        })
        .await,
    );
    // The baseline: the same rows as one logged batch.
    costs.push(
        measured(cassandra, &ids, |id| async move {
            let mut batch = Batch::new(BatchType::Logged);
            let mut values = Vec::with_capacity(staged.len());
            for i in 0..staged.len() {
                batch.append_statement(rows.values[i % 3].clone());
                values.push((format!("{id}-b{i}"), "v", 1 + i as i64));
            }
            rows.session.batch(&batch, values).await.unwrap();
        })
        .await,
    );
    // For comparison: the items' conditional batch alone, then without its condition.
    costs.push(
        measured(cassandra, &conditional_ids, |id| async move {
            assert!(
                storage
                    .stage_items(NAMESPACE, &id, staged, KEEP)
                    .await
                    .unwrap()
            );
        })
        .await,
    );
    costs.push(
        measured(cassandra, &plain_ids, |id| async move {
            let mut batch = Batch::new(BatchType::Unlogged);
            let mut values = Vec::with_capacity(staged.len());
            for item in staged.iter() {
                batch.append_statement(rows.stage_plain.clone());
                values.push((
                    NAMESPACE,
                    id.clone(),
                    item.sequence as i64,
                    item.target_kind.as_str(),
                    item.target_settings.as_str(),
                    item.payload.as_slice(),
                    KEEP.as_secs() as i32,
                ));
            }
            rows.session.batch(&batch, values).await.unwrap();
        })
        .await,
    );
    costs
}

/// Each step's name, and whether it is the platform's (summed), the baseline or a comparison.
const STEPS: [(&str, Part); 11] = [
    ("producer: read the transaction (none yet)", Part::Platform),
    (
        "producer: stage_and_commit (2 compare-and-sets)",
        Part::Platform,
    ),
    (
        "producer: move to committed (a compare-and-set)",
        Part::Platform,
    ),
    ("consumer: read the transaction twice", Part::Platform),
    (
        "consumer: claim the apply lease (a compare-and-set)",
        Part::Platform,
    ),
    ("consumer: read the items back", Part::Platform),
    (
        "consumer: finish, applied (a compare-and-set)",
        Part::Platform,
    ),
    ("the items' rows, one INSERT JSON each", Part::Platform),
    ("baseline: the rows as one logged batch", Part::Baseline),
    (
        "the items' conditional batch alone (stage_items)",
        Part::Comparison,
    ),
    ("the same batch without its condition", Part::Comparison),
];

/// The platform's steps' costs added up (`costs` in the order of [`STEPS`]).
fn platform_sum(costs: &[f64]) -> f64 {
    costs
        .iter()
        .zip(STEPS)
        .filter(|(_, (_, part))| *part == Part::Platform)
        .map(|(cost, _)| cost)
        .sum()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Platform,
    Baseline,
    Comparison,
}

#[tokio::main]
async fn main() {
    let transactions = env_usize("BENCH_TRANSACTIONS", 200);
    let items_per = env_usize("BENCH_TXN_ITEMS", 100);
    let rounds = env_usize("BENCH_ROUNDS", 3).max(1);
    let cassandra = wal_testkit::stack::service_pid("cassandra").unwrap_or_else(|| {
        panic!(
            "no running Cassandra's pid file under {} (scripts/stack up; the clustered stack's nodes are cassandra-1 to 3: run this on the main stack)",
            wal_testkit::stack::run_dir().display()
        )
    });
    let nodes = wal_testkit::cql_nodes();
    let node_refs: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let storage = Arc::new(
        DurableStorage::connect(&DurableSettings::new(&node_refs, KEYSPACE))
            .await
            .unwrap_or_else(|e| panic!("{e} (is the stack up? scripts/stack up)")),
    );
    let session = scylla::client::session_builder::SessionBuilder::new()
        .known_nodes(&nodes)
        .build()
        .await
        .expect("Cassandra (scripts/stack up)");
    let rows = Arc::new(Rows::new(Arc::new(session)).await);
    let staged = Arc::new(items(items_per));
    println!(
        "Cassandra's CPU per two-phase step: {transactions} transactions of {items_per} items, 8 at once, {rounds} rounds (medians)"
    );
    let baseline = STEPS
        .iter()
        .position(|(_, part)| *part == Part::Baseline)
        .expect("a baseline step");
    let mut by_step: Vec<Vec<f64>> = vec![Vec::new(); STEPS.len()];
    for r in 0..rounds {
        let started = Instant::now();
        let costs = round(cassandra, &storage, &rows, transactions, &staged).await;
        let platform = platform_sum(&costs);
        println!(
            "  round {r} ({:.1} s): platform {:.0} µs/item, logged batch {:.0} µs/item",
            started.elapsed().as_secs_f64(),
            platform / items_per as f64,
            costs[baseline] / items_per as f64
        );
        for (step, cost) in by_step.iter_mut().zip(costs) {
            step.push(cost);
        }
    }
    let medians: Vec<f64> = by_step.iter_mut().map(|costs| median(costs)).collect();
    let platform = platform_sum(&medians);
    println!(
        "{:<54} {:>12} {:>12} {:>10}",
        "step", "ms/txn", "µs/item", "of platform"
    );
    for (cost, (name, part)) in medians.iter().zip(STEPS) {
        let share = if part == Part::Platform {
            format!("{:>9.0}%", cost * 100.0 / platform)
        } else {
            String::new()
        };
        println!(
            "{name:<54} {:>12.2} {:>12.1} {share:>10}",
            cost / 1e3,
            cost / items_per as f64
        );
    }
    println!(
        "platform, all steps {:>45.2} {:>12.1}   against the logged batch: {:.2} times its Cassandra CPU",
        platform / 1e3,
        platform / items_per as f64,
        platform / medians[baseline]
    );
}
