//! What a client is made with: the producers, and the defaults of clients/BEHAVIOUR.md.

use std::path::PathBuf;
use std::time::Duration;

/// A client's settings. [`Settings::new`] gives BEHAVIOUR.md's defaults.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Producer addresses (`host:port`), used round robin.
    pub producers: Vec<String>,
    /// The deadline of a write that names none.
    pub deadline: Duration,
    /// The first backoff step after UNKNOWN or a transport failure; it doubles up to
    /// `max_backoff`, and each wait is a uniformly random share of the step (full jitter).
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// Concurrent writes sent together in WriteToLogBatch calls; `None`: every write its own
    /// WriteToLog.
    pub batching: Option<Batching>,
    /// How long a producer is skipped after a transport failure, doubling up to `max_pause`.
    pub pause: Duration,
    pub max_pause: Duration,
    /// Items per AppendItems call of the two-phase helper.
    pub chunk: usize,
    /// mTLS; plaintext when `None`.
    pub tls: Option<Tls>,
}

impl Settings {
    pub fn new(producers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            producers: producers.into_iter().map(Into::into).collect(),
            deadline: Duration::from_secs(10),
            backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            batching: Some(Batching::default()),
            pause: Duration::from_secs(1),
            max_pause: Duration::from_secs(30),
            chunk: 100,
            tls: None,
        }
    }
}

/// How concurrent writes are batched.
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// How long a batch's first write waits for others.
    pub linger: Duration,
    /// The most writes in one batch (the producer takes at most 1000).
    pub max_writes: usize,
    /// Batch calls in flight at once. With one (the default) a key's writes reach the queue in
    /// the order they were made; more raise the throughput of many concurrent writers and give
    /// that order up across batches.
    pub max_in_flight: usize,
}

impl Default for Batching {
    fn default() -> Self {
        Self {
            linger: Duration::from_millis(1),
            max_writes: 500,
            max_in_flight: 1,
        }
    }
}

/// mTLS from PEM files.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The CA that signed the producers' certificates.
    pub ca: PathBuf,
    /// The client's certificate and key.
    pub certificate: PathBuf,
    pub key: PathBuf,
    /// The name the producers' certificates carry, when the addresses are IPs.
    pub domain: Option<String>,
}
