//! `wal-producer`: serves WriteToLog for the namespaces in a folder of configs or a control
//! plane, and follows their changes while it runs.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;
use wal_namespaces::feed::{Feed, FeedError};
use wal_producer::{Producer, ProducerOptions, metrics};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("info,scylla=warn")),
        )
        .init();
    let options = ProducerOptions::parse();
    let feed = match Feed::open(options.source()).await {
        Ok(feed) => feed,
        Err(error) => {
            eprintln!("wal-producer: {}: {error}", options.source());
            return ExitCode::from(match error {
                FeedError::Invalid(_) => 2,
                FeedError::Unreachable(_) => 1,
            });
        }
    };
    match run(options, feed).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("wal-producer: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(options: ProducerOptions, feed: Feed) -> anyhow::Result<()> {
    PrometheusBuilder::new()
        .with_http_listener(options.metrics_listen)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), metrics::WRITE_BUCKETS)?
        .install()
        .with_context(|| format!("serving metrics on {}", options.metrics_listen))?;
    metrics::describe();

    let producer = Producer::start(&options, feed.namespaces().to_vec()).await?;
    let listener = TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("listening on {}", options.listen))?;
    tracing::info!(
        listen = %options.listen,
        metrics = %options.metrics_listen,
        namespaces = ?producer.registry().names(),
        source = %feed.source(),
        "wal-producer ready"
    );
    let shutdown = tokio_util::sync::CancellationToken::new();
    let following = tokio::spawn(producer.live().follow(feed, shutdown.clone()));
    let served = producer
        .serve(listener, wal_core::process::shutdown_signal())
        .await;
    shutdown.cancel();
    let _ = following.await;
    served
}
