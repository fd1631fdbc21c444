//! `walctl namespace list` and `history`: namespaces and their versions, as a table or JSON.

use serde_json::Value;
use wal_proto::v1::{HistoryRequest, ListRequest, NamespaceVersion};

use super::Registry;
use crate::Failure;
use crate::output::{self, Format};

/// Every namespace, with its version and who changed it last.
pub(super) async fn list(client: &mut Registry, format: Format) -> Result<(), Failure> {
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
    Ok(())
}

/// Every version of a namespace: who, when, what changed.
pub(super) async fn history(
    client: &mut Registry,
    name: String,
    format: Format,
) -> Result<(), Failure> {
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
    Ok(())
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
