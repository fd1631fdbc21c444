//! `walctl`: the operator's command line for the platform. The binary is `main.rs`; this library
//! holds the commands, and exports the parsers of the files walctl reads (checkpoints, exclude
//! files) for the fuzz targets.
//!
//! Exit codes scripts can rely on are [`Exit`]'s: 0 done; 1 the control plane, the producer or a
//! broker failed or could not be reached, or the producer shed the write (retrying may help); 2
//! bad arguments or a bad file (fix the command); 3 refused by the control plane's rules (the
//! message says which); 4 not found; for `write`, 5 FALSE (not stored: retry freely) and 6
//! UNKNOWN (retry with the same --idempotency-id); 7 not allowed (the caller's principal lacks
//! the grant, or its certificate maps to no principal).

mod breakers;
mod cancel;
mod checkpoint;
mod clusters;
mod destinations;
mod dlq;
mod durable;
mod entry;
mod failure;
mod index;
mod lag;
mod namespace;
mod operations;
mod output;
mod producer;
mod replay;
mod replication;
mod time;
mod txn;
mod write;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use crate::failure::{Exit, Failure};
use crate::output::Format;

pub use checkpoint::Checkpoint;
pub use replay::parse_ids;

#[derive(Debug, Parser)]
#[command(
    name = "walctl",
    version,
    about = "Operate the write-ahead-log platform"
)]
pub struct Cli {
    /// The control plane's gRPC address.
    #[arg(
        long,
        global = true,
        env = "WAL_CONTROL_PLANE",
        default_value = "http://127.0.0.1:50060"
    )]
    control_plane: String,

    /// The CA certificate (PEM) a TLS control plane's certificate chains to (with an https://
    /// --control-plane).
    #[arg(long, global = true, env = "WAL_CONTROL_PLANE_CA")]
    control_plane_ca: Option<std::path::PathBuf>,

    /// The client certificate (PEM) to present to a control plane that requires one (mTLS).
    #[arg(
        long,
        global = true,
        env = "WAL_CONTROL_PLANE_CERT",
        requires = "control_plane_key",
        requires = "control_plane_ca"
    )]
    control_plane_cert: Option<std::path::PathBuf>,

    /// The private key (PEM) of --control-plane-cert.
    #[arg(
        long,
        global = true,
        env = "WAL_CONTROL_PLANE_KEY",
        requires = "control_plane_cert"
    )]
    control_plane_key: Option<std::path::PathBuf>,

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
    /// Check a cluster map (and that namespace files name only what it has); print its names.
    Clusters(clusters::Clusters),
    /// Cross-region replication: how far each destination region trails, and any gap.
    Replication(replication::Replication),
    /// Two-phase writes: where a transaction stands (state, staged items, apply progress).
    Txn(txn::Txn),
    /// Secondary indices kept by index destinations: rebuild one from its base table.
    Index(index::Index),
    /// A namespace's destinations (its target and each store): how far each trails.
    Destinations(destinations::Destinations),
    /// What each destination did with one entry: applied, dead_lettered or pending (from the
    /// receipts of a namespace with durable_storage.receipts, or of a write that awaited them).
    Entry(entry::Entry),
    /// Pause delivery of a namespace or one destination: consumers hold its entries in place
    /// (no attempt used) until `walctl resume`. Writes are still accepted. Audited.
    Pause(operations::Pause),
    /// End a pause: the held entries are delivered. Audited.
    Resume(operations::Resume),
    /// The pauses in force: what, by whom, since when, why.
    Pauses(operations::Pauses),
    /// Who did what to which namespace through the control plane, and how it ended.
    Audit(operations::Audit),
    /// Cancel one entry by its id (a delayed delete that must not happen): consumers skip it
    /// wherever it is not delivered yet. Says where it came too late, from the entry's receipts
    /// (durable_storage.receipts); without them, it is cancelled if not yet delivered. Audited.
    Cancel(cancel::Cancel),
    /// The cancellations in force: which entry, by whom, when, why, and until when.
    Cancellations(cancel::Cancellations),
}

/// Runs the command line's command; the exit code says how it ended.
pub async fn run(cli: Cli) -> ExitCode {
    if let Some(ca) = cli.control_plane_ca.clone() {
        namespace::use_tls(wal_namespaces::feed::ClientTls {
            ca,
            cert: cli.control_plane_cert.clone(),
            key: cli.control_plane_key.clone(),
        });
    }
    let result = match cli.command {
        Command::Namespace(command) => {
            namespace::run(command, &cli.control_plane, cli.output).await
        }
        Command::Write(write) => write::run(write, cli.output).await,
        Command::Dlq(command) => dlq::run(command, &cli.control_plane, cli.output).await,
        Command::Replay(replay) => replay::run(*replay, &cli.control_plane, cli.output).await,
        Command::Breakers(command) => breakers::run(command, cli.output).await,
        Command::Clusters(command) => clusters::run(command, cli.output),
        Command::Replication(command) => {
            replication::run(command, &cli.control_plane, cli.output).await
        }
        Command::Txn(command) => txn::run(command, &cli.control_plane, cli.output).await,
        Command::Index(command) => index::run(command, &cli.control_plane, cli.output).await,
        Command::Destinations(command) => {
            destinations::run(command, &cli.control_plane, cli.output).await
        }
        Command::Entry(command) => entry::run(command, &cli.control_plane, cli.output).await,
        Command::Pause(args) => operations::pause(args, &cli.control_plane, cli.output).await,
        Command::Resume(args) => operations::resume(args, &cli.control_plane, cli.output).await,
        Command::Pauses(args) => operations::pauses(args, &cli.control_plane, cli.output).await,
        Command::Audit(args) => operations::audit(args, &cli.control_plane, cli.output).await,
        Command::Cancel(args) => cancel::cancel(args, &cli.control_plane, cli.output).await,
        Command::Cancellations(args) => {
            cancel::cancellations(args, &cli.control_plane, cli.output).await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if !failure.message.is_empty() {
                eprintln!("walctl: {}", failure.message);
            }
            ExitCode::from(failure.exit as u8)
        }
    }
}
