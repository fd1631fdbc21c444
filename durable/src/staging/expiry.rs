//! The index of open transactions by the minute they opened, which the producer's expiry
//! sweep reads to find the abandoned ones.

use super::{OPEN_BUCKET_MICROS, Txn, TxnState, ids};
use crate::{DurableError, DurableStorage};

/// The open-transactions index bucket of a transaction opened at `micros`.
pub fn open_bucket(micros: i64) -> i64 {
    micros.div_euclid(OPEN_BUCKET_MICROS)
}

impl DurableStorage {
    /// Drops the transaction from the open-transactions index (committed or aborted).
    pub async fn unindex_open(
        &self,
        namespace: &str,
        id: &str,
        txn: &Txn,
    ) -> Result<(), DurableError> {
        self.run(
            &self.staging.unindex_open,
            (namespace, open_bucket(txn.opened_at_micros), id),
            "transaction index",
        )
        .await?;
        Ok(())
    }

    /// The ids of the transactions opened in `bucket` and still indexed.
    pub async fn opened_in(
        &self,
        namespace: &str,
        bucket: i64,
    ) -> Result<Vec<String>, DurableError> {
        let result = self
            .run(
                &self.staging.opened_in,
                (namespace, bucket),
                "transaction index",
            )
            .await?;
        ids(result, "transaction index")
    }

    /// Expires the transactions opened in `bucket` that are still open: each moved to
    /// `expired` (a compare-and-set, so of several sweepers one counts it) and dropped from the
    /// index. Returns how many this call expired.
    pub async fn expire_bucket(
        &self,
        namespace: &str,
        bucket: i64,
        keep: std::time::Duration,
    ) -> Result<u64, DurableError> {
        let mut expired = 0;
        for id in self.opened_in(namespace, bucket).await? {
            // No row: its open failed after indexing it, or it outlived its TTL.
            let txn = self.transaction(namespace, &id).await?;
            if let Some(txn) = txn
                && txn.state == TxnState::Open
                && self
                    .move_transaction(
                        namespace,
                        &id,
                        TxnState::Open,
                        TxnState::Expired,
                        Some("not committed within its lifetime"),
                        keep,
                    )
                    .await?
            {
                expired += 1;
            }
            self.run(
                &self.staging.unindex_open,
                (namespace, bucket, &id),
                "transaction index",
            )
            .await?;
        }
        Ok(expired)
    }
}
