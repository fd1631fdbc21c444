//! The operators' web console (`wal-console`): a small HTTP server, run beside the operator (or
//! as a service of its own), that serves one embedded page and a JSON API over the control
//! plane's NamespaceRegistry and Operations services. It calls them with its own identity (the
//! client certificate it is given), so the control plane authorizes and audits every action
//! as it would the same operator's walctl: the console holds no grants of its own.

mod api;
mod assets;
mod control_plane;
mod guard;

use std::future::Future;

use axum::Router;
use axum::routing::{get, post};
use tokio::net::TcpListener;

pub use control_plane::ControlPlane;

/// Serves the console on `listener` until `shutdown`, for the control plane `control_plane`;
/// requests naming another host than the listener's own, or one of `accept_hosts`
/// (`host:port`), are refused.
pub async fn serve(
    listener: TcpListener,
    control_plane: ControlPlane,
    accept_hosts: &[String],
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let hosts = guard::Hosts::of(listener.local_addr()?, accept_hosts);
    axum::serve(listener, router(control_plane, hosts))
        .with_graceful_shutdown(shutdown)
        .await
}

/// The page, its assets, and the API the page calls (`/api/...`, JSON both ways), behind the
/// guard against other sites (see `guard`).
fn router(control_plane: ControlPlane, hosts: guard::Hosts) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/console.js", get(assets::script))
        .route("/console.css", get(assets::style))
        .route("/api/namespaces", get(api::namespaces))
        .route("/api/namespaces/{name}", get(api::namespace))
        .route(
            "/api/namespaces/{name}/dead-letters",
            get(api::dead_letters),
        )
        .route(
            "/api/namespaces/{name}/dead-letters/{id}",
            get(api::dead_letter),
        )
        .route(
            "/api/namespaces/{name}/redrive",
            get(api::redrive).post(api::start_redrive),
        )
        .route(
            "/api/namespaces/{name}/destinations",
            get(api::destinations),
        )
        .route("/api/namespaces/{name}/pause", post(api::pause))
        .route("/api/namespaces/{name}/resume", post(api::resume))
        .route("/api/namespaces/{name}/cancel", post(api::cancel))
        .route(
            "/api/namespaces/{name}/transactions",
            get(api::transactions),
        )
        .route(
            "/api/namespaces/{name}/transactions/{id}/abort",
            post(api::abort_transaction),
        )
        .with_state(control_plane)
        .layer(axum::middleware::from_fn_with_state(hosts, guard::guard))
}
