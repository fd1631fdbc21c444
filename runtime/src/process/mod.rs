//! What the platform's binaries share about running as a process: the gRPC server's standard
//! services, logs and metrics, the namespace feed at start-up, and the shutdown signal. (The
//! broker and CQL flags are the cluster map's: `wal_clusters::flags`.)

mod driver_outage;
mod grpc;
mod logs;
mod scrape;
pub mod series;
mod starting;
mod telemetry;
mod traces;

use std::future::Future;
use std::process::ExitCode;

use wal_namespaces::feed::{Feed, FeedError, Source};

pub use grpc::{ReflectionError, ServeError, standard_services};
pub use logs::{DEFAULT_LOG_FILTER, LogFlags, LogFormat, init_tracing};
pub use starting::reporting_slow;
pub use telemetry::{MetricsError, MetricsHandle, install_metrics, serve_metrics};
pub use traces::{Traces, exporting, trace_span};

/// Opens the namespace feed a service starts from. On failure it says why on stderr, prefixed
/// with the binary's name, and gives the exit code: 2 for configs that do not validate (fix
/// them), 1 for a control plane that cannot be reached (retrying may help).
pub async fn open_feed(binary: &str, source: Source) -> Result<Feed, ExitCode> {
    Feed::open(source.clone()).await.map_err(|error| {
        eprintln!("{binary}: {source}: {error}");
        ExitCode::from(match error {
            FeedError::Invalid(_) => 2,
            FeedError::Unreachable(_) => 1,
        })
    })
}

/// A feed-following service's life after its flags are parsed: opens the feed it starts from
/// (see [`open_feed`]), runs `run` on it, and turns the outcome into the exit code, an error
/// said on stderr with its causes, prefixed with the binary's name.
pub async fn run_on_feed<Run, Ran, E>(binary: &str, source: Source, run: Run) -> ExitCode
where
    Run: FnOnce(Feed) -> Ran,
    Ran: Future<Output = Result<(), E>>,
    // `{:#}` of an anyhow::Error says its causes too.
    E: std::fmt::Display,
{
    let feed = match open_feed(binary, source).await {
        Ok(feed) => feed,
        Err(code) => return code,
    };
    exit_code(binary, run(feed).await)
}

/// Runs a service's `run` with its logs and traces set up first ([`init_tracing`], the
/// services' default filter) and its last spans sent after: every service's `main`.
pub async fn traced(
    binary: &str,
    format: LogFormat,
    run: impl Future<Output = ExitCode>,
) -> ExitCode {
    let traces = init_tracing(binary, DEFAULT_LOG_FILTER, format);
    let code = run.await;
    traces.shutdown().await;
    code
}

/// How a binary's run ends: success, or failure after its error (and, for an anyhow error
/// printed with `{:#}`, its causes) on stderr, named by the binary.
pub fn exit_code<E: std::fmt::Display>(binary: &str, ran: Result<(), E>) -> ExitCode {
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{binary}: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// A server's port that could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {address}")]
pub struct ListenError {
    pub address: std::net::SocketAddr,
    #[source]
    source: std::io::Error,
}

/// Binds a server's listening port, the error naming it: a port in use fails the start.
pub async fn listen(address: std::net::SocketAddr) -> Result<tokio::net::TcpListener, ListenError> {
    tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| ListenError { address, source })
}

/// Completes on Ctrl-C or SIGTERM (what Kubernetes sends before it kills a pod), so a binary can
/// start its graceful shutdown.
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}
