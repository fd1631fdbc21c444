//! What operators told the running platform through the control plane, apart from the
//! namespace configs: the pauses and the cancellations in force, as one Watch snapshot carries
//! them. They change without a new config, so no consumer crew is rebuilt for them.

use super::cancellations::Cancellations;
use super::pauses::Pauses;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directives {
    pub pauses: Pauses,
    pub cancellations: Cancellations,
}

impl Directives {
    pub fn from_snapshot(snapshot: &wal_proto::v1::NamespaceSnapshot) -> Self {
        Self {
            pauses: Pauses::from_proto(&snapshot.pauses),
            cancellations: Cancellations::from_proto(&snapshot.cancellations),
        }
    }
}
