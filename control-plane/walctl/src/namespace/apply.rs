//! `walctl namespace apply`: validate, provision and store a config; print what changed.

use serde_json::json;
use wal_proto::v1::ApplyRequest;

use super::Registry;
use crate::Failure;
use crate::output::{self, Format};

pub(super) async fn run(
    client: &mut Registry,
    config_json: String,
    author: String,
    format: Format,
) -> Result<(), Failure> {
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
    Ok(())
}
