//! Why an entry could not be applied: the failure's class, decided where it is born (see the
//! crate's contract), its reason in words, and the error it was born of.

use std::error::Error;
use std::fmt;
use std::time::Duration;

pub use wal_runtime::cause::Cause;

/// Why an entry could not be applied, and whether trying again may help.
///
/// Displays its reason and, after a colon, its cause's words: what a DLQ copy, a log line and a
/// writer's answer record. As `std::io::Error` does, its [`source`](Error::source) is then the
/// cause's own source, so a chain printed in full says nothing twice; [`TargetError::cause`]
/// gives the cause itself, to downcast.
#[derive(Debug, Clone)]
pub enum TargetError {
    Retryable {
        reason: String,
        cause: Option<Cause>,
    },
    /// The target cannot serve anyone now; see the crate's contract.
    Unavailable {
        reason: String,
        cause: Option<Cause>,
    },
    /// The target asks to be left alone for `wait` (an HTTP 429 with Retry-After): held like an
    /// unavailable one, and not tried again before then. The state of the target, not the
    /// entry's fault: no attempt is spent.
    Throttled { reason: String, wait: Duration },
    Permanent {
        reason: String,
        cause: Option<Cause>,
    },
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())?;
        match self.cause() {
            Some(cause) => write!(f, ": {cause}"),
            None => Ok(()),
        }
    }
}

impl Error for TargetError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.cause().and_then(|cause| cause.source())
    }
}

impl TargetError {
    pub fn retryable(reason: impl fmt::Display) -> Self {
        Self::Retryable {
            reason: reason.to_string(),
            cause: None,
        }
    }

    pub fn unavailable(reason: impl fmt::Display) -> Self {
        Self::Unavailable {
            reason: reason.to_string(),
            cause: None,
        }
    }

    pub fn permanent(reason: impl fmt::Display) -> Self {
        Self::Permanent {
            reason: reason.to_string(),
            cause: None,
        }
    }

    /// The same failure, born of `error`: its [`source`](Error::source) from now on.
    pub fn caused_by(self, error: impl Error + Send + Sync + 'static) -> Self {
        let cause = Some(Cause::new(error));
        match self {
            Self::Retryable { reason, .. } => Self::Retryable { reason, cause },
            Self::Unavailable { reason, .. } => Self::Unavailable { reason, cause },
            Self::Permanent { reason, .. } => Self::Permanent { reason, cause },
            throttled @ Self::Throttled { .. } => throttled,
        }
    }

    /// The reason in our words, without the cause's.
    pub fn reason(&self) -> &str {
        match self {
            Self::Retryable { reason, .. }
            | Self::Unavailable { reason, .. }
            | Self::Throttled { reason, .. }
            | Self::Permanent { reason, .. } => reason,
        }
    }

    /// The error this failure was born of, when it was born of one.
    pub fn cause(&self) -> Option<&Cause> {
        match self {
            Self::Retryable { cause, .. }
            | Self::Unavailable { cause, .. }
            | Self::Permanent { cause, .. } => cause.as_ref(),
            Self::Throttled { .. } => None,
        }
    }

    /// The same failure with its reason rewritten; the cause stays.
    pub fn map_reason(self, rewrite: impl FnOnce(String) -> String) -> Self {
        match self {
            Self::Retryable { reason, cause } => Self::Retryable {
                reason: rewrite(reason),
                cause,
            },
            Self::Unavailable { reason, cause } => Self::Unavailable {
                reason: rewrite(reason),
                cause,
            },
            Self::Throttled { reason, wait } => Self::Throttled {
                reason: rewrite(reason),
                wait,
            },
            Self::Permanent { reason, cause } => Self::Permanent {
                reason: rewrite(reason),
                cause,
            },
        }
    }

    /// Whether trying again later may succeed: a transient failure, or an unavailable target.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, Self::Permanent { .. })
    }
}
