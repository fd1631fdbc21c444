//! `walctl namespace ...`: apply a config file, read what is stored, compare, and list history.
//! Each subcommand's request is made in `run`; what it prints is in a file of its own.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use tonic::transport::Channel;
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;
use wal_proto::v1::{ApplyRequest, DeleteRequest, GetRequest, HistoryRequest, ListRequest};

use crate::Failure;
use crate::output::Format;

mod apply;
mod delete;
mod diff;
mod get;
mod validate;
mod versions;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate, provision and store a namespace config; prints what changed and was created.
    Apply {
        /// The namespace config (JSON), or - for standard input.
        #[arg(short, long)]
        file: PathBuf,
        /// Recorded as the change's author.
        #[arg(long, env = "USER", default_value = "walctl")]
        author: String,
        /// Remove destinations the file no longer names even while entries are still owed to
        /// them (those entries never reach them); without it such an apply is refused, naming
        /// the destination and how many entries it is owed.
        #[arg(long)]
        drop_owed_destinations: bool,
    },
    /// Check a config against the model and the control plane's update rules; changes nothing.
    Validate {
        #[arg(short, long)]
        file: PathBuf,
        /// Judge it as `apply --drop-owed-destinations` would.
        #[arg(long)]
        drop_owed_destinations: bool,
    },
    /// What applying the file would change, field by field.
    Diff {
        #[arg(short, long)]
        file: PathBuf,
    },
    /// A namespace's current config, or an older version.
    Get {
        name: String,
        #[arg(long)]
        version: Option<i64>,
    },
    /// Every namespace, with its version and who changed it last.
    List,
    /// Every version of a namespace: who, when, what changed.
    History { name: String },
    /// Record a namespace as deleted (its queues and their entries stay on the brokers).
    Delete {
        name: String,
        #[arg(long, env = "USER", default_value = "walctl")]
        author: String,
    },
}

pub async fn run(command: Command, address: &str, format: Format) -> Result<(), Failure> {
    // Files are read and checked before connecting: a bad file is the user's to fix, whatever
    // the control plane's state.
    let file = match &command {
        Command::Apply { file, .. } | Command::Validate { file, .. } | Command::Diff { file } => {
            read_config(file)?
        }
        _ => String::new(),
    };
    let mut client = connect(address).await?;
    match command {
        Command::Apply {
            author,
            drop_owed_destinations,
            ..
        } => {
            let asked = client.apply(ApplyRequest {
                config_json: file,
                author,
                drop_owed_destinations,
            });
            apply::print(answer(asked.await, "apply refused")?, format);
        }
        Command::Validate {
            drop_owed_destinations,
            ..
        } => {
            let author = String::new();
            let asked = client.validate(ApplyRequest {
                config_json: file,
                author,
                drop_owed_destinations,
            });
            validate::print(answer(asked.await, "the config would be refused")?, format);
        }
        Command::Diff { .. } => diff::run(&mut client, &file, format).await?,
        Command::Get { name, version } => {
            let version = version.unwrap_or(0);
            let asked = client.get(GetRequest { name, version });
            get::print(&answer(asked.await, "get")?, format);
        }
        Command::List => {
            let list = answer(client.list(ListRequest {}).await, "list")?;
            versions::print_list(&list.namespaces, format);
        }
        Command::History { name } => {
            let asked = client.history(HistoryRequest { name });
            versions::print_history(&answer(asked.await, "history")?.versions, format);
        }
        Command::Delete { name, author } => {
            let asked = client.delete(DeleteRequest { name, author });
            delete::print(&answer(asked.await, "delete refused")?, format);
        }
    }
    Ok(())
}

/// The control plane's answer, or its refusal as a failure naming what was `asked`.
fn answer<T>(result: Result<tonic::Response<T>, tonic::Status>, asked: &str) -> Result<T, Failure> {
    result
        .map(tonic::Response::into_inner)
        .map_err(|status| refused(&status, asked))
}

/// What the control plane answered, with a hint when the connection itself failed: a TLS
/// control plane refuses a plaintext client, or one without a certificate, at the handshake.
pub fn refused(status: &tonic::Status, asked: &str) -> Failure {
    let mut failure = Failure::from_status(status, asked);
    // Only a failed connection carries a transport error as its source; an UNAVAILABLE the
    // server answered (a store outage, say) gets no TLS hint.
    let transport = std::error::Error::source(status).is_some();
    let hint = match TLS.get() {
        _ if !transport => "",
        None => {
            " (if the control plane serves TLS, give an https:// --control-plane and --control-plane-ca)"
        }
        Some(tls) if tls.cert.is_none() => {
            " (if the control plane requires client certificates, give --control-plane-cert and --control-plane-key)"
        }
        Some(_) => {
            " (the control plane may not trust this client certificate, or it has expired; its log says which)"
        }
    };
    failure.message.push_str(hint);
    failure
}

/// The registry's client, as each subcommand takes it.
type Registry = NamespaceRegistryClient<Channel>;

/// The TLS every connection to the control plane uses, set once from the command line: one
/// walctl run talks to one control plane, and every command reaches it through [`connect`].
static TLS: std::sync::OnceLock<wal_namespaces::feed::ClientTls> = std::sync::OnceLock::new();

pub fn use_tls(tls: wal_namespaces::feed::ClientTls) {
    let _ = TLS.set(tls);
}

pub async fn connect(address: &str) -> Result<NamespaceRegistryClient<Channel>, Failure> {
    Ok(NamespaceRegistryClient::new(channel(address).await?))
}

/// A connection to the control plane, for any of its services.
pub async fn channel(address: &str) -> Result<Channel, Failure> {
    let endpoint = Channel::from_shared(address.to_owned())
        .map_err(|e| Failure::usage(format!("--control-plane '{address}' is not a URL: {e}")))?;
    let endpoint = match TLS.get() {
        Some(tls) => tls
            .apply(endpoint)
            .map_err(|e| Failure::usage(format!("--control-plane '{address}': {e}")))?,
        None => endpoint,
    };
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| Failure::unreachable(address, e))?;
    Ok(channel)
}

/// Reads a config file (or standard input for `-`) and validates it locally, so a bad file is
/// reported with its path and the field at fault before anything is sent.
/// The namespace a config file (or `-`, standard input) defines, checked.
pub fn from_file(path: &Path) -> Result<wal_namespaces::Namespace, Failure> {
    let text = read_config(path)?;
    wal_namespaces::parse(&text, &path.display().to_string())
        .map_err(|errors| Failure::usage(format!("the config is invalid:\n{errors}")))
}

fn read_config(path: &Path) -> Result<String, Failure> {
    let (text, origin) = if path == Path::new("-") {
        let text = std::io::read_to_string(std::io::stdin())
            .map_err(|e| Failure::usage(format!("reading standard input: {e}")))?;
        (text, "standard input".to_owned())
    } else {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::usage(format!("cannot read {}: {e}", path.display())))?;
        (text, path.display().to_string())
    };
    wal_namespaces::parse(&text, &origin)
        .map_err(|errors| Failure::usage(format!("the config is invalid:\n{errors}")))?;
    Ok(text)
}

/// The namespace `name` as `file` defines it, else as the control plane at `address` has it:
/// what a `--direct` read uses, so it needs no control plane when given a file.
pub async fn named(
    address: &str,
    file: Option<&Path>,
    name: &str,
) -> Result<wal_namespaces::Namespace, Failure> {
    let Some(file) = file else {
        return current(address, name).await;
    };
    let config = from_file(file)?;
    if config.name != name {
        return Err(Failure::usage(format!(
            "--namespace-file defines namespace '{}', not '{name}'",
            config.name
        )));
    }
    Ok(config)
}

/// The namespace's current config from the control plane, for commands that work on its queues.
pub async fn current(address: &str, name: &str) -> Result<wal_namespaces::Namespace, Failure> {
    let version = connect(address)
        .await?
        .get(wal_proto::v1::GetRequest {
            name: name.to_owned(),
            version: 0,
        })
        .await
        .map_err(|status| Failure::from_status(&status, "reading the namespace"))?
        .into_inner();
    if version.deleted {
        return Err(Failure::not_found(format!(
            "namespace '{name}' was deleted (version {}); its queues are still on the brokers: apply it again to work on them",
            version.version
        )));
    }
    wal_namespaces::parse(&version.config_json, &format!("namespace '{name}'"))
        .map_err(|errors| Failure::broker(format!("the stored config does not validate: {errors}")))
}

/// What the namespace's history says of its archive: since when it has been on, and the
/// shortest retention it had meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveHistory {
    /// When the oldest of the newest versions that all keep an archive, in one keyspace, was
    /// stored.
    pub turned_on_micros: i64,
    /// Whether that version created the namespace: then no crew ever read it without archiving.
    pub from_creation: bool,
    /// The shortest retention of those versions: rows keep the TTL they were written with.
    pub shortest_retention: std::time::Duration,
}

/// The namespace's archive history; None when the current version keeps no archive.
pub async fn archive_history(address: &str, name: &str) -> Result<Option<ArchiveHistory>, Failure> {
    let mut versions = connect(address)
        .await?
        .history(HistoryRequest {
            name: name.to_owned(),
        })
        .await
        .map_err(|status| Failure::from_status(&status, "reading the namespace's history"))?
        .into_inner()
        .versions;
    versions.sort_by_key(|v| std::cmp::Reverse(v.version));
    let archive = |version: &wal_proto::v1::NamespaceVersion| {
        let parsed = wal_namespaces::parse(&version.config_json, name).ok()?;
        let durable = parsed.durable_storage?;
        durable.archive.map(|a| (durable.keyspace, a.retention))
    };
    let mut history: Option<ArchiveHistory> = None;
    let mut keyspace = None;
    for version in &versions {
        let Some((this, retention)) = archive(version) else {
            break;
        };
        if keyspace.get_or_insert_with(|| this.clone()) != &this {
            break;
        }
        let shortest = history.map_or(retention, |h| h.shortest_retention.min(retention));
        history = Some(ArchiveHistory {
            turned_on_micros: version.created_at_micros,
            from_creation: version.version == 1,
            shortest_retention: shortest,
        });
    }
    Ok(history)
}
