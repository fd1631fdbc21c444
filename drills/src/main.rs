//! The fault drills: the platform's processes on the local stack, writers sending checkable
//! writes through WriteToLog, faults injected, and a row per drill of what every write became.
//! The program exits 1 when a promise did not hold. What each drill does, its knobs and how to
//! run them: README.md beside this crate's Cargo.toml.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod cluster;
mod cluster_isr;
mod cluster_rolling;
mod cluster_scale;
mod kills;
mod load;
mod outage;
mod overload;
mod partitions;
mod poison;
mod processes;
mod replication;
mod slow;
mod soak;
mod table;
mod toxiproxy;
mod two_phase;

use std::time::Duration;

use wal_namespaces::Backend;
use wal_testkit::env_u64;

use crate::table::Row;

const ALL: &str = "kills,two-phase,replication,outage,poison,overload,slow,partitions";

/// The drills' knobs: each tunable's value is the environment's, or the full run's default, or
/// the smoke run's (DRILL_SMOKE=1).
struct Knobs {
    smoke: bool,
}

impl Knobs {
    /// A tunable's value: the environment's, or the full run's default, or the smoke's.
    fn tunable(&self, name: &str, full: u64, brief: u64) -> u64 {
        env_u64(name, if self.smoke { brief } else { full })
    }

    /// A tunable counted in seconds.
    fn secs(&self, name: &str, full: u64, brief: u64) -> Duration {
        Duration::from_secs(self.tunable(name, full, brief))
    }

    /// A tunable counting things (writers, kills, entries).
    fn count(&self, name: &str, full: u64, brief: u64) -> usize {
        usize::try_from(self.tunable(name, full, brief)).unwrap()
    }

    /// The kills of each kind the kill drills deal, and the seed of their random order.
    fn kills(&self) -> (usize, u64) {
        (
            self.count("DRILL_KILLS", 20, 2),
            self.tunable("DRILL_SEED", 1, 1),
        )
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let knobs = Knobs {
        smoke: std::env::var("DRILL_SMOKE").is_ok_and(|v| v == "1"),
    };
    let writers = knobs.count("DRILL_WRITERS", 8, 4);
    load::set_stragglers(knobs.secs("DRILL_STRAGGLERS_SECS", 35, 5));
    let drills = std::env::var("DRILLS").unwrap_or_else(|_| ALL.into());
    let mut rows = Vec::new();
    for drill in drills.split(',').map(str::trim) {
        println!(
            "drill: {drill}{}",
            if knobs.smoke { " (smoke)" } else { "" }
        );
        run(drill, &knobs, writers, &mut rows).await;
        if let Some(row) = rows.last() {
            table::print(std::slice::from_ref(row));
            for (answer, message, n) in &row.outcome.reasons {
                println!("  {n} x {answer:?}: {message}");
            }
        }
    }
    report(&rows);
}

/// Runs the drill named `drill` with its knobs, adding its rows to `rows`.
async fn run(drill: &str, knobs: &Knobs, writers: usize, rows: &mut Vec<Row>) {
    let secs = |name: &str, full: u64, brief: u64| knobs.secs(name, full, brief);
    match drill {
        "kills" => rows.extend(kills(knobs, writers).await),
        "two-phase" => {
            let (kills, seed) = knobs.kills();
            rows.push(two_phase::drill(kills, writers, seed).await);
        }
        "replication" => {
            let (kills, seed) = knobs.kills();
            rows.push(replication::drill(kills, writers, seed).await);
        }
        "outage" => rows.push(outage::drill(secs("DRILL_OUTAGE_SECS", 60, 10), writers).await),
        "poison" => {
            let healthy = knobs.count("DRILL_POISON_ENTRIES", 20_000, 2_000);
            let rounds = knobs.count("DRILL_POISON_ROUNDS", 3, 1);
            let rate = knobs.tunable("DRILL_POISON_RATE", 2_000, 300) as f64;
            let secs = knobs.tunable("DRILL_POISON_SECS", 20, 3) as f64;
            rows.push(poison::drill(healthy, rounds.max(1), rate, secs).await);
        }
        "overload" => {
            let rate = u32::try_from(knobs.tunable("DRILL_OVERLOAD_RATE", 300, 100)).unwrap();
            rows.push(overload::drill(rate, secs("DRILL_OVERLOAD_SECS", 30, 5)).await);
        }
        "slow" => rows.push(slow(knobs, writers).await),
        "partitions" => {
            let lengths = partitions::Lengths {
                cut: secs("DRILL_CUT_SECS", 5, 2),
                partition: secs("DRILL_PARTITION_SECS", 120, 5),
                other: secs("DRILL_FAULT_SECS", 15, 3),
                between: secs("DRILL_BETWEEN_SECS", 10, 3),
            };
            rows.push(partitions::drill(lengths, writers).await);
        }
        "cluster" => {
            let seed = knobs.tunable("DRILL_SEED", 1, 1);
            let length = secs("DRILL_CLUSTER_SECS", 1_800, 60);
            rows.push(cluster::drill(writers, length, seed, None).await);
        }
        "cluster-soak" => {
            let seed = knobs.tunable("DRILL_SEED", 1, 1);
            let length = secs("DRILL_SOAK_SECS", 1_800, 60);
            let every = secs("DRILL_SOAK_SAMPLE_SECS", 60, 10);
            rows.push(cluster::drill(writers, length, seed, Some(every)).await);
        }
        "cluster-isr" => {
            rows.push(cluster_isr::drill(writers, secs("DRILL_ISR_SECS", 30, 15)).await);
        }
        "cluster-rolling" => {
            let steady = secs("DRILL_ROLLING_STEADY_SECS", 20, 5);
            rows.push(cluster_rolling::drill(writers, steady).await);
        }
        "cluster-scale" => {
            let windows = cluster_scale::Windows {
                steady: secs("DRILL_SCALE_STEADY_SECS", 15, 10),
                step: secs("DRILL_SCALE_STEP_SECS", 30, 15),
            };
            rows.extend(cluster_scale::drill(writers, windows).await);
        }
        other => panic!(
            "DRILLS: '{other}' is not a drill; expected some of \
             {ALL},cluster,cluster-isr,cluster-scale,cluster-rolling,cluster-soak"
        ),
    }
}

/// The kills drill, a row for each backend of DRILL_BACKENDS.
async fn kills(knobs: &Knobs, writers: usize) -> Vec<Row> {
    let (kills, seed) = knobs.kills();
    let backends = std::env::var("DRILL_BACKENDS").unwrap_or_else(|_| "kafka,sqs".into());
    let mut rows = Vec::new();
    for backend in backends.split(',') {
        let backend = match backend.trim() {
            "kafka" => Backend::Kafka,
            "sqs" => Backend::Sqs,
            other => panic!("DRILL_BACKENDS: '{other}' is not a backend; expected kafka or sqs"),
        };
        rows.push(kills::drill(backend, kills, writers, seed).await);
    }
    rows
}

/// The slow-target drill, shaped so the consumer falls behind its writers.
async fn slow(knobs: &Knobs, writers: usize) -> Row {
    // The consumer must fall behind the writers for the drill to test anything:
    // with 2 queues it takes 2 x in-flight entries every DRILL_SLOW_MS. A smoke run's
    // writers, beside the suite's other tests, wrote 31 a second (310 in 10 s),
    // below the 43 a second 64 in flight at 3 s take, and the lag did not grow; so a
    // smoke run bounds the consumer at 16 (11 a second) and paces its writers to at
    // most 40 a second, so what they write drains in under a minute. A target
    // slower than the consumer's 10 s apply timeout would be a failing one.
    let latency = Duration::from_millis(knobs.tunable("DRILL_SLOW_MS", 1_000, 3_000));
    let shape = slow::Shape {
        in_flight: knobs.tunable("DRILL_SLOW_IN_FLIGHT", 256, 16),
        writers,
        pace: Duration::from_millis(knobs.tunable("DRILL_SLOW_PACE_MS", 5, 100)),
    };
    let length = knobs.secs("DRILL_SLOW_SECS", 60, 10);
    slow::drill(latency, shape, length).await
}

/// The table of every drill's row; exits 1, naming each, if a promise did not hold.
fn report(rows: &[Row]) {
    println!();
    table::print(rows);
    let failures: Vec<String> = rows
        .iter()
        .flat_map(|row| {
            row.failures()
                .into_iter()
                .map(move |f| format!("{} on {}: {f}", row.drill, row.backend))
        })
        .collect();
    if !failures.is_empty() {
        for failure in &failures {
            eprintln!("drills: {failure}");
        }
        std::process::exit(1);
    }
}
