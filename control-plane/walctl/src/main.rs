//! `walctl`: the operator's command line for the platform (see the library for the commands).

use std::process::ExitCode;

use clap::Parser as _;
use wal_runtime::process;

/// mimalloc rather than the system allocator: a replay allocates each record on the Kafka
/// reading thread and frees it on a runtime thread, and glibc's arenas spent about a fifth of
/// walctl's time there (perf, replay_to_cql).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = walctl::Cli::parse();
    // No log lines unless RUST_LOG asks (the output is the command's); spans over OTLP when
    // OpenTelemetry's environment asks, as the services do: a replay's and a redrive's, each
    // linked to the write it repeats.
    let traces = process::init_tracing(
        "walctl",
        "off,wal_control_plane=warn",
        process::LogFormat::Text,
    );
    let code = walctl::run(cli).await;
    traces.shutdown().await;
    code
}
