//! The cql target's payload: row puts and deletes, as JSON.
//!
//! ```json
//! {"mutations": [
//!   {"put":    {"table": "users", "row": {"id": "u1", "name": "Ann", "visits": 3}, "ttl_seconds": 86400}},
//!   {"delete": {"table": "users", "key": {"id": "u2"}}},
//!   {"delete": {"key": {"id": "u3"}, "columns": ["name"]}}
//! ]}
//! ```
//! - `put` writes the columns in `row` (which must include the primary key) and leaves the
//!   others as they are (`INSERT ... JSON ... DEFAULT UNSET`). Values are CQL's JSON encoding:
//!   strings for text, uuid, timestamp and inet, numbers for numeric types, `"0x..."` for blobs.
//! - `delete` removes the row with the given primary key, or only the named `columns` of it.
//! - `table` defaults to the target's table; every table is in the target's keyspace.
//! - Several mutations in one entry are applied in one logged batch: all or none, eventually.
//! - Every statement carries `USING TIMESTAMP` = the entry's original write time. A replay, a
//!   duplicate or a reordering therefore converges to the same rows: the write with the later
//!   original time wins, and at equal times a delete wins (CQL's tie rule).

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::TargetError;

/// Mutations one entry may carry: a batch that large is already past CQL's batch size warning.
pub const MAX_MUTATIONS: usize = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    pub mutations: Vec<Mutation>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Mutation {
    Put(Put),
    Delete(Delete),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Put {
    #[serde(default)]
    pub table: Option<String>,
    /// Kept as the JSON text it came in: it is bound as is to `INSERT ... JSON ?`, and the
    /// server checks the column names and values against the table.
    pub row: Box<RawValue>,
    #[serde(default)]
    pub ttl_seconds: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delete {
    #[serde(default)]
    pub table: Option<String>,
    /// The primary key: every partition and clustering column.
    pub key: Map<String, Value>,
    /// Only these columns; the whole row when absent.
    #[serde(default)]
    pub columns: Option<Vec<String>>,
}

impl Mutation {
    /// The table it names; `None`: the target's own.
    pub fn table(&self) -> Option<&str> {
        match self {
            Self::Put(put) => put.table.as_deref(),
            Self::Delete(delete) => delete.table.as_deref(),
        }
    }

    /// Whether it may be a mutation of `table`: it names that table (CQL folds unquoted names,
    /// so in any case) or names none.
    pub fn may_be_of(&self, table: &str) -> bool {
        self.table()
            .is_none_or(|named| named.eq_ignore_ascii_case(table))
    }
}

/// The value of column `name` in a row or a key as a payload gives it: under that name, else
/// under the name in another case.
pub fn column<'a>(row: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    row.get(name).or_else(|| {
        row.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

/// The values of columns `names` in `row`, or the first one missing or null.
pub fn values_of<'a>(row: &Map<String, Value>, names: &'a [String]) -> Result<Vec<Value>, &'a str> {
    names
        .iter()
        .map(|name| match column(row, name) {
            Some(value) if !value.is_null() => Ok(value.clone()),
            _ => Err(name.as_str()),
        })
        .collect()
}

/// Parses a payload, naming what was wrong and where. Every error is permanent: the same bytes
/// will never parse.
pub fn parse(payload: &[u8]) -> Result<Payload, TargetError> {
    let parsed: Payload = wal_targets::json::parse(payload).map_err(|e| {
        TargetError::permanent(format!(
            "cql payload is invalid at '{}': {}; expected {{\"mutations\": [{{\"put\": {{\"row\": {{...}}}}}} | {{\"delete\": {{\"key\": {{...}}}}}}, ...]}}",
            e.path, e.reason
        ))
    })?;
    if parsed.mutations.is_empty() || parsed.mutations.len() > MAX_MUTATIONS {
        return Err(TargetError::permanent(format!(
            "cql payload has {} mutations; expected 1 to {MAX_MUTATIONS}",
            parsed.mutations.len()
        )));
    }
    for (index, mutation) in parsed.mutations.iter().enumerate() {
        check(index, mutation)?;
    }
    Ok(parsed)
}

fn check(index: usize, mutation: &Mutation) -> Result<(), TargetError> {
    let at = |field: &str| format!("mutations[{index}].{field}");
    let (table, names): (&Option<String>, Vec<&String>) = match mutation {
        Mutation::Put(put) if !is_non_empty_object(put.row.get()) => {
            return Err(TargetError::permanent(format!(
                "cql payload: {} is not a non-empty object; expected the row's columns including its primary key",
                at("put.row")
            )));
        }
        Mutation::Put(put) => (&put.table, Vec::new()),
        Mutation::Delete(delete) if delete.key.is_empty() => {
            return Err(TargetError::permanent(format!(
                "cql payload: {} is empty; expected the row's primary key columns",
                at("delete.key")
            )));
        }
        Mutation::Delete(Delete {
            columns: Some(columns),
            ..
        }) if columns.is_empty() => {
            // An empty list would make `DELETE FROM`, the whole row: refused, not guessed.
            return Err(TargetError::permanent(format!(
                "cql payload: {} is empty; name the columns to delete, or leave it out to delete the row",
                at("delete.columns")
            )));
        }
        Mutation::Delete(delete) => {
            let mut names: Vec<&String> = delete.key.keys().collect();
            names.extend(delete.columns.iter().flatten());
            (&delete.table, names)
        }
    };
    if let Some(table) = table {
        identifier(table)
            .map_err(|e| TargetError::permanent(format!("cql payload: {}: {e}", at("table"))))?;
    }
    for name in names {
        identifier(name).map_err(|e| {
            TargetError::permanent(format!("cql payload: mutations[{index}]: column {e}"))
        })?;
    }
    Ok(())
}

fn is_non_empty_object(json: &str) -> bool {
    let inner = json
        .trim()
        .strip_prefix('{')
        .and_then(|j| j.strip_suffix('}'));
    inner.is_some_and(|inner| !inner.trim().is_empty())
}

/// CQL names are put into statement text, so only plain identifiers are accepted.
pub use wal_targets::cql::identifier;

#[cfg(test)]
mod tests {
    use super::*;

    fn permanent(payload: &str) -> String {
        match parse(payload.as_bytes()) {
            Err(error @ TargetError::Permanent { .. }) => error.to_string(),
            other => panic!("expected a permanent error for {payload}, got {other:?}"),
        }
    }

    #[test]
    fn puts_and_deletes_parse() {
        let payload = parse(
            br#"{"mutations":[{"put":{"row":{"id":"a","n":1},"ttl_seconds":60}},{"delete":{"table":"t2","key":{"id":"a"},"columns":["n"]}}]}"#,
        )
        .unwrap();
        assert_eq!(payload.mutations.len(), 2);
        assert!(
            matches!(&payload.mutations[0], Mutation::Put(p) if p.ttl_seconds == Some(60) && p.table.is_none() && p.row.get() == r#"{"id":"a","n":1}"#)
        );
        assert!(
            matches!(&payload.mutations[1], Mutation::Delete(d) if d.columns.as_deref() == Some(&["n".to_owned()][..]))
        );
    }

    #[test]
    fn malformed_payloads_say_where_and_what_was_expected() {
        assert!(permanent("not json").contains("expected {\"mutations\""));
        assert!(permanent(r#"{"mutations":[{"upsert":{}}]}"#).contains("mutations[0]"));
        assert!(
            permanent(r#"{"mutations":[{"put":{"row":{"id":1},"colour":1}}]}"#)
                .contains("unknown field `colour`")
        );
        assert!(permanent(r#"{"mutations":[]}"#).contains("0 mutations"));
        assert!(
            permanent(r#"{"mutations":[{"put":{"row":{}}}]}"#)
                .contains("mutations[0].put.row is not a non-empty object")
        );
        assert!(
            permanent(r#"{"mutations":[{"delete":{"key":{"id":1},"columns":[]}}]}"#)
                .contains("mutations[0].delete.columns is empty")
        );
        assert!(
            permanent(r#"{"mutations":[{"delete":{"key":{}}}]}"#)
                .contains("mutations[0].delete.key is empty")
        );
    }

    #[test]
    fn names_that_are_not_identifiers_are_refused() {
        assert!(
            permanent(r#"{"mutations":[{"put":{"table":"t; DROP","row":{"id":1}}}]}"#)
                .contains("mutations[0].table")
        );
        assert!(
            permanent(r#"{"mutations":[{"delete":{"key":{"id = 1 OR":1}}}]}"#)
                .contains("not a CQL identifier")
        );
        assert!(
            permanent(r#"{"mutations":[{"delete":{"key":{"id":1},"columns":["a b"]}}]}"#)
                .contains("'a b'")
        );
    }
}
