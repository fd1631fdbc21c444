//! `Watch`: the current namespaces as a stream of snapshots, for producers and consumers to
//! hot-reload from, with the pauses and cancellations in force. A snapshot goes out at once, then
//! whenever the set of (name, version) pairs, the pauses or the cancellations change (one
//! expiring included): at once for a change made through this process, within [`POLL`] for one
//! made through another control plane sharing the store.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::Status;
use wal_proto::v1::NamespaceSnapshot;

use crate::operations::cancellations::CancellationRecord;
use crate::operations::pauses::PauseRecord;
use crate::store::{NamespaceStore, StoreError, StoredVersion};

/// How often a watch reads the store for changes made elsewhere.
pub const POLL: Duration = Duration::from_secs(2);

pub type SnapshotStream = Pin<Box<dyn Stream<Item = Result<NamespaceSnapshot, Status>> + Send>>;

/// Tells this process's watches that a change was stored, and ends them on shutdown (a gRPC
/// server waits for open streams before it stops).
#[derive(Debug, Clone)]
pub struct Announcer {
    stored: watch::Sender<u64>,
    stopping: CancellationToken,
}

impl Default for Announcer {
    fn default() -> Self {
        Self {
            stored: watch::Sender::new(0),
            stopping: CancellationToken::new(),
        }
    }
}

impl Announcer {
    /// A change was stored: watches read the store now rather than at their next poll.
    pub fn stored(&self) {
        self.stored.send_modify(|n| *n += 1);
    }

    /// Ends every watch, so the server can stop.
    pub fn stop(&self) {
        self.stopping.cancel();
    }

    pub fn snapshots(
        &self,
        store: NamespaceStore,
        convert: fn(StoredVersion) -> wal_proto::v1::NamespaceVersion,
    ) -> SnapshotStream {
        let state = Watcher {
            store,
            stored: self.stored.subscribe(),
            stopping: self.stopping.clone(),
            sent: None,
            convert,
            failed: false,
        };
        Box::pin(futures::stream::unfold(state, Watcher::next))
    }
}

/// What a snapshot carried: each namespace's (name, version), the pauses and the cancellations.
type Sent = (
    Vec<(String, i64)>,
    Vec<PauseRecord>,
    Vec<CancellationRecord>,
);

struct Watcher {
    store: NamespaceStore,
    stored: watch::Receiver<u64>,
    stopping: CancellationToken,
    /// What the last snapshot carried; `None` before the first.
    sent: Option<Sent>,
    convert: fn(StoredVersion) -> wal_proto::v1::NamespaceVersion,
    /// An error was sent, which ends the stream.
    failed: bool,
}

impl Watcher {
    async fn next(mut self) -> Option<(Result<NamespaceSnapshot, Status>, Self)> {
        if self.failed {
            return None;
        }
        loop {
            if self.sent.is_some() {
                tokio::select! {
                    changed = self.stored.changed() => if changed.is_err() { return None },
                    () = tokio::time::sleep(POLL) => {}
                    () = self.stopping.cancelled() => return None,
                }
            }
            let read = async {
                let current = self.store.current().await?;
                let pauses = self.store.pauses(None).await?;
                let now = crate::service::now_micros();
                let cancellations = self.store.cancellations(None, now).await?;
                Ok::<_, StoreError>((current, pauses, cancellations))
            };
            let (current, pauses, cancellations) = match read.await {
                Ok(read) => read,
                Err(error) => {
                    // Ends the stream; the follower keeps its namespaces and watches again.
                    let status = Status::unavailable(format!("reading the namespaces: {error}"));
                    self.failed = true;
                    return Some((Err(status), self));
                }
            };
            let versions: Vec<(String, i64)> = current
                .iter()
                .map(|v| (v.name.clone(), v.version))
                .collect();
            let sent = (versions, pauses, cancellations);
            if self.sent.as_ref() == Some(&sent) {
                continue;
            }
            let snapshot = NamespaceSnapshot {
                namespaces: current.into_iter().map(self.convert).collect(),
                pauses: sent.1.iter().map(PauseRecord::to_proto).collect(),
                cancellations: sent.2.iter().map(CancellationRecord::to_feed).collect(),
            };
            self.sent = Some(sent);
            return Some((Ok(snapshot), self));
        }
    }
}
