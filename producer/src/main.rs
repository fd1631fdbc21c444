//! `wal-producer`: serves WriteToLog for the namespaces in a folder of configs or a control
//! plane, and follows their changes while it runs.

use std::process::ExitCode;

use clap::Parser;
use wal_namespaces::feed::Feed;
use wal_producer::{Producer, ProducerOptions, metrics};
use wal_runtime::process;

/// mimalloc rather than the system allocator: a write's request, entry and record are allocated
/// on one runtime thread and freed on another (or on rdkafka's), and glibc's malloc and free took
/// 13% of the producer's CPU in the write path (perf, the write_to_log bench).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let options = ProducerOptions::parse();
    let format = options.log.log_format;
    let serving = process::run_on_feed("wal-producer", options.source(), |feed| run(options, feed));
    process::traced("wal-producer", format, serving).await
}

async fn run(options: ProducerOptions, feed: Feed) -> anyhow::Result<()> {
    process::serve_metrics(options.metrics_listen, metrics::WRITE_BUCKETS)?;
    metrics::describe();

    let settings = options.settings()?;
    let starting = Producer::start(&settings, feed.namespaces().to_vec());
    let producer = process::reporting_slow(
        "wal-producer",
        "connecting the namespaces' Kafka clusters, SQS queues and durable storage (CQL), and creating what is missing",
        starting,
    )
    .await?;
    let listener = process::listen(options.listen).await?;
    tracing::info!(
        listen = %options.listen,
        metrics = %options.metrics_listen,
        namespaces = ?producer.registry().names(),
        source = %feed.source(),
        "wal-producer ready"
    );
    let shutdown = tokio_util::sync::CancellationToken::new();
    let following = tokio::spawn(producer.live().follow(feed, shutdown.clone()));
    let served = producer.serve(listener, process::shutdown_signal()).await;
    shutdown.cancel();
    let _ = following.await;
    Ok(served?)
}
