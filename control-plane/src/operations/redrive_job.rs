//! A redrive the control plane runs for an operator: the engine of `dlq::redrive`, its progress
//! in the store (the running counts every 2 s, the Kafka positions after every redrive), its end
//! recorded and audited. A control plane shutting down stops it with its progress saved; one
//! that dies leaves it `running` until another control plane takes it over as stale.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Call;
use super::dlq::redrive::{Positions, Progress, RedriveSettings, Report, redrive};
use super::dlq::{DeadLetters, DlqError};
use super::redrives::{RedriveProgress, RedriveRecord, SavedPositions};
use crate::service::now_micros;
use crate::store::NamespaceStore;

/// How often a running redrive reports its counts (and shows it is alive).
const HEARTBEAT: Duration = Duration::from_secs(2);

pub(super) struct Job {
    pub store: NamespaceStore,
    pub record: RedriveRecord,
    pub dead: DeadLetters,
    pub settings: RedriveSettings,
    pub saved: SavedPositions,
    pub stop: CancellationToken,
    /// Its audit record's call (who started it, with what).
    pub call: Call,
}

/// The progress of a redrive the control plane runs.
struct StoreProgress {
    store: NamespaceStore,
    namespace: String,
    /// The redrive's id: progress is kept only while the namespace's running redrive is it.
    id: String,
    filter_key: String,
    saved: SavedPositions,
    counts: Arc<Mutex<RedriveProgress>>,
}

impl Progress for StoreProgress {
    fn found(&mut self, more: u64) {
        if let Ok(mut counts) = self.counts.lock() {
            counts.found += more;
        }
    }

    fn read(&mut self, report: &Report) {
        if let Ok(mut counts) = self.counts.lock() {
            counts.read = report.read;
            counts.redriven = report.redriven;
            counts.left = left(report);
        }
    }

    async fn save(&mut self, positions: &Positions, redriven: u64) -> Result<(), DlqError> {
        let saved = SavedPositions {
            positions: positions.clone(),
            redriven: self.saved.redriven + redriven,
            ..self.saved.clone()
        };
        let kept = self
            .store
            .save_redrive_positions(&self.namespace, &self.filter_key, &saved, &self.id)
            .await
            .map_err(|e| DlqError::Broker(format!("keeping the redrive's progress: {e}")))?;
        if kept {
            Ok(())
        } else {
            // Another control plane took this redrive over: its progress is the one kept now.
            Err(DlqError::Stopped)
        }
    }

    fn warn(&mut self, message: String) {
        tracing::warn!(namespace = %self.namespace, "redrive: {message}");
    }
}

fn left(report: &Report) -> std::collections::BTreeMap<String, u64> {
    report
        .passed
        .iter()
        .map(|(reason, count)| ((*reason).to_owned(), *count))
        .collect()
}

impl Job {
    pub async fn run(self) {
        let Job {
            store,
            mut record,
            dead,
            settings,
            saved,
            stop,
            call,
        } = self;
        let counts = Arc::new(Mutex::new(record.progress.clone()));
        let mut progress = StoreProgress {
            store: store.clone(),
            namespace: record.namespace.clone(),
            id: record.id.clone(),
            filter_key: record.ask.filter_key.clone(),
            saved: saved.clone(),
            counts: Arc::clone(&counts),
        };
        let ended = CancellationToken::new();
        let beating = heartbeat(&store, &record, &counts, &stop, &ended);
        let mut positions = saved.positions.clone();
        let work = redrive(&dead, &settings, &mut positions, &mut progress, &stop);
        let (result, ()) = tokio::join!(
            async {
                let result = work.await;
                ended.cancel();
                result
            },
            beating
        );
        let (state, error) = match &result {
            Ok(_) => ("done", String::new()),
            Err(DlqError::Stopped) => ("stopped", String::new()),
            Err(error) => ("failed", error.to_string()),
        };
        let mut final_counts = counts.lock().map(|c| c.clone()).unwrap_or_default();
        if let Ok(report) = &result {
            final_counts.read = report.read;
            final_counts.redriven = report.redriven;
            final_counts.left = left(report);
            final_counts.excluded_unseen = report.excluded_unseen.clone();
        }
        final_counts.error = error.clone();
        record.state = state.to_owned();
        record.progress = final_counts;
        record.updated_at_micros = now_micros();
        record.finished_at_micros = record.updated_at_micros;
        match store.update_redrive(&record).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(namespace = %record.namespace, redrive = %record.id, "another control plane took this redrive over; its end is not recorded here");
            }
            Err(e) => {
                tracing::error!(namespace = %record.namespace, redrive = %record.id, error = %e, "the redrive's end could not be recorded; it is taken over once stale");
            }
        }
        let counts = &record.progress;
        let done = if record.ask.replay.is_some() {
            "replayed"
        } else {
            "redriven"
        };
        let summary = format!(
            "{state} {}: {} read, {} {done}{}",
            record.id,
            counts.read,
            counts.redriven,
            if error.is_empty() {
                String::new()
            } else {
                format!(": {error}")
            }
        );
        super::record(&store, &call, &summary).await;
    }
}

/// Stores the running counts every [`HEARTBEAT`] until the redrive ends (`ended`). Finding the
/// row taken over by another control plane stops the redrive (`stop`'s own cancellation).
async fn heartbeat(
    store: &NamespaceStore,
    record: &RedriveRecord,
    counts: &Arc<Mutex<RedriveProgress>>,
    stop: &CancellationToken,
    ended: &CancellationToken,
) {
    let mut beat = record.clone();
    loop {
        tokio::select! {
            () = tokio::time::sleep(HEARTBEAT) => {}
            () = ended.cancelled() => return,
        }
        beat.progress = counts.lock().map(|c| c.clone()).unwrap_or_default();
        beat.updated_at_micros = now_micros();
        match store.update_redrive(&beat).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(namespace = %beat.namespace, redrive = %beat.id, "another control plane took this redrive over (it had not reported for long); stopping it here");
                stop.cancel();
                return;
            }
            // The store is away: the redrive goes on; if it stays away long enough, another
            // control plane may take the redrive over, and this one then stops.
            Err(error) => {
                tracing::warn!(namespace = %beat.namespace, redrive = %beat.id, %error, "could not report the redrive's progress");
            }
        }
    }
}
