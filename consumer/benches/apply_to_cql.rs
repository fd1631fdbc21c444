//! The consumer against direct CQL inserts, side by side in one run on the local stack.
//!
//! Entries already on a Kafka queue (4 partitions) are applied by the consumer into a Cassandra
//! table; the baseline writes the same rows with a prepared `INSERT ... USING TIMESTAMP` from the
//! same number of concurrent tasks as the consumer has entries in flight. The consumer's rate is
//! measured from its first delivery to its last, so the consumer group's join is not counted;
//! everything after it is (receive, decode, JSON payload, INSERT JSON, acknowledge). Each figure
//! is the median of rounds that alternate which side goes first, after an untimed
//! warm-up round. With BENCH_ARCHIVE=1 each round runs a third side, the same namespace keeping
//! an archive (one more CQL row an entry, which the cql target here carries in its own request,
//! its archive being on the same cluster), and prints it against the consumer without one: what
//! keeping an archive costs. Run with:
//!     scripts/stack up && cargo bench -p wal-consumer --bench apply_to_cql
//! Tunables (environment): BENCH_ENTRIES (50000), BENCH_CONCURRENCY (64), BENCH_ROUNDS (5),
//! BENCH_ARCHIVE (0 or 1).

#![allow(clippy::expect_used, clippy::unwrap_used)]

/// The allocator the consumer's binary runs with (see its `main.rs`); both sides run with it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use scylla::client::session::Session;
use wal_consumer::{Consumer, ConsumerOptions};
use wal_queue::entry;
use wal_testkit::cql_rows::{self, KEYSPACE, Round, count, env_usize, fill_topic, insert_rows};
use wal_testkit::measure::{MachineTicks, Side as Profiled, cpu_seconds, median, profile};
use wal_testkit::stack;

/// One side's figures: rows per second, and this process's CPU per row (the consumer's, or
/// the direct-insert client's) in microseconds.
struct Side {
    rate: f64,
    cpu_micros: f64,
    /// How busy the machine's CPUs were meanwhile (0 to 1), Cassandra and Kafka included.
    busy: f64,
}

/// BENCH_ARCHIVE=1: the namespace keeps an archive, one more CQL write per entry.
fn archived() -> bool {
    env_usize("BENCH_ARCHIVE", 0) == 1
}

/// Puts `entries` cql entries on a fresh topic, all before the clock starts.
async fn fill_queue(round: usize, entries: usize, table: &str) -> String {
    let topic = format!("bench-apply-{}-{table}-{round}", std::process::id());
    fill_topic(&topic, &topic, table, entries, true).await;
    topic
}

/// The consumer's steady rate over a full queue: entries per second from first to last delivery;
/// `archive`: its namespace keeps an archive.
async fn consumer_round(session: &Session, round: Round, archive: bool) -> Side {
    let Round {
        entries,
        concurrency,
        ..
    } = round;
    let name = round
        .table(session, if archive { "archived" } else { "consumer" })
        .await;
    let topic = fill_queue(round.index, entries, &name).await;
    let archive_config = if archive {
        format!(
            r#", "durable_storage": {{"namespace": "{KEYSPACE}", "type": "cql", "archive": {{"retention_days": 1}}}}"#
        )
    } else {
        String::new()
    };
    let config = format!(
        r#"{{"namespace": "{topic}", "persistence_configurations": {{"persistence_configuration": [
            {{"physical_storage": {{"type": "KAFKA"}}, "config": {{"wal-kafka-topics": ["{topic}"], "wal-kafka-dlq-topics": ["{topic}-dlq"]{archive_config}}}}}]}}}}"#
    );
    let namespace = wal_namespaces::parse(&config, "bench").unwrap();
    let mut options = ConsumerOptions::for_local_stack(PathBuf::new());
    options.max_in_flight = u32::try_from(concurrency).unwrap();
    options.provision = false;
    let consumer = Consumer::start(&options.settings().unwrap(), vec![namespace])
        .await
        .unwrap();
    let deliverer = Arc::clone(consumer.deliverer());
    let handle = consumer.spawn();
    let delivered = || deliverer.stats().delivered.load(Ordering::Relaxed) as usize;
    while delivered() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let (first, from, cpu, machine) = (
        Instant::now(),
        delivered(),
        cpu_seconds(),
        MachineTicks::now(),
    );
    let window = profile(if archive {
        Profiled::Archived
    } else {
        Profiled::Platform
    });
    let settled = || {
        let stats = deliverer.stats();
        delivered() + stats.dead_lettered.load(Ordering::Relaxed) as usize
    };
    let deadline = Instant::now() + Duration::from_secs(600);
    while settled() < entries {
        assert!(
            Instant::now() < deadline,
            "the consumer did not settle every entry in 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    drop(window);
    let elapsed = first.elapsed();
    let (cpu, busy) = (cpu_seconds() - cpu, machine.busy_since());
    if archive {
        let stats = deliverer.stats();
        println!(
            "           archive rows: {} carried in the target's request, {} written apart",
            stats.archived_carried.load(Ordering::Relaxed),
            stats.archived_apart.load(Ordering::Relaxed)
        );
    }
    handle.shutdown().await;
    assert_eq!(
        count(session, &name).await,
        entries as i64,
        "every entry became a row"
    );
    let applied = (entries - from) as f64;
    Side {
        rate: applied / elapsed.as_secs_f64(),
        cpu_micros: cpu * 1e6 / applied,
        busy,
    }
}

/// Direct prepared inserts of the same rows, with the same concurrency; `timed` is false for
/// the warm-up, which a profile of this side leaves out.
async fn direct_round(session: &Arc<Session>, round: Round, timed: bool) -> Side {
    let Round {
        entries,
        concurrency,
        ..
    } = round;
    let name = round.table(session, "direct").await;
    let insert = session
        .prepare(format!(
            "INSERT INTO {KEYSPACE}.{name} (id, value) VALUES (?, ?) USING TIMESTAMP ?"
        ))
        .await
        .unwrap();
    let written = entry::now_micros();
    let (started, cpu, machine) = (Instant::now(), cpu_seconds(), MachineTicks::now());
    let window = timed.then(|| profile(Profiled::Baseline));
    insert_rows(session, &insert, entries, concurrency, written, false).await;
    drop(window);
    let side = Side {
        rate: entries as f64 / started.elapsed().as_secs_f64(),
        cpu_micros: (cpu_seconds() - cpu) * 1e6 / entries as f64,
        busy: machine.busy_since(),
    };
    assert_eq!(count(session, &name).await, entries as i64);
    side
}

/// Reads a full queue's topic with a bare rdkafka consumer that does nothing with the messages:
/// the CPU per entry that receiving from Kafka costs on its own, for reading the consumer's.
async fn kafka_read_floor(entries: usize) -> f64 {
    use rdkafka::consumer::{Consumer as _, StreamConsumer};

    let topic = fill_queue(usize::MAX, entries, "floor").await;
    let reader: StreamConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", stack::kafka_bootstrap())
        .set("group.id", format!("{topic}-floor"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    // From before the subscription: librdkafka fetches ahead on its own threads, and that work
    // belongs to the cost of receiving.
    let cpu = cpu_seconds();
    reader.subscribe(&[&topic]).unwrap();
    for _ in 0..entries {
        let _ = reader.recv().await.unwrap();
    }
    (cpu_seconds() - cpu) * 1e6 / entries as f64
}

/// One round's three sides: the consumer, the consumer of a namespace keeping an archive (with
/// BENCH_ARCHIVE=1), and the direct inserts.
struct Sides {
    consumer: Side,
    archived: Option<Side>,
    direct: Side,
}

/// Runs a round's sides, the consumer's first in even rounds and the direct inserts' first in
/// odd ones, so neither always meets a fresher Cassandra; the archiving consumer goes between.
async fn round_of(session: &Arc<Session>, round: Round) -> Sides {
    let direct_first = round.index % 2 == 1;
    let direct = if direct_first {
        Some(direct_round(session, round, true).await)
    } else {
        None
    };
    let consumer = consumer_round(session, round, false).await;
    let archived = if archived() {
        Some(consumer_round(session, round, true).await)
    } else {
        None
    };
    let direct = match direct {
        Some(direct) => direct,
        None => direct_round(session, round, true).await,
    };
    Sides {
        consumer,
        archived,
        direct,
    }
}

fn side_line(name: &str, side: &Side, unit: &str) -> String {
    format!(
        "{name} {:>7.0}/s ({:>4.1} µs CPU/{unit}, machine {:>3.0}% busy)",
        side.rate,
        side.cpu_micros,
        side.busy * 100.0
    )
}

/// Medians of the rounds' figures: rates, CPU per entry, and the ratios of each round's sides.
#[derive(Default)]
struct Medians {
    consumer: Vec<f64>,
    direct: Vec<f64>,
    ratios: Vec<f64>,
    consumer_cpu: Vec<f64>,
    direct_cpu: Vec<f64>,
    archived: Vec<f64>,
    archived_cpu: Vec<f64>,
    archive_ratios: Vec<f64>,
    archive_cpu_ratios: Vec<f64>,
}

#[tokio::main]
async fn main() {
    let (rounds, all) = Round::from_env(5, 50_000);
    let session = cql_rows::session().await;
    println!("apply to cql: {all}, {rounds} rounds");
    // A freshly started Cassandra spends its first seconds compiling (JIT); an untimed round of
    // inserts first keeps that out of whichever side would come first.
    direct_round(&session, all, false).await;
    let mut m = Medians::default();
    for round in 0..rounds {
        let Sides {
            consumer: c,
            archived,
            direct: d,
        } = round_of(
            &session,
            Round {
                index: round,
                ..all
            },
        )
        .await;
        println!(
            "  round {round}: {}   {}   ratio {:.2}",
            side_line("consumer", &c, "entry"),
            side_line("direct inserts", &d, "row"),
            c.rate / d.rate
        );
        if let Some(a) = archived {
            println!(
                "           {}   against the consumer without it: rate {:.2}, CPU {:.2}",
                side_line("archiving", &a, "entry"),
                a.rate / c.rate,
                a.cpu_micros / c.cpu_micros
            );
            m.archived.push(a.rate);
            m.archived_cpu.push(a.cpu_micros);
            m.archive_ratios.push(a.rate / c.rate);
            m.archive_cpu_ratios.push(a.cpu_micros / c.cpu_micros);
        }
        m.consumer.push(c.rate);
        m.direct.push(d.rate);
        m.ratios.push(c.rate / d.rate);
        m.consumer_cpu.push(c.cpu_micros);
        m.direct_cpu.push(d.cpu_micros);
    }
    let (cpu, direct_cpu) = (median(&mut m.consumer_cpu), median(&mut m.direct_cpu));
    println!(
        "median:   consumer {:>7.0}/s ({cpu:>4.1} µs CPU/entry)   direct inserts {:>7.0}/s ({direct_cpu:>4.1} µs CPU/row)   ratio {:.2} (goal >= 0.85), CPU ratio {:.2} (goal <= 1.3)",
        median(&mut m.consumer),
        median(&mut m.direct),
        median(&mut m.ratios),
        cpu / direct_cpu
    );
    if archived() {
        println!(
            "archiving: {:>7.0}/s ({:>4.1} µs CPU/entry; 2 rows an entry, the target's and the archive's)   against the consumer without it: rate {:.2} (goal >= 0.85), CPU {:.2} (goal <= 1.3) (medians of the rounds' ratios)",
            median(&mut m.archived),
            median(&mut m.archived_cpu),
            median(&mut m.archive_ratios),
            median(&mut m.archive_cpu_ratios)
        );
    }
    println!(
        "for reading the consumer's CPU: receiving alone (a bare rdkafka consumer, no work) costs {:.1} µs CPU/entry",
        kafka_read_floor(all.entries).await
    );
    wal_testkit::delete_topics(&format!("bench-apply-{}-", std::process::id())).await;
}
