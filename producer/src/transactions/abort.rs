//! An abort: an open transaction moves to `aborted` and its staged items are dropped. One that
//! is committing or further is refused: its marker may be on the queue already.

use tonic::Status;
use wal_durable::{Abort, DurableStorage};

use super::TransactionService;
use super::checks::{refused, unavailable};
use crate::registry::NamespaceRuntime;

impl TransactionService {
    pub(super) async fn abort(
        &self,
        runtime: &NamespaceRuntime,
        durable: &DurableStorage,
        id: &str,
    ) -> Result<(), Status> {
        match durable
            .abort(&runtime.config, id, None)
            .await
            .map_err(unavailable)?
        {
            Abort::Committed(state) => Err(refused(&runtime.config, id, state)),
            Abort::Aborted | Abort::Recorded | Abort::Ended(_) | Abort::Gone => Ok(()),
        }
    }
}
