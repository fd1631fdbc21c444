//! slow target: the upstream answers each request after `latency`, so the consumer (at most its
//! in-flight bound of requests at once per queue) falls behind the writers. Lag must grow and then
//! drain once the writers stop, nothing may be lost, and the consumer's memory must stay bounded
//! (its peak RSS is printed: early in the run and at the end).

use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_testkit::{Upstream, namespace_json};

use crate::load::{Answer, Applied, Load, namespace_dir, peak_mib, settle};
use crate::processes::Processes;
use crate::table::Row;

pub async fn drill(latency: Duration, length: Duration, writers: usize) -> Row {
    let backend = Backend::Kafka;
    let upstream = Upstream::serve("127.0.0.1:0", |_| 200, latency).await;
    let applied = Applied::Http(upstream);
    let text = namespace_json(backend, 2, &applied.target(), "");
    let name = wal_namespaces::parse(&text, "drill").unwrap().name;
    let processes = Processes::start(namespace_dir(&[(&name, &text)])).await;
    let load = Load::start(
        &name,
        "slow",
        writers,
        Duration::from_millis(5),
        &processes.channel,
        applied.payload(),
    );

    let Applied::Http(upstream) = &applied else {
        unreachable!("made above")
    };
    let lag = |answers: &crate::load::Answers| {
        answers.count(Answer::True).saturating_sub(upstream.count())
    };
    let started = Instant::now();
    let mut max_lag = 0;
    let mut rss_early = 0.0;
    while started.elapsed() < length {
        tokio::time::sleep(Duration::from_secs(1)).await;
        max_lag = max_lag.max(lag(&load.answers));
        if rss_early == 0.0 && started.elapsed() >= Duration::from_secs(5) {
            rss_early = peak_mib(processes.consumer_pid());
        }
    }
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
    if max_lag == 0 {
        broken.push("the target was never behind: the drill did not slow it enough".to_owned());
    }
    Row {
        drill: "slow target",
        backend,
        faults: format!(
            "every request answered after {} ms, for {} s",
            latency.as_millis(),
            length.as_secs()
        ),
        outcome,
        notes: format!(
            "lag grew to {max_lag} entries and drained; consumer peak RSS {rss_early:.0} MiB after 5 s, {rss_end:.0} MiB at the end"
        ),
        broken,
    }
}
