//! The test process's own metrics: what in-process producers, consumers and writers recorded.

use std::sync::OnceLock;

/// The process's metrics scrape, as the services serve it (released series left out). The
/// recorder is installed on first call: call it before starting what records, since handles
/// made before it are no-ops.
pub fn scrape() -> String {
    static HANDLE: OnceLock<wal_runtime::process::MetricsHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            wal_runtime::process::install_metrics(&[1.0]).expect("no other metrics recorder")
        })
        .render()
}

/// The sum of `metric`'s samples labelled with `namespace` in [`scrape`]; None when the scrape
/// does not parse.
pub fn scraped(metric: &str, namespace: &str) -> Option<f64> {
    let samples = wal_runtime::exposition::parse(&scrape()).ok()?;
    Some(
        samples
            .iter()
            .filter(|s| s.name == metric && s.label("namespace") == Some(namespace))
            .map(|s| s.value)
            .sum(),
    )
}
