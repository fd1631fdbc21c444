//! BENCH_PIN=1: the servers (the producer, the forwarder) on CPUs of their own, and the load
//! generator on the last one, so a paced round's tail is not the time the server queued behind
//! the load generator for a CPU. On a 2-core machine that is one CPU each. The stack's services
//! (the Kafka broker above all) stay on every CPU: with the broker moved to the load generator's
//! CPU, raw rdkafka's writes timed out (5 s) in the first warm-up, and on the servers' CPU it
//! would be the servers' tail again. Raw rdkafka runs in this process, so it shares the load
//! generator's CPU, as do the client libraries' programs (a JVM sizes itself to one CPU): pinned,
//! the forwarder is the fair yardstick, not raw rdkafka.
//!
//! `taskset` (util-linux) does the pinning: this crate forbids unsafe code, which
//! `sched_setaffinity` needs, and a child started under `taskset -c` keeps its own pid.

use std::process::Command;
use std::sync::OnceLock;

/// Which CPUs the servers run on and which the load generator does, when BENCH_PIN is set.
#[derive(Debug)]
pub struct Cores {
    /// For `taskset -c`, as "0" or "0,1,2".
    servers: String,
    load: String,
}

static PINNED: OnceLock<Option<Cores>> = OnceLock::new();

/// Pins this process (every thread it has and will start) to the load generator's CPU when
/// BENCH_PIN is 1, and says where each side runs; panics naming the problem when the machine
/// cannot be split or `taskset` fails. Call it first: every server is started after it. Whether
/// it pinned.
pub fn pin_if_asked() -> bool {
    let cores = match std::env::var("BENCH_PIN").as_deref() {
        Err(_) | Ok("0") | Ok("") => None,
        Ok("1") => Some(split()),
        Ok(other) => panic!("BENCH_PIN is '{other}'; expected 1 (pin) or 0 (do not)"),
    };
    if let Some(cores) = &cores {
        // -a: every thread this process has; threads started later inherit their starter's CPUs.
        let pid = std::process::id().to_string();
        taskset(Command::new("taskset").args(["-a", "-p", "-c", &cores.load, &pid]));
        println!(
            "pinned (BENCH_PIN=1): the producer and the forwarder on CPU {}; the load generator, raw rdkafka and the client libraries' programs on CPU {}; the brokers on every CPU. Raw rdkafka now shares its CPU with the load generator: compare WriteToLog with the forwarder, not with raw rdkafka",
            cores.servers, cores.load
        );
    }
    let pinned = cores.is_some();
    PINNED.set(cores).expect("pinned once");
    pinned
}

/// A command that starts `program` on the servers' CPUs when pinned, as it is otherwise.
pub fn server_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    match PINNED.get().and_then(Option::as_ref) {
        Some(cores) => {
            let mut command = Command::new("taskset");
            command.args(["-c", &cores.servers]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// The last CPU this process may use for the load generator, the others for the servers.
fn split() -> Cores {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let allowed = status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .expect("/proc/self/status names Cpus_allowed_list");
    let mut cpus = cpu_list(allowed.trim());
    let load = cpus.pop();
    let (Some(load), false) = (load, cpus.is_empty()) else {
        panic!(
            "BENCH_PIN=1 needs at least 2 CPUs to give the load generator one of its own; this process may use '{}'",
            allowed.trim()
        );
    };
    let servers: Vec<String> = cpus.iter().map(u32::to_string).collect();
    Cores {
        servers: servers.join(","),
        load: load.to_string(),
    }
}

/// The CPUs of a list as the kernel writes it: "0-3,8,10-11".
fn cpu_list(list: &str) -> Vec<u32> {
    let number = |n: &str| {
        n.parse::<u32>()
            .unwrap_or_else(|_| panic!("Cpus_allowed_list '{list}': '{n}' is not a CPU number"))
    };
    list.split(',')
        .flat_map(|part| match part.split_once('-') {
            Some((first, last)) => number(first)..=number(last),
            None => number(part)..=number(part),
        })
        .collect()
}

fn taskset(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("BENCH_PIN=1 runs taskset (util-linux): {e}"));
    assert!(
        output.status.success(),
        "taskset failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}
