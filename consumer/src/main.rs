//! `wal-consumer`: delivers the entries of the namespaces in a folder of configs or a control
//! plane, and follows their changes while it runs.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use tokio::net::TcpSocket;
use tokio_util::sync::CancellationToken;
use wal_consumer::{Consumer, ConsumerOptions, metrics};
use wal_namespaces::feed::Feed;
use wal_runtime::process;

/// The name the health service reports under.
const HEALTH_SERVICE: &str = "wal.consumer";

/// mimalloc rather than the system allocator: an entry is received on rdkafka's thread and
/// freed on a runtime thread, and glibc's malloc and free took about a tenth of the replication
/// path's time (perf, the replicate bench); with mimalloc its throughput went from 0.55-0.72 to
/// 0.78-0.97 of the hand-written baseline (which ran on mimalloc too).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let options = ConsumerOptions::parse();
    let format = options.log.log_format;
    let serving = process::run_on_feed("wal-consumer", options.source(), |feed| run(options, feed));
    process::traced("wal-consumer", format, serving).await
}

async fn run(options: ConsumerOptions, feed: Feed) -> anyhow::Result<()> {
    process::serve_metrics(options.metrics_listen, metrics::BUCKETS)?;
    metrics::describe();

    // The health port is taken before the queues, so a consumer that cannot have it exits before
    // it joins a consumer group (its leaving would move every other member's queues), and it
    // listens only once started: a connection to it means the consumer runs.
    let health_at = options.health_listen;
    let health_port =
        claim_port(health_at).with_context(|| format!("serving health on {health_at}"))?;
    let settings = options.settings()?;
    let starting = Consumer::start(&settings, feed.namespaces().to_vec());
    let consumer = process::reporting_slow(
        "wal-consumer",
        "joining the namespaces' queues and connecting their targets",
        starting,
    )
    .await?;
    let listener = health_port
        .listen(1024)
        .with_context(|| format!("serving health on {health_at}"))?;
    let (health, router) = process::standard_services(tonic::transport::Server::builder())?;
    health
        .set_service_status(HEALTH_SERVICE, tonic_health::ServingStatus::Serving)
        .await;
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let health_server = tokio::spawn(router.serve_with_incoming(incoming));
    tracing::info!(queues = ?consumer.queues(), source = %feed.source(), metrics = %options.metrics_listen, health = %options.health_listen, "wal-consumer ready");

    let shutdown = CancellationToken::new();
    let signal = shutdown.clone();
    tokio::spawn(async move {
        process::shutdown_signal().await;
        tracing::info!("shutting down: finishing entries in progress");
        signal.cancel();
    });
    let stopping = shutdown.clone();
    let reporter = health.clone();
    tokio::spawn(async move {
        stopping.cancelled().await;
        reporter
            .set_service_status(HEALTH_SERVICE, tonic_health::ServingStatus::NotServing)
            .await;
    });
    consumer.run_following(Some(feed), shutdown).await;
    health_server.abort();
    tracing::info!("wal-consumer stopped");
    Ok(())
}

/// A socket bound to `address` that does not listen yet: the port is this process's, and
/// connections are refused until [`TcpSocket::listen`].
fn claim_port(address: SocketAddr) -> std::io::Result<TcpSocket> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As TcpListener::bind does: a port left in TIME-WAIT by this service's last run is free.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    Ok(socket)
}
