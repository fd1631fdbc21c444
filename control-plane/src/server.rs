//! The control plane as a whole: store opened, brokers connected, gRPC served with health and
//! reflection until the shutdown signal.

use std::future::Future;

use tokio::net::TcpListener;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use wal_proto::v1::namespace_registry_server::NamespaceRegistryServer;
use wal_proto::v1::operations_server::OperationsServer;
use wal_runtime::process::{ServeError, standard_services};

use crate::operations::OperationsService;
use crate::provision::Provisioner;
use crate::service::RegistryService;
use crate::store::{NamespaceStore, StoreError};

/// How long a shutting-down control plane waits for its redrives to record their stop.
const REDRIVES_STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// What a control plane runs on; `ControlPlaneOptions::settings` makes it from the flags.
#[derive(Debug, Clone)]
pub struct ControlPlaneSettings {
    /// The namespace store: sqlite://PATH or postgres://USER@HOST:PORT/DB.
    pub store: String,
    /// The clusters namespaces may name; an apply naming another is refused.
    pub clusters: wal_clusters::ClusterMap,
    /// TLS (and mTLS, with a client CA) on the gRPC port; plaintext when `None`.
    pub tls: Option<wal_runtime::tls::ServerTls>,
    /// Who may change which namespace; off unless asked for.
    pub authorizer: wal_runtime::authorize::Authorizer,
    /// The region this control plane's consumers run in: a replicated namespace's entries
    /// written here are owed to the other regions, as the receipts a cancel reads say.
    pub region: String,
}

/// Why a control plane did not start, with its cause.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("opening the namespace store")]
    Store(#[from] StoreError),
    #[error("configuring the Kafka clients")]
    Kafka(#[from] wal_clusters::ConnectError),
}

#[derive(Debug)]
pub struct ControlPlane {
    service: RegistryService,
    operations: OperationsService,
    tls: Option<wal_runtime::tls::ServerTls>,
}

impl ControlPlane {
    pub async fn start(settings: &ControlPlaneSettings) -> Result<Self, StartError> {
        let store = NamespaceStore::connect(&settings.store).await?;
        let provisioner = Provisioner::connect(&settings.clusters).await?;
        let service = RegistryService::new(store.clone(), provisioner, settings.authorizer.clone());
        // One announcer: a pause reaches the watches as a new config does.
        let operations = OperationsService::new(
            store,
            service.announcer(),
            settings.authorizer.clone(),
            (settings.clusters.clone(), settings.region.clone()),
        );
        Ok(Self {
            service,
            operations,
            tls: settings.tls.clone(),
        })
    }

    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ServeError> {
        let server = Server::builder()
            // A follower that vanished without closing its connection is noticed, and its
            // watch (a store read every 2 s) ends.
            .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(std::time::Duration::from_secs(10)))
            .tcp_keepalive(Some(std::time::Duration::from_secs(60)));
        let (health, router) = standard_services(server)?;
        health
            .set_serving::<NamespaceRegistryServer<RegistryService>>()
            .await;
        health
            .set_serving::<OperationsServer<OperationsService>>()
            .await;
        let announcer = self.service.announcer();
        let redrives = self.operations.stopper();
        let stopping = redrives.clone();
        let shutdown = async move {
            shutdown.await;
            // Open watches would otherwise keep the server waiting for ever.
            announcer.stop();
            // Redrives stop now too, saving their progress, so a follower sees them stopped.
            stopping.stop(REDRIVES_STOP_WITHIN).await;
        };
        let router = router
            .add_service(NamespaceRegistryServer::new(self.service))
            .add_service(OperationsServer::new(self.operations));
        match self.tls {
            Some(tls) => {
                router
                    .serve_with_incoming_shutdown(tls.incoming(listener), shutdown)
                    .await?
            }
            None => {
                router
                    .serve_with_incoming_shutdown(TcpIncoming::from(listener), shutdown)
                    .await?
            }
        }
        redrives.stop(REDRIVES_STOP_WITHIN).await;
        Ok(())
    }
}
