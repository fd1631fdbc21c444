//! `walctl`: the operator's command line for the platform (see the library for the commands).

use std::process::ExitCode;

use clap::Parser as _;

/// mimalloc rather than the system allocator: a replay allocates each record on the Kafka
/// reading thread and frees it on a runtime thread, and glibc's arenas spent about a fifth of
/// walctl's time there (perf, replay_to_cql).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    walctl::run(walctl::Cli::parse()).await
}
