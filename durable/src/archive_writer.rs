//! Archive rows written as one unlogged batch per partition (namespace, hour, shard).
//!
//! Every delivered entry of an archiving namespace writes one archive row beside its apply, so
//! under load many rows of the same few partitions (the 32 shards of the current hour) are in
//! flight at once. Written as one INSERT each, every row costs the cluster a request and a
//! mutation of a partition other writes are changing at that moment. The writer keeps at most one
//! write per partition in flight: rows that arrive meanwhile wait for it and go together in the
//! next one, an unlogged batch the cluster applies as a single mutation of that partition
//! (atomic and isolated, as a single-partition batch is). A row whose partition is idle goes at
//! once, so at low load no row waits for company.
//!
//! Each caller is answered only when the write holding its row was acknowledged, or failed; so
//! an entry is still acknowledged only once it is in the archive.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use scylla::client::session::Session;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use tokio::sync::{mpsc, oneshot};

use super::{DurableError, cql};

/// Rows the writer holds waiting for their partitions, beyond which it takes no more and callers
/// wait to hand theirs over: rows of callers that gave up (a timed-out delivery, tried again with
/// a new row) cannot pile up behind a slow cluster.
const QUEUED_ROWS: usize = 4096;
/// The longest one write may take before its rows fail (their entries are tried again) and its
/// partition is free for the rows behind it. Below the consumer's apply timeout (10 s by
/// default), and far below the driver's own request timeout (30 s), which would hold the
/// partition's later rows for that long.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// The most rows in one batch.
const BATCH_ROWS: usize = 64;
/// The most entry bytes in one batch, beyond its first row: a batch is one mutation, and a
/// cluster refuses mutations larger than half a commit log segment (16 MiB by default).
const BATCH_BYTES: usize = 1024 * 1024;

/// One archive row: the table's columns and the row's TTL in seconds.
#[derive(Debug)]
pub(super) struct ArchiveRow {
    pub namespace: String,
    pub bucket: i64,
    pub shard: i32,
    pub written_at: i64,
    pub id: String,
    pub entry: Vec<u8>,
    pub ttl: i32,
}

/// The partition key of the archive table.
type Partition = (String, i64, i32);

impl ArchiveRow {
    fn partition(&self) -> Partition {
        (self.namespace.clone(), self.bucket, self.shard)
    }

    /// The bound values of the prepared INSERT, in its column order.
    pub(super) fn values(&self) -> (&str, i64, i32, i64, &str, &[u8], i32) {
        (
            &self.namespace,
            self.bucket,
            self.shard,
            self.written_at,
            &self.id,
            &self.entry,
            self.ttl,
        )
    }
}

/// A row and where its caller waits for the answer.
struct Pending {
    row: ArchiveRow,
    answer: oneshot::Sender<Result<(), String>>,
}

/// The handle the storage writes archive rows through; the writing task ends when it is dropped,
/// after the rows already given to it.
#[derive(Debug)]
pub(super) struct ArchiveWriter {
    rows: mpsc::Sender<Pending>,
}

impl ArchiveWriter {
    /// Starts the writing task on the current runtime. `put` is the archive's prepared INSERT.
    pub(super) fn start(session: Arc<Session>, put: PreparedStatement) -> Self {
        let (rows, incoming) = mpsc::channel(QUEUED_ROWS);
        tokio::spawn(run(session, put, incoming));
        Self { rows }
    }

    /// Writes `row`; returns once the cluster acknowledged the write that held it.
    pub(super) async fn write(&self, row: ArchiveRow) -> Result<(), DurableError> {
        let stopped = || cql("archive write")(&"the archive writer stopped");
        let (answer, answered) = oneshot::channel();
        self.rows
            .send(Pending { row, answer })
            .await
            .map_err(|_| stopped())?;
        match answered.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(cql("archive write")(&reason)),
            Err(_) => Err(stopped()),
        }
    }
}

/// Takes rows until the handle is dropped, and writes them, one write per partition at a time.
async fn run(session: Arc<Session>, put: PreparedStatement, mut incoming: mpsc::Receiver<Pending>) {
    // A partition is here while a write of it is in flight, with the rows that wait for it.
    let mut waiting: HashMap<Partition, VecDeque<Pending>> = HashMap::new();
    // Rows in `waiting`'s queues.
    let mut queued = 0;
    let mut writing = FuturesUnordered::new();
    let mut open = true;
    while open || !writing.is_empty() {
        tokio::select! {
            // Finished writes first: each frees its partition for the rows waiting on it.
            biased;
            Some(partition) = writing.next() => {
                let Some(queue) = waiting.get_mut(&partition) else { continue };
                let before = queue.len();
                let rows = take_batch(queue);
                queued -= before - queue.len();
                if rows.is_empty() {
                    waiting.remove(&partition);
                } else {
                    writing.push(write(&session, &put, partition, rows));
                }
            }
            received = incoming.recv(), if open && queued < QUEUED_ROWS => {
                let Some(pending) = received else {
                    open = false;
                    continue;
                };
                let partition = pending.row.partition();
                match waiting.get_mut(&partition) {
                    Some(queue) => {
                        queue.push_back(pending);
                        queued += 1;
                    }
                    None => {
                        waiting.insert(partition.clone(), VecDeque::new());
                        writing.push(write(&session, &put, partition, vec![pending]));
                    }
                }
            }
        }
    }
}

/// The next batch from a partition's waiting rows: up to [`BATCH_ROWS`] rows and
/// [`BATCH_BYTES`] of entries, and always the first row, whatever its size. Rows whose callers
/// stopped waiting are dropped unwritten: their entries are tried again, with a row of their own.
fn take_batch(queue: &mut VecDeque<Pending>) -> Vec<Pending> {
    let mut rows = Vec::new();
    let mut bytes = 0;
    while let Some(next) = queue.front() {
        if next.answer.is_closed() {
            queue.pop_front();
            continue;
        }
        let size = next.row.entry.len();
        if !rows.is_empty() && (rows.len() == BATCH_ROWS || bytes + size > BATCH_BYTES) {
            break;
        }
        bytes += size;
        rows.extend(queue.pop_front());
    }
    rows
}

/// Writes `rows` of one partition (an INSERT for one row, an unlogged batch for more), answers
/// each row's caller, and returns the partition.
async fn write(
    session: &Session,
    put: &PreparedStatement,
    partition: Partition,
    rows: Vec<Pending>,
) -> Partition {
    let written = async {
        match rows.as_slice() {
            [one] => session.execute_unpaged(put, one.row.values()).await,
            _ => {
                let statements = rows.iter().map(|_| put.clone().into()).collect();
                let batch = Batch::new_with_statements(BatchType::Unlogged, statements);
                let values: Vec<_> = rows.iter().map(|pending| pending.row.values()).collect();
                session.batch(&batch, values).await
            }
        }
    };
    let answer = match tokio::time::timeout(WRITE_TIMEOUT, written).await {
        Ok(written) => written.map(drop).map_err(|error| error.to_string()),
        Err(_) => Err(format!(
            "the cluster did not answer within {WRITE_TIMEOUT:?}"
        )),
    };
    for pending in rows {
        // A caller that stopped waiting (its delivery timed out) needs no answer.
        let _ = pending.answer.send(answer.clone());
    }
    partition
}
