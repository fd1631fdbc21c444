//! The cache target: sets and deletes in memcached.
//!
//! Settings: `{"servers": ["host:port"], "ttl_seconds": 3600, "ttl_spread_seconds": 360}`, all
//! optional: servers default to the consumer's `--memcached`, the TTL to one hour, the spread to
//! a tenth of the TTL. Keys are spread over several servers by jump consistent hash.
//!
//! Payload:
//! ```json
//! {"set": {"key": "user:1", "value": "text", "ttl_seconds": 60}}
//! {"set": {"key": "user:1", "value_base64": "AAEC"}}
//! {"delete": {"key": "user:1"}}
//! ```
//! With `rows` in its settings, the payload is the cql kind's instead (`{"mutations": [...]}`),
//! so one write feeds a table and its cache: each put sets `<prefix><key values joined by ':'>`
//! to the row it wrote (its JSON, as written), each delete removes the key. A put that writes
//! some of a row's columns caches those columns only: a service that writes rows in parts
//! should cache them elsewhere.
//! Each set's TTL is lengthened by a random share of the spread, so keys written together do not
//! expire together and send a stampede to the database behind the cache.
//!
//! Idempotent: a set written twice holds the same value, a delete of a missing key succeeds.
//! memcached keeps no write times, so unlike cql a *reordered* set and delete of one key are not
//! reconciled; keys whose writes race should go through one queue (entries of a key keep their
//! order on it) and short TTLs bound any leftover.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use base64::Engine as _;
use memcache::MemcacheError;
use memcache::exp::MutationStatus;
use rand::Rng as _;
use serde::Deserialize;
use wal_targets::cache::{CacheSettings, RowsSettings};

use super::{Mutation, Target, TargetError, TargetKind};
use crate::clients::{Clients, Memcached};

/// memcached's longest key.
const MAX_KEY_BYTES: usize = 250;
/// TTLs longer than this are read by memcached as a Unix time, so they are sent as one.
const RELATIVE_TTL_LIMIT: u64 = 30 * 24 * 3600;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
enum Payload {
    Set(Set),
    Delete(Delete),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Set {
    key: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    value_base64: Option<String>,
    #[serde(default)]
    ttl_seconds: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Delete {
    key: String,
}

#[derive(Debug)]
pub struct Cache;

impl TargetKind for Cache {
    type Settings = CacheSettings;

    fn endpoint(settings: &CacheSettings, clients: &Clients) -> String {
        let mut servers = clients.memcached_servers(&settings.servers);
        servers.sort();
        servers.join(",")
    }

    async fn build(
        settings: CacheSettings,
        clients: Arc<Clients>,
    ) -> Result<Arc<dyn Target>, TargetError> {
        let client = clients.memcached(&settings.servers).await?;
        Ok(Arc::new(CacheTarget { client, settings }))
    }
}

#[derive(Debug)]
pub struct CacheTarget {
    client: Memcached,
    settings: CacheSettings,
}

/// What a cache payload asks of memcached, checked: parsing is apart from sending (and from the
/// TTL's random spread), so it can be fuzzed without a server, the same input taking the same
/// path every time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `ttl_seconds`: the payload's, or the settings' when it names none; the spread is added
    /// when it is sent.
    Set {
        key: String,
        value: Vec<u8>,
        ttl_seconds: u64,
    },
    Delete {
        key: String,
    },
}

/// The command a payload asks for under `settings`, or why it is not one (a permanent failure:
/// the same payload fails the same way every time).
pub fn command(payload: &[u8], settings: &CacheSettings) -> Result<Command, TargetError> {
    let payload: Payload = wal_targets::json::parse(payload).map_err(|e| {
        TargetError::permanent(format!(
            "cache payload is invalid at '{}': {}; expected {{\"set\": {{\"key\": ..., \"value\": ...}}}} or {{\"delete\": {{\"key\": ...}}}}",
            e.path, e.reason
        ))
    })?;
    match payload {
        Payload::Set(set) => {
            check_key(&set.key)?;
            let value = match (set.value, set.value_base64) {
                (Some(text), None) => text.into_bytes(),
                (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .map_err(|e| {
                        TargetError::permanent(format!(
                            "cache payload: set.value_base64 is not base64: {e}"
                        ))
                    })?,
                _ => {
                    return Err(TargetError::permanent(
                        "cache payload: set needs exactly one of \"value\" and \"value_base64\"",
                    ));
                }
            };
            Ok(Command::Set {
                key: set.key,
                value,
                ttl_seconds: set.ttl_seconds.unwrap_or(settings.ttl_seconds),
            })
        }
        Payload::Delete(delete) => {
            check_key(&delete.key)?;
            Ok(Command::Delete { key: delete.key })
        }
    }
}

/// The commands a cql payload's mutations ask of a cache that keeps `rows`, in order: none for
/// a mutation of another table than `rows.table`.
pub fn row_commands(
    payload: &[u8],
    rows: &RowsSettings,
    settings: &CacheSettings,
) -> Result<Vec<Command>, TargetError> {
    use crate::cql::payload::Mutation as CqlMutation;
    let parsed = crate::cql::payload::parse(payload)?;
    let mut commands = Vec::with_capacity(parsed.mutations.len());
    for (index, mutation) in parsed.mutations.into_iter().enumerate() {
        if rows
            .table
            .as_ref()
            .is_some_and(|cached| !mutation.may_be_of(cached))
        {
            continue;
        }
        commands.push(match mutation {
            CqlMutation::Put(put) => {
                let row: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(put.row.get()).map_err(|e| {
                        TargetError::permanent(format!(
                            "cache rows: mutations[{index}].put.row is not a JSON object: {e}"
                        ))
                    })?;
                Command::Set {
                    key: row_key(rows, index, &row)?,
                    value: put.row.get().as_bytes().to_vec(),
                    // A row the table expires leaves the cache no later.
                    ttl_seconds: put.ttl_seconds.map_or(settings.ttl_seconds, |ttl| {
                        settings.ttl_seconds.min(u64::from(ttl))
                    }),
                }
            }
            CqlMutation::Delete(delete) => Command::Delete {
                key: row_key(rows, index, &delete.key)?,
            },
        });
    }
    Ok(commands)
}

/// A row's cache key: the prefix, then the key's value (a string as it is, any other value as
/// JSON), or with several key columns their values as a JSON array, so no two keys read alike.
fn row_key(
    rows: &RowsSettings,
    index: usize,
    values: &serde_json::Map<String, serde_json::Value>,
) -> Result<String, TargetError> {
    let parts = crate::cql::payload::values_of(values, &rows.key).map_err(|column| {
        TargetError::permanent(format!(
            "cache rows: mutations[{index}] has no value for key column '{column}'; the cache's rows.key names {:?}",
            rows.key
        ))
    })?;
    let key = match parts.as_slice() {
        [serde_json::Value::String(text)] => format!("{}{text}", rows.prefix),
        [one] => format!("{}{one}", rows.prefix),
        _ => format!("{}{}", rows.prefix, serde_json::Value::Array(parts)),
    };
    check_key(&key)
        .map_err(|e| TargetError::permanent(format!("cache rows: mutations[{index}]: {e}")))?;
    Ok(key)
}

impl CacheTarget {
    async fn send(&self, command: Command) -> Result<(), TargetError> {
        match command {
            Command::Set {
                key,
                value,
                ttl_seconds,
            } => {
                let result = self
                    .client
                    .set(key, value)
                    .ttl(ttl(&self.settings, ttl_seconds))
                    .send()
                    .await
                    .map_err(classify)?;
                if result.stored() {
                    Ok(())
                } else {
                    Err(TargetError::retryable(format!(
                        "memcached set answered {:?}",
                        result.status
                    )))
                }
            }
            Command::Delete { key } => {
                let result = self.client.delete(key).send().await.map_err(classify)?;
                // Deleting what is not there is the effect a delete wants.
                match result.status {
                    MutationStatus::Stored | MutationStatus::NotFound => Ok(()),
                    other => Err(TargetError::retryable(format!(
                        "memcached delete answered {other:?}"
                    ))),
                }
            }
        }
    }
}

#[async_trait]
impl Target for CacheTarget {
    async fn apply(&self, mutation: Mutation<'_>) -> Result<(), TargetError> {
        let Some(rows) = &self.settings.rows else {
            return self.send(command(mutation.payload, &self.settings)?).await;
        };
        // In order: a put then a delete of one key in one entry leaves it deleted.
        for command in row_commands(mutation.payload, rows, &self.settings)? {
            self.send(command).await?;
        }
        Ok(())
    }
}

/// The TTL to send: the base plus a random share of the spread, as memcached reads it.
fn ttl(settings: &CacheSettings, base: u64) -> u32 {
    let spread = settings.ttl_spread_seconds.unwrap_or(base / 10);
    let ttl = base.saturating_add(rand::rng().random_range(0..=spread));
    let ttl = if ttl > RELATIVE_TTL_LIMIT {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        now.as_secs().saturating_add(ttl)
    } else {
        ttl
    };
    u32::try_from(ttl).unwrap_or(u32::MAX)
}

fn check_key(key: &str) -> Result<(), TargetError> {
    if key.is_empty()
        || key.len() > MAX_KEY_BYTES
        || key.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(TargetError::permanent(format!(
            "cache key {key:?} is not a memcached key; expected 1 to {MAX_KEY_BYTES} bytes without spaces or control characters"
        )));
    }
    Ok(())
}

/// Requests memcached will refuse again are permanent: malformed ones, and values over its item
/// size limit (a SERVER_ERROR, told apart from "out of memory" only by its text). A connection
/// that cannot be made or was lost is the cache being unavailable; the rest (a timeout, memory
/// pressure) retries.
fn classify(error: MemcacheError) -> TargetError {
    let too_large =
        matches!(&error, MemcacheError::ServerError(e) if e.to_string().contains("too large"));
    let failure = match &error {
        MemcacheError::ClientError(_) | MemcacheError::CommandError(_) => {
            TargetError::permanent("memcached refused the request")
        }
        _ if too_large => TargetError::permanent("memcached refused the value"),
        MemcacheError::IOError(io) if !is_timeout(io) => TargetError::unavailable("memcached"),
        MemcacheError::PoolError(_) => TargetError::unavailable("memcached"),
        _ => TargetError::retryable("memcached"),
    };
    failure.caused_by(error)
}

fn is_timeout(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> CacheSettings {
        wal_targets::parse(
            r#"{"ttl_seconds": 60, "rows": {"key": ["shop", "id"], "prefix": "orders:", "table": "orders"}}"#,
        )
        .unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn rows(payload: &str) -> Result<Vec<Command>, TargetError> {
        let settings = settings();
        let rows = settings.rows.clone().unwrap_or_else(|| panic!("rows"));
        row_commands(payload.as_bytes(), &rows, &settings)
    }

    #[test]
    fn a_table_cache_sets_each_put_row_and_removes_each_deleted_one_in_order() {
        let commands = rows(
            r#"{"mutations": [
                {"put": {"row": {"shop": "s1", "id": 7, "total": 12.5}, "ttl_seconds": 30}},
                {"put": {"table": "other", "row": {"x": 1}}},
                {"delete": {"key": {"shop": "s1", "id": 8}, "columns": ["total"]}},
                {"delete": {"table": "orders", "key": {"shop": "s2", "id": 9}}}
            ]}"#,
        );
        // The mutation of another table is not cached; the put's TTL bounds the cache's.
        let commands = commands.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            commands,
            [
                Command::Set {
                    key: r#"orders:["s1",7]"#.to_owned(),
                    value: br#"{"shop": "s1", "id": 7, "total": 12.5}"#.to_vec(),
                    ttl_seconds: 30,
                },
                Command::Delete {
                    key: r#"orders:["s1",8]"#.to_owned()
                },
                Command::Delete {
                    key: r#"orders:["s2",9]"#.to_owned()
                },
            ]
        );
    }

    #[test]
    fn a_row_without_a_key_column_is_refused_naming_the_column() {
        let refused = rows(r#"{"mutations": [{"put": {"row": {"shop": "s1", "total": 1}}}]}"#);
        let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("mutations[0]"), "{message}");
        assert!(message.contains("'id'"), "{message}");
        let not_cql = rows(r#"{"set": {"key": "k", "value": "v"}}"#);
        assert!(not_cql.is_err(), "a cache payload is not a row payload");
    }
}
