//! Two-phase writes against Cassandra's own atomic multi-partition write, side by side in one
//! run on the local stack.
//!
//! Platform: a Kafka namespace with durable storage, its producer and consumer in this process;
//! each transaction is one WriteTransaction of `BENCH_TXN_ITEMS` items spread over three tables,
//! `BENCH_CONCURRENCY` transactions committed at once, and the rate is items per second from the
//! first commit to the consumer recording every transaction applied (after its last item's
//! write was acknowledged; the rows are counted once afterwards). Baseline: the same items as one
//! LOGGED batch per transaction, straight to Cassandra, at the same concurrency.
//!
//! Each side also prints the CPU the stack's Cassandra spent per item while it ran (from its pid
//! file): both sides share that one Cassandra on the machine's cores, so where it is the limit,
//! the ratio of the two rates follows the ratio of Cassandra's work per item.
//!
//! Then, on the platform alone: commit latency (WriteTransaction answered TRUE) by transaction
//! size, 10, 100 and 1,000 items, and the lag from a commit's TRUE to its every item applied.
//!
//! Run with:
//!     scripts/stack up && cargo bench -p wal-producer --bench two_phase
//! Tunables (environment): BENCH_TRANSACTIONS (100), BENCH_TXN_ITEMS (100),
//! BENCH_CONCURRENCY (8), BENCH_ROUNDS (5), BENCH_LATENCY_TXNS (10; a tenth of it, at least 2,
//! for 1,000-item transactions).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use scylla::client::session::Session;
use scylla::statement::batch::{Batch, BatchType};
use wal_namespaces::Backend;
use wal_proto::v1::transactions_client::TransactionsClient;
use wal_proto::v1::{Target, TransactionItem, Trilean, WriteTransactionRequest};
use wal_testkit::cql_rows::env_usize;
use wal_testkit::measure::{Rate, cpu_seconds, cpu_seconds_of, median, percentile};
use wal_testkit::{Cql, Fleet, KEYSPACE, cql_target, namespace_with_target, put, unique};

/// Item `i` of transaction `t`: a put of row `t-i` in one of the three tables.
fn item(tables: &[String; 3], t: usize, i: usize) -> TransactionItem {
    let table = &tables[i % 3];
    let settings: serde_json::Value = serde_json::from_str(&cql_target(table)).unwrap();
    TransactionItem {
        sequence: i as u64,
        target: Some(Target {
            kind: "cql".into(),
            settings_json: settings["settings"].to_string(),
        }),
        payload: put(&format!("{t}-{i}"), "v"),
    }
}

/// Items the in-process consumer counted applied for `namespace`: each transaction's once its
/// last item is applied and its row says so. Read from the process's metrics, not by counting
/// rows: a COUNT over tables of thousands of rows every few milliseconds would load the one
/// Cassandra both sides share, on the platform's side alone.
fn items_applied(namespace: &str) -> f64 {
    wal_testkit::scraped("wal_transaction_items_applied_total", namespace).unwrap()
}

/// Waits until `count` items of `namespace` are applied, looking every `every`: each look
/// renders the process's metrics, which costs CPU the platform's figure would carry.
async fn applied(namespace: &str, count: usize, every: Duration) {
    while items_applied(namespace) < count as f64 {
        tokio::time::sleep(every).await;
    }
}

/// A side's rate, and the CPU the stack's Cassandra spent per item meanwhile (µs; None when
/// its pid was not found).
#[derive(Clone, Copy)]
struct Measured {
    rate: Rate,
    cassandra_micros: Option<f64>,
}

/// Cassandra's CPU seconds so far, for [`Measured`].
fn cassandra_seconds(cassandra: Option<u32>) -> Option<f64> {
    cassandra.map(cpu_seconds_of)
}

impl Measured {
    fn since(
        items: usize,
        started: Instant,
        cpu: f64,
        cassandra: Option<u32>,
        cassandra_before: Option<f64>,
    ) -> Self {
        let cassandra_micros = cassandra_seconds(cassandra)
            .zip(cassandra_before)
            .map(|(now, before)| (now - before) * 1e6 / items as f64);
        Self {
            rate: Rate::since(items, started, cpu),
            cassandra_micros,
        }
    }
}

impl std::fmt::Display for Measured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cassandra_micros {
            Some(micros) => write!(f, "{}, Cassandra {micros:>5.1} µs/item", self.rate),
            None => write!(f, "{}", self.rate),
        }
    }
}

/// Rows in the three tables.
async fn rows(cql: &Cql, tables: &[String; 3]) -> i64 {
    let mut total = 0;
    for table in tables {
        total += cql.count(table).await;
    }
    total
}

async fn fresh_tables(cql: &Cql) -> [String; 3] {
    [cql.table().await, cql.table().await, cql.table().await]
}

/// The platform's rate: items per second from the first commit to every item applied. Its
/// producer and consumer run in this process, so the CPU per item is theirs (with the client
/// that sends the transactions and the poll for the rows).
async fn platform(
    cql: &Cql,
    cassandra: Option<u32>,
    transactions: usize,
    items: usize,
    concurrency: usize,
) -> Measured {
    let tables = fresh_tables(cql).await;
    let mut namespace = namespace_with_target(Backend::Kafka, 1, &cql_target(&tables[0]), "");
    namespace.durable_storage = Some(wal_namespaces::DurableStorageConfig::keyspace(
        "wal_txn_bench",
    ));
    let fleet = Fleet::start(namespace).await;
    let client = TransactionsClient::new(fleet.producer.channel.clone());
    let name = fleet.namespace.name.clone();
    let prefix = unique("b");
    // A first transaction of one item a table, before the clock: the consumer connects to
    // durable storage and prepares its statements, and the target prepares its tables' inserts,
    // at the first marker, which the baseline does before its clock too.
    let warm_up = WriteTransactionRequest {
        namespace: name.clone(),
        transaction_id: format!("{prefix}-warm-up"),
        items: (0..3).map(|i| item(&tables, transactions, i)).collect(),
    };
    let answer = client.clone().write_transaction(warm_up).await.unwrap();
    assert_eq!(answer.get_ref().durable(), Trilean::True);
    applied(&name, 3, Duration::from_millis(20)).await;
    let started = Instant::now();
    let cpu = cpu_seconds();
    let cassandra_before = cassandra_seconds(cassandra);
    futures::stream::iter(0..transactions)
        .for_each_concurrent(concurrency, |t| {
            let (mut client, name, tables) = (client.clone(), name.clone(), tables.clone());
            let id = format!("{prefix}-{t}");
            async move {
                let answer = client
                    .write_transaction(WriteTransactionRequest {
                        namespace: name,
                        transaction_id: id,
                        items: (0..items).map(|i| item(&tables, t, i)).collect(),
                    })
                    .await
                    .unwrap()
                    .into_inner();
                assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);
            }
        })
        .await;
    let expected = transactions * items;
    // A look every 20 ms: within 1% of a run of seconds, and a few hundred renders.
    applied(&name, 3 + expected, Duration::from_millis(20)).await;
    let side = Measured::since(expected, started, cpu, cassandra, cassandra_before);
    fleet.stop().await;
    assert_eq!(
        rows(cql, &tables).await,
        3 + expected as i64,
        "every item applied is a row"
    );
    side
}

/// The baseline's rate: each transaction's items as one LOGGED batch, straight to Cassandra; its
/// CPU per item is the driver's (this process's), and Cassandra's is shown beside it.
async fn baseline(
    cql: &Cql,
    cassandra: Option<u32>,
    session: &Arc<Session>,
    transactions: usize,
    items: usize,
    concurrency: usize,
) -> Measured {
    let tables = fresh_tables(cql).await;
    let mut inserts = Vec::new();
    for table in &tables {
        inserts.push(
            session
                .prepare(format!(
                    "INSERT INTO {KEYSPACE}.{table} (id, value) VALUES (?, ?) USING TIMESTAMP ?"
                ))
                .await
                .unwrap(),
        );
    }
    let started = Instant::now();
    let cpu = cpu_seconds();
    let cassandra_before = cassandra_seconds(cassandra);
    futures::stream::iter(0..transactions)
        .for_each_concurrent(concurrency, |t| {
            let (session, inserts) = (Arc::clone(session), inserts.clone());
            async move {
                let mut batch = Batch::new(BatchType::Logged);
                let mut values = Vec::with_capacity(items);
                let at = wal_queue::entry::now_micros();
                for i in 0..items {
                    batch.append_statement(inserts[i % 3].clone());
                    values.push((format!("{t}-{i}"), "v", at + i as i64));
                }
                session.batch(&batch, values).await.unwrap();
            }
        })
        .await;
    let side = Measured::since(
        transactions * items,
        started,
        cpu,
        cassandra,
        cassandra_before,
    );
    assert_eq!(rows(cql, &tables).await, (transactions * items) as i64);
    side
}

/// Commit latency (ms) of `count` transactions of `items` items, one at a time, and the lag (ms)
/// from each TRUE to all its items applied.
async fn latency(cql: &Cql, count: usize, items: usize) -> (Vec<f64>, Vec<f64>) {
    let tables = fresh_tables(cql).await;
    let mut namespace = namespace_with_target(Backend::Kafka, 1, &cql_target(&tables[0]), "");
    namespace.durable_storage = Some(wal_namespaces::DurableStorageConfig::keyspace(
        "wal_txn_bench",
    ));
    let fleet = Fleet::start(namespace).await;
    let mut client = TransactionsClient::new(fleet.producer.channel.clone());
    let name = fleet.namespace.name.clone();
    let prefix = unique("l");
    let (mut commits, mut lags) = (Vec::new(), Vec::new());
    for t in 0..count {
        let started = Instant::now();
        let answer = client
            .write_transaction(WriteTransactionRequest {
                namespace: name.clone(),
                transaction_id: format!("{prefix}-{t}"),
                items: (0..items).map(|i| item(&tables, t, i)).collect(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);
        commits.push(started.elapsed().as_secs_f64() * 1e3);
        let durable = Instant::now();
        // Every item, not the last one: CQL items land several at once, in any order.
        applied(&name, (t + 1) * items, Duration::from_millis(2)).await;
        lags.push(durable.elapsed().as_secs_f64() * 1e3);
    }
    fleet.stop().await;
    assert_eq!(rows(cql, &tables).await, (count * items) as i64);
    (commits, lags)
}

#[tokio::main]
async fn main() {
    let transactions = env_usize("BENCH_TRANSACTIONS", 100);
    let items = env_usize("BENCH_TXN_ITEMS", 100);
    let concurrency = env_usize("BENCH_CONCURRENCY", 8);
    let rounds = env_usize("BENCH_ROUNDS", 5).max(1);
    let latency_txns = env_usize("BENCH_LATENCY_TXNS", 10);
    // The metrics recorder first: what the fleets record before it is lost.
    wal_testkit::scrape();
    let cql = Cql::connect().await;
    let session = wal_testkit::cql_rows::session().await;
    let cassandra = wal_testkit::stack::service_pid("cassandra");
    if cassandra.is_none() {
        println!(
            "no running Cassandra's pid file under {} (the clustered stack's nodes are cassandra-1 to 3): its CPU per item is not shown",
            wal_testkit::stack::run_dir().display()
        );
    }
    println!(
        "two-phase writes: {transactions} transactions of {items} items over 3 tables, {concurrency} at once, {rounds} rounds"
    );
    let (mut platform_rates, mut baseline_rates) = (Vec::new(), Vec::new());
    let (mut platform_cpu, mut baseline_cpu) = (Vec::new(), Vec::new());
    let (mut platform_cassandra, mut baseline_cassandra) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (p, b) = if round % 2 == 0 {
            let p = platform(&cql, cassandra, transactions, items, concurrency).await;
            (
                p,
                baseline(&cql, cassandra, &session, transactions, items, concurrency).await,
            )
        } else {
            let b = baseline(&cql, cassandra, &session, transactions, items, concurrency).await;
            (
                platform(&cql, cassandra, transactions, items, concurrency).await,
                b,
            )
        };
        println!(
            "  round {round}: platform {p} (items, commit to applied)   logged batches {b}   ratio {:.2}",
            p.rate.per_second / b.rate.per_second
        );
        platform_rates.push(p.rate.per_second);
        baseline_rates.push(b.rate.per_second);
        platform_cpu.push(p.rate.cpu_micros);
        baseline_cpu.push(b.rate.cpu_micros);
        platform_cassandra.extend(p.cassandra_micros);
        baseline_cassandra.extend(b.cassandra_micros);
    }
    let (p, b) = (median(&mut platform_rates), median(&mut baseline_rates));
    println!(
        "median:   platform {p:>7.0} items/s   logged batches {b:>7.0} items/s   ratio {:.2} (goal >= 0.8)",
        p / b
    );
    let (pc, bc) = (median(&mut platform_cpu), median(&mut baseline_cpu));
    println!(
        "CPU per item (this process; the platform's producer and consumer run in it):   platform {pc:>6.1} µs   logged batches {bc:>6.1} µs   ratio {:.2}",
        pc / bc
    );
    if cassandra.is_some() {
        let (pk, bk) = (
            median(&mut platform_cassandra),
            median(&mut baseline_cassandra),
        );
        println!(
            "Cassandra's CPU per item (the one both sides share):   platform {pk:>6.1} µs   logged batches {bk:>6.1} µs   ratio {:.2}",
            pk / bk
        );
    }
    println!(
        "commit latency and commit-to-applied lag, {latency_txns} transactions one at a time:"
    );
    for size in [10, 100, 1000] {
        let count = if size == 1000 {
            (latency_txns / 10).max(2)
        } else {
            latency_txns
        };
        let (mut commits, mut lags) = latency(&cql, count, size).await;
        println!(
            "  {size:>5} items ({count} transactions): commit p50 {:>7.1} ms  p99 {:>7.1} ms   applied p50 {:>7.1} ms  p99 {:>7.1} ms after TRUE",
            percentile(&mut commits, 0.5),
            percentile(&mut commits, 0.99),
            percentile(&mut lags, 0.5),
            percentile(&mut lags, 0.99)
        );
    }
}
