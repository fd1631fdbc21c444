//! Entries of one queue held for an unavailable target (see `breaker`). While any are held, the
//! queue's worker takes no new entries: a Kafka queue's partitions are paused, an SQS queue is
//! not received from. Entries already received go on to their targets.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
pub struct Holds {
    count: watch::Sender<usize>,
}

impl Default for Holds {
    fn default() -> Self {
        Self {
            count: watch::Sender::new(0),
        }
    }
}

/// One held entry; dropping it releases the hold.
#[derive(Debug)]
pub struct Hold {
    holds: Arc<Holds>,
}

impl Holds {
    pub fn enter(self: &Arc<Self>) -> Hold {
        self.count.send_modify(|n| *n += 1);
        Hold {
            holds: Arc::clone(self),
        }
    }

    pub fn any(&self) -> bool {
        *self.count.borrow() > 0
    }

    /// Waits until no entry is held, or shutdown (then false).
    pub async fn released(&self, shutdown: &CancellationToken) -> bool {
        let mut count = self.count.subscribe();
        tokio::select! {
            released = count.wait_for(|n| *n == 0) => released.is_ok(),
            () = shutdown.cancelled() => false,
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.holds.count.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_queue_is_released_when_its_last_hold_ends() {
        let holds = Arc::new(Holds::default());
        let shutdown = CancellationToken::new();
        assert!(holds.released(&shutdown).await);
        let first = holds.enter();
        let second = holds.enter();
        assert!(holds.any());
        drop(first);
        assert!(holds.any());
        let waiter = tokio::spawn({
            let (holds, shutdown) = (Arc::clone(&holds), shutdown.clone());
            async move { holds.released(&shutdown).await }
        });
        drop(second);
        assert!(waiter.await.unwrap());
        assert!(!holds.any());
    }
}
