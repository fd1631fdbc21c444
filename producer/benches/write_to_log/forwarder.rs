//! The front door's fair yardstick: what a team would write instead of adopting the platform. A
//! gRPC server with the same `WriteAheadLog` service that hands each write's payload to rdkafka
//! (acks=all, idempotence, the settings of the platform's producer) and answers TRUE once the
//! broker acknowledged it; nothing else: no namespaces, checks, limits, entry format, metrics or
//! traces. Raw rdkafka in the benchmark's own process pays no network hop and no second process;
//! this pays both, as WriteToLog does, so the ratio between the two is the platform's own cost.
//!
//! It runs as a process of its own, as the producer does, so each side's CPU is its process's:
//! the benchmark starts its own program again with `BENCH_FORWARDER_LISTEN` set.

use std::process::Stdio;
use std::time::Duration;

use rdkafka::producer::{FutureProducer, FutureRecord};
use tonic::transport::{Channel, Server};
use tonic::{Request, Response, Status};
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::write_ahead_log_server::{WriteAheadLog, WriteAheadLogServer};
use wal_proto::v1::{
    Trilean, WriteResult, WriteToLogBatchRequest, WriteToLogBatchResponse, WriteToLogRequest,
    WriteToLogResponse,
};

use super::{ProducerProcess, connect_once_up, free_port, raw_config, stack};

const LISTEN: &str = "BENCH_FORWARDER_LISTEN";
const TOPIC: &str = "BENCH_FORWARDER_TOPIC";

/// Serves as the forwarder until killed, when this process was started as one; `false` at once
/// otherwise.
pub async fn serve_if_asked() -> bool {
    let Ok(listen) = std::env::var(LISTEN) else {
        return false;
    };
    let topic = std::env::var(TOPIC).expect("BENCH_FORWARDER_TOPIC names the topic");
    // Gone with the benchmark however it ends (a kill skips its cleanup): its end closes this
    // process's stdin.
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        std::process::exit(0);
    });
    let producer: FutureProducer = raw_config(&stack("WAL_KAFKA_BOOTSTRAP", "127.0.0.1:19092"))
        .create()
        .expect("the forwarder's Kafka producer");
    Server::builder()
        .add_service(WriteAheadLogServer::new(Forwarder { producer, topic }))
        .serve(
            listen
                .parse()
                .expect("BENCH_FORWARDER_LISTEN is an address"),
        )
        .await
        .expect("the forwarder serves");
    true
}

/// Starts the forwarder on `topic` and connects to it as the benchmark connects to the producer.
pub async fn start(topic: &str) -> (ProducerProcess, Vec<WriteAheadLogClient<Channel>>) {
    let address = format!("127.0.0.1:{}", free_port());
    let child =
        super::cores::server_command(std::env::current_exe().expect("the benchmark's own program"))
            .env(LISTEN, &address)
            .env(TOPIC, topic)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the forwarder");
    let mut process = ProducerProcess(child, 0, address.clone());
    let endpoint = Channel::from_shared(format!("http://{address}")).unwrap();
    let clients = connect_once_up(&mut process, &endpoint, "the forwarder").await;
    (process, clients)
}

struct Forwarder {
    producer: FutureProducer,
    topic: String,
}

impl Forwarder {
    /// One write to the topic, answered TRUE once acknowledged, UNKNOWN otherwise.
    async fn forward(&self, write: &WriteToLogRequest) -> WriteToLogResponse {
        let record = FutureRecord::to(&self.topic)
            .key(&write.key)
            .payload(&write.payload);
        match self.producer.send(record, Duration::from_secs(10)).await {
            Ok(_) => WriteToLogResponse {
                durable: Trilean::True.into(),
                ..WriteToLogResponse::default()
            },
            Err((error, _)) => WriteToLogResponse {
                durable: Trilean::Unknown.into(),
                message: error.to_string(),
                ..WriteToLogResponse::default()
            },
        }
    }
}

#[tonic::async_trait]
impl WriteAheadLog for Forwarder {
    async fn write_to_log(
        &self,
        request: Request<WriteToLogRequest>,
    ) -> Result<Response<WriteToLogResponse>, Status> {
        Ok(Response::new(self.forward(request.get_ref()).await))
    }

    async fn write_to_log_batch(
        &self,
        request: Request<WriteToLogBatchRequest>,
    ) -> Result<Response<WriteToLogBatchResponse>, Status> {
        let answers =
            futures::future::join_all(request.get_ref().writes.iter().map(|w| self.forward(w)))
                .await;
        let results = answers
            .into_iter()
            .map(|response| WriteResult {
                response: Some(response),
                ..WriteResult::default()
            })
            .collect();
        Ok(Response::new(WriteToLogBatchResponse { results }))
    }
}
