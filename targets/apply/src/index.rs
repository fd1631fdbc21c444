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
use std::time::Duration;

use async_trait::async_trait;
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::unprepared::Statement;
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

/// How long creating the state table may take. The target's request timeout is sized for a
/// row's write, and a schema change on a loaded cluster takes longer (the coordinator writes the
/// new schema and spreads it before it answers): the index test's 3 s failed it in CI,
/// 2026-11-30. A delivery that builds the target still bounds the build by the consumer's apply
/// timeout (10 s by default); walctl's index rebuild and a test's own build wait this long.
const SCHEMA_CHANGE_TIMEOUT: Duration = Duration::from_secs(30);

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
        let mut create = Statement::new(format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.{state} (key text PRIMARY KEY, indexed text)"
        ));
        create.set_request_timeout(Some(SCHEMA_CHANGE_TIMEOUT));
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
            // TTL 0 is none: a row the table keeps for ever has an index row kept as long.
            format!("INSERT INTO {keyspace}.{table} JSON ? USING TIMESTAMP ? AND TTL ?"),
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
    /// The row `key` is indexed under `values` (the indexed columns', in the settings' order),
    /// for `ttl` seconds when the put gave one (its row expires then).
    Put {
        key: Vec<Value>,
        values: Vec<Value>,
        ttl: Option<u32>,
    },
    /// The row `key` is no longer indexed: deleted, or an indexed column deleted or set null.
    Remove { key: Vec<Value> },
}

/// The changes a cql payload asks of an index under `settings`, in order: none for mutations of
/// other tables, and for puts that write no indexed column. Every error is permanent.
pub fn changes(payload: &[u8], settings: &IndexSettings) -> Result<Vec<Change>, TargetError> {
    let parsed = payload::parse(payload)?;
    let mut changes = Vec::new();
    for (index, mutation) in parsed.mutations.into_iter().enumerate() {
        if !mutation.may_be_of(&settings.base_table) {
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
                let given: Vec<Option<&Value>> = settings
                    .columns
                    .iter()
                    .map(|c| payload::column(&row, c))
                    .collect();
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
                    Change::Put {
                        key,
                        values,
                        ttl: put.ttl_seconds,
                    }
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

fn values_of(
    row: &Map<String, Value>,
    names: &[String],
    index: usize,
    what: &str,
) -> Result<Vec<Value>, TargetError> {
    payload::values_of(row, names).map_err(|name| {
        TargetError::permanent(format!(
            "index: mutations[{index}] has no value for key column '{name}' in its {what}"
        ))
    })
}

/// What the state table holds for one base row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// The values last indexed (`None`: not indexed: removed, or never seen).
    pub current: Option<Vec<Value>>,
    /// The write time of the last change recorded; `None` for a row never seen.
    pub since: Option<i64>,
}

/// One write an index change makes.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// The index row of `values`, at the change's write time.
    Insert {
        values: Vec<Value>,
        ttl: Option<u32>,
    },
    /// A tombstone for the index row of `values`, at `at`.
    Delete { values: Vec<Value>, at: i64 },
    /// The row's new state, at the change's write time.
    Record(Option<Vec<Value>>),
}

/// The writes `change`, written at `written`, makes to the index of a row in `state`. Pure, so
/// its rules are tested without a cluster. A change wins when it is newer than the state, or as
/// new and CQL would let it win a tie: a removal beats a put, and of two puts the one whose
/// values' JSON sorts last (as CQL's larger value wins for text columns).
pub fn actions(change: &Change, state: &State, written: i64) -> Vec<Action> {
    let current = state.current.as_ref();
    let wins = match state.since {
        None => true,
        Some(since) if written != since => written > since,
        Some(_) => match change {
            Change::Remove { .. } => true,
            Change::Put { values, .. } => {
                current.is_some_and(|old| json_text(values) > json_text(old))
            }
        },
    };
    match (change, wins) {
        (Change::Put { values, ttl, .. }, true) => {
            let mut actions = vec![Action::Insert {
                values: values.clone(),
                ttl: *ttl,
            }];
            if let Some(old) = current.filter(|old| *old != values) {
                // Just before this write (never before the old row's): should the two spell one
                // CQL row, this write's insert still stands.
                let at = state.since.map_or(written, |since| since.max(written - 1));
                actions.push(Action::Delete {
                    values: old.clone(),
                    at,
                });
            }
            actions.push(Action::Record(Some(values.clone())));
            actions
        }
        // Superseded: its own row must never show, unless it is the current one. The tombstone
        // is at the state's time, so it outlives this put's insert whichever lands first.
        (Change::Put { values, .. }, false) if current != Some(values) => vec![Action::Delete {
            values: values.clone(),
            at: state.since.unwrap_or(written),
        }],
        (Change::Remove { .. }, true) => {
            let mut actions: Vec<Action> = current
                .map(|old| Action::Delete {
                    values: old.clone(),
                    at: written,
                })
                .into_iter()
                .collect();
            actions.push(Action::Record(None));
            actions
        }
        // A removal older than the state, or a put of the current values: nothing to do.
        _ => Vec::new(),
    }
}

fn json_text(values: &[Value]) -> String {
    Value::Array(values.to_vec()).to_string()
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
        let state = self.state(&state_key).await?;
        for action in actions(&change, &state, written) {
            match action {
                Action::Insert { values, ttl } => self.insert(&values, key, written, ttl).await?,
                Action::Delete { values, at } => self.delete(&values, key, at).await?,
                Action::Record(values) => self.record(&state_key, values.as_ref(), written).await?,
            }
        }
        Ok(())
    }

    /// What the state table holds for the row.
    async fn state(&self, key: &str) -> Result<State, TargetError> {
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
            return Ok(State::default());
        };
        let current = match indexed.as_deref().map(serde_json::from_str::<Value>) {
            Some(Ok(Value::Array(values))) => Some(values),
            _ => None,
        };
        Ok(State {
            current,
            since: Some(since),
        })
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
        ttl: Option<u32>,
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
            .execute_unpaged(
                &self.statements.insert,
                (
                    json,
                    written,
                    ttl.map_or(0, |t| i32::try_from(t).unwrap_or(i32::MAX)),
                ),
            )
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
            .map(|c| payload::column(&row, c).filter(|v| !v.is_null()).cloned())
            .collect();
        let written = (0..self.settings.columns.len())
            .filter_map(|i| row.get(&format!("wal_written_{i}")).and_then(Value::as_i64))
            .max();
        Ok(values.zip(written).map(|(values, written)| {
            let put = Change::Put {
                key,
                values,
                ttl: None,
            };
            (put, written)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(value: &str) -> Change {
        Change::Put {
            key: vec![Value::from("row1")],
            values: vec![Value::from(value)],
            ttl: None,
        }
    }

    fn remove() -> Change {
        Change::Remove {
            key: vec![Value::from("row1")],
        }
    }

    fn state(current: Option<&str>, since: i64) -> State {
        State {
            current: current.map(|v| vec![Value::from(v)]),
            since: Some(since),
        }
    }

    fn insert(value: &str) -> Action {
        Action::Insert {
            values: vec![Value::from(value)],
            ttl: None,
        }
    }

    fn delete(value: &str, at: i64) -> Action {
        Action::Delete {
            values: vec![Value::from(value)],
            at,
        }
    }

    fn record(value: Option<&str>) -> Action {
        Action::Record(value.map(|v| vec![Value::from(v)]))
    }

    #[test]
    fn a_newer_put_moves_the_row_and_an_older_one_tombstones_its_own() {
        assert_eq!(
            actions(&put("a"), &State::default(), 10),
            [insert("a"), record(Some("a"))]
        );
        assert_eq!(
            actions(&put("b"), &state(Some("a"), 10), 20),
            [insert("b"), delete("a", 19), record(Some("b"))]
        );
        assert_eq!(
            actions(&put("a"), &state(Some("b"), 20), 10),
            [delete("a", 20)]
        );
        assert_eq!(actions(&put("b"), &state(Some("b"), 20), 10), []);
        // After a removal, an older put cannot come back.
        assert_eq!(actions(&put("a"), &state(None, 20), 10), [delete("a", 20)]);
    }

    #[test]
    fn a_removal_deletes_the_current_row_and_keeps_its_time() {
        assert_eq!(
            actions(&remove(), &state(Some("a"), 10), 20),
            [delete("a", 20), record(None)]
        );
        assert_eq!(actions(&remove(), &state(Some("a"), 20), 10), []);
    }

    #[test]
    fn ties_go_as_cql_decides_them() {
        // A removal beats a put at the same time, in either order (a delete and a put of one
        // row in one entry leave no row in the table either).
        assert_eq!(
            actions(&remove(), &state(Some("a"), 10), 10),
            [delete("a", 10), record(None)]
        );
        assert_eq!(actions(&put("a"), &state(None, 10), 10), [delete("a", 10)]);
        // Of two puts at one time, the larger value stays, in either order.
        assert_eq!(
            actions(&put("b"), &state(Some("a"), 10), 10),
            [insert("b"), delete("a", 10), record(Some("b"))]
        );
        assert_eq!(
            actions(&put("a"), &state(Some("b"), 10), 10),
            [delete("a", 10)]
        );
        // The same put again changes nothing.
        assert_eq!(actions(&put("a"), &state(Some("a"), 10), 10), []);
    }
}
