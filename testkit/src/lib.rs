//! What the integration tests, benchmarks and demos share, so each helper is written once.
//!
//! - [`stack`]: where the local stack's services are (the environment `scripts/stack env`
//!   prints, with the stack's defaults), unique names, polling, stopping and restarting a service.
//! - `control_plane` (feature `control-plane`): a control plane in-process, namespace configs,
//!   walctl runs.
//! - the stores (feature `stores`): namespace and payload builders, a CQL table to read rows back
//!   from, the benches' CQL rows, an HTTP upstream that records what it receives. No service of
//!   the platform is in it, so the crates the fleet depends on use it without a loop.
//! - the fleet (feature `fleet`, the stores too; no feature is on by default): an in-process
//!   producer and consumer (and a producer process to kill), readers for queues and Kafka logs,
//!   and regions' writers on loopback.
//!
//! Helpers panic with what they were doing, like the tests they serve: a service that is not up
//! fails the test that needs it, naming the address it tried.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod backends;
pub mod measure;
mod scrape;
pub use scrape::{scrape, scraped};
pub mod stack;

#[cfg(feature = "control-plane")]
pub mod secured;

#[cfg(feature = "fleet")]
mod consumer;
#[cfg(feature = "control-plane")]
mod control_plane;
#[cfg(feature = "stores")]
mod cql;
#[cfg(feature = "stores")]
pub mod cql_rows;
#[cfg(feature = "fleet")]
mod fleet;
#[cfg(feature = "control-plane")]
mod grpc;
#[cfg(feature = "stores")]
mod namespaces;
#[cfg(feature = "control-plane")]
pub mod pki;
#[cfg(feature = "fleet")]
mod producer;
#[cfg(feature = "fleet")]
mod producer_process;
#[cfg(feature = "fleet")]
mod queues;
#[cfg(feature = "fleet")]
mod transactions;
#[cfg(feature = "stores")]
mod upstream;
#[cfg(feature = "fleet")]
mod writer;

pub use stack::{
    KilledWhenDropped, Restart, SECOND_CLUSTER, ShowLogOnFailure, arrival, assert_quiet, cargo_bin,
    cql_nodes, env_u64, eventually, jaeger, kafka_bootstrap, kafka2_bootstrap, memcached, outage,
    refusing_address, restart_kafka, sqs_endpoint, stack, unique, warnings, with_second_cluster,
};
/// The queue backends, for [`on_each_backend!`] and the tests that name one.
pub use wal_queue::Backend;

#[cfg(feature = "fleet")]
pub use consumer::{
    consumer_process, consumer_process_at, consumer_process_from, consumer_process_logging_to,
    consumer_process_logging_with_env, consumer_process_with_env, durable_storage, local_stack,
    start_consumer, start_consumer_following, start_consumer_with, terminate,
};
#[cfg(feature = "control-plane")]
pub use control_plane::{
    apply_config, config, control_plane, control_plane_at, control_plane_on, control_plane_serving,
    delete_namespace, json_of, walctl_at,
};
#[cfg(feature = "stores")]
pub use cql::{Cql, KEYSPACE};
#[cfg(feature = "fleet")]
pub use fleet::Fleet;
#[cfg(feature = "control-plane")]
pub use grpc::{assert_refused, health_status, reflected_services, refused_field};
#[cfg(feature = "stores")]
pub use namespaces::{
    cql_target, delete, destinations, kafka_store, namespace, namespace_json,
    namespace_with_target, put, with_archive, with_durable_storage,
};
#[cfg(feature = "fleet")]
pub use producer::{
    TestProducer, delayed, write, write_all_durably, write_through_kafka_restarts, write_true,
    write_until_true,
};
#[cfg(feature = "fleet")]
pub use producer_process::ProducerProcess;
#[cfg(feature = "fleet")]
pub use queues::{
    delete_topics, dlq_reader, drain, find_entries, find_entry, group_state, kafka_log,
    kafka_log_on, provision_topic, read_back, read_entry, reader, topic_records,
};
#[cfg(feature = "fleet")]
pub use transactions::{numbered_items, transaction_of};
#[cfg(feature = "stores")]
pub use upstream::{Received, Upstream};
/// What [`start_consumer`] returns, for tests that keep one in a struct.
#[cfg(feature = "fleet")]
pub use wal_consumer::ConsumerHandle;
#[cfg(feature = "fleet")]
pub use writer::{
    TestWriter, cache_converges, cache_delete, cache_outstanding, cache_set, cached, keyed,
    region_caches, region_target, write_cache_rounds_until,
};
