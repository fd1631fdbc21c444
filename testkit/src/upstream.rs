//! A real HTTP server on loopback standing for an upstream service.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
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
    /// The status it was answered with (0 until it is chosen, which `respond` sees).
    pub status: u16,
}

/// A real HTTP server on loopback standing for an upstream service: it records every request and
/// answers with the status `respond` picks for it, or, while it is broken, with the status it
/// was broken with.
#[derive(Debug)]
pub struct Upstream {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    /// The status every request gets while broken; 0 when not broken.
    broken: Arc<AtomicU16>,
    /// The Retry-After header sent with a 429, if any.
    retry_after: Arc<Mutex<Option<String>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Upstream {
    pub async fn start(respond: impl Fn(&Received) -> u16 + Send + Sync + 'static) -> Self {
        Self::serve("127.0.0.1:0", respond, Duration::ZERO).await
    }

    /// An upstream that answers every request with `status` until it is [mended](Self::mend),
    /// then 200.
    pub async fn broken(status: u16) -> Self {
        let upstream = Self::start(|_| 200).await;
        upstream.break_with(status);
        upstream
    }

    /// From now on, answers every request with `status` until it is [mended](Self::mend).
    pub fn break_with(&self, status: u16) {
        self.broken.store(status, Ordering::SeqCst);
    }

    /// An upstream that throttles: 429 with `Retry-After: <retry_after>` to every request until
    /// it is [mended](Self::mend), then 200.
    pub async fn throttling(retry_after: &str) -> Self {
        let upstream = Self::broken(429).await;
        *upstream.retry_after.lock().unwrap() = Some(retry_after.to_owned());
        upstream
    }

    /// From now on, answers as `respond` picks.
    pub fn mend(&self) {
        self.broken.store(0, Ordering::SeqCst);
    }

    /// An upstream at `address` (say, one that refused connections until now), answering each
    /// request after `delay`.
    pub async fn serve(
        address: &str,
        respond: impl Fn(&Received) -> u16 + Send + Sync + 'static,
        delay: Duration,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let address: SocketAddr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let broken = Arc::new(AtomicU16::new(0));
        let retry_after: Arc<Mutex<Option<String>>> = Arc::default();
        let handler = Handler {
            log: Arc::clone(&received),
            refusing: Arc::clone(&broken),
            asked: Arc::clone(&retry_after),
            respond: Arc::new(respond),
            delay,
        };
        let server = tokio::spawn(handler.accept(listener));
        Self {
            url: format!("http://{address}/hook"),
            received,
            broken,
            retry_after,
            server,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The bodies received so far, in arrival order, as text.
    pub fn bodies(&self) -> Vec<String> {
        let received = self.received.lock().unwrap();
        received
            .iter()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
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

/// What answers each request: one per upstream, cloned into every connection and request.
struct Handler<R> {
    log: Arc<Mutex<Vec<Received>>>,
    /// The status every request gets while broken; 0 when not broken.
    refusing: Arc<AtomicU16>,
    /// The Retry-After header sent with a 429, if any.
    asked: Arc<Mutex<Option<String>>>,
    respond: Arc<R>,
    delay: Duration,
}

// By hand: a derived Clone would ask `respond` to be Clone, which only its Arc needs to be.
impl<R> Clone for Handler<R> {
    fn clone(&self) -> Self {
        Self {
            log: Arc::clone(&self.log),
            refusing: Arc::clone(&self.refusing),
            asked: Arc::clone(&self.asked),
            respond: Arc::clone(&self.respond),
            delay: self.delay,
        }
    }
}

impl<R: Fn(&Received) -> u16 + Send + Sync + 'static> Handler<R> {
    /// Serves each connection on a task of its own, until the listener fails.
    async fn accept(self, listener: tokio::net::TcpListener) {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let handler = self.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| handler.clone().answer(request));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }

    /// Records the request, then after the delay answers it as broken or as `respond` picks.
    async fn answer(
        self,
        request: hyper::Request<hyper::body::Incoming>,
    ) -> Result<hyper::Response<Full<Bytes>>, std::convert::Infallible> {
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
        let mut record = Received {
            headers,
            body,
            at: std::time::SystemTime::now(),
            status: 0,
        };
        tokio::time::sleep(self.delay).await;
        let status = match self.refusing.load(Ordering::SeqCst) {
            0 => (self.respond)(&record),
            broken => broken,
        };
        record.status = status;
        self.log.lock().unwrap().push(record);
        let mut response = hyper::Response::builder().status(status);
        if let (429, Some(after)) = (status, self.asked.lock().unwrap().clone()) {
            response = response.header("retry-after", after);
        }
        let response = response
            .body(Full::new(Bytes::from_static(b"recorded")))
            .unwrap();
        Ok(response)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.server.abort();
    }
}
