//! How the platform opens a CQL session: the contact points, the login on a cluster with
//! authentication on, and the datacenter to prefer. Durable storage and cql targets connect the
//! same way, so a shard of the cluster map means the same thing to both.

use std::path::{Path, PathBuf};
use std::time::Duration;

use openssl::error::ErrorStack;
use openssl::ssl::{SslConnector, SslConnectorBuilder, SslMethod, SslVerifyMode};
use openssl::x509::X509;
use openssl::x509::store::X509StoreBuilder;

use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::load_balancing::DefaultPolicy;

use wal_runtime::secret::Secret;
use wal_runtime::tls::TlsError;

/// Where a session goes and how it logs in.
#[derive(Debug, Clone, Default)]
pub struct CqlPlace {
    /// Contact points, `host:port`.
    pub nodes: Vec<String>,
    /// The datacenter whose nodes requests go to first; unset, any.
    pub local_datacenter: Option<String>,
    /// A user and password, for a cluster with authentication on.
    pub credentials: Option<(String, Secret)>,
    /// The CA (PEM) the nodes' certificates chain to: with it, the session speaks TLS.
    pub tls_ca: Option<PathBuf>,
}

impl CqlPlace {
    /// The place of a shard of the cluster map.
    pub fn of_shard(shard: &crate::CqlShard) -> Self {
        Self {
            nodes: shard.contact_points.clone(),
            local_datacenter: shard.local_datacenter.clone(),
            credentials: shard.username.clone().zip(shard.password.clone()),
            tls_ca: shard.tls_ca.clone(),
        }
    }

    /// A session builder for this place; `request_timeout` bounds each request (`None`: the
    /// driver's default). Fails only on a TLS CA file that cannot be used.
    pub fn session_builder(
        &self,
        connect_timeout: Duration,
        request_timeout: Option<Duration>,
    ) -> Result<SessionBuilder, TlsError> {
        let mut builder = SessionBuilder::new()
            .known_nodes(&self.nodes)
            .connection_timeout(connect_timeout);
        if let Some(ca) = &self.tls_ca {
            builder = builder.tls_context(Some(tls(ca)?));
        }
        if let Some((user, password)) = &self.credentials {
            builder = builder.user(user, password.expose());
        }
        let mut profile = ExecutionProfile::builder();
        if let Some(timeout) = request_timeout {
            profile = profile.request_timeout(Some(timeout));
        }
        if let Some(datacenter) = &self.local_datacenter {
            let policy = DefaultPolicy::builder()
                .prefer_datacenter(datacenter.clone())
                .build();
            profile = profile.load_balancing_policy(policy);
        }
        Ok(builder.default_execution_profile_handle(profile.build().into_handle()))
    }
}

/// TLS to the nodes, trusting the CA certificates at `ca` and verifying each node's certificate
/// against its address. On OpenSSL, the system's (which librdkafka links too): the driver's rustls
/// backend would compile aws-lc, a second crypto library beside ring, for this alone.
fn tls(ca: &Path) -> Result<SslConnectorBuilder, TlsError> {
    let unusable = |problem: ErrorStack| TlsError::File {
        path: ca.to_owned(),
        problem: format!("not usable by OpenSSL: {problem}"),
    };
    let mut builder = SslConnector::builder(SslMethod::tls_client()).map_err(unusable)?;
    let mut roots = X509StoreBuilder::new().map_err(unusable)?;
    for certificate in wal_runtime::tls::ca_certificates(ca)? {
        let certificate = X509::from_der(&certificate).map_err(unusable)?;
        roots.add_cert(certificate).map_err(unusable)?;
    }
    builder
        .set_verify_cert_store(roots.build())
        .map_err(unusable)?;
    builder.set_verify(SslVerifyMode::PEER);
    Ok(builder)
}
