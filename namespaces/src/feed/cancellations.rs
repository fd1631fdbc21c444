//! The entries an operator cancelled (the control plane's `Operations.CancelEntry`), as the
//! Watch stream last carried them: a consumer skips each before its next attempt.

use std::collections::{HashMap, HashSet};

/// The cancellations in force, by namespace: entry ids only, for the lookup a consumer makes
/// before every attempt (who cancelled and why are in the control plane's list and audit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cancellations {
    by: HashMap<String, HashSet<String>>,
}

impl Cancellations {
    pub fn from_proto(cancellations: &[wal_proto::v1::Cancellation]) -> Self {
        let mut by: HashMap<String, HashSet<String>> = HashMap::new();
        for c in cancellations {
            by.entry(c.namespace.clone())
                .or_default()
                .insert(c.entry_id.clone());
        }
        Self { by }
    }

    /// Whether entry `id` of `namespace` is cancelled: borrows both, allocates nothing.
    pub fn cancelled(&self, namespace: &str, id: &str) -> bool {
        self.by.get(namespace).is_some_and(|ids| ids.contains(id))
    }

    /// How many are in force, for logs.
    pub fn len(&self) -> usize {
        self.by.values().map(HashSet::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancellation(namespace: &str, entry_id: &str) -> wal_proto::v1::Cancellation {
        wal_proto::v1::Cancellation {
            namespace: namespace.to_owned(),
            entry_id: entry_id.to_owned(),
            ..Default::default()
        }
    }

    #[test]
    fn an_entry_is_cancelled_only_in_its_own_namespace() {
        let cancellations =
            Cancellations::from_proto(&[cancellation("orders", "a"), cancellation("orders", "b")]);
        assert!(cancellations.cancelled("orders", "a"));
        assert!(cancellations.cancelled("orders", "b"));
        assert!(!cancellations.cancelled("orders", "c"));
        assert!(!cancellations.cancelled("users", "a"));
        assert_eq!(cancellations.len(), 2);
        assert!(Cancellations::default().is_empty());
    }
}
