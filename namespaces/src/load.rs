//! Reading namespace configs from text, files and folders.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::error::{ConfigError, ConfigErrors};
use crate::file::NamespaceFile;
use crate::model::{Backend, Namespace};
use crate::validate::{Spelling, validate};

/// Parses and validates one namespace config. `origin` names it in errors (a file path).
pub fn parse(text: &str, origin: &str) -> Result<Namespace, ConfigErrors> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ConfigErrors::one(origin, "", format!("not valid JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(ConfigErrors::one(
            origin,
            "",
            "expected a JSON object describing one namespace",
        ));
    };
    let spelling = if object.contains_key("persistenceConfigurations") {
        Spelling::Camel
    } else {
        Spelling::Snake
    };
    let file: NamespaceFile = serde_path_to_error::deserialize(&value).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        ConfigErrors::one(origin, &path, e.inner().to_string())
    })?;
    validate(file, origin, spelling)
}

/// A config stored by an earlier build, whose default target this build's kinds may refuse (a
/// `region` target; a cql target without a keyspace). Its queues still hold entries, so it
/// still owns them: parsed without its default target, with the refusal returned beside it, so
/// the caller can say so. Any other problem fails as [`parse`] does.
pub fn parse_stored(
    text: &str,
    origin: &str,
) -> Result<(Namespace, Option<ConfigErrors>), ConfigErrors> {
    let strict = match parse(text, origin) {
        Ok(namespace) => return Ok((namespace, None)),
        Err(errors) => errors,
    };
    let only_targets = strict.0.iter().all(|e| {
        e.path.starts_with("default_target")
            || e.path.starts_with("defaultTarget")
            || e.path.contains(".config.target")
    });
    let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(text) else {
        return Err(strict);
    };
    if !only_targets {
        return Err(strict);
    }
    object.remove("default_target");
    object.remove("defaultTarget");
    for key in ["persistence_configurations", "persistenceConfigurations"] {
        let storages = object
            .get_mut(key)
            .and_then(Value::as_object_mut)
            .and_then(|o| o.values_mut().next().and_then(Value::as_array_mut));
        for storage in storages.into_iter().flatten() {
            if let Some(config) = storage.get_mut("config").and_then(Value::as_object_mut) {
                config.remove("target");
            }
        }
    }
    let namespace =
        parse(&Value::Object(object).to_string(), origin).map_err(|_| strict.clone())?;
    Ok((namespace, Some(strict)))
}

/// One namespace config as text, with where it came from: a file, or a control plane version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigText {
    pub origin: String,
    /// The text, or why it could not be read.
    pub text: Result<String, String>,
}

impl ConfigText {
    pub(crate) fn parse(&self) -> Result<Namespace, ConfigErrors> {
        match &self.text {
            Ok(text) => parse(text, &self.origin),
            Err(reason) => Err(ConfigErrors::one(&self.origin, "", reason.clone())),
        }
    }
}

/// Reads and validates one namespace file.
pub fn load_file(path: &Path) -> Result<Namespace, ConfigErrors> {
    read_file(path).parse()
}

fn read_file(path: &Path) -> ConfigText {
    ConfigText {
        origin: path.display().to_string(),
        text: std::fs::read_to_string(path).map_err(|e| format!("cannot read the file: {e}")),
    }
}

/// Reads every `*.json` file in `dir` (one namespace each), and checks that no two define the
/// same namespace or use the same queue. Reports the problems of every file, not just the first.
pub fn load_dir(dir: &Path) -> Result<Vec<Namespace>, ConfigErrors> {
    parse_all(&read_dir(dir)?)
}

/// The text of every `*.json` file in `dir`, in name order: what [`load_dir`] parses, and what
/// a folder watcher compares to see whether anything changed.
pub fn read_dir(dir: &Path) -> Result<Vec<ConfigText>, ConfigErrors> {
    let origin = dir.display().to_string();
    let entries = std::fs::read_dir(dir)
        .map_err(|e| ConfigErrors::one(&origin, "", format!("cannot read the folder: {e}")))?;
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    Ok(paths.iter().map(|path| read_file(path)).collect())
}

/// Parses a set of namespace configs that are served together, and checks that no two define
/// the same namespace or use the same queue. Reports every problem, not just the first.
pub fn parse_all(configs: &[ConfigText]) -> Result<Vec<Namespace>, ConfigErrors> {
    let mut namespaces = Vec::new();
    let mut problems = Vec::new();
    // name -> origin; (backend, queue or DLQ) -> (namespace, origin)
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut owners: BTreeMap<(Backend, String), (String, String)> = BTreeMap::new();
    for config in configs {
        let origin = config.origin.clone();
        let namespace = match config.parse() {
            Ok(namespace) => namespace,
            Err(errors) => {
                problems.extend(errors.0);
                continue;
            }
        };
        let mut clash = |path: &str, message: String| {
            problems.push(ConfigError {
                origin: origin.clone(),
                path: path.to_owned(),
                message,
            });
        };
        if let Some(other) = names.insert(namespace.name.clone(), origin.clone()) {
            clash(
                "namespace",
                format!("namespace '{}' is also defined in {other}", namespace.name),
            );
        }
        let queue_names = namespace
            .queues
            .iter()
            .flat_map(|q| [(q.backend, &q.name), (q.backend, &q.dlq)]);
        for (backend, queue) in queue_names {
            let owner = (namespace.name.clone(), origin.clone());
            match owners.insert((backend, queue.clone()), owner) {
                Some((other, file)) if other != namespace.name => clash(
                    "",
                    format!(
                        "{backend} queue '{queue}' is also used by namespace '{other}' ({file}); entries of two namespaces would mix"
                    ),
                ),
                _ => {}
            }
        }
        namespaces.push(namespace);
    }
    if problems.is_empty() {
        Ok(namespaces)
    } else {
        Err(ConfigErrors(problems))
    }
}
