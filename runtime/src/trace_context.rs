//! A write's W3C trace context through the platform, with OpenTelemetry's propagator: taken
//! from a caller's gRPC metadata or an entry, made a span's parent, and handed to the next hop
//! (the entry, a target's request), `tracestate` included.
//!
//! With traces exported ([`crate::process::Traces`]), the next hop's parent is the span that
//! handed it on, so one write is one trace: the producer's call, each delivery attempt, the
//! target's request. Without, the platform records no span, and passes the caller's trace on
//! as a new span of it (a fresh span id, as each hop of W3C Trace Context does).

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rand::Rng as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The W3C trace context of a write: `traceparent` and, when given, `tracestate`.
pub type Carrier = HashMap<String, String>;

/// The trace `carrier` names, when it names a valid one.
fn remote(carrier: &Carrier) -> Option<SpanContext> {
    let context = TraceContextPropagator::new().extract(carrier);
    let span = context.span().span_context().clone();
    span.is_valid().then_some(span)
}

/// The trace id `carrier` names (32 hex digits), for logs; `None` when it names none.
pub fn trace_id(carrier: &Carrier) -> Option<String> {
    remote(carrier).map(|span| span.trace_id().to_string())
}

/// Makes the trace `carrier` names the parent of `span`, which must not have started (call it
/// before the span is entered). Nothing happens when the carrier names no valid trace or no
/// span is recorded.
pub fn follow(span: &tracing::Span, carrier: &Carrier) {
    if remote(carrier).is_some() {
        let _ = span.set_parent(TraceContextPropagator::new().extract(carrier));
    }
}

/// Links `span` to the trace `carrier` names: a replay or a redrive of a write is related to
/// it, not a part of it (the write's trace ended when it was applied or dead-lettered).
pub fn link(span: &tracing::Span, carrier: &Carrier) {
    if let Some(write) = remote(carrier) {
        span.add_link(write);
    }
}

/// What the next hop is given: `span`'s own context when it is recorded, else the trace
/// `carrier` names as a new span of it, else nothing.
pub fn onward(span: &tracing::Span, carrier: &Carrier) -> Carrier {
    let mut next = Carrier::new();
    let context = span.context();
    if context.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&context, &mut next);
        return next;
    }
    let Some(parent) = remote(carrier) else {
        return next;
    };
    let span_id = SpanId::from_bytes(rand::rng().random_range(1..=u64::MAX).to_be_bytes());
    let child = SpanContext::new(
        parent.trace_id(),
        span_id,
        parent.trace_flags(),
        true,
        parent.trace_state().clone(),
    );
    let context = opentelemetry::Context::new().with_remote_span_context(child);
    TraceContextPropagator::new().inject_context(&context, &mut next);
    next
}

/// The `traceparent` of what [`onward`] gives, for a target's request header.
pub fn traceparent(carrier: &Carrier) -> Option<&str> {
    carrier.get("traceparent").map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn carrier(parent: &str) -> Carrier {
        Carrier::from([("traceparent".to_owned(), parent.to_owned())])
    }

    #[test]
    fn without_a_recorded_span_the_callers_trace_goes_on_as_a_new_span() {
        let mut given = carrier(PARENT);
        given.insert("tracestate".to_owned(), "vendor=value".to_owned());
        let next = onward(&tracing::Span::none(), &given);
        let parent = traceparent(&next).unwrap();
        assert!(
            parent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
            "{parent}"
        );
        assert!(parent.ends_with("-01"), "{parent}");
        assert_ne!(parent, PARENT, "a span id of its own");
        assert_eq!(
            next.get("tracestate").map(String::as_str),
            Some("vendor=value")
        );
        assert_eq!(
            trace_id(&given).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
    }

    #[test]
    fn invalid_parents_are_not_passed_on() {
        for parent in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(
                onward(&tracing::Span::none(), &carrier(parent)).is_empty(),
                "{parent}"
            );
            assert_eq!(trace_id(&carrier(parent)), None, "{parent}");
        }
        assert!(onward(&tracing::Span::none(), &Carrier::new()).is_empty());
    }
}
