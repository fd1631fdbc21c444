//! Following a folder of configs by reading it again every [`POLL`]. Polling rather than file
//! notifications: Kubernetes updates a mounted ConfigMap by swapping a symlink, which inotify
//! watchers on the files miss, and a second of delay is well within "applies within seconds".

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::ConfigErrors;
use crate::load::{ConfigText, parse_all, read_dir};
use crate::model::Namespace;

use super::FeedError;

/// How often the folder is read.
pub const POLL: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(super) struct FolderChanges {
    dir: PathBuf,
    /// What the folder held at the last read, so only a change is parsed and reported.
    seen: Result<Vec<ConfigText>, ConfigErrors>,
}

impl FolderChanges {
    pub(super) fn open(dir: &Path) -> Result<(Self, Vec<Namespace>), FeedError> {
        let seen = read_dir(dir);
        let current = seen
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|texts| parse_all(texts))
            .map_err(FeedError::Invalid)?;
        let changes = Self {
            dir: dir.to_owned(),
            seen,
        };
        Ok((changes, current))
    }

    pub(super) async fn next(&mut self) -> Result<Vec<Namespace>, String> {
        loop {
            tokio::time::sleep(POLL).await;
            let read = read_dir(&self.dir);
            if read == self.seen {
                continue;
            }
            self.seen = read;
            return match &self.seen {
                Ok(texts) => parse_all(texts).map_err(|errors| errors.to_string()),
                Err(errors) => Err(errors.to_string()),
            };
        }
    }
}
