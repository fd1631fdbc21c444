//! The index target: a secondary index of a cql table, kept from the same entries that write the
//! table (the cql payload, [`crate::cql::payload`]). Settings in [`wal_targets::index`].
//!
//! Each base row the payloads put or delete is one row of the index table: its indexed column
//! values and its primary key. A put whose indexed values changed must remove the old index row,
//! and the payload does not carry the old values, so the target keeps them itself, per base row,
//! in `<table>_state` (`key text PRIMARY KEY, indexed text`, both as JSON arrays), written with
//! the entry's write time as its timestamp. Every index write uses a write time too, so retries,
//! replays and reordering converge on the index of the newest write of each row:
//! - a write newer than (or as new as) the state: index row of the new values written at `t`,
//!   the old values' row deleted at `t`, the state set to the new values at `t`;
//! - a write older than the state (a late retry, a replay): the state is not touched, and a put's
//!   own index row, unless it is the current one, is deleted at the *state's* time, so its
//!   insert (at its own, older time) can never show, whatever order the two land in.
//!
//! A delete of a row (or of an indexed column) leaves the state as `null` rather than removing
//! it, so an older put that arrives later still finds the newer delete's time.
//!
//! The state is read before it is written: the index is exact when a row's writes are applied one
//! at a time, which a destination does for the entries of one key (write a row's mutations with
//! the row's key as the entry key).

use std::sync::Arc;

use async_trait::async_trait;
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;
use serde_json::{Map, Value};
use wal_targets::index::IndexSettings;

use crate::clients::Clients;
use crate::cql::errors::{classify, classify_prepare};
use crate::cql::payload::{self, Mutation as CqlMutation};
use crate::{Mutation, Target, TargetError, TargetKind};

#[derive(Debug)]
pub struct Index;

impl TargetKind for Index {
    type Settings = IndexSettings;

    /// The keyspace, as for the cql kind: its replicas serve the index and its state.
    fn endpoint(settings: &IndexSettings, _clients: &Clients) -> String {
        settings.keyspace.to_ascii_lowercase()
    }

    async fn build(
        settings: IndexSettings,
        clients: Arc<Clients>,
    ) -> Result<Arc<dyn Target>, TargetError> {
        let session = clients.cql().await?;
        let statements = Statements::prepare(&session, &settings).await?;
        Ok(Arc::new(IndexTarget {
            session,
            settings,
            statements,
        }))
    }
}

#[derive(Debug)]
struct Statements {
    read_state: PreparedStatement,
    write_state: PreparedStatement,
    insert: PreparedStatement,
    delete: PreparedStatement,
}

fn quoted(identifier: &str) -> String {
    format!("\"{}\"", identifier.to_ascii_lowercase())
}

impl Statements {
    async fn prepare(session: &Session, settings: &IndexSettings) -> Result<Self, TargetError> {
        let keyspace = quoted(&settings.keyspace);
        let table = quoted(&settings.table);
        let state = quoted(&settings.state_table());
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.{state} (key text PRIMARY KEY, indexed text)"
        );
        session
            .query_unpaged(create, &[])
            .await
            .map_err(|e| classify("creating the index's state table", &e))?;
        let clauses: Vec<String> = settings
            .columns
            .iter()
            .chain(&settings.key)
            .map(|c| format!("{} = fromJson(?)", quoted(c)))
            .collect();
        let texts = [
            format!("SELECT indexed, WRITETIME(indexed) FROM {keyspace}.{state} WHERE key = ?"),
            format!(
                "INSERT INTO {keyspace}.{state} (key, indexed) VALUES (?, ?) USING TIMESTAMP ?"
            ),
            format!("INSERT INTO {keyspace}.{table} JSON ? USING TIMESTAMP ?"),
            format!(
                "DELETE FROM {keyspace}.{table} USING TIMESTAMP ? WHERE {}",
                clauses.join(" AND ")
            ),
        ];
        let mut prepared = Vec::with_capacity(texts.len());
        for text in texts {
            let mut statement = session
                .prepare(text.as_str())
                .await
                .map_err(|e| classify_prepare(&text, &e))?;
            statement.set_consistency(crate::cql::consistency(settings.consistency));
            prepared.push(statement);
        }
        let [read_state, write_state, insert, delete] =
            <[PreparedStatement; 4]>::try_from(prepared).map_err(|_| {
                TargetError::permanent("index statements: expected four prepared statements")
            })?;
        Ok(Self {
            read_state,
            write_state,
            insert,
            delete,
        })
    }
}

#[derive(Debug)]
pub struct IndexTarget {
    session: Arc<Session>,
    settings: IndexSettings,
    statements: Statements,
}

/// What one mutation of the base table asks of the index.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The row `key` is indexed under `values` (the indexed columns', in the settings' order).
    Put { key: Vec<Value>, values: Vec<Value> },
    /// The row `key` is no longer indexed: deleted, or an indexed column deleted or set null.
    Remove { key: Vec<Value> },
}

/// The changes a cql payload asks of an index under `settings`, in order: none for mutations of
/// other tables, and for puts that write no indexed column. Every error is permanent.
pub fn changes(payload: &[u8], settings: &IndexSettings) -> Result<Vec<Change>, TargetError> {
    let parsed = payload::parse(payload)?;
    let mut changes = Vec::new();
    for (index, mutation) in parsed.mutations.into_iter().enumerate() {
        let table = match &mutation {
            CqlMutation::Put(put) => put.table.as_deref(),
            CqlMutation::Delete(delete) => delete.table.as_deref(),
        };
        if table.is_some_and(|t| !t.eq_ignore_ascii_case(&settings.base_table)) {
            continue;
        }
        let change = match mutation {
            CqlMutation::Put(put) => {
                let row: Map<String, Value> = serde_json::from_str(put.row.get()).map_err(|e| {
                    TargetError::permanent(format!(
                        "index: mutations[{index}].put.row is not a JSON object: {e}"
                    ))
                })?;
                let key = values_of(&row, &settings.key, index, "key")?;
                let given: Vec<Option<&Value>> =
                    settings.columns.iter().map(|c| column(&row, c)).collect();
                if given.iter().all(Option::is_none) {
                    continue;
                }
                if given.iter().any(Option::is_none) {
                    return Err(TargetError::permanent(format!(
                        "index: mutations[{index}].put writes some of the indexed columns {:?} but not all; an index row is made of all of them",
                        settings.columns
                    )));
                }
                let values: Vec<Value> = given.into_iter().flatten().cloned().collect();
                if values.iter().any(Value::is_null) {
                    Change::Remove { key }
                } else {
                    Change::Put { key, values }
                }
            }
            CqlMutation::Delete(delete) => {
                let key = values_of(&delete.key, &settings.key, index, "delete.key")?;
                let indexed_gone = delete.columns.as_ref().is_none_or(|columns| {
                    columns
                        .iter()
                        .any(|c| settings.columns.iter().any(|i| i.eq_ignore_ascii_case(c)))
                });
                if !indexed_gone {
                    continue;
                }
                Change::Remove { key }
            }
        };
        changes.push(change);
    }
    Ok(changes)
}

fn column<'a>(row: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    row.get(name).or_else(|| {
        row.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

fn values_of(
    row: &Map<String, Value>,
    names: &[String],
    index: usize,
    what: &str,
) -> Result<Vec<Value>, TargetError> {
    names
        .iter()
        .map(|name| match column(row, name) {
            Some(value) if !value.is_null() => Ok(value.clone()),
            _ => Err(TargetError::permanent(format!(
                "index: mutations[{index}] has no value for key column '{name}' in its {what}"
            ))),
        })
        .collect()
}

#[async_trait]
impl Target for IndexTarget {
    async fn apply(&self, mutation: Mutation<'_>) -> Result<(), TargetError> {
        let written = mutation.entry.original_write_time_micros;
        if written <= 0 {
            return Err(TargetError::permanent(
                "the entry has no original write time; an index writes with it (USING TIMESTAMP)",
            ));
        }
        for change in changes(mutation.payload, &self.settings)? {
            self.change(change, written).await?;
        }
        Ok(())
    }
}

impl IndexTarget {
    async fn change(&self, change: Change, written: i64) -> Result<(), TargetError> {
        let key = match &change {
            Change::Put { key, .. } | Change::Remove { key } => key,
        };
        let state_key = Value::Array(key.clone()).to_string();
        let (current, since) = self.state(&state_key).await?;
        let newer = written >= since;
        match (&change, newer) {
            (Change::Put { values, .. }, true) => {
                self.insert(values, key, written).await?;
                if let Some(old) = current.as_ref().filter(|old| *old != values) {
                    self.delete(old, key, written).await?;
                }
                self.record(&state_key, Some(values), written).await
            }
            // Superseded: its own row must never show, unless it is the current one.
            (Change::Put { values, .. }, false) if current.as_ref() != Some(values) => {
                self.delete(values, key, since).await
            }
            (Change::Remove { .. }, true) => {
                if let Some(old) = &current {
                    self.delete(old, key, written).await?;
                }
                self.record(&state_key, None, written).await
            }
            // A removal older than the state, or a put of the current values: nothing to do.
            _ => Ok(()),
        }
    }

    /// The values last indexed for the row (`None`: not indexed) and the write time they were
    /// recorded with; `(None, i64::MIN)` for a row never seen.
    async fn state(&self, key: &str) -> Result<(Option<Vec<Value>>, i64), TargetError> {
        let rows = self
            .session
            .execute_unpaged(&self.statements.read_state, (key,))
            .await
            .map_err(|e| classify("index state read", &e))?
            .into_rows_result()
            .map_err(|e| TargetError::retryable(format!("index state read: {e}")))?;
        let row = rows
            .maybe_first_row::<(Option<String>, Option<i64>)>()
            .map_err(|e| TargetError::permanent(format!("index state row: {e}")))?;
        let Some((indexed, Some(since))) = row else {
            return Ok((None, i64::MIN));
        };
        let values = match indexed.as_deref().map(serde_json::from_str::<Value>) {
            Some(Ok(Value::Array(values))) => Some(values),
            _ => None,
        };
        Ok((values, since))
    }

    async fn record(
        &self,
        key: &str,
        values: Option<&Vec<Value>>,
        written: i64,
    ) -> Result<(), TargetError> {
        let indexed = values.map_or_else(
            || "null".to_owned(),
            |v| Value::Array(v.clone()).to_string(),
        );
        self.session
            .execute_unpaged(&self.statements.write_state, (key, indexed, written))
            .await
            .map_err(|e| classify("index state write", &e))?;
        Ok(())
    }

    async fn insert(
        &self,
        values: &[Value],
        key: &[Value],
        written: i64,
    ) -> Result<(), TargetError> {
        let mut row = Map::new();
        for (name, value) in self.settings.columns.iter().zip(values) {
            row.insert(name.to_ascii_lowercase(), value.clone());
        }
        for (name, value) in self.settings.key.iter().zip(key) {
            row.insert(name.to_ascii_lowercase(), value.clone());
        }
        let json = Value::Object(row).to_string();
        self.session
            .execute_unpaged(&self.statements.insert, (json, written))
            .await
            .map_err(|e| classify("index write", &e))?;
        Ok(())
    }

    async fn delete(&self, values: &[Value], key: &[Value], at: i64) -> Result<(), TargetError> {
        let mut bound: Vec<scylla::value::CqlValue> = vec![scylla::value::CqlValue::BigInt(at)];
        bound.extend(
            values
                .iter()
                .chain(key)
                .map(|v| scylla::value::CqlValue::Text(v.to_string())),
        );
        self.session
            .execute_unpaged(&self.statements.delete, bound)
            .await
            .map_err(|e| classify("index delete", &e))?;
        Ok(())
    }
}

impl IndexTarget {
    /// The index of `settings` (its state table created when missing), for a rebuild.
    pub async fn connect(settings: IndexSettings, clients: &Clients) -> Result<Self, TargetError> {
        let session = clients.cql().await?;
        let statements = Statements::prepare(&session, &settings).await?;
        Ok(Self {
            session,
            settings,
            statements,
        })
    }

    /// Indexes every row of the base table, each with the write time of its indexed columns
    /// (the latest of them), as if its last write were applied again: rows the index already
    /// has stay as they are, and entries applied meanwhile converge with it by their times. For
    /// a namespace that adds an index over a table that already has rows. Calls `progress` with
    /// the rows read so far every 1,000 rows; returns the rows read and those indexed.
    pub async fn rebuild(&self, progress: impl Fn(u64) + Sync) -> Result<(u64, u64), TargetError> {
        use futures::TryStreamExt as _;
        use std::sync::atomic::{AtomicU64, Ordering};

        let keyspace = quoted(&self.settings.keyspace);
        let base = quoted(&self.settings.base_table);
        let mut selectors: Vec<String> = self
            .settings
            .key
            .iter()
            .chain(&self.settings.columns)
            .map(|c| quoted(c))
            .collect();
        selectors.extend(
            self.settings
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| format!("WRITETIME({}) AS wal_written_{i}", quoted(c))),
        );
        let select = format!(
            "SELECT JSON {} FROM {keyspace}.{base}",
            selectors.join(", ")
        );
        let pager = self
            .session
            .query_iter(select, ())
            .await
            .map_err(|e| TargetError::unavailable(format!("reading the base table: {e}")))?;
        let (read, indexed) = (AtomicU64::new(0), AtomicU64::new(0));
        pager
            .rows_stream::<(String,)>()
            .map_err(|e| TargetError::permanent(format!("reading the base table: {e}")))?
            .map_err(|e| TargetError::retryable(format!("reading the base table: {e}")))
            .try_for_each_concurrent(32, |(json,)| {
                let (read, indexed, progress) = (&read, &indexed, &progress);
                async move {
                    let count = read.fetch_add(1, Ordering::Relaxed) + 1;
                    if count % 1_000 == 0 {
                        progress(count);
                    }
                    let Some((change, written)) = self.base_row(&json)? else {
                        return Ok(());
                    };
                    self.change(change, written).await?;
                    indexed.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                }
            })
            .await?;
        Ok((read.into_inner(), indexed.into_inner()))
    }

    /// The change a base row read back stands for, with its write time: none for a row whose
    /// indexed columns are not all set.
    fn base_row(&self, json: &str) -> Result<Option<(Change, i64)>, TargetError> {
        let row: Map<String, Value> = serde_json::from_str(json)
            .map_err(|e| TargetError::permanent(format!("a base row as JSON: {e}")))?;
        let key = values_of(&row, &self.settings.key, 0, "base row")?;
        let values: Option<Vec<Value>> = self
            .settings
            .columns
            .iter()
            .map(|c| column(&row, c).filter(|v| !v.is_null()).cloned())
            .collect();
        let written = (0..self.settings.columns.len())
            .filter_map(|i| row.get(&format!("wal_written_{i}")).and_then(Value::as_i64))
            .max();
        Ok(values
            .zip(written)
            .map(|(values, written)| (Change::Put { key, values }, written)))
    }
}
