//! A future that finishes even when its caller stops waiting for it.
//!
//! An enqueue holds its write's in-flight slot until the broker answers, so a client that gives
//! up early does not free the slot while its record still occupies the Kafka producer's buffer.
//! Spawning every enqueue as a task of its own kept that promise at the price of a task and a
//! cross-thread wake per write; [`Finishing`] runs the enqueue in place instead, and only when
//! it is dropped unfinished (the client went away) does the rest become a task.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs `inner` where it is awaited; if dropped before `inner` finished, spawns what is left of
/// it on the current runtime (or, with no runtime left, drops it).
pub struct Finishing<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    inner: Option<Pin<Box<F>>>,
}

impl<F> Finishing<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    pub fn new(inner: F) -> Self {
        Self {
            inner: Some(Box::pin(inner)),
        }
    }
}

impl<F> Future for Finishing<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = F::Output;

    /// Polled again after it was ready, it stays pending: like any future, it is not for that.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Pending;
        };
        let polled = inner.as_mut().poll(cx);
        if polled.is_ready() {
            self.inner = None;
        }
        polled
    }
}

impl<F> Drop for Finishing<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        // Dropped while a panic unwinds (the inner future's own, while it was polled): what is
        // left of it must not be polled again.
        if std::thread::panicking() {
            return;
        }
        if let Some(rest) = self.inner.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_future_awaited_to_the_end_runs_in_place() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        Finishing::new(async move { flag.store(true, Ordering::SeqCst) }).await;
        assert!(done.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_future_dropped_unfinished_still_finishes() {
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let (finished, finish) = tokio::sync::oneshot::channel();
        let finishing = Finishing::new(async move {
            let _ = released.await;
            let _ = finished.send(());
        });
        // The caller stops waiting before the future could finish.
        let gave_up = tokio::time::timeout(Duration::from_millis(10), finishing).await;
        assert!(gave_up.is_err(), "still waiting when the caller gave up");
        release.send(()).expect("the rest is still running");
        tokio::time::timeout(Duration::from_secs(5), finish)
            .await
            .expect("the rest finished on a task of its own")
            .expect("finished, not dropped");
    }
}
