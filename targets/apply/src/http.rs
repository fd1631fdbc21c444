//! The http target: POSTs the payload to an upstream service.
//!
//! Settings: `{"url": "https://service/hook", "headers": {"x-team": "pds"}}` (headers optional).
//! The request carries `Idempotency-Key: <entry id>`, so an upstream that remembers keys applies
//! a repeated delivery once, plus `X-WAL-Namespace`, `X-WAL-Attempt`,
//! `X-WAL-Original-Write-Time-Micros`, `X-WAL-Deliver-At-Micros` (when the entry was due: its
//! write time plus delay and jitter) and the `traceparent`.
//!
//! 2xx is success. 502, 503, 504 and connection failures make the upstream unavailable: its
//! entries are held in place (see `breaker`). 429 too, for as long as its `Retry-After` asks
//! (delta-seconds or an HTTP date; without one, the breaker's own back-off): a throttling
//! upstream is in a state of its own, not failing the entry, so no attempt is spent and nothing
//! reaches the DLQ for it. Other 5xx, 408 and timeouts are retryable; any other status is
//! permanent (the upstream rejected the request and will again).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use wal_targets::http::HttpSettings;

use super::{Mutation, Target, TargetError, TargetKind};
use crate::clients::Clients;

/// How much of an error response's body is kept in the failure reason.
const MAX_BODY_IN_REASON: usize = 256;

#[derive(Debug)]
pub struct Http;

impl TargetKind for Http {
    type Settings = HttpSettings;

    /// The URL's origin (scheme, host and port): an upstream down is down for every path.
    fn endpoint(settings: &HttpSettings, _clients: &Clients) -> String {
        settings.origin()
    }

    /// The settings were checked when they were parsed (`wal_targets`); what fails here is
    /// refused the same way.
    async fn build(
        settings: HttpSettings,
        clients: Arc<Clients>,
    ) -> Result<Arc<dyn Target>, TargetError> {
        let invalid = |e: &dyn std::fmt::Display| {
            TargetError::permanent(format!("http target settings: {e}"))
        };
        let url = settings.parsed_url().map_err(|e| invalid(&e.reason))?;
        let mut headers = HeaderMap::new();
        for (name, value) in &settings.headers {
            let name = HeaderName::try_from(name.as_str()).map_err(|e| invalid(&e))?;
            let value = HeaderValue::try_from(value.as_str()).map_err(|e| invalid(&e))?;
            headers.insert(name, value);
        }
        Ok(Arc::new(HttpTarget {
            client: clients.http().clone(),
            url,
            headers,
        }))
    }
}

#[derive(Debug)]
pub struct HttpTarget {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
}

#[async_trait]
impl Target for HttpTarget {
    async fn apply(&self, mutation: Mutation<'_>) -> Result<(), TargetError> {
        let entry = mutation.entry;
        let mut request = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header("content-type", "application/octet-stream")
            .header("idempotency-key", &entry.id)
            .header("x-wal-namespace", &entry.namespace)
            .header("x-wal-attempt", entry.attempt.to_string())
            .header(
                "x-wal-original-write-time-micros",
                entry.original_write_time_micros.to_string(),
            )
            .header(
                "x-wal-deliver-at-micros",
                entry.deliver_at_micros.to_string(),
            )
            .body(mutation.payload.to_vec());
        for (name, value) in mutation.trace.into_iter().flatten() {
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(|e| {
            let reason = format!("POST {}", self.url);
            // A request that could not be built (a header the entry made invalid) will not
            // build next time either.
            let failure = if e.is_builder() {
                TargetError::permanent(reason)
            } else if e.is_connect() {
                TargetError::unavailable(reason)
            } else {
                TargetError::retryable(reason)
            };
            failure.caused_by(e)
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| retry_after(value, SystemTime::now()));
        let body = first_bytes(response, MAX_BODY_IN_REASON).await;
        let reason = format!("POST {} answered {status}: {body}", self.url);
        if status == StatusCode::TOO_MANY_REQUESTS {
            match retry_after {
                Some(wait) => Err(TargetError::Throttled { reason, wait }),
                None => Err(TargetError::unavailable(reason)),
            }
        } else if unavailable(status) {
            Err(TargetError::unavailable(reason))
        } else if retryable(status) {
            Err(TargetError::retryable(reason))
        } else {
            Err(TargetError::permanent(reason))
        }
    }
}

/// The start of an error response's body, for the failure reason; the rest is not read.
async fn first_bytes(mut response: reqwest::Response, max: usize) -> String {
    let mut body = Vec::new();
    while body.len() < max {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(max - body.len())]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The upstream, or the gateway before it, cannot serve anyone now.
fn unavailable(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
    )
}

fn retryable(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT
}

/// How long a `Retry-After` value asks to wait from `now`: delta-seconds or an HTTP date (RFC
/// 9110, 10.2.3). None for a value that is neither; a date already past asks for no wait.
fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = httpdate::parse_http_date("Sat, 28 Nov 2026 08:00:00 GMT").unwrap();
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            retry_after("Sat, 28 Nov 2026 08:00:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        // A date already past: try again now.
        assert_eq!(
            retry_after("Sat, 28 Nov 2026 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon", now), None);
        assert_eq!(retry_after("-5", now), None);
    }
}
