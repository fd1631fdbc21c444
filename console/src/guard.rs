//! What keeps other web pages from using the console: it acts with its operator's certificate,
//! so a page elsewhere must not reach it through the operator's browser. A request is refused
//! (403) when its `Host` is not the console's own address (DNS rebinding: a name that resolves
//! to loopback would otherwise be same-origin), when the browser says it comes from another
//! site (`Sec-Fetch-Site`), or, for a POST, when its `Origin` is not the console's. The page
//! may not be framed (clickjacking) nor load anything from elsewhere.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The console's own `host:port` names, as a browser sends them in `Host`.
#[derive(Debug, Clone)]
pub struct Hosts(Vec<String>);

impl Hosts {
    /// The names of `listen` (itself, and `localhost` for a loopback address) and `more`.
    pub fn of(listen: std::net::SocketAddr, more: &[String]) -> Self {
        let port = listen.port();
        let mut names = vec![listen.to_string()];
        if listen.ip().is_loopback() {
            names.push(format!("localhost:{port}"));
            names.push(format!("127.0.0.1:{port}"));
        }
        names.extend(more.iter().cloned());
        Self(names)
    }

    fn holds(&self, host: &str) -> bool {
        self.0.iter().any(|name| name.eq_ignore_ascii_case(host))
    }
}

const POLICY: &str = "default-src 'self'; frame-ancestors 'none'; form-action 'none'";

pub async fn guard(State(hosts): State<Hosts>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let host = text(header::HOST.as_str()).unwrap_or_default().to_owned();
    let refusal = if !hosts.holds(&host) {
        Some(format!("Host '{host}' is not this console's address"))
    } else if text("sec-fetch-site").is_some_and(|site| site != "same-origin" && site != "none") {
        Some("a request from another site".to_owned())
    } else if request.method() == Method::POST
        && text(header::ORIGIN.as_str()) != Some(format!("http://{host}").as_str())
    {
        Some("a POST whose Origin is not this console".to_owned())
    } else {
        None
    };
    if let Some(refusal) = refusal {
        tracing::warn!(%refusal, "refused a request to the console");
        let body = axum::Json(
            serde_json::json!({"error": format!("refused: {refusal}"), "code": "Forbidden"}),
        );
        return (StatusCode::FORBIDDEN, body).into_response();
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}
