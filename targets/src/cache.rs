//! The cache kind: sets and deletes in memcached.
//! Settings: `{"servers": ["host:port"], "ttl_seconds": 3600, "ttl_spread_seconds": 360}`, all
//! optional: servers default to the consumer's `--memcached`, the TTL to one hour, the spread to
//! a tenth of the TTL.

use serde::Deserialize;

use crate::json::JsonError;
use crate::{Kind, Settings};

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSettings {
    #[serde(default)]
    pub servers: Vec<String>,
    #[serde(default = "default_ttl")]
    pub ttl_seconds: u64,
    #[serde(default)]
    pub ttl_spread_seconds: Option<u64>,
}

fn default_ttl() -> u64 {
    3600
}

impl Settings for CacheSettings {
    const KIND: Kind = Kind::Cache;

    fn check(&self) -> Result<(), JsonError> {
        for (i, server) in self.servers.iter().enumerate() {
            // host:port only: the consumer's client resolves the text as an address.
            let valid = server
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !valid {
                return Err(JsonError::at(
                    format!("servers[{i}]"),
                    format!("{server:?} is not a memcached address; expected host:port"),
                ));
            }
        }
        Ok(())
    }
}
