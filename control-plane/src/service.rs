//! The `NamespaceRegistry` gRPC service: validate, check the update's rules, provision, store.

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

    async fn plan(&self, config_json: &str) -> Result<Plan, Status> {
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

/// A stored config that no longer parses (written by an older, laxer version): an operator must
/// look, so it is named rather than skipped.
/// A stored config, as the update rules need it: its queues (which still hold entries) and
/// limits. A default target an earlier build accepted and this one refuses is left out with a
/// warning: it must not lock every later apply out.
fn stored_config(name: &str, text: &str) -> Result<Namespace, Status> {
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

fn store_status(error: StoreError) -> Status {
    match error {
        StoreError::Conflict { .. } => Status::aborted(error.to_string()),
        _ => Status::unavailable(error.to_string()),
    }
}

fn now_micros() -> i64 {
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

#[tonic::async_trait]
impl NamespaceRegistry for RegistryService {
    async fn apply(
        &self,
        request: Request<ApplyRequest>,
    ) -> Result<Response<ApplyResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let stated = author_of(&request.author)?;
        let principal = self.may_apply(peer.as_ref(), &request.config_json).await?;
        let _one_at_a_time = self.changing.lock().await;
        let plan = self.plan(&request.config_json).await?;
        self.check_admins_left(principal.as_deref(), &plan)?;
        let author = author(principal.as_deref(), stated);
        let author = author.as_str();
        // Provisioned on every apply, changed or not, so applying again repairs a queue deleted
        // by hand; a failure stores nothing, and the apply can simply be repeated.
        let created = self
            .provisioner
            .provision(&plan.namespace)
            .await
            .map_err(|e| Status::unavailable(format!("{e:#}")))?;
        if plan.unchanged
            && let Some(latest) = plan.latest
        {
            return Ok(Response::new(ApplyResponse {
                version: Some(version_message(latest)),
                changed: false,
                created,
            }));
        }
        let config = serde_json::to_string_pretty(&plan.value)
            .map_err(|e| Status::internal(e.to_string()))?;
        let stored = self
            .store
            .add(NewVersion {
                name: &plan.namespace.name,
                version: plan.latest.as_ref().map_or(0, |v| v.version) + 1,
                config: Some(&config),
                author,
                created_at_micros: now_micros(),
                changes: &plan.changes,
            })
            .await
            .map_err(store_status)?;
        self.announcer.stored();
        tracing::info!(namespace = %stored.name, version = stored.version, author, changes = ?stored.changes, created = ?created, "namespace applied");
        Ok(Response::new(ApplyResponse {
            version: Some(version_message(stored)),
            changed: true,
            created,
        }))
    }

    async fn validate(
        &self,
        request: Request<ApplyRequest>,
    ) -> Result<Response<ValidateResponse>, Status> {
        let plan = self.plan(&request.into_inner().config_json).await?;
        let new_namespace = plan.latest.as_ref().is_none_or(StoredVersion::is_deleted);
        Ok(Response::new(ValidateResponse {
            new_namespace,
            // As the proto says: empty for a new namespace or no change.
            changes: if plan.unchanged || new_namespace {
                Vec::new()
            } else {
                plan.changes
            },
        }))
    }

    async fn get(
        &self,
        request: Request<GetRequest>,
    ) -> Result<Response<NamespaceVersion>, Status> {
        let GetRequest { name, version } = request.into_inner();
        let found = if version == 0 {
            self.store.latest(&name).await
        } else {
            self.store.version(&name, version).await
        }
        .map_err(store_status)?;
        match found {
            Some(version) => Ok(Response::new(version_message(version))),
            None if version == 0 => Err(Status::not_found(format!(
                "no namespace '{name}'; `walctl namespace list` shows those there are"
            ))),
            None => Err(Status::not_found(format!(
                "namespace '{name}' has no version {version}; `walctl namespace history {name}` lists them"
            ))),
        }
    }

    async fn list(&self, _: Request<ListRequest>) -> Result<Response<ListResponse>, Status> {
        let current = self.store.current().await.map_err(store_status)?;
        Ok(Response::new(ListResponse {
            namespaces: current.into_iter().map(version_message).collect(),
        }))
    }

    async fn history(
        &self,
        request: Request<HistoryRequest>,
    ) -> Result<Response<HistoryResponse>, Status> {
        let name = request.into_inner().name;
        let versions = self.store.history(&name).await.map_err(store_status)?;
        if versions.is_empty() {
            return Err(Status::not_found(format!("no namespace '{name}'")));
        }
        Ok(Response::new(HistoryResponse {
            versions: versions.into_iter().map(version_message).collect(),
        }))
    }

    async fn delete(
        &self,
        request: Request<DeleteRequest>,
    ) -> Result<Response<NamespaceVersion>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let stated = author_of(&request.author)?;
        let _one_at_a_time = self.changing.lock().await;
        let latest = self
            .store
            .latest(&request.name)
            .await
            .map_err(store_status)?;
        let Some(latest) = latest.filter(|v| !v.is_deleted()) else {
            return Err(Status::not_found(format!(
                "no namespace '{}' to delete",
                request.name
            )));
        };
        let current = stored_config(&request.name, latest.config.as_deref().unwrap_or_default())?;
        let principal = self
            .authorizer
            .check(peer.as_ref(), &current, Action::Admin)?;
        let author = author(principal.as_deref(), stated);
        let author = author.as_str();
        let stored = self
            .store
            .add(NewVersion {
                name: &request.name,
                version: latest.version + 1,
                config: None,
                author,
                created_at_micros: now_micros(),
                changes: &["deleted".to_owned()],
            })
            .await
            .map_err(store_status)?;
        self.announcer.stored();
        tracing::info!(namespace = %stored.name, version = stored.version, author, "namespace deleted; its queues stay on the brokers");
        Ok(Response::new(version_message(stored)))
    }

    type WatchStream = SnapshotStream;

    async fn watch(&self, _: Request<WatchRequest>) -> Result<Response<SnapshotStream>, Status> {
        Ok(Response::new(
            self.announcer
                .snapshots(self.store.clone(), version_message),
        ))
    }
}
