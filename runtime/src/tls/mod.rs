//! mTLS for the platform's gRPC servers: TLS from PEM files, client certificates required when a
//! client CA is given, the files read again while serving (rotation without a restart), and the
//! client's principal worked out once per connection.
//!
//! Plaintext stays the local default: without `--tls-cert` nothing here runs.
//!
//! Rotation: every `--tls-reload-secs` the files are read; when their bytes changed, a new
//! configuration is built and used for every connection accepted after it. Connections already
//! open keep theirs. A new set that does not build (a key not yet replaced beside its new
//! certificate, say) leaves the last good one in use, logs a WARN and counts on
//! `wal_tls_reloads_total{outcome="failed"}`; the next read tries again.

mod files;
mod peer;
mod rules;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use metrics::counter;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;

pub use self::files::{TlsError, TlsFiles, ca_certificates, provider};
pub use self::peer::{Peer, PeerStream, certificate_name};
pub use self::rules::{PrincipalRules, RulesError};

pub const RELOADS: &str = "wal_tls_reloads_total";
pub const HANDSHAKE_FAILURES: &str = "wal_tls_handshake_failures_total";

/// A client that has not finished its handshake by then is dropped: it holds a socket and a task.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes finished but not yet taken by the server.
const ACCEPTED_BACKLOG: usize = 64;

/// The TLS flags every server shares.
#[derive(Debug, Clone, clap::Args)]
pub struct TlsFlags {
    /// The server's certificate chain (PEM). With it, the port speaks TLS only.
    #[arg(long, env = "WAL_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "WAL_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// CA certificates (PEM) a client certificate must chain to. With it every client must
    /// present a certificate (mTLS), and its principal is known to authorization.
    #[arg(long, env = "WAL_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,

    /// How often the three files are read again, so rotated certificates are used without a
    /// restart.
    #[arg(long, env = "WAL_TLS_RELOAD_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub tls_reload_secs: u64,

    /// How a client certificate's name (SAN URI, else DNS SAN, else CN) becomes a principal, in
    /// Kafka's ssl.principal.mapping.rules syntax: RULE:pattern/replacement/[LU] and DEFAULT,
    /// comma-separated, the first match winning. With --authorize, a name no rule matches is
    /// refused.
    #[arg(long, env = "WAL_PRINCIPAL_RULES", default_value = "DEFAULT")]
    pub principal_rules: String,
}

impl Default for TlsFlags {
    /// Plaintext, with the flags' defaults for the rest.
    fn default() -> Self {
        Self {
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            tls_reload_secs: 10,
            principal_rules: "DEFAULT".to_owned(),
        }
    }
}

impl TlsFlags {
    /// The files to serve, or `None` for plaintext.
    pub fn files(&self) -> Option<TlsFiles> {
        Some(TlsFiles {
            cert: self.tls_cert.clone()?,
            key: self.tls_key.clone()?,
            client_ca: self.tls_client_ca.clone(),
        })
    }
}

/// A TLS server's configuration, kept current from its files.
#[derive(Debug, Clone)]
pub struct ServerTls {
    files: TlsFiles,
    /// The bytes the configuration in use was built from; a reload builds only what differs.
    loaded: Arc<files::Contents>,
    current: Arc<RwLock<Arc<ServerConfig>>>,
    rules: Arc<PrincipalRules>,
    reload_every: Duration,
}

impl ServerTls {
    /// Reads and checks the files once: a server that cannot serve TLS as asked does not start.
    /// `None` when the flags ask for plaintext.
    pub fn load(flags: &TlsFlags) -> Result<Option<Self>, TlsError> {
        let rules: PrincipalRules = flags.principal_rules.parse()?;
        let Some(files) = flags.files() else {
            return Ok(None);
        };
        let contents = files.read()?;
        let config = files.build(&contents)?;
        Ok(Some(Self {
            files,
            loaded: Arc::new(contents),
            current: Arc::new(RwLock::new(config)),
            rules: Arc::new(rules),
            reload_every: Duration::from_secs(flags.tls_reload_secs),
        }))
    }

    /// Whether clients must present a certificate.
    pub fn requires_client_certificates(&self) -> bool {
        self.files.client_ca.is_some()
    }

    /// The TLS connections made on `listener`, each with its [`Peer`], for tonic's
    /// `serve_with_incoming`. Handshakes run on tasks of their own, so a slow or silent client
    /// never holds up the others. The files are watched for as long as the stream is read.
    pub fn incoming(self, listener: TcpListener) -> ReceiverStream<std::io::Result<PeerStream>> {
        let (accepted, stream) = mpsc::channel(ACCEPTED_BACKLOG);
        tokio::spawn(self.clone().reload(accepted.clone()));
        tokio::spawn(self.accept(listener, accepted));
        ReceiverStream::new(stream)
    }

    async fn accept(
        self,
        listener: TcpListener,
        accepted: mpsc::Sender<std::io::Result<PeerStream>>,
    ) {
        let refusals = Arc::new(refusal_log());
        loop {
            let (tcp, remote) = tokio::select! {
                connection = listener.accept() => match connection {
                    Ok(connection) => connection,
                    Err(error) => {
                        // Out of file descriptors, say: a pause rather than a busy loop.
                        tracing::warn!(%error, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = accepted.closed() => return,
            };
            // TCP_NODELAY: with Nagle's algorithm on, a response larger than one segment waits
            // for the client's delayed ACK (40 ms on Linux) before its tail is sent.
            let _ = tcp.set_nodelay(true);
            let config = Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()));
            let (rules, accepted, refusals) = (
                Arc::clone(&self.rules),
                accepted.clone(),
                Arc::clone(&refusals),
            );
            tokio::spawn(async move {
                let handshake = TlsAcceptor::from(config).accept(tcp);
                let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                    Ok(Ok(stream)) => stream,
                    // Closed before the handshake ended: a TCP probe (the chart's, with TLS on),
                    // a port check or a client that gave up; not a refusal.
                    Ok(Err(error)) if error.kind() == std::io::ErrorKind::UnexpectedEof => return,
                    Ok(Err(error)) => {
                        counter!(HANDSHAKE_FAILURES).increment(1);
                        // Refusals are the client's problem, and a scanner can make many.
                        if refusals.check().is_ok() {
                            // A plaintext client's first bytes are no TLS record.
                            let hint = if error.to_string().contains("InvalidContentType") {
                                "a plaintext client? this port speaks TLS only"
                            } else {
                                ""
                            };
                            tracing::warn!(%remote, %error, hint, "TLS handshake refused (at most a few such lines a minute; every one counts on wal_tls_handshake_failures_total)");
                        }
                        return;
                    }
                    Err(_) => {
                        counter!(HANDSHAKE_FAILURES).increment(1);
                        return;
                    }
                };
                let peer = Peer::of(&stream, &rules);
                let _ = accepted
                    .send(Ok(PeerStream {
                        inner: stream,
                        peer,
                    }))
                    .await;
            });
        }
    }

    async fn reload(self, accepted: mpsc::Sender<std::io::Result<PeerStream>>) {
        // What was last tried, good or not, and the last failure said: a broken set is
        // reported once, not every read, until the files change again.
        let mut tried = Some((*self.loaded).clone());
        let mut said = None;
        loop {
            tokio::select! {
                () = tokio::time::sleep(self.reload_every) => {}
                () = accepted.closed() => return,
            }
            let outcome = match self.files.read() {
                Ok(contents) if Some(&contents) == tried.as_ref() => continue,
                Ok(contents) => {
                    // New files: their failure, if any, is news even if it reads the same.
                    said = None;
                    let built = self.files.build(&contents);
                    tried = Some(contents);
                    built
                }
                Err(error) => Err(error),
            };
            match outcome {
                Ok(config) => {
                    *self.current.write().unwrap_or_else(|p| p.into_inner()) = config;
                    counter!(RELOADS, "outcome" => "ok").increment(1);
                    tracing::info!(cert = %self.files.cert.display(), "TLS certificates reloaded; new connections use them");
                    said = None;
                }
                Err(error) => {
                    let error = error.to_string();
                    if said.as_ref() != Some(&error) {
                        counter!(RELOADS, "outcome" => "failed").increment(1);
                        tracing::warn!(%error, "TLS certificates not reloaded; the last good ones stay in use");
                        said = Some(error);
                    }
                }
            }
        }
    }
}

fn refusal_log() -> DefaultDirectRateLimiter {
    RateLimiter::direct(Quota::per_minute(
        std::num::NonZeroU32::MIN.saturating_add(4),
    ))
}

/// Describes the metrics of this module.
pub fn describe() {
    metrics::describe_counter!(
        RELOADS,
        "Times a TLS server read changed certificate files: outcome ok (in use now) or failed (the last good ones kept)."
    );
    metrics::describe_counter!(
        HANDSHAKE_FAILURES,
        "TLS handshakes refused or timed out: no client certificate, an untrusted or expired one, plaintext to a TLS port."
    );
}
