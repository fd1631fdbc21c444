//! Checking a WriteToLog request against its namespace, and turning it into an entry. Pure: no
//! I/O, and nothing is stored until every check has passed.

use std::collections::HashMap;
use std::time::Duration;

use rand::Rng;
use wal_namespaces::Namespace;
use wal_proto::v1::WriteToLogRequest;
use wal_queue::entry::{Body, ENTRY_VERSION, Entry, Target, new_entry_id};
use wal_targets::Refusal;

/// The longest caller-given idempotency id or partition key.
pub const MAX_ID_BYTES: usize = 256;
pub const MAX_KEY_BYTES: usize = 1024;
/// How far in the future an original write time may lie (clock skew between services).
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(300);

/// Why a request was refused before anything was stored (INVALID_ARGUMENT).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("payload is empty; a write must carry the mutation")]
    EmptyPayload,
    #[error("payload of {size} bytes exceeds namespace '{namespace}''s limit of {limit} bytes")]
    PayloadOverLimit {
        namespace: String,
        size: usize,
        limit: usize,
    },
    #[error("lifecycle.{field} is {value}; expected {expected}")]
    Lifecycle {
        field: &'static str,
        value: i64,
        expected: String,
    },
    /// The target names a kind this build does not deliver, or settings that kind refuses: it
    /// would fail the same way on every delivery.
    #[error("target.{field}: {refusal}")]
    Target {
        /// `kind` or `settings_json`.
        field: &'static str,
        refusal: Refusal,
    },
    /// An index reads a row's state before it writes; only a namespace's index destination,
    /// which applies a row's writes one at a time, keeps it exact.
    #[error(
        "target.kind: an index is kept by a namespace's index destination, not named by a write; write to the table and let the destination index it"
    )]
    IndexTarget,
    #[error("no target: the request names none and namespace '{namespace}' has no default target")]
    NoTarget { namespace: String },
    /// Replication is a namespace's setting: each destination region reads the namespace with a
    /// consumer group of its own, which exists only for a namespace whose default target is
    /// `region`. A write naming its own target would be applied by none of them, or fail.
    #[error(
        "target: namespace '{namespace}' {}; expected a write that names no target",
        if *.replicated { "replicates every write to its regions" } else { "does not replicate (its default target is not 'region')" }
    )]
    ReplicationTarget { namespace: String, replicated: bool },
    #[error("await_destinations_millis is {value}; {reason}")]
    AwaitDestinations { value: u32, reason: String },
    #[error("{field} is {reason}; expected at most {max} bytes of printable text")]
    BadText {
        field: &'static str,
        reason: String,
        max: usize,
    },
}

impl Invalid {
    /// The request field the refusal is about, as a client names it (`lifecycle.delay_millis`,
    /// `target.settings_json`): sent as the `google.rpc.BadRequest` field violation and in a
    /// batch result's `field`, so a client reads it without parsing the message.
    pub fn field(&self) -> String {
        match self {
            Self::EmptyPayload | Self::PayloadOverLimit { .. } => "payload".to_owned(),
            Self::Lifecycle { field, .. } => format!("lifecycle.{field}"),
            Self::Target { field, .. } => format!("target.{field}"),
            Self::IndexTarget => "target.kind".to_owned(),
            Self::NoTarget { .. } | Self::ReplicationTarget { .. } => "target".to_owned(),
            Self::BadText { field, .. } => (*field).to_owned(),
            Self::AwaitDestinations { .. } => "await_destinations_millis".to_owned(),
        }
    }
}

/// A request that passed every check.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub entry: Entry,
    pub payload_len: usize,
    /// How long to wait for the destinations to apply it once stored; zero: not at all.
    pub await_destinations: Duration,
}

/// The longest a write may wait for its destinations.
pub const MAX_AWAIT_DESTINATIONS: Duration = Duration::from_secs(60);

/// Checks the request and builds its entry. `now_micros` is the producer's clock; the jitter's
/// random share comes from `rng`.
pub fn check(
    namespace: &Namespace,
    request: WriteToLogRequest,
    now_micros: i64,
    origin_region: &str,
    trace_context: HashMap<String, String>,
    rng: &mut impl Rng,
) -> Result<Write, Invalid> {
    if request.payload.is_empty() {
        return Err(Invalid::EmptyPayload);
    }
    if request.payload.len() > namespace.payload_limit_bytes {
        return Err(Invalid::PayloadOverLimit {
            namespace: namespace.name.clone(),
            size: request.payload.len(),
            limit: namespace.payload_limit_bytes,
        });
    }
    let await_destinations = await_destinations(namespace, request.await_destinations_millis)?;
    let id = text("idempotency_id", &request.idempotency_id, MAX_ID_BYTES)?;
    let key = text("key", &request.key, MAX_KEY_BYTES)?;
    let target = target(namespace, request.target)?;
    let lifecycle = request.lifecycle.unwrap_or_default();
    let original = original_write_time(lifecycle.original_write_time_micros, now_micros)?;
    let delay = millis(
        "delay_millis",
        lifecycle.delay_millis,
        namespace.delay.max_delay,
    )?;
    let jitter_window = match lifecycle.jitter_millis {
        0 => namespace.delay.default_jitter,
        _ => millis(
            "jitter_millis",
            lifecycle.jitter_millis,
            namespace.delay.max_jitter,
        )?,
    };
    let jitter = random_share(jitter_window, rng);
    let id = if id.is_empty() { new_entry_id() } else { id };
    let key = if key.is_empty() { id.clone() } else { key };
    let payload_len = request.payload.len();
    let entry = Entry {
        version: ENTRY_VERSION,
        id,
        namespace: namespace.name.clone(),
        key,
        body: Some(Body::Payload(request.payload)),
        target: Some(target),
        original_write_time_micros: original,
        deliver_at_micros: original
            .saturating_add(micros(delay))
            .saturating_add(micros(jitter)),
        enqueued_at_micros: now_micros,
        origin_region: origin_region.to_owned(),
        trace_context,
        receipts: !await_destinations.is_zero()
            || namespace
                .durable_storage
                .as_ref()
                .is_some_and(|d| d.receipts),
        ..Entry::default()
    };
    Ok(Write {
        entry,
        payload_len,
        await_destinations,
    })
}

/// The wait a write asks for its destinations: within [`MAX_AWAIT_DESTINATIONS`], and only on a
/// namespace with durable storage, where the destinations record what they did.
fn await_destinations(namespace: &Namespace, millis: u32) -> Result<Duration, Invalid> {
    let wait = Duration::from_millis(u64::from(millis));
    if wait.is_zero() {
        return Ok(wait);
    }
    if wait > MAX_AWAIT_DESTINATIONS {
        return Err(Invalid::AwaitDestinations {
            value: millis,
            reason: format!("expected at most {}", MAX_AWAIT_DESTINATIONS.as_millis()),
        });
    }
    if namespace.durable_storage.is_none() {
        return Err(Invalid::AwaitDestinations {
            value: millis,
            reason: format!(
                "namespace '{}' has no durable_storage, where its destinations record what they applied; expected 0",
                namespace.name
            ),
        });
    }
    Ok(wait)
}

fn text(field: &'static str, value: &str, max: usize) -> Result<String, Invalid> {
    let reason = if value.len() > max {
        Some(format!("{} bytes long", value.len()))
    } else if value.chars().any(char::is_control) {
        Some("holding control characters".to_owned())
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Invalid::BadText { field, reason, max }),
        None => Ok(value.to_owned()),
    }
}

pub(crate) fn target(namespace: &Namespace, requested: Option<Target>) -> Result<Target, Invalid> {
    let default = namespace.default_target.as_ref();
    let replicated = namespace.replicated();
    let names_region = requested
        .as_ref()
        .is_some_and(|r| wal_targets::canonical_name(&r.kind) == wal_targets::Kind::Region.name());
    let names_index = requested
        .as_ref()
        .is_some_and(|r| wal_targets::canonical_name(&r.kind) == wal_targets::Kind::Index.name());
    if names_index {
        return Err(Invalid::IndexTarget);
    }
    if requested.is_some() && (replicated || names_region) {
        return Err(Invalid::ReplicationTarget {
            namespace: namespace.name.clone(),
            replicated,
        });
    }
    let Some(requested) = requested else {
        return default
            .map(|default| default.entry_target())
            .ok_or_else(|| Invalid::NoTarget {
                namespace: namespace.name.clone(),
            });
    };
    // The default was checked when the namespace was loaded.
    let is_default = default.is_some_and(|default| {
        default.kind.name() == requested.kind && default.settings_json == requested.settings_json
    });
    if !is_default {
        wal_targets::check(&requested.kind, &requested.settings_json).map_err(|refusal| {
            let field = match refusal {
                Refusal::UnknownKind { .. } => "kind",
                Refusal::TooLong { .. } | Refusal::Settings { .. } => "settings_json",
            };
            Invalid::Target { field, refusal }
        })?;
    }
    let settings_json = if requested.settings_json.trim().is_empty() {
        "{}".to_owned()
    } else {
        requested.settings_json
    };
    Ok(Target {
        kind: requested.kind,
        settings_json,
    })
}

fn original_write_time(given: i64, now_micros: i64) -> Result<i64, Invalid> {
    let latest = now_micros.saturating_add(micros(MAX_CLOCK_SKEW));
    match given {
        0 => Ok(now_micros),
        t if t < 0 || t > latest => Err(Invalid::Lifecycle {
            field: "original_write_time_micros",
            value: t,
            expected: format!(
                "microseconds since the Unix epoch, no later than {}s from now (0: now)",
                MAX_CLOCK_SKEW.as_secs()
            ),
        }),
        t => Ok(t),
    }
}

fn millis(field: &'static str, value: i64, max: Duration) -> Result<Duration, Invalid> {
    let max_ms = i64::try_from(max.as_millis()).unwrap_or(i64::MAX);
    if (0..=max_ms).contains(&value) {
        Ok(Duration::from_millis(value.unsigned_abs()))
    } else {
        Err(Invalid::Lifecycle {
            field,
            value,
            expected: format!("0 to {max_ms} (the namespace's limit)"),
        })
    }
}

/// A uniformly random duration in `[0, window)`.
fn random_share(window: Duration, rng: &mut impl Rng) -> Duration {
    let window_micros = u64::try_from(window.as_micros()).unwrap_or(u64::MAX);
    if window_micros == 0 {
        return Duration::ZERO;
    }
    Duration::from_micros(rng.random_range(0..window_micros))
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;

/// W3C trace context from the request's metadata, carried on the entry for the consumer.
pub(crate) fn trace_context<T>(
    request: &tonic::Request<T>,
) -> std::collections::HashMap<String, String> {
    ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|key| {
            let value = request.metadata().get(key)?.to_str().ok()?;
            // W3C caps tracestate at 512 characters; anything longer is not a trace context.
            (value.len() <= MAX_TRACE_HEADER_BYTES).then(|| (key.to_owned(), value.to_owned()))
        })
        .collect()
}

/// The longest traceparent or tracestate value carried onto an entry.
const MAX_TRACE_HEADER_BYTES: usize = 512;
