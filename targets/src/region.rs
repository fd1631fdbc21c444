//! The region kind: cross-region replication. Each destination region has a writer
//! (`wal-writer`) that applies the replicated mutations to that region's cache or CQL table; the
//! consumer reads the namespace's topic once per destination region, each with a consumer group
//! of its own, and sends every entry to that region's writer. The process's own region (its
//! `--region`) is never a destination.
//!
//! Two spellings. Netflix's, as its `evc-replication` configs publish it: every field a region
//! and its writer's address,
//! ```json
//! {"useast1": "writer.us-east-1.example:50070", "euwest1": "writer.eu-west-1.example"}
//! ```
//! and the platform's, with per-region settings:
//! ```json
//! {"regions": {"euwest1": {"writer": "http://writer.eu-west-1.example:50070",
//!                          "enabled": true,
//!                          "apply": {"kind": "cql", "settings": {"keyspace": "app", "table": "users"}}}},
//!  "start_from": "earliest"}
//! ```
//! `apply` says where the destination's writer applies the mutations: a `cache` (the default,
//! with the writer's own `--memcached`) or a `cql` table. `start_from` is where a destination
//! that has never replicated starts: `earliest` (the default: everything the topic still holds,
//! so a new region's cache converges to the source's last writes) or `now`. A writer address is
//! `host`, `host:port` or `http(s)://host:port`; the port defaults to [`WRITER_PORT`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::json::JsonError;
use crate::{Kind, Settings};

/// The port a writer address without one means (`wal-writer --listen`'s default port).
pub const WRITER_PORT: u16 = 50070;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct RegionSettings {
    /// The destinations, by region name (the platform's spelling).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub regions: BTreeMap<String, Destination>,
    #[serde(default)]
    pub start_from: StartFrom,
    /// Netflix's spelling: region name -> writer address, beside `type`.
    #[serde(flatten, skip_serializing)]
    pub endpoints: BTreeMap<String, String>,
}

/// One destination region.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Destination {
    /// The region's writer: `host`, `host:port` or `http(s)://host:port`.
    pub writer: String,
    /// A disabled region is not replicated to (its consumer group stops; its position stays).
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Where the region's writer applies the mutations; a cache by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply: Option<ApplyTarget>,
}

/// The target a destination's writer applies replicated mutations to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyTarget {
    pub kind: String,
    #[serde(default)]
    pub settings: Map<String, Value>,
}

/// Where a destination's consumer group starts the first time it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StartFrom {
    /// Everything the topic still holds.
    #[default]
    Earliest,
    /// Only what is written from now on.
    Now,
}

fn enabled() -> bool {
    true
}

/// The kinds a writer applies to: stores that do not replicate themselves. (A kafka or http
/// target would publish the mutation on; a region target would replicate it again.)
pub const APPLY_KINDS: [Kind; 2] = [Kind::Cache, Kind::Cql];

impl RegionSettings {
    /// Every destination, enabled or not, in either spelling, by region name.
    pub fn destinations(&self) -> BTreeMap<String, Destination> {
        let mut all = self.regions.clone();
        for (region, writer) in &self.endpoints {
            all.insert(
                region.clone(),
                Destination {
                    writer: writer.clone(),
                    enabled: true,
                    apply: None,
                },
            );
        }
        all
    }

    /// The enabled destinations other than `local`, the process's own region.
    pub fn destinations_from(&self, local: &str) -> BTreeMap<String, Destination> {
        self.destinations()
            .into_iter()
            .filter(|(region, destination)| destination.enabled && !same_region(region, local))
            .collect()
    }

    /// Settings naming `region` alone, in the platform's spelling: what one destination's
    /// consumer group delivers with.
    pub fn only(region: &str, destination: &Destination, start_from: StartFrom) -> Self {
        Self {
            regions: BTreeMap::from([(region.to_owned(), destination.clone())]),
            start_from,
            endpoints: BTreeMap::new(),
        }
    }

    /// These settings as JSON text, as an entry's target carries them.
    pub fn to_json(&self) -> String {
        // Strings, booleans and maps of them: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Destination {
    /// The writer's URI for a gRPC client: `http://host:port` unless a scheme was given.
    pub fn writer_uri(&self) -> String {
        let address = self.writer.trim_end_matches('/');
        let (scheme, rest) = match address.split_once("://") {
            Some((scheme, rest)) => (scheme, rest),
            None => ("http", address),
        };
        let has_port = rest
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.parse::<u16>().is_ok());
        if has_port {
            format!("{scheme}://{rest}")
        } else {
            format!("{scheme}://{rest}:{WRITER_PORT}")
        }
    }

    /// The target the writer applies to, as an entry carries it: `apply`, else a cache with
    /// the writer's servers.
    pub fn apply_target(&self) -> (Kind, String) {
        match &self.apply {
            Some(apply) => (
                Kind::from_name(&apply.kind).unwrap_or(Kind::Cache),
                Value::Object(apply.settings.clone()).to_string(),
            ),
            None => (Kind::Cache, "{}".to_owned()),
        }
    }
}

/// Whether two region names are the same region: case, `-` and `_` aside, so Netflix's
/// `useast1` is the producer's `us-east-1`.
pub fn same_region(a: &str, b: &str) -> bool {
    // Compared as it goes, without a copy: it runs for every replicated entry.
    fn plain(s: &str) -> impl Iterator<Item = u8> + '_ {
        s.bytes()
            .filter(|c| *c != b'-' && *c != b'_')
            .map(|c| c.to_ascii_lowercase())
    }
    plain(a).eq(plain(b))
}

impl Settings for RegionSettings {
    const KIND: Kind = Kind::Region;

    fn check(&self) -> Result<(), JsonError> {
        if !self.regions.is_empty()
            && let Some(field) = self.endpoints.keys().next()
        {
            return Err(JsonError::at(
                field,
                format!(
                    "unknown field `{field}`; with `regions`, expected only `regions` and `start_from`"
                ),
            ));
        }
        let destinations = self.destinations();
        if destinations.is_empty() {
            return Err(JsonError::at(
                ".",
                "no destination region; expected `regions` or region names with writer addresses",
            ));
        }
        for (region, destination) in &destinations {
            let path = if self.regions.contains_key(region) {
                format!("regions.{region}")
            } else {
                region.clone()
            };
            if region.is_empty()
                || region.len() > 64
                || !region
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(JsonError::at(
                    &path,
                    format!(
                        "{region:?} is not a region name; expected letters, digits, '-' and '_' (at most 64)"
                    ),
                ));
            }
            check_writer(&destination.writer).map_err(|reason| {
                let at = if self.regions.contains_key(region) {
                    format!("{path}.writer")
                } else {
                    path.clone()
                };
                JsonError::at(at, reason)
            })?;
            if let Some(apply) = &destination.apply {
                let at = format!("{path}.apply");
                let kind = Kind::from_name(&apply.kind)
                    .ok()
                    .filter(|kind| APPLY_KINDS.contains(kind))
                    .ok_or_else(|| {
                        JsonError::at(
                            format!("{at}.kind"),
                            format!(
                                "{:?} is not a kind a writer applies to; expected cache or cql",
                                apply.kind
                            ),
                        )
                    })?;
                let settings = Value::Object(apply.settings.clone()).to_string();
                if let Err(refusal) = kind.check(&settings) {
                    return Err(JsonError::at(format!("{at}.settings"), refusal.to_string()));
                }
            }
        }
        Ok(())
    }
}

/// A writer address: `host`, `host:port` or `http(s)://host:port`, nothing more.
fn check_writer(writer: &str) -> Result<(), String> {
    let expected = "expected host, host:port or http(s)://host:port";
    let rest = match writer.split_once("://") {
        Some(("http" | "https", rest)) => rest,
        Some((scheme, _)) => {
            return Err(format!(
                "{writer:?} has scheme '{scheme}'; expected http or https"
            ));
        }
        None => writer,
    };
    let rest = rest.trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (rest, None),
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(format!("{writer:?} is not a writer address; {expected}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    #[test]
    fn netflix_flat_spelling_names_regions_and_writers() {
        let settings: RegionSettings = parse(
            r#"{"useast1": "dgwwal.foobar.cluster.us-east-1.netflix.net",
                "euwest1": "10.0.0.7:6000"}"#,
        )
        .unwrap();
        let destinations = settings.destinations_from("us-east-1");
        assert_eq!(destinations.keys().collect::<Vec<_>>(), ["euwest1"]);
        assert_eq!(destinations["euwest1"].writer_uri(), "http://10.0.0.7:6000");
        assert_eq!(settings.start_from, StartFrom::Earliest);
        let east = &settings.destinations()["useast1"];
        assert_eq!(
            east.writer_uri(),
            "http://dgwwal.foobar.cluster.us-east-1.netflix.net:50070"
        );
        assert_eq!(east.apply_target(), (Kind::Cache, "{}".to_owned()));
    }

    #[test]
    fn one_region_alone_round_trips() {
        let settings: RegionSettings = parse(
            r#"{"regions": {"b": {"writer": "127.0.0.1:1", "apply": {"kind": "cql", "settings": {"keyspace": "k", "table": "t"}}},
                            "c": {"writer": "https://c.example", "enabled": false}},
                "start_from": "now"}"#,
        )
        .unwrap();
        assert_eq!(settings.destinations_from("a").len(), 1, "c is disabled");
        let b = &settings.regions["b"];
        let only = RegionSettings::only("b", b, settings.start_from);
        let back: RegionSettings = parse(&only.to_json()).unwrap();
        assert_eq!(back, only);
        assert_eq!(
            b.apply_target(),
            (Kind::Cql, r#"{"keyspace":"k","table":"t"}"#.to_owned())
        );
    }

    #[test]
    fn mistakes_are_named_where_they_are() {
        let refused = |json: &str| match parse::<RegionSettings>(json) {
            Err(refusal) => refusal.to_string(),
            Ok(settings) => panic!("accepted {settings:?}"),
        };
        let empty = refused("{}");
        assert!(empty.contains("no destination region"), "{empty}");
        let scheme = refused(r#"{"b": "ftp://x"}"#);
        assert!(
            scheme.contains("at 'b'") && scheme.contains("expected http or https"),
            "{scheme}"
        );
        let port = refused(r#"{"regions": {"b": {"writer": "x:99999"}}}"#);
        assert!(port.contains("at 'regions.b.writer'"), "{port}");
        let mixed = refused(r#"{"regions": {"b": {"writer": "x"}}, "start_form": "now"}"#);
        assert!(
            mixed.contains("at 'start_form'") && mixed.contains("unknown field"),
            "{mixed}"
        );
        let kind = refused(r#"{"regions": {"b": {"writer": "x", "apply": {"kind": "kafka"}}}}"#);
        assert!(
            kind.contains("at 'regions.b.apply.kind'") && kind.contains("expected cache or cql"),
            "{kind}"
        );
        let cql = refused(
            r#"{"regions": {"b": {"writer": "x", "apply": {"kind": "cql", "settings": {"keyspace": "k"}}}}}"#,
        );
        assert!(
            cql.contains("at 'regions.b.apply.settings'") && cql.contains("table"),
            "{cql}"
        );
        let typo = refused(r#"{"regions": {"b": {"writer": "x", "enabeld": false}}}"#);
        assert!(typo.contains("unknown field `enabeld`"), "{typo}");
        let start = refused(r#"{"b": "x", "start_from": "yesterday"}"#);
        assert!(start.contains("start_from"), "{start}");
    }

    #[test]
    fn region_names_match_across_spellings() {
        assert!(same_region("useast1", "us-east-1"));
        assert!(same_region("US_EAST_1", "useast1"));
        assert!(!same_region("useast1", "useast2"));
    }
}
