//! Expiry of abandoned two-phase writes. A transaction opened and never committed or aborted
//! would otherwise just vanish with its TTL, uncounted. Every namespace with durable storage has
//! an index of open transactions by the minute they opened; this sweep looks at each minute once
//! it and the namespace's transaction lifetime are past, moves what is still open to `expired`
//! (a compare-and-set: of several producers sweeping, one counts each) and counts it in
//! `wal_transactions_expired_total`. A transaction is counted at most a lifetime plus two
//! minutes after it opened.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use wal_durable::{OPEN_BUCKET_MICROS, open_bucket, staging_keep, transaction_lifetime};
use wal_queue::entry::now_micros;

use crate::live::LiveRegistry;
use crate::metrics;

/// How often the sweep runs.
const EVERY: Duration = Duration::from_secs(30);
/// How far back a producer that just started looks: buckets older than this were swept by the
/// producers before it, or their transactions are past their TTL.
const LOOK_BACK_BUCKETS: i64 = 120;

/// Sweeps every namespace with durable storage, every [`EVERY`], while the task lives.
pub async fn sweep(live: Arc<LiveRegistry>) {
    // Per namespace: the first bucket not swept yet.
    let mut next: HashMap<String, i64> = HashMap::new();
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tick.tick().await;
        let registry = live.current();
        for name in registry.names() {
            let Some(runtime) = registry.get(&name) else {
                continue;
            };
            let Some(durable) = &runtime.durable else {
                continue;
            };
            let namespace = &runtime.config;
            let lifetime = transaction_lifetime(namespace).as_micros() as i64;
            // The last bucket whose every transaction is past its lifetime.
            let last = open_bucket(now_micros() - lifetime - OPEN_BUCKET_MICROS);
            let first = *next.entry(name.clone()).or_insert(last - LOOK_BACK_BUCKETS);
            let keep = staging_keep(namespace);
            for bucket in first..=last {
                match durable.expire_bucket(&name, bucket, keep).await {
                    Ok(0) => {}
                    Ok(expired) => {
                        tracing::info!(namespace = %name, expired, "abandoned transactions expired");
                        metrics::transactions_expired(&name, expired);
                    }
                    Err(error) => {
                        // Tried again on the next sweep, from this bucket.
                        tracing::warn!(namespace = %name, %error, "sweeping expired transactions failed");
                        next.insert(name.clone(), bucket);
                        break;
                    }
                }
                next.insert(name.clone(), bucket + 1);
            }
        }
    }
}
