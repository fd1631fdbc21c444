//! `wal-control-plane`: serves the namespace registry.

use std::process::ExitCode;

use clap::Parser;
use wal_control_plane::ControlPlane;
use wal_control_plane::options::ControlPlaneOptions;
use wal_runtime::process;

#[tokio::main]
async fn main() -> ExitCode {
    let options = ControlPlaneOptions::parse();
    let format = options.log.log_format;
    let serving = async { process::exit_code("wal-control-plane", run(options).await) };
    process::traced("wal-control-plane", format, serving).await
}

async fn run(options: ControlPlaneOptions) -> anyhow::Result<()> {
    let control_plane = ControlPlane::start(&options.settings()?).await?;
    let listener = process::listen(options.listen).await?;
    // The engine only: a PostgreSQL URL may carry a password.
    let store = options.store.split("://").next().unwrap_or_default();
    tracing::info!(listen = %options.listen, store, "wal-control-plane ready");
    control_plane
        .serve(listener, process::shutdown_signal())
        .await?;
    Ok(())
}
