//! WriteToLog against its baselines, side by side in one run on the local stack:
//!
//! - Kafka: WriteToLog (durable TRUE, 1 KiB payloads) against a raw rdkafka producer with the
//!   same payload size, acks=all, idempotence, linger and concurrency, and against a hand-built
//!   forwarder (forwarder.rs: a gRPC server of its own that hands the payload to rdkafka and
//!   nothing else, what a team would write instead), unary, batched and paced;
//! - SQS: WriteToLog on an SQS namespace against raw SendMessage with the same concurrency;
//! - the batch path (WriteToLogBatch) with the same number of writes in flight;
//! - latency at half of WriteToLog's measured maximum throughput (BENCH_PACE sets another share),
//!   both sides paced at that rate;
//! - WriteToLog with mTLS and authorization on (a second producer process, client certificates,
//!   an `access.write` grant) against plaintext, at maximum throughput and at half of it;
//! - the Rust client library (clients/rust: its batcher on) with the same number of writers,
//!   against raw rdkafka, its CPU the producer's and this process's (the library's) together;
//!   then every client library paced at BENCH_LIBRARY_RATE (2000) writes/s against raw rdkafka
//!   at that rate: the Go, Java and Python ones through their bench programs (built by
//!   `clients/<language>/build`);
//! - WriteToLog exporting its spans to the stack's Jaeger (`scripts/stack up jaeger`), every
//!   write sampled and one in a hundred, against traces off.
//!
//! The producer runs as its own process (the release `wal-producer` binary), as in production.
//! Each figure is the median of three alternating rounds. CPU per write is the producer
//! process's CPU time for the platform's side and this process's (the raw client, plus the
//! load generator it also runs) for the baseline's; the brokers are not counted. Beside it, the
//! time that process's threads waited for a CPU per write (ready, not running: schedstat), and
//! how busy the whole machine was: on a shared machine, latency a side spends queued for a CPU
//! is not time its code took. Run with:
//!     scripts/stack up && scripts/stack up jaeger && cargo bench -p wal-producer --bench write_to_log
//! Tunables (environment): BENCH_KAFKA_WRITES (30000), BENCH_SQS_WRITES (3000),
//! BENCH_CONCURRENCY (64), BENCH_ROUNDS (3), BENCH_BATCH (16), BENCH_PARTS (the sections to run,
//! comma-separated: `unary,batch,client,tls,traces,sqs`, all by default; `unary` alone is the quick A/B of a
//! write-path change), BENCH_PACE (0.5: the share of WriteToLog's maximum at which the unary
//! latency rounds pace both sides), BENCH_PIN (1: the producer and the forwarder on CPUs of their
//! own, the load generator on the last one, the brokers on all; cores.rs).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::future::Future;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::sync::Semaphore;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::{Trilean, WriteToLogBatchRequest, WriteToLogRequest};
use wal_testkit::measure::{MachineTicks, RunQueueWait, StallWatch, cpu_seconds_of};
use wal_testkit::pki::{Named, Pki};

mod cores;
mod forwarder;
mod libraries;

const PAYLOAD_BYTES: usize = 1024;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn stack(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// One measured run: how many writes per second, their latencies in microseconds, the CPU the
/// measured side's process spent per write, how long its threads waited for a CPU per write,
/// and how busy the machine was meanwhile (0 to 1).
struct Run {
    per_second: f64,
    latency: Histogram<u64>,
    cpu_micros: f64,
    wait_micros: f64,
    busy: f64,
    /// The latest a thread of this benchmark sleeping 1 ms at a time woke meanwhile
    /// ([`StallWatch`]).
    stall: Duration,
}

impl Run {
    /// `count` calls made since `started`, with their latencies.
    fn of(count: usize, started: Instant, latency: Histogram<u64>) -> Self {
        Self {
            per_second: count as f64 / started.elapsed().as_secs_f64(),
            latency,
            cpu_micros: f64::NAN,
            wait_micros: f64::NAN,
            busy: f64::NAN,
            stall: Duration::ZERO,
        }
    }

    fn p(&self, quantile: f64) -> f64 {
        self.latency.value_at_quantile(quantile) as f64 / 1000.0
    }
}

/// Runs `count` calls of `call` with `concurrency` in flight (closed loop).
async fn closed_loop<F, Fut>(count: usize, concurrency: usize, call: F) -> Run
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (call, next) = (Arc::clone(&call), Arc::clone(&next));
            tokio::spawn(async move {
                let mut latency = Histogram::<u64>::new(3).unwrap();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= count {
                        return latency;
                    }
                    let sent = Instant::now();
                    call(i).await;
                    latency.record(sent.elapsed().as_micros() as u64).unwrap();
                }
            })
        })
        .collect();
    let mut latency = Histogram::<u64>::new(3).unwrap();
    for worker in workers {
        latency.add(worker.await.unwrap()).unwrap();
    }
    Run::of(count, started, latency)
}

/// Sends at a fixed `rate` for `count` calls (open loop): latency counts from each call's
/// scheduled time, so a stall shows up in the tail instead of slowing the sender.
async fn open_loop<F, Fut>(count: usize, rate: f64, call: F) -> Run
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let call = Arc::new(call);
    let bound = Arc::new(Semaphore::new(4096));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let scheduled = started + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(scheduled.into()).await;
        let permit = Arc::clone(&bound).acquire_owned().await.unwrap();
        let call = Arc::clone(&call);
        tasks.push(tokio::spawn(async move {
            call(i).await;
            drop(permit);
            scheduled.elapsed().as_micros() as u64
        }));
    }
    let mut latency = Histogram::<u64>::new(3).unwrap();
    for task in tasks {
        latency.record(task.await.unwrap()).unwrap();
    }
    Run::of(count, started, latency)
}

/// Whose CPU a run is charged: the producer process (the platform's side), or this process (the
/// raw client's side; it also runs the load generator, which the platform's side does not pay).
#[derive(Clone, Copy)]
enum Cpu {
    Process(u32),
    This,
    /// The producer process and this one: a client library's side, whose library runs here.
    Both(u32),
}

impl Cpu {
    fn pid(self) -> u32 {
        match self {
            Self::Process(pid) | Self::Both(pid) => pid,
            Self::This => std::process::id(),
        }
    }

    fn seconds(self) -> f64 {
        match self {
            Self::Both(pid) => cpu_seconds_of(pid) + cpu_seconds_of(std::process::id()),
            _ => cpu_seconds_of(self.pid()),
        }
    }

    /// The process's threads' waits for a CPU so far.
    fn waits(self) -> RunQueueWait {
        RunQueueWait::of(self.pid())
    }
}

/// `run`, with the CPU `cpu` spent during it per write (`writes` of them), the time its threads
/// waited for a CPU per write, the machine's busy share and the benchmark's longest stall.
async fn charged(cpu: Cpu, writes: usize, run: impl Future<Output = Run>) -> Run {
    let (before, waits, machine) = (cpu.seconds(), cpu.waits(), MachineTicks::now());
    // Started after the waits were read and stopped before they are read again: its thread's
    // waits are in neither reading. Its CPU is this process's, so the raw side leaves it out.
    let watch = StallWatch::start();
    let mut run = run.await;
    let stalls = watch.stop();
    let watching = match cpu {
        Cpu::This | Cpu::Both(_) => stalls.cpu_seconds,
        Cpu::Process(_) => 0.0,
    };
    run.stall = stalls.longest;
    run.cpu_micros = (cpu.seconds() - before - watching) * 1e6 / writes as f64;
    run.wait_micros = waits.since() * 1e6 / writes as f64;
    run.busy = machine.busy_since();
    run
}

/// The baselines' Kafka producer settings (raw rdkafka's and the forwarder's): the ones the
/// platform's producer uses (queue/src/kafka/backend.rs).
fn raw_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "1")
        .set("message.timeout.ms", "5000");
    config
}

/// The raw baseline's queue `name`, with its DLQ.
fn raw_spec(name: &str) -> wal_queue::QueueSpec {
    wal_queue::QueueSpec::new("raw", name, &format!("{name}-dlq"))
}

async fn provision_raw(queue: impl wal_queue::Queue) {
    queue.provision().await.unwrap();
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

/// Medians over rounds: throughput, p50 and p99 in ms, CPU µs per write, run-queue wait µs
/// per write, and the machine's busy share.
fn summarize(runs: &[Run]) -> (f64, f64, f64, f64, f64, f64) {
    (
        median(runs.iter().map(|r| r.per_second).collect()),
        median(runs.iter().map(|r| r.p(0.50)).collect()),
        median(runs.iter().map(|r| r.p(0.99)).collect()),
        median(runs.iter().map(|r| r.cpu_micros).collect()),
        median(runs.iter().map(|r| r.wait_micros).collect()),
        median(runs.iter().map(|r| r.busy).collect()),
    )
}

fn print_pair(title: &str, wal: &[Run], raw: &[Run], raw_name: &str) {
    print_labeled(title, ("WriteToLog", wal), (raw_name, raw));
}

fn print_labeled(title: &str, (wal_name, wal): (&str, &[Run]), (raw_name, raw): (&str, &[Run])) {
    let (wal_rate, wal_p50, wal_p99, wal_cpu, wal_wait, wal_busy) = summarize(wal);
    let (raw_rate, raw_p50, raw_p99, raw_cpu, raw_wait, raw_busy) = summarize(raw);
    println!("\n{title}");
    println!(
        "  {:<24} {:>12} {:>10} {:>10} {:>14} {:>15} {:>13}",
        "", "writes/s", "p50 ms", "p99 ms", "CPU µs/write", "wait µs/write", "machine busy"
    );
    println!(
        "  {:<24} {:>12.0} {:>10.2} {:>10.2} {:>14.1} {:>15.1} {:>12.0}%",
        wal_name,
        wal_rate,
        wal_p50,
        wal_p99,
        wal_cpu,
        wal_wait,
        wal_busy * 100.0
    );
    println!(
        "  {:<24} {:>12.0} {:>10.2} {:>10.2} {:>14.1} {:>15.1} {:>12.0}%",
        raw_name,
        raw_rate,
        raw_p50,
        raw_p99,
        raw_cpu,
        raw_wait,
        raw_busy * 100.0
    );
    println!(
        "  {:<24} {:>12.2} {:>10.2} {:>10.2} {:>14.2}",
        "ratio (row 1 / row 2)",
        wal_rate / raw_rate,
        wal_p50 / raw_p50,
        wal_p99 / raw_p99,
        wal_cpu / raw_cpu
    );
    let rounds: Vec<String> = wal
        .iter()
        .zip(raw)
        .map(|(w, r)| format!("{:.0}/{:.0}", w.per_second, r.per_second))
        .collect();
    println!(
        "  {:<24} {:>12} {:>+10.2} {:>+10.2}",
        "difference (ms)",
        "",
        wal_p50 - raw_p50,
        wal_p99 - raw_p99
    );
    println!(
        "  rounds (writes/s, first/second row): {}",
        rounds.join("  ")
    );
    // A round's p99 next to the longest the benchmark's own process was held up meanwhile: a
    // tail far longer than that was not the load generator sending or reading late.
    let tails: Vec<String> = wal
        .iter()
        .zip(raw)
        .map(|(w, r)| {
            format!(
                "{:.1}/{:.1} ({:.0}/{:.0})",
                w.p(0.99),
                r.p(0.99),
                w.stall.as_secs_f64() * 1e3,
                r.stall.as_secs_f64() * 1e3
            )
        })
        .collect();
    println!(
        "  rounds (p99 ms, first/second row; in brackets the latest ms a thread of this benchmark sleeping 1 ms woke): {}",
        tails.join("  ")
    );
}

/// The unary latency rounds' baselines: raw rdkafka's producer and topic, and the forwarder's
/// clients and CPU.
type Baselines<'a> = (
    &'a FutureProducer,
    &'a str,
    (&'a [WriteAheadLogClient<Channel>], Cpu),
);

/// The hand-built forwarder's row in the tables (forwarder.rs).
const FORWARDER: &str = "hand-built forwarder";

/// The producer's process, the port it serves its metrics on, and its gRPC address.
struct ProducerProcess(Child, u16, String);

impl Drop for ProducerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    wal_testkit::refusing_address().port()
}

/// Client connections to the producer: production traffic comes from many services, never over
/// one HTTP/2 connection, whose frames one task on each side must handle in turn.
const CONNECTIONS: usize = 4;

/// The bench's client principal, granted `access.write` on the mTLS producer's namespace.
const PRINCIPAL: &str = "bench";

async fn start_producer(
    dir: &std::path::Path,
    tls: Option<&Pki>,
    env: &[(&str, String)],
) -> (ProducerProcess, Vec<WriteAheadLogClient<Channel>>) {
    let (port, metrics_port) = (free_port(), free_port());
    let mut command = cores::server_command(env!("CARGO_BIN_EXE_wal-producer"));
    let mut endpoint = Channel::from_shared(format!("http://127.0.0.1:{port}")).unwrap();
    if let Some(pki) = tls {
        let (cert, key) = pki.server("producer");
        command
            .args(["--tls-cert", cert.to_str().unwrap()])
            .args(["--tls-key", key.to_str().unwrap()])
            .args(["--tls-client-ca", pki.ca_path().to_str().unwrap()])
            .arg("--authorize");
        let client = pki.client(Named::Cn(PRINCIPAL));
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(pki.ca_pem()))
            .identity(Identity::from_pem(&client.cert, &client.key))
            .domain_name("localhost");
        endpoint = Channel::from_shared(format!("https://127.0.0.1:{port}"))
            .unwrap()
            .tls_config(tls)
            .unwrap();
    }
    let child = command
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
        .args(["--namespaces", dir.to_str().unwrap(), "--provision"])
        .args([
            "--kafka-bootstrap",
            &stack("WAL_KAFKA_BOOTSTRAP", "127.0.0.1:19092"),
        ])
        .args([
            "--sqs-endpoint",
            &stack("WAL_SQS_ENDPOINT", "http://127.0.0.1:19324"),
        ])
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .spawn()
        .expect("start wal-producer");
    let mut process = ProducerProcess(child, metrics_port, format!("127.0.0.1:{port}"));
    let clients = connect_once_up(&mut process, &endpoint, "wal-producer").await;
    (process, clients)
}

/// [`CONNECTIONS`] clients of `endpoint` once the process `what` behind it answers; panics if it
/// exits first or does not answer within a minute.
async fn connect_once_up(
    process: &mut ProducerProcess,
    endpoint: &tonic::transport::Endpoint,
    what: &str,
) -> Vec<WriteAheadLogClient<Channel>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = process.0.try_wait() {
            panic!("{what} exited at start-up with {status} (its error is above)");
        }
        if endpoint.connect().await.is_ok() {
            let mut clients = Vec::new();
            for _ in 0..CONNECTIONS {
                clients.push(WriteAheadLogClient::new(endpoint.connect().await.unwrap()));
            }
            return clients;
        }
        assert!(Instant::now() < deadline, "{what} did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn namespace_file(dir: &std::path::Path, name: &str, kind: &str, queue_key: &str, queue: &str) {
    write_namespace(dir, name, kind, queue_key, queue, "");
}

fn write_namespace(
    dir: &std::path::Path,
    name: &str,
    kind: &str,
    queue_key: &str,
    queue: &str,
    extra: &str,
) {
    let text = format!(
        r#"{{"namespace": "{name}",
            "persistence_configurations": {{"persistence_configuration": [
              {{"physical_storage": {{"type": "{kind}"}}, "config": {{"{queue_key}": ["{queue}"]}}}}]}},
            "rate_limit": {{"writes_per_second": 1000000, "max_in_flight": 100000}},
            "default_target": {{"kind": "cql", "settings": {{"keyspace": "bench", "table": "rows"}}}}{extra}}}"#
    );
    std::fs::write(dir.join(format!("{name}.json")), text).unwrap();
}

type Call = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

fn wal_request(namespace: &str, i: usize) -> WriteToLogRequest {
    WriteToLogRequest {
        namespace: namespace.to_owned(),
        payload: vec![b'w'; PAYLOAD_BYTES],
        key: format!("key-{i}"),
        ..WriteToLogRequest::default()
    }
}

fn wal_call(
    clients: &[WriteAheadLogClient<Channel>],
    namespace: &str,
) -> impl Fn(usize) -> Call + Send + Sync + 'static {
    let clients = clients.to_vec();
    let namespace = namespace.to_owned();
    move |i| {
        let mut client = clients[i % clients.len()].clone();
        let request = wal_request(&namespace, i);
        Box::pin(async move {
            let answer = client
                .write_to_log(request)
                .await
                .expect("answered")
                .into_inner();
            assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);
        })
    }
}

/// One WriteToLogBatch call of `batch` writes per invocation.
fn wal_batch_call(
    clients: &[WriteAheadLogClient<Channel>],
    namespace: &str,
    batch: usize,
) -> impl Fn(usize) -> Call + Send + Sync + 'static {
    let clients = clients.to_vec();
    let namespace = namespace.to_owned();
    move |i| {
        let mut client = clients[i % clients.len()].clone();
        let writes = (0..batch)
            .map(|j| wal_request(&namespace, i * batch + j))
            .collect();
        Box::pin(async move {
            let request = WriteToLogBatchRequest { writes };
            let results = client
                .write_to_log_batch(request)
                .await
                .expect("answered")
                .into_inner()
                .results;
            for result in results {
                let answer = result.response.expect(&result.error);
                assert_eq!(answer.durable(), Trilean::True, "{}", answer.message);
            }
        })
    }
}

fn kafka_call(
    producer: &FutureProducer,
    topic: &str,
) -> impl Fn(usize) -> Call + Send + Sync + 'static {
    let producer = producer.clone();
    let topic = topic.to_owned();
    move |i| {
        let producer = producer.clone();
        let topic = topic.clone();
        Box::pin(async move {
            let key = format!("key-{i}");
            let payload = vec![b'r'; PAYLOAD_BYTES];
            let record = FutureRecord::to(&topic).key(&key).payload(&payload);
            producer
                .send(record, Duration::from_secs(10))
                .await
                .expect("raw produce");
        })
    }
}

fn sqs_call(
    client: &aws_sdk_sqs::Client,
    url: &str,
) -> impl Fn(usize) -> Call + Send + Sync + 'static {
    let client = client.clone();
    let url = url.to_owned();
    // The same text size SendMessage carries for a WAL entry: base64 of a 1 KiB payload.
    let body = "r".repeat(PAYLOAD_BYTES * 4 / 3);
    move |_| {
        let request = client.send_message().queue_url(&url).message_body(&body);
        Box::pin(async move {
            request.send().await.expect("raw send");
        })
    }
}

#[tokio::main]
async fn main() {
    if forwarder::serve_if_asked().await {
        return;
    }
    // Counted before this process is pinned to one of them.
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let pinned = cores::pin_if_asked();
    let kafka_writes = env_usize("BENCH_KAFKA_WRITES", 30_000);
    let sqs_writes = env_usize("BENCH_SQS_WRITES", 3_000);
    let concurrency = env_usize("BENCH_CONCURRENCY", 64);
    let rounds = env_usize("BENCH_ROUNDS", 3);
    let parts = std::env::var("BENCH_PARTS")
        .unwrap_or_else(|_| "unary,batch,client,tls,traces,sqs".to_owned());
    let known = ["unary", "batch", "client", "tls", "traces", "sqs"];
    if let Some(unknown) = parts.split(',').find(|p| !known.contains(&p.trim())) {
        panic!("BENCH_PARTS names '{unknown}'; expected some of {known:?}, comma-separated");
    }
    let part = |name: &str| parts.split(',').any(|p| p.trim() == name);
    let unary_pace = std::env::var("BENCH_PACE").map_or(0.5, |pace| {
        pace.parse::<f64>()
            .ok()
            .filter(|share| *share > 0.0 && *share <= 1.0)
            .unwrap_or_else(|| {
                panic!(
                    "BENCH_PACE is '{pace}'; expected a share of the maximum, above 0 and at most 1"
                )
            })
    });
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();

    let dir = std::env::temp_dir().join(format!("wal-bench-{run_id}"));
    std::fs::create_dir_all(&dir).unwrap();
    namespace_file(
        &dir,
        "bench_kafka",
        "KAFKA",
        "wal-kafka-topics",
        &format!("bench-wal-{run_id}"),
    );
    namespace_file(
        &dir,
        "bench_sqs",
        "SQS",
        "wal-queue",
        &format!("bench-wal-{run_id}"),
    );
    let (process, client) = start_producer(&dir, None, &[]).await;
    let batch = env_usize("BENCH_BATCH", 16);

    let bootstrap = stack("WAL_KAFKA_BOOTSTRAP", "127.0.0.1:19092");
    let raw_topic = format!("bench-raw-{run_id}");
    let raw = wal_queue::kafka::KafkaBackend::new(wal_queue::kafka::KafkaSettings::new(&bootstrap))
        .unwrap();
    provision_raw(raw.queue(raw_spec(&raw_topic))).await;
    let raw_producer: FutureProducer = raw_config(&bootstrap).create().unwrap();
    // The hand-built forwarder on the raw topic: a gRPC hop and a process of its own, like
    // WriteToLog, and nothing else (forwarder.rs).
    let (forwarder_process, forwarder) = forwarder::start(&raw_topic).await;
    let forwarder_cpu = Cpu::Process(forwarder_process.0.id());

    println!(
        "WriteToLog benchmark: {PAYLOAD_BYTES} B payloads, {concurrency} in flight, median of {rounds} rounds"
    );
    match pinned {
        true => println!("machine: {cpus} cores"),
        false => println!(
            "machine: {cpus} cores; producer, brokers and load generator share them (BENCH_PIN=1 splits them)"
        ),
    }

    // Warm the three paths (connections, metadata, JIT of the brokers).
    closed_loop(2_000, concurrency, wal_call(&client, "bench_kafka")).await;
    closed_loop(2_000, concurrency, kafka_call(&raw_producer, &raw_topic)).await;
    closed_loop(2_000, concurrency, wal_call(&forwarder, "bench_kafka")).await;

    // Whose CPU each side's writes cost: the producer process's, and this process's (the raw
    // client's) for the baselines.
    let wal_cpu = Cpu::Process(process.0.id());
    let raw_cpu = Cpu::This;
    let (mut wal_runs, mut raw_runs, mut forwarded_runs) = (Vec::new(), Vec::new(), Vec::new());
    // Half of WriteToLog's maximum, where the TLS section's latency rounds pace their writes.
    let mut half = None;
    if part("unary") {
        for _ in 0..rounds {
            let raw_call = kafka_call(&raw_producer, &raw_topic);
            let raw = closed_loop(kafka_writes, concurrency, raw_call);
            raw_runs.push(charged(raw_cpu, kafka_writes, raw).await);
            let forwarded = closed_loop(kafka_writes, concurrency, wal_call(&forwarder, ""));
            forwarded_runs.push(charged(forwarder_cpu, kafka_writes, forwarded).await);
            let wal = closed_loop(kafka_writes, concurrency, wal_call(&client, "bench_kafka"));
            wal_runs.push(charged(wal_cpu, kafka_writes, wal).await);
        }
        print_pair(
            "Kafka, maximum throughput (closed loop)",
            &wal_runs,
            &raw_runs,
            "raw rdkafka",
        );
        print_pair(
            "Kafka, maximum throughput (closed loop), against the hand-built forwarder",
            &wal_runs,
            &forwarded_runs,
            FORWARDER,
        );
        let max = summarize(&wal_runs).0;
        half = Some(max / 2.0);
        let producer = (wal_cpu, process.1);
        let pace = (max, unary_pace);
        let baselines = (
            &raw_producer,
            raw_topic.as_str(),
            (&forwarder[..], forwarder_cpu),
        );
        unary_paced(&client, baselines, pace, rounds, producer).await;
    }

    // The batch path with the same number of writes in flight: `concurrency / batch` calls.
    if part("batch") {
        let calls_in_flight = (concurrency / batch).max(1);
        let batch_call = || wal_batch_call(&client, "bench_kafka", batch);
        closed_loop(2_000 / batch, calls_in_flight, batch_call()).await;
        let forwarded_call = || wal_batch_call(&forwarder, "", batch);
        closed_loop(2_000 / batch, calls_in_flight, forwarded_call()).await;
        let (mut batch_runs, mut raw_batch_runs) = (Vec::new(), Vec::new());
        let mut forwarded_batch_runs = Vec::new();
        for _ in 0..rounds {
            let raw_call = kafka_call(&raw_producer, &raw_topic);
            let raw = closed_loop(kafka_writes, calls_in_flight * batch, raw_call);
            raw_batch_runs.push(charged(raw_cpu, kafka_writes, raw).await);
            let calls = closed_loop(kafka_writes / batch, calls_in_flight, forwarded_call());
            let mut run = charged(forwarder_cpu, kafka_writes / batch * batch, calls).await;
            run.per_second *= batch as f64;
            forwarded_batch_runs.push(run);
            let calls = closed_loop(kafka_writes / batch, calls_in_flight, batch_call());
            let mut run = charged(wal_cpu, kafka_writes / batch * batch, calls).await;
            run.per_second *= batch as f64;
            batch_runs.push(run);
        }
        let title = format!(
            "Kafka, WriteToLogBatch of {batch} with {calls_in_flight} calls in flight (latency per call)"
        );
        print_pair(&title, &batch_runs, &raw_batch_runs, "raw rdkafka");
        let title = format!("{title}, against the hand-built forwarder (its batches of {batch})");
        print_pair(&title, &batch_runs, &forwarded_batch_runs, FORWARDER);

        // The batch path paced at half of its own maximum, calls at a fixed rate.
        let half_calls = summarize(&batch_runs).0 / batch as f64 / 2.0;
        let paced_calls = (half_calls * 5.0) as usize;
        let (mut batch_paced, mut raw_batch_paced) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let raw_call = kafka_call(&raw_producer, &raw_topic);
            let raw = open_loop(paced_calls * batch, half_calls * batch as f64, raw_call);
            raw_batch_paced.push(charged(raw_cpu, paced_calls * batch, raw).await);
            let calls = open_loop(paced_calls, half_calls, batch_call());
            let mut run = charged(wal_cpu, paced_calls * batch, calls).await;
            run.per_second *= batch as f64;
            batch_paced.push(run);
        }
        print_pair(
            &format!(
                "Kafka, WriteToLogBatch of {batch} at half of its maximum ({:.0} writes/s, open loop; latency per call)",
                half_calls * batch as f64
            ),
            &batch_paced,
            &raw_batch_paced,
            "raw rdkafka",
        );
    }

    if part("client") {
        libraries::client_library(
            &process,
            &raw_producer,
            &raw_topic,
            kafka_writes,
            concurrency,
            rounds,
        )
        .await;
        let rate = std::env::var("BENCH_LIBRARY_RATE")
            .ok()
            .and_then(|rate| rate.parse::<f64>().ok())
            .unwrap_or(2000.0);
        libraries::paced(&process, &raw_producer, &raw_topic, rate, 5.0, rounds).await;
    }

    // mTLS and authorization on, against plaintext: a second producer on the same topic.
    if part("tls") {
        let secured_dir = dir.join("secured");
        std::fs::create_dir_all(&secured_dir).unwrap();
        write_namespace(
            &secured_dir,
            "bench_kafka",
            "KAFKA",
            "wal-kafka-topics",
            &format!("bench-wal-{run_id}"),
            &format!(r#", "access": {{"write": ["{PRINCIPAL}"]}}"#),
        );
        let pki = Pki::new("bench CA");
        let (secured_process, secured) = start_producer(&secured_dir, Some(&pki), &[]).await;
        closed_loop(2_000, concurrency, wal_call(&secured, "bench_kafka")).await;
        let tls_cpu = Cpu::Process(secured_process.0.id());
        let (mut tls_runs, mut plain_runs) = (Vec::new(), Vec::new());
        let paced = |half: f64| (half * 5.0) as usize;
        for _ in 0..rounds {
            let plain = closed_loop(kafka_writes, concurrency, wal_call(&client, "bench_kafka"));
            plain_runs.push(charged(wal_cpu, kafka_writes, plain).await);
            let tls = closed_loop(kafka_writes, concurrency, wal_call(&secured, "bench_kafka"));
            tls_runs.push(charged(tls_cpu, kafka_writes, tls).await);
        }
        print_labeled(
            "Kafka, mTLS and authorization on against plaintext, maximum throughput (closed loop)",
            ("mTLS + authorization", &tls_runs),
            ("plaintext", &plain_runs),
        );
        let half = half.unwrap_or(summarize(&plain_runs).0 / 2.0);
        let paced = paced(half);
        let (mut tls_paced, mut plain_paced) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let plain = open_loop(paced, half, wal_call(&client, "bench_kafka"));
            plain_paced.push(charged(wal_cpu, paced, plain).await);
            let tls = open_loop(paced, half, wal_call(&secured, "bench_kafka"));
            tls_paced.push(charged(tls_cpu, paced, tls).await);
        }
        print_labeled(
            &format!(
                "Kafka, mTLS and authorization on against plaintext, at half of WriteToLog's maximum ({half:.0} writes/s, open loop)"
            ),
            ("mTLS + authorization", &tls_paced),
            ("plaintext", &plain_paced),
        );
    }

    if part("traces") {
        traces(&dir, (&client, wal_cpu), kafka_writes, concurrency, rounds).await;
    }

    if part("sqs") {
        let sqs = wal_queue::sqs::SqsBackend::new(wal_queue::sqs::SqsSettings::local(&stack(
            "WAL_SQS_ENDPOINT",
            "http://127.0.0.1:19324",
        )))
        .await;
        let raw_queue = format!("bench-raw-{run_id}");
        provision_raw(sqs.queue(raw_spec(&raw_queue))).await;
        let url = sqs
            .client()
            .get_queue_url()
            .queue_name(&raw_queue)
            .send()
            .await
            .unwrap()
            .queue_url()
            .unwrap()
            .to_owned();
        closed_loop(300, concurrency, wal_call(&client, "bench_sqs")).await;
        closed_loop(300, concurrency, sqs_call(sqs.client(), &url)).await;
        let (mut wal_sqs, mut raw_sqs) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let raw = closed_loop(sqs_writes, concurrency, sqs_call(sqs.client(), &url));
            raw_sqs.push(charged(raw_cpu, sqs_writes, raw).await);
            let wal = closed_loop(sqs_writes, concurrency, wal_call(&client, "bench_sqs"));
            wal_sqs.push(charged(wal_cpu, sqs_writes, wal).await);
        }
        print_pair(
            "SQS (ElasticMQ), maximum throughput (closed loop)",
            &wal_sqs,
            &raw_sqs,
            "raw SendMessage",
        );
    }
    // The producers first: one whose namespace folder vanished under it logs an ERROR.
    drop(process);
    let _ = std::fs::remove_dir_all(&dir);
    wal_testkit::delete_topics(&format!("bench-wal-{run_id}")).await;
    wal_testkit::delete_topics(&raw_topic).await;
}

/// A pause after the round that exports every write's spans: the exporter's queue and the
/// stack's Jaeger (on the same two cores) go on working through them after the round ends.
const JAEGER_SETTLE: Duration = Duration::from_secs(3);

/// What exporting spans costs a write: the same producer binary with traces off, and exporting
/// to the stack's Jaeger with every write sampled and with one in a hundred, side by side in
/// alternating rounds at maximum throughput.
async fn traces(
    dir: &std::path::Path,
    (client, off_cpu): (&[WriteAheadLogClient<Channel>], Cpu),
    writes: usize,
    concurrency: usize,
    rounds: usize,
) {
    let exporting = |ratio: &str| {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", wal_testkit::jaeger().0),
            ("OTEL_TRACES_SAMPLER", "traceidratio".to_owned()),
            ("OTEL_TRACES_SAMPLER_ARG", ratio.to_owned()),
        ]
    };
    let (all_process, all) = start_producer(dir, None, &exporting("1.0")).await;
    let (some_process, some) = start_producer(dir, None, &exporting("0.01")).await;
    for traced in [&all, &some] {
        closed_loop(2_000, concurrency, wal_call(traced, "bench_kafka")).await;
    }
    tokio::time::sleep(JAEGER_SETTLE).await;
    let (all_cpu, some_cpu) = (
        Cpu::Process(all_process.0.id()),
        Cpu::Process(some_process.0.id()),
    );
    let (mut off_runs, mut all_runs, mut some_runs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let off = closed_loop(writes, concurrency, wal_call(client, "bench_kafka"));
        off_runs.push(charged(off_cpu, writes, off).await);
        let traced = closed_loop(writes, concurrency, wal_call(&some, "bench_kafka"));
        some_runs.push(charged(some_cpu, writes, traced).await);
        let traced = closed_loop(writes, concurrency, wal_call(&all, "bench_kafka"));
        all_runs.push(charged(all_cpu, writes, traced).await);
        // The next round does not share the machine with the export of this one's spans.
        tokio::time::sleep(JAEGER_SETTLE).await;
    }
    print_labeled(
        "Kafka, spans exported to Jaeger, every write sampled, against traces off (closed loop)",
        ("traces, 100% sampled", &all_runs),
        ("traces off", &off_runs),
    );
    print_labeled(
        "Kafka, spans exported to Jaeger, 1% of writes sampled, against traces off (closed loop)",
        ("traces, 1% sampled", &some_runs),
        ("traces off", &off_runs),
    );
}

/// Unary WriteToLog and the raw producer both paced at `share` of WriteToLog's maximum, `max`
/// writes per second (open loop).
async fn unary_paced(
    client: &[WriteAheadLogClient<Channel>],
    (raw_producer, raw_topic, (forwarder, forwarder_cpu)): Baselines<'_>,
    (max, share): (f64, f64),
    rounds: usize,
    (wal_cpu, metrics_port): (Cpu, u16),
) {
    let raw_cpu = Cpu::This;
    let rate = max * share;
    let paced = (rate * 5.0) as usize; // five seconds at that rate
    let (mut wal_paced, mut raw_paced, mut forwarded_paced) = (Vec::new(), Vec::new(), Vec::new());
    let before = write_buckets(metrics_port).await;
    // Each round's readings of the producer's histogram, around its WriteToLog writes alone.
    let mut own_rounds = Vec::new();
    for _ in 0..rounds {
        let raw = open_loop(paced, rate, kafka_call(raw_producer, raw_topic));
        raw_paced.push(charged(raw_cpu, paced, raw).await);
        let forwarded = open_loop(paced, rate, wal_call(forwarder, ""));
        forwarded_paced.push(charged(forwarder_cpu, paced, forwarded).await);
        let round_before = write_buckets(metrics_port).await;
        let wal = open_loop(paced, rate, wal_call(client, "bench_kafka"));
        wal_paced.push(charged(wal_cpu, paced, wal).await);
        own_rounds.push((round_before, write_buckets(metrics_port).await));
    }
    let after = write_buckets(metrics_port).await;
    let at = match share {
        0.5 => "half".to_owned(),
        _ => format!("{:.0}%", share * 100.0),
    };
    let title =
        format!("Kafka, latency at {at} of WriteToLog's maximum ({rate:.0} writes/s, open loop)");
    print_pair(&title, &wal_paced, &raw_paced, "raw rdkafka");
    let title = format!("{title}, against the hand-built forwarder");
    print_pair(&title, &wal_paced, &forwarded_paced, FORWARDER);
    // Where a WriteToLog's tail is spent: the producer's own histogram times a write from the
    // moment its handler starts to its answer (the entry, the enqueue, the broker's
    // acknowledgement); decoding, the wait for a runtime thread and HTTP/2 are outside it.
    let shares = match (&before, &after) {
        (Some(before), Some(after)) => [0.005, 0.01, 0.02]
            .iter()
            .map(|bound| share_within(before, after, *bound))
            .collect::<Option<Vec<f64>>>(),
        _ => None,
    };
    match shares.as_deref() {
        Some([five, ten, twenty]) => println!(
            "  the producer's own time per write (wal_producer_write_seconds, from its handler's start to its answer), these rounds: {:.2}% within 5 ms, {:.2}% within 10 ms, {:.2}% within 20 ms",
            five * 100.0,
            ten * 100.0,
            twenty * 100.0
        ),
        _ => println!(
            "  the producer's own time per write: wal_producer_write_seconds for bench_kafka (buckets 5, 10 and 20 ms) was not found on its metrics endpoint"
        ),
    }
    // Each round's p99 beside the producer's own: what the producer's handler does not hold is
    // the HTTP/2 hop, decoding, and the wait for a runtime thread (the wait µs/write column).
    // The rounds one by one, as a pooled histogram is the worst round's.
    let between = |readings: &(Option<Buckets>, Option<Buckets>), quantile| {
        let (Some(before), Some(after)) = readings else {
            return "unknown".to_owned();
        };
        quantile_between(before, after, quantile).map_or("unknown".to_owned(), |(low, high)| {
            format!("{}-{}", low * 1e3, high * 1e3)
        })
    };
    let rounds: Vec<String> = wal_paced
        .iter()
        .zip(&own_rounds)
        .map(|(run, own)| {
            format!(
                "{:.1} ({}, {})",
                run.p(0.99),
                between(own, 0.5),
                between(own, 0.99)
            )
        })
        .collect();
    println!(
        "  rounds (WriteToLog's p99 ms; in brackets the producer's own p50 and p99, the histogram's buckets that hold them, ms): {}",
        rounds.join("  ")
    );
}

/// A histogram as read off a metrics endpoint: each bucket's upper bound in seconds and its
/// cumulative count.
type Buckets = Vec<(f64, f64)>;

/// The producer's write-time histogram for `bench_kafka`'s TRUE answers, read from its metrics
/// endpoint: each bucket's upper bound in seconds and its cumulative count. `None` when the
/// endpoint does not answer: the figure is a reading aid, and the latencies stand without it.
async fn write_buckets(metrics_port: u16) -> Option<Buckets> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", metrics_port))
        .await
        .ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await.ok()?;
    let buckets = text
        .lines()
        .filter(|line| {
            line.starts_with("wal_producer_write_seconds_bucket{")
                && line.contains("namespace=\"bench_kafka\"")
                && line.contains("outcome=\"true\"")
        })
        .filter_map(|line| {
            let le = line.split("le=\"").nth(1)?.split('"').next()?;
            let count = line.rsplit(' ').next()?.parse().ok()?;
            Some((le.parse().ok()?, count))
        })
        .collect();
    Some(buckets)
}

/// Of the writes counted between two readings of the histogram, the share within `bound`
/// seconds (a bucket's upper bound); `None` when the bound or the +Inf bucket is missing, or no
/// write was counted.
fn share_within(before: &[(f64, f64)], after: &[(f64, f64)], bound: f64) -> Option<f64> {
    let all = counted_within(before, after, f64::INFINITY)?;
    let within = counted_within(before, after, bound)?;
    (all > 0.0).then(|| within / all)
}

/// The writes counted within `bound` seconds between two readings; `None` when the bound is not
/// one of the histogram's.
fn counted_within(before: &[(f64, f64)], after: &[(f64, f64)], bound: f64) -> Option<f64> {
    let count = |buckets: &[(f64, f64)], le: f64| {
        buckets
            .iter()
            // The +Inf bucket compares equal only with ==: inf - inf is NaN.
            .find(|(b, _)| *b == le || (*b - le).abs() < 1e-9)
            .map(|(_, c)| *c)
    };
    Some(count(after, bound)? - count(before, bound).unwrap_or(0.0))
}

/// The two bucket bounds (seconds) between which the `quantile` of the writes counted between
/// two readings lies: a histogram knows no finer. `None` when no write was counted.
fn quantile_between(
    before: &[(f64, f64)],
    after: &[(f64, f64)],
    quantile: f64,
) -> Option<(f64, f64)> {
    let all = counted_within(before, after, f64::INFINITY)?;
    if all <= 0.0 {
        return None;
    }
    let mut bounds: Vec<f64> = after.iter().map(|(bound, _)| *bound).collect();
    bounds.sort_by(f64::total_cmp);
    let mut lower = 0.0;
    for bound in bounds {
        if counted_within(before, after, bound)? >= quantile * all {
            return Some((lower, bound));
        }
        lower = bound;
    }
    None
}
