//! The writer's command line; every flag can also be set through the environment variable named
//! in its help.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use wal_apply::clients::ClientSettings;
use wal_clusters::flags::{CqlFlags, local_defaults, local_memcached};
use wal_runtime::authorize::SecurityFlags;
use wal_runtime::secret::Secret;

use crate::service::WriterSettings;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "wal-writer",
    version,
    about = "Applies mutations replicated from other regions to this region's cache or CQL table"
)]
pub struct WriterOptions {
    /// Where the RegionWriter gRPC service (with health and reflection) listens. Its port is
    /// the one a region target's writer address without a port means.
    #[arg(long, env = "WAL_WRITER_LISTEN", default_value = "127.0.0.1:50070")]
    pub listen: SocketAddr,

    /// Where Prometheus metrics are served (GET /metrics).
    #[arg(
        long,
        env = "WAL_WRITER_METRICS_LISTEN",
        default_value = "127.0.0.1:9470"
    )]
    pub metrics_listen: SocketAddr,

    /// This writer's region. Entries whose origin is this region are refused: they were
    /// written here, and applying them again would loop a bidirectional pair.
    #[arg(long, env = "WAL_REGION", default_value = "local")]
    pub region: String,

    #[command(flatten)]
    pub cql: CqlFlags,

    /// mTLS, and who may replicate into this writer. The writer reads no namespace config, so
    /// with --authorize only the --super-users may call it: list the principals of the other
    /// regions' consumers.
    #[command(flatten)]
    pub security: SecurityFlags,

    /// The user cql targets log in to CQL as, on a cluster with authentication on. (The
    /// producer and consumer take it from their cluster map's CQL shard; the writer reads none.)
    #[arg(long, env = "WAL_CQL_USERNAME", requires = "cql_password")]
    pub cql_username: Option<String>,

    /// Its password: the value, ${env:NAME} or ${file:/path} (a mounted Secret). Never printed.
    #[arg(
        long,
        env = "WAL_CQL_PASSWORD",
        hide_env_values = true,
        requires = "cql_username",
        value_parser = |value: &str| Ok::<_, std::convert::Infallible>(Secret::new(value.to_owned()))
    )]
    pub cql_password: Option<Secret>,

    /// The CA certificate (PEM) the CQL nodes' certificates chain to: with it, cql targets
    /// reach them over TLS.
    #[arg(long, env = "WAL_CQL_TLS_CA")]
    pub cql_tls_ca: Option<std::path::PathBuf>,

    /// memcached servers (comma-separated host:port) for cache targets that name none.
    #[arg(long, env = "WAL_MEMCACHED", value_delimiter = ',')]
    pub memcached: Vec<String>,

    /// Entries being applied at once. A call that would go past it is refused with
    /// RESOURCE_EXHAUSTED before anything is applied, and the sender tries it again.
    #[arg(long, env = "WAL_WRITER_MAX_IN_FLIGHT", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_in_flight: u32,

    /// The longest one apply may take before it counts as a retryable failure.
    #[arg(long, env = "WAL_WRITER_APPLY_TIMEOUT_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub apply_timeout_ms: u64,

    #[command(flatten)]
    pub log: wal_runtime::process::LogFlags,
}

impl WriterOptions {
    /// The settings these flags make; an error names a --cql-password secret that cannot be
    /// read.
    pub fn settings(&self) -> anyhow::Result<WriterSettings> {
        let apply_timeout = Duration::from_millis(self.apply_timeout_ms);
        let cql_credentials = match (&self.cql_username, &self.cql_password) {
            (Some(user), Some(password)) => {
                let password = wal_runtime::secret::resolve(password.expose())
                    .map_err(|reason| anyhow::anyhow!("--cql-password {reason}"))?;
                Some((user.clone(), Secret::new(password)))
            }
            _ => None,
        };
        let tls = self.security.server_tls()?;
        let authorizer = self
            .security
            .authorizer()
            .map_err(|reason| anyhow::anyhow!(reason))?;
        Ok(WriterSettings {
            region: self.region.clone(),
            tls,
            authorizer,
            // A writer applies to caches and CQL tables only; it never publishes to Kafka.
            clients: ClientSettings {
                cql_nodes: self.cql.cql_nodes.clone(),
                cql_credentials,
                cql_tls_ca: self.cql_tls_ca.clone(),
                memcached: self.memcached.clone(),
                ..ClientSettings::none(apply_timeout)
            },
            max_in_flight: self.max_in_flight,
            apply_timeout,
        })
    }

    /// Options for a writer in tests: the flags' defaults (the environment ignored), any free
    /// port, the stack's CQL and the given memcached.
    pub fn for_local_stack(region: &str, memcached: Vec<String>) -> Self {
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut options: Self = local_defaults();
        options.listen = any_port;
        options.metrics_listen = any_port;
        options.region = region.to_owned();
        options.cql = CqlFlags::local_stack();
        options.memcached = if memcached.is_empty() {
            local_memcached()
        } else {
            memcached
        };
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<WriterOptions, clap::Error> {
        WriterOptions::try_parse_from(std::iter::once("wal-writer").chain(args.iter().copied()))
    }

    #[test]
    fn a_cql_login_takes_both_flags_and_reads_the_password_where_it_points() {
        assert!(parse(&["--cql-username", "wal"]).is_err());
        assert!(parse(&["--cql-password", "secret"]).is_err());

        let options = parse(&["--cql-username", "wal", "--cql-password", "secret"]).unwrap();
        let (user, password) = options.settings().unwrap().clients.cql_credentials.unwrap();
        assert_eq!((user.as_str(), password.expose()), ("wal", "secret"));

        let missing = "${file:/nonexistent/cql-password}";
        let options = parse(&["--cql-username", "wal", "--cql-password", missing]).unwrap();
        let error = options.settings().unwrap_err().to_string();
        assert!(error.contains("--cql-password names the file"), "{error}");
    }
}
