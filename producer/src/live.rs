//! The namespaces a running producer serves, replaced whole when a new set arrives. A write
//! holds the namespace runtime it started with (admission slot, queue handle) until it is
//! answered, so a reload never fails or drops one; writes arriving after see the new set.
//!
//! While a changed namespace's old writes finish, its old and new admission both count: for a
//! moment it may have up to twice its `max_in_flight` writes in flight.

use std::sync::{Arc, PoisonError, RwLock};

use anyhow::bail;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use wal_namespaces::Namespace;
use wal_namespaces::feed::{Feed, SetChanges};

use crate::registry::Registry;
use crate::settings::ProducerSettings;

#[derive(Debug)]
pub struct LiveRegistry {
    current: RwLock<Arc<Registry>>,
    settings: ProducerSettings,
    /// The largest payload the gRPC server decodes, fixed when it starts.
    payload_ceiling: usize,
    /// One reload at a time, so two cannot both build from the same old set.
    reloading: Mutex<()>,
}

impl LiveRegistry {
    pub fn new(registry: Registry, settings: &ProducerSettings, payload_ceiling: usize) -> Self {
        Self {
            current: RwLock::new(Arc::new(registry)),
            settings: settings.clone(),
            payload_ceiling,
            reloading: Mutex::new(()),
        }
    }

    /// The set being served now.
    pub fn current(&self) -> Arc<Registry> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Serves `namespaces` from now on, or explains why this producer cannot (then the set in
    /// use stays). With `--provision`, the queues of added and changed namespaces are created.
    pub async fn reload(&self, namespaces: Vec<Namespace>) -> anyhow::Result<SetChanges> {
        let _one_at_a_time = self.reloading.lock().await;
        for ns in &namespaces {
            if ns.payload_limit_bytes > self.payload_ceiling {
                bail!(
                    "namespace '{}' accepts payloads of up to {} bytes, but this producer decodes requests of at most {} (set at start from its largest namespace); restart the producer to serve it",
                    ns.name,
                    ns.payload_limit_bytes,
                    self.payload_ceiling
                );
            }
        }
        let old = self.current();
        let (next, changes) = old.next(&self.settings, namespaces).await?;
        if self.settings.provision {
            let fresh: Vec<String> = changes
                .added
                .iter()
                .chain(&changes.changed)
                .cloned()
                .collect();
            for report in next.provision_only(&fresh).await? {
                if !report.created.is_empty() {
                    tracing::info!(created = ?report.created, "provisioned");
                }
            }
        }
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        Ok(changes)
    }
}

impl LiveRegistry {
    /// Applies each new set of namespaces from `feed` until `shutdown`.
    pub async fn follow(self: Arc<Self>, mut feed: Feed, shutdown: CancellationToken) {
        loop {
            let namespaces = tokio::select! {
                () = shutdown.cancelled() => return,
                namespaces = feed.next() => namespaces,
            };
            // A reload swaps the registry only at its end, so one cut short changes nothing.
            let reloaded = tokio::select! {
                () = shutdown.cancelled() => return,
                reloaded = self.reload(namespaces.clone()) => reloaded,
            };
            match reloaded {
                Ok(changes) => feed.applied(namespaces, &changes.to_string()),
                Err(error) => feed.refused(&format!("{error:#}")),
            }
        }
    }
}
