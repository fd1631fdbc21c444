//! The cql kind: row puts and deletes in ScyllaDB or Cassandra.
//! Settings: `{"keyspace": "app", "table": "users", "consistency": "LOCAL_QUORUM"}`; the table is
//! the default for mutations that name none, the consistency (LOCAL_QUORUM unless given) is
//! every write's.

use serde::Deserialize;

use crate::json::JsonError;
use crate::{Kind, Settings};

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CqlSettings {
    pub keyspace: String,
    pub table: String,
    /// How many replicas acknowledge each write before the entry counts as applied.
    #[serde(default)]
    pub consistency: WriteConsistency,
}

/// The consistency levels a write may ask for, in CQL's spelling. An entry is acknowledged only
/// after its write was: with LOCAL_QUORUM and a replication factor of 3, a write survives the
/// loss of any one replica of the local data center.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WriteConsistency {
    One,
    Two,
    Three,
    Quorum,
    All,
    #[default]
    LocalQuorum,
    EachQuorum,
    LocalOne,
}

impl Settings for CqlSettings {
    const KIND: Kind = Kind::Cql;
    // Every statement carries the entry's write time as its timestamp (USING TIMESTAMP): the
    // latest write wins whatever order the writes land in.
    const ANY_ORDER: bool = true;

    fn check(&self) -> Result<(), JsonError> {
        for (field, name) in [("keyspace", &self.keyspace), ("table", &self.table)] {
            identifier(name).map_err(|reason| JsonError::at(field, reason))?;
        }
        Ok(())
    }
}

/// `name` when it is a plain CQL identifier: a letter, then letters, digits or '_', 48 at most.
/// Only such names are ever put into statement text.
pub fn identifier(name: &str) -> Result<&str, String> {
    if is_identifier(name) {
        Ok(name)
    } else {
        Err(format!(
            "'{name}' is not a CQL identifier; expected a letter, then letters, digits or '_' (48 at most)"
        ))
    }
}

/// Whether `name` is a plain CQL identifier (see [`identifier`]).
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    starts_with_letter && rest_ok && name.len() <= 48
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_plain() {
        assert!(is_identifier("wal_durable"));
        for bad in ["", "1abc", "a-b", "a;DROP", &"k".repeat(49)] {
            assert!(!is_identifier(bad), "{bad} accepted");
        }
    }
}
