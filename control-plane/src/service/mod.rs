//! The `NamespaceRegistry` gRPC service: validate, check the update's rules, provision, store.

mod calls;

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::Mutex;
use tonic::{Request, Response, Status};
use wal_namespaces::Namespace;
use wal_proto::v1::namespace_registry_server::NamespaceRegistry;
use wal_proto::v1::{
    ApplyRequest, ApplyResponse, DeleteRequest, GetRequest, HistoryRequest, HistoryResponse,
    ListRequest, ListResponse, NamespaceVersion, ValidateResponse, WatchRequest,
};

use wal_namespaces::Action;
use wal_runtime::authorize::Authorizer;
use wal_runtime::tls::Peer;

use crate::changes::{self, Forbidden};
use crate::provision::Provisioner;
use crate::store::{NamespaceStore, NewVersion, StoreError, StoredVersion};
use crate::watch::{Announcer, SnapshotStream};

#[derive(Debug)]
pub struct RegistryService {
    store: NamespaceStore,
    provisioner: Provisioner,
    /// One change at a time in this process; writers in other processes are caught by the
    /// store's version check instead.
    changing: Mutex<()>,
    announcer: Announcer,
    authorizer: Authorizer,
}

/// What an apply would do, worked out before anything is provisioned or stored.
struct Plan {
    namespace: Namespace,
    value: Value,
    latest: Option<StoredVersion>,
    changes: Vec<String>,
    /// The stored config equals the applied one.
    unchanged: bool,
}

impl RegistryService {
    pub fn new(store: NamespaceStore, provisioner: Provisioner, authorizer: Authorizer) -> Self {
        Self {
            store,
            provisioner,
            changing: Mutex::new(()),
            announcer: Announcer::default(),
            authorizer,
        }
    }

    /// Whether `peer` may apply `config_json`, decided before anything else is read or locked,
    /// so a caller without the grant learns nothing of the namespace's state: the last stored
    /// config's admins may (a config cannot grant its own change; after a delete, its last
    /// admins may apply it again), and a super-user may create one. Returns the caller's
    /// principal when it is known.
    async fn may_apply(
        &self,
        peer: Option<&Peer>,
        config_json: &str,
    ) -> Result<Option<std::sync::Arc<str>>, Status> {
        if !self.authorizer.is_on() {
            return Ok(peer.and_then(|p| p.principal.clone()));
        }
        let namespace = wal_namespaces::parse(config_json, "the applied config")
            .map_err(|errors| Status::invalid_argument(errors.to_string()))?;
        let last = self
            .store
            .last_config(&namespace.name)
            .await
            .map_err(store_status)?;
        match last.as_ref().and_then(|v| v.config.as_deref()) {
            Some(text) => {
                let old = stored_config(&namespace.name, text)?;
                self.authorizer.check(peer, &old, Action::Admin)
            }
            None => self.authorizer.check_create(peer, &namespace.name),
        }
    }

    /// For anyone but a super-user, the applied config must still name an admin, or nobody but
    /// the super-users could change the namespace again.
    fn check_admins_left(&self, principal: Option<&str>, plan: &Plan) -> Result<(), Status> {
        if self.authorizer.is_on()
            && plan.namespace.access.admin.is_empty()
            && !self.authorizer.is_super_user(principal)
        {
            return Err(Status::failed_precondition(format!(
                "namespace '{}': access.admin grants no one, so after this apply only super-users could change it; name its admins in access.admin",
                plan.namespace.name
            )));
        }
        Ok(())
    }

    /// Ends the open watches when the server shuts down.
    pub fn announcer(&self) -> Announcer {
        self.announcer.clone()
    }

    /// `drop_owed`: remove destinations still owed entries rather than refuse (the request's
    /// `drop_owed_destinations`).
    async fn plan(&self, config_json: &str, drop_owed: bool) -> Result<Plan, Status> {
        let namespace = wal_namespaces::parse(config_json, "the applied config")
            .map_err(|errors| Status::invalid_argument(errors.to_string()))?;
        let clusters = self.provisioner.clusters();
        let unknown = clusters.unknown_names(&namespace);
        if !unknown.is_empty() {
            return Err(Status::invalid_argument(format!(
                "the applied config: namespace '{}': {}",
                namespace.name,
                unknown.join("; ")
            )));
        }
        let value: Value = serde_json::from_str(config_json)
            .map_err(|e| Status::invalid_argument(format!("the config is not JSON: {e}")))?;
        let latest = self
            .store
            .latest(&namespace.name)
            .await
            .map_err(store_status)?;
        // Judged against the last config even when the namespace was deleted since: its queues
        // and their entries are still on the brokers.
        let last = self
            .store
            .last_config(&namespace.name)
            .await
            .map_err(store_status)?;
        let old = match last.as_ref().and_then(|v| v.config.as_deref()) {
            Some(text) => Some(stored_config(&namespace.name, text)?),
            None => None,
        };
        // Deleted namespaces keep their queues too: nobody else may take them.
        let mut others = Vec::new();
        for version in self.store.last_configs().await.map_err(store_status)? {
            if version.name != namespace.name
                && let Some(text) = &version.config
            {
                others.push(stored_config(&version.name, text)?);
            }
        }
        changes::check_update(old.as_ref(), &namespace, &others).map_err(forbidden)?;
        if let Some(old) = &old {
            // Clusters named in full, so naming the default cluster is no move.
            let (old, new) = (clusters.resolved(old), clusters.resolved(&namespace));
            self.check_drained(&old, &new).await?;
            if !drop_owed {
                self.check_destinations_served(&old, &new).await?;
            }
        }
        let current = latest.as_ref().and_then(|v| v.config.as_ref());
        let (changes, unchanged) = match (&old, current) {
            (Some(old), Some(text)) => {
                let before: Value = serde_json::from_str(text).unwrap_or(Value::Null);
                (changes::changed_paths(&before, &value), *old == namespace)
            }
            _ => (vec!["created".to_owned()], false),
        };
        Ok(Plan {
            namespace,
            value,
            latest,
            changes,
            unchanged,
        })
    }
}

impl RegistryService {
    /// Refuses the update while a queue, DLQ or delay tier it drops or moves still holds entries.
    async fn check_drained(&self, old: &Namespace, new: &Namespace) -> Result<(), Status> {
        let unavailable = |e: anyhow::Error| Status::unavailable(format!("{e:#}"));
        for dropped in changes::dropped(old, new) {
            let entries = self
                .provisioner
                .unfinished(old, dropped.queue, dropped.dlq)
                .await
                .map_err(unavailable)?;
            if entries == 0 {
                continue;
            }
            let queue = dropped.name().to_owned();
            return Err(forbidden(match dropped.moved_to {
                Some(to) => Forbidden::ClusterChanged {
                    queue,
                    from: dropped.queue.cluster.clone().unwrap_or_default(),
                    to,
                    entries,
                },
                None => Forbidden::StillHolds {
                    what: dropped.what(),
                    queue,
                    entries,
                },
            }));
        }
        for (queue, tier) in changes::dropped_tiers(old, new) {
            let entries = self
                .provisioner
                .unfinished_tier(old, queue, &tier)
                .await
                .map_err(unavailable)?;
            if entries > 0 {
                return Err(forbidden(Forbidden::TierHolds { tier, entries }));
            }
        }
        Ok(())
    }
}

impl RegistryService {
    /// Refuses the update while a destination it removes is still owed entries on a queue.
    async fn check_destinations_served(
        &self,
        old: &Namespace,
        new: &Namespace,
    ) -> Result<(), Status> {
        for destination in changes::dropped_destinations(old, new) {
            for queue in &old.queues {
                let entries = self
                    .provisioner
                    .owed(old, queue, destination)
                    .await
                    .map_err(|e| Status::unavailable(format!("{e:#}")))?;
                if entries > 0 {
                    return Err(forbidden(Forbidden::DestinationOwed {
                        destination: destination.name.clone(),
                        queue: queue.name.clone(),
                        entries,
                    }));
                }
            }
        }
        Ok(())
    }
}

/// A stored config that no longer parses (written by an older, laxer version): an operator must
/// look, so it is named rather than skipped.
/// A stored config, as the update rules need it: its queues (which still hold entries) and
/// limits. A default target an earlier build accepted and this one refuses is left out with a
/// warning: it must not lock every later apply out.
pub(crate) fn stored_config(name: &str, text: &str) -> Result<Namespace, Status> {
    let origin = format!("the stored config of '{name}'");
    let (namespace, refused) = wal_namespaces::parse_stored(text, &origin).map_err(|errors| {
        Status::internal(format!(
            "the stored config of namespace '{name}' no longer validates: {errors}"
        ))
    })?;
    if let Some(refused) = refused {
        tracing::warn!(namespace = name, %refused, "a stored namespace's default target is refused by this build; its queues are still its own");
    }
    Ok(namespace)
}

fn forbidden(rule: Forbidden) -> Status {
    Status::failed_precondition(rule.to_string())
}

pub(crate) fn store_status(error: StoreError) -> Status {
    match error {
        StoreError::Conflict { .. } => Status::aborted(error.to_string()),
        _ => Status::unavailable(error.to_string()),
    }
}

pub(crate) fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn version_message(version: StoredVersion) -> NamespaceVersion {
    NamespaceVersion {
        deleted: version.is_deleted(),
        name: version.name,
        version: version.version,
        config_json: version.config.unwrap_or_default(),
        author: version.author,
        created_at_micros: version.created_at_micros,
        changes: version.changes,
    }
}

/// The author recorded for a change: the authenticated principal when there is one (what the
/// request states is then kept beside it, as `principal (as "stated")`, when it differs), else
/// what the request states.
fn author(principal: Option<&str>, stated: &str) -> String {
    match principal {
        Some(principal) if principal == stated => principal.to_owned(),
        Some(principal) => format!("{principal} (as {stated:?})"),
        None => stated.to_owned(),
    }
}

fn author_of(author: &str) -> Result<&str, Status> {
    let author = author.trim();
    if author.is_empty() || author.len() > 256 {
        return Err(Status::invalid_argument(
            "author must name who applies the change (1 to 256 characters)",
        ));
    }
    Ok(author)
}
