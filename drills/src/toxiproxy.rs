//! A client of Toxiproxy's HTTP API (`scripts/stack up toxiproxy`), for the partitions drill:
//! proxies in front of Kafka and Cassandra, cut, blackholed one way or both, or slowed.

use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub struct Toxiproxy {
    url: String,
    http: reqwest::Client,
}

/// Which way a toxic acts: `Upstream` is client to server, `Downstream` server to client.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Upstream,
    Downstream,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Self::Upstream => "upstream",
            Self::Downstream => "downstream",
        }
    }
}

impl Toxiproxy {
    pub fn new(url: &str) -> Self {
        Self {
            url: url.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.unwrap_or_else(|e| {
            panic!(
                "Toxiproxy at {} (scripts/stack up toxiproxy): {e}",
                self.url
            )
        });
        let status = response.status();
        assert!(
            status.is_success() || (method == reqwest::Method::DELETE && status.as_u16() == 404),
            "Toxiproxy {method} {path}: {status}: {}",
            response.text().await.unwrap_or_default()
        );
    }

    /// A proxy `name` listening on `listen` and forwarding to `upstream`, made anew (a proxy of
    /// that name left by an earlier run is deleted first).
    pub async fn proxy(&self, name: &str, listen: &str, upstream: &str) {
        self.call(reqwest::Method::DELETE, &format!("/proxies/{name}"), None)
            .await;
        let body = json!({"name": name, "listen": listen, "upstream": upstream, "enabled": true});
        self.call(reqwest::Method::POST, "/proxies", Some(body))
            .await;
    }

    /// Disabled: its connections are closed and new ones refused. Enabled: it forwards again.
    pub async fn set_enabled(&self, name: &str, enabled: bool) {
        let body = json!({"enabled": enabled});
        self.call(
            reqwest::Method::POST,
            &format!("/proxies/{name}"),
            Some(body),
        )
        .await;
    }

    /// Data one way held and dropped (connections stay open, nothing flows) until removed.
    pub async fn blackhole(&self, name: &str, stream: Stream) {
        self.toxic(name, "timeout", stream, json!({"timeout": 0}))
            .await;
    }

    /// Each chunk of data one way delayed by `ms` (plus or minus `jitter` ms).
    pub async fn latency(&self, name: &str, stream: Stream, ms: u64, jitter: u64) {
        self.toxic(
            name,
            "latency",
            stream,
            json!({"latency": ms, "jitter": jitter}),
        )
        .await;
    }

    async fn toxic(&self, name: &str, kind: &str, stream: Stream, attributes: Value) {
        let body = json!({
            "name": format!("{kind}_{}", stream.name()),
            "type": kind,
            "stream": stream.name(),
            "toxicity": 1.0,
            "attributes": attributes,
        });
        self.call(
            reqwest::Method::POST,
            &format!("/proxies/{name}/toxics"),
            Some(body),
        )
        .await;
    }

    /// Every proxy enabled again and every toxic removed.
    pub async fn heal(&self) {
        self.call(reqwest::Method::POST, "/reset", None).await;
    }
}
