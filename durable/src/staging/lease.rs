//! The apply's lease: one apply of a transaction at a time, and its progress recorded under
//! it.

use super::ttl;
use crate::{DurableError, DurableStorage};
use wal_queue::entry::now_micros;

impl DurableStorage {
    /// Records that the items below `applied_through` are applied, and extends `applier`'s
    /// lease to `lease_until_micros`; false when the lease is no longer `applier`'s.
    pub async fn record_progress(
        &self,
        namespace: &str,
        id: &str,
        applier: &str,
        applied_through: u64,
        lease_until_micros: i64,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        self.run_lwt(
            &self.staging.progress,
            (
                ttl(keep),
                applied_through as i64,
                lease_until_micros,
                namespace,
                id,
                applier,
            ),
            "transaction progress",
        )
        .await
    }

    /// Takes the transaction's apply for `applier` until `lease_until_micros`, unless someone
    /// holds an unexpired lease or it is no longer waiting to be applied (applied meanwhile):
    /// one apply at a time, however many markers a transaction has.
    pub async fn claim_apply(
        &self,
        namespace: &str,
        id: &str,
        applier: &str,
        lease_until_micros: i64,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        self.run_lwt(
            &self.staging.claim,
            (
                ttl(keep),
                applier,
                lease_until_micros,
                namespace,
                id,
                now_micros(),
            ),
            "transaction claim",
        )
        .await
    }

    /// Gives the apply's lease back, so the next attempt need not wait for it to run out.
    pub async fn release_apply(
        &self,
        namespace: &str,
        id: &str,
        applier: &str,
        keep: std::time::Duration,
    ) -> Result<(), DurableError> {
        self.run(
            &self.staging.release,
            (ttl(keep), namespace, id, applier),
            "transaction release",
        )
        .await?;
        Ok(())
    }
}
