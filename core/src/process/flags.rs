//! Where the brokers and CQL are: the flags every binary takes for them, one clap group each,
//! with the same names and environment variables everywhere (`scripts/stack env` and the Helm
//! chart set the variables once for all processes).

use crate::queue::kafka::KafkaSettings;
use crate::queue::sqs::SqsSettings;

/// The brokers a process's namespaces live on.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct BrokerFlags {
    /// Kafka bootstrap servers, for namespaces on Kafka.
    #[arg(long, env = "WAL_KAFKA_BOOTSTRAP", default_value = "127.0.0.1:19092")]
    pub kafka_bootstrap: String,

    /// SQS endpoint (ElasticMQ locally), for namespaces on SQS; unset means AWS in --sqs-region.
    #[arg(long, env = "WAL_SQS_ENDPOINT")]
    pub sqs_endpoint: Option<String>,

    /// AWS region for SQS.
    #[arg(long, env = "WAL_SQS_REGION", default_value = "us-east-1")]
    pub sqs_region: String,
}

impl BrokerFlags {
    pub fn kafka(&self) -> KafkaSettings {
        KafkaSettings::new(&self.kafka_bootstrap)
    }

    pub fn sqs(&self) -> SqsSettings {
        match &self.sqs_endpoint {
            Some(endpoint) => SqsSettings::local(endpoint),
            None => SqsSettings::aws(&self.sqs_region),
        }
    }
}

/// The CQL cluster: durable storage, claim checks, archives and cql targets.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct CqlFlags {
    /// CQL contact points (comma-separated host:port), for durable storage (claim checks, the
    /// archive) and cql targets.
    #[arg(long, env = "WAL_CQL_NODES", value_delimiter = ',')]
    pub cql_nodes: Vec<String>,
}

/// Fills what the local stack (`scripts/stack up`) has and the flags leave unset: its ElasticMQ
/// and its Cassandra. For tests, benchmarks and demos only: in production an unset SQS endpoint
/// means AWS.
pub fn local_stack(brokers: &mut BrokerFlags, cql: &mut CqlFlags) {
    if brokers.sqs_endpoint.is_none() {
        brokers.sqs_endpoint = Some("http://127.0.0.1:19324".to_owned());
    }
    if cql.cql_nodes.is_empty() {
        cql.cql_nodes = vec!["127.0.0.1:19042".to_owned()];
    }
}
