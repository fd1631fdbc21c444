//! Logs and metrics, set up the same way in every binary.

use std::net::SocketAddr;

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};
use tracing_subscriber::EnvFilter;

/// Logs to stderr as `RUST_LOG` says; `default_filter` when it is unset. The CQL driver's own
/// INFO lines (every connection it opens) are left out of the defaults.
pub fn init_tracing(default_filter: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter)),
        )
        .init();
}

/// The default log filter of the platform's services.
pub const DEFAULT_LOG_FILTER: &str = "info,scylla=warn";

/// Serves Prometheus metrics (GET /metrics) on `listen`, every histogram named `*_seconds` with
/// `buckets`.
pub fn serve_metrics(listen: SocketAddr, buckets: &[f64]) -> Result<(), BuildError> {
    PrometheusBuilder::new()
        .with_http_listener(listen)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), buckets)?
        .install()
}
