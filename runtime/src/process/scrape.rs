//! The metrics scrape over HTTP/1: every request, whatever its path, gets the rendered metrics,
//! the process's own (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_open_fds`, ... as every Prometheus client library names them) read just before.
//! Ours rather than the exporter's listener so the scrape can leave out ended series
//! ([`super::series`]).

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, body::Incoming};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::telemetry::MetricsHandle;

/// The Prometheus text exposition format's content type.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4";

pub async fn serve(listener: TcpListener, handle: MetricsHandle) {
    let process = metrics_process::Collector::default();
    process.describe();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of file descriptors, a reset before accept: the next scrape tries again.
            Err(error) => {
                tracing::warn!(%error, "metrics: accepting a scrape connection failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let (handle, process) = (handle.clone(), process.clone());
        tokio::spawn(async move {
            let service = service_fn(move |_: Request<Incoming>| {
                process.collect();
                let body = handle.render();
                async move {
                    let mut response = Response::new(Full::new(Bytes::from(body)));
                    response
                        .headers_mut()
                        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
                    Ok::<_, Infallible>(response)
                }
            });
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, "metrics: scrape connection ended with an error");
            }
        });
    }
}
