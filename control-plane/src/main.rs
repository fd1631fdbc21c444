//! `wal-control-plane`: serves the namespace registry.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use tokio::net::TcpListener;
use wal_control_plane::ControlPlane;
use wal_control_plane::options::ControlPlaneOptions;
use wal_runtime::process;

#[tokio::main]
async fn main() -> ExitCode {
    process::init_tracing(process::DEFAULT_LOG_FILTER);
    let options = ControlPlaneOptions::parse();
    match run(options).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("wal-control-plane: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(options: ControlPlaneOptions) -> anyhow::Result<()> {
    let control_plane = ControlPlane::start(&options.settings()?).await?;
    let listener = TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("listening on {}", options.listen))?;
    // The engine only: a PostgreSQL URL may carry a password.
    let store = options.store.split("://").next().unwrap_or_default();
    tracing::info!(listen = %options.listen, store, "wal-control-plane ready");
    control_plane
        .serve(listener, process::shutdown_signal())
        .await?;
    Ok(())
}
