//! `walctl`: the operator's command line for the platform.
//!
//! Exit codes scripts can rely on:
//! 0 done; 1 the control plane, the producer or a broker failed or could not be reached, or the
//! producer shed the write (retrying may help); 2 bad arguments or a bad file (fix the command);
//! 3 refused by the control plane's rules (the message says which); 4 not found; for `write`,
//! 5 FALSE (not stored: retry freely) and 6 UNKNOWN (retry with the same --idempotency-id).

mod breakers;
mod checkpoint;
mod dlq;
mod namespace;
mod output;
mod replay;
mod time;
mod write;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tonic::Code;

use crate::output::Format;

#[derive(Debug, Parser)]
#[command(
    name = "walctl",
    version,
    about = "Operate the write-ahead-log platform"
)]
struct Cli {
    /// The control plane's gRPC address.
    #[arg(
        long,
        global = true,
        env = "WAL_CONTROL_PLANE",
        default_value = "http://127.0.0.1:50060"
    )]
    control_plane: String,

    /// How results are printed: tables for people, JSON for scripts.
    #[arg(long, short, global = true, value_enum, default_value_t = Format::Table)]
    output: Format,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Namespace configs: apply, inspect, compare and their history.
    #[command(subcommand)]
    Namespace(namespace::Command),
    /// Send one WriteToLog and print the durable answer (TRUE, FALSE or UNKNOWN).
    Write(write::Write),
    /// Dead letters: list them, show one, redrive them to their queue.
    Dlq(dlq::Dlq),
    /// Re-apply a namespace's mutations of a time range, leaving out the offending ones.
    Replay(Box<replay::Replay>),
    /// Targets the consumers hold entries for because they are unavailable (open breakers).
    Breakers(breakers::Breakers),
}

/// A failure, with the exit code that classifies it.
#[derive(Debug)]
pub struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: 2,
            message: message.into(),
        }
    }

    /// What the control plane answered, classified for the exit code.
    pub fn from_status(status: &tonic::Status, doing: &str) -> Self {
        let code = match status.code() {
            Code::InvalidArgument => 2,
            Code::FailedPrecondition | Code::Aborted => 3,
            Code::NotFound => 4,
            _ => 1,
        };
        Self {
            code,
            message: format!("{doing}: {}", status.message()),
        }
    }

    /// An outcome the output already described: only the exit code is left to give.
    pub fn quiet(code: u8) -> Self {
        Self {
            code,
            message: String::new(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            code: 4,
            message: message.into(),
        }
    }

    /// A broker failed or could not be reached: retrying may help.
    pub fn broker(message: impl Into<String>) -> Self {
        Self {
            code: 1,
            message: message.into(),
        }
    }

    pub fn unreachable_producer(address: &str, error: impl std::fmt::Display) -> Self {
        Self {
            code: 1,
            message: format!(
                "cannot reach the producer at {address}: {error}. Is wal-producer running? Set --producer or WAL_PRODUCER to its address"
            ),
        }
    }

    pub fn unreachable(address: &str, error: impl std::fmt::Display) -> Self {
        Self {
            code: 1,
            message: format!(
                "cannot reach the control plane at {address}: {error}. Is wal-control-plane running? Set --control-plane or WAL_CONTROL_PLANE to its address"
            ),
        }
    }
}

/// mimalloc rather than the system allocator: a replay allocates each record on the Kafka
/// reading thread and frees it on a runtime thread, and glibc's arenas spent about a fifth of
/// walctl's time there (perf, replay_to_cql).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Namespace(command) => {
            namespace::run(command, &cli.control_plane, cli.output).await
        }
        Command::Write(write) => write::run(write, cli.output).await,
        Command::Dlq(command) => dlq::run(command, &cli.control_plane, cli.output).await,
        Command::Replay(replay) => replay::run(*replay, &cli.control_plane, cli.output).await,
        Command::Breakers(command) => breakers::run(command, cli.output).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if !failure.message.is_empty() {
                eprintln!("walctl: {}", failure.message);
            }
            ExitCode::from(failure.code)
        }
    }
}
