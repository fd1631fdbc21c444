//! `walctl dlq`: what failed in a namespace, why, how often and when; one dead letter in full;
//! and redriving dead letters back to their queue once the target is fixed. walctl reads the
//! namespace's config from the control plane and its DLQs from the brokers itself.

mod filter;
mod redrive;

use std::collections::BTreeMap;

use base64::Engine as _;
use clap::Subcommand;
use serde_json::{Value, json};
use wal_namespaces::Namespace;
use wal_queue::entry::{Body, Entry};

use self::filter::FilterArgs;
use crate::Failure;
use crate::output::{Format, print_json, table, when};
use wal_clusters::flags::BrokerFlags;
use wal_control_plane::operations::dlq::{DeadLetters, Found, Verdict};

#[derive(Debug, clap::Args)]
pub struct Dlq {
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
        /// Entries listed at most (the counts per reason cover them all).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// One dead letter in full: its payload, target, times and every failure field.
    Show { namespace: String, id: String },
    /// Put dead letters back on their namespace queue, for the consumer to deliver again.
    Redrive(redrive::RedriveArgs),
}

pub async fn run(dlq: Dlq, control_plane: &str, format: Format) -> Result<(), Failure> {
    let name = match &dlq.command {
        Command::List { namespace, .. } | Command::Show { namespace, .. } => namespace,
        Command::Redrive(args) => args.namespace(),
    };
    let namespace = crate::namespace::current(control_plane, name).await?;
    let clusters = dlq
        .brokers
        .cluster_map(dlq.brokers.kafka(), &Default::default())
        .map_err(|e| Failure::usage(e.to_string()))?;
    let dead = DeadLetters::connect(&clusters, &namespace)
        .await
        .map_err(dlq_failure)?;
    match dlq.command {
        Command::List { filter, limit, .. } => list(&dead, &filter, limit, format).await,
        Command::Show { id, .. } => show(&dead, &namespace, &id, format).await,
        Command::Redrive(args) => redrive::run(args, dead, format).await,
    }
}

/// The exit a DLQ operation's failure maps to.
pub(crate) fn dlq_failure(error: wal_control_plane::operations::dlq::DlqError) -> Failure {
    match error {
        wal_control_plane::operations::dlq::DlqError::Usage(message) => Failure::usage(message),
        other => Failure::broker(other.to_string()),
    }
}

/// Dead letters with the same class and reason.
#[derive(Debug, Default)]
struct Group {
    entries: u64,
    first_micros: i64,
    last_micros: i64,
}

async fn list(
    dead: &DeadLetters,
    filter: &FilterArgs,
    limit: usize,
    format: Format,
) -> Result<(), Failure> {
    let filter = filter.filter(std::time::SystemTime::now())?;
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    let mut listed: Vec<Found> = Vec::new();
    let mut total = 0usize;
    dead.read_all(|found| {
        if filter.judge(&found.entry) != Verdict::Take {
            return;
        }
        total += 1;
        let entry = &found.entry;
        let at = entry.dead_lettered_at_micros;
        let group = groups
            .entry((class_of(entry).to_owned(), entry.last_error.clone()))
            .or_insert(Group {
                first_micros: at,
                last_micros: at,
                ..Group::default()
            });
        group.entries += 1;
        group.first_micros = group.first_micros.min(at);
        group.last_micros = group.last_micros.max(at);
        if listed.len() < limit {
            listed.push(found);
        }
    })
    .await
    .map_err(dlq_failure)?;
    listed.sort_by_key(|found| found.entry.dead_lettered_at_micros);
    match format {
        Format::Json => print_json(&json!({
            "total": total,
            "reasons": groups.iter().map(|((class, reason), g)| json!({
                "class": class,
                "reason": reason,
                "entries": g.entries,
                "first": when(g.first_micros),
                "last": when(g.last_micros),
            })).collect::<Vec<_>>(),
            "entries": listed.iter().map(|f| summary_json(dead, f)).collect::<Vec<_>>(),
        })),
        Format::Table => print_tables(dead, &groups, &listed, total),
    }
    Ok(())
}

/// The reasons and the entries listed, as tables.
fn print_tables(
    dead: &DeadLetters,
    groups: &BTreeMap<(String, String), Group>,
    listed: &[Found],
    total: usize,
) {
    if total == 0 {
        println!("no dead letters");
        return;
    }
    let mut reasons = table(&["CLASS", "REASON", "ENTRIES", "FIRST", "LAST"]);
    for ((class, reason), g) in groups {
        reasons.add_row(vec![
            class.clone(),
            shorten(reason, 80),
            g.entries.to_string(),
            when(g.first_micros),
            when(g.last_micros),
        ]);
    }
    println!("{reasons}");
    let mut entries = table(&[
        "ID",
        "DLQ",
        "DEAD-LETTERED",
        "ATTEMPTS",
        "REDRIVES",
        "CLASS",
        "REASON",
    ]);
    for found in listed {
        let entry = &found.entry;
        entries.add_row(vec![
            entry.id.clone(),
            dead.dlqs[found.dlq].name.clone(),
            when(entry.dead_lettered_at_micros),
            entry.attempt.to_string(),
            entry.redrives.to_string(),
            class_of(entry).to_owned(),
            shorten(&entry.last_error, 60),
        ]);
    }
    println!("{entries}");
    if total > listed.len() {
        println!(
            "{} of {total} entries listed; --limit lists more",
            listed.len()
        );
    }
}

async fn show(
    dead: &DeadLetters,
    namespace: &Namespace,
    id: &str,
    format: Format,
) -> Result<(), Failure> {
    let mut copies = Vec::new();
    dead.read_all(|found| {
        if found.entry.id == id {
            copies.push(found);
        }
    })
    .await
    .map_err(dlq_failure)?;
    if copies.is_empty() {
        return Err(Failure::not_found(format!(
            "no dead letter with id '{id}' in the DLQs of namespace '{}'; `walctl dlq list {}` shows those there are",
            namespace.name, namespace.name
        )));
    }
    let shown: Vec<Value> = copies.iter().map(|f| detail_json(dead, f)).collect();
    match format {
        Format::Json => print_json(&Value::Array(shown)),
        Format::Table => {
            for value in shown {
                let mut out = table(&["FIELD", "VALUE"]);
                if let Value::Object(fields) = value {
                    for (field, value) in fields {
                        let text = match value {
                            Value::String(text) => text,
                            other => other.to_string(),
                        };
                        out.add_row(vec![field, text]);
                    }
                }
                println!("{out}");
            }
        }
    }
    Ok(())
}

fn class_of(entry: &Entry) -> &'static str {
    match entry.last_error_class() {
        wal_queue::entry::ErrorClass::Retryable => "retryable",
        wal_queue::entry::ErrorClass::Permanent => "permanent",
        wal_queue::entry::ErrorClass::Unspecified => "unspecified",
    }
}

fn summary_json(dead: &DeadLetters, found: &Found) -> Value {
    let entry = &found.entry;
    json!({
        "id": entry.id,
        "dlq": dead.dlqs[found.dlq].name,
        "dead_lettered_at": when(entry.dead_lettered_at_micros),
        "attempts": entry.attempt,
        "redrives": entry.redrives,
        "class": class_of(entry),
        "reason": entry.last_error,
    })
}

fn detail_json(dead: &DeadLetters, found: &Found) -> Value {
    let entry = &found.entry;
    let mut value = summary_json(dead, found);
    let (body, encoding) = match &entry.body {
        Some(Body::Payload(bytes)) => match std::str::from_utf8(bytes) {
            Ok(text) => (Value::String(text.to_owned()), "utf-8"),
            Err(_) => (
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
                "base64",
            ),
        },
        Some(Body::ClaimCheck(check)) => (
            json!({"table": check.table, "id": check.id, "size": check.size}),
            "claim check",
        ),
        Some(Body::Transaction(marker)) => (
            json!({"transaction_id": marker.transaction_id, "item_count": marker.item_count}),
            "transaction marker",
        ),
        None => (Value::Null, "none"),
    };
    if let Value::Object(fields) = &mut value {
        fields.insert("position".into(), json!(found.locator));
        fields.insert("namespace".into(), json!(entry.namespace));
        fields.insert("key".into(), json!(entry.key));
        fields.insert("payload".into(), body);
        fields.insert("payload_encoding".into(), json!(encoding));
        fields.insert(
            "target".into(),
            json!(entry.target.as_ref().map(|t| {
                let settings = serde_json::from_str::<Value>(&t.settings_json)
                    .unwrap_or_else(|_| Value::String(t.settings_json.clone()));
                json!({"kind": t.kind, "settings": settings})
            })),
        );
        fields.insert(
            "written_at".into(),
            json!(when(entry.original_write_time_micros)),
        );
        fields.insert("deliver_at".into(), json!(when(entry.deliver_at_micros)));
        fields.insert("origin_region".into(), json!(entry.origin_region));
        fields.insert("trace_context".into(), json!(entry.trace_context));
    }
    value
}

fn shorten(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(chars.saturating_sub(1)).collect();
    short.push('…');
    short
}
