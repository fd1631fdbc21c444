//! Receipts: what each destination did with an entry whose write asked to hear it
//! (`Entry::receipts`). A destination's reader records one row per entry once it applied it or
//! dead-lettered it; the producer that took the write reads them while the caller waits. Rows
//! expire after [`RECEIPT_TTL`].

use scylla::statement::prepared::PreparedStatement;
use scylla::value::CqlTimestamp;

use super::{DurableError, DurableStorage, cql};

/// How long a receipt is kept: long enough to look one up after an incident.
pub const RECEIPT_TTL: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// What a destination did with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Applied,
    DeadLettered,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::DeadLettered => "dead_lettered",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [Self::Applied, Self::DeadLettered]
            .into_iter()
            .find(|o| o.name() == name)
    }
}

/// Each destination of `names` with what its receipt in `receipts` says, or pending: the
/// answer a write awaiting its destinations gets, and what a cancel reads.
pub fn destination_outcomes(
    names: impl IntoIterator<Item = String>,
    receipts: &[Receipt],
) -> Vec<wal_proto::v1::DestinationOutcome> {
    use wal_proto::v1::DestinationState;
    let outcome = |destination: String| {
        let state = match receipts.iter().find(|r| r.destination == destination) {
            Some(r) if r.outcome == Outcome::Applied => DestinationState::Applied,
            Some(_) => DestinationState::DeadLettered,
            None => DestinationState::Pending,
        };
        wal_proto::v1::DestinationOutcome {
            destination,
            state: state.into(),
        }
    };
    names.into_iter().map(outcome).collect()
}

/// One destination's receipt for an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub destination: String,
    pub outcome: Outcome,
    /// When it was recorded, in milliseconds since the Unix epoch.
    pub at_millis: i64,
}

pub(super) fn schema(keyspace: &str) -> [String; 1] {
    [format!(
        "CREATE TABLE IF NOT EXISTS {keyspace}.receipts (\
         namespace text, entry_id text, destination text, outcome text, at timestamp, \
         PRIMARY KEY ((namespace, entry_id), destination)) \
         WITH default_time_to_live = {}",
        RECEIPT_TTL.as_secs()
    )]
}

#[derive(Debug)]
pub(super) struct ReceiptStatements {
    put: PreparedStatement,
    get: PreparedStatement,
}

impl ReceiptStatements {
    pub(super) async fn prepare(
        session: &scylla::client::session::Session,
        keyspace: &str,
    ) -> Result<Self, DurableError> {
        Ok(Self {
            put: super::prepare(
                session,
                format!(
                    "INSERT INTO {keyspace}.receipts (namespace, entry_id, destination, outcome, at) \
                     VALUES (?, ?, ?, ?, ?)"
                ),
            )
            .await?,
            get: super::prepare(
                session,
                format!(
                    "SELECT destination, outcome, at FROM {keyspace}.receipts \
                     WHERE namespace = ? AND entry_id = ?"
                ),
            )
            .await?,
        })
    }
}

impl DurableStorage {
    /// Records what `destination` did with entry `entry_id` of `namespace`.
    pub async fn record_receipt(
        &self,
        namespace: &str,
        entry_id: &str,
        destination: &str,
        outcome: Outcome,
    ) -> Result<(), DurableError> {
        let at = CqlTimestamp(wal_queue::entry::now_micros() / 1000);
        self.session
            .execute_unpaged(
                &self.receipts.put,
                (namespace, entry_id, destination, outcome.name(), at),
            )
            .await
            .map_err(|e| cql("record a receipt")(&e))?;
        Ok(())
    }

    /// The receipts recorded for entry `entry_id` of `namespace`, by destination name.
    pub async fn receipts(
        &self,
        namespace: &str,
        entry_id: &str,
    ) -> Result<Vec<Receipt>, DurableError> {
        let rows = self
            .session
            .execute_unpaged(&self.receipts.get, (namespace, entry_id))
            .await
            .map_err(|e| cql("read receipts")(&e))?
            .into_rows_result()
            .map_err(|e| cql("read receipts")(&e))?;
        let mut receipts = Vec::new();
        for row in rows
            .rows::<(String, Option<String>, Option<CqlTimestamp>)>()
            .map_err(|e| cql("read receipts")(&e))?
        {
            let (destination, outcome, at) = row.map_err(|e| cql("read receipts")(&e))?;
            // A row of an outcome this build does not know is left out, not misread.
            if let Some(outcome) = outcome.as_deref().and_then(Outcome::from_name) {
                receipts.push(Receipt {
                    destination,
                    outcome,
                    at_millis: at.map_or(0, |at| at.0),
                });
            }
        }
        Ok(receipts)
    }
}
