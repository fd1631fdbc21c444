//! The default target: Netflix's flat form (`type` beside the settings) or the platform's
//! (`kind` and `settings`), checked by the kind's own rules (`wal_targets`).

use serde_json::{Map, Value};
use wal_targets::Refusal;

use crate::error::Problems;
use crate::file::TargetFile;
use crate::model::TargetConfig;

pub(super) fn netflix_target(
    problems: &mut Problems<'_>,
    path: &str,
    target: &Map<String, Value>,
) -> Option<TargetConfig> {
    if target.is_empty() {
        return None;
    }
    let mut settings = target.clone();
    let kind = match settings.remove("type") {
        Some(Value::String(kind)) => kind,
        Some(other) => {
            problems.add(
                format!("{path}.type"),
                format!("expected a string naming the target kind, found {other}"),
            );
            return None;
        }
        None => {
            problems.add(path, "a target needs a \"type\" naming its kind");
            return None;
        }
    };
    // Netflix's flat form: the settings sit beside "type".
    let paths = TargetPaths {
        kind: format!("{path}.type"),
        settings: path.to_owned(),
    };
    check_target(problems, &paths, TargetFile { kind, settings })
}

/// Where a target's kind and settings are in the file, for error paths.
pub(super) struct TargetPaths {
    pub(super) kind: String,
    pub(super) settings: String,
}

/// Checks a target with the kinds' own rules (`wal_targets`): a target refused here would be
/// dead-lettered on every delivery, so the config is refused instead.
pub(super) fn check_target(
    problems: &mut Problems<'_>,
    paths: &TargetPaths,
    target: TargetFile,
) -> Option<TargetConfig> {
    let settings_json = Value::Object(target.settings.clone()).to_string();
    match wal_targets::check(&target.kind, &settings_json) {
        Ok(kind) => Some(TargetConfig {
            kind,
            settings_json,
            settings: target.settings,
        }),
        Err(Refusal::Settings { kind, path, reason }) => {
            let field = if path == "." {
                paths.settings.clone()
            } else {
                format!("{}.{path}", paths.settings)
            };
            problems.add(field, format!("{kind} target settings: {reason}"));
            None
        }
        Err(refusal @ Refusal::TooLong { .. }) => {
            problems.add(&paths.settings, refusal.to_string());
            None
        }
        Err(refusal) => {
            problems.add(&paths.kind, refusal.to_string());
            None
        }
    }
}
