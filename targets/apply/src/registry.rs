//! The target kinds this consumer knows, and the targets made from them, kept for reuse.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use wal_queue::entry::Target as TargetSpec;

use super::{Target, TargetError, TargetKind, cache, cql, http, index, kafka, region};
use crate::breaker::{Breaker, Breakers, OpenBreaker};
use crate::clients::Clients;

/// Targets kept for reuse (each holds prepared statements or a client). Settings come from
/// requests too, so their variety is bounded here; past the cap a target is made per entry.
const MAX_CACHED_TARGETS: usize = 1024;
/// Settings longer than this are refused: they travel on every entry and are cache keys here.
use wal_targets::MAX_SETTINGS_BYTES;

type Build = Box<
    dyn Fn(&str, Arc<Clients>) -> BoxFuture<'static, Result<Arc<dyn Target>, TargetError>>
        + Send
        + Sync,
>;
/// A kind's endpoint of settings JSON; `None` when the settings do not parse.
type Endpoint = Box<dyn Fn(&str, &Clients) -> Option<String> + Send + Sync>;

/// What the registry knows of a kind.
struct Kind {
    build: Build,
    endpoint: Endpoint,
}

/// What was made for a target spec, per kind and settings JSON, kept up to
/// [`MAX_CACHED_TARGETS`]; looked up by `&str` so a hit allocates nothing.
struct BySpec<T>(Mutex<HashMap<String, HashMap<String, T>>>);

impl<T: Clone> BySpec<T> {
    fn new() -> Self {
        Self(Mutex::new(HashMap::new()))
    }

    fn get(&self, spec: &TargetSpec) -> Option<T> {
        let kept = self.0.lock().ok()?;
        kept.get(&spec.kind)?.get(&spec.settings_json).cloned()
    }

    /// Keeps `value` for `spec`, unless the cap is reached.
    fn keep(&self, spec: &TargetSpec, value: &T) {
        if let Ok(mut kept) = self.0.lock()
            && kept.values().map(HashMap::len).sum::<usize>() < MAX_CACHED_TARGETS
        {
            kept.entry(spec.kind.clone())
                .or_default()
                .insert(spec.settings_json.clone(), value.clone());
        }
    }
}

pub struct TargetRegistry {
    kinds: HashMap<&'static str, Kind>,
    clients: Arc<Clients>,
    built: BySpec<Arc<dyn Target>>,
    breakers: Breakers,
    /// Which breaker a target's settings go to, kept as targets are.
    breaker_of: BySpec<Arc<Breaker>>,
}

impl fmt::Debug for TargetRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds: Vec<_> = self.kinds.keys().collect();
        kinds.sort();
        f.debug_struct("TargetRegistry")
            .field("kinds", &kinds)
            .finish_non_exhaustive()
    }
}

impl TargetRegistry {
    /// Every kind this build delivers to. Adding a kind is one line here.
    pub fn builtin(clients: Arc<Clients>) -> Self {
        Self::empty(clients)
            .with::<cql::Cql>()
            .with::<cache::Cache>()
            .with::<kafka::KafkaTopic>()
            .with::<http::Http>()
            .with::<index::Index>()
            .with::<region::Region>()
    }

    pub fn empty(clients: Arc<Clients>) -> Self {
        Self {
            kinds: HashMap::new(),
            clients,
            built: BySpec::new(),
            breakers: Breakers::default(),
            breaker_of: BySpec::new(),
        }
    }

    pub fn with<K: TargetKind>(mut self) -> Self {
        let build: Build = Box::new(|json, clients| {
            let parsed = parse_settings::<K>(json);
            Box::pin(async move { K::build(parsed?, clients).await })
        });
        let endpoint: Endpoint = Box::new(|json, clients| {
            let settings = parse_settings::<K>(json).ok()?;
            Some(format!(
                "{}/{}",
                kind_name::<K>(),
                K::endpoint(&settings, clients)
            ))
        });
        self.kinds
            .insert(kind_name::<K>(), Kind { build, endpoint });
        self
    }

    /// The breaker of the endpoint an entry's target lives at; `None` for a kind or settings
    /// that cannot be delivered (their apply fails for good) or past the breakers' bound.
    pub fn breaker(&self, spec: &TargetSpec) -> Option<Arc<Breaker>> {
        if let Some(breaker) = self.breaker_of.get(spec) {
            return Some(breaker);
        }
        let kind = self.kinds.get(spec.kind.as_str())?;
        if spec.settings_json.len() > MAX_SETTINGS_BYTES {
            return None;
        }
        let breaker = self
            .breakers
            .get(&(kind.endpoint)(&spec.settings_json, &self.clients)?)?;
        self.breaker_of.keep(spec, &breaker);
        Some(breaker)
    }

    /// The endpoints whose breakers are open now.
    pub fn open_breakers(&self) -> Vec<OpenBreaker> {
        self.breakers.open()
    }

    pub fn knows(&self, kind: &str) -> bool {
        self.kinds.contains_key(kind)
    }

    /// The target an entry names, made on first use and reused after.
    pub async fn resolve(&self, spec: &TargetSpec) -> Result<Arc<dyn Target>, TargetError> {
        if let Some(target) = self.built.get(spec) {
            return Ok(target);
        }
        let Some(kind) = self.kinds.get(spec.kind.as_str()) else {
            let mut known: Vec<_> = self.kinds.keys().copied().collect();
            known.sort_unstable();
            return Err(TargetError::permanent(format!(
                "target kind '{}' is not delivered by this consumer; expected one of {known:?}",
                spec.kind
            )));
        };
        if spec.settings_json.len() > MAX_SETTINGS_BYTES {
            return Err(TargetError::permanent(format!(
                "target settings are {} bytes; at most {MAX_SETTINGS_BYTES} are accepted",
                spec.settings_json.len()
            )));
        }
        let target = (kind.build)(&spec.settings_json, Arc::clone(&self.clients)).await?;
        self.built.keep(spec, &target);
        Ok(target)
    }
}

fn kind_name<K: TargetKind>() -> &'static str {
    <K::Settings as wal_targets::Settings>::KIND.name()
}

/// Parses a kind's settings strictly, naming the field that was wrong. The producer and the
/// namespace model refuse such settings at the door; entries written before they did, or
/// replayed from an archive, still meet this.
fn parse_settings<K: TargetKind>(json: &str) -> Result<K::Settings, TargetError> {
    wal_targets::parse::<K::Settings>(json).map_err(TargetError::permanent)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clients::ClientSettings;

    fn registry() -> TargetRegistry {
        let settings = ClientSettings::none(Duration::from_secs(1));
        TargetRegistry::builtin(Arc::new(Clients::new(settings).unwrap()))
    }

    async fn refusal(kind: &str, settings: &str) -> String {
        let spec = TargetSpec {
            kind: kind.into(),
            settings_json: settings.into(),
        };
        match registry().resolve(&spec).await {
            Err(error @ TargetError::Permanent { .. }) => error.to_string(),
            other => panic!("expected a permanent error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_unknown_kind_names_the_kinds_there_are() {
        let reason = refusal("carrier-pigeon", "{}").await;
        assert!(reason.contains("'carrier-pigeon'"), "{reason}");
        assert!(
            reason.contains(r#"["cache", "cql", "http", "index", "kafka", "region"]"#),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn bad_settings_name_the_field_and_the_problem() {
        let reason = refusal("cql", r#"{"keyspace": "a", "tabel": "b"}"#).await;
        assert!(
            reason.contains("cql target settings are invalid at 'tabel'"),
            "{reason}"
        );
        assert!(reason.contains("unknown field `tabel`"), "{reason}");
        let reason = refusal("http", r#"{"url": "ftp://x/y"}"#).await;
        assert!(reason.contains("expected http or https"), "{reason}");
        let reason = refusal("kafka", r#"{"topic": "a b"}"#).await;
        assert!(reason.contains("not a Kafka topic name"), "{reason}");
    }
}
