//! `walctl namespace ...`: apply a config file, read what is stored, compare, and list history.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde_json::{Value, json};
use tonic::transport::Channel;
use wal_control_plane::changes::changed_fields;
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;
use wal_proto::v1::{
    ApplyRequest, DeleteRequest, GetRequest, HistoryRequest, ListRequest, NamespaceVersion,
};

use crate::Failure;
use crate::output::{self, Format};

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
    },
    /// Check a config against the model and the control plane's update rules; changes nothing.
    Validate {
        #[arg(short, long)]
        file: PathBuf,
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
        Command::Apply { file, .. } | Command::Validate { file } | Command::Diff { file } => {
            Some(read_config(file)?)
        }
        _ => None,
    };
    let mut client = connect(address).await?;
    match command {
        Command::Apply { author, .. } => {
            let config_json = file.unwrap_or_default();
            let response = client
                .apply(ApplyRequest {
                    config_json,
                    author,
                })
                .await
                .map_err(|s| Failure::from_status(&s, "apply refused"))?
                .into_inner();
            let version = response.version.unwrap_or_default();
            match format {
                Format::Json => output::print_json(&json!({
                    "changed": response.changed,
                    "created": response.created,
                    "version": output::version_json(&version),
                })),
                Format::Table => {
                    if response.changed {
                        println!(
                            "namespace '{}' is at version {} ({})",
                            version.name,
                            version.version,
                            version.changes.join(", ")
                        );
                    } else {
                        println!(
                            "namespace '{}' unchanged at version {}",
                            version.name, version.version
                        );
                    }
                    for created in &response.created {
                        println!("created {created}");
                    }
                }
            }
        }
        Command::Validate { .. } => {
            let config_json = file.unwrap_or_default();
            let response = client
                .validate(ApplyRequest {
                    config_json,
                    author: String::new(),
                })
                .await
                .map_err(|s| Failure::from_status(&s, "the config would be refused"))?
                .into_inner();
            match format {
                Format::Json => output::print_json(&json!({
                    "valid": true,
                    "new_namespace": response.new_namespace,
                    "changes": response.changes,
                })),
                Format::Table if response.new_namespace => {
                    println!("valid: applying it creates a new namespace")
                }
                Format::Table if response.changes.is_empty() => {
                    println!("valid: the stored config is the same")
                }
                Format::Table => println!("valid: changes {}", response.changes.join(", ")),
            }
        }
        Command::Diff { .. } => {
            let text = file.unwrap_or_default();
            let new: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let name = new
                .get("namespace")
                .or_else(|| new.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let stored = match client
                .get(GetRequest {
                    name: name.clone(),
                    version: 0,
                })
                .await
            {
                Ok(found) => Some(found.into_inner()).filter(|v| !v.deleted),
                Err(status) if status.code() == tonic::Code::NotFound => None,
                Err(status) => return Err(Failure::from_status(&status, "reading the namespace")),
            };
            let old: Value = stored
                .as_ref()
                .and_then(|v| serde_json::from_str(&v.config_json).ok())
                .unwrap_or(Value::Null);
            print_diff(&name, &old, &new, format);
        }
        Command::Get { name, version } => {
            let found = client
                .get(GetRequest {
                    name,
                    version: version.unwrap_or(0),
                })
                .await
                .map_err(|s| Failure::from_status(&s, "get"))?
                .into_inner();
            match format {
                Format::Json => output::print_json(&output::version_json(&found)),
                Format::Table if found.deleted => println!(
                    "namespace '{}' was deleted at version {} by {} ({})",
                    found.name,
                    found.version,
                    found.author,
                    output::when(found.created_at_micros)
                ),
                Format::Table => println!("{}", found.config_json),
            }
        }
        Command::List => {
            let list = client
                .list(ListRequest {})
                .await
                .map_err(|s| Failure::from_status(&s, "list"))?
                .into_inner()
                .namespaces;
            print_versions(
                &list,
                format,
                &["namespace", "version", "author", "changed at"],
            );
        }
        Command::History { name } => {
            let versions = client
                .history(HistoryRequest { name })
                .await
                .map_err(|s| Failure::from_status(&s, "history"))?
                .into_inner()
                .versions;
            print_versions(
                &versions,
                format,
                &["namespace", "version", "author", "at", "changes"],
            );
        }
        Command::Delete { name, author } => {
            let deleted = client
                .delete(DeleteRequest { name, author })
                .await
                .map_err(|s| Failure::from_status(&s, "delete refused"))?
                .into_inner();
            match format {
                Format::Json => output::print_json(&output::version_json(&deleted)),
                Format::Table => println!(
                    "namespace '{}' deleted at version {}; its queues stay on the brokers",
                    deleted.name, deleted.version
                ),
            }
        }
    }
    Ok(())
}

pub async fn connect(address: &str) -> Result<NamespaceRegistryClient<Channel>, Failure> {
    let endpoint = Channel::from_shared(address.to_owned())
        .map_err(|e| Failure::usage(format!("--control-plane '{address}' is not a URL: {e}")))?;
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| Failure::unreachable(address, e))?;
    Ok(NamespaceRegistryClient::new(channel))
}

/// Reads a config file (or standard input for `-`) and validates it locally, so a bad file is
/// reported with its path and the field at fault before anything is sent.
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

fn print_diff(name: &str, old: &Value, new: &Value, format: Format) {
    let fields = if old.is_null() {
        Vec::new()
    } else {
        changed_fields(old, new)
    };
    // Absent on one side: shown as null.
    let value_at =
        |value: &Value, pointer: &str| value.pointer(pointer).cloned().unwrap_or(Value::Null);
    match format {
        Format::Json => output::print_json(&json!({
            "namespace": name,
            "new_namespace": old.is_null(),
            "changes": fields.iter().map(|f| json!({
                "path": f.path,
                "stored": value_at(old, &f.pointer),
                "file": value_at(new, &f.pointer),
            })).collect::<Vec<_>>(),
        })),
        Format::Table if old.is_null() => {
            println!("namespace '{name}' is not stored: applying the file creates it")
        }
        Format::Table if fields.is_empty() => {
            println!("namespace '{name}': the file matches the stored config")
        }
        Format::Table => {
            let mut table = output::table(&["field", "stored", "file"]);
            for field in &fields {
                table.add_row([
                    field.path.clone(),
                    value_at(old, &field.pointer).to_string(),
                    value_at(new, &field.pointer).to_string(),
                ]);
            }
            println!("{table}");
        }
    }
}

fn print_versions(versions: &[NamespaceVersion], format: Format, header: &[&str]) {
    match format {
        Format::Json => output::print_json(&Value::Array(
            versions.iter().map(output::version_json).collect(),
        )),
        Format::Table => {
            let mut table = output::table(header);
            for version in versions {
                let mut row = vec![
                    version.name.clone(),
                    version.version.to_string(),
                    version.author.clone(),
                    output::when(version.created_at_micros),
                ];
                if header.len() > 4 {
                    row.push(version.changes.join(", "));
                }
                table.add_row(row);
            }
            println!("{table}");
        }
    }
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
