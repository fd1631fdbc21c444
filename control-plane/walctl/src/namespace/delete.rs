//! `walctl namespace delete` prints the version that records the namespace as deleted; its queues
//! stay on the brokers.

use wal_proto::v1::NamespaceVersion;

use crate::output::{self, Format};

pub(super) fn print(deleted: &NamespaceVersion, format: Format) {
    match format {
        Format::Json => output::print_json(&output::version_json(deleted)),
        Format::Table => println!(
            "namespace '{}' deleted at version {}; its queues stay on the brokers",
            deleted.name, deleted.version
        ),
    }
}
