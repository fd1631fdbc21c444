//! Metrics, set up the same way in every binary.

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

use super::{scrape, series};

/// Why metrics could not be served.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("bad histogram buckets")]
    Buckets(#[from] BuildError),
    #[error("a metrics recorder is already installed in this process")]
    AlreadyInstalled,
    #[error("cannot serve metrics on {address}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// The installed recorder's scrape: the Prometheus text format, without the series of label sets
/// nobody holds any more ([`super::series`]).
#[derive(Debug, Clone)]
pub struct MetricsHandle {
    prometheus: PrometheusHandle,
}

impl MetricsHandle {
    pub fn render(&self) -> String {
        series::scrape_filter(&self.prometheus.render())
    }
}

/// Installs the process's metrics recorder, every histogram named `*_seconds` with `buckets`,
/// and keeps its histograms drained (every 5 s) while the current tokio runtime runs.
pub fn install_metrics(buckets: &[f64]) -> Result<MetricsHandle, MetricsError> {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), buckets)?
        .build_recorder();
    let prometheus = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|_| MetricsError::AlreadyInstalled)?;
    // A scrape drains the histograms too; outside a runtime (a test's) it is left to them.
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let upkeep = prometheus.clone();
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                upkeep.run_upkeep();
            }
        });
    }
    Ok(MetricsHandle { prometheus })
}

/// The platform's version, as every binary's `--version` says it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit this build is of, when the build said (`WAL_COMMIT` in the compiler's
/// environment: the Dockerfile passes its `WAL_COMMIT` build argument); `unknown` otherwise.
pub const COMMIT: &str = match option_env!("WAL_COMMIT") {
    Some(commit) => commit,
    None => "unknown",
};

/// `wal_build_info{version, commit}` 1: which build answers a scrape, for a dashboard to show
/// and an upgrade to be followed by.
fn build_info() {
    metrics::describe_gauge!(
        "wal_build_info",
        "Always 1; its labels say the process's version and the commit it was built from."
    );
    metrics::gauge!("wal_build_info", "version" => VERSION, "commit" => COMMIT).set(1.0);
}

/// Installs the recorder ([`install_metrics`]) and serves its scrape over HTTP on `listen`
/// (any path answers, as Prometheus exporters do), with `wal_build_info` in it.
pub fn serve_metrics(listen: SocketAddr, buckets: &[f64]) -> Result<(), MetricsError> {
    // Bound here, so a port in use fails the start rather than a background task.
    let bound = std::net::TcpListener::bind(listen)
        .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
        .and_then(tokio::net::TcpListener::from_std);
    let listener = bound.map_err(|source| MetricsError::Listen {
        address: listen,
        source,
    })?;
    let handle = install_metrics(buckets)?;
    build_info();
    tokio::spawn(scrape::serve(listener, handle));
    Ok(())
}
