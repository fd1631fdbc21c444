//! `walctl namespace diff`: what applying a file would change, field by field.

use serde_json::{Value, json};
use wal_control_plane::changes::changed_fields;
use wal_proto::v1::GetRequest;

use super::Registry;
use crate::Failure;
use crate::output::{self, Format};

pub(super) async fn run(client: &mut Registry, text: &str, format: Format) -> Result<(), Failure> {
    let new: Value = serde_json::from_str(text).unwrap_or(Value::Null);
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
    Ok(())
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
