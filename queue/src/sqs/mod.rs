//! The SQS backend: a queue is an SQS queue, its DLQ another SQS queue.
//!
//! Entries travel base64-encoded in the message body (SQS bodies must be text). A delay is passed
//! as DelaySeconds: whole seconds, a second early, at most [`SqsSettings::delay_step`] (SQS allows
//! 900 s), so nothing becomes visible after its deliver-at; the consumer holds the last stretch,
//! and gives a message that is still far back with [`crate::Consume::requeue`], one step at a time (see
//! `queue::delay`). Receiving uses long polling; a received
//! message stays invisible to other consumers for [`SqsSettings::visibility_timeout`], which
//! [`crate::Consume::extend`] pushes back, and becomes visible again if it is not deleted by then.
//!
//! The platform writes to the DLQ itself, with the failure's reason on the entry, so no SQS
//! redrive policy is attached: SQS would move messages without saying why.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sqs::error::SdkError;
use aws_sdk_sqs::operation::send_message::SendMessageError;
use aws_sdk_sqs::types::QueueAttributeName;
use bytes::Bytes;
use tokio::sync::OnceCell;

use super::delay::{SQS_HOLD_LIMIT, sqs_delay};
use super::{
    Backend, DLQ_HEADROOM_BYTES, Delivery, EnqueueError, EnqueueTo, Operation, ProvisionReport,
    QueueError, QueueSpec, Receipt,
};
use crate::entry::{self, Entry};
use wal_runtime::outage::Outage;

mod consume;
mod errors;
mod inspect;
use crate::Consume;
use crate::Inspect;
use crate::Produce;
pub use errors::is_missing_queue;
use errors::{connection_refused, describe, is_invalid_receipt, service_away};

/// SQS's limit on a message (body and attributes), in bytes.
pub const MESSAGE_LIMIT_BYTES: usize = 262_144;
/// The largest encoded entry whose base64 text fits [`MESSAGE_LIMIT_BYTES`].
pub const ENTRY_LIMIT_BYTES: usize = MESSAGE_LIMIT_BYTES / 4 * 3;
/// SQS's longest DelaySeconds.
pub const MAX_DELAY: Duration = super::delay::SQS_MAX_DELAY;
/// SQS's longest long-poll wait.
const MAX_WAIT_SECONDS: u64 = 20;

/// How to reach SQS and how queues on it behave.
#[derive(Debug, Clone)]
pub struct SqsSettings {
    /// An endpoint other than AWS's (ElasticMQ locally); `None` uses AWS with its usual
    /// credential chain.
    pub endpoint: Option<String>,
    pub region: String,
    /// How long a received message stays hidden from other consumers before it is handed out
    /// again, unless deleted or extended.
    pub visibility_timeout: Duration,
    /// How long an enqueue may take before the answer becomes UNKNOWN.
    pub send_timeout: Duration,
    /// How long SQS keeps messages (14 days, its maximum).
    pub retention: Duration,
    /// The longest DelaySeconds a send uses; longer delays are taken in steps this long. SQS's
    /// maximum, 900 s, except in tests that need many steps quickly.
    pub delay_step: Duration,
}

impl SqsSettings {
    /// Settings for a local SQS-compatible endpoint (ElasticMQ), with fixed dummy credentials.
    pub fn local(endpoint: &str) -> Self {
        Self {
            endpoint: Some(endpoint.to_owned()),
            ..Self::aws("us-east-1")
        }
    }

    /// Settings for AWS SQS in `region`.
    pub fn aws(region: &str) -> Self {
        Self {
            endpoint: None,
            region: region.to_owned(),
            visibility_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(5),
            retention: Duration::from_secs(14 * 24 * 3600),
            delay_step: MAX_DELAY,
        }
    }
}

/// The HTTP client of every SQS call: the SDK's own hyper client, on rustls with ring (the
/// platform's one crypto provider; the SDK's default would bring aws-lc-rs beside it). Also for
/// tests and tools that make an SQS client of their own.
pub fn https_client() -> aws_sdk_sqs::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// The SQS client one process shares across all its SQS queues.
#[derive(Debug)]
pub struct SqsBackend {
    settings: SqsSettings,
    client: Client,
}

impl SqsBackend {
    pub async fn new(settings: SqsSettings) -> Arc<Self> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(https_client())
            .region(Region::new(settings.region.clone()));
        if let Some(endpoint) = &settings.endpoint {
            loader = loader
                .endpoint_url(endpoint)
                .credentials_provider(Credentials::new("wal", "wal", None, None, "wal-local"));
        }
        let client = Client::new(&loader.load().await);
        Arc::new(Self { settings, client })
    }

    /// A handle on one queue of a namespace.
    pub fn queue(self: &Arc<Self>, spec: QueueSpec) -> SqsQueue {
        SqsQueue {
            backend: Arc::clone(self),
            spec,
            url: OnceCell::new(),
            dlq_url: OnceCell::new(),
            outage: OnceLock::new(),
        }
    }

    pub fn settings(&self) -> &SqsSettings {
        &self.settings
    }

    pub fn client(&self) -> &Client {
        &self.client
    }
}

/// One SQS queue and its DLQ.
#[derive(Debug)]
pub struct SqsQueue {
    backend: Arc<SqsBackend>,
    spec: QueueSpec,
    url: OnceCell<String>,
    dlq_url: OnceCell<String>,
    /// The receiving side's view of SQS, made on the first receive (a producer's handles
    /// never receive).
    outage: OnceLock<Outage>,
}

fn seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)
}

/// Whether a failed SendMessage certainly stored nothing: the request was never built, SQS
/// refused it with a client error, or the connection it would have gone on was refused (SQS down:
/// nothing was sent). A timeout, a dropped connection or a server error may have come after SQS
/// stored the message.
fn certainly_not_stored(error: &SdkError<SendMessageError, HttpResponse>) -> bool {
    match error {
        SdkError::ConstructionFailure(_) => true,
        SdkError::ServiceError(context) => context.raw().status().is_client_error(),
        SdkError::DispatchFailure(_) => connection_refused(error),
        _ => false,
    }
}

impl SqsQueue {
    fn error(
        &self,
        operation: Operation,
        retryable: bool,
        reason: impl std::fmt::Display,
    ) -> QueueError {
        QueueError::new(Backend::Sqs, &self.spec.name, operation, retryable, reason)
    }

    fn client(&self) -> &Client {
        &self.backend.client
    }

    /// Looks up a queue's URL; `Ok(None)` when it does not exist.
    async fn lookup(&self, name: &str) -> Result<Option<String>, String> {
        match self.client().get_queue_url().queue_name(name).send().await {
            Ok(output) => Ok(output.queue_url().map(str::to_owned)),
            Err(error) if is_missing_queue(&error) => Ok(None),
            Err(error) => Err(describe(&error)),
        }
    }

    async fn url_of(&self, cell: &OnceCell<String>, name: &str) -> Result<String, String> {
        cell.get_or_try_init(|| async {
            self.lookup(name)
                .await?
                .ok_or_else(|| format!("SQS queue '{name}' does not exist; provision it first"))
        })
        .await
        .cloned()
    }

    async fn create(&self, name: &str) -> Result<(), String> {
        let settings = &self.backend.settings;
        self.client()
            .create_queue()
            .queue_name(name)
            .attributes(
                QueueAttributeName::VisibilityTimeout,
                seconds(settings.visibility_timeout).to_string(),
            )
            .attributes(
                QueueAttributeName::MessageRetentionPeriod,
                seconds(settings.retention).to_string(),
            )
            .send()
            .await
            .map(|_| ())
            .map_err(|e| describe(&e))
    }

    async fn send(
        &self,
        name: &str,
        url: Result<String, String>,
        entry: &Entry,
        limit: usize,
    ) -> Result<(), EnqueueError> {
        let to = EnqueueTo {
            backend: Backend::Sqs,
            queue: name,
        };
        // Measured without encoding: the body below is the one encoding.
        let size = prost::Message::encoded_len(entry);
        if size > limit {
            return Err(to.too_large(size, limit));
        }
        let (not_stored, unknown) = (|r| to.not_stored(r), |r| to.unknown(r));
        let url = url.map_err(not_stored)?;
        let wait_micros = entry
            .deliver_at_micros
            .saturating_sub(entry::now_micros())
            .max(0);
        // Never hidden past deliver-at, nor longer than a step.
        let step = self.backend.settings.delay_step.min(MAX_DELAY);
        let delay = sqs_delay(Duration::from_micros(wait_micros.unsigned_abs()), step);
        let request = self
            .client()
            .send_message()
            .queue_url(url)
            .message_body(entry::encode_text(entry))
            .delay_seconds(seconds(delay))
            // One attempt only: after an SDK retry, a 4xx on the second attempt says nothing
            // about whether the first (timed out, or answered 5xx) stored the message, and the
            // answer must not be FALSE then. The caller retries, with the same entry id.
            .customize()
            .config_override(
                aws_sdk_sqs::config::Config::builder().retry_config(RetryConfig::disabled()),
            )
            .send();
        match tokio::time::timeout(self.backend.settings.send_timeout, request).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) if certainly_not_stored(&error) => {
                Err(not_stored(describe(&error)).caused_by(error))
            }
            Ok(Err(error)) => Err(unknown(describe(&error)).caused_by(error)),
            Err(_elapsed) => Err(unknown(format!(
                "no answer within {:?}",
                self.backend.settings.send_timeout
            ))),
        }
    }

    /// The queue URL and receipt handle that `operation` on `delivery` sends.
    async fn receipt<'a>(
        &self,
        delivery: &'a Delivery,
        operation: Operation,
    ) -> Result<(String, &'a str), QueueError> {
        let Receipt::Sqs { handle, .. } = &delivery.receipt else {
            return Err(self.error(operation, false, "not an SQS receipt"));
        };
        let url = self
            .url_of(&self.url, &self.spec.name)
            .await
            .map_err(|e| self.error(operation, false, e))?;
        Ok((url, handle))
    }
}

#[async_trait]
impl Produce for SqsQueue {
    fn spec(&self) -> &QueueSpec {
        &self.spec
    }

    fn backend(&self) -> Backend {
        Backend::Sqs
    }

    fn max_entry_bytes(&self) -> usize {
        ENTRY_LIMIT_BYTES - DLQ_HEADROOM_BYTES
    }

    async fn provision(&self) -> Result<ProvisionReport, QueueError> {
        let mut report = ProvisionReport::default();
        // The DLQ first, so a queue never exists without the place its failures go.
        let names = self.spec.dlq.iter().chain(std::iter::once(&self.spec.name));
        for name in names {
            let existing = self
                .lookup(name)
                .await
                .map_err(|e| self.error(Operation::Provision, true, e))?;
            if existing.is_some() {
                report.existing.push(name.clone());
                continue;
            }
            self.create(name).await.map_err(|e| {
                self.error(
                    Operation::Provision,
                    true,
                    format!("creating '{name}': {e}"),
                )
            })?;
            report.created.push(name.clone());
        }
        Ok(report)
    }

    async fn enqueue(&self, entry: &Entry) -> Result<(), EnqueueError> {
        let url = self.url_of(&self.url, &self.spec.name).await;
        self.send(&self.spec.name, url, entry, self.max_entry_bytes())
            .await
    }
}

impl SqsQueue {
    /// One of the queue's approximate message counts.
    async fn count(&self, attribute: QueueAttributeName) -> Result<Option<u64>, QueueError> {
        let url = self
            .url_of(&self.url, &self.spec.name)
            .await
            .map_err(|e| self.error(Operation::Backlog, false, e))?;
        let attributes = self
            .client()
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(attribute.clone())
            .send()
            .await
            .map_err(|e| self.error(Operation::Backlog, true, describe(&e)))?;
        Ok(attributes
            .attributes()
            .and_then(|a| a.get(&attribute))
            .and_then(|count| count.parse().ok()))
    }
}

#[cfg(test)]
mod tests;
