//! `walctl namespace delete`: record a namespace as deleted; its queues stay on the brokers.

use wal_proto::v1::DeleteRequest;

use super::Registry;
use crate::Failure;
use crate::output::{self, Format};

pub(super) async fn run(
    client: &mut Registry,
    name: String,
    author: String,
    format: Format,
) -> Result<(), Failure> {
    let deleted = client
        .delete(DeleteRequest { name, author })
        .await
        .map_err(|s| Failure::from_status(&s, "delete refused"))?
        .into_inner();
    match format {
        Format::Json => output::print_json(&output::version_json(&deleted)),
        Format::Table => println!(
            "namespace '{}' deleted at version {}; its queues stay on the brokers",
            deleted.name, deleted.version
        ),
    }
    Ok(())
}
