//! From the file form to the domain model: defaults, ranges, names and cross-field rules. Pure:
//! no I/O, so the control plane, walctl and the services all validate the same way.

use std::time::Duration;

mod access;
mod destinations;
mod limits;
mod queues;
mod target;

use self::access::access;
pub use self::destinations::MAX_DESTINATIONS;
use self::destinations::destinations;
use self::limits::{
    delay_limits, durable_storage, in_range, payload_limit, rate_limit, retry_policy,
};
pub use self::queues::KAFKA_TOPIC_MAX;
use self::queues::{check_namespace_name, check_queue_names_distinct, storage_queues};
use self::target::{TargetPaths, check_target, netflix_target};

use crate::error::{ConfigErrors, Problems};
use crate::file::{NamespaceFile, PersistenceConfiguration, TargetFile};
use crate::model::{
    Backend, ConsumerSettings, DurableStorageConfig, Namespace, QueueConfig, TargetConfig,
};

/// Which spelling the file used, so error paths name fields as the user wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spelling {
    Snake,
    Camel,
}

impl Spelling {
    /// A field name given in snake case, in this spelling: `max_attempts` or `maxAttempts`.
    fn name(self, snake: &str) -> String {
        match self {
            Self::Snake => snake.to_owned(),
            Self::Camel => {
                let mut words = snake.split('_');
                let first = words.next().unwrap_or_default().to_owned();
                words.fold(first, |mut name, word| {
                    let mut letters = word.chars();
                    name.extend(letters.next().map(|c| c.to_ascii_uppercase()));
                    name.push_str(letters.as_str());
                    name
                })
            }
        }
    }
}

pub(crate) fn validate(
    file: NamespaceFile,
    origin: &str,
    spelling: Spelling,
) -> Result<Namespace, ConfigErrors> {
    let mut problems = Problems::new(origin);
    check_namespace_name(&mut problems, &file.namespace);

    let storages_path = format!(
        "{}.{}",
        spelling.name("persistence_configurations"),
        spelling.name("persistence_configuration")
    );
    let storages = &file.persistence_configurations.persistence_configuration;
    if storages.is_empty() {
        problems.add(
            &storages_path,
            "expected at least one persistence configuration, found an empty list",
        );
    }
    let mut shared = Shared::default();
    let mut queues = Vec::new();
    for (i, storage) in storages.iter().enumerate() {
        let path = format!("{storages_path}[{i}].config");
        queues.extend(storage_queues(&mut problems, &path, storage, spelling));
        shared.take(&mut problems, &path, storage, spelling);
    }
    check_queue_names_distinct(&mut problems, &storages_path, &queues);

    let default_target = default_target(
        &mut problems,
        spelling,
        file.default_target,
        shared.target,
        &queues,
    );

    let destinations = destinations(
        &mut problems,
        spelling,
        file.destinations,
        &queues,
        default_target.as_ref(),
    );

    let namespace = Namespace {
        name: file.namespace,
        queues,
        consumer: ConsumerSettings {
            stack: shared.consumer_stack,
            poll_wait: shared.poll_wait.unwrap_or(Duration::from_secs(10)),
            max_messages_per_poll: shared.max_messages_per_poll.unwrap_or(100),
        },
        retry: retry_policy(
            &mut problems,
            spelling,
            file.retry_policy.unwrap_or_default(),
        ),
        delay: delay_limits(
            &mut problems,
            spelling,
            file.delay_limits.unwrap_or_default(),
        ),
        payload_limit_bytes: payload_limit(&mut problems, spelling, file.payload_limit_bytes),
        rate_limit: rate_limit(&mut problems, spelling, file.rate_limit.unwrap_or_default()),
        default_target,
        durable_storage: shared.durable_storage,
        context: shared.context,
        contacts: shared.contacts,
        access: access(&mut problems, file.access.unwrap_or_default()),
        destinations,
    };
    problems.finish(namespace)
}

/// The namespace's default target: given at the top level or in a storage's config (not both),
/// and checked against the queues it is read from.
fn default_target(
    problems: &mut Problems<'_>,
    spelling: Spelling,
    given: Option<TargetFile>,
    in_storage: Option<(String, TargetConfig)>,
    queues: &[QueueConfig],
) -> Option<TargetConfig> {
    let (target_path, default_target) = match (given, in_storage) {
        (Some(_), Some((path, _))) => {
            problems.add(
                path,
                format!(
                    "the default target is given twice (also as {}); keep one",
                    spelling.name("default_target")
                ),
            );
            (String::new(), None)
        }
        (Some(target), None) => {
            let path = spelling.name("default_target");
            let paths = TargetPaths {
                kind: format!("{path}.kind"),
                settings: format!("{path}.settings"),
            };
            let target = check_target(problems, &paths, target);
            (paths.kind, target)
        }
        (None, Some((path, target))) => (format!("{path}.type"), Some(target)),
        (None, None) => (String::new(), None),
    };
    // An index reads a row's state before it writes: only a destination, which applies a key's
    // entries one at a time, keeps it exact.
    if default_target
        .as_ref()
        .is_some_and(|t| t.kind == wal_targets::Kind::Index)
    {
        problems.add(
            &target_path,
            "an index is kept by an index destination (destinations), which applies a row's writes one at a time; as the default target its writes would race. Keep the table as the default target and add the index as a destination",
        );
    }
    // Each destination region reads the namespace with a consumer group of its own; an SQS
    // message is received by one reader only.
    if default_target
        .as_ref()
        .is_some_and(|t| t.kind == wal_targets::Kind::Region)
        && queues.iter().any(|q| q.backend == Backend::Sqs)
    {
        problems.add(
            &target_path,
            "a region target replicates through one Kafka consumer group per destination region; expected the namespace's queues on KAFKA, found SQS",
        );
    }

    default_target
}

/// Settings that may appear in any storage's config but belong to the namespace as a whole.
#[derive(Debug, Default)]
struct Shared {
    consumer_stack: Option<String>,
    context: Option<String>,
    contacts: Option<String>,
    poll_wait: Option<Duration>,
    max_messages_per_poll: Option<u32>,
    target: Option<(String, TargetConfig)>,
    durable_storage: Option<DurableStorageConfig>,
}

impl Shared {
    fn take(
        &mut self,
        problems: &mut Problems<'_>,
        path: &str,
        storage: &PersistenceConfiguration,
        spelling: Spelling,
    ) {
        let config = &storage.config;
        self.consumer_stack = self.consumer_stack.take().or(config.consumer_stack.clone());
        self.context = self.context.take().or(config.context.clone());
        self.contacts = self.contacts.take().or(config.contacts.clone());
        if let Some(secs) = config.poll_interval_secs {
            let field = format!("{path}.queue.poll-interval.secs");
            let secs = in_range(problems, field, secs, 0..=20);
            self.poll_wait = Some(Duration::from_secs(secs));
        }
        if let Some(max) = config.max_messages_per_poll {
            let field = format!("{path}.queue.max-messages-per-poll");
            let max = in_range(problems, field, max, 1..=10_000);
            self.max_messages_per_poll = u32::try_from(max).ok();
        }
        if let Some(target) = &config.target {
            let target_path = format!("{path}.target");
            if let Some(parsed) = netflix_target(problems, &target_path, target) {
                if self.target.is_some() {
                    problems.add(
                        &target_path,
                        "the default target is given in two storages; keep one",
                    );
                } else {
                    self.target = Some((target_path, parsed));
                }
            }
        }
        if let Some(durable) = &config.durable_storage {
            let durable_path = format!("{path}.{}", spelling.name("durable_storage"));
            if self.durable_storage.is_some() {
                problems.add(
                    &durable_path,
                    "durable storage is given in two storages; keep one",
                );
            }
            self.durable_storage = durable_storage(problems, &durable_path, durable, spelling);
        }
    }
}
