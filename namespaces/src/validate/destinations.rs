//! A namespace's further destinations: each named once, each a target the consumer can deliver
//! to, each read from Kafka with a consumer group of its own.

use std::collections::BTreeSet;

use wal_targets::Kind;
use wal_targets::region::StartFrom;

use super::Spelling;
use super::target::{TargetPaths, check_target};
use crate::error::Problems;
use crate::file::{DestinationFile, StartFromFile};
use crate::model::{Backend, DEFAULT_DESTINATION, DestinationConfig, QueueConfig, TargetConfig};

/// The most destinations one namespace may name: each is a consumer group reading every entry,
/// so each multiplies the namespace's read load on its brokers.
pub const MAX_DESTINATIONS: usize = 8;
/// The longest destination name: it goes into consumer group names and metric labels.
const NAME_MAX: usize = 32;

pub(super) fn destinations(
    problems: &mut Problems<'_>,
    spelling: Spelling,
    given: Vec<DestinationFile>,
    queues: &[QueueConfig],
    default_target: Option<&TargetConfig>,
) -> Vec<DestinationConfig> {
    if given.is_empty() {
        return Vec::new();
    }
    if given.len() > MAX_DESTINATIONS {
        problems.add(
            "destinations",
            format!(
                "expected at most {MAX_DESTINATIONS} destinations (each is a consumer group reading every entry), found {}",
                given.len()
            ),
        );
    }
    // Each destination reads every entry with a consumer group of its own; an SQS message is
    // received by one reader only.
    if let Some(sqs) = queues.iter().find(|q| q.backend == Backend::Sqs) {
        problems.add(
            "destinations",
            format!(
                "each destination reads every entry with a Kafka consumer group of its own; expected the namespace's queues on KAFKA, found SQS queue '{}'",
                sqs.name
            ),
        );
    }
    let mut seen = BTreeSet::new();
    let mut configs = Vec::new();
    for (i, destination) in given.into_iter().enumerate() {
        let path = format!("destinations[{i}]");
        check_name(problems, &format!("{path}.name"), &destination.name);
        if !seen.insert(destination.name.clone()) {
            problems.add(
                format!("{path}.name"),
                format!(
                    "destination '{}' is named twice; each needs a name of its own",
                    destination.name
                ),
            );
        }
        let paths = TargetPaths {
            kind: format!("{path}.target.kind"),
            settings: format!("{path}.target.settings"),
        };
        let Some(target) = check_target(problems, &paths, destination.target) else {
            continue;
        };
        // The namespace's payloads are its default target's: a cache fed cql payloads must read
        // them as rows, or every entry would be dead-lettered there.
        let cql_payloads = default_target.is_some_and(|t| t.kind == Kind::Cql);
        if target.kind == Kind::Cache && cql_payloads && !target.settings.contains_key("rows") {
            problems.add(
                paths.settings.clone(),
                format!(
                    "the namespace's {} is cql, so its payloads are cql mutations; a cache destination needs \"rows\" (the key columns) to keep them",
                    spelling.name("default_target")
                ),
            );
        }
        if target.kind == Kind::Region {
            problems.add(
                paths.kind,
                format!(
                    "a destination delivers to one store; regions are replicated to through the namespace's {} (a region target), not as destinations",
                    spelling.name("default_target")
                ),
            );
            continue;
        }
        configs.push(DestinationConfig {
            name: destination.name,
            target,
            start_from: match destination.start_from {
                StartFromFile::Earliest => StartFrom::Earliest,
                StartFromFile::Now => StartFrom::Now,
            },
        });
    }
    configs
}

fn check_name(problems: &mut Problems<'_>, path: &str, name: &str) {
    if name == DEFAULT_DESTINATION {
        problems.add(
            path,
            format!("'{DEFAULT_DESTINATION}' is the namespace's own target's destination; choose another name"),
        );
        return;
    }
    if name.starts_with("region-") {
        problems.add(
            path,
            format!("{name:?} reads as a region's destination (region-<name>); choose a name without that prefix"),
        );
        return;
    }
    let mut chars = name.chars();
    let starts_well = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_well = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !starts_well || !rest_well || name.len() > NAME_MAX {
        problems.add(
            path,
            format!(
                "expected a lowercase letter, then lowercase letters, digits or '-', {NAME_MAX} characters at most; found {name:?}"
            ),
        );
    }
}
