//! `walctl namespace get` prints a namespace's current config, or an older version.

use wal_proto::v1::NamespaceVersion;

use crate::output::{self, Format};

pub(super) fn print(found: &NamespaceVersion, format: Format) {
    match format {
        Format::Json => output::print_json(&output::version_json(found)),
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
