//! `walctl namespace apply` prints what the control plane changed and created (it validated,
//! provisioned and stored the config).

use serde_json::json;
use wal_proto::v1::ApplyResponse;

use crate::output::{self, Format};

pub(super) fn print(response: ApplyResponse, format: Format) {
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
