//! A case as `cases/*.json` writes it (clients/conformance/README.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// The sentence of BEHAVIOUR.md the case checks.
    pub promise: String,
    /// Aliases the steps use, each made a fresh namespace.
    #[serde(default)]
    pub namespaces: BTreeMap<String, NamespacePlan>,
    /// Plan steps, naming namespaces by alias; sent to the runner with the real names.
    pub steps: Vec<Value>,
    #[serde(default)]
    pub during: Vec<During>,
    /// The case writes to the stage's mTLS producer, which authorizes writes by each
    /// namespace's `access.write`, presenting the client certificate of the plan's `tls`.
    #[serde(default)]
    pub secured: bool,
    pub expect: Expect,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespacePlan {
    /// The producers' test fault for this namespace (`unknown-once`, `false`...).
    pub fault: Option<String>,
    /// Top-level config fields added to the namespace's config.
    #[serde(default)]
    pub extra: serde_json::Map<String, Value>,
    #[serde(default)]
    pub durable_storage: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct During {
    pub after_results: usize,
    pub kill_producer: usize,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default)]
    pub results: Vec<ResultMatch>,
    #[serde(default)]
    pub delivered: Vec<StepRef>,
    #[serde(default)]
    pub queue_order: Vec<StepRef>,
    #[serde(default)]
    pub requests: Vec<Requests>,
    #[serde(default)]
    pub transaction_applied: Vec<StepRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultMatch {
    pub step: usize,
    pub index: Option<usize>,
    pub outcome: Option<String>,
    pub attempts: Option<u64>,
    pub min_attempts: Option<u64>,
    pub max_attempts: Option<u64>,
    pub code: Option<String>,
    pub field: Option<String>,
    pub entry_id: Option<String>,
    pub max_elapsed_millis: Option<u64>,
    /// What each destination had done, as the result names them (absent in a result: none).
    pub destinations: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRef {
    pub step: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requests {
    pub namespace: String,
    pub outcome: String,
    /// Bounds on the producers' sum (a killed producer's count: up to its kill).
    pub at_least: Option<u64>,
    pub at_most: Option<u64>,
    /// A bound on each producer's own count (a killed one: up to its kill): calls spread over
    /// the producers.
    pub at_least_each: Option<u64>,
}

/// The cases folder beside this crate.
pub fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cases")
}

/// Every case, by file name in order; a case that cannot be read fails the suite with its
/// file's name.
pub fn all() -> Vec<(String, Case)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder())
        .expect("clients/conformance/cases")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let case =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (name, case)
        })
        .collect()
}
