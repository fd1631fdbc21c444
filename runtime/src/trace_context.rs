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
use opentelemetry::trace::{SpanContext, TraceContextExt as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rand::Rng as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::process::exporting;

/// The W3C trace context of a write: `traceparent` and, when given, `tracestate`.
pub type Carrier = HashMap<String, String>;

/// The `traceparent` of `carrier` when it is a well-formed W3C one of version 00: 55
/// characters, lowercase hex, neither id all zeros. Checked by hand first, so a write or an
/// attempt that carries none, or garbage, costs no propagator.
fn well_formed(carrier: &Carrier) -> Option<&str> {
    let parent = carrier.get("traceparent")?;
    let bytes = parent.as_bytes();
    let hex = |range: std::ops::Range<usize>| {
        bytes[range]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    };
    let zeros = |range: std::ops::Range<usize>| bytes[range].iter().all(|b| *b == b'0');
    let shaped = bytes.len() == 55
        && parent.starts_with("00-")
        && [bytes[35], bytes[52]] == [b'-', b'-']
        && hex(3..35)
        && hex(36..52)
        && hex(53..55)
        && !zeros(3..35)
        && !zeros(36..52);
    shaped.then_some(parent.as_str())
}

/// The trace `carrier` names, when it names a valid one.
fn remote(carrier: &Carrier) -> Option<SpanContext> {
    well_formed(carrier)?;
    let context = TraceContextPropagator::new().extract(carrier);
    let span = context.span().span_context().clone();
    span.is_valid().then_some(span)
}

/// The trace id `carrier` names (32 hex digits), for logs; `None` when it names none.
pub fn trace_id(carrier: &Carrier) -> Option<String> {
    well_formed(carrier).map(|parent| parent[3..35].to_owned())
}

/// Whether the trace `carrier` names is sampled (its traceparent's sampled flag): a write whose
/// own span was not sampled makes none of the spans only a trace reads.
pub fn sampled(carrier: &Carrier) -> bool {
    well_formed(carrier).is_some_and(|parent| {
        u8::from_str_radix(&parent[53..55], 16).is_ok_and(|flags| flags & 1 == 1)
    })
}

/// Whether `span` is exported: spans are exported and its sampler kept it.
pub fn recorded(span: &tracing::Span) -> bool {
    exporting() && span.context().span().span_context().is_sampled()
}

/// Makes the trace `carrier` names the parent of `span`, which must not have started (call it
/// before the span is entered). Nothing happens when the carrier names no valid trace or
/// spans are not exported.
pub fn follow(span: &tracing::Span, carrier: &Carrier) {
    if !exporting() {
        return;
    }
    if let Some(parent) = remote(carrier) {
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
    }
}

/// Links `span` to the trace `carrier` names: a replay or a redrive of a write is related to
/// it, not a part of it (the write's trace ended when it was applied or dead-lettered).
pub fn link(span: &tracing::Span, carrier: &Carrier) {
    if !exporting() {
        return;
    }
    if let Some(write) = remote(carrier) {
        span.add_link(write);
    }
}

/// The key under which a retry copy's or a DLQ copy's carrier names the delivery that failed
/// before it.
const RETRY_OF: &str = "wal-retry-of";

/// Names on a retry copy's carrier (or a DLQ copy's, for its redrive) the delivery that made
/// it (`span`, when exported and recorded), so the copy's delivery links to it
/// ([`link_retry`]): in the write's trace its deliveries read as a chain, each retry pointing
/// at the failure it repeats. Without spans exported the carrier names none, and an older
/// copy's is dropped: only the delivery just before is named.
pub fn mark_retry(carrier: &mut Carrier, span: &tracing::Span) {
    carrier.remove(RETRY_OF);
    // The propagator writes the traceparent, as for any next hop.
    if recorded(span)
        && let Some(failed) = onward(span, &Carrier::new()).remove("traceparent")
    {
        carrier.insert(RETRY_OF.to_owned(), failed);
    }
}

/// Keeps `from`'s mark of a failed delivery ([`mark_retry`]) on `to`, a carrier made anew for
/// the same entry (a redrive's, which carries the redrive's own span on).
pub fn keep_retry_mark(from: &Carrier, to: &mut Carrier) {
    if let Some(failed) = from.get(RETRY_OF) {
        to.insert(RETRY_OF.to_owned(), failed.clone());
    }
}

/// Links `span`, a delivery of a retry copy, to the delivery whose failure made the copy, when
/// its carrier names one ([`mark_retry`]).
pub fn link_retry(span: &tracing::Span, carrier: &Carrier) {
    if !exporting() {
        return;
    }
    if let Some(failed) = carrier.get(RETRY_OF) {
        link(
            span,
            &Carrier::from([("traceparent".to_owned(), failed.clone())]),
        );
    }
}

/// What the next hop is given: `span`'s own context when spans are exported and it is
/// recorded, else the trace `carrier` names as a new span of it (a fresh span id, the caller's
/// `tracestate` as it came), else nothing.
pub fn onward(span: &tracing::Span, carrier: &Carrier) -> Carrier {
    let mut next = Carrier::new();
    if exporting() {
        let context = span.context();
        if context.span().span_context().is_valid() {
            TraceContextPropagator::new().inject_context(&context, &mut next);
            // The propagator writes an empty tracestate when there is none: no header then.
            next.retain(|_, value| !value.is_empty());
            return next;
        }
    }
    let Some(parent) = well_formed(carrier) else {
        return next;
    };
    let span_id: u64 = rand::rng().random_range(1..=u64::MAX);
    let (trace, flags) = (&parent[3..35], &parent[53..55]);
    next.insert(
        "traceparent".to_owned(),
        format!("00-{trace}-{span_id:016x}-{flags}"),
    );
    if let Some(state) = carrier.get("tracestate").filter(|s| !s.is_empty()) {
        next.insert("tracestate".to_owned(), state.clone());
    }
    next
}

/// What an entry keeps of its write's trace: `span`'s context when spans are exported (the
/// consumer's spans are then its children), else the caller's `carrier` as it came.
pub fn carried(span: &tracing::Span, carrier: Carrier) -> Carrier {
    if exporting() {
        onward(span, &carrier)
    } else {
        carrier
    }
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
        let parent = next["traceparent"].as_str();
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
            "00-1-2-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(
                onward(&tracing::Span::none(), &carrier(parent)).is_empty(),
                "{parent}"
            );
            assert_eq!(trace_id(&carrier(parent)), None, "{parent}");
            assert!(!sampled(&carrier(parent)), "{parent}");
        }
        assert!(onward(&tracing::Span::none(), &Carrier::new()).is_empty());
    }

    #[test]
    fn the_sampled_flag_is_read_from_the_traceparent() {
        assert!(sampled(&carrier(PARENT)));
        let unsampled = PARENT.replace("-01", "-00");
        assert!(!sampled(&carrier(&unsampled)));
        // Flags other than "sampled" do not make a trace sampled, nor unsampled.
        assert!(sampled(&carrier(&PARENT.replace("-01", "-03"))));
        assert!(!sampled(&carrier(&PARENT.replace("-01", "-02"))));
        assert!(!sampled(&Carrier::new()));
    }
}
