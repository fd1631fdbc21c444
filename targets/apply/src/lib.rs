//! Targets: where entries are delivered. One trait, one file per kind, one registry line each.
//!
//! # Contract
//! - **Idempotent.** Delivery is at-least-once, so [`Target::apply`] may see the same entry twice,
//!   and entries of one key in another order than they were written (after a retry or a replay).
//!   Every kind says in its module how it converges: CQL writes carry `USING TIMESTAMP` = the
//!   entry's original write time; HTTP upstreams receive the entry id as `Idempotency-Key`.
//! - **`Ok` means the effect happened** (the row was written, the message acknowledged by the
//!   broker, the upstream answered 2xx). Only then does the consumer acknowledge the entry.
//! - **Failures are classified where they are born:** [`TargetError::Permanent`] when the entry
//!   will fail the same way again (a malformed payload, a rejected request): dead-lettered;
//!   [`TargetError::Retryable`] when this entry's attempt had trouble of its own (one write timed
//!   out): retried with backoff, counting an attempt; [`TargetError::Unavailable`] when the
//!   target cannot serve anyone now (connections refused, no host, every connection broken,
//!   overloaded, an HTTP 502/503/504): not the entry's fault, so its endpoint's breaker opens and
//!   the entry is held in place, using no attempt (see `breaker`). A slow target is not an
//!   unavailable one: a timeout is `Retryable`.
//! - Each kind names its **endpoint** ([`TargetKind::endpoint`]): what targets share when they
//!   become unavailable together (a CQL keyspace, a memcached server list, an HTTP origin, a
//!   Kafka cluster). One breaker serves each endpoint.
//! - A kind's **settings** come as JSON from the entry's target (the request's, else the
//!   namespace's default) and are parsed strictly into the kind's `Settings` type; unknown fields
//!   are refused, so a typo is a clear permanent error instead of a silent default.

pub mod applier;
pub mod breaker;
pub mod cache;
pub mod clients;
pub mod cql;
mod error;
pub mod http;
pub mod index;
pub mod kafka;
pub mod metrics;
pub mod region;
mod registry;

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use wal_durable::ArchiveInsert;
use wal_queue::entry::Entry;

pub use error::{Cause, TargetError};
pub use registry::TargetRegistry;

use crate::clients::Clients;

/// One entry ready for its target: the envelope, and the payload with any claim check resolved.
#[derive(Debug, Clone, Copy)]
pub struct Mutation<'a> {
    pub entry: &'a Entry,
    pub payload: &'a [u8],
    /// The W3C trace context to send downstream (`traceparent`, and `tracestate` when the
    /// write has one): the write's trace, continued by this delivery.
    pub trace: Option<&'a wal_runtime::trace_context::Carrier>,
}

/// A configured target: applies entries to one table, cache, topic or upstream.
#[async_trait]
pub trait Target: Send + Sync + fmt::Debug {
    /// Applies the mutation; see the module's contract.
    async fn apply(&self, mutation: Mutation<'_>) -> Result<(), TargetError>;

    /// Whether [`apply_with_archive`](Self::apply_with_archive) may carry an archive row with a
    /// mutation of `bytes` (its payload and the archived entry). No I/O.
    fn carries_archive(&self, _bytes: usize) -> bool {
        false
    }

    /// Applies the mutation and writes `archive` (its entry's archive row, on the cluster this
    /// target writes to) in the same request, so `Ok` means both happened. Only called when
    /// [`carries_archive`](Self::carries_archive) said yes.
    async fn apply_with_archive(
        &self,
        _mutation: Mutation<'_>,
        _archive: &ArchiveInsert,
    ) -> Result<(), TargetError> {
        Err(TargetError::retryable(
            "this target cannot carry the entry's archive row; nothing was written",
        ))
    }
}

/// A target kind's apply side: how a target is made from the kind's settings. The kind's name
/// and settings are defined once, in `wal_targets`, where the producer and the control plane
/// check them too. Register a new kind with one line in [`TargetRegistry::builtin`].
pub trait TargetKind: Send + Sync + 'static {
    /// The kind's settings, parsed strictly from the target's JSON; they name the kind.
    type Settings: wal_targets::Settings;

    /// Where a target of these settings lives, for its breaker: targets with the same endpoint
    /// are unavailable together. Pure: no I/O.
    fn endpoint(settings: &Self::Settings, clients: &Clients) -> String;

    /// Makes a target. Connection failures are unavailable (the cluster may come back); settings
    /// the kind cannot use are permanent.
    fn build(
        settings: Self::Settings,
        clients: Arc<Clients>,
    ) -> impl Future<Output = Result<Arc<dyn Target>, TargetError>> + Send;
}
