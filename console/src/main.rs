//! `wal-console`: the operators' web console; see the crate's README.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use wal_namespaces::feed::ClientTls;
use wal_runtime::process;

#[derive(Debug, Parser)]
#[command(
    name = "wal-console",
    version,
    about = "The operators' web console: namespaces, their destinations, history, pauses, dead letters and transactions, and the actions on them, through the control plane with this process's identity"
)]
struct Options {
    /// Where the page is served. Loopback by default: whoever reaches the page acts with the
    /// identity of --control-plane-cert.
    #[arg(long, env = "WAL_CONSOLE_LISTEN", default_value = "127.0.0.1:8088")]
    listen: SocketAddr,

    /// Further `host:port` names the page may be reached by (behind a proxy, or on a
    /// non-loopback address); a request naming any other is refused, so a web page elsewhere
    /// cannot reach the console through a name that resolves to it.
    #[arg(long, env = "WAL_CONSOLE_ACCEPT_HOSTS", value_delimiter = ',')]
    accept_hosts: Vec<String>,

    /// The control plane (http://, or https:// with --control-plane-ca).
    #[arg(
        long,
        env = "WAL_CONTROL_PLANE",
        default_value = "http://127.0.0.1:50060"
    )]
    control_plane: String,

    /// The CA certificate (PEM) a TLS control plane's certificate chains to.
    #[arg(long, env = "WAL_CONTROL_PLANE_CA")]
    control_plane_ca: Option<PathBuf>,

    /// The client certificate (PEM) the console presents: the control plane grants and audits
    /// what the page does as this certificate's principal.
    #[arg(
        long,
        env = "WAL_CONTROL_PLANE_CERT",
        requires = "control_plane_ca",
        requires = "control_plane_key"
    )]
    control_plane_cert: Option<PathBuf>,

    /// The client certificate's private key (PEM).
    #[arg(long, env = "WAL_CONTROL_PLANE_KEY", requires = "control_plane_cert")]
    control_plane_key: Option<PathBuf>,

    /// Where an entry's trace is shown: a URL holding `{trace_id}`, such as a Jaeger UI's
    /// `http://127.0.0.1:16686/trace/{trace_id}`. A dead letter whose write carried a trace
    /// context links there. None: no links.
    #[arg(long, env = "WAL_CONSOLE_TRACE_URL")]
    trace_url: Option<String>,

    /// The consumers' metrics addresses (their --metrics-listen, as http://host:port), read
    /// every 10 s: each namespace's page shows their counts and rates per destination and
    /// their open breakers. None: the page shows none.
    #[arg(long, env = "WAL_CONSOLE_CONSUMERS", value_delimiter = ',')]
    consumers: Vec<String>,

    #[command(flatten)]
    log: wal_runtime::process::LogFlags,
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = Options::parse();
    let format = options.log.log_format;
    let serving = async { process::exit_code("wal-console", run(options).await) };
    process::traced("wal-console", format, serving).await
}

async fn run(options: Options) -> anyhow::Result<()> {
    let tls = options.control_plane_ca.clone().map(|ca| ClientTls {
        ca,
        cert: options.control_plane_cert.clone(),
        key: options.control_plane_key.clone(),
    });
    let control_plane = wal_console::ControlPlane::new(&options.control_plane, tls.as_ref())
        .map_err(anyhow::Error::msg)?;
    let traces =
        wal_console::TraceLinks::new(options.trace_url.as_deref()).map_err(anyhow::Error::msg)?;
    let consumers = wal_console::Consumers::new(options.consumers).map_err(anyhow::Error::msg)?;
    let listener = process::listen(options.listen).await?;
    tracing::info!(listen = %options.listen, control_plane = %options.control_plane, "wal-console ready");
    let settings = wal_console::Settings {
        accept_hosts: options.accept_hosts,
        traces,
        consumers,
    };
    let shutdown = process::shutdown_signal();
    wal_console::serve(listener, control_plane, settings, shutdown).await?;
    Ok(())
}
