//! The staged items: written all or none per call, read back by sequence, a page at a time.

use super::{ItemRow, StagedItem, item, lwt_applied, ttl};
use crate::{DurableError, DurableStorage, cql};
use futures::TryStreamExt as _;
use scylla::statement::batch::{Batch, BatchType};

impl DurableStorage {
    /// How many items of the transaction are staged.
    pub async fn staged_count(&self, namespace: &str, id: &str) -> Result<u64, DurableError> {
        let rows = self
            .run(
                &self.staging.count_items,
                (namespace, id),
                "transaction items count",
            )
            .await?
            .into_rows_result()
            .map_err(|e| cql("transaction items count")(&e))?;
        let (count,) = rows
            .first_row::<(i64,)>()
            .map_err(|e| cql("transaction items count")(&e))?;
        Ok(count.max(0) as u64)
    }

    /// The staged items among `sequences`.
    pub async fn staged_items(
        &self,
        namespace: &str,
        id: &str,
        sequences: &[u64],
    ) -> Result<Vec<StagedItem>, DurableError> {
        let mut found = Vec::new();
        // ScyllaDB takes at most 100 clustering keys in one IN by default.
        for chunk in sequences.chunks(100) {
            let chunk: Vec<i64> = chunk.iter().map(|s| *s as i64).collect();
            let rows = self
                .run(
                    &self.staging.items_in,
                    (namespace, id, chunk),
                    "transaction items read",
                )
                .await?
                .into_rows_result()
                .map_err(|e| cql("transaction items read")(&e))?;
            for row in rows
                .rows::<ItemRow>()
                .map_err(|e| cql("transaction items read")(&e))?
            {
                found.push(item(row.map_err(|e| cql("transaction items read")(&e))?));
            }
        }
        Ok(found)
    }

    /// Stages `items` in one conditional batch: all of them, or none when any of their
    /// sequences was staged meanwhile (false; read them again and compare). They share a
    /// partition, so the batch is one lightweight transaction however many items it holds.
    pub async fn stage_items(
        &self,
        namespace: &str,
        id: &str,
        items: &[StagedItem],
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        if items.is_empty() {
            return Ok(true);
        }
        let mut batch = Batch::new(BatchType::Unlogged);
        let mut values = Vec::with_capacity(items.len());
        for staged in items {
            batch.append_statement(self.staging.put_item.clone());
            values.push((
                namespace,
                id,
                staged.sequence as i64,
                staged.target_kind.as_str(),
                staged.target_settings.as_str(),
                staged.payload.as_slice(),
                ttl(keep),
            ));
        }
        let result = self
            .session
            .batch(&batch, values)
            .await
            .map_err(|e| cql("transaction items write")(&e))?;
        lwt_applied(result)
    }

    /// The staged items from `from` on, in sequence order, a page at a time.
    pub async fn items_from(
        &self,
        namespace: &str,
        id: &str,
        from: u64,
    ) -> Result<impl futures::Stream<Item = Result<StagedItem, DurableError>> + Send, DurableError>
    {
        let pager = self
            .session
            .execute_iter(
                self.staging.items_from.clone(),
                (namespace.to_owned(), id.to_owned(), from as i64),
            )
            .await
            .map_err(|e| cql("transaction items read")(&e))?;
        let rows = pager
            .rows_stream::<ItemRow>()
            .map_err(|e| cql("transaction items read")(&e))?;
        Ok(rows
            .map_ok(item)
            .map_err(|e| cql("transaction items read")(&e)))
    }

    /// Deletes an aborted transaction's items.
    pub async fn drop_items(&self, namespace: &str, id: &str) -> Result<(), DurableError> {
        self.run(
            &self.staging.drop_items,
            (namespace, id),
            "transaction items delete",
        )
        .await?;
        Ok(())
    }
}
