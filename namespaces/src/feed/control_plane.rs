//! Following a control plane's `Watch` stream. A lost stream is opened again with backoff while
//! the namespaces in use stay as they are: a control plane restart never stops writes.

use std::time::Duration;

use tokio::sync::watch;
use tonic::Streaming;
use tonic::transport::Endpoint;
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;
use wal_proto::v1::{NamespaceSnapshot, WatchRequest};

use crate::load::{ConfigText, parse_all};
use crate::model::Namespace;

use super::FeedError;
use super::directives::Directives;

/// The largest Watch snapshot a follower takes.
const MAX_SNAPSHOT: usize = 64 << 20;

/// How long a starting process waits for the control plane's first snapshot.
pub const STARTUP_WAIT: Duration = Duration::from_secs(30);
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(15);

#[derive(Debug)]
pub(super) struct Follower {
    url: String,
    tls: Option<super::ClientTls>,
    stream: Option<Streaming<NamespaceSnapshot>>,
    /// The (name, version) pairs of the last snapshot seen; a reconnect repeats it.
    seen: Vec<(String, i64)>,
    retry: Duration,
    /// Where each snapshot's pauses and cancellations go.
    directives: watch::Sender<Directives>,
}

impl Follower {
    pub(super) async fn open(
        url: &str,
        tls: Option<super::ClientTls>,
        directives: watch::Sender<Directives>,
    ) -> Result<(Self, Vec<Namespace>), FeedError> {
        let mut follower = Self {
            url: url.to_owned(),
            tls,
            stream: None,
            seen: Vec::new(),
            retry: RETRY_FIRST,
            directives,
        };
        let first = tokio::time::timeout(STARTUP_WAIT, async {
            loop {
                match follower.receive().await {
                    Ok(snapshot) => return Ok(snapshot),
                    Err(reason) => {
                        tracing::warn!(control_plane = %follower.url, %reason, "waiting for the control plane");
                        follower.pause().await;
                    }
                }
            }
        })
        .await
        .map_err(|_| {
            FeedError::Unreachable(format!(
                "no namespaces from the control plane at {url} within {STARTUP_WAIT:?}; is it running (wal-control-plane, or scripts/up) and is the address right?"
            ))
        })?;
        let first = first?;
        let namespaces = follower.parse(first).map_err(|reason| {
            FeedError::Unreachable(format!(
                "the control plane's namespaces do not validate here: {reason}"
            ))
        })?;
        Ok((follower, namespaces))
    }

    pub(super) async fn next(&mut self) -> Result<Vec<Namespace>, String> {
        loop {
            match self.receive().await {
                Ok(snapshot) => {
                    self.take_directives(&snapshot);
                    let versions = versions(&snapshot);
                    if versions == self.seen {
                        continue;
                    }
                    return self.parse(snapshot);
                }
                Err(reason) => {
                    tracing::warn!(control_plane = %self.url, %reason, "lost the control plane's watch; the namespaces in use stay as they are");
                    self.pause().await;
                }
            }
        }
    }

    /// The next snapshot, watching again if the stream is not open.
    async fn receive(&mut self) -> Result<NamespaceSnapshot, String> {
        if self.stream.is_none() {
            self.stream = Some(self.watch().await?);
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err("no stream".to_owned());
        };
        match stream.message().await {
            Ok(Some(snapshot)) => {
                self.retry = RETRY_FIRST;
                Ok(snapshot)
            }
            Ok(None) => {
                self.stream = None;
                Err("the control plane ended the watch".to_owned())
            }
            Err(status) => {
                self.stream = None;
                Err(format!("{}: {}", status.code(), status.message()))
            }
        }
    }

    async fn watch(&self) -> Result<Streaming<NamespaceSnapshot>, String> {
        let endpoint = Endpoint::from_shared(self.url.clone())
            .map_err(|e| format!("'{}' is not a control plane address: {e}", self.url))?
            .connect_timeout(Duration::from_secs(5))
            // A control plane that vanished without closing the connection is noticed.
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(5))
            .keep_alive_while_idle(true);
        let endpoint = match &self.tls {
            Some(tls) => tls.apply(endpoint)?,
            None => endpoint,
        };
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        // Past tonic's 4 MiB default: many namespaces, or many cancellations in force, make a
        // large snapshot, and one refused would stop every follower following.
        let response = NamespaceRegistryClient::new(channel)
            .max_decoding_message_size(MAX_SNAPSHOT)
            .watch(WatchRequest {})
            .await
            .map_err(|status| format!("{}: {}", status.code(), status.message()))?;
        Ok(response.into_inner())
    }

    async fn pause(&mut self) {
        tokio::time::sleep(self.retry).await;
        self.retry = (self.retry * 2).min(RETRY_MAX);
    }

    /// Publishes the snapshot's pauses and cancellations when they differ from those in force.
    fn take_directives(&self, snapshot: &NamespaceSnapshot) {
        let directives = Directives::from_snapshot(snapshot);
        self.directives.send_if_modified(|current| {
            if *current == directives {
                return false;
            }
            if current.pauses != directives.pauses {
                tracing::info!(control_plane = %self.url, paused = ?directives.pauses.names(), "pauses changed");
            }
            if current.cancellations != directives.cancellations {
                tracing::info!(control_plane = %self.url, in_force = directives.cancellations.len(), "cancellations changed");
            }
            *current = directives;
            true
        });
    }

    fn parse(&mut self, snapshot: NamespaceSnapshot) -> Result<Vec<Namespace>, String> {
        self.take_directives(&snapshot);
        self.seen = versions(&snapshot);
        let texts: Vec<ConfigText> = snapshot
            .namespaces
            .into_iter()
            .map(|v| ConfigText {
                origin: format!("control plane: {} version {}", v.name, v.version),
                text: Ok(v.config_json),
            })
            .filter(servable)
            .collect();
        parse_all(&texts).map_err(|errors| errors.to_string())
    }
}

/// Whether this build can serve a namespace the control plane holds. The control plane validated
/// every config when it was applied, so one that fails here was stored by a build that accepted
/// more (a target kind this build does not deliver): it is left out, loudly, and its entries
/// wait on its queues; the others are served.
fn servable(config: &ConfigText) -> bool {
    match config.parse() {
        Ok(_) => true,
        Err(errors) => {
            tracing::error!(namespace = %config.origin, %errors, "a namespace from the control plane does not validate in this build; it is not served");
            false
        }
    }
}

fn versions(snapshot: &NamespaceSnapshot) -> Vec<(String, i64)> {
    snapshot
        .namespaces
        .iter()
        .map(|v| (v.name.clone(), v.version))
        .collect()
}
