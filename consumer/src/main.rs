//! `wal-consumer`: delivers the entries of the namespaces in a folder of configs or a control
//! plane, and follows their changes while it runs.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;
use wal_consumer::{Consumer, ConsumerOptions, metrics};
use wal_namespaces::feed::{Feed, FeedError};

/// The name the health service reports under.
const HEALTH_SERVICE: &str = "wal.consumer";

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("info,scylla=warn")),
        )
        .init();
    let options = ConsumerOptions::parse();
    let feed = match Feed::open(options.source()).await {
        Ok(feed) => feed,
        Err(error) => {
            eprintln!("wal-consumer: {}: {error}", options.source());
            return ExitCode::from(match error {
                FeedError::Invalid(_) => 2,
                FeedError::Unreachable(_) => 1,
            });
        }
    };
    match run(options, feed).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("wal-consumer: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(options: ConsumerOptions, feed: Feed) -> anyhow::Result<()> {
    PrometheusBuilder::new()
        .with_http_listener(options.metrics_listen)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), metrics::BUCKETS)?
        .install()
        .with_context(|| format!("serving metrics on {}", options.metrics_listen))?;
    metrics::describe();

    let consumer = Consumer::start(&options, feed.namespaces().to_vec()).await?;
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status(HEALTH_SERVICE, tonic_health::ServingStatus::Serving)
        .await;
    let listener = tokio::net::TcpListener::bind(options.health_listen)
        .await
        .with_context(|| format!("serving health on {}", options.health_listen))?;
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let health_server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(health_service)
            .serve_with_incoming(incoming),
    );
    tracing::info!(queues = ?consumer.queues(), source = %feed.source(), metrics = %options.metrics_listen, health = %options.health_listen, "wal-consumer ready");

    let shutdown = CancellationToken::new();
    let signal = shutdown.clone();
    tokio::spawn(async move {
        wal_core::process::shutdown_signal().await;
        tracing::info!("shutting down: finishing entries in progress");
        signal.cancel();
    });
    let stopping = shutdown.clone();
    let reporter = health.clone();
    tokio::spawn(async move {
        stopping.cancelled().await;
        reporter
            .set_service_status(HEALTH_SERVICE, tonic_health::ServingStatus::NotServing)
            .await;
    });
    consumer.run_following(Some(feed), shutdown).await;
    health_server.abort();
    tracing::info!("wal-consumer stopped");
    Ok(())
}
