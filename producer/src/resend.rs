//! Commit markers sent again. A commit records its transaction as `committing` before it sends
//! the marker, and until now only a commit call sent it: a client that gave up after an UNKNOWN,
//! or a producer killed while the broker was away, left the transaction committing for good, its
//! items staged and never applied. Every producer sweeps the transactions left committing (the
//! staging's own listing of them, so the sweep reads only those) and sends the marker again of
//! each committing for longer than twice its write timeout: by then no commit call of its own is
//! still waiting for the broker (another producer's, with a longer write timeout or a clock
//! ahead of this one's, may be). A marker sent twice is harmless: the consumer applies a
//! transaction once and acknowledges the other marker. So a commit answered UNKNOWN ends applied
//! once the broker is back, whether or not the client commits again. Entries of transactions that
//! have moved on are dropped from the listing as the sweep meets them.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use wal_runtime::trace_context::Carrier;

use futures::{StreamExt as _, TryStreamExt as _};
use wal_durable::{DurableError, DurableStorage, Listing, TxnState};
use wal_proto::v1::Trilean;
use wal_queue::entry::now_micros;

use crate::metrics;
use crate::registry::NamespaceRuntime;
use crate::service::WriteService;
use crate::transactions::queue_marker;

/// How often the sweep runs.
const EVERY: Duration = Duration::from_secs(30);
/// The most transactions one sweep reads per namespace; the rest wait for the next.
const MOST_PER_SWEEP: usize = 1000;

/// Sends again the markers of transactions left committing, every [`EVERY`], while the task
/// lives.
pub async fn sweep(writes: WriteService) {
    let grace = writes.write_timeout() * 2;
    // Namespaces whose last sweep failed: their failure is logged once, not every sweep.
    let mut failing: HashSet<String> = HashSet::new();
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tick.tick().await;
        for name in writes.namespaces() {
            let Some(runtime) = writes.runtime(&name) else {
                continue;
            };
            let Some(durable) = runtime.durable.clone() else {
                continue;
            };
            match resend(&writes, &runtime, &durable, grace).await {
                Ok(sent) => {
                    if failing.remove(&name) {
                        tracing::info!(namespace = %name, "the sweep of committing transactions works again");
                    }
                    if sent > 0 {
                        tracing::info!(namespace = %name, sent, "commit markers sent again for transactions left committing");
                    }
                }
                Err(error) => {
                    if failing.insert(name.clone()) {
                        tracing::warn!(namespace = %name, %error, "the sweep of committing transactions failed; it tries again every {}s", EVERY.as_secs());
                    } else {
                        tracing::debug!(namespace = %name, %error, "the sweep of committing transactions failed");
                    }
                }
            }
        }
    }
}

/// Sends the markers of the namespace's transactions committing for longer than `grace`;
/// returns how many the broker acknowledged. Stops at the first marker not acknowledged: the
/// broker is away or the namespace is shedding load, and the next sweep tries again.
async fn resend(
    writes: &WriteService,
    runtime: &NamespaceRuntime,
    durable: &Arc<DurableStorage>,
    grace: Duration,
) -> Result<u64, Failed> {
    let name = &runtime.config.name;
    let entries: Vec<(String, i64)> = durable
        .listed_since(name, Listing::Committing)
        .await?
        .take(MOST_PER_SWEEP)
        .try_collect()
        .await?;
    let mut sent = 0;
    for (id, since) in entries {
        let txn = durable.transaction(name, &id).await?;
        let txn = match txn {
            Some(txn) if txn.state == TxnState::Committing => txn,
            // A commit under way indexes the transaction before it moves it: leave it be.
            Some(txn) if txn.state == TxnState::Open => continue,
            // So does a transaction written in one call, before its row exists.
            None if now_micros().saturating_sub(since) < grace.as_micros() as i64 => continue,
            // Moved on, or its staging gone: the entry is stale, and would take a place in
            // every later sweep's first MOST_PER_SWEEP.
            _ => {
                durable.unindex(name, Listing::Committing, &id).await?;
                continue;
            }
        };
        let (Some(count), Some(committed)) = (txn.item_count, txn.committed_at_micros) else {
            continue;
        };
        if now_micros().saturating_sub(committed) < grace.as_micros() as i64 {
            continue;
        }
        let answer = queue_marker(writes, runtime, durable, &id, count, &txn, Carrier::new())
            .await
            .map_err(|status| Failed::Marker(status.message().to_owned()))?;
        if answer.durable() != Trilean::True {
            return Err(Failed::Marker(answer.message));
        }
        metrics::transaction_marker_resent(name);
        sent += 1;
    }
    Ok(sent)
}

#[derive(Debug, thiserror::Error)]
enum Failed {
    #[error("reading the staging: {0}")]
    Staging(#[from] DurableError),
    #[error("a marker was not acknowledged: {0}")]
    Marker(String),
}
