//! The console's connection to the control plane: one channel, connected on first use and
//! again after a failure, so a console started before its control plane works once it is up.

use tonic::transport::{Channel, Endpoint};
use wal_namespaces::feed::ClientTls;
use wal_proto::v1::namespace_registry_client::NamespaceRegistryClient;
use wal_proto::v1::operations_client::OperationsClient;

#[derive(Debug, Clone)]
pub struct ControlPlane {
    address: String,
    channel: Channel,
}

impl ControlPlane {
    /// The control plane at `address` (http://, or https:// with `tls`); fails only on an
    /// address or TLS files that cannot be used.
    pub fn new(address: &str, tls: Option<&ClientTls>) -> Result<Self, String> {
        let endpoint = Endpoint::from_shared(address.to_owned())
            .map_err(|e| format!("the control plane address '{address}' is not a URL: {e}"))?
            .connect_timeout(std::time::Duration::from_secs(5));
        let endpoint = match tls {
            Some(tls) => tls.apply(endpoint)?,
            None => endpoint,
        };
        Ok(Self {
            address: address.to_owned(),
            channel: endpoint.connect_lazy(),
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn registry(&self) -> NamespaceRegistryClient<Channel> {
        NamespaceRegistryClient::new(self.channel.clone())
    }

    /// Dead letters with their payloads may be large: bounded by the page's limits.
    pub fn operations(&self) -> OperationsClient<Channel> {
        OperationsClient::new(self.channel.clone()).max_decoding_message_size(64 << 20)
    }
}
