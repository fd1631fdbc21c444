//! What `walctl dlq list` and `show` print, from the Operations service's messages (which the
//! `--direct` path makes too): tables for people, JSON for scripts.

use base64::Engine as _;
use serde_json::{Value, json};
use wal_proto::v1::{DeadLetter, ListDeadLettersResponse};
use wal_queue::entry::{Body, Entry, ErrorClass};

use crate::output::{Format, print_json, table, when};

pub fn list(listed: &ListDeadLettersResponse, format: Format) {
    match format {
        Format::Json => print_json(&json!({
            "total": listed.total,
            "reasons": listed.reasons.iter().map(|r| json!({
                "class": class_name(r.class),
                "reason": r.reason,
                "entries": r.entries,
                "first": when(r.first_micros),
                "last": when(r.last_micros),
            })).collect::<Vec<_>>(),
            "entries": listed.entries.iter().map(summary_json).collect::<Vec<_>>(),
        })),
        Format::Table => list_tables(listed),
    }
}

fn list_tables(listed: &ListDeadLettersResponse) {
    if listed.total == 0 {
        println!("no dead letters");
        return;
    }
    let mut reasons = table(&["CLASS", "REASON", "ENTRIES", "FIRST", "LAST"]);
    for r in &listed.reasons {
        reasons.add_row(vec![
            class_name(r.class).to_owned(),
            shorten(&r.reason, 80),
            r.entries.to_string(),
            when(r.first_micros),
            when(r.last_micros),
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
    for dead in &listed.entries {
        let entry = entry_of(dead);
        entries.add_row(vec![
            entry.id.clone(),
            dead.dlq.clone(),
            when(entry.dead_lettered_at_micros),
            entry.attempt.to_string(),
            entry.redrives.to_string(),
            class_name(entry.last_error_class).to_owned(),
            shorten(&entry.last_error, 60),
        ]);
    }
    println!("{entries}");
    let shown = listed.entries.len() as u64;
    if listed.total > shown {
        println!(
            "{shown} of {} entries listed; --limit lists more",
            listed.total
        );
    }
}

pub fn show(copies: &[DeadLetter], format: Format) {
    let shown: Vec<Value> = copies.iter().map(detail_json).collect();
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
}

fn entry_of(dead: &DeadLetter) -> Entry {
    dead.entry.clone().unwrap_or_default()
}

pub fn class_name(class: i32) -> &'static str {
    match ErrorClass::try_from(class) {
        Ok(ErrorClass::Retryable) => "retryable",
        Ok(ErrorClass::Permanent) => "permanent",
        _ => "unspecified",
    }
}

fn summary_json(dead: &DeadLetter) -> Value {
    let entry = entry_of(dead);
    json!({
        "id": entry.id,
        "dlq": dead.dlq,
        "dead_lettered_at": when(entry.dead_lettered_at_micros),
        "attempts": entry.attempt,
        "redrives": entry.redrives,
        "class": class_name(entry.last_error_class),
        "reason": entry.last_error,
    })
}

pub fn detail_json(dead: &DeadLetter) -> Value {
    let entry = entry_of(dead);
    let mut value = summary_json(dead);
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
        fields.insert("position".into(), json!(dead.position));
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
