//! Where a process's namespaces come from, and how it follows their changes: a folder of configs
//! (read again every [`folder::POLL`]) or a control plane (its `Watch` stream).
//!
//! A new set of namespaces is handed to the process, which applies it; until it has, the old set
//! stays in use. A set that does not parse or validate, or that the process refuses, is logged with
//! its reason, counted in `wal_namespace_reloads_total{outcome="refused"}` and flagged by the
//! gauge `wal_namespace_config_refused` (1 until a later set applies), so an operator finds
//! out at once and nothing in flight is touched.

pub mod cancellations;
mod control_plane;
pub mod directives;
mod folder;
pub mod pauses;

use std::path::PathBuf;

use tokio::sync::watch;

use crate::error::ConfigErrors;
use crate::model::Namespace;

pub use cancellations::Cancellations;
pub use directives::Directives;
pub use folder::POLL as FOLDER_POLL;
pub use pauses::{Pause, Pauses};

const RELOADS: &str = "wal_namespace_reloads_total";
const REFUSED: &str = "wal_namespace_config_refused";

/// Describes the feed's metrics to the process's recorder.
pub fn describe_metrics() {
    metrics::describe_counter!(
        RELOADS,
        "New namespace sets seen, by outcome: applied, or refused (invalid, or not servable here)"
    );
    metrics::describe_gauge!(
        REFUSED,
        "1 while the newest namespace set seen was refused and an older one is in use"
    );
}

/// Where namespaces come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A folder of `*.json` configs, one namespace each.
    Folder(PathBuf),
    /// A control plane's gRPC address, e.g. `http://127.0.0.1:50060`, and the TLS to reach it
    /// with (`https://...`) when it serves TLS.
    ControlPlane(String, Option<ClientTls>),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Folder(dir) => write!(f, "folder {}", dir.display()),
            Self::ControlPlane(url, _) => write!(f, "control plane {url}"),
        }
    }
}

/// How a follower reaches a control plane that serves TLS: the CA to trust and, for mTLS, the
/// client certificate and key. The files are read at each connection, so rotated ones are used
/// from the next reconnect on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTls {
    pub ca: std::path::PathBuf,
    pub cert: Option<std::path::PathBuf>,
    pub key: Option<std::path::PathBuf>,
}

impl ClientTls {
    /// `endpoint` with this TLS, or why the files cannot be used.
    pub fn apply(
        &self,
        endpoint: tonic::transport::Endpoint,
    ) -> Result<tonic::transport::Endpoint, String> {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let read = |path: &std::path::Path| {
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(&self.ca)?));
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        endpoint
            .tls_config(tls)
            .map_err(|e| format!("cannot use TLS with this address (expected https://...): {e}"))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("the namespace configs are invalid:\n{0}")]
    Invalid(ConfigErrors),
    #[error("{0}")]
    Unreachable(String),
}

/// What the feed has done so far, for health checks and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeedStatus {
    /// New sets applied since start (the first set not counted).
    pub applied: u64,
    /// New sets refused since start.
    pub refused: u64,
    /// Why the newest set was refused, while it is the newest.
    pub refusal: Option<String>,
}

/// The namespaces from one source: the set in use, and the follower of its changes.
#[derive(Debug)]
pub struct Feed {
    source: Source,
    changes: Changes,
    current: Vec<Namespace>,
    status: watch::Sender<FeedStatus>,
    directives: watch::Sender<Directives>,
}

#[derive(Debug)]
enum Changes {
    Folder(folder::FolderChanges),
    ControlPlane(Box<control_plane::Follower>),
}

impl Feed {
    /// Reads the first set of namespaces: a folder's must be valid; a control plane is waited
    /// for up to [`control_plane::STARTUP_WAIT`].
    pub async fn open(source: Source) -> Result<Self, FeedError> {
        let directives = watch::Sender::new(Directives::default());
        let (changes, current) = match &source {
            Source::Folder(dir) => {
                let (changes, current) = folder::FolderChanges::open(dir)?;
                (Changes::Folder(changes), current)
            }
            Source::ControlPlane(url, tls) => {
                let (follower, current) =
                    control_plane::Follower::open(url, tls.clone(), directives.clone()).await?;
                (Changes::ControlPlane(Box::new(follower)), current)
            }
        };
        Ok(Self {
            source,
            changes,
            current,
            status: watch::Sender::new(FeedStatus::default()),
            directives,
        })
    }

    /// The pauses and cancellations in force, as the control plane last said; they change
    /// apart from the namespaces (neither is a new config), without [`Feed::next`] returning.
    pub fn directives(&self) -> watch::Receiver<Directives> {
        self.directives.subscribe()
    }

    /// The set in use.
    pub fn namespaces(&self) -> &[Namespace] {
        &self.current
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    pub fn status(&self) -> watch::Receiver<FeedStatus> {
        self.status.subscribe()
    }

    /// Waits for the next set of namespaces that differs from the one in use. A set that does
    /// not parse or validate is reported as refused here and waited past. The caller answers
    /// with [`Feed::applied`] or [`Feed::refused`].
    pub async fn next(&mut self) -> Vec<Namespace> {
        loop {
            match self.changes.next().await {
                Ok(namespaces) if namespaces == self.current => {
                    // Put back as it was (a bad edit reverted): nothing to apply, nothing wrong.
                    if self.status.borrow().refusal.is_some() {
                        tracing::info!(source = %self.source, "the namespaces are back to those in use");
                        metrics::gauge!(REFUSED).set(0.0);
                        self.status.send_modify(|s| s.refusal = None);
                    }
                }
                Ok(namespaces) => return namespaces,
                Err(reason) => self.refused(&reason),
            }
        }
    }

    /// The set from [`Feed::next`] is now in use.
    pub fn applied(&mut self, namespaces: Vec<Namespace>, summary: &str) {
        tracing::info!(source = %self.source, %summary, "namespaces reloaded");
        metrics::counter!(RELOADS, "outcome" => "applied").increment(1);
        metrics::gauge!(REFUSED).set(0.0);
        self.current = namespaces;
        self.status.send_modify(|s| {
            s.applied += 1;
            s.refusal = None;
        });
    }

    /// The set from [`Feed::next`] cannot be served here; the one in use stays.
    pub fn refused(&mut self, reason: &str) {
        tracing::error!(source = %self.source, %reason, "namespace config refused; the namespaces in use stay as they are");
        metrics::counter!(RELOADS, "outcome" => "refused").increment(1);
        metrics::gauge!(REFUSED).set(1.0);
        self.status.send_modify(|s| {
            s.refused += 1;
            s.refusal = Some(reason.to_owned());
        });
    }
}

/// How one set of namespaces differs from the set before, by name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SetChanges {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

impl SetChanges {
    pub fn between<'a>(old: impl IntoIterator<Item = &'a Namespace>, new: &[Namespace]) -> Self {
        let old: Vec<&Namespace> = old.into_iter().collect();
        let mut changes = Self::default();
        for ns in new {
            match old.iter().find(|o| o.name == ns.name) {
                None => changes.added.push(ns.name.clone()),
                Some(o) if *o != ns => changes.changed.push(ns.name.clone()),
                Some(_) => {}
            }
        }
        changes.removed = old
            .iter()
            .filter(|o| !new.iter().any(|ns| ns.name == o.name))
            .map(|o| o.name.clone())
            .collect();
        changes
    }

    /// Whether `name` is added or changed: what needs building anew.
    pub fn is_fresh(&self, name: &str) -> bool {
        self.added.iter().chain(&self.changed).any(|n| n == name)
    }
}

impl std::fmt::Display for SetChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "added {:?}, changed {:?}, removed {:?}",
            self.added, self.changed, self.removed
        )
    }
}

impl Changes {
    /// The next set that differs from the last one seen, parsed, or why it does not parse.
    async fn next(&mut self) -> Result<Vec<Namespace>, String> {
        match self {
            Self::Folder(folder) => folder.next().await,
            Self::ControlPlane(follower) => follower.next().await,
        }
    }
}
