//! `wal-producer`: serves WriteToLog for the namespaces in a folder of configs.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;
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
    let namespaces = match wal_namespaces::load_dir(&options.namespaces) {
        Ok(namespaces) => namespaces,
        Err(errors) => {
            eprintln!(
                "wal-producer: the namespace configs in {} are invalid:\n{errors}",
                options.namespaces.display()
            );
            return ExitCode::from(2);
        }
    };
    match run(options, namespaces).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("wal-producer: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(
    options: ProducerOptions,
    namespaces: Vec<wal_namespaces::Namespace>,
) -> anyhow::Result<()> {
    PrometheusBuilder::new()
        .with_http_listener(options.metrics_listen)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), metrics::WRITE_BUCKETS)?
        .install()
        .with_context(|| format!("serving metrics on {}", options.metrics_listen))?;
    metrics::describe();

    let names: Vec<String> = namespaces.iter().map(|ns| ns.name.clone()).collect();
    let producer = Producer::start(&options, namespaces).await?;
    let listener = TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("listening on {}", options.listen))?;
    tracing::info!(
        listen = %options.listen,
        metrics = %options.metrics_listen,
        namespaces = ?names,
        "wal-producer ready"
    );
    producer
        .serve(listener, wal_core::process::shutdown_signal())
        .await
}
