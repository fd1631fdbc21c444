//! Continues the write's trace: the producer stored the caller's W3C `traceparent` on the entry;
//! the consumer logs under its trace id and sends downstream a `traceparent` with the same trace
//! id and a new span id (this delivery), as the W3C Trace Context spec has each hop do.

use std::collections::HashMap;

use rand::Rng as _;

/// The write's trace, continued by one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continued {
    pub trace_id: String,
    /// What to send downstream.
    pub traceparent: String,
}

/// The continued trace, or `None` when the entry carries no valid `traceparent`.
pub fn continue_trace(context: &HashMap<String, String>) -> Option<Continued> {
    let parent = context.get("traceparent")?;
    let mut parts = parent.split('-');
    let (version, trace_id, span_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    let valid = version == "00"
        && parts.next().is_none()
        && hex(trace_id, 32)
        && hex(span_id, 16)
        && hex(flags, 2)
        && trace_id.bytes().any(|b| b != b'0');
    if !valid {
        return None;
    }
    let span: u64 = rand::rng().random_range(1..=u64::MAX);
    Some(Continued {
        trace_id: trace_id.to_owned(),
        traceparent: format!("00-{trace_id}-{span:016x}-{flags}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(parent: &str) -> HashMap<String, String> {
        HashMap::from([("traceparent".to_owned(), parent.to_owned())])
    }

    #[test]
    fn a_valid_parent_is_continued_with_a_new_span() {
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let continued = continue_trace(&context(parent)).unwrap();
        assert_eq!(continued.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(
            continued
                .traceparent
                .starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-")
        );
        assert!(continued.traceparent.ends_with("-01"));
        assert_ne!(continued.traceparent, parent);
    }

    #[test]
    fn invalid_parents_are_ignored() {
        for parent in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(continue_trace(&context(parent)), None, "{parent}");
        }
        assert_eq!(continue_trace(&HashMap::new()), None);
    }
}
