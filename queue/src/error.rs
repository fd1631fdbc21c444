//! Errors of the queue layer. Whether an error is retryable, and whether an entry may have been
//! stored, is decided here, where the backend's error is born.

use std::fmt;

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

/// Why an enqueue did not end with the broker's acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnqueueError {
    #[error(
        "entry of {size} bytes is larger than the {backend} queue '{queue}' accepts ({limit} bytes at most)"
    )]
    TooLarge {
        backend: Backend,
        queue: String,
        size: usize,
        limit: usize,
    },
    #[error("entry not stored on {backend} queue '{queue}': {reason}")]
    NotStored {
        backend: Backend,
        queue: String,
        reason: String,
    },
    #[error("outcome unknown for {backend} queue '{queue}': {reason}")]
    Unknown {
        backend: Backend,
        queue: String,
        reason: String,
    },
}

impl EnqueueError {
    /// `enqueue_dead_letter` on a handle that reads a DLQ: there is no DLQ behind a DLQ.
    pub(crate) fn no_dlq(backend: Backend, queue: &str) -> Self {
        Self::NotStored {
            backend,
            queue: queue.to_owned(),
            reason: "this queue has no DLQ (it is a DLQ itself)".to_owned(),
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
        }
    }

    pub(crate) fn unknown(self, reason: String) -> EnqueueError {
        EnqueueError::Unknown {
            backend: self.backend,
            queue: self.queue.to_owned(),
            reason,
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
