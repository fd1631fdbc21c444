//! The pauses an operator put on delivery (the control plane's `Operations.Pause`), as the
//! Watch stream last carried them. A folder of configs has none.

use std::collections::BTreeMap;

/// One pause: who made it, when, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    pub paused_by: String,
    pub paused_at_micros: i64,
    pub reason: String,
}

/// The pauses in force, by namespace then destination; the empty destination pauses the whole
/// namespace. Nested maps, so a consumer's lookup for each entry borrows its names rather than
/// allocating a key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pauses {
    by: BTreeMap<String, BTreeMap<String, Pause>>,
}

impl Pauses {
    pub fn from_proto(pauses: &[wal_proto::v1::Pause]) -> Self {
        let mut by: BTreeMap<String, BTreeMap<String, Pause>> = BTreeMap::new();
        for p in pauses {
            let pause = Pause {
                paused_by: p.paused_by.clone(),
                paused_at_micros: p.paused_at_micros,
                reason: p.reason.clone(),
            };
            by.entry(p.namespace.clone())
                .or_default()
                .insert(p.destination.clone(), pause);
        }
        Self { by }
    }

    /// The pause that holds `destination` of `namespace`, if any: the namespace's own first.
    pub fn holding(&self, namespace: &str, destination: &str) -> Option<&Pause> {
        let of_namespace = self.by.get(namespace)?;
        of_namespace
            .get("")
            .or_else(|| of_namespace.get(destination))
    }

    pub fn is_empty(&self) -> bool {
        self.by.is_empty()
    }

    /// `namespace` or `namespace/destination`, each paused one, for logs.
    pub fn names(&self) -> Vec<String> {
        let paused = self.by.iter().flat_map(|(namespace, destinations)| {
            destinations
                .keys()
                .map(move |destination| match destination.as_str() {
                    "" => namespace.clone(),
                    destination => format!("{namespace}/{destination}"),
                })
        });
        paused.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(namespace: &str, destination: &str) -> wal_proto::v1::Pause {
        wal_proto::v1::Pause {
            namespace: namespace.to_owned(),
            destination: destination.to_owned(),
            paused_by: "ops".to_owned(),
            paused_at_micros: 1,
            reason: "incident".to_owned(),
        }
    }

    #[test]
    fn a_namespace_pause_holds_every_destination_and_a_destination_pause_only_its_own() {
        let pauses = Pauses::from_proto(&[pause("orders", ""), pause("users", "events")]);
        assert!(pauses.holding("orders", "default").is_some());
        assert!(pauses.holding("orders", "region-eu").is_some());
        assert!(pauses.holding("users", "events").is_some());
        assert!(pauses.holding("users", "default").is_none());
        assert!(pauses.holding("other", "events").is_none());
        assert_eq!(pauses.names(), ["orders", "users/events"]);
    }
}
