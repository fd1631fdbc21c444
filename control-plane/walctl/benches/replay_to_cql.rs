//! `walctl replay` against direct CQL inserts, side by side in one run on the local stack.
//!
//! BENCH_ENTRIES cql mutations (one row each, distinct keys) are put on a Kafka namespace queue
//! (4 partitions) before any clock starts. Then `walctl replay` (the real binary, through a real
//! control plane) re-applies them into a fresh Cassandra table, and the baseline writes the same
//! rows with a prepared `INSERT ... USING TIMESTAMP` from as many concurrent tasks as the replay
//! has lanes. The replay's time is what walctl reports: from its first read to its last apply,
//! including finding the range (offsets-for-times), reading and decoding the records and
//! checkpointing. Run with:
//!     scripts/stack up && cargo bench -p walctl --bench replay_to_cql
//! Tunables (environment): BENCH_ENTRIES (1000000), BENCH_CONCURRENCY (64), BENCH_ROUNDS (1).
//! It ends with the direct inserts sent as `INSERT ... JSON ?`, the cql target's statement: how
//! much of the gap is the server parsing JSON rather than the replay itself.

#![allow(clippy::expect_used, clippy::unwrap_used)]

/// The allocator walctl's binary runs with (see its `main.rs`): the direct inserts run with it
/// too, so the two sides differ in what they do, not in their allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use scylla::client::session::Session;
use wal_proto::v1::ApplyRequest;
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;
use wal_queue::entry;
use wal_testkit::cql_rows::{self, KEYSPACE, Round, count, fill_topic, insert_rows};
use wal_testkit::measure::{Rate, Side as Profiled, children_cpu_seconds, cpu_seconds, profile};
use wal_testkit::stack;

/// A control plane on a free port with a fresh SQLite store; its address.
async fn control_plane() -> String {
    wal_testkit::control_plane_at().await.1
}

/// A namespace whose one queue holds `entries` puts into `table`; its name and the time just
/// before the first was written.
async fn filled_namespace(
    control_plane: &str,
    round: usize,
    entries: usize,
    table: &str,
) -> (String, String) {
    let name = format!("bench-replay-{}-{round}", std::process::id());
    let config = format!(
        r#"{{"namespace": "{name}", "persistence_configurations": {{"persistence_configuration": [
            {{"physical_storage": {{"type": "KAFKA"}}, "config": {{"wal-kafka-topics": ["{name}"]}}}}]}},
            "default_target": {{"kind": "cql", "settings": {{"keyspace": "{KEYSPACE}", "table": "{table}"}}}}}}"#
    );
    NamespaceRegistryClient::connect(control_plane.to_owned())
        .await
        .unwrap()
        .apply(ApplyRequest {
            config_json: config,
            author: "bench".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let from = humantime::format_rfc3339_micros(SystemTime::now()).to_string();
    // The control plane provisioned the topic when it applied the namespace.
    fill_topic(&name, &name, table, entries, false).await;
    (name, from)
}

/// `walctl replay` of the whole namespace: rows per second, as walctl measured its run, and the
/// CPU per row of walctl's process (Cassandra's is counted on neither side).
async fn replay_round(session: &Session, control_plane: &str, round: Round) -> Rate {
    let Round {
        entries,
        concurrency,
        ..
    } = round;
    let name = round.table(session, "replay").await;
    let (namespace, from) = filled_namespace(control_plane, round.index, entries, &name).await;
    let checkpoint = std::env::temp_dir().join(format!("{namespace}.checkpoint.json"));
    let cpu = children_cpu_seconds();
    let window = profile(Profiled::Platform);
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_walctl"))
        .args([
            "--control-plane",
            control_plane,
            "-o",
            "json",
            "replay",
            "--direct",
        ])
        .args(["--namespace", &namespace, "--from", &from, "--from-start"])
        .args([
            "--rate",
            "1000000",
            "--concurrency",
            &concurrency.to_string(),
        ])
        .arg("--checkpoint")
        .arg(&checkpoint)
        .env("WAL_CQL_NODES", stack::cql_nodes().join(","))
        .output()
        .await
        .unwrap();
    drop(window);
    assert!(
        output.status.success(),
        "walctl replay: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["applied"], entries, "{report:#}");
    assert_eq!(count(session, &name).await, entries as i64);
    let _ = std::fs::remove_file(checkpoint);
    let seconds = std::time::Duration::from_secs_f64(report["seconds"].as_f64().unwrap());
    // The CPU of the whole walctl run, start-up and range-finding included.
    Rate::over(entries, seconds, children_cpu_seconds() - cpu)
}

/// Direct prepared inserts of the same rows, with the same concurrency. With `json`, the same
/// statement the cql target sends (`INSERT ... JSON ?`), to tell the target's own cost from the
/// server's cost of parsing JSON. The CPU per row is this process's (the driver's). `timed` is
/// false for the warm-up and the JSON round, which a profile of this side leaves out.
async fn direct_round(session: &Arc<Session>, round: Round, json: bool, timed: bool) -> Rate {
    let Round {
        entries,
        concurrency,
        ..
    } = round;
    let side = if json {
        "replay_direct_json"
    } else {
        "replay_direct"
    };
    let name = round.table(session, side).await;
    let text = if json {
        format!("INSERT INTO {KEYSPACE}.{name} JSON ? DEFAULT UNSET USING TIMESTAMP ?")
    } else {
        format!("INSERT INTO {KEYSPACE}.{name} (id, value) VALUES (?, ?) USING TIMESTAMP ?")
    };
    let insert = session.prepare(text).await.unwrap();
    let written = entry::now_micros();
    let started = Instant::now();
    let cpu = cpu_seconds();
    let window = timed.then(|| profile(Profiled::Baseline));
    insert_rows(session, &insert, entries, concurrency, written, json).await;
    drop(window);
    let side = Rate::since(entries, started, cpu);
    assert_eq!(count(session, &name).await, entries as i64);
    side
}

#[tokio::main]
async fn main() {
    let (rounds, all) = Round::from_env(1, 1_000_000);
    let session = cql_rows::session().await;
    let control_plane = control_plane().await;
    println!("replay to cql: {all}, {rounds} rounds");
    // A freshly started Cassandra spends its first seconds compiling (JIT): an untimed round of
    // inserts first keeps that out of whichever side would come first.
    let warm_up = Round {
        entries: all.entries.min(50_000),
        ..all
    };
    direct_round(&session, warm_up, false, false).await;
    let (mut replays, mut directs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut replay_cpu, mut direct_cpu) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which side goes first, so neither always meets a fresher Cassandra.
        let this = Round {
            index: round,
            ..all
        };
        let (r, d) = if round % 2 == 0 {
            let r = replay_round(&session, &control_plane, this).await;
            (r, direct_round(&session, this, false, true).await)
        } else {
            let d = direct_round(&session, this, false, true).await;
            (replay_round(&session, &control_plane, this).await, d)
        };
        println!(
            "  round {round}: walctl replay {r}   direct inserts {d}   ratio {:.2}",
            r.per_second / d.per_second
        );
        replays.push(r.per_second);
        directs.push(d.per_second);
        ratios.push(r.per_second / d.per_second);
        replay_cpu.push(r.cpu_micros);
        direct_cpu.push(d.cpu_micros);
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    println!(
        "median: walctl replay {:.0}/s, direct inserts {:.0}/s, ratio {:.2} (goal: at least 0.9)",
        median(&mut replays),
        median(&mut directs),
        median(&mut ratios)
    );
    let (rc, dc) = (median(&mut replay_cpu), median(&mut direct_cpu));
    println!(
        "CPU per row: walctl replay {rc:.1} µs (its process), direct inserts {dc:.1} µs (this process), ratio {:.2}",
        rc / dc
    );
    // Where the gap is: the same direct inserts as `INSERT ... JSON ?`, the statement the cql
    // target sends.
    let json = direct_round(&session, all, true, false).await;
    println!(
        "direct inserts as INSERT ... JSON (the cql target's statement): {:.0}/s, {:.2} of typed inserts, {:.1} µs CPU/row",
        json.per_second,
        json.per_second / median(&mut directs),
        json.cpu_micros
    );
    wal_testkit::delete_topics(&format!("bench-replay-{}-", std::process::id())).await;
}
