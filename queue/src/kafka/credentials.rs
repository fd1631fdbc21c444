//! Whether a Kafka cluster lets the platform in, asked once when its clients are made.
//!
//! librdkafka connects lazily and retries a refused login for ever, reporting each refusal only
//! as an error event. A wrong password or CA would otherwise show up as every write answering
//! UNKNOWN and every consumer idle, with the reason in a log line among many. So a process that
//! makes clients for a cluster whose map sets `security.protocol` (credentials or TLS to get
//! wrong) asks for its metadata first, and refuses to start when the brokers refuse it. Brokers
//! that do not answer at all are an outage, not a mistake: the process starts and holds its
//! writes, as it does for a plaintext cluster.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use rdkafka::producer::Producer as _;

use super::KafkaBackend;

/// How long the check waits for the brokers to answer or refuse.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// One metadata request's wait; between them the check looks for a refusal.
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(500);

/// The brokers of a cluster answered and would not let the platform in.
#[derive(Debug, thiserror::Error)]
#[error(
    "Kafka cluster '{cluster}' at {servers} refused the platform ({login}): {reason}; \
     check kafka.clusters.{cluster}.client in the cluster map (security.protocol, sasl.*, ssl.*)"
)]
pub struct Refused {
    pub cluster: String,
    pub servers: String,
    /// How the platform tried to get in: the protocol, mechanism and user (no secret).
    pub login: String,
    /// librdkafka's words, which name the mechanism or the certificate problem (never a secret).
    pub reason: String,
}

impl KafkaBackend {
    /// Whether this cluster's client settings ask for TLS or SASL (anything but plaintext).
    pub fn secured(&self) -> bool {
        self.settings
            .client
            .get("security.protocol")
            .is_some_and(|protocol| !protocol.eq_ignore_ascii_case("plaintext"))
    }

    /// For a secured cluster, asks the brokers for metadata until they answer (`Ok`), refuse the
    /// credentials or the TLS handshake ([`Refused`]), or [`CHECK_TIMEOUT`] passes (`Ok`, with
    /// a warning: an outage is held through, not a reason to stop). A plaintext cluster has
    /// nothing to check and is not asked.
    pub async fn check_credentials(self: &Arc<Self>, cluster: &str) -> Result<(), Refused> {
        if !self.secured() {
            return Ok(());
        }
        let deadline = Instant::now() + CHECK_TIMEOUT;
        loop {
            let backend = Arc::clone(self);
            // fetch_metadata blocks on the network; keep it off the async workers.
            let answered = tokio::task::spawn_blocking(move || {
                backend
                    .producer()
                    .client()
                    .fetch_metadata(None, ATTEMPT_TIMEOUT)
                    .is_ok()
            })
            .await
            .unwrap_or(false);
            if answered {
                return Ok(());
            }
            if let Some(reason) = self.refusal() {
                return Err(Refused {
                    cluster: cluster.to_owned(),
                    servers: self.settings.bootstrap_servers.clone(),
                    login: self.login(),
                    reason,
                });
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    cluster,
                    servers = %self.settings.bootstrap_servers,
                    "Kafka cluster did not answer within {CHECK_TIMEOUT:?}, so its credentials \
                     could not be checked; starting anyway (writes wait for it as for an outage)"
                );
                return Ok(());
            }
        }
    }

    /// The client properties that say how the platform logs in, none of them secret.
    fn login(&self) -> String {
        [
            "security.protocol",
            "sasl.mechanisms",
            "sasl.mechanism",
            "sasl.username",
        ]
        .iter()
        .filter_map(|key| Some(format!("{key} {}", self.settings.client.get(key)?)))
        .collect::<Vec<_>>()
        .join(", ")
    }

    /// The last refusal the producer was told of. The producer's, not the admin client's: only
    /// the producer has a thread that polls for librdkafka's error events, so only its context
    /// hears of a refusal.
    fn refusal(&self) -> Option<String> {
        self.producer_refusal
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}
