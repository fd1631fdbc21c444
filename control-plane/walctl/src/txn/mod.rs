//! `walctl txn`: two-phase writes from the shell. `show` and `list` ask the control plane's
//! Operations service where transactions stand (or, with `--direct`, read the namespace's
//! staging tables from here); `abort` asks it to abort one, audited; `write` stages a file of
//! items and commits them through a producer.

mod abort;
mod list;
mod show;
mod write;

use std::path::PathBuf;

use wal_clusters::flags::{BrokerFlags, CqlFlags};

use crate::Failure;
use crate::output::Format;

#[derive(Debug, clap::Args)]
pub struct Txn {
    /// For show and list: read the staging tables from here, with the CQL flags below, rather
    /// than through the control plane. The namespace's config still comes from the control
    /// plane unless --namespace-file gives it: with both, walctl needs no control plane.
    #[arg(long, global = true)]
    direct: bool,
    /// With --direct, the namespace's config file, when the control plane cannot give it.
    #[arg(long, global = true, requires = "direct")]
    namespace_file: Option<PathBuf>,
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
    /// Abort a transaction whose commit was not accepted, through the control plane (needs the
    /// namespace's admin grant; audited): its staged items are dropped and a later append or
    /// commit is refused. A committed one is refused (exit 3): its marker may be on the queue.
    Abort(abort::Abort),
    /// Stage the items of a JSON file and commit them as one transaction; prints the commit's
    /// durable answer (TRUE, FALSE or UNKNOWN) and exits as `walctl write` does (5 FALSE,
    /// 6 UNKNOWN: run it again, the transaction id makes that safe).
    Write(write::TxnWrite),
}

pub async fn run(txn: Txn, control_plane: &str, format: Format) -> Result<(), Failure> {
    let Txn {
        direct,
        namespace_file,
        brokers,
        cql,
        command,
    } = txn;
    let staging = |namespace: String| {
        let (brokers, cql, file) = (&brokers, &cql, namespace_file.as_deref());
        async move {
            crate::durable::open(
                (brokers, cql),
                (control_plane, file),
                &namespace,
                "it has no two-phase writes",
            )
            .await
        }
    };
    match command {
        Command::Show {
            namespace,
            transaction_id,
        } => {
            let shown = if direct {
                let (namespace, storage) = staging(namespace).await?;
                show::direct(&namespace, &storage, &transaction_id).await?
            } else {
                show::asked(control_plane, &namespace, &transaction_id).await?
            };
            show::print(&shown, format);
            Ok(())
        }
        Command::List {
            namespace,
            state,
            limit,
        } => {
            let listed = if direct {
                let (config, storage) = staging(namespace.clone()).await?;
                list::direct(&config, &storage, state, limit).await?
            } else {
                list::asked(control_plane, &namespace, state, limit).await?
            };
            list::print(&namespace, state, &listed, format);
            Ok(())
        }
        Command::Abort(_) | Command::Write(_) if direct => Err(Failure::usage(
            "--direct is for show and list; an abort goes through the control plane, which audits it, and a write through a producer",
        )),
        Command::Abort(abort) => abort::run(abort, control_plane, format).await,
        Command::Write(write) => write::run(write, format).await,
    }
}

/// How far the apply got, as "k of n"; "-" before the commit.
fn applied(txn: &wal_proto::v1::Transaction) -> String {
    match txn.item_count {
        Some(count) => format!("{} of {count}", txn.applied_through),
        None => "-".to_owned(),
    }
}

/// The reason as JSON: null when there is none.
fn reason(txn: &wal_proto::v1::Transaction) -> Option<&str> {
    Some(txn.reason.as_str()).filter(|r| !r.is_empty())
}
