//! The cache kind: sets and deletes in memcached.
//! Settings: `{"servers": ["host:port"], "ttl_seconds": 3600, "ttl_spread_seconds": 360,
//! "rows": {"key": ["id"], "prefix": "orders:"}}`, all optional: servers default to the
//! consumer's `--memcached`, the TTL to one hour, the spread to a tenth of the TTL. With `rows`
//! the cache keeps the rows of cql payloads (a table's cache, fed by the table's own writes).

use serde::Deserialize;

use crate::json::JsonError;
use crate::{Kind, Settings};

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSettings {
    #[serde(default)]
    pub servers: Vec<String>,
    #[serde(default = "default_ttl")]
    pub ttl_seconds: u64,
    #[serde(default)]
    pub ttl_spread_seconds: Option<u64>,
    /// Read the payload as the cql kind's (`{"mutations": [...]}`) and keep its rows: each put
    /// sets `<prefix><key>` to the columns it wrote, as JSON; each delete (of the row or of some
    /// of its columns) removes the key.
    #[serde(default)]
    pub rows: Option<RowsSettings>,
}

/// How a cache keeps a table's rows.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowsSettings {
    /// The primary key's columns. A row's cache key is the prefix and the key's value (a
    /// string as it is, any other value as JSON), or with several columns their values as a
    /// JSON array.
    pub key: Vec<String>,
    /// Put before the key, so two tables' rows do not share keys.
    #[serde(default)]
    pub prefix: String,
    /// Only mutations of this table (or naming none) are cached; unset: every mutation.
    #[serde(default)]
    pub table: Option<String>,
}

fn default_ttl() -> u64 {
    3600
}

impl Settings for CacheSettings {
    const KIND: Kind = Kind::Cache;

    fn check(&self) -> Result<(), JsonError> {
        if let Some(rows) = &self.rows {
            if rows.key.is_empty() {
                return Err(JsonError::at(
                    "rows.key",
                    "expected the primary key's column names, found an empty list",
                ));
            }
            if let Some(table) = &rows.table {
                crate::cql::identifier(table)
                    .map_err(|reason| JsonError::at("rows.table", reason))?;
            }
            if let Some(i) = rows.key.iter().position(String::is_empty) {
                return Err(JsonError::at(
                    format!("rows.key[{i}]"),
                    "expected a column name, found an empty string",
                ));
            }
        }
        for (i, server) in self.servers.iter().enumerate() {
            // host:port only: the consumer's client resolves the text as an address.
            let valid = server
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !valid {
                return Err(JsonError::at(
                    format!("servers[{i}]"),
                    format!("{server:?} is not a memcached address; expected host:port"),
                ));
            }
        }
        Ok(())
    }
}
