//! `walctl txn`: two-phase writes from the shell. `show` and `list` read where transactions
//! stand from the namespace's staging tables; `write` stages a file of items and commits them.

mod list;
mod show;
mod write;

use wal_clusters::flags::{BrokerFlags, CqlFlags};
use wal_durable::{DurableStorage, TxnState, transaction_lifetime};
use wal_namespaces::Namespace;

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
    /// The transactions in one state: open (items may still be appended); applying (committed
    /// and not yet applied: `committing` until the broker acknowledged its marker, which a
    /// producer sends again when no commit call did, then `committed`, its marker waiting or
    /// being applied, or in the DLQ after its retries ran out, which `walctl dlq list` shows);
    /// dead-lettered (an item failed permanently; a redrive applies the rest). Applied,
    /// aborted and expired ones are not listed; `show` finds them while their staging lasts.
    List {
        namespace: String,
        #[arg(long, value_enum)]
        state: list::Listed,
        /// At most this many.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        limit: u32,
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
            let (namespace, storage) =
                staging((&command.brokers, &command.cql), control_plane, &namespace).await?;
            show::run(&namespace, &storage, &transaction_id, format).await
        }
        Command::List {
            namespace,
            state,
            limit,
        } => {
            let (namespace, storage) =
                staging((&command.brokers, &command.cql), control_plane, &namespace).await?;
            list::run(&namespace, &storage, state, limit, format).await
        }
        Command::Write(write) => write::run(write, format).await,
    }
}

/// The namespace as the control plane has it, and its staging store.
async fn staging(
    flags: (&BrokerFlags, &CqlFlags),
    control_plane: &str,
    namespace: &str,
) -> Result<(Namespace, DurableStorage), Failure> {
    crate::durable::open(
        flags,
        control_plane,
        namespace,
        "it has no two-phase writes",
    )
    .await
}

/// The state to show: an open transaction past its lifetime is expired, whether or not the
/// producer's sweep has marked it yet.
fn shown_state(namespace: &Namespace, txn: &wal_durable::Txn) -> &'static str {
    let expired = txn.state == TxnState::Open
        && wal_queue::entry::now_micros().saturating_sub(txn.opened_at_micros)
            > transaction_lifetime(namespace).as_micros() as i64;
    if expired { "expired" } else { txn.state.name() }
}

/// How far the apply got, as "k of n"; "-" before the commit.
fn applied(txn: &wal_durable::Txn) -> String {
    match txn.item_count {
        Some(count) => format!("{} of {count}", txn.applied_through),
        None => "-".to_owned(),
    }
}
