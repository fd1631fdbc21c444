//! The producer as a whole: namespaces connected, gRPC served with health and reflection, and a
//! graceful shutdown that stops taking new writes and answers every write already taken.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use wal_namespaces::Namespace;
use wal_proto::v1::transactions_server::TransactionsServer;
use wal_proto::v1::write_ahead_log_server::WriteAheadLogServer;
use wal_runtime::process::{ServeError, standard_services};
use wal_runtime::tls::ServerTls;

use crate::live::LiveRegistry;
use crate::registry::Registry;
use crate::service::WriteService;
use crate::settings::ProducerSettings;
use crate::transactions::TransactionService;

/// Room in a request beyond its payload: the envelope, or the other writes of a batch.
const REQUEST_OVERHEAD_BYTES: usize = 1024 * 1024;
/// Requests one connection may have in progress at once. With the decode limit this bounds what
/// one connection can make the producer hold before admission control sees a request.
const STREAMS_PER_CONNECTION: u32 = 256;
/// The smallest payload ceiling: a namespace's default payload limit.
const PAYLOAD_CEILING_FLOOR: usize = 1024 * 1024;

#[derive(Debug)]
pub struct Producer {
    live: Arc<LiveRegistry>,
    service: WriteService,
    /// TLS on the gRPC port, or plaintext.
    tls: Option<ServerTls>,
    /// The largest request decoded: the largest payload any namespace here accepts, plus room.
    max_request_bytes: usize,
}

impl Producer {
    /// Connects the namespaces' backends and, with `settings.provision`, creates missing queues.
    pub async fn start(
        settings: &ProducerSettings,
        namespaces: Vec<Namespace>,
    ) -> anyhow::Result<Self> {
        let registry = Registry::build(settings, namespaces).await?;
        if settings.provision {
            for report in registry.provision().await? {
                if !report.created.is_empty() {
                    tracing::info!(created = ?report.created, "provisioned");
                }
            }
        }
        // Namespaces added later are served up to this payload size; the floor leaves room for
        // the default limit (1 MiB) when the producer starts with few or small namespaces.
        let payload_ceiling = registry.largest_payload_limit().max(PAYLOAD_CEILING_FLOOR);
        let live = Arc::new(LiveRegistry::new(registry, settings, payload_ceiling));
        let service = WriteService::new(
            Arc::clone(&live),
            &settings.region,
            settings.write_timeout,
            settings.authorizer.clone(),
            Arc::clone(&settings.faults),
        );
        if !settings.faults.is_empty() {
            tracing::warn!(
                faults = %settings.faults.describe(),
                "WAL_TEST_FAULTS is set: this producer answers some writes falsely on purpose, for tests only"
            );
        }
        Ok(Self {
            live,
            service,
            tls: settings.tls.clone(),
            max_request_bytes: payload_ceiling + REQUEST_OVERHEAD_BYTES,
        })
    }

    /// The namespaces being served now.
    pub fn registry(&self) -> Arc<Registry> {
        self.live.current()
    }

    /// Where reloads go; it stays usable after `serve` took the producer.
    pub fn live(&self) -> Arc<LiveRegistry> {
        Arc::clone(&self.live)
    }

    /// Serves until `shutdown` completes, then reports NOT_SERVING on the health service, stops
    /// accepting requests and returns once every request in flight has been answered.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ServeError> {
        let resend = self.service.clone();
        let transactions = TransactionsServer::new(TransactionService::new(self.service.clone()))
            .max_decoding_message_size(
                crate::transactions::MAX_BYTES_PER_CALL + REQUEST_OVERHEAD_BYTES,
            );
        let writes = WriteAheadLogServer::new(self.service)
            .max_decoding_message_size(self.max_request_bytes);
        let server = Server::builder()
            .max_concurrent_streams(Some(STREAMS_PER_CONNECTION))
            .concurrency_limit_per_connection(STREAMS_PER_CONNECTION as usize);
        let (health, router) = standard_services(server)?;
        health
            .set_serving::<WriteAheadLogServer<WriteService>>()
            .await;
        health
            .set_serving::<TransactionsServer<TransactionService>>()
            .await;
        let signal = async move {
            shutdown.await;
            tracing::info!("shutting down: no new writes, answering those in flight");
            health
                .set_not_serving::<WriteAheadLogServer<WriteService>>()
                .await;
            health
                .set_not_serving::<TransactionsServer<TransactionService>>()
                .await;
        };
        let sweeping = tokio::spawn(crate::expiry::sweep(Arc::clone(&self.live)));
        let resending = tokio::spawn(crate::resend::sweep(resend));
        let router = router.add_service(writes).add_service(transactions);
        let served = match self.tls {
            Some(tls) => {
                router
                    .serve_with_incoming_shutdown(tls.incoming(listener), signal)
                    .await
            }
            None => {
                // TCP_NODELAY: with Nagle's algorithm on, a response larger than one segment
                // waits for the client's delayed ACK (40 ms on Linux) before its tail is sent.
                let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
                router.serve_with_incoming_shutdown(incoming, signal).await
            }
        };
        sweeping.abort();
        resending.abort();
        served?;
        Ok(())
    }
}
