//! The CQL driver's own log lines about a cluster it cannot reach, folded into one [`Outage`].
//!
//! While Cassandra (or ScyllaDB) is away, the driver logs every failed attempt to re-establish
//! its control connection at WARN and ERROR, about four lines a second per session: a
//! twenty-second restart left a hundred of them in one producer's log, and a consumer holds
//! several sessions. Like librdkafka's connection failures (the queue crate's `kafka` module), they are
//! the cluster's absence, and the driver reconnects by itself. So this layer turns the first one
//! into one WARN ("lost the service", with the driver's reason), counts the rest, and logs one
//! INFO with how long it lasted and how many failures were counted when the driver says the node
//! is reachable again. The default log filter leaves those lines of the driver's out of the log
//! ([`FOLDED`]); `RUST_LOG` brings them back (`RUST_LOG=info,scylla=warn`).
//!
//! The signals are the driver's log lines (scylla 1.x). Failures: the WARN and ERROR lines of
//! its control connection's establisher, every one of which says the control connection could
//! not be (re)established. Answers: its cluster worker's "Node is now reachable again" and a
//! control connection's "Fetched new metadata". The driver's other warnings (a server-side
//! warning on a response, a keyspace that could not be set) say nothing about the cluster being
//! away: they are logged as they come. One outage per process: the lines do not say which
//! session they come from, and every session of a process reaches the same clusters.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer};

use crate::outage::Outage;

/// The driver's module path, the prefix of its log targets.
const DRIVER: &str = "scylla";

/// Where the driver logs its failures to (re)establish a control connection: the lines this
/// layer folds, and the default log filter leaves out.
pub const FOLDED: &str = "scylla::cluster::metadata::cc_establisher";

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

    /// The driver's events this layer reads: the DEBUG lines of its cluster worker and control
    /// connection, which carry the failures and the answers.
    pub fn interest() -> Targets {
        Targets::new().with_target("scylla::cluster", Level::DEBUG)
    }

    fn read(&self, level: Level, target: &str, message: &str) {
        if !target.starts_with(DRIVER) {
            return;
        }
        // tracing orders levels by verbosity: WARN and ERROR are the ones at or below WARN.
        if level <= Level::WARN && target == FOLDED {
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
        // Only the driver's control connection failures count.
        layer.read(Level::ERROR, "wal_consumer::worker", "anything");
        let connection = "scylla::network::connection";
        layer.read(
            Level::WARN,
            connection,
            "Response from the database contains a warning",
        );
        assert!(!layer.outage().is_away());
        layer.read(Level::WARN, establisher, "Failed again");
        assert!(layer.outage().is_away());
        layer.read(Level::DEBUG, establisher, "Fetched new metadata");
        assert!(!layer.outage().is_away());
    }

    #[test]
    fn the_default_log_filter_leaves_out_what_is_folded() {
        let filter = crate::process::DEFAULT_LOG_FILTER;
        assert!(filter.contains(&format!("{FOLDED}=off")), "{filter}");
    }
}
