//! Kafka work that may wait on brokers for as long as they are away runs apart: on threads of
//! its own, never on an async worker nor on a blocking thread the runtime waits for when it is
//! dropped.
//!
//! Above all, closing a group consumer. librdkafka closes one when the last handle to it goes: a
//! final commit of the offsets stored, then leaving the group. rust-rdkafka's drop polls until
//! that is done, which can be forever while the brokers are away (the commit waits for a group
//! coordinator). On an async worker that stalls the runtime, and a runtime dropped with a
//! consumer running (a failed test, a panic) never let go: a test that failed during a broker
//! outage hung until it was killed. So each consumer closes on a thread of its own, and whoever
//! must not go on before the closes are done (a process about to exit, a reload whose new
//! readers join the same groups) waits for them a bounded time ([`closes_finished`]). A close cut
//! short by an exit is a member that did not leave its group: the broker drops it after the
//! session timeout, as after a crash, and the entries acknowledged since the last commit are
//! received again.
//!
//! The broker calls a running consumer makes (its backlog, its probes, its final commit) run the
//! same way ([`call`]), and are waited for a bounded time. The backlog and probe calls end by
//! librdkafka's own timeouts; the final commit only when its brokers answer, so while a cluster
//! stays away, each consumer closed meanwhile keeps two threads and its librdkafka client (with
//! its read-ahead) until it answers.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The number the next close gets, in the whole process.
static NEXT: AtomicU64 = AtomicU64::new(0);
/// The closes under way, by number.
static UNDER_WAY: Mutex<BTreeSet<u64>> = Mutex::new(BTreeSet::new());

/// How often a closing thread looks whether it holds the last handle, and a waiter whether the
/// closes are done.
const CHECK_EVERY: Duration = Duration::from_millis(20);
/// A close that takes longer than this is logged: its brokers were away.
const SLOW_CLOSE: Duration = Duration::from_secs(5);

fn under_way() -> MutexGuard<'static, BTreeSet<u64>> {
    // Every change to the set is one insert or one remove, so a poisoned lock is still whole.
    UNDER_WAY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Which closes [`closes_finished`] waits for: every one still under way, or only those started
/// after the mark was taken.
#[derive(Debug, Clone, Copy)]
pub struct CloseMark(u64);

impl CloseMark {
    /// Every close still under way, however old: what a process about to exit waits for.
    pub const ALL: Self = Self(0);

    /// The closes started from now on: what a reload waits for, so a close stuck since an
    /// earlier outage does not hold up every later one.
    pub fn now() -> Self {
        Self(NEXT.load(Ordering::SeqCst))
    }
}

/// One close, counted as under way until dropped.
struct UnderWay(u64);

impl UnderWay {
    fn start() -> Self {
        // Numbered under the lock, so a waiter never sees a number taken but not yet inserted.
        let mut under_way = under_way();
        let number = NEXT.fetch_add(1, Ordering::SeqCst);
        under_way.insert(number);
        Self(number)
    }
}

impl Drop for UnderWay {
    fn drop(&mut self) {
        under_way().remove(&self.0);
    }
}

/// Closes `consumer` (of `topic`) on a thread of its own. The thread waits until it holds the
/// last handle (another may be in a broker call on another thread: a probe or a lag read until
/// its timeout, a final commit until its brokers answer), so the close never runs on an async
/// worker nor on a blocking thread the runtime waits for at exit.
pub(super) fn close<C: Send + Sync + 'static>(consumer: Arc<C>, topic: &str) {
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

/// What became of a [`call`] that did not return.
#[derive(Debug)]
pub(super) enum NotReturned {
    /// Still waiting on its brokers when the time was up; it returns when they answer.
    TimedOut(Duration),
    /// It panicked (printed to stderr by the panic handler), or there was no thread to make it
    /// on (logged).
    Failed,
}

impl std::fmt::Display for NotReturned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TimedOut(limit) => write!(
                f,
                "the brokers did not answer within {limit:?}; the call goes on in the background"
            ),
            Self::Failed => write!(
                f,
                "the call failed on its thread (see the process's stderr)"
            ),
        }
    }
}

/// Makes `call`, a broker call that blocks (a synchronous commit for as long as there is no group
/// coordinator), on a thread of its own, and waits for it for at most `limit`. A blocking task
/// would not do: the runtime waits for those when dropped.
pub(super) async fn call<T: Send + 'static>(
    limit: Duration,
    call: impl FnOnce() -> T + Send + 'static,
) -> Result<T, NotReturned> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("kafka-call".to_owned())
        .spawn(move || {
            let _ = answer.send(call());
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "no thread for a Kafka call that blocks; not made");
        return Err(NotReturned::Failed);
    }
    match tokio::time::timeout(limit, answered).await {
        Ok(Ok(returned)) => Ok(returned),
        Ok(Err(_panicked)) => Err(NotReturned::Failed),
        Err(_elapsed) => Err(NotReturned::TimedOut(limit)),
    }
}

/// Waits until the closes `since` marks are done, for at most `limit`; past it, logs how many
/// were left and goes on.
pub async fn closes_finished(since: CloseMark, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let left = under_way().range(since.0..).count();
        if left == 0 {
            return;
        }
        if Instant::now() >= deadline {
            tracing::warn!(left, waited = ?limit, "Kafka consumers still closing (their brokers do not answer); going on without them: if this process exits first, their groups drop them after the session timeout");
            return;
        }
        tokio::time::sleep(CHECK_EVERY).await;
    }
}
