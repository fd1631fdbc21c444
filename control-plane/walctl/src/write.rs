//! `walctl write`: one WriteToLog from the shell, with the durable answer printed and returned
//! as the exit code.

use std::io::Read as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::{Lifecycle, Target, Trilean, WriteToLogRequest};

use wal_runtime::trace_context;

use crate::output::{self, Format};
use crate::producer::ProducerFlags;
use crate::{Exit, Failure};

#[derive(Debug, Args)]
pub struct Write {
    /// The namespace to write to.
    namespace: String,
    /// The payload as text; or give --file.
    #[arg(conflicts_with = "file", required_unless_present = "file")]
    payload: Option<String>,
    /// Read the payload from a file, or from standard input with -.
    #[arg(short, long)]
    file: Option<PathBuf>,
    #[command(flatten)]
    producer: ProducerFlags,
    /// Deliver no earlier than this after now: 90s, 15m, 2h, 3days.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    delay: Duration,
    /// Spread delivery over a window this wide (0s: the namespace's default).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    jitter: Duration,
    /// The partition key: entries with one key keep their order.
    #[arg(long, default_value = "")]
    key: String,
    /// The entry's id; writing again with the same id is safe after an UNKNOWN answer.
    #[arg(long, default_value = "")]
    idempotency_id: String,
    /// The target kind (cql, cache, kafka, http); the namespace's default when unset.
    #[arg(long, requires = "target_settings")]
    target_kind: Option<String>,
    /// The target's settings as a JSON object.
    #[arg(long, requires = "target_kind")]
    target_settings: Option<String>,
    /// A W3C traceparent (00-<trace id>-<span id>-<flags>) sent with the write: its trace is
    /// the write's, through the producer, the consumer and the target's request.
    #[arg(long)]
    traceparent: Option<String>,
    /// Once stored, wait up to this long (60s at most) for every destination of the namespace
    /// to apply the entry, and print what each did: applied, dead_lettered or pending. Needs
    /// the namespace's durable_storage. The exit code is the write's, as without it.
    #[arg(long, value_parser = humantime::parse_duration)]
    await_destinations: Option<Duration>,
}

pub async fn run(write: Write, format: Format) -> Result<(), Failure> {
    let payload = match (&write.payload, &write.file) {
        (Some(text), _) => text.clone().into_bytes(),
        (None, Some(path)) if path.as_os_str() == "-" => {
            let mut bytes = Vec::new();
            std::io::stdin().read_to_end(&mut bytes).map_err(|e| {
                Failure::usage(format!("reading the payload from standard input: {e}"))
            })?;
            bytes
        }
        (None, Some(path)) => std::fs::read(path).map_err(|e| {
            Failure::usage(format!(
                "cannot read the payload file {}: {e}",
                path.display()
            ))
        })?,
        (None, None) => return Err(Failure::usage("give a payload or --file")),
    };
    let millis = |d: Duration, flag: &str| {
        i64::try_from(d.as_millis()).map_err(|_| Failure::usage(format!("--{flag} is too long")))
    };
    let request = WriteToLogRequest {
        namespace: write.namespace.clone(),
        payload,
        lifecycle: Some(Lifecycle {
            delay_millis: millis(write.delay, "delay")?,
            jitter_millis: millis(write.jitter, "jitter")?,
            original_write_time_micros: 0,
        }),
        target: write.target_kind.map(|kind| Target {
            kind,
            settings_json: write.target_settings.unwrap_or_default(),
        }),
        idempotency_id: write.idempotency_id,
        key: write.key,
        await_destinations_millis: write
            .await_destinations
            .map(|d| u32::try_from(d.as_millis()).unwrap_or(u32::MAX))
            .unwrap_or(0),
    };
    let mut request = tonic::Request::new(request);
    if let Some(traceparent) = &write.traceparent {
        let carrier =
            trace_context::Carrier::from([("traceparent".to_owned(), traceparent.clone())]);
        let value = trace_context::trace_id(&carrier)
            .and_then(|_| traceparent.parse().ok())
            .ok_or_else(|| {
                Failure::usage(format!(
                    "--traceparent {traceparent:?} is not a W3C traceparent; expected 00-<32 lowercase hex, not all zero>-<16 lowercase hex>-<2 hex>"
                ))
            })?;
        request.metadata_mut().insert("traceparent", value);
    }
    let mut client = WriteAheadLogClient::new(write.producer.connect().await?);
    let response = client
        .write_to_log(request)
        .await
        .map_err(|s| write.producer.refused(&s, "write refused"))?
        .into_inner();
    let durable = response.durable();
    let word = durable_word(durable);
    let destinations: Vec<(String, &'static str)> = response
        .destinations
        .iter()
        .map(|d| (d.destination.clone(), destination_word(d.state())))
        .collect();
    match format {
        Format::Json => output::print_json(&json!({
            "namespace": write.namespace,
            "durable": word,
            "entry_id": response.entry_id,
            "message": response.message,
            "destinations": destinations
                .iter()
                .map(|(name, state)| json!({"destination": name, "state": state}))
                .collect::<Vec<_>>(),
        })),
        Format::Table => {
            if response.message.is_empty() {
                println!("{word} entry {}", response.entry_id);
            } else {
                println!("{word} entry {}: {}", response.entry_id, response.message);
            }
            for (name, state) in &destinations {
                println!("  {name}: {state}");
            }
        }
    }
    exit_for(durable)
}

/// A destination's state as printed.
fn destination_word(state: wal_proto::v1::DestinationState) -> &'static str {
    use wal_proto::v1::DestinationState;
    match state {
        DestinationState::Applied => "applied",
        DestinationState::DeadLettered => "dead_lettered",
        _ => "pending",
    }
}

/// The durable answer as printed.
pub fn durable_word(durable: Trilean) -> &'static str {
    match durable {
        Trilean::True => "TRUE",
        Trilean::False => "FALSE",
        _ => "UNKNOWN",
    }
}

/// How walctl exits on a durable answer: 0 TRUE, 5 FALSE (retry freely), 6 UNKNOWN (retry with
/// the same id).
pub fn exit_for(durable: Trilean) -> Result<(), Failure> {
    match durable {
        Trilean::True => Ok(()),
        Trilean::False => Err(Failure::quiet(Exit::NotStored)),
        _ => Err(Failure::quiet(Exit::Unknown)),
    }
}
