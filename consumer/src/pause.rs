//! An operator's pause of one destination of one namespace (the control plane's
//! `Operations.Pause`, carried by the Watch stream): while it holds, the queue's worker takes no
//! new entries and each entry it has waits before its next attempt, using none, as it would for
//! a target whose breaker is open. Entries being applied when it arrives finish.

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wal_namespaces::feed::{Directives, Pause};

#[derive(Debug, Clone)]
pub struct PauseSwitch {
    directives: watch::Receiver<Directives>,
    namespace: String,
    destination: String,
}

impl PauseSwitch {
    pub fn new(
        directives: watch::Receiver<Directives>,
        namespace: &str,
        destination: &str,
    ) -> Self {
        Self {
            directives,
            namespace: namespace.to_owned(),
            destination: destination.to_owned(),
        }
    }

    /// A switch no pause ever reaches: for a consumer without a control plane, and for tests.
    pub fn never() -> Self {
        let (_, directives) = watch::channel(Directives::default());
        Self::new(directives, "", "")
    }

    /// Whether a pause holds this destination now: asked for every entry, so it clones nothing.
    pub fn paused(&self) -> bool {
        self.directives
            .borrow()
            .pauses
            .holding(&self.namespace, &self.destination)
            .is_some()
    }

    /// The pause holding this destination now, if any (who and why, for a log line).
    pub fn holding(&self) -> Option<Pause> {
        self.directives
            .borrow()
            .pauses
            .holding(&self.namespace, &self.destination)
            .cloned()
    }

    /// Waits until no pause holds this destination; false at shutdown.
    pub async fn resumed(&self, shutdown: &CancellationToken) -> bool {
        let mut directives = self.directives.clone();
        let (namespace, destination) = (&self.namespace, &self.destination);
        let ended = async {
            // Err: the consumer is going away with the pause still in force.
            directives
                .wait_for(|d| d.pauses.holding(namespace, destination).is_none())
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
    use wal_namespaces::feed::Pauses;

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
        let (directives, receiver) = watch::channel(Directives::default());
        let pauses = |list: &[wal_proto::v1::Pause]| {
            directives.send_replace(Directives {
                pauses: Pauses::from_proto(list),
                ..Directives::default()
            });
        };
        let switch = PauseSwitch::new(receiver, "orders", "events");
        let shutdown = CancellationToken::new();
        assert!(!switch.paused());
        assert!(switch.resumed(&shutdown).await);
        pauses(&[pause("orders", "events")]);
        assert_eq!(switch.holding().unwrap().reason, "incident");
        let waiting = tokio::spawn({
            let (switch, shutdown) = (switch.clone(), shutdown.clone());
            async move { switch.resumed(&shutdown).await }
        });
        tokio::task::yield_now().await;
        // Another destination's pause ending is not this one's.
        pauses(&[pause("orders", "events"), pause("users", "")]);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        pauses(&[pause("users", "")]);
        assert!(waiting.await.unwrap());
        // Shutdown ends a wait the pause has not.
        pauses(&[pause("orders", "")]);
        shutdown.cancel();
        assert!(!switch.resumed(&shutdown).await);
    }
}
