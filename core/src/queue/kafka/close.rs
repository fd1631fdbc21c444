//! Closing a group consumer without waiting on its brokers.
//!
//! librdkafka closes a group consumer when the last handle to it goes: a final commit of the
//! offsets stored, then leaving the group. rust-rdkafka's drop polls until that is done, which is
//! forever while the brokers are away (the commit waits for a group coordinator). On an async
//! worker that stalls the runtime, and a process that shuts down during a broker outage never
//! exits: a test that failed with Kafka stopped hung in that drop until it was killed. So each
//! consumer closes on a thread of its own, and a process about to exit waits for the closes under
//! way for a bounded time ([`closes_finished`]). A close cut short by the exit is a member that
//! did not leave its group: the broker drops it after the session timeout, as after a crash, and
//! the entries acknowledged since the last commit are received again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Consumers being closed now, in the whole process.
static UNDER_WAY: AtomicUsize = AtomicUsize::new(0);

/// How often a closing thread looks whether it holds the last handle, and a waiter whether the
/// closes are done.
const CHECK_EVERY: Duration = Duration::from_millis(20);
/// A close that takes longer than this is logged: its brokers were away.
const SLOW_CLOSE: Duration = Duration::from_secs(5);

/// Counts one close as under way until dropped.
struct UnderWay;

impl UnderWay {
    fn start() -> Self {
        UNDER_WAY.fetch_add(1, Ordering::SeqCst);
        Self
    }
}

impl Drop for UnderWay {
    fn drop(&mut self) {
        UNDER_WAY.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Closes `consumer` (of `topic`) on a thread of its own. The thread waits until it holds the
/// last handle (a broker call on a blocking thread may hold another until its timeout), so the
/// close never runs on an async worker nor on a blocking thread the runtime waits for at exit.
pub(super) fn close_apart<C: Send + Sync + 'static>(consumer: Arc<C>, topic: &str) {
    let topic = topic.to_owned();
    let under_way = UnderWay::start();
    let spawned = std::thread::Builder::new()
        .name("kafka-close".to_owned())
        .spawn(move || {
            let _under_way = under_way;
            let started = Instant::now();
            let mut consumer = consumer;
            loop {
                match Arc::try_unwrap(consumer) {
                    Ok(last) => break drop(last),
                    Err(shared) => consumer = shared,
                }
                std::thread::sleep(CHECK_EVERY);
            }
            if started.elapsed() > SLOW_CLOSE {
                tracing::info!(topic, took = ?started.elapsed(), "closed the queue's Kafka consumer; its brokers were away until now");
            }
        });
    // Without a thread the handle given here is dropped with the error, and the consumer closes
    // wherever its last handle goes, as it would without this.
    if let Err(error) = spawned {
        tracing::warn!(%error, "no thread to close a Kafka consumer on; it closes where it is dropped");
    }
}

/// Runs `call`, a broker call that blocks with no bound of its own (a synchronous commit waits for
/// a group coordinator however long it takes), on a thread of its own, and waits for it for at
/// most `limit`: None if it did not finish by then. A blocking task would not do: the runtime
/// waits for those at exit. The thread finishes when the call does.
pub(super) async fn within<T: Send + 'static>(
    limit: Duration,
    call: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("kafka-call".to_owned())
        .spawn(move || {
            let _ = answer.send(call());
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "no thread for a Kafka call that blocks; not made");
        return None;
    }
    tokio::time::timeout(limit, answered).await.ok()?.ok()
}

/// Waits until no consumer is being closed, for at most `limit`: what a process that is about to
/// exit calls, so its consumers leave their groups. False if some were still closing (their
/// brokers are away).
pub async fn closes_finished(limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while UNDER_WAY.load(Ordering::SeqCst) > 0 {
        if Instant::now() >= deadline {
            let left = UNDER_WAY.load(Ordering::SeqCst);
            tracing::warn!(left, waited = ?limit, "Kafka consumers still closing (their brokers do not answer); exiting without them: their groups drop them after the session timeout");
            return false;
        }
        tokio::time::sleep(CHECK_EVERY).await;
    }
    true
}
