//! The apply side of delivery: one entry applied to its target, its payload resolved first (a
//! claim check read from the namespace's durable storage), within the apply timeout. The
//! consumer's deliveries and walctl's replay both apply through an [`Applier`]; waiting, holding,
//! retrying and acknowledging are the deliverer's.

mod items;
mod replay;
mod transaction;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;
use wal_runtime::trace_context::Carrier;

use wal_durable::DurableError;
use wal_namespaces::{DurableStorageConfig, Namespace};
use wal_queue::entry::{Body, ClaimCheck, Entry, Target as TargetSpec};

use crate::clients::Clients;
use crate::{Mutation, TargetError, TargetRegistry};

/// Targets made and kept, the clients they share, and how long one apply may take.
#[derive(Debug)]
pub struct Applier {
    targets: TargetRegistry,
    clients: Arc<Clients>,
    timeout: Duration,
}

impl Applier {
    /// `timeout`: the longest one apply may take before it counts as a retryable failure.
    pub fn new(targets: TargetRegistry, clients: Arc<Clients>, timeout: Duration) -> Self {
        Self {
            targets,
            clients,
            timeout,
        }
    }

    pub fn targets(&self) -> &TargetRegistry {
        &self.targets
    }

    pub fn clients(&self) -> &Clients {
        &self.clients
    }

    /// The clients, for a task that outlives the call that starts it.
    pub fn shared_clients(&self) -> Arc<Clients> {
        Arc::clone(&self.clients)
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Applies one entry of `namespace` to its target: the payload resolved (a claim check read
    /// from the namespace's durable storage), the target made or reused, and the apply, all
    /// bounded by the apply timeout. Deliveries and walctl's replay both go through here.
    pub async fn apply(
        &self,
        namespace: &Namespace,
        entry: &Entry,
        spec: Option<&TargetSpec>,
        trace: Option<&Carrier>,
    ) -> Result<(), TargetError> {
        if let Some(Body::Transaction(marker)) = &entry.body {
            // Boxed: it applies many items; every delivery's future would carry its size.
            return Box::pin(self.apply_transaction(namespace, entry, marker, trace)).await;
        }
        let spec = spec.ok_or_else(|| {
            TargetError::permanent(
                "the entry names no target and its namespace has no default target",
            )
        })?;
        let attempt = async {
            let payload = self.payload(namespace, entry).await?;
            let target = self.targets.resolve(spec).await?;
            let mutation = Mutation {
                entry,
                payload: &payload,
                trace,
            };
            target.apply(mutation).await
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(applied) => applied,
            Err(_) => Err(TargetError::retryable(format!(
                "the {} target did not answer within {:?}",
                spec.kind, self.timeout
            ))),
        }
    }

    /// Whether [`apply_with_archive`](Self::apply_with_archive) may carry the entry's archive
    /// row: its target is a cql one on the archive's cluster, and the entry carries its payload
    /// (the archive keeps the payload itself, which a claim check is not). No I/O.
    pub fn may_carry_archive(
        &self,
        entry: &Entry,
        spec: Option<&TargetSpec>,
        durable: &DurableStorageConfig,
    ) -> bool {
        spec.is_some_and(|spec| {
            wal_targets::canonical_name(&spec.kind) == wal_targets::Kind::Cql.name()
        }) && matches!(entry.body, Some(Body::Payload(_)))
            && self.clients.durable_beside_cql(durable)
    }

    /// Applies one entry as [`apply`](Self::apply) does, with its archive row (kept for
    /// `retention` in `durable`) carried in the target's own request, when the target writes to
    /// the archive's cluster and can carry it: one request where the apply and the archive
    /// writer would make two. `None` when it cannot (see [`may_carry_archive`], the target's own
    /// limits: consistency, size; an entry past its retention), and when the carried write
    /// failed for good or for the cluster's absence: the caller then applies and archives apart,
    /// each classified on its own (a repeat costs nothing: both writes are idempotent).
    ///
    /// [`may_carry_archive`]: Self::may_carry_archive
    pub async fn apply_with_archive(
        &self,
        entry: &Entry,
        spec: Option<&TargetSpec>,
        trace: Option<&Carrier>,
        (durable, retention): (&DurableStorageConfig, Duration),
    ) -> Option<Result<(), TargetError>> {
        if !self.may_carry_archive(entry, spec, durable) {
            return None;
        }
        let (Some(spec), Some(Body::Payload(payload))) = (spec, &entry.body) else {
            return None;
        };
        let attempt = async {
            let target = self.targets.resolve(spec).await?;
            if !target.carries_archive(payload.len() + wal_queue::entry::encoded_len(entry)) {
                return Ok(None);
            }
            let storage = self.clients.durable(durable).await?;
            // Past its retention already: nothing to archive, which the apart path knows.
            let Some(archive) = storage.archive_insert(entry, retention) else {
                return Ok(None);
            };
            let mutation = Mutation {
                entry,
                payload,
                trace,
            };
            target
                .apply_with_archive(mutation, &archive)
                .await
                .map(Some)
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(Ok(Some(()))) => Some(Ok(())),
            Ok(Ok(None)) => None,
            // The archive row, its storage or the target may be the cause (a table, a keyspace's
            // replicas, a setting): tried apart, where the apply's failure and the archive's are
            // each classified on their own, a poison entry is still archived, and the breaker of
            // the target's endpoint opens only for the target.
            Ok(Err(TargetError::Permanent { .. } | TargetError::Unavailable { .. })) => None,
            Ok(Err(error)) => Some(Err(error)),
            Err(_) => Some(Err(TargetError::retryable(format!(
                "the {} target did not answer within {:?}",
                spec.kind, self.timeout
            )))),
        }
    }

    /// The entry's payload, read from durable storage when the queue carried a claim check.
    pub async fn payload<'e>(
        &self,
        namespace: &Namespace,
        entry: &'e Entry,
    ) -> Result<Cow<'e, [u8]>, TargetError> {
        match &entry.body {
            None => Ok(Cow::Borrowed(&[])),
            Some(Body::Payload(payload)) => Ok(Cow::Borrowed(payload)),
            // Boxed: the CQL read's future is large, and every delivery's future would carry
            // its size (and be copied with it) although few entries take this path.
            Some(Body::ClaimCheck(check)) => Box::pin(self.claim_check(namespace, entry, check))
                .await
                .map(Cow::Owned),
            Some(Body::Transaction(marker)) => Err(TargetError::permanent(format!(
                "entry {} is the commit marker of transaction {}: its items are staged, it has no payload of its own",
                entry.id, marker.transaction_id
            ))),
        }
    }

    /// Reads a claim-checked payload from the namespace's durable storage. Only the keyspace the
    /// namespace configures is read: an entry cannot make the consumer connect anywhere else.
    pub async fn claim_check(
        &self,
        namespace: &Namespace,
        entry: &Entry,
        check: &ClaimCheck,
    ) -> Result<Vec<u8>, TargetError> {
        let Some(durable) = &namespace.durable_storage else {
            return Err(TargetError::permanent(format!(
                "the entry's payload is claim-checked in {} but namespace '{}' has no durable_storage",
                check.table, namespace.name
            )));
        };
        let expected = format!("{}.claim_checks", durable.keyspace);
        if check.table != expected {
            return Err(TargetError::permanent(format!(
                "the entry's claim check points at {}; namespace '{}' keeps claim checks in {expected}",
                check.table, namespace.name
            )));
        }
        let storage = self.clients.durable(durable).await?;
        match storage.get_claim_check(&entry.namespace, check).await {
            Ok(body) => Ok(body),
            Err(error @ (DurableError::NotFound { .. } | DurableError::SizeMismatch { .. })) => {
                Err(TargetError::permanent(format!(
                    "resolving the claim check: {error}"
                )))
            }
            Err(error) => Err(TargetError::retryable(format!(
                "resolving the claim check: {error}"
            ))),
        }
    }
}
