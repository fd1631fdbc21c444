//! A server's certificate, key and client CA, read from PEM files and built into a rustls
//! configuration. Every error names the file and what was wrong with it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ServerConfig, crypto::CryptoProvider};

/// Why a server's TLS files cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {problem}")]
    File { path: PathBuf, problem: String },
    #[error("the certificate {cert} and the key {key} do not go together: {problem}")]
    Pair {
        cert: PathBuf,
        key: PathBuf,
        problem: String,
    },
    #[error(transparent)]
    Rules(#[from] super::rules::RulesError),
}

/// Where a server's TLS files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Client certificates must chain to one of these; `None` serves TLS without asking for one.
    pub client_ca: Option<PathBuf>,
}

/// The files' bytes, kept to tell whether a later read found anything new.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

/// One crypto provider for every TLS connection the platform makes: ring, the only one compiled
/// in (the AWS SDK's HTTPS client is built on it too, see `queue::sqs`). Named here rather than
/// taken from rustls' process default, which a dependency that enables a second provider would
/// leave unset.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsFiles {
    pub(super) fn read(&self) -> Result<Contents, TlsError> {
        Ok(Contents {
            cert: read(&self.cert)?,
            key: read(&self.key)?,
            client_ca: self.client_ca.as_deref().map(read).transpose()?,
        })
    }

    /// The server configuration the contents make, checked whole: a certificate without its
    /// key, an empty CA file or a PEM that is not one is an error here, not at a handshake.
    pub(super) fn build(&self, contents: &Contents) -> Result<Arc<ServerConfig>, TlsError> {
        let chain = certificates(&self.cert, &contents.cert)?;
        let key = PrivateKeyDer::from_pem_slice(&contents.key).map_err(|e| TlsError::File {
            path: self.key.clone(),
            problem: format!("expected a PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
        })?;
        let provider = provider();
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::File {
                path: self.cert.clone(),
                problem: e.to_string(),
            })?;
        let builder = match (&self.client_ca, &contents.client_ca) {
            (Some(path), Some(bytes)) => {
                let roots = roots(path, bytes)?;
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| TlsError::File {
                            path: path.clone(),
                            problem: format!("cannot verify clients with these CAs: {e}"),
                        })?;
                builder.with_client_cert_verifier(verifier)
            }
            _ => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::Pair {
                cert: self.cert.clone(),
                key: self.key.clone(),
                problem: e.to_string(),
            })?;
        // gRPC is HTTP/2 only.
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The CA certificates (DER) in the PEM file at `ca`, checked: a file that cannot be read, holds
/// no certificate or is not PEM is an error naming it (TLS to a CQL cluster, say).
pub fn ca_certificates(ca: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    certificates(ca, &read(ca)?)
}

/// The CA certificates of the PEM file at `path` (its contents, `bytes`).
fn roots(path: &Path, bytes: &[u8]) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(path, bytes)? {
        roots.add(cert).map_err(|e| TlsError::File {
            path: path.to_owned(),
            problem: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(roots)
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn certificates(path: &Path, bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::File {
            path: path.to_owned(),
            problem: format!("expected PEM certificates: {e}"),
        })?;
    if certs.is_empty() {
        return Err(TlsError::File {
            path: path.to_owned(),
            problem:
                "expected at least one PEM certificate (-----BEGIN CERTIFICATE-----), found none"
                    .into(),
        });
    }
    Ok(certs)
}
