//! Target kinds defined once: where entries are delivered, and the settings each kind takes.
//!
//! A target is a kind's name and its settings as a JSON object. This crate owns both: the
//! namespace model checks a namespace's default target with it when a config is parsed, the
//! producer checks a request's target with it before anything is stored, and the consumer parses
//! the same types when it applies an entry. A target refused here would fail the same way on
//! every delivery, so it is refused at the door instead of being dead-lettered later.
//!
//! Settings are strict: unknown fields are refused (a typo is an error, not a silent default),
//! and each kind checks what serde cannot say (identifiers, URLs, topic names) in
//! [`Settings::check`]. Checks are pure: no I/O.

pub mod cache;
pub mod cql;
pub mod http;
pub mod index;
pub mod json;
pub mod kafka;
pub mod region;

use std::fmt;

use serde::de::DeserializeOwned;

pub use self::json::JsonError;

/// The longest settings document a target may carry: settings travel on every entry and key
/// the consumer's target cache.
pub const MAX_SETTINGS_BYTES: usize = 16 * 1024;

/// Makes [`Kind`] from the table of kinds: each kind's variant, its name in configs and
/// entries, and its settings type.
macro_rules! kinds {
    ($($variant:ident = $name:literal => $settings:ty,)+) => {
        /// A target kind this build delivers to.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kind {
            $($variant,)+
        }

        impl Kind {
            /// Every kind this build delivers to, in the order of the table (by name).
            pub const ALL: &'static [Kind] = &[$(Kind::$variant,)+];

            /// The name entries and namespace configs use (`target.kind`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }

            /// Whether this kind's writes reach the same end state in any order they are
            /// applied in ([`Settings::ANY_ORDER`]).
            pub const fn any_order(self) -> bool {
                match self {
                    $(Self::$variant => <$settings as Settings>::ANY_ORDER,)+
                }
            }

            /// Checks settings JSON for this kind; empty text stands for `{}`.
            pub fn check(self, settings_json: &str) -> Result<(), Refusal> {
                match self {
                    $(Self::$variant => parse::<$settings>(settings_json).map(drop),)+
                }
            }
        }
    };
}

// Every target kind: adding one is a line here, its settings' file beside this one, and its
// apply side in wal-apply (CONTRIBUTING.md, "Adding a target kind").
kinds! {
    Cache = "cache" => cache::CacheSettings,
    Cql = "cql" => cql::CqlSettings,
    Http = "http" => http::HttpSettings,
    Index = "index" => index::IndexSettings,
    Kafka = "kafka" => kafka::KafkaTopicSettings,
    Region = "region" => region::RegionSettings,
}

impl Kind {
    /// The kind a name stands for. Netflix's configs call cross-region replication
    /// `evc-replication`; it is the `region` kind here.
    pub fn from_name(name: &str) -> Result<Self, Refusal> {
        let canonical = canonical_name(name);
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.name() == canonical)
            .ok_or_else(|| Refusal::UnknownKind {
                kind: bounded(name),
            })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The platform's spelling of a kind's name (Netflix's `evc-replication` is `region`).
pub fn canonical_name(name: &str) -> &str {
    match name {
        "evc-replication" => "region",
        other => other,
    }
}

/// The names of the kinds this build delivers to, for error messages.
pub fn kind_names() -> String {
    let names: Vec<&str> = Kind::ALL.iter().map(|kind| kind.name()).collect();
    names.join(", ")
}

/// A kind's settings: strict serde, plus the rules serde cannot say.
pub trait Settings: DeserializeOwned + Send + 'static {
    const KIND: Kind;

    /// Whether two writes of this kind reach the same end state in either order: the items of a
    /// two-phase write are then applied several at once, the others one at a time, in order.
    const ANY_ORDER: bool = false;

    /// Checks what the types do not: names, URLs, addresses. The error's path is the field's.
    fn check(&self) -> Result<(), JsonError>;
}

/// Why a target was refused. Each names what was wrong and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{kind:?} is not a target kind; expected one of {}", kind_names())]
    UnknownKind { kind: String },
    #[error("the settings are {size} bytes long; expected at most {MAX_SETTINGS_BYTES}")]
    TooLong { size: usize },
    #[error("{kind} target settings are invalid at '{path}': {reason}")]
    Settings {
        kind: Kind,
        /// The field's path in the settings (`headers.x-team`), `.` for the whole document.
        path: String,
        reason: String,
    },
}

/// Checks a target: its kind is one this build delivers to and its settings are that kind's.
pub fn check(kind: &str, settings_json: &str) -> Result<Kind, Refusal> {
    let kind = Kind::from_name(kind)?;
    kind.check(settings_json)?;
    Ok(kind)
}

/// Parses a kind's settings strictly and checks them, naming the field that was wrong.
pub fn parse<S: Settings>(settings_json: &str) -> Result<S, Refusal> {
    if settings_json.len() > MAX_SETTINGS_BYTES {
        return Err(Refusal::TooLong {
            size: settings_json.len(),
        });
    }
    let text = if settings_json.trim().is_empty() {
        "{}"
    } else {
        settings_json
    };
    // serde reads a struct from an array too; settings are an object, as documented.
    if !text.trim_start().starts_with('{') {
        return Err(refusal::<S>(JsonError::at(
            ".",
            "expected a JSON object of settings",
        )));
    }
    let settings: S = json::parse(text.as_bytes()).map_err(|e| refusal::<S>(e))?;
    settings.check().map_err(refusal::<S>)?;
    Ok(settings)
}

fn refusal<S: Settings>(error: JsonError) -> Refusal {
    Refusal::Settings {
        kind: S::KIND,
        path: error.path,
        reason: json::without_position(&error.reason),
    }
}

/// A bounded echo of a caller's text: kind names are short words.
fn bounded(text: &str) -> String {
    const ECHO: usize = 32;
    if text.len() <= ECHO {
        return text.to_owned();
    }
    let end = (0..=ECHO)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(kind: &str, settings: &str) -> String {
        match check(kind, settings) {
            Err(refusal) => refusal.to_string(),
            Ok(kind) => panic!("{kind} target {settings} was accepted"),
        }
    }

    #[test]
    fn every_kind_accepts_its_documented_settings() {
        for (kind, settings) in [
            (
                "cql",
                r#"{"keyspace": "app", "table": "users", "consistency": "ONE"}"#,
            ),
            ("cache", ""),
            (
                "cache",
                r#"{"servers": ["127.0.0.1:11211"], "ttl_seconds": 60}"#,
            ),
            ("kafka", r#"{"topic": "orders.v1"}"#),
            (
                "http",
                r#"{"url": "https://svc:8443/hook", "headers": {"x-team": "pds"}}"#,
            ),
        ] {
            assert_eq!(
                check(kind, settings).map(Kind::name),
                Ok(kind),
                "{settings}"
            );
        }
    }

    #[test]
    fn refusals_name_the_field_and_what_was_expected() {
        let missing = refused("cql", r#"{"keyspace": "a"}"#);
        assert!(
            missing.contains("cql target settings are invalid at '.'"),
            "{missing}"
        );
        assert!(missing.contains("missing field `table`"), "{missing}");
        let typo = refused("cql", r#"{"keyspace": "shop", "tabel": "orders"}"#);
        assert!(
            typo.contains("at 'tabel'") && typo.contains("unknown field"),
            "{typo}"
        );
        let table = refused("cql", r#"{"keyspace": "a", "table": "t;DROP"}"#);
        assert!(
            table.contains("at 'table'") && table.contains("not a CQL identifier"),
            "{table}"
        );
        let url = refused("http", r#"{"url": "not a url"}"#);
        assert!(
            url.contains("at 'url'") && url.contains("is not a URL"),
            "{url}"
        );
        let scheme = refused("http", r#"{"url": "ftp://x/y"}"#);
        assert!(scheme.contains("expected http or https"), "{scheme}");
        let header = refused("http", r#"{"url": "http://x", "headers": {"a b": "c"}}"#);
        assert!(header.contains("at 'headers.a b'"), "{header}");
        let topic = refused("kafka", r#"{"topic": "a b"}"#);
        assert!(
            topic.contains("at 'topic'") && topic.contains("not a Kafka topic name"),
            "{topic}"
        );
        let server = refused("cache", r#"{"servers": ["localhost"]}"#);
        assert!(
            server.contains("at 'servers[0]'") && server.contains("host:port"),
            "{server}"
        );
        let not_object = refused("kafka", "[1]");
        assert!(
            not_object.contains("at '.': expected a JSON object"),
            "{not_object}"
        );
        let too_long = refused(
            "kafka",
            &format!(r#"{{"topic": "{}"}}"#, "a".repeat(MAX_SETTINGS_BYTES)),
        );
        assert!(too_long.contains("expected at most 16384"), "{too_long}");
    }

    #[test]
    fn only_writes_that_carry_their_timestamp_apply_in_any_order() {
        let any_order: Vec<&str> = Kind::ALL
            .iter()
            .filter(|kind| kind.any_order())
            .map(|kind| kind.name())
            .collect();
        // An http call, a Kafka record, a cache set or a replicated entry lands as it arrives.
        assert_eq!(any_order, ["cql"]);
    }

    #[test]
    fn unknown_kinds_say_which_kinds_there_are() {
        let unknown = refused("carrier-pigeon", "{}");
        assert!(
            unknown.contains("\"carrier-pigeon\" is not a target kind"),
            "{unknown}"
        );
        assert!(
            unknown.contains("expected one of cache, cql, http, index, kafka, region"),
            "{unknown}"
        );
        for name in ["region", "evc-replication"] {
            assert_eq!(check(name, r#"{"useast1": "writer"}"#), Ok(Kind::Region));
        }
        let long = refused(&"x".repeat(100), "{}");
        assert!(long.len() < 200 && long.contains('…'), "{long}");
    }
}
