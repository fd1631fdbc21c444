//! The CQL driver's own log lines about a cluster it cannot reach, folded into one [`Outage`].
//!
//! While Cassandra (or ScyllaDB) is away, the driver logs every failed attempt to re-establish
//! its control connection at WARN and ERROR, about four lines a second per session: a
//! twenty-second restart left a hundred of them in one producer's log, and a consumer holds
//! several sessions. Like librdkafka's connection failures ([`crate::queue::kafka`]), they are
//! the cluster's absence, and the driver reconnects by itself. So this layer turns the first one
//! into one WARN ("lost the service", with the driver's reason), counts the rest, and logs one
//! INFO with how long it lasted and how many failures were counted when the driver says the node
//! is reachable again. The default log filter leaves the driver's lines out of the log; `RUST_LOG`
//! brings them back (`RUST_LOG=info,scylla=warn`).
//!
//! The signals are the driver's log lines (scylla 1.x): a WARN or ERROR from any of its modules
//! is a failure; its cluster worker's "Node is now reachable again" and a control connection's
//! "Fetched new metadata" are answers. One outage per process: the lines do not say which
//! session they come from, and every session of a process reaches the same clusters.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer};

use crate::outage::Outage;

/// The driver's module path, the prefix of its log targets.
const DRIVER: &str = "scylla";

/// Messages of the driver's that say it reaches the cluster again.
const ANSWERS: [&str; 2] = ["Node is now reachable again", "Fetched new metadata"];

/// The layer; see the module doc.
#[derive(Debug, Default)]
pub struct CqlDriverOutage {
    /// Made at the first line: logging starts before the metrics recorder is installed, and
    /// metric handles taken before it would count nowhere.
    outage: std::sync::OnceLock<Outage>,
}

impl CqlDriverOutage {
    pub fn new() -> Self {
        Self::default()
    }

    fn outage(&self) -> &Outage {
        self.outage
            .get_or_init(|| Outage::new("cassandra", "cql-driver"))
    }

    /// The driver's events this layer reads: its failures, and the DEBUG lines of its cluster
    /// worker and control connection that carry the answers.
    pub fn interest() -> Targets {
        Targets::new()
            .with_target(DRIVER, Level::WARN)
            .with_target("scylla::cluster", Level::DEBUG)
    }

    fn read(&self, level: Level, target: &str, message: &str) {
        if !target.starts_with(DRIVER) {
            return;
        }
        // tracing orders levels by verbosity: WARN and ERROR are the ones at or below WARN.
        if level <= Level::WARN {
            self.outage().failed(&message);
        } else if ANSWERS.iter().any(|answer| message.starts_with(answer)) {
            self.outage().answered();
        }
    }
}

impl<S: Subscriber> Layer<S> for CqlDriverOutage {
    fn on_event(&self, event: &Event<'_>, _context: Context<'_, S>) {
        let metadata = event.metadata();
        let mut line = Line::default();
        event.record(&mut line);
        self.read(*metadata.level(), metadata.target(), &line.0);
    }
}

/// An event's message and fields as one line: the outage's reason.
#[derive(Debug, Default)]
struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drivers_failures_are_one_outage_until_it_reaches_the_node_again() {
        let layer = CqlDriverOutage::new();
        let worker = "scylla::cluster::worker";
        let establisher = "scylla::cluster::metadata::cc_establisher";
        layer.read(Level::INFO, worker, "Node added to cluster");
        assert!(!layer.outage().is_away());
        for _ in 0..50 {
            layer.read(
                Level::ERROR,
                establisher,
                "Could not establish control connection",
            );
            layer.read(
                Level::WARN,
                establisher,
                "Failed to establish control connection",
            );
        }
        assert!(layer.outage().is_away());
        // Other DEBUG lines say nothing of the return.
        layer.read(
            Level::DEBUG,
            worker,
            "Node is no longer reachable: 127.0.0.1:19042",
        );
        assert!(layer.outage().is_away());
        layer.read(
            Level::DEBUG,
            worker,
            "Node is now reachable again: 127.0.0.1:19042",
        );
        assert!(!layer.outage().is_away());
        // Only the driver's lines count.
        layer.read(Level::ERROR, "wal_consumer::worker", "anything");
        assert!(!layer.outage().is_away());
        layer.read(Level::WARN, establisher, "Failed again");
        assert!(layer.outage().is_away());
        layer.read(Level::DEBUG, establisher, "Fetched new metadata");
        assert!(!layer.outage().is_away());
    }
}
