//! The control plane's command line; every flag can also be set through its environment variable.

use std::net::SocketAddr;

use clap::Parser;

use wal_clusters::flags::{BrokerFlags, CqlFlags};
use wal_runtime::authorize::SecurityFlags;

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

    /// Where the namespaces' durable storage is, for an entry's receipts (a cancel says whether
    /// it came too late); without it, a cancel says delivery is not known. The control plane
    /// creates nothing there but the platform's own tables, as every reader does.
    #[command(flatten)]
    pub cql: CqlFlags,

    /// The region the consumers this control plane serves run in (their --region): a cancel
    /// of an entry of a replicated namespace counts the other regions as its destinations.
    #[arg(long, env = "WAL_REGION", default_value = "local")]
    pub region: String,

    /// TLS on the gRPC port, and authorization of applies and deletes against the stored
    /// config's `access.admin` (so no apply can grant itself); only --super-users create
    /// namespaces.
    #[command(flatten)]
    pub security: SecurityFlags,

    #[command(flatten)]
    pub log: wal_runtime::process::LogFlags,
}

impl ControlPlaneOptions {
    /// What the control plane library runs on, from these flags; fails on a cluster map that
    /// cannot be read and on TLS files that cannot be used.
    pub fn settings(&self) -> anyhow::Result<crate::ControlPlaneSettings> {
        // The shard names are checked in every config; the contact points are used only to
        // read receipts.
        let clusters = self.brokers.cluster_map(self.brokers.kafka(), &self.cql)?;
        Ok(crate::ControlPlaneSettings {
            store: self.store.clone(),
            clusters,
            tls: self.security.server_tls()?,
            authorizer: self.security.authorizer().map_err(anyhow::Error::msg)?,
            region: self.region.clone(),
        })
    }
}
