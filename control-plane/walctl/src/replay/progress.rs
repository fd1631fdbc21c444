//! The checkpoint while a replay applies: saved every second, so an interrupted run resumes
//! where its lanes were.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::lanes::{self, Lanes};
use crate::checkpoint::Checkpoint;

/// Saves the checkpoint while `lanes` apply, on a task of its own (see `save_while_applying`).
pub(super) fn start_saving(
    lanes: &Lanes,
    checkpoint: &Arc<Mutex<Checkpoint>>,
    path: &Path,
    done_before: u64,
) -> tokio::task::JoinHandle<()> {
    let saving = save_while_applying(
        lanes.watcher(),
        Arc::clone(checkpoint),
        path.to_owned(),
        done_before,
    );
    tokio::spawn(saving)
}

/// How often progress is saved while entries are applied.
pub(super) const SAVE_EVERY: Duration = Duration::from_secs(1);
/// Saves the lanes' progress every [`SAVE_EVERY`] until aborted. A save that fails is said once
/// and tried again; the run goes on (a later resume only repeats more).
async fn save_while_applying(
    lanes: lanes::Watcher,
    checkpoint: Arc<Mutex<Checkpoint>>,
    path: PathBuf,
    done_before: u64,
) {
    let mut warned = false;
    loop {
        tokio::time::sleep(SAVE_EVERY).await;
        let mut saved = lock(&checkpoint);
        saved.advance(lanes.positions());
        saved.done = done_before + lanes.applied();
        if let Err(failure) = saved.save(&path)
            && !warned
        {
            eprintln!("walctl: {}", failure.message);
            warned = true;
        }
    }
}

pub(super) fn lock(checkpoint: &Mutex<Checkpoint>) -> std::sync::MutexGuard<'_, Checkpoint> {
    checkpoint
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
