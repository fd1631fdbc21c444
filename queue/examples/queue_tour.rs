//! A tour of the queue layer on the local stack: for each backend, provision a namespace's queue
//! and DLQ, enqueue an entry, receive it, acknowledge it, and print what happened and how long
//! each step took (`cargo run -p wal-queue --example queue_tour`); the addresses come from
//! `scripts/stack env`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use wal_queue::entry::{self, Body, Entry};
use wal_queue::kafka::{KafkaBackend, KafkaSettings};
use wal_queue::sqs::{SqsBackend, SqsSettings};
use wal_queue::{Queue, QueueSpec};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let kafka = std::env::var("WAL_KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:19092".into());
    let sqs = std::env::var("WAL_SQS_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:19324".into());
    let spec = QueueSpec::new("tour", "wal-tour", "wal-tour-dlq");

    let kafka_queue = KafkaBackend::new(KafkaSettings::new(&kafka))?.queue(spec.clone());
    tour(Arc::new(kafka_queue), &kafka).await?;
    let sqs_queue = SqsBackend::new(SqsSettings::local(&sqs)).await.queue(spec);
    tour(Arc::new(sqs_queue), &sqs).await
}

async fn tour(queue: Arc<dyn Queue>, address: &str) -> anyhow::Result<()> {
    println!("\n{} at {address}", queue.backend());
    let started = Instant::now();
    let report = queue.provision().await.context("provision")?;
    println!(
        "  provision  created {:?} existing {:?} ({:?})",
        report.created,
        report.existing,
        started.elapsed()
    );

    let sent = sample_entry();
    let started = Instant::now();
    queue.enqueue(&sent).await.context("enqueue")?;
    println!(
        "  enqueue    entry {} durable ({:?})",
        sent.id,
        started.elapsed()
    );

    let started = Instant::now();
    let deadline = started + Duration::from_secs(30);
    while Instant::now() < deadline {
        for delivery in queue.receive(10, Duration::from_secs(1)).await? {
            let is_ours = delivery.entry.as_ref().is_ok_and(|e| e.id == sent.id);
            // Earlier tours' entries are acknowledged too, so every run starts clean.
            queue.acknowledge(&delivery).await.context("acknowledge")?;
            if is_ours {
                println!(
                    "  receive    entry {} back, acknowledged ({:?})",
                    sent.id,
                    started.elapsed()
                );
                queue.close().await?;
                return Ok(());
            }
        }
    }
    bail!("entry {} did not come back within 30 s", sent.id)
}

fn sample_entry() -> Entry {
    let now = entry::now_micros();
    Entry {
        version: entry::ENTRY_VERSION,
        id: entry::new_entry_id(),
        namespace: "tour".into(),
        body: Some(Body::Payload(b"hello, write-ahead log".to_vec())),
        original_write_time_micros: now,
        deliver_at_micros: now,
        enqueued_at_micros: now,
        ..Entry::default()
    }
}
