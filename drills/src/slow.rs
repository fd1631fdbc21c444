//! slow target: the upstream answers each request after `latency`, so the consumer (at most its
//! in-flight bound of requests at once per queue) falls behind the writers. Lag must grow and then
//! drain once the writers stop, nothing may be lost, and the consumer's memory must stay bounded
//! (its peak RSS is printed: early in the run and at the end).

use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_testkit::Upstream;

use crate::load::{Answer, Applied, peak_mib, settle, start_paced};
use crate::table::Row;

/// How the drill loads and bounds the consumer: `in_flight` entries a queue at once (the consumer's
/// bound), `writers` writers each waiting `pace` after each answer.
pub struct Shape {
    pub in_flight: u64,
    pub writers: usize,
    pub pace: Duration,
}

pub async fn drill(latency: Duration, shape: Shape, length: Duration) -> Row {
    let Shape {
        in_flight,
        writers,
        pace,
    } = shape;
    let backend = Backend::Kafka;
    let upstream = Upstream::serve("127.0.0.1:0", |_| 200, latency).await;
    let applied = Applied::Http(upstream);
    let env = vec![("WAL_CONSUMER_MAX_IN_FLIGHT", in_flight.to_string())];
    let (processes, load) = start_paced(backend, &applied, env, "slow", writers, pace).await;

    let Applied::Http(upstream) = &applied else {
        unreachable!("made above")
    };
    let lag = |answers: &crate::load::Answers| {
        answers.count(Answer::True).saturating_sub(upstream.count())
    };
    let started = Instant::now();
    let mut max_lag = 0;
    let mut rss_early = 0.0;
    // Requests in flight count as lag too (the upstream records each once answered): the lag
    // grows only if it is larger at the end than after the first 5 s.
    let mut early_lag = None;
    while started.elapsed() < length {
        tokio::time::sleep(Duration::from_secs(1)).await;
        max_lag = max_lag.max(lag(&load.answers));
        if early_lag.is_none() && started.elapsed() >= Duration::from_secs(5) {
            early_lag = Some(lag(&load.answers));
            rss_early = peak_mib(processes.consumer_pid());
        }
    }
    let end_lag = lag(&load.answers);
    let stopped = Instant::now();
    let answers = load.stop().await;
    println!(
        "  slow target: writers stopped with {} entries not yet applied",
        lag(&answers)
    );
    let outcome = settle(&answers, &applied, stopped).await;
    let rss_end = peak_mib(processes.consumer_pid());
    processes.stop();
    let mut broken = Vec::new();
    let early_lag = early_lag.unwrap_or(0);
    if end_lag <= early_lag {
        broken.push(format!(
            "the lag did not grow ({early_lag} entries after 5 s, {end_lag} at the end): the drill did not slow the target enough"
        ));
    }
    Row {
        drill: "slow target",
        backend,
        faults: format!(
            "every request answered after {} ms, for {} s, {in_flight} in flight a queue",
            latency.as_millis(),
            length.as_secs()
        ),
        outcome,
        notes: format!(
            "lag {early_lag} entries after 5 s, {max_lag} at most, then drained; consumer peak RSS {rss_early:.0} MiB after 5 s, {rss_end:.0} MiB at the end (librdkafka's read-ahead, 64 MiB a queue, bounds it)"
        ),
        broken,
    }
}
