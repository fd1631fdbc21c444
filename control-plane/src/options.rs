//! The control plane's command line; every flag can also be set through its environment variable.

use std::net::SocketAddr;

use clap::Parser;

use wal_core::authorize::Authorizer;
use wal_core::process::BrokerFlags;
use wal_core::tls::{ServerTls, TlsFlags};

#[derive(Debug, Clone, Parser)]
#[command(
    name = "wal-control-plane",
    version,
    about = "The namespace registry: versions, update rules and provisioning"
)]
pub struct ControlPlaneOptions {
    /// Where the gRPC server listens.
    #[arg(long, env = "WAL_CONTROL_LISTEN", default_value = "127.0.0.1:50060")]
    pub listen: SocketAddr,

    /// The namespace store: sqlite://PATH (created when missing) or postgres://USER@HOST:PORT/DB.
    #[arg(
        long,
        env = "WAL_CONTROL_STORE",
        default_value = "sqlite://wal-control-plane.db"
    )]
    pub store: String,

    #[command(flatten)]
    pub brokers: BrokerFlags,

    #[command(flatten)]
    pub tls: TlsFlags,

    /// Check every apply and delete against the namespace's `access.admin` grants (its stored
    /// config's, so no apply can grant itself), by the principal of the client's certificate;
    /// only --super-users create namespaces. Needs --tls-client-ca.
    #[arg(
        long,
        env = "WAL_AUTHORIZE",
        default_value_t = false,
        requires = "tls_client_ca"
    )]
    pub authorize: bool,

    /// Principals allowed every action on every namespace (comma-separated), with --authorize.
    #[arg(long, env = "WAL_SUPER_USERS", value_delimiter = ',')]
    pub super_users: Vec<String>,
}

impl ControlPlaneOptions {
    /// What the control plane library runs on, from these flags; fails on a cluster map that
    /// cannot be read and on TLS files that cannot be used.
    pub fn settings(&self) -> anyhow::Result<crate::ControlPlaneSettings> {
        // Shard names are all the control plane needs of CQL: it checks the names, and
        // connects to no CQL cluster.
        let clusters = self.brokers.cluster_map(self.brokers.kafka(), Vec::new())?;
        Ok(crate::ControlPlaneSettings {
            store: self.store.clone(),
            clusters,
            tls: ServerTls::load(&self.tls)?,
            authorizer: if self.authorize {
                Authorizer::on(self.super_users.clone())
            } else {
                Authorizer::off()
            },
        })
    }
}
