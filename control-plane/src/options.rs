//! The control plane's command line; every flag can also be set through its environment variable.

use std::net::SocketAddr;

use clap::Parser;

use crate::provision::BrokerSettings;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "wal-control-plane",
    version,
    about = "The namespace registry: versions, update rules and provisioning"
)]
pub struct ControlPlaneOptions {
    /// Where the gRPC server listens.
    #[arg(long, env = "WAL_CONTROL_LISTEN", default_value = "127.0.0.1:50060")]
    pub listen: SocketAddr,

    /// The namespace store: sqlite://PATH (created when missing) or postgres://USER@HOST:PORT/DB.
    #[arg(
        long,
        env = "WAL_CONTROL_STORE",
        default_value = "sqlite://wal-control-plane.db"
    )]
    pub store: String,

    /// Kafka bootstrap servers, for namespaces on Kafka.
    #[arg(long, env = "WAL_KAFKA_BOOTSTRAP", default_value = "127.0.0.1:19092")]
    pub kafka_bootstrap: String,

    /// SQS endpoint (ElasticMQ locally); unset means AWS in --sqs-region.
    #[arg(long, env = "WAL_SQS_ENDPOINT")]
    pub sqs_endpoint: Option<String>,

    /// AWS region for SQS.
    #[arg(long, env = "WAL_SQS_REGION", default_value = "us-east-1")]
    pub sqs_region: String,
}

impl ControlPlaneOptions {
    pub fn brokers(&self) -> BrokerSettings {
        BrokerSettings {
            kafka_bootstrap: Some(self.kafka_bootstrap.clone()),
            sqs_endpoint: self.sqs_endpoint.clone(),
            sqs_region: Some(self.sqs_region.clone()),
        }
    }
}
