//! slow target: the upstream answers each request after `latency`, so the consumer (at most its
//! in-flight bound of requests at once per queue) falls behind the writers. Lag must grow and then
//! drain once the writers stop, nothing may be lost, and the consumer's memory must stay bounded
//! (its peak RSS is printed: early in the run and at the end).

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_testkit::{ProducerProcess, Upstream, consumer_process, namespace_json};

use crate::load::{Answer, Applied, Load, namespace_dir, peak_mib, settle, stop_child};
use crate::table::Row;

pub async fn drill(latency: Duration, length: Duration, writers: usize) -> Row {
    let backend = Backend::Kafka;
    let upstream = Upstream::serve("127.0.0.1:0", |_| 200, latency).await;
    let applied = Applied::Http(upstream);
    let text = namespace_json(backend, 2, &applied.target(), "");
    let name = wal_namespaces::parse(&text, "drill").unwrap().name;
    let dir = namespace_dir(&[(&name, &text)]);
    let producer = ProducerProcess::start(&dir, Duration::from_secs(5)).await;
    let channel = Arc::new(RwLock::new(producer.channel.clone()));
    let mut consumer = consumer_process(&dir, "127.0.0.1:0");
    let load = Load::start(
        &name,
        "slow",
        writers,
        Duration::from_millis(5),
        &channel,
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
            rss_early = peak_mib(consumer.id());
        }
    }
    let stopped = Instant::now();
    let answers = load.stop().await;
    println!(
        "  slow target: writers stopped with {} entries not yet applied",
        lag(&answers)
    );
    let outcome = settle(&answers, &applied, stopped).await;
    let rss_end = peak_mib(consumer.id());
    drop(producer);
    stop_child(&mut consumer);
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
