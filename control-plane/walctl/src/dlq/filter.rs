//! The flags that say which dead letters a command takes: a time range on when they were
//! dead-lettered (relative times resolved here, against this machine's clock) and an error class.

use std::time::SystemTime;

pub use wal_control_plane::operations::dlq::{Class, Filter};

use crate::Failure;
use crate::time::instant;

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

    /// These flags with --until given as `until` when it was left out.
    pub fn until_if_none(&self, until: String) -> Self {
        Self {
            until: self.until.clone().or(Some(until)),
            ..self.clone()
        }
    }

    /// Whether a bound is a time ago ("2h"), which resolves to another instant at each run.
    pub fn relative(&self) -> bool {
        [&self.since, &self.until]
            .into_iter()
            .flatten()
            .any(|text| humantime::parse_duration(text).is_ok())
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn args(since: Option<&str>, until: Option<&str>, class: Option<Class>) -> FilterArgs {
        FilterArgs {
            since: since.map(str::to_owned),
            until: until.map(str::to_owned),
            class,
        }
    }

    #[test]
    fn relative_and_absolute_times_resolve_to_the_range() {
        let now = UNIX_EPOCH + Duration::from_secs(10_000);
        let filter = args(Some("100s"), Some("1970-01-01T02:46:30Z"), None)
            .filter(now)
            .unwrap();
        let second = 1_000_000;
        assert_eq!(filter.since_micros, Some(9_900 * second));
        assert_eq!(filter.until_micros, Some(9_990 * second));
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
