//! Faults a test asks the producer to make, so that client libraries can be checked against the
//! answers that are hard to get from healthy brokers on demand: an UNKNOWN whose entry was in
//! fact stored (a lost acknowledgement), a FALSE, an append that staged its items and then
//! failed. Set with `WAL_TEST_FAULTS` (hidden from `--help`): never set outside tests, and the
//! producer logs a warning at start-up when it is.
//!
//! The value is a comma-separated list of `fault=namespace`:
//! - `unknown-once`: the first write of each entry id is stored, then answered UNKNOWN; a retry
//!   with the same id is answered truthfully (TRUE once stored again).
//! - `unknown-always`: every write is stored, then answered UNKNOWN.
//! - `false`: every write is answered FALSE, and nothing is stored.
//! - `append-unavailable-once`: the first AppendItems call of each transaction and first
//!   sequence (each chunk of a transaction, once) stages its items, then answers UNAVAILABLE.

use std::collections::HashSet;
use std::sync::Mutex;

/// One fault, as named in `WAL_TEST_FAULTS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    UnknownOnce,
    UnknownAlways,
    False,
    AppendUnavailableOnce,
}

impl Fault {
    const ALL: [(Self, &'static str); 4] = [
        (Self::UnknownOnce, "unknown-once"),
        (Self::UnknownAlways, "unknown-always"),
        (Self::False, "false"),
        (Self::AppendUnavailableOnce, "append-unavailable-once"),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(fault, _)| *fault == self)
            .map_or("", |(_, name)| name)
    }
}

/// The faults asked for, and the writes each `-once` fault has already hit.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Vec<(Fault, String)>,
    /// Entry ids (or transaction id and first sequence) a `-once` fault has hit: bounded by the
    /// test's writes, since the faults exist only in tests.
    hit: Mutex<HashSet<String>>,
}

impl Faults {
    /// Parses `WAL_TEST_FAULTS`; the error names the part that is wrong and what was expected.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, namespace) = part
                .split_once('=')
                .ok_or_else(|| format!("WAL_TEST_FAULTS: '{part}' is not fault=namespace"))?;
            let fault = Fault::ALL
                .iter()
                .find(|(_, known)| *known == name.trim())
                .map(|(fault, _)| *fault)
                .ok_or_else(|| {
                    let known: Vec<_> = Fault::ALL.iter().map(|(_, n)| *n).collect();
                    format!(
                        "WAL_TEST_FAULTS: unknown fault '{name}'; expected one of {}",
                        known.join(", ")
                    )
                })?;
            rules.push((fault, namespace.trim().to_owned()));
        }
        Ok(Self {
            rules,
            hit: Mutex::default(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// What the faults are, for the start-up warning.
    pub fn describe(&self) -> String {
        let parts: Vec<_> = self
            .rules
            .iter()
            .map(|(fault, namespace)| format!("{}={namespace}", fault.name()))
            .collect();
        parts.join(",")
    }

    /// Whether `fault` applies to `namespace` now; a `-once` fault applies the first time each
    /// `key` is seen only. The key is written out only for a fault asked for: with none, a write
    /// pays one look at an empty list.
    pub fn hits(&self, fault: Fault, namespace: &str, key: &dyn std::fmt::Display) -> bool {
        let asked = self
            .rules
            .iter()
            .any(|(f, ns)| *f == fault && ns == namespace);
        if !asked {
            return false;
        }
        match fault {
            Fault::UnknownOnce | Fault::AppendUnavailableOnce => self
                .hit
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(format!("{namespace}/{key}")),
            Fault::UnknownAlways | Fault::False => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_faults_hit_each_key_once_and_only_their_namespace() {
        let faults = Faults::parse("unknown-once=a, false=b").unwrap();
        assert!(faults.hits(Fault::UnknownOnce, "a", &"id-1"));
        assert!(!faults.hits(Fault::UnknownOnce, "a", &"id-1"));
        assert!(faults.hits(Fault::UnknownOnce, "a", &"id-2"));
        assert!(!faults.hits(Fault::UnknownOnce, "b", &"id-3"));
        assert!(faults.hits(Fault::False, "b", &"x"));
        assert!(faults.hits(Fault::False, "b", &"x"));
        assert!(!faults.hits(Fault::UnknownAlways, "a", &"x"));
        assert_eq!(faults.describe(), "unknown-once=a,false=b");
    }

    #[test]
    fn a_wrong_spec_names_the_part_and_the_faults_known() {
        let error = Faults::parse("unknown=a").unwrap_err();
        assert!(error.contains("unknown fault 'unknown'"), "{error}");
        assert!(
            error.contains("unknown-once, unknown-always, false"),
            "{error}"
        );
        let error = Faults::parse("unknown-once").unwrap_err();
        assert!(
            error.contains("'unknown-once' is not fault=namespace"),
            "{error}"
        );
        assert!(Faults::parse("").unwrap().is_empty());
    }
}
