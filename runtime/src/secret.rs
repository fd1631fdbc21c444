//! Secrets in the cluster map. A value written `${env:NAME}` is read from the environment and
//! `${file:/path}` from a file (a mounted Kubernetes Secret; one trailing newline dropped), so
//! the map itself, a ConfigMap, holds no password. Values of secret properties (passwords, keys,
//! JAAS configs) are never printed: [`ClientProperties`]' `Debug` shows `<redacted>` in their
//! place, and no error message quotes a resolved value.

use std::collections::BTreeMap;
use std::fmt;

/// Whether secret references are read, or only checked for their form: a map checked away from
/// where it runs (`walctl clusters --secrets form`, the chart's checks) has no such files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Secrets {
    #[default]
    Read,
    FormOnly,
}

/// What a value stands for: itself, or the environment variable or file it names.
pub fn resolve(value: &str) -> Result<String, String> {
    resolve_as(value, Secrets::Read)
}

/// Like [`resolve`]; with [`Secrets::FormOnly`] a well-formed reference is returned as it is.
pub fn resolve_as(value: &str, secrets: Secrets) -> Result<String, String> {
    let Some(reference) = value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) else {
        return Ok(value.to_owned());
    };
    let form_only = secrets == Secrets::FormOnly;
    if let Some(name) = reference.strip_prefix("env:") {
        if form_only {
            return Ok(value.to_owned());
        }
        return std::env::var(name).map_err(|_| {
            format!("names the environment variable {name}, which is not set (or not UTF-8)")
        });
    }
    if let Some(path) = reference.strip_prefix("file:") {
        if form_only {
            return Ok(value.to_owned());
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("names the file {path}, which cannot be read: {e}"))?;
        return Ok(text.strip_suffix('\n').unwrap_or(&text).to_owned());
    }
    // Only the kind is echoed: the value may be a password that merely looks like a reference.
    let kind = reference.split_once(':').map_or("", |(kind, _)| kind);
    Err(format!(
        "expected ${{env:NAME}} or ${{file:/path}} (or a plain value), found ${{{kind}:...}}"
    ))
}

/// Whether a property's value is a secret, by its name.
pub fn is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.contains("password")
        || key.contains("secret")
        || key.contains("jaas")
        || key.ends_with(".key")
        || key.ends_with("key.pem")
        || key.contains("oauthbearer.config")
        || key.contains("credentials")
}

/// A cluster's extra librdkafka properties, secrets resolved; printed with secrets redacted.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientProperties(BTreeMap<String, String>);

impl ClientProperties {
    /// Each value resolved ([`resolve_as`]); an error names the property.
    pub fn resolved(
        raw: BTreeMap<String, String>,
        secrets: Secrets,
    ) -> Result<Self, (String, String)> {
        let mut out = BTreeMap::new();
        for (key, value) in raw {
            let value = resolve_as(&value, secrets).map_err(|reason| (key.clone(), reason))?;
            out.insert(key, value);
        }
        Ok(Self(out))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a ClientProperties {
    type Item = (&'a String, &'a String);
    type IntoIter = std::collections::btree_map::Iter<'a, String, String>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl fmt::Debug for ClientProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(key, value)| {
                let shown = if is_secret(key) {
                    "<redacted>"
                } else {
                    value.as_str()
                };
                (key, shown)
            }))
            .finish()
    }
}

/// A secret value: usable, never printed.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Self(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_resolve_from_the_environment_and_files() {
        let dir = std::env::temp_dir().join(format!("wal-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("password");
        std::fs::write(&file, "from-a-file\n").unwrap();
        // PATH is set in every environment this runs in.
        let path = std::env::var("PATH").unwrap();
        assert_eq!(resolve("${env:PATH}").unwrap(), path);
        assert_eq!(
            resolve(&format!("${{file:{}}}", file.display())).unwrap(),
            "from-a-file"
        );
        assert_eq!(resolve("plain").unwrap(), "plain");
        let missing = resolve("${env:WAL_NO_SUCH_VARIABLE_EVER}").unwrap_err();
        assert!(
            missing.contains("WAL_NO_SUCH_VARIABLE_EVER") && missing.contains("not set"),
            "{missing}"
        );
        let unreadable = resolve("${file:/nonexistent/wal}").unwrap_err();
        assert!(unreadable.contains("/nonexistent/wal"), "{unreadable}");
        let unknown = resolve("${vault:x}").unwrap_err();
        assert!(
            unknown.contains("expected ${env:NAME} or ${file:/path}"),
            "{unknown}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn form_only_checks_a_reference_without_reading_it() {
        let absent = "${file:/nonexistent/password}";
        assert_eq!(resolve_as(absent, Secrets::FormOnly).unwrap(), absent);
        assert!(resolve_as(absent, Secrets::Read).is_err());
        let unset = "${env:WAL_NO_SUCH_VARIABLE_EVER}";
        assert_eq!(resolve_as(unset, Secrets::FormOnly).unwrap(), unset);
        assert!(resolve_as("${vault:x}", Secrets::FormOnly).is_err());
    }

    #[test]
    fn secret_properties_are_never_printed() {
        let raw = BTreeMap::from([
            ("sasl.password".to_owned(), "hunter2".to_owned()),
            ("ssl.key.password".to_owned(), "hunter3".to_owned()),
            ("sasl.jaas.config".to_owned(), "hunter4".to_owned()),
            ("sasl.username".to_owned(), "wal".to_owned()),
        ]);
        let properties = ClientProperties::resolved(raw, Secrets::Read).unwrap();
        let shown = format!("{properties:?}");
        assert!(!shown.contains("hunter"), "{shown}");
        assert!(shown.contains("\"sasl.username\": \"wal\""), "{shown}");
        assert_eq!(properties.get("sasl.password"), Some("hunter2"));
        assert_eq!(format!("{:?}", Secret::new("hunter5".into())), "<redacted>");
    }
}
