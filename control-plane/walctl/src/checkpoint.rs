//! The progress of a long command over Kafka topics (`dlq redrive`, `replay`), kept in a file:
//! where each partition is to be read from next, and the time range the first run resolved its
//! flags to. Running the same command again (same namespace, same flags as typed) continues from
//! there. The file is replaced atomically, so it is always a whole checkpoint.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Failure;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub namespace: String,
    /// The command's flags as typed, naming the run.
    pub filter: String,
    /// The time range the first run resolved them to (microseconds since the Unix epoch), kept
    /// so a relative --since or --until means the same on every run.
    pub since_micros: Option<i64>,
    pub until_micros: Option<i64>,
    /// Topic -> partition -> the next offset to read.
    pub positions: BTreeMap<String, BTreeMap<i32, i64>>,
    /// Topic -> partition -> where the range starts (a replay re-reads from there on a resume,
    /// to know which entries it already took, without applying them again).
    #[serde(default)]
    pub starts: BTreeMap<String, BTreeMap<i32, i64>>,
    /// Entries redriven or applied under this checkpoint, over all runs.
    pub done: u64,
}

impl Checkpoint {
    /// Where `command` (redrive, replay) on `namespace` with `flags` keeps its progress by
    /// default: under `$XDG_STATE_HOME/walctl` (else `~/.local/state/walctl`), named by the
    /// namespace and the key hash (FNV-1a) of the flags, which stays the same from one build to
    /// the next (std's hasher does not promise that).
    pub fn default_path(command: &str, namespace: &str, flags: &str) -> PathBuf {
        let base = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/state"))
            })
            .unwrap_or_else(std::env::temp_dir);
        base.join("walctl").join(format!(
            "{command}-{namespace}-{:016x}.json",
            wal_namespaces::key_hash(flags.as_bytes())
        ))
    }

    /// Records where each partition is to be read from next: (topic, partition, next offset).
    pub fn advance(&mut self, positions: impl IntoIterator<Item = (String, i32, i64)>) {
        for (topic, partition, next) in positions {
            self.positions
                .entry(topic)
                .or_default()
                .insert(partition, next);
        }
    }

    /// The checkpoint at `path`, if there is one.
    pub fn load(path: &Path) -> Result<Option<Self>, Failure> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => {
                return Err(Failure::usage(format!(
                    "cannot read the checkpoint {}: {error}",
                    path.display()
                )));
            }
        };
        Self::parse(&text).map(Some).map_err(|error| {
            Failure::usage(format!(
                "the checkpoint {} is not a walctl checkpoint ({error}); pass --from-start to start over, or --checkpoint to use another file",
                path.display()
            ))
        })
    }

    /// A checkpoint from a checkpoint file's text.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Writes the checkpoint to a temporary file, syncs it and renames it into place, so the
    /// file is always either the old checkpoint or the new one.
    pub fn save(&self, path: &Path) -> Result<(), Failure> {
        let failed = |error: std::io::Error| {
            Failure::usage(format!(
                "cannot write the checkpoint {}: {error}",
                path.display()
            ))
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        let temporary = path.with_extension("json.tmp");
        let text = serde_json::to_vec_pretty(self).map_err(|e| failed(std::io::Error::other(e)))?;
        let mut file = std::fs::File::create(&temporary).map_err(failed)?;
        file.write_all(&text).map_err(failed)?;
        file.sync_all().map_err(failed)?;
        std::fs::rename(&temporary, path).map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_checkpoint_loads_back_and_a_bad_one_says_what_to_do() {
        let dir = std::env::temp_dir().join(format!("walctl-checkpoint-{}", std::process::id()));
        let path = dir.join("c.json");
        assert_eq!(Checkpoint::load(&path).unwrap(), None);
        let checkpoint = Checkpoint {
            namespace: "ns".into(),
            filter: "f".into(),
            since_micros: Some(1),
            until_micros: None,
            positions: [("dlq".to_owned(), [(0, 17), (3, 4)].into())].into(),
            starts: [("dlq".to_owned(), [(0, 2)].into())].into(),
            done: 21,
        };
        checkpoint.save(&path).unwrap();
        assert_eq!(Checkpoint::load(&path).unwrap(), Some(checkpoint));
        std::fs::write(&path, "not json").unwrap();
        let bad = Checkpoint::load(&path).unwrap_err();
        assert!(bad.message.contains("--from-start"), "{}", bad.message);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn filters_name_stable_files() {
        let path = Checkpoint::default_path("redrive", "orders", "");
        assert!(
            path.ends_with("walctl/redrive-orders-cbf29ce484222325.json"),
            "{path:?}"
        );
    }
}
