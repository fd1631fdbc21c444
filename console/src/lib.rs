//! The operators' web console (`wal-console`): a small HTTP server, run beside the operator (or
//! as a service of its own), that serves one embedded page and a JSON API over the control
//! plane's NamespaceRegistry and Operations services. It calls them with its own identity (the
//! client certificate it is given), so the control plane authorizes and audits every action
//! as it would the same operator's walctl: the console holds no grants of its own.

mod api;
mod assets;
mod consumers;
mod control_plane;
mod guard;

use std::future::Future;

use axum::routing::{get, post};
use axum::{Extension, Router};
use tokio::net::TcpListener;

pub use consumers::Consumers;
pub use control_plane::ControlPlane;

/// Where the page links an entry's trace: a URL template holding `{trace_id}` (the write's
/// W3C trace id, 32 hex digits), such as a Jaeger UI's `https://jaeger.example/trace/{trace_id}`;
/// none, no links.
#[derive(Debug, Clone, Default)]
pub struct TraceLinks(Option<String>);

impl TraceLinks {
    /// Links made from `template`; refused, saying why, without `{trace_id}` in it.
    pub fn new(template: Option<&str>) -> Result<Self, String> {
        match template {
            Some(t) if !t.contains("{trace_id}") => Err(format!(
                "the trace URL '{t}' has no {{trace_id}} for the page to fill in; for example http://127.0.0.1:16686/trace/{{trace_id}}"
            )),
            template => Ok(Self(template.map(str::to_owned))),
        }
    }

    pub fn template(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// What a console shows beside the control plane's answers, and whom it answers.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Further `host:port` names the page may be reached by; a request naming another host
    /// than the listener's own, or one of these, is refused.
    pub accept_hosts: Vec<String>,
    pub traces: TraceLinks,
    pub consumers: Consumers,
}

/// Serves the console on `listener` until `shutdown`, for the control plane `control_plane`,
/// reading the consumers' metrics meanwhile.
pub async fn serve(
    listener: TcpListener,
    control_plane: ControlPlane,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let hosts = guard::Hosts::of(listener.local_addr()?, &settings.accept_hosts);
    let reading = settings.consumers.watch();
    let served = axum::serve(listener, router(control_plane, hosts, settings))
        .with_graceful_shutdown(shutdown)
        .await;
    reading.abort();
    served
}

/// The page, its assets, and the API the page calls (`/api/...`, JSON both ways), behind the
/// guard against other sites (see `guard`).
fn router(control_plane: ControlPlane, hosts: guard::Hosts, settings: Settings) -> Router {
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
        .route("/api/namespaces/{name}/consumers", get(api::consumers))
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
        .layer(Extension(settings.traces))
        .layer(Extension(settings.consumers))
        .layer(axum::middleware::from_fn_with_state(hosts, guard::guard))
}

#[cfg(test)]
mod tests {
    use super::TraceLinks;

    #[test]
    fn a_trace_url_without_its_trace_id_is_refused_saying_where_it_goes() {
        let refused = TraceLinks::new(Some("http://jaeger:16686/trace/")).unwrap_err();
        assert!(
            refused.contains("'http://jaeger:16686/trace/'"),
            "{refused}"
        );
        assert!(refused.contains("{trace_id}"), "{refused}");
        let links = TraceLinks::new(Some("http://jaeger:16686/trace/{trace_id}")).unwrap();
        assert_eq!(
            links.template(),
            Some("http://jaeger:16686/trace/{trace_id}")
        );
        assert_eq!(TraceLinks::new(None).unwrap().template(), None);
    }
}
