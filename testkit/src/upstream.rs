//! A real HTTP server on loopback standing for an upstream service.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// One request an [`Upstream`] received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    pub at: std::time::SystemTime,
}

/// A real HTTP server on loopback standing for an upstream service: it records every request and
/// answers with the status `respond` picks for it.
#[derive(Debug)]
pub struct Upstream {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Upstream {
    pub async fn start(respond: fn(&Received) -> u16) -> Self {
        Self::serve("127.0.0.1:0", respond, Duration::ZERO).await
    }

    /// An upstream at `address` (say, one that refused connections until now), answering each
    /// request after `delay`.
    pub async fn serve(address: &str, respond: fn(&Received) -> u16, delay: Duration) -> Self {
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let address: SocketAddr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&received);
        let server = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let service =
                        service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                            let log = Arc::clone(&log);
                            async move {
                                let headers = request
                                    .headers()
                                    .iter()
                                    .map(|(k, v)| {
                                        (
                                            k.as_str().to_owned(),
                                            v.to_str().unwrap_or_default().to_owned(),
                                        )
                                    })
                                    .collect();
                                let body = request
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes().to_vec())
                                    .unwrap_or_default();
                                let record = Received {
                                    headers,
                                    body,
                                    at: std::time::SystemTime::now(),
                                };
                                tokio::time::sleep(delay).await;
                                let status = respond(&record);
                                log.lock().unwrap().push(record);
                                let response = hyper::Response::builder()
                                    .status(status)
                                    .body(Full::new(Bytes::from_static(b"recorded")))
                                    .unwrap();
                                Ok::<_, std::convert::Infallible>(response)
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            url: format!("http://{address}/hook"),
            received,
            server,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// How many requests arrived so far: cheap enough to poll while thousands arrive, where
    /// cloning every one (`received`) would take the CPU the run is measuring.
    pub fn count(&self) -> usize {
        self.received.lock().unwrap().len()
    }

    /// An http target posting here, as namespace-config JSON.
    pub fn target(&self) -> String {
        format!(
            r#"{{"kind": "http", "settings": {{"url": "{}"}}}}"#,
            self.url
        )
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.server.abort();
    }
}
