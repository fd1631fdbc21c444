//! `walctl dlq`: what failed in a namespace, why, how often and when; one dead letter in full;
//! and redriving dead letters back to their queue once the target is fixed. Through the
//! control plane's Operations service (authorized, audited, one redrive of a namespace at a
//! time), or with `--direct` against the brokers from here, for a control plane that is down.

pub(crate) mod api;
mod export;
mod filter;
mod print;
mod redrive;

use std::path::PathBuf;
use std::time::SystemTime;

use clap::Subcommand;
use wal_clusters::flags::BrokerFlags;
use wal_control_plane::operations::dlq::{DeadLetters, DlqError, list};

use self::filter::FilterArgs;
use crate::Failure;
use crate::output::Format;

#[derive(Debug, clap::Args)]
pub struct Dlq {
    /// Read and redrive the DLQs from here, with this machine's broker credentials, rather than
    /// through the control plane: for a control plane that is down. Nothing is authorized or
    /// audited then, and nothing stops a redrive running beside another.
    #[arg(long, global = true)]
    direct: bool,
    /// With --direct, the namespace's config file, when the control plane cannot give it.
    #[arg(long, global = true, requires = "direct")]
    namespace_file: Option<PathBuf>,
    #[command(flatten)]
    brokers: BrokerFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// What is in a namespace's DLQs: each failure with its reason, class, attempts and time,
    /// and a count per reason.
    List {
        namespace: String,
        #[command(flatten)]
        filter: FilterArgs,
        /// Entries listed at most, oldest first (the counts per reason cover them all).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        limit: u32,
    },
    /// One dead letter in full: its payload, target, times and every failure field.
    Show { namespace: String, id: String },
    /// Put dead letters back on their namespace queue, for the consumer to deliver again. The
    /// control plane runs it: walctl follows it until it ends (Ctrl-C leaves it running).
    Redrive(redrive::RedriveArgs),
    /// The namespace's running or last redrive or replay: who started it, how far it is, how
    /// it ended.
    Status { namespace: String },
    /// Remove dead letters for good. Without --expect, a dry run: it counts what would go and
    /// prints the command that removes exactly those. A Kafka DLQ is a log: only its oldest
    /// records can go (all, or those before --until), so --since and --class are refused there.
    Purge {
        namespace: String,
        #[command(flatten)]
        filter: FilterArgs,
        /// Remove them, if exactly this many would still go (the dry run's count); else nothing
        /// is removed.
        #[arg(long)]
        expect: Option<u64>,
    },
    /// Every dead letter the filter takes, in full (payload included), as JSON lines: one
    /// object per dead letter, the fields `show` prints.
    Export {
        namespace: String,
        #[command(flatten)]
        filter: FilterArgs,
        /// Where to write them; - for standard output.
        #[arg(long, short)]
        file: PathBuf,
    },
}

pub async fn run(dlq: Dlq, control_plane: &str, format: Format) -> Result<(), Failure> {
    if !dlq.direct {
        return match dlq.command {
            Command::List {
                namespace,
                filter,
                limit,
            } => api::list(control_plane, &namespace, &filter, limit, format).await,
            Command::Show { namespace, id } => {
                api::show(control_plane, &namespace, &id, format).await
            }
            Command::Redrive(args) => api::redrive(control_plane, args, format).await,
            Command::Status { namespace } => api::status(control_plane, &namespace, format).await,
            Command::Purge {
                namespace,
                filter,
                expect,
            } => api::purge(control_plane, &namespace, &filter, expect, format).await,
            Command::Export {
                namespace,
                filter,
                file,
            } => export::run(control_plane, &namespace, &filter, &file, format).await,
        };
    }
    let name = match &dlq.command {
        Command::List { namespace, .. }
        | Command::Show { namespace, .. }
        | Command::Status { namespace }
        | Command::Purge { namespace, .. }
        | Command::Export { namespace, .. } => namespace,
        Command::Redrive(args) => args.namespace(),
    }
    .to_owned();
    let name = name.as_str();
    let namespace = match &dlq.namespace_file {
        Some(file) => crate::namespace::from_file(file)?,
        None => crate::namespace::current(control_plane, name).await?,
    };
    if namespace.name != *name {
        return Err(Failure::usage(format!(
            "--namespace-file defines namespace '{}', not '{name}'",
            namespace.name
        )));
    }
    let clusters = dlq
        .brokers
        .cluster_map(dlq.brokers.kafka(), &Default::default())
        .map_err(|e| Failure::usage(e.to_string()))?;
    let dead = DeadLetters::connect(&clusters, &namespace)
        .await
        .map_err(dlq_failure)?;
    match dlq.command {
        Command::List { filter, limit, .. } => {
            let filter = filter.filter(SystemTime::now())?;
            let listed = list::list(&dead, &filter, limit as usize)
                .await
                .map_err(dlq_failure)?;
            print::list(&listed, format);
            Ok(())
        }
        Command::Show { id, .. } => {
            let copies = list::show(&dead, &id).await.map_err(dlq_failure)?;
            if copies.is_empty() {
                return Err(not_there(name, &id));
            }
            print::show(&copies, format);
            Ok(())
        }
        Command::Redrive(args) => redrive::run(args, dead, format).await,
        Command::Status { .. } => Err(Failure::usage(
            "a redrive run with --direct keeps its progress in its checkpoint file; `dlq status` reads the control plane's redrives",
        )),
        Command::Purge { .. } | Command::Export { .. } => Err(Failure::usage(
            "purge and export go through the control plane, which audits them; they have no --direct form",
        )),
    }
}

fn not_there(namespace: &str, id: &str) -> Failure {
    Failure::not_found(format!(
        "no dead letter with id '{id}' in the DLQs of namespace '{namespace}'; `walctl dlq list {namespace}` shows those there are"
    ))
}

/// The exit a DLQ operation's failure maps to.
pub(crate) fn dlq_failure(error: DlqError) -> Failure {
    match error {
        DlqError::Usage(message) => Failure::usage(message),
        other => Failure::broker(other.to_string()),
    }
}
