//! What the producer library runs on, apart from where it listens: plain values the binary makes
//! from its flags (`ProducerOptions::settings`), or a test or an embedding program makes itself.

use std::sync::Arc;
use std::time::Duration;

use wal_clusters::ClusterMap;
use wal_runtime::authorize::Authorizer;
use wal_runtime::tls::ServerTls;

use crate::faults::Faults;

#[derive(Debug, Clone)]
pub struct ProducerSettings {
    /// The Kafka clusters (their delivery timeout is the write timeout), CQL shards (durable
    /// storage: claim checks, the archive) and SQS endpoint the namespaces name.
    pub clusters: ClusterMap,
    /// Written on every entry as its origin.
    pub region: String,
    /// How long one write may wait for the broker before the answer is UNKNOWN.
    pub write_timeout: Duration,
    /// Create the queues of every namespace served (local use; in production the control plane
    /// provisions).
    pub provision: bool,
    /// TLS (and mTLS, with a client CA) on the gRPC port; plaintext when `None`.
    pub tls: Option<ServerTls>,
    /// Who may write to which namespace; off unless asked for.
    pub authorizer: Authorizer,
    /// Faults a test asked for (`WAL_TEST_FAULTS`); none outside tests.
    pub faults: Arc<Faults>,
}
