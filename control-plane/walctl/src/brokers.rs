//! Where the brokers are, for the commands that read a namespace's queues themselves (`dlq`,
//! `replay`): the same flags and environment variables as the producer's and the consumer's.

use wal_core::queue::kafka::KafkaSettings;
use wal_core::queue::sqs::SqsSettings;

#[derive(Debug, Clone, clap::Args)]
pub struct BrokerArgs {
    /// Kafka bootstrap servers, for namespaces on Kafka.
    #[arg(long, env = "WAL_KAFKA_BOOTSTRAP", default_value = "127.0.0.1:19092")]
    pub kafka_bootstrap: String,
    /// SQS endpoint (ElasticMQ locally); unset means AWS.
    #[arg(long, env = "WAL_SQS_ENDPOINT")]
    pub sqs_endpoint: Option<String>,
    /// AWS region for SQS.
    #[arg(long, env = "WAL_SQS_REGION", default_value = "us-east-1")]
    pub sqs_region: String,
}

impl BrokerArgs {
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
