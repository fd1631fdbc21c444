//! A process's spans exported over OTLP/gRPC, configured by OpenTelemetry's own environment as
//! every OpenTelemetry SDK is: off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set and `OTEL_TRACES_EXPORTER` is not `none`; the
//! service named by `OTEL_SERVICE_NAME`, else by the binary; sampled as `OTEL_TRACES_SAMPLER`
//! says (parent-based, always on, by default: a write the caller traced is traced through).
//!
//! Only the platform's own spans are exported (targets starting `wal`, walctl's included, at
//! info and above): the clients' and servers' spans of the libraries underneath would
//! outnumber them many times over. The exporter speaks OTLP over gRPC only
//! (`OTEL_EXPORTER_OTLP_PROTOCOL` other than `grpc` is refused, said on stderr) and plaintext.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use tracing::Level;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

/// Whether this process exports spans: see [`exporting`].
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether this process exports spans. The spans that only a trace reads (a write's enqueue, a
/// delivery's attempts) are made only then: every span costs the log layer an allocation on
/// the write path, traced or not.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// The span `make` makes when this process exports spans, [`tracing::Span::none`] otherwise:
/// for the spans only a trace reads (see [`exporting`]).
pub fn trace_span(make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    if exporting() {
        make()
    } else {
        tracing::Span::none()
    }
}

/// How long the last spans may take to leave at shutdown.
const FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// The span export of a process, when on: keep it, and [`shutdown`](Traces::shutdown) it last.
#[derive(Debug, Default)]
pub struct Traces {
    provider: Option<SdkTracerProvider>,
    binary: String,
}

impl Traces {
    /// Sends the spans not yet sent, within a few seconds, and stops the export.
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else {
            return;
        };
        // The batch processor runs on this runtime; its shutdown blocks until the processor has
        // flushed, so it waits on a thread of its own, and no longer than FLUSH_LIMIT: this
        // processor does not bound it itself, and a collector that is away must not hold the
        // process's exit.
        let flushing = tokio::task::spawn_blocking(move || provider.shutdown());
        let said = match tokio::time::timeout(FLUSH_LIMIT, flushing).await {
            Ok(Ok(Ok(()))) => return,
            Ok(Ok(Err(error))) => error.to_string(),
            Ok(Err(panicked)) => panicked.to_string(),
            Err(_) => format!("the collector took more than {FLUSH_LIMIT:?}"),
        };
        eprintln!("{}: the last spans were not all sent: {said}", self.binary);
    }
}

/// Starts the export when the environment asks for it: the layer that records the platform's
/// spans (none when off), and its [`Traces`]. An export that cannot be set up is said on
/// stderr and left off: traces are an aid, not a reason to stay down.
pub(super) fn start<S>(binary: &str) -> (Traces, Option<impl Layer<S> + use<S>>)
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    if !asked_for() {
        return (Traces::default(), None);
    }
    if let Ok(protocol) = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL")
        && protocol != "grpc"
    {
        eprintln!(
            "{binary}: traces are off: OTEL_EXPORTER_OTLP_PROTOCOL is {protocol:?}; this build exports over grpc only"
        );
        return (Traces::default(), None);
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .build()
    {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("{binary}: traces are off: the OTLP exporter cannot be made: {error}");
            return (Traces::default(), None);
        }
    };
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(binary.to_owned());
    }
    let processor =
        BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource.build())
        .build();
    // A span is entered at every poll of its future. By default the layer activates the span's
    // OpenTelemetry context at each entry, times busy and idle between them and records the
    // thread's name: work for every span, sampled or not, that nothing here reads (trace_context
    // passes contexts explicitly; a span's start and end say how long it took).
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("wal"))
        .with_context_activation(false)
        .with_tracked_inactivity(false)
        .with_threads(false)
        .with_filter(Targets::new().with_target("wal", Level::INFO));
    EXPORTING.store(true, Ordering::Relaxed);
    let traces = Traces {
        provider: Some(provider),
        binary: binary.to_owned(),
    };
    (traces, Some(layer))
}

/// Whether OpenTelemetry's environment asks for an OTLP export of traces.
fn asked_for() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|value| !value.trim().is_empty());
    let exporter = std::env::var("OTEL_TRACES_EXPORTER").unwrap_or_default();
    (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        && !exporter.split(',').any(|e| e.trim() == "none")
}
