//! `walctl txn`: two-phase writes from the shell. `show` reads where a transaction stands from
//! the namespace's staging tables; `write` stages a file of items and commits them.

mod show;
mod write;

use wal_core::process::{BrokerFlags, CqlFlags};

use crate::Failure;
use crate::output::Format;

#[derive(Debug, clap::Args)]
pub struct Txn {
    #[command(flatten)]
    brokers: BrokerFlags,
    #[command(flatten)]
    cql: CqlFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// A transaction's state (open, committing, committed, applied, dead_lettered, aborted,
    /// expired), its staged items, the count its commit named and how far its apply got.
    Show {
        namespace: String,
        transaction_id: String,
    },
    /// Stage the items of a JSON file and commit them as one transaction; prints the commit's
    /// durable answer (TRUE, FALSE or UNKNOWN) and exits as `walctl write` does (5 FALSE,
    /// 6 UNKNOWN: run it again, the transaction id makes that safe).
    Write(write::TxnWrite),
}

pub async fn run(command: Txn, control_plane: &str, format: Format) -> Result<(), Failure> {
    match command.command {
        Command::Show {
            namespace,
            transaction_id,
        } => {
            show::run(
                (&command.brokers, &command.cql),
                control_plane,
                &namespace,
                &transaction_id,
                format,
            )
            .await
        }
        Command::Write(write) => write::run(write, format).await,
    }
}
