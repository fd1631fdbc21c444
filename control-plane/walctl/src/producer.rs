//! How walctl reaches the producer: its address, and with mTLS the CA to trust and the client
//! certificate to present.

use std::path::PathBuf;

use clap::Args;
use tonic::transport::Channel;
use wal_namespaces::feed::ClientTls;

use crate::Failure;

#[derive(Debug, Clone, Args)]
pub struct ProducerFlags {
    /// The producer's gRPC address (https://... when it serves TLS).
    #[arg(long, env = "WAL_PRODUCER", default_value = "http://127.0.0.1:50051")]
    pub producer: String,
    /// The CA certificate (PEM) the producer's certificate chains to; with it, walctl speaks TLS.
    #[arg(long, env = "WAL_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// The client certificate (PEM) to present to a producer that requires one (mTLS).
    #[arg(
        long,
        env = "WAL_CLIENT_CERT",
        requires = "tls_key",
        requires = "tls_ca"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "WAL_CLIENT_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl ProducerFlags {
    /// A connected channel, or why there is none.
    pub async fn connect(&self) -> Result<Channel, Failure> {
        let endpoint = Channel::from_shared(self.producer.clone()).map_err(|e| {
            Failure::usage(format!(
                "--producer {:?} is not an address like http://127.0.0.1:50051: {e}",
                self.producer
            ))
        })?;
        // The same TLS a service uses to follow the control plane: one way to build it.
        let endpoint = match &self.tls_ca {
            None => endpoint,
            Some(ca) => ClientTls {
                ca: ca.clone(),
                cert: self.tls_cert.clone(),
                key: self.tls_key.clone(),
            }
            .apply(endpoint)
            .map_err(|e| Failure::usage(format!("--producer {:?}: {e}", self.producer)))?,
        };
        endpoint
            .connect()
            .await
            .map_err(|e| Failure::unreachable_producer(&self.producer, crate::failure::causes(&e)))
    }
}

impl ProducerFlags {
    /// What the producer answered, with a hint when the connection itself failed: a TLS
    /// producer refuses a plaintext client or one without a certificate at the handshake,
    /// which the client sees only as a closed connection.
    pub fn refused(&self, status: &tonic::Status, doing: &str) -> Failure {
        let mut failure = Failure::from_status(status, doing);
        // Only a failed connection carries a transport error as its source; an UNAVAILABLE
        // the producer answered gets no TLS hint.
        let transport = std::error::Error::source(status).is_some();
        let hint = if !transport {
            ""
        } else if self.tls_ca.is_none() {
            " (if the producer serves TLS, give an https:// address and --tls-ca)"
        } else if self.tls_cert.is_none() {
            " (if the producer requires client certificates, give --tls-cert and --tls-key)"
        } else {
            " (the producer may not trust this client certificate, or it has expired; its log says which)"
        };
        failure.message.push_str(hint);
        failure
    }
}
