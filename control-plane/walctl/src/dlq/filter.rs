//! Which dead letters a command takes: a time range on when they were dead-lettered, an error
//! class, and for a redrive, the cap on how often one entry may be redriven.

use std::time::SystemTime;

use wal_queue::entry::{Entry, ErrorClass};

use crate::Failure;
use crate::time::instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Class {
    /// Failures that trying again later may fix (timeouts, unavailable, overloaded).
    Retryable,
    /// Failures that fail the same way every time (rejected as invalid, undecodable).
    Permanent,
}

/// The filter flags `list` and `redrive` share.
#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    /// Only entries dead-lettered at or after this: a time ago ("2h", "30m") or an RFC 3339
    /// time ("2026-11-22T10:00:00Z").
    #[arg(long)]
    since: Option<String>,
    /// Only entries dead-lettered before this (same forms as --since).
    #[arg(long)]
    until: Option<String>,
    /// Only entries whose last failure was of this class.
    #[arg(long, value_enum)]
    class: Option<Class>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub since_micros: Option<i64>,
    pub until_micros: Option<i64>,
    pub class: Option<Class>,
}

/// What a command does with one dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Take,
    /// Left in the DLQ, with the reason (a short phrase, counted in the report).
    Pass(&'static str),
}

impl FilterArgs {
    /// The flags as typed, naming a redrive's checkpoint: the same command resumes the same
    /// redrive, even with a relative time ("2h"), whose bounds the checkpoint keeps from its
    /// first run.
    pub fn typed(&self) -> String {
        format!(
            "since={:?} until={:?} class={:?}",
            self.since, self.until, self.class
        )
    }

    pub fn filter(&self, now: SystemTime) -> Result<Filter, Failure> {
        let since_micros = self
            .since
            .as_deref()
            .map(|t| instant("--since", t, now))
            .transpose()?;
        let until_micros = self
            .until
            .as_deref()
            .map(|t| instant("--until", t, now))
            .transpose()?;
        if let (Some(since), Some(until)) = (since_micros, until_micros)
            && since >= until
        {
            return Err(Failure::usage(
                "--since must be before --until; nothing is in that range",
            ));
        }
        Ok(Filter {
            since_micros,
            until_micros,
            class: self.class,
        })
    }
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
        let class = match entry.last_error_class() {
            ErrorClass::Permanent => Some(Class::Permanent),
            ErrorClass::Retryable => Some(Class::Retryable),
            ErrorClass::Unspecified => None,
        };
        if self.class.is_some() && class != self.class {
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
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

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

    fn args(since: Option<&str>, until: Option<&str>, class: Option<Class>) -> FilterArgs {
        FilterArgs {
            since: since.map(str::to_owned),
            until: until.map(str::to_owned),
            class,
        }
    }

    #[test]
    fn the_range_is_since_inclusive_until_exclusive() {
        let now = UNIX_EPOCH + Duration::from_secs(10_000);
        let filter = args(Some("100s"), Some("1970-01-01T02:46:30Z"), None)
            .filter(now)
            .unwrap();
        let second = 1_000_000;
        assert_eq!(filter.since_micros, Some(9_900 * second));
        assert_eq!(filter.until_micros, Some(9_990 * second));
        assert_eq!(
            filter.judge(&dead(9_899 * second, ErrorClass::Permanent, 0)),
            Verdict::Pass("outside the time range")
        );
        assert_eq!(
            filter.judge(&dead(9_900 * second, ErrorClass::Permanent, 0)),
            Verdict::Take
        );
        assert_eq!(
            filter.judge(&dead(9_990 * second, ErrorClass::Permanent, 0)),
            Verdict::Pass("outside the time range")
        );
    }

    #[test]
    fn the_class_and_the_redrive_cap_are_honoured() {
        let filter = args(None, None, Some(Class::Retryable))
            .filter(SystemTime::now())
            .unwrap();
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

    #[test]
    fn bad_times_are_refused_naming_the_flag() {
        let bad = args(Some("yesterday-ish"), None, None)
            .filter(SystemTime::now())
            .unwrap_err();
        assert_eq!(bad.exit, crate::Exit::Usage);
        assert!(
            bad.message.contains("--since 'yesterday-ish'"),
            "{}",
            bad.message
        );
        let empty = args(Some("1h"), Some("2h"), None)
            .filter(SystemTime::now())
            .unwrap_err();
        assert!(
            empty.message.contains("before --until"),
            "{}",
            empty.message
        );
    }
}
