//! `wal-writer`: applies the mutations other regions replicate to this one.

use std::process::ExitCode;

use clap::Parser;
use wal_runtime::process;
use wal_writer::{WriterOptions, metrics, service};

/// mimalloc rather than the system allocator: an entry is received on rdkafka's thread and
/// freed on a runtime thread, and glibc's malloc and free took about a tenth of the replication
/// path's time (perf, the replicate bench); with mimalloc its throughput went from 0.55-0.72 to
/// 0.78-0.97 of the hand-written baseline (which ran on mimalloc too).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let options = WriterOptions::parse();
    let format = options.log.log_format;
    let serving = async { process::exit_code("wal-writer", run(options).await) };
    process::traced("wal-writer", format, serving).await
}

async fn run(options: WriterOptions) -> anyhow::Result<()> {
    process::serve_metrics(options.metrics_listen, metrics::BUCKETS)?;
    metrics::describe();
    let settings = options.settings()?;
    let listener = process::listen(options.listen).await?;
    tracing::info!(listen = %options.listen, region = %options.region, metrics = %options.metrics_listen, "wal-writer ready");
    service::serve(settings, listener, process::shutdown_signal()).await?;
    tracing::info!("wal-writer stopped");
    Ok(())
}
