//! A write as the caller makes it, and its result.

use std::time::Duration;

use wal_proto::v1::{Lifecycle, Target, WriteToLogRequest};

/// One write. [`Write::new`] names the namespace and payload; the rest is optional.
#[derive(Debug, Clone, Default)]
pub struct Write {
    pub namespace: String,
    pub payload: Vec<u8>,
    /// Entries with the same key keep their order on the queue.
    pub key: String,
    /// The idempotency id; the client makes a UUIDv7 before the first attempt when empty.
    pub idempotency_id: String,
    /// Deliver no earlier than this after the write.
    pub delay: Duration,
    /// A random share of this window is added to the delay (zero: the namespace's default).
    pub jitter: Duration,
    /// Where to deliver; `None`: the namespace's default target.
    pub target: Option<Target>,
    /// This write's deadline; `None`: the client's default.
    pub deadline: Option<Duration>,
    /// W3C trace context, sent as gRPC metadata.
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    /// Once stored, wait up to this long (60 s at most, within the deadline) for every
    /// destination of the namespace to apply the entry; [`Written::destinations`] says what
    /// each did. Needs the namespace's durable storage.
    pub await_destinations: Option<Duration>,
}

impl Write {
    pub fn new(namespace: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        Self {
            namespace: namespace.into(),
            payload: payload.into(),
            ..Self::default()
        }
    }

    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }

    pub fn idempotency_id(mut self, id: impl Into<String>) -> Self {
        self.idempotency_id = id.into();
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// See [`Write::await_destinations`].
    pub fn await_destinations(mut self, wait: Duration) -> Self {
        self.await_destinations = Some(wait);
        self
    }

    /// The request every attempt sends: the id is fixed before the first.
    pub(crate) fn request(&self, id: &str) -> WriteToLogRequest {
        WriteToLogRequest {
            namespace: self.namespace.clone(),
            lifecycle: Some(Lifecycle {
                delay_millis: millis(self.delay),
                jitter_millis: millis(self.jitter),
                original_write_time_micros: 0,
            }),
            payload: self.payload.clone(),
            target: self.target.clone(),
            idempotency_id: id.to_owned(),
            key: self.key.clone(),
            await_destinations_millis: self.await_destinations.map_or(0, |wait| {
                u32::try_from(wait.as_millis()).unwrap_or(u32::MAX)
            }),
        }
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// What a write (or a commit) ended as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// On the namespace's queue: it will be delivered at least once.
    True,
    /// Definitely not stored by the attempt that answered it.
    False,
    /// Maybe stored: the deadline ended before a TRUE or FALSE.
    Unknown,
}

/// The result of a write: its outcome, the entry id every attempt carried, how many attempts
/// it took, and the producer's message when the outcome is not TRUE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub outcome: Outcome,
    pub entry_id: String,
    pub attempts: u32,
    pub message: String,
    /// When the write awaited its destinations and was stored: each destination (`default`,
    /// a store's name, `region-<name>`) and what it had done when the answer came.
    pub destinations: Vec<(String, Applied)>,
}

/// What one destination had done with a stored entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Applied,
    DeadLettered,
    /// Not yet heard of: waiting, retrying, held while its store is down.
    Pending,
}
