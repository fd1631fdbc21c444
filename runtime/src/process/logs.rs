//! Logs and traces, set up the same way in every binary: log lines on stderr, as text for a
//! person or as JSON for a machine, and spans exported over OTLP when OpenTelemetry's
//! environment asks for them (see [`super::traces`]).

use std::io::IsTerminal as _;

use tracing::Subscriber;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Identity, Layered, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use super::driver_outage::CqlDriverOutage;
use super::traces::{self, Traces};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Lines for a person: time, level, target, message and fields.
    #[default]
    Text,
    /// One JSON object per line, for a log pipeline: `timestamp`, `level`, `target`, the
    /// event's `fields` (its `message` among them) and the spans it happened in (`span`, the
    /// innermost, and `spans`, all), with their fields: a line within a write's producer call
    /// or a delivery names the write's `trace_id` there. (What a process prints before its
    /// logging starts, or as its last word on exit, is plain text.)
    Json,
}

/// The log flags every service takes.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct LogFlags {
    /// How log lines are written on stderr: `text` for a person, `json` (one object per line)
    /// for a log pipeline. Which lines: RUST_LOG (default: info).
    #[arg(long, env = "WAL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Logs to stderr as `RUST_LOG` says (`default_filter` when it is unset), in `format`, and
/// exports the platform's spans over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or its traces
/// variant) is set, under `OTEL_SERVICE_NAME` or else `binary`. The CQL driver's own lines are
/// read by [`CqlDriverOutage`] too, which folds its connection failures into one outage; the
/// default filter leaves those out of the log.
///
/// Colours only on a terminal (and not when `NO_COLOR` is set): a log file, a pod's log or a
/// pipe into grep gets plain text, not escape sequences around every field. Keep the returned
/// [`Traces`] until the process ends and shut it down then, so its last spans are sent.
pub fn init_tracing(binary: &str, default_filter: &str, format: LogFormat) -> Traces {
    let shown =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let (traces, exported) = traces::start(binary);
    let lines = match format {
        LogFormat::Text => {
            let colours = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(colours)
                .boxed()
        }
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_current_span(true)
            .with_span_list(true)
            .boxed(),
    };
    subscriber(exported.map(Layer::boxed), lines, shown).init();
    traces
}

/// The exporter's layer, boxed: on the registry itself.
type Boxed = Box<dyn Layer<Registry> + Send + Sync>;

/// The log lines' layer, boxed: on the registry and the exporter's layer.
type Lines = Box<dyn Layer<Layered<Boxed, Registry>> + Send + Sync>;

/// The registry with its layers: the exporter's when there is one, the log lines as `shown`
/// says, and the CQL driver's outage reader.
fn subscriber(exported: Option<Boxed>, lines: Lines, shown: EnvFilter) -> impl Subscriber {
    // Without an exporter, a layer that takes nothing. `None` as a layer (tracing-subscriber's
    // `Option<Layer>`) is interested in every callsite, and the registry would then make every
    // span up to the finest level any filter names (DEBUG, for the outage reader) for no layer
    // at all: each write's span, and the HTTP/2 stack's, were made under RUST_LOG=warn.
    let exported =
        exported.unwrap_or_else(|| Identity::new().with_filter(LevelFilter::OFF).boxed());
    tracing_subscriber::registry()
        .with(exported)
        .with(lines.with_filter(shown))
        .with(CqlDriverOutage::new().with_filter(CqlDriverOutage::interest()))
}

/// The default log filter of the platform's services: the CQL driver's warnings, except its
/// control connection's failures, which are folded into an outage instead (see
/// [`CqlDriverOutage`]; the target is [`super::driver_outage::FOLDED`]).
pub const DEFAULT_LOG_FILTER: &str =
    "info,scylla=warn,scylla::cluster::metadata::cc_establisher=off";

#[cfg(test)]
mod tests {
    use super::*;

    fn without_exporter(shown: &str) -> impl Subscriber {
        let lines = tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .boxed();
        subscriber(None, lines, EnvFilter::new(shown))
    }

    // One test, so one subscriber at a time in this process: a callsite's interest is shared by
    // every live dispatcher, and another test's subscriber alive at once could make these spans
    // (nextest gives each test a process of its own; `cargo test` runs them side by side).
    #[test]
    fn a_span_is_made_only_when_a_layer_takes_it() {
        tracing::subscriber::with_default(without_exporter("warn"), || {
            assert!(tracing::info_span!("write_to_log").is_disabled());
            assert!(tracing::debug_span!(target: "h2::proto", "poll").is_disabled());
            // The outage reader's own interest: the CQL driver's debug lines.
            assert!(
                !tracing::debug_span!(target: "scylla::cluster::node", "connect").is_disabled()
            );
        });
        tracing::subscriber::with_default(without_exporter(DEFAULT_LOG_FILTER), || {
            assert!(tracing::debug_span!(target: "h2::proto", "poll").is_disabled());
            assert!(!tracing::info_span!("write_to_log").is_disabled());
        });
    }
}
