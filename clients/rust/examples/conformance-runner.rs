//! The Rust client's conformance runner: reads a plan on standard input, makes its calls through
//! the library's public API, and prints one result line per call (clients/conformance/README.md).
//! It checks nothing; the orchestrator does.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;
use wal_client::{Client, Error, Item, Outcome, Settings, Tls, Write, Written};

#[derive(Deserialize)]
struct Plan {
    producers: Vec<String>,
    #[serde(default)]
    tls: Option<PlannedTls>,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
struct PlannedTls {
    ca: std::path::PathBuf,
    certificate: std::path::PathBuf,
    key: std::path::PathBuf,
    domain: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Step {
    Write {
        namespace: String,
        concurrent: bool,
        batch: bool,
        deadline_millis: u64,
        #[serde(default)]
        pace_millis: u64,
        writes: Vec<PlannedWrite>,
    },
    Transaction {
        namespace: String,
        transaction_id: String,
        chunk: usize,
        deadline_millis: u64,
        items: Vec<PlannedItem>,
    },
    Commit {
        namespace: String,
        transaction_id: String,
        item_count: u64,
        deadline_millis: u64,
    },
    Abort {
        namespace: String,
        transaction_id: String,
        deadline_millis: u64,
    },
}

#[derive(Deserialize)]
struct PlannedWrite {
    #[serde(default)]
    key: String,
    payload: String,
    #[serde(default)]
    idempotency_id: String,
    #[serde(default)]
    delay_millis: i64,
    /// The write waits this long for its destinations (0: not).
    #[serde(default)]
    await_destinations_millis: u64,
}

#[derive(Deserialize)]
struct PlannedItem {
    payload: String,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), String> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| format!("reading the plan: {e}"))?;
    let plan: Plan = serde_json::from_str(&text).map_err(|e| format!("the plan: {e}"))?;
    let mut settings = Settings::new(plan.producers);
    settings.tls = plan.tls.map(|tls| Tls {
        ca: tls.ca,
        certificate: tls.certificate,
        key: tls.key,
        domain: tls.domain,
    });
    let client = Client::new(settings).map_err(|e| e.to_string())?;
    for (step, planned) in plan.steps.into_iter().enumerate() {
        run(&client, step, planned).await?;
    }
    Ok(())
}

async fn run(client: &Client, step: usize, planned: Step) -> Result<(), String> {
    match planned {
        Step::Write {
            namespace,
            concurrent,
            batch,
            deadline_millis,
            pace_millis,
            writes,
        } => {
            let writes: Vec<Write> = writes
                .into_iter()
                .map(|w| write_of(&namespace, w, deadline_millis))
                .collect::<Result<_, _>>()?;
            if concurrent {
                let calls = writes
                    .into_iter()
                    .enumerate()
                    .map(|(index, write)| async move {
                        let started = Instant::now();
                        let result = if batch {
                            client.write(write).await
                        } else {
                            client.write_unbatched(write).await
                        };
                        report(step, index, started, result);
                    });
                futures_join_all(calls).await;
            } else {
                for (index, write) in writes.into_iter().enumerate() {
                    if index > 0 {
                        tokio::time::sleep(Duration::from_millis(pace_millis)).await;
                    }
                    let started = Instant::now();
                    let result = if batch {
                        client.write(write).await
                    } else {
                        client.write_unbatched(write).await
                    };
                    report(step, index, started, result);
                }
            }
        }
        Step::Transaction {
            namespace,
            transaction_id,
            chunk,
            deadline_millis,
            items,
        } => {
            let items = items.into_iter().map(|i| Item::new(i.payload)).collect();
            let chunked = client.clone().with_chunk(chunk);
            let started = Instant::now();
            let result = chunked
                .transaction(
                    &namespace,
                    &transaction_id,
                    items,
                    Some(Duration::from_millis(deadline_millis)),
                )
                .await;
            report(step, 0, started, result);
        }
        Step::Commit {
            namespace,
            transaction_id,
            item_count,
            deadline_millis,
        } => {
            let started = Instant::now();
            let result = client
                .commit(
                    &namespace,
                    &transaction_id,
                    item_count,
                    Some(Duration::from_millis(deadline_millis)),
                )
                .await;
            report(step, 0, started, result);
        }
        Step::Abort {
            namespace,
            transaction_id,
            deadline_millis,
        } => {
            let started = Instant::now();
            let result = client
                .abort(
                    &namespace,
                    &transaction_id,
                    Some(Duration::from_millis(deadline_millis)),
                )
                .await;
            print_line(match result {
                Ok(()) => json!({"step": step, "index": 0, "outcome": "OK", "attempts": 1,
                                 "elapsed_millis": started.elapsed().as_millis() as u64}),
                Err(error) => refused(step, 0, started, &error),
            });
        }
    }
    Ok(())
}

fn write_of(namespace: &str, planned: PlannedWrite, deadline_millis: u64) -> Result<Write, String> {
    let delay = u64::try_from(planned.delay_millis)
        .map_err(|_| format!("delay_millis {} is negative", planned.delay_millis))?;
    let write = Write::new(namespace, planned.payload.into_bytes())
        .key(planned.key)
        .idempotency_id(planned.idempotency_id)
        .delay(Duration::from_millis(delay))
        .deadline(Duration::from_millis(deadline_millis));
    Ok(match planned.await_destinations_millis {
        0 => write,
        wait => write.await_destinations(Duration::from_millis(wait)),
    })
}

async fn futures_join_all<F: std::future::Future<Output = ()>>(calls: impl Iterator<Item = F>) {
    let handles: Vec<_> = calls.collect();
    let mut pinned: Vec<_> = handles.into_iter().map(Box::pin).collect();
    // Polled together, in order: every write is made before any is awaited.
    std::future::poll_fn(|cx| {
        pinned.retain_mut(|call| call.as_mut().poll(cx).is_pending());
        if pinned.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
}

fn report(step: usize, index: usize, started: Instant, result: Result<Written, Error>) {
    let elapsed = started.elapsed().as_millis() as u64;
    print_line(match result {
        Ok(written) => json!({
            "destinations": written.destinations.iter().map(|(name, applied)| {
                let state = match applied {
                    wal_client::Applied::Applied => "applied",
                    wal_client::Applied::DeadLettered => "dead_lettered",
                    wal_client::Applied::Pending => "pending",
                };
                (name.clone(), json!(state))
            }).collect::<serde_json::Map<_, _>>(),
            "step": step, "index": index,
            "outcome": match written.outcome {
                Outcome::True => "TRUE",
                Outcome::False => "FALSE",
                Outcome::Unknown => "UNKNOWN",
            },
            "entry_id": written.entry_id, "attempts": written.attempts,
            "elapsed_millis": elapsed, "message": written.message,
        }),
        Err(error) => refused(step, index, started, &error),
    });
}

fn refused(step: usize, index: usize, started: Instant, error: &Error) -> serde_json::Value {
    let elapsed = started.elapsed().as_millis() as u64;
    match error {
        Error::Refused {
            code,
            field,
            message,
            attempts,
        } => json!({
            "step": step, "index": index, "outcome": "REFUSED",
            "code": code_name(*code), "field": field, "attempts": attempts,
            "elapsed_millis": elapsed, "message": message,
        }),
        other => json!({
            "step": step, "index": index, "outcome": "ERROR", "message": other.to_string(),
            "elapsed_millis": elapsed,
        }),
    }
}

/// The gRPC code's canonical name, as the protocol writes it.
fn code_name(code: wal_client::Code) -> String {
    let words = format!("{code:?}");
    let mut name = String::new();
    for (i, c) in words.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

fn print_line(line: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
