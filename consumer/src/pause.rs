//! An operator's pause of one destination of one namespace (the control plane's
//! `Operations.Pause`, carried by the Watch stream): while it holds, the queue's worker takes no
//! new entries and each entry it has waits before its next attempt, using none, as it would for
//! a target whose breaker is open. Entries being applied when it arrives finish.

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wal_namespaces::feed::{Pause, Pauses};

#[derive(Debug, Clone)]
pub struct PauseSwitch {
    pauses: watch::Receiver<Pauses>,
    namespace: String,
    destination: String,
}

impl PauseSwitch {
    pub fn new(pauses: watch::Receiver<Pauses>, namespace: &str, destination: &str) -> Self {
        Self {
            pauses,
            namespace: namespace.to_owned(),
            destination: destination.to_owned(),
        }
    }

    /// A switch no pause ever reaches: for a consumer without a control plane, and for tests.
    pub fn never() -> Self {
        let (_, pauses) = watch::channel(Pauses::default());
        Self::new(pauses, "", "")
    }

    /// Whether a pause holds this destination now: asked for every entry, so it clones nothing.
    pub fn paused(&self) -> bool {
        self.pauses
            .borrow()
            .holding(&self.namespace, &self.destination)
            .is_some()
    }

    /// The pause holding this destination now, if any (who and why, for a log line).
    pub fn holding(&self) -> Option<Pause> {
        self.pauses
            .borrow()
            .holding(&self.namespace, &self.destination)
            .cloned()
    }

    /// Waits until no pause holds this destination; false at shutdown.
    pub async fn resumed(&self, shutdown: &CancellationToken) -> bool {
        let mut pauses = self.pauses.clone();
        let (namespace, destination) = (&self.namespace, &self.destination);
        let ended = async {
            // Err: the consumer is going away with the pause still in force.
            pauses
                .wait_for(|p| p.holding(namespace, destination).is_none())
                .await
                .is_ok()
        };
        tokio::select! {
            true = ended => true,
            () = shutdown.cancelled() => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(namespace: &str, destination: &str) -> wal_proto::v1::Pause {
        wal_proto::v1::Pause {
            namespace: namespace.to_owned(),
            destination: destination.to_owned(),
            paused_by: "ops".to_owned(),
            paused_at_micros: 1,
            reason: "incident".to_owned(),
        }
    }

    #[tokio::test]
    async fn a_paused_destination_waits_until_its_pause_ends_and_no_longer() {
        let (pauses, receiver) = watch::channel(Pauses::default());
        let switch = PauseSwitch::new(receiver, "orders", "events");
        let shutdown = CancellationToken::new();
        assert!(!switch.paused());
        assert!(switch.resumed(&shutdown).await);
        pauses.send_replace(Pauses::from_proto(&[pause("orders", "events")]));
        assert_eq!(switch.holding().unwrap().reason, "incident");
        let waiting = tokio::spawn({
            let (switch, shutdown) = (switch.clone(), shutdown.clone());
            async move { switch.resumed(&shutdown).await }
        });
        tokio::task::yield_now().await;
        // Another destination's pause ending is not this one's.
        pauses.send_replace(Pauses::from_proto(&[
            pause("orders", "events"),
            pause("users", ""),
        ]));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        pauses.send_replace(Pauses::from_proto(&[pause("users", "")]));
        assert!(waiting.await.unwrap());
        // Shutdown ends a wait the pause has not.
        pauses.send_replace(Pauses::from_proto(&[pause("orders", "")]));
        shutdown.cancel();
        assert!(!switch.resumed(&shutdown).await);
    }
}
