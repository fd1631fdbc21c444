//! `walctl namespace list` and `history` print namespaces and their versions, as a table or JSON.

use serde_json::Value;
use wal_proto::v1::NamespaceVersion;

use crate::output::{self, Format};

/// Every namespace, with its version and who changed it last.
pub(super) fn print_list(list: &[NamespaceVersion], format: Format) {
    let header = ["namespace", "version", "author", "changed at"];
    print_versions(list, format, &header);
}

/// Every version of a namespace: who, when, what changed.
pub(super) fn print_history(versions: &[NamespaceVersion], format: Format) {
    let header = ["namespace", "version", "author", "at", "changes"];
    print_versions(versions, format, &header);
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
