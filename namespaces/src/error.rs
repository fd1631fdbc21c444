//! Configuration errors that say where (file, field path) and what was expected.

use std::fmt;

/// One problem in one namespace config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where the config came from: a file path, or "request" for one sent over the API.
    pub origin: String,
    /// The field, as a JSON path in the file's own spelling, e.g.
    /// `persistenceConfigurations.persistenceConfiguration[0].config.wal-queue`; empty for the
    /// document as a whole.
    pub path: String,
    /// What was wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(f, "{}: {}: {}", self.origin, self.path, self.message)
        }
    }
}

/// Every problem found in a config (validation does not stop at the first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl ConfigErrors {
    pub(crate) fn one(origin: &str, path: &str, message: impl Into<String>) -> Self {
        Self(vec![ConfigError {
            origin: origin.to_owned(),
            path: path.to_owned(),
            message: message.into(),
        }])
    }
}

/// Collects problems while a config is checked.
#[derive(Debug)]
pub(crate) struct Problems<'a> {
    origin: &'a str,
    found: Vec<ConfigError>,
}

impl<'a> Problems<'a> {
    pub(crate) fn new(origin: &'a str) -> Self {
        Self {
            origin,
            found: Vec::new(),
        }
    }

    pub(crate) fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.found.push(ConfigError {
            origin: self.origin.to_owned(),
            path: path.into(),
            message: message.into(),
        });
    }

    pub(crate) fn finish<T>(self, value: T) -> Result<T, ConfigErrors> {
        if self.found.is_empty() {
            Ok(value)
        } else {
            Err(ConfigErrors(self.found))
        }
    }
}
