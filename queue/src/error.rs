//! Errors of the queue layer. Whether an error is retryable, and whether an entry may have been
//! stored, is decided here, where the backend's error is born.

use std::error::Error;
use std::fmt;

pub use wal_runtime::cause::Cause;

use super::Backend;

/// What a failed enqueue means for the entry: the heart of the Trilean answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The entry is definitely not on the queue (FALSE): refused before sending, or rejected by
    /// the broker. Retrying cannot duplicate anything.
    NotStored,
    /// The entry may or may not be on the queue (UNKNOWN): a timeout or a broken connection after
    /// sending.
    Unknown,
}

/// Why an enqueue did not end with the broker's acknowledgement. The reason says the broker's
/// or the client's error in words; [`EnqueueError::cause`] keeps the error itself.
#[derive(Debug, Clone)]
pub enum EnqueueError {
    TooLarge {
        backend: Backend,
        queue: String,
        size: usize,
        limit: usize,
    },
    NotStored {
        backend: Backend,
        queue: String,
        reason: String,
        cause: Option<Cause>,
    },
    Unknown {
        backend: Backend,
        queue: String,
        reason: String,
        cause: Option<Cause>,
    },
}

impl fmt::Display for EnqueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge {
                backend,
                queue,
                size,
                limit,
            } => write!(
                f,
                "entry of {size} bytes is larger than the {backend} queue '{queue}' accepts ({limit} bytes at most)"
            ),
            Self::NotStored {
                backend,
                queue,
                reason,
                ..
            } => write!(f, "entry not stored on {backend} queue '{queue}': {reason}"),
            Self::Unknown {
                backend,
                queue,
                reason,
                ..
            } => write!(f, "outcome unknown for {backend} queue '{queue}': {reason}"),
        }
    }
}

impl Error for EnqueueError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.cause().and_then(|cause| cause.source())
    }
}

impl EnqueueError {
    /// `enqueue_dead_letter` on a handle that reads a DLQ: there is no DLQ behind a DLQ.
    pub(crate) fn no_dlq(backend: Backend, queue: &str) -> Self {
        Self::NotStored {
            backend,
            queue: queue.to_owned(),
            reason: "this queue has no DLQ (it is a DLQ itself)".to_owned(),
            cause: None,
        }
    }

    /// The broker's or the client's error this failure was born of, when it was born of one.
    pub fn cause(&self) -> Option<&Cause> {
        match self {
            Self::NotStored { cause, .. } | Self::Unknown { cause, .. } => cause.as_ref(),
            Self::TooLarge { .. } => None,
        }
    }

    /// The same failure, born of `error`, which its reason already puts in words.
    pub(crate) fn caused_by(self, error: impl Error + Send + Sync + 'static) -> Self {
        match self {
            Self::NotStored {
                backend,
                queue,
                reason,
                ..
            } => Self::NotStored {
                backend,
                queue,
                reason,
                cause: Some(Cause::new(error)),
            },
            Self::Unknown {
                backend,
                queue,
                reason,
                ..
            } => Self::Unknown {
                backend,
                queue,
                reason,
                cause: Some(Cause::new(error)),
            },
            too_large @ Self::TooLarge { .. } => too_large,
        }
    }

    /// Whether the entry may be on the queue despite the error.
    pub fn durability(&self) -> Durability {
        match self {
            Self::TooLarge { .. } | Self::NotStored { .. } => Durability::NotStored,
            Self::Unknown { .. } => Durability::Unknown,
        }
    }
}

/// The queue an enqueue was writing to: makes that enqueue's errors, each naming it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EnqueueTo<'a> {
    pub backend: Backend,
    pub queue: &'a str,
}

impl EnqueueTo<'_> {
    pub(crate) fn too_large(self, size: usize, limit: usize) -> EnqueueError {
        EnqueueError::TooLarge {
            backend: self.backend,
            queue: self.queue.to_owned(),
            size,
            limit,
        }
    }

    pub(crate) fn not_stored(self, reason: String) -> EnqueueError {
        EnqueueError::NotStored {
            backend: self.backend,
            queue: self.queue.to_owned(),
            reason,
            cause: None,
        }
    }

    pub(crate) fn unknown(self, reason: String) -> EnqueueError {
        EnqueueError::Unknown {
            backend: self.backend,
            queue: self.queue.to_owned(),
            reason,
            cause: None,
        }
    }
}

/// Which queue operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Provision,
    Receive,
    Acknowledge,
    Extend,
    Release,
    /// A delayed entry put back on its queue, or moved between it and a delay tier.
    Park,
    DeadLetter,
    Close,
    Backlog,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Provision => "provision",
            Self::Receive => "receive",
            Self::Acknowledge => "acknowledge",
            Self::Extend => "extend visibility",
            Self::Release => "release",
            Self::Park => "park",
            Self::DeadLetter => "dead-letter",
            Self::Close => "close",
            Self::Backlog => "backlog",
        })
    }
}

/// A queue operation other than enqueue failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{operation} on {backend} queue '{queue}' failed: {reason}")]
pub struct QueueError {
    pub backend: Backend,
    pub queue: String,
    pub operation: Operation,
    pub reason: String,
    /// Whether trying the same operation later may succeed (the broker is unreachable or busy),
    /// as opposed to a mistake that will fail the same way (a missing queue, a bad receipt).
    pub retryable: bool,
}

impl QueueError {
    pub(crate) fn new(
        backend: Backend,
        queue: &str,
        operation: Operation,
        retryable: bool,
        reason: impl fmt::Display,
    ) -> Self {
        Self {
            backend,
            queue: queue.to_owned(),
            operation,
            reason: reason.to_string(),
            retryable,
        }
    }

    pub fn permanent(
        backend: Backend,
        queue: &str,
        operation: Operation,
        reason: impl fmt::Display,
    ) -> Self {
        Self::new(backend, queue, operation, false, reason)
    }

    pub fn from_enqueue(operation: Operation, error: EnqueueError) -> Self {
        let (backend, queue) = match &error {
            EnqueueError::TooLarge { backend, queue, .. }
            | EnqueueError::NotStored { backend, queue, .. }
            | EnqueueError::Unknown { backend, queue, .. } => (*backend, queue.clone()),
        };
        let retryable = !matches!(error, EnqueueError::TooLarge { .. });
        Self {
            backend,
            queue,
            operation,
            reason: error.to_string(),
            retryable,
        }
    }
}
