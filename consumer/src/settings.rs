//! What the consumer library runs on, apart from where it serves metrics and health: plain values
//! the binary makes from its flags (`ConsumerOptions::settings`), or a test makes itself.

use std::time::Duration;

use wal_clusters::ClusterMap;

use wal_apply::clients::ClientSettings;

#[derive(Debug, Clone)]
pub struct ConsumerSettings {
    /// Where the targets' clusters are.
    pub clients: ClientSettings,
    /// The Kafka clusters, CQL shards (durable storage) and SQS endpoint (with its delay step)
    /// the namespaces name.
    pub clusters: ClusterMap,
    /// This consumer's region: a replicated namespace is sent to every destination region but
    /// this one.
    pub region: String,
    /// The destination regions whose readers run here; empty: every one.
    pub replicate_to: Vec<String>,
    /// The destinations read here, by name; empty: every one.
    pub destinations: Vec<String>,
    /// The consumer stack served: only namespaces naming it; `None`, every namespace.
    pub stack: Option<String>,
    /// Entries being applied or settled at once per queue.
    pub max_in_flight: u32,
    /// Entries per queue that may wait in memory for their deliver-at.
    pub max_held: u32,
    /// The longest one apply may take before it counts as a retryable failure.
    pub apply_timeout: Duration,
    /// How long shutdown waits for entries in progress.
    pub shutdown_grace: Duration,
    /// Create the queues of every namespace served (local use).
    pub provision: bool,
}
