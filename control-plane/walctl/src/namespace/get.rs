//! `walctl namespace get`: a namespace's current config, or an older version.

use wal_proto::v1::GetRequest;

use super::Registry;
use crate::Failure;
use crate::output::{self, Format};

pub(super) async fn run(
    client: &mut Registry,
    name: String,
    version: Option<i64>,
    format: Format,
) -> Result<(), Failure> {
    let found = client
        .get(GetRequest {
            name,
            version: version.unwrap_or(0),
        })
        .await
        .map_err(|s| Failure::from_status(&s, "get"))?
        .into_inner();
    match format {
        Format::Json => output::print_json(&output::version_json(&found)),
        Format::Table if found.deleted => println!(
            "namespace '{}' was deleted at version {} by {} ({})",
            found.name,
            found.version,
            found.author,
            output::when(found.created_at_micros)
        ),
        Format::Table => println!("{}", found.config_json),
    }
    Ok(())
}
