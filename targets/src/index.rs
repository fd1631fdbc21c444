//! The index kind: keeps a secondary index of a cql table in step with the table's own writes.
//! Settings: `{"keyspace": "shop", "table": "orders_by_customer", "base_table": "orders",
//! "key": ["id"], "columns": ["customer"], "consistency": "LOCAL_QUORUM"}`: the index table
//! holds a row per base row, made of the indexed `columns` (its partition key) and the base
//! table's primary `key` columns (its clustering key); the kind keeps what it last indexed for
//! each base row in `<table>_state`, which it creates.

use serde::Deserialize;

use crate::cql::{WriteConsistency, identifier};
use crate::json::JsonError;
use crate::{Kind, Settings};

/// The suffix of the table that holds, per base row, the indexed values last written.
pub const STATE_SUFFIX: &str = "_state";

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexSettings {
    pub keyspace: String,
    /// The index table, in `keyspace`.
    pub table: String,
    /// The table the entries' cql payloads write: mutations of other tables are not indexed;
    /// a mutation that names no table is taken as one of this table.
    pub base_table: String,
    /// The base table's primary key columns.
    pub key: Vec<String>,
    /// The indexed columns.
    pub columns: Vec<String>,
    #[serde(default)]
    pub consistency: WriteConsistency,
}

impl IndexSettings {
    /// The state table's name.
    pub fn state_table(&self) -> String {
        format!("{}{STATE_SUFFIX}", self.table)
    }
}

impl Settings for IndexSettings {
    const KIND: Kind = Kind::Index;

    fn check(&self) -> Result<(), JsonError> {
        for (field, name) in [
            ("keyspace", &self.keyspace),
            ("table", &self.table),
            ("base_table", &self.base_table),
        ] {
            identifier(name).map_err(|reason| JsonError::at(field, reason))?;
        }
        identifier(&self.state_table()).map_err(|_| {
            JsonError::at(
                "table",
                format!(
                    "'{}' leaves no room for its state table '{}'; expected 42 characters at most",
                    self.table,
                    self.state_table()
                ),
            )
        })?;
        if self.table.eq_ignore_ascii_case(&self.base_table) {
            return Err(JsonError::at(
                "table",
                "the index table must not be its base table",
            ));
        }
        for (field, names) in [("key", &self.key), ("columns", &self.columns)] {
            if names.is_empty() {
                return Err(JsonError::at(
                    field,
                    "expected at least one column name, found an empty list",
                ));
            }
            for (i, name) in names.iter().enumerate() {
                identifier(name)
                    .map_err(|reason| JsonError::at(format!("{field}[{i}]"), reason))?;
            }
        }
        if let Some(both) = self
            .columns
            .iter()
            .find(|c| self.key.iter().any(|k| k.eq_ignore_ascii_case(c)))
        {
            return Err(JsonError::at(
                "columns",
                format!("'{both}' is a key column; an index is on other columns"),
            ));
        }
        Ok(())
    }
}
