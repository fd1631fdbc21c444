//! `walctl namespace validate`: the model's and the update rules' verdict on a config; changes
//! nothing.

use serde_json::json;
use wal_proto::v1::ApplyRequest;

use super::Registry;
use crate::Failure;
use crate::output::{self, Format};

pub(super) async fn run(
    client: &mut Registry,
    config_json: String,
    format: Format,
) -> Result<(), Failure> {
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
    Ok(())
}
