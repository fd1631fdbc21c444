//! `walctl namespace validate` prints the model's and the update rules' verdict on a config
//! (nothing changes).

use serde_json::json;
use wal_proto::v1::ValidateResponse;

use crate::output::{self, Format};

pub(super) fn print(response: ValidateResponse, format: Format) {
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
