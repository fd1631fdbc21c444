//! The client libraries (clients/) against raw rdkafka: the Rust library in this process, closed
//! loop with many writers and paced at a fixed rate; the Go, Java and Python libraries through
//! their own bench programs (`clients/<language>/bench`), paced at the same rate against the same
//! producer, in the same run. Each other library's program prints its writes/s and latency
//! percentiles; it must have been built (`clients/<language>/build`).

use std::process::Command;

use rdkafka::producer::FutureProducer;

use super::{
    Call, Cpu, PAYLOAD_BYTES, ProducerProcess, Run, charged, closed_loop, kafka_call, open_loop,
    print_pair, summarize,
};

/// The Rust client library with `concurrency` writers, each writing and awaiting its answer as a
/// service would, its batcher gathering what they write at once, against raw rdkafka with as many
/// in flight, in alternating rounds.
pub async fn client_library(
    producer: &ProducerProcess,
    raw_producer: &FutureProducer,
    raw_topic: &str,
    writes: usize,
    concurrency: usize,
    rounds: usize,
) {
    // BENCH_CLIENT_IN_FLIGHT: the batch calls the library keeps in flight (1, its default).
    let mut settings = wal_client::Settings::new([producer.2.clone()]);
    if let Some(batching) = settings.batching.as_mut() {
        batching.max_in_flight = std::env::var("BENCH_CLIENT_IN_FLIGHT")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
    }
    let in_flight = settings.batching.map_or(0, |b| b.max_in_flight);
    let library = wal_client::Client::new(settings).expect("a client of the producer");
    closed_loop(2_000, concurrency, library_call(&library, "bench_kafka")).await;
    let (mut library_runs, mut raw_runs) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let raw = closed_loop(writes, concurrency, kafka_call(raw_producer, raw_topic));
        raw_runs.push(charged(Cpu::This, writes, raw).await);
        let written = closed_loop(writes, concurrency, library_call(&library, "bench_kafka"));
        library_runs.push(charged(Cpu::Both(producer.0.id()), writes, written).await);
    }
    print_pair(
        &format!(
            "Kafka, the Rust client library (batching on, {in_flight} batch call(s) in flight) with {concurrency} writers (CPU: producer + library)"
        ),
        &library_runs,
        &raw_runs,
        "raw rdkafka",
    );
}

/// One write through the client library, which must answer TRUE at its first attempt's pace.
fn library_call(
    library: &wal_client::Client,
    namespace: &str,
) -> impl Fn(usize) -> Call + Send + Sync + 'static {
    let (library, namespace) = (library.clone(), namespace.to_owned());
    move |i| {
        let library = library.clone();
        let write = wal_client::Write::new(namespace.as_str(), vec![b'w'; PAYLOAD_BYTES])
            .key(format!("key-{i}"));
        Box::pin(async move {
            let written = library.write(write).await.expect("not refused");
            assert_eq!(
                written.outcome,
                wal_client::Outcome::True,
                "{}",
                written.message
            );
        })
    }
}

/// The libraries paced at `rate` writes per second for `seconds`, one after another in each of
/// `rounds` rounds, with raw rdkafka at the same rate: writes/s, p50 and p99, medians of the
/// rounds.
pub async fn paced(
    producer: &ProducerProcess,
    raw_producer: &FutureProducer,
    raw_topic: &str,
    rate: f64,
    seconds: f64,
    rounds: usize,
) {
    let count = (rate * seconds) as usize;
    let library = wal_client::Client::new(wal_client::Settings::new([producer.2.clone()]))
        .expect("a client of the producer");
    let mut rows: Vec<(String, Vec<Figures>)> =
        ["raw rdkafka", "Rust (in process)", "Go", "Java", "Python"]
            .iter()
            .map(|name| ((*name).to_owned(), Vec::new()))
            .collect();
    for _ in 0..rounds {
        let raw = charged(
            Cpu::This,
            count,
            open_loop(count, rate, kafka_call(raw_producer, raw_topic)),
        )
        .await;
        rows[0].1.push(figures(&raw));
        let rust = charged(
            Cpu::Both(producer.0.id()),
            count,
            open_loop(count, rate, library_call(&library, "bench_kafka")),
        )
        .await;
        rows[1].1.push(figures(&rust));
        for (row, language) in rows[2..].iter_mut().zip(["go", "java", "python"]) {
            match external(language, &producer.2, rate, seconds) {
                Ok(figures) => row.1.push(figures),
                Err(why) => println!("  {language}: {why}"),
            }
        }
    }
    println!(
        "\nThe client libraries paced at {rate:.0} writes/s for {seconds:.0} s each, against one producer (open loop; medians of {rounds} rounds)"
    );
    println!(
        "  {:<24} {:>12} {:>10} {:>10}",
        "", "writes/s", "p50 ms", "p99 ms"
    );
    for (name, runs) in &rows {
        if runs.is_empty() {
            continue;
        }
        let median = |pick: fn(&Figures) -> f64| {
            let mut values: Vec<f64> = runs.iter().map(pick).collect();
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        println!(
            "  {:<24} {:>12.0} {:>10.2} {:>10.2}",
            name,
            median(|r| r.0),
            median(|r| r.1),
            median(|r| r.2)
        );
    }
}

/// Writes/s, p50 ms and p99 ms of one paced run.
type Figures = (f64, f64, f64);

fn figures(run: &Run) -> Figures {
    let (rate, p50, p99, ..) = summarize(std::slice::from_ref(run));
    (rate, p50, p99)
}

/// Runs `clients/<language>/bench` against the producer and reads its writes/s, p50 and p99.
fn external(language: &str, address: &str, rate: f64, seconds: f64) -> Result<Figures, String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../clients")
        .join(language)
        .join("bench");
    let (rate, payload) = (format!("{rate:.0}"), PAYLOAD_BYTES.to_string());
    let mut command = Command::new(&script);
    match language {
        "go" => command
            .args([
                "-namespace",
                "bench_kafka",
                "-rate",
                &rate,
                "-size",
                &payload,
            ])
            .args([
                "-duration",
                &format!("{}ms", (seconds * 1000.0) as u64),
                address,
            ]),
        "java" => command
            .args([
                address,
                "bench_kafka",
                "--rate",
                &rate,
                "--payload-bytes",
                &payload,
            ])
            .args(["--seconds", &seconds.to_string()]),
        _ => command
            .args([
                "--namespace",
                "bench_kafka",
                "--rate",
                &rate,
                "--payload-bytes",
                &payload,
            ])
            .args(["--seconds", &seconds.to_string(), address]),
    };
    let output = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}; built with clients/{language}/build?): {}{}",
            script.display(),
            output.status,
            text,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    parse(&text).ok_or_else(|| format!("cannot read writes/s and p50/p99 in: {text}"))
}

/// The writes/s (the number before the first `writes/s`, a word such as TRUE allowed between)
/// and the p50 and p99 (in ms, from `12.3 ms`, `12.3ms`, `850µs` or `1.2s`) a bench printed.
fn parse(text: &str) -> Option<Figures> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let at = words.iter().position(|w| w.starts_with("writes/s"))?;
    let rate = words[..at]
        .iter()
        .rev()
        .take(2)
        .find_map(|w| w.parse::<f64>().ok())?;
    let millis = |key: &str| {
        let at = words.iter().position(|w| *w == key)?;
        let value = words.get(at + 1)?.trim_end_matches(',');
        let unit_follows = words.get(at + 2).is_some_and(|w| w.starts_with("ms"));
        if unit_follows {
            return value.parse::<f64>().ok();
        }
        [
            ("ms", 1.0),
            ("µs", 0.001),
            ("us", 0.001),
            ("ns", 1e-6),
            ("s", 1000.0),
        ]
        .iter()
        .find_map(|(unit, scale)| {
            value
                .strip_suffix(unit)?
                .parse::<f64>()
                .ok()
                .map(|v| v * scale)
        })
    };
    Some((rate, millis("p50")?, millis("p99")?))
}
