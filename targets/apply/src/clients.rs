//! The connections targets share: one CQL session, one Kafka producer, one HTTP client and one
//! memcached client per server list, each made on first use. A cluster that is down when the
//! consumer starts is therefore not fatal: its entries retry until it answers.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use memcache::exp::AsyncMetaClient;
use rdkafka::ClientConfig;
use rdkafka::producer::FutureProducer;
use scylla::client::session::Session;
use tokio::sync::{Mutex, OnceCell};
use wal_clusters::ClusterMap;
use wal_clusters::cql::CqlPlace;
use wal_durable::{DurableError, DurableSettings, DurableStorage};
use wal_namespaces::DurableStorageConfig;
use wal_queue::kafka::OutageContext;
use wal_runtime::outage::Outage;

use crate::TargetError;

/// Distinct memcached server lists one consumer keeps clients for.
const MAX_MEMCACHED_CLIENTS: usize = 64;
/// Idle connections kept per memcached server: about as many as sets run at once (a reader's
/// entries in flight, a writer's batch). The client's default (8) made a busy writer dial and
/// close a connection for nearly every set: a fifth of its CPU went to connect and close
/// (perf, the replicate bench).
const MEMCACHED_MAX_IDLE: usize = 256;

/// Where the targets' clusters are.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// CQL contact points (`host:port`) for cql targets and claim checks, when the process has
    /// no cluster map (the writer); with one, its default shard says.
    pub cql_nodes: Vec<String>,
    /// The login for `cql_nodes`, on a cluster with authentication on.
    pub cql_credentials: Option<(String, wal_runtime::secret::Secret)>,
    /// The CA (PEM) `cql_nodes`' certificates chain to, for a cluster that speaks TLS.
    pub cql_tls_ca: Option<std::path::PathBuf>,
    /// TLS to the other regions' writers (region targets), or plaintext.
    pub writer_tls: Option<wal_namespaces::feed::ClientTls>,
    /// memcached servers (`host:port`) for cache targets that name none.
    pub memcached: Vec<String>,
    /// Kafka bootstrap servers for kafka targets.
    pub kafka_bootstrap: String,
    /// More librdkafka properties for kafka targets (security.protocol, sasl.*, ssl.*): the
    /// cluster map's default cluster's, when kafka targets publish there.
    pub kafka_client: wal_runtime::secret::ClientProperties,
    /// The longest one request to a target may take; past it the attempt is retryable.
    pub request_timeout: Duration,
}

impl ClientSettings {
    /// Settings that name no cluster, no server and no TLS: a target needing one fails to
    /// build. A process starts from these and names what it connects to.
    pub fn none(request_timeout: Duration) -> Self {
        Self {
            cql_nodes: Vec::new(),
            cql_credentials: None,
            cql_tls_ca: None,
            writer_tls: None,
            memcached: Vec::new(),
            kafka_bootstrap: String::new(),
            kafka_client: Default::default(),
            request_timeout,
        }
    }
}

#[derive(Debug)]
pub struct Clients {
    settings: ClientSettings,
    cql: OnceCell<Arc<Session>>,
    kafka: OnceCell<TargetProducer>,
    http: reqwest::Client,
    memcached: Mutex<HashMap<Vec<String>, Memcached>>,
    /// The CQL shards durable storage may be on; without a map, only the default shard, on
    /// `settings.cql_nodes`.
    clusters: Option<ClusterMap>,
    durable: Mutex<HashMap<DurablePlace, Arc<OnceCell<Arc<DurableStorage>>>>>,
}

/// Where durable storage is: the CQL shard (`None`: the default) and the keyspace.
type DurablePlace = (Option<String>, String);

/// A memcached client, and the servers it spreads keys over.
#[derive(Clone)]
pub struct Memcached {
    client: AsyncMetaClient,
    servers: Vec<String>,
}

impl std::ops::Deref for Memcached {
    type Target = AsyncMetaClient;

    fn deref(&self) -> &AsyncMetaClient {
        &self.client
    }
}

/// The crate's client has no Debug of its own.
impl fmt::Debug for Memcached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Memcached")
            .field("servers", &self.servers)
            .finish_non_exhaustive()
    }
}

/// The producer kafka targets share, and its view of the brokers.
#[derive(Clone)]
pub struct TargetProducer {
    pub producer: FutureProducer<OutageContext>,
    /// Told when a record is delivered, which ends an outage the producer's errors began.
    pub outage: Arc<Outage>,
}

impl fmt::Debug for TargetProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TargetProducer")
            .field("outage", &self.outage)
            .finish_non_exhaustive()
    }
}

impl Clients {
    pub fn new(settings: ClientSettings) -> Result<Self, TargetError> {
        let http = reqwest::Client::builder()
            .timeout(settings.request_timeout)
            .connect_timeout(settings.request_timeout.min(Duration::from_secs(5)))
            .build()
            .map_err(|e| TargetError::permanent(format!("building the HTTP client: {e}")))?;
        Ok(Self {
            settings,
            cql: OnceCell::new(),
            kafka: OnceCell::new(),
            http,
            memcached: Mutex::new(HashMap::new()),
            clusters: None,
            durable: Mutex::new(HashMap::new()),
        })
    }

    /// These clients with durable storage on the shards of `clusters`.
    pub fn with_clusters(mut self, clusters: ClusterMap) -> Self {
        self.clusters = Some(clusters);
        self
    }

    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// Where cql targets write: the cluster map's default CQL shard (its nodes, login and
    /// datacenter) when this process has a map, else `settings.cql_nodes` with
    /// `settings.cql_credentials` (the writer, which reads no map).
    fn cql_place(&self) -> CqlPlace {
        match self
            .clusters
            .as_ref()
            .and_then(|clusters| clusters.cql(None))
        {
            Some(shard) => CqlPlace::of_shard(shard),
            None => CqlPlace {
                nodes: self.settings.cql_nodes.clone(),
                local_datacenter: None,
                credentials: self.settings.cql_credentials.clone(),
                tls_ca: self.settings.cql_tls_ca.clone(),
            },
        }
    }

    /// The CQL session for cql targets, connected on first use.
    pub async fn cql(&self) -> Result<Arc<Session>, TargetError> {
        let session = self
            .cql
            .get_or_try_init(|| async {
                let place = self.cql_place();
                if place.nodes.is_empty() {
                    // Retryable: a deployment missing a setting is fixed by a restart, and the
                    // entries should still be there when it is.
                    return Err(TargetError::retryable(
                        "a cql target needs CQL nodes; pass --cql-nodes or WAL_CQL_NODES",
                    ));
                }
                // A refused login or an unusable CA is unavailable too: the entries wait (using
                // no attempt) for the settings to be fixed, rather than going to the DLQ.
                let unavailable = || {
                    TargetError::unavailable(format!("connecting to CQL nodes {:?}", place.nodes))
                };
                place
                    .session_builder(Duration::from_secs(5), Some(self.settings.request_timeout))
                    .map_err(|e| unavailable().caused_by(e))?
                    .build()
                    .await
                    .map(Arc::new)
                    .map_err(|e| unavailable().caused_by(e))
            })
            .await?;
        Ok(Arc::clone(session))
    }

    /// The producer for kafka targets: idempotent, acks=all, so `Ok` means the record is on
    /// every in-sync replica.
    pub async fn kafka(&self) -> Result<&TargetProducer, TargetError> {
        self.kafka
            .get_or_try_init(|| async {
                // Its connection failures are folded into one outage, as the queues' are.
                let context = OutageContext::new("kafka-target");
                let outage = context.outage();
                let mut config = ClientConfig::new();
                for (key, value) in &self.settings.kafka_client {
                    config.set(key, value);
                }
                config
                    .set("bootstrap.servers", &self.settings.kafka_bootstrap)
                    .set("client.id", "wal-consumer-target")
                    .set("enable.idempotence", "true")
                    .set("acks", "all")
                    .set("linger.ms", "1")
                    .set(
                        "message.timeout.ms",
                        self.settings.request_timeout.as_millis().to_string(),
                    )
                    .create_with_context(context)
                    .map(|producer| TargetProducer { producer, outage })
                    .map_err(|e| {
                        TargetError::permanent("configuring the Kafka producer").caused_by(e)
                    })
            })
            .await
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The memcached servers a cache target of `servers` uses: those, or the consumer's default
    /// servers when `servers` is empty.
    pub fn memcached_servers(&self, servers: &[String]) -> Vec<String> {
        if servers.is_empty() {
            self.settings.memcached.clone()
        } else {
            servers.to_vec()
        }
    }

    /// A memcached client for `servers` (keys spread over them by jump consistent hash), or for
    /// the consumer's default servers when `servers` is empty.
    pub async fn memcached(&self, servers: &[String]) -> Result<Memcached, TargetError> {
        let servers = self.memcached_servers(servers);
        if servers.is_empty() {
            return Err(TargetError::retryable(
                "a cache target needs memcached servers; set \"servers\" in its settings or pass --memcached",
            ));
        }
        let mut clients = self.memcached.lock().await;
        if let Some(client) = clients.get(&servers) {
            return Ok(client.clone());
        }
        // Server lists come from target settings, which requests may carry: keep their number
        // bounded.
        if clients.len() >= MAX_MEMCACHED_CLIENTS {
            return Err(TargetError::permanent(format!(
                "cache targets name more than {MAX_MEMCACHED_CLIENTS} distinct memcached server lists; name fewer"
            )));
        }
        let client = AsyncMetaClient::connect_multiple(servers.iter().map(String::as_str))
            .await
            .map_err(|e| {
                TargetError::unavailable(format!("resolving memcached {servers:?}")).caused_by(e)
            })?
            .with_connect_timeout(Some(self.settings.request_timeout))
            .with_io_timeout(Some(self.settings.request_timeout))
            .with_max_idle(MEMCACHED_MAX_IDLE);
        let client = Memcached {
            client,
            servers: servers.clone(),
        };
        clients.insert(servers, client.clone());
        Ok(client)
    }

    /// Durable storage in `keyspace` (a namespace's configured one, so their number is bounded
    /// by the config), connected on first use. Connecting to one keyspace never waits on another.
    pub async fn durable(
        &self,
        durable: &DurableStorageConfig,
    ) -> Result<Arc<DurableStorage>, TargetError> {
        let keyspace = &durable.keyspace;
        let place = (durable.shard.clone(), keyspace.clone());
        let cell = {
            let mut cells = self.durable.lock().await;
            Arc::clone(cells.entry(place).or_default())
        };
        if let Some(storage) = cell.get() {
            return Ok(Arc::clone(storage));
        }
        // Boxed: connecting (a session, the schema) is a future of some 9 KB, which every
        // caller's future would otherwise carry inline and copy with each move (a timeout, a
        // join, a box) on every delivery, for a path taken once per keyspace.
        let storage = cell
            .get_or_try_init(|| Box::pin(async {
                let settings = self.durable_settings(durable)?;
                if settings.nodes.is_empty() {
                    return Err(TargetError::retryable(format!(
                        "the entry's payload is in durable storage (keyspace '{keyspace}') but no CQL nodes are set; pass --cql-nodes"
                    )));
                }
                match DurableStorage::connect(&settings).await {
                    Ok(storage) => Ok(Arc::new(storage)),
                    Err(error @ DurableError::BadKeyspace(_)) => {
                        Err(TargetError::permanent("durable storage").caused_by(error))
                    }
                    // A newer build migrated the keyspace: this consumer must not read it, and
                    // trying again changes nothing until it is upgraded. Held, not dead-lettered.
                    Err(error @ DurableError::NewerSchema { .. }) => {
                        Err(TargetError::unavailable("durable storage").caused_by(error))
                    }
                    Err(error) => Err(TargetError::retryable("durable storage").caused_by(error)),
                }
            }))
            .await?;
        Ok(Arc::clone(storage))
    }

    /// Whether `durable` is on the cluster cql targets write to, reached the same way, so a cql
    /// target's request can carry its archive rows.
    pub fn durable_beside_cql(&self, durable: &DurableStorageConfig) -> bool {
        let Some(clusters) = &self.clusters else {
            // Both on `settings.cql_nodes`.
            return true;
        };
        // The whole shard, not only its nodes: a batch runs under the target's login, TLS and
        // datacenter, which must be the archive's too.
        match (clusters.cql(durable.shard.as_deref()), clusters.cql(None)) {
            (Some(durable), Some(cql)) => durable == cql,
            _ => false,
        }
    }

    /// Where `durable` is: its shard of the cluster map, or the default shard's nodes.
    pub fn durable_settings(
        &self,
        durable: &DurableStorageConfig,
    ) -> Result<DurableSettings, TargetError> {
        let Some(clusters) = &self.clusters else {
            let nodes: Vec<&str> = self.settings.cql_nodes.iter().map(String::as_str).collect();
            return Ok(DurableSettings::new(&nodes, &durable.keyspace));
        };
        let shard = clusters.cql(durable.shard.as_deref()).ok_or_else(|| {
            TargetError::permanent(format!(
                "durable storage names CQL shard '{}', which the cluster map ({}) does not have",
                durable.shard.as_deref().unwrap_or_default(),
                clusters.origin()
            ))
        })?;
        Ok(DurableSettings::on_shard(shard, &durable.keyspace))
    }
}
