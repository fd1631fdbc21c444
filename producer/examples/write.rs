//! Sends one WriteToLog and prints the durable answer: the smallest client, built with the
//! producer. Operators have `walctl write` (control-plane/), with more options.
//!
//!     cargo run -p wal-producer --example write -- NAMESPACE PAYLOAD [--delay-ms N] [--key K]
//!         [--id ID] [--target-kind KIND --target-settings JSON] [--addr http://127.0.0.1:50051]
//!
//! Exit code: 0 for TRUE, 1 for FALSE or UNKNOWN, 2 when the request was refused.

use std::process::ExitCode;

use clap::Parser;
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::{Lifecycle, Target, Trilean, WriteToLogRequest};

#[derive(Debug, Parser)]
struct Args {
    namespace: String,
    payload: String,
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    addr: String,
    #[arg(long, default_value_t = 0)]
    delay_ms: i64,
    #[arg(long, default_value = "")]
    key: String,
    #[arg(long, default_value = "")]
    id: String,
    #[arg(long)]
    target_kind: Option<String>,
    #[arg(long, default_value = "{}")]
    target_settings: String,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let mut client = match WriteAheadLogClient::connect(args.addr.clone()).await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("cannot reach the producer at {}: {error}", args.addr);
            return ExitCode::from(2);
        }
    };
    let request = WriteToLogRequest {
        namespace: args.namespace.clone(),
        payload: args.payload.into_bytes(),
        lifecycle: Some(Lifecycle {
            delay_millis: args.delay_ms,
            ..Lifecycle::default()
        }),
        target: args.target_kind.map(|kind| Target {
            kind,
            settings_json: args.target_settings,
        }),
        idempotency_id: args.id,
        key: args.key,
        ..WriteToLogRequest::default()
    };
    match client.write_to_log(request).await {
        Ok(response) => {
            let response = response.into_inner();
            let durable = response.durable();
            println!(
                "{:<20} {:?} entry {} {}",
                args.namespace, durable, response.entry_id, response.message
            );
            if durable == Trilean::True {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(status) => {
            println!(
                "{:<20} refused: {:?}: {}",
                args.namespace,
                status.code(),
                status.message()
            );
            ExitCode::from(2)
        }
    }
}
