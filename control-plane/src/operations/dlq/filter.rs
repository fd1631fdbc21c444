//! Which dead letters an operation takes: a time range on when they were dead-lettered, an
//! error class, and for a redrive, the cap on how often one entry may be redriven.

use serde::{Deserialize, Serialize};
use wal_queue::entry::{Entry, ErrorClass};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Failures that trying again later may fix (timeouts, unavailable, overloaded).
    Retryable,
    /// Failures that fail the same way every time (rejected as invalid, undecodable).
    Permanent,
}

/// The bounds are microseconds since the Unix epoch: since inclusive, until exclusive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    pub since_micros: Option<i64>,
    pub until_micros: Option<i64>,
    pub class: Option<Class>,
}

/// What an operation does with one dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Take,
    /// Left in the DLQ, with the reason (a short phrase, counted in the report).
    Pass(&'static str),
}

impl Filter {
    /// Whether `entry` is in the range and class asked for.
    pub fn judge(&self, entry: &Entry) -> Verdict {
        let at = entry.dead_lettered_at_micros;
        if self.since_micros.is_some_and(|since| at < since)
            || self.until_micros.is_some_and(|until| at >= until)
        {
            return Verdict::Pass("outside the time range");
        }
        if self.class.is_some() && class_of(entry) != self.class {
            return Verdict::Pass("another error class");
        }
        Verdict::Take
    }

    /// Like [`Filter::judge`], and an entry redriven `max_redrives` times already, or one whose
    /// bytes were undecodable (its payload is a fragment of them, not a mutation), stays.
    pub fn judge_redrive(&self, entry: &Entry, max_redrives: u32) -> Verdict {
        match self.judge(entry) {
            Verdict::Take if entry.redrives >= max_redrives => {
                Verdict::Pass("redriven --max-redrives times already")
            }
            Verdict::Take if entry.id.starts_with("undecodable:") => {
                Verdict::Pass("undecodable when dead-lettered")
            }
            verdict => verdict,
        }
    }

    /// The filter as the proto says it.
    pub fn to_proto(&self) -> wal_proto::v1::DeadLetterFilter {
        use wal_proto::v1::ErrorClass;
        wal_proto::v1::DeadLetterFilter {
            since_micros: self.since_micros.unwrap_or(0),
            until_micros: self.until_micros.unwrap_or(0),
            class: match self.class {
                None => ErrorClass::Unspecified,
                Some(Class::Retryable) => ErrorClass::Retryable,
                Some(Class::Permanent) => ErrorClass::Permanent,
            } as i32,
        }
    }

    /// The filter as a stable text: a redrive's progress on Kafka DLQs is kept per namespace and
    /// filter, so the same redrive continues and another starts from the DLQs' start.
    pub fn key(&self) -> String {
        format!(
            "since={:?} until={:?} class={:?}",
            self.since_micros, self.until_micros, self.class
        )
    }
}

/// The class of an entry's last failure, when it has one.
pub fn class_of(entry: &Entry) -> Option<Class> {
    match entry.last_error_class() {
        ErrorClass::Permanent => Some(Class::Permanent),
        ErrorClass::Retryable => Some(Class::Retryable),
        ErrorClass::Unspecified => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dead(at: i64, class: ErrorClass, redrives: u32) -> Entry {
        Entry {
            id: "e".into(),
            dead_lettered_at_micros: at,
            last_error_class: class as i32,
            redrives,
            ..Entry::default()
        }
    }

    #[test]
    fn the_range_is_since_inclusive_until_exclusive() {
        let filter = Filter {
            since_micros: Some(100),
            until_micros: Some(200),
            class: None,
        };
        let outside = Verdict::Pass("outside the time range");
        assert_eq!(filter.judge(&dead(99, ErrorClass::Permanent, 0)), outside);
        assert_eq!(
            filter.judge(&dead(100, ErrorClass::Permanent, 0)),
            Verdict::Take
        );
        assert_eq!(filter.judge(&dead(200, ErrorClass::Permanent, 0)), outside);
    }

    #[test]
    fn the_class_and_the_redrive_cap_are_honoured() {
        let filter = Filter {
            class: Some(Class::Retryable),
            ..Filter::default()
        };
        assert_eq!(
            filter.judge(&dead(1, ErrorClass::Retryable, 0)),
            Verdict::Take
        );
        assert_eq!(
            filter.judge(&dead(1, ErrorClass::Permanent, 0)),
            Verdict::Pass("another error class")
        );
        assert_eq!(
            filter.judge_redrive(&dead(1, ErrorClass::Retryable, 2), 3),
            Verdict::Take
        );
        assert_eq!(
            filter.judge_redrive(&dead(1, ErrorClass::Retryable, 3), 3),
            Verdict::Pass("redriven --max-redrives times already")
        );
    }
}
