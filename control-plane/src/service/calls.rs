//! The NamespaceRegistry calls (proto/wal/v1/control.proto): each checks who may make it, then
//! plans, stores and announces through the service.

use super::*;

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
        let plan = self
            .plan(&request.config_json, request.drop_owed_destinations)
            .await?;
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
        let request = request.into_inner();
        let plan = self
            .plan(&request.config_json, request.drop_owed_destinations)
            .await?;
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
